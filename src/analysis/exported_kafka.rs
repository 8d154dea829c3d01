//! The exporters' Kafka series (issue 44): per device, Kafka role and
//! consumer group, the bytes, data segments and retransmits summed since
//! the exporter started, and the last interval's queuing delay, kept by
//! the judging unit with the rest of [`super::exported::Exported`] from the
//! analysis's sums (`IntervalAnalysis::kafka`, kafka_roles.rs). Pure.
//!
//! Bounded: Kafka's group ids are the clients' to choose, and a cluster
//! may have thousands. Per device at most [`KAFKA_TOP_GROUPS`] groups are
//! named (`kafka_group`); the traffic of every other group is summed under
//! [`OTHER_GROUPS`], and how many groups were so folded in the last interval
//! is a series of its own. A group is named from the first interval it
//! moves bytes while a name is free, the interval's largest groups first;
//! it keeps its name while it moves bytes. When no name is free, a new
//! group takes the name of the named group idle longest (idle: no bytes in
//! this interval), whose series then go (if it comes back it starts again
//! from 0, which Prometheus reads as a counter reset); with every named
//! group busy, the new one is folded. So every series counts up, and the
//! series are at most 7 roles times [`KAFKA_TOP_GROUPS`] + 2 group labels
//! (named, folded, none) per device. Client ids are not labelled (as
//! unbounded as groups, and `--json` has them).

use std::collections::BTreeMap;

use super::kafka_roles::KafkaRoleSum;
use crate::model::kafka::KafkaRole;

/// Consumer groups named per device in the exporters' series.
pub const KAFKA_TOP_GROUPS: usize = 10;
const _: () = assert!(
    KAFKA_TOP_GROUPS == 10,
    "the exporters' help texts and docs/metrics.md say 10"
);
/// The `kafka_group` of the groups not named. A group really called so is
/// never named (always folded), so the two cannot be mixed.
pub const OTHER_GROUPS: &str = "~other";

/// One (device, role, group) series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KafkaSeries {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub data_segs_out: u64,
    pub retrans_segs: u64,
    /// Last interval's queuing delay (srtt over min RTT, weighted by bytes
    /// sent), microseconds; None when the series sent nothing then.
    pub delay_us: Option<u64>,
}

/// Series key: the device, the role, the group label ("" for flows of no
/// group: not consumers, or consumers of ambiguous groups).
pub type KafkaKey = (String, KafkaRole, String);

/// Every device's Kafka series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KafkaExported {
    pub series: BTreeMap<KafkaKey, KafkaSeries>,
    /// Per device, the groups folded into [`OTHER_GROUPS`] in the last
    /// interval (0 when every group that moved bytes was named).
    pub folded_groups: BTreeMap<String, u64>,
    /// Per device, the named groups and the interval each last moved bytes.
    named: BTreeMap<String, BTreeMap<String, u64>>,
    /// Intervals taken in.
    intervals: u64,
}

