//! Who used the allowance, by Kafka role and consumer group (issue 44), as
//! the report tells it: the analysis's sums per interval
//! (`IntervalAnalysis::kafka`, src/analysis/kafka_roles.rs) added up per
//! episode and per interface, and the one line the text and HTML reports
//! print of them. Bounded as the exporters are: at most
//! [`KAFKA_TOP_GROUPS`] groups named per episode or interface, the rest
//! summed under [`OTHER_GROUPS`].

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::analysis::exported_kafka::{KAFKA_TOP_GROUPS, OTHER_GROUPS};
use crate::analysis::kafka_roles::KafkaRoleSum;
use crate::model::kafka::{KafkaFilter, KafkaRole};
use crate::shared::units;

/// The traffic of one Kafka role (and group, for consumers) over an
/// episode or the report's span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KafkaUse {
    pub role: KafkaRole,
    /// The consumer group; `~other` for the groups past the bound; absent
    /// for other roles and consumers of ambiguous groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub retrans_segs: u64,
}

/// Sums of one episode or interface, bounded.
#[derive(Debug, Clone, Default)]
pub(crate) struct KafkaAcc {
    by: BTreeMap<(KafkaRole, Option<String>), KafkaUse>,
    named: BTreeSet<String>,
}

impl KafkaAcc {
    /// Adds the interval's rows of `iface` that `filter` keeps.
    pub(crate) fn add(&mut self, rows: &[KafkaRoleSum], iface: &str, filter: &KafkaFilter) {
        for r in rows
            .iter()
            .filter(|r| r.iface == iface && filter.keeps_identity(&r.who))
        {
            // Groups are named as they come, up to the bound.
            let group = r.who.group.as_ref().map(|g| {
                if self.named.contains(g) {
                    g.clone()
                } else if self.named.len() < KAFKA_TOP_GROUPS && g != OTHER_GROUPS {
                    self.named.insert(g.clone());
                    g.clone()
                } else {
                    OTHER_GROUPS.to_string()
                }
            });
            let u = self
                .by
                .entry((r.who.role, group.clone()))
                .or_insert_with(|| KafkaUse {
                    role: r.who.role,
                    group,
                    bytes_sent: 0,
                    bytes_received: 0,
                    retrans_segs: 0,
                });
            u.bytes_sent += r.bytes_sent;
            u.bytes_received += r.bytes_received;
            u.retrans_segs += r.retrans_segs;
        }
    }

    /// Adds rows already kept (of one interface).
    pub(crate) fn add_all(&mut self, rows: &[KafkaRoleSum]) {
        for r in rows {
            self.add(std::slice::from_ref(r), &r.iface, &KafkaFilter::default());
        }
    }

    /// The sums, by bytes sent and received, largest first.
    pub(crate) fn finish(&self) -> Vec<KafkaUse> {
        let mut v: Vec<KafkaUse> = self.by.values().cloned().collect();
        v.sort_by_key(|u| std::cmp::Reverse(u.bytes_sent + u.bytes_received));
        v
    }
}

/// One use's words: `consume group orders`, `replication to followers`.
fn name(u: &KafkaUse) -> String {
    let role = match u.role {
        KafkaRole::ReplicationToFollower => "replication to followers".to_string(),
        KafkaRole::ReplicationFromLeader => "replication from leaders".to_string(),
        r => r.as_str().replace('_', " "),
    };
    match &u.group {
        Some(g) if g == OTHER_GROUPS => format!("{role} (other groups)"),
        Some(g) => format!("{role} group {}", crate::shared::terminal_text::inert(g)),
        None => role,
    }
}

/// The views' by-role line of one interval: the interface whose flows
/// Kafka named carried the most bytes, and its [`line`].
pub(crate) fn interval_line(rows: &[KafkaRoleSum]) -> Option<String> {
    let mut by_iface: BTreeMap<&str, u64> = BTreeMap::new();
    for r in rows {
        *by_iface.entry(r.iface.as_str()).or_default() += r.bytes_sent + r.bytes_received;
    }
    let (iface, _) = by_iface.into_iter().max_by_key(|(_, b)| *b)?;
    let mut acc = KafkaAcc::default();
    acc.add(rows, iface, &KafkaFilter::default());
    Some(format!(
        "kafka on {}: {}",
        crate::shared::terminal_text::inert(iface),
        line(&acc.finish())?
    ))
}