impl KafkaExported {
    /// Takes in one interval's sums; `devices`: the interfaces of the
    /// interval (others' series are dropped, as their devices are).
    pub fn apply(&mut self, devices: &[&str], rows: &[KafkaRoleSum]) {
        self.intervals += 1;
        let now = self.intervals;
        self.series.retain(|k, _| devices.contains(&k.0.as_str()));
        self.named.retain(|d, _| devices.contains(&d.as_str()));
        self.folded_groups.clear();
        for s in self.series.values_mut() {
            s.delay_us = None;
        }
        for dev in devices {
            let rows: Vec<&KafkaRoleSum> = rows.iter().filter(|r| r.iface == *dev).collect();
            if rows.is_empty() {
                continue;
            }
            // This interval's groups by bytes, largest first.
            let mut bytes: BTreeMap<&str, u64> = BTreeMap::new();
            for r in &rows {
                if let Some(g) = &r.who.group {
                    *bytes.entry(g.as_str()).or_default() += r.bytes_sent + r.bytes_received;
                }
            }
            let mut groups: Vec<(&str, u64)> = bytes.into_iter().filter(|g| g.1 > 0).collect();
            groups.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            let named = self.named.entry(dev.to_string()).or_default();
            // Named groups that moved bytes are busy this interval, before
            // any new group looks for an idle one.
            for &(g, _) in &groups {
                if let Some(seen) = named.get_mut(g) {
                    *seen = now;
                }
            }
            let mut folded = 0;
            for &(g, _) in &groups {
                if named.contains_key(g) {
                    continue;
                }
                if g == OTHER_GROUPS {
                    folded += 1;
                    continue;
                }
                if named.len() >= KAFKA_TOP_GROUPS {
                    // The named group idle longest, if one is idle.
                    let idle = named
                        .iter()
                        .filter(|(_, &seen)| seen < now)
                        .min_by_key(|(name, &seen)| (seen, name.to_string()))
                        .map(|(name, _)| name.clone());
                    let Some(idle) = idle else {
                        folded += 1;
                        continue;
                    };
                    named.remove(&idle);
                    self.series.retain(|k, _| !(k.0 == *dev && k.2 == idle));
                }
                named.insert(g.to_string(), now);
            }
            self.folded_groups.insert(dev.to_string(), folded);
            // The rows into their series, the delay weighted by bytes sent.
            let mut weights: BTreeMap<KafkaKey, f64> = BTreeMap::new();
            for r in rows {
                let label = match &r.who.group {
                    None => String::new(),
                    Some(g) if named.contains_key(g) => g.clone(),
                    Some(_) => OTHER_GROUPS.to_string(),
                };
                let key = (dev.to_string(), r.who.role, label);
                let s = self.series.entry(key.clone()).or_default();
                s.bytes_sent += r.bytes_sent;
                s.bytes_received += r.bytes_received;
                s.data_segs_out += r.data_segs_out;
                s.retrans_segs += r.retrans_segs;
                if let Some(d) = r.delay_us {
                    let w = weights.entry(key).or_default();
                    let sent = r.bytes_sent.max(1) as f64;
                    let prev = s.delay_us.unwrap_or(0) as f64 * *w;
                    *w += sent;
                    s.delay_us = Some(((prev + d as f64 * sent) / *w).round() as u64);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(iface: &str, role: KafkaRole, group: Option<&str>, sent: u64) -> KafkaRoleSum {
        KafkaRoleSum::example(iface, role, group, sent, 1)
    }

    fn groups(e: &KafkaExported) -> Vec<String> {
        let mut g: Vec<String> = e.series.keys().map(|k| k.2.clone()).collect();
        g.dedup();
        g
    }

    /// With thousands of groups the series stay at most
    /// KAFKA_TOP_GROUPS named groups plus the folded one (and no group),
    /// the largest named, the rest summed under OTHER_GROUPS: no byte lost.
    #[test]
    fn groups_past_the_bound_are_folded_into_one_series() {
        let mut e = KafkaExported::default();
        let mut rows: Vec<KafkaRoleSum> = (0..1000)
            .map(|i| {
                let g = format!("group-{i:04}");
                row("eth0", KafkaRole::Consume, Some(&g), 1000 + i)
            })
            .collect();
        rows.push(row("eth0", KafkaRole::ReplicationToFollower, None, 5));
        e.apply(&["eth0"], &rows);
        assert_eq!(e.series.len(), KAFKA_TOP_GROUPS + 2, "{:?}", groups(&e));
        assert_eq!(e.folded_groups["eth0"], 990);
        let consume = |g: &str| &e.series[&("eth0".into(), KafkaRole::Consume, g.into())];
        // The largest ten are named.
        assert_eq!(consume("group-0999").bytes_sent, 1999);
        assert_eq!(consume("group-0990").bytes_sent, 1990);
        assert!(!e
            .series
            .contains_key(&("eth0".into(), KafkaRole::Consume, "group-0989".into())));
        let total: u64 = rows.iter().map(|r| r.bytes_sent).sum();
        let exported: u64 = e.series.values().map(|s| s.bytes_sent).sum();
        assert_eq!(exported, total);
        assert_eq!(consume(OTHER_GROUPS).delay_us, Some(100));
        // A thousand other groups the next interval: still bounded, and the
        // series count up.
        let next: Vec<KafkaRoleSum> = (0..1000)
            .map(|i| {
                let g = format!("next-{i:04}");
                row("eth0", KafkaRole::Consume, Some(&g), 10)
            })
            .collect();
        let before = consume(OTHER_GROUPS).bytes_sent;
        e.apply(&["eth0"], &next);
        assert!(e.series.len() <= KAFKA_TOP_GROUPS + 2, "{:?}", groups(&e));
        let other = &e.series[&("eth0".into(), KafkaRole::Consume, OTHER_GROUPS.into())];
        assert_eq!(other.bytes_sent, before + 990 * 10);
    }

    /// A named group keeps its series while it moves bytes; an idle one
    /// gives its name to a new group; a group called `~other` is folded.
    #[test]
    fn a_busy_group_keeps_its_name_and_an_idle_one_gives_it_up() {
        let mut e = KafkaExported::default();
        let busy: Vec<KafkaRoleSum> = (0..KAFKA_TOP_GROUPS)
            .map(|i| row("eth0", KafkaRole::Consume, Some(&format!("g{i}")), 100))
            .collect();
        e.apply(&["eth0"], &busy);
        let mut second = busy.clone();
        second.push(row("eth0", KafkaRole::Consume, Some("late"), 1_000_000));
        second.push(row("eth0", KafkaRole::Consume, Some(OTHER_GROUPS), 1));
        e.apply(&["eth0"], &second);
        assert_eq!(e.folded_groups["eth0"], 2);
        assert!(!groups(&e).contains(&"late".to_string()));
        assert_eq!(
            e.series[&("eth0".into(), KafkaRole::Consume, "g0".into())].bytes_sent,
            200
        );
        // g0 idle: late takes its name, g0's series go.
        let third: Vec<KafkaRoleSum> = second
            .into_iter()
            .filter(|r| r.who.group.as_deref() != Some("g0"))
            .collect();
        e.apply(&["eth0"], &third);
        let g = groups(&e);
        assert!(
            g.contains(&"late".to_string()) && !g.contains(&"g0".to_string()),
            "{g:?}"
        );
        assert_eq!(e.folded_groups["eth0"], 1);
        // A device gone takes its series with it.
        e.apply(&["eth1"], &[]);
        assert!(e.series.is_empty());
    }
}