/// Which roles and groups carried the bytes each way, the three largest
/// with their share of the Kafka-named bytes:
/// `tx: consume group orders 99.9% (1.2GB), controller 0.1%; rx: produce 99.4% (...)`.
/// None when no flow had a Kafka identity.
pub(crate) fn line(uses: &[KafkaUse]) -> Option<String> {
    let mut parts = Vec::new();
    for (dir, bytes) in [
        ("tx", (|u: &KafkaUse| u.bytes_sent) as fn(&KafkaUse) -> u64),
        ("rx", |u: &KafkaUse| u.bytes_received),
    ] {
        let total: u64 = uses.iter().map(bytes).sum();
        if total == 0 {
            continue;
        }
        let mut v: Vec<&KafkaUse> = uses.iter().filter(|u| bytes(u) > 0).collect();
        v.sort_by(|a, b| bytes(b).cmp(&bytes(a)).then(name(a).cmp(&name(b))));
        let mut words: Vec<String> = v
            .iter()
            .take(3)
            .enumerate()
            .map(|(i, u)| {
                let pct = units::pct(bytes(u) as f64 * 100.0 / total as f64);
                if i == 0 {
                    format!("{} {pct} ({})", name(u), units::bytes(bytes(u)))
                } else {
                    format!("{} {pct}", name(u))
                }
            })
            .collect();
        if v.len() > 3 {
            words.push(format!("{} more", v.len() - 3));
        }
        parts.push(format!("{dir}: {}", words.join(", ")));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(role: KafkaRole, group: Option<&str>, sent: u64, received: u64) -> KafkaRoleSum {
        KafkaRoleSum::example("eth0", role, group, sent, received)
    }

    #[test]
    fn the_line_names_the_roles_and_groups_each_way() {
        let mut acc = KafkaAcc::default();
        let rows = vec![
            row(KafkaRole::Consume, Some("orders"), 9_000_000, 10_000),
            row(KafkaRole::ReplicationToFollower, None, 1_000_000, 0),
            row(KafkaRole::Produce, None, 0, 4_990_000),
            row(KafkaRole::Controller, None, 0, 0),
        ];
        acc.add(&rows, "eth0", &KafkaFilter::default());
        acc.add(&rows, "eth1", &KafkaFilter::default());
        let uses = acc.finish();
        assert_eq!(uses[0].bytes_sent, 9_000_000);
        assert_eq!(
            line(&uses).unwrap(),
            "tx: consume group orders 90.0% (9.00MB), replication to followers 10.0%; \
             rx: produce 99.8% (4.99MB), consume group orders 0.200%"
        );
        assert_eq!(line(&[]), None);
        // A filter keeps its role only.
        let mut acc = KafkaAcc::default();
        let only = KafkaFilter::new(&["produce".into()], &[]).unwrap();
        acc.add(&rows, "eth0", &only);
        assert_eq!(line(&acc.finish()).unwrap(), "rx: produce 100% (4.99MB)");
    }

    /// Thousands of groups over a span: ten named, the rest summed.
    #[test]
    fn groups_past_the_bound_are_summed_as_other_groups() {
        let mut acc = KafkaAcc::default();
        let rows: Vec<KafkaRoleSum> = (0..300)
            .map(|i| row(KafkaRole::Consume, Some(&format!("g{i}")), 1000, 0))
            .collect();
        acc.add(&rows, "eth0", &KafkaFilter::default());
        let uses = acc.finish();
        assert_eq!(uses.len(), KAFKA_TOP_GROUPS + 1);
        let other = uses
            .iter()
            .find(|u| u.group.as_deref() == Some(OTHER_GROUPS))
            .unwrap();
        assert_eq!(other.bytes_sent, 290 * 1000);
        assert!(line(&uses)
            .unwrap()
            .contains("consume (other groups) 96.7%"));
    }
}
