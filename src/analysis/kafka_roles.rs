//! Who used the allowance, by Kafka role (issue 44): per interface, the
//! interval's bytes, segments, retransmits and queuing delay of the flows
//! summed by their Kafka identity (`FlowSample::kafka`, src/model/kafka.rs),
//! and the evidence line a hypervisor verdict gets naming the role that
//! carried most of the traffic in the deciding direction. Pure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::outcome::{Evidence, InterfaceVerdict, Verdict};
use super::signal::Signal;
use crate::model::kafka::{KafkaIdentity, KafkaRole};
use crate::model::snapshot::Snapshot;
use crate::shared::units;

/// One (interface, role, broker, group, client) of an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KafkaRoleSum {
    pub iface: String,
    /// The flows' role, broker, group and client id (in JSON, fields of
    /// the sum, as of a flow's `kafka`).
    #[serde(flatten)]
    pub who: KafkaIdentity,
    /// The flows could not be given to one group or client (two on a host):
    /// their bytes are here, under no group.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ambiguous: bool,
    pub flows: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub data_segs_out: u64,
    /// Retransmits that may have repaired a loss (spurious ones apart).
    pub retrans_segs: u64,
    /// Queuing delay: srtt over the path's min RTT, the mean over the flows
    /// weighted by bytes sent, in microseconds; None when no flow sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_us: Option<u64>,
}

#[cfg(test)]
impl KafkaRoleSum {
    /// For unit tests: one flow of `role` (and `group`) on `iface` that
    /// sent and received so many bytes, a segment a kB, one retransmit and
    /// 100 us of queuing delay.
    pub(crate) fn example(
        iface: &str,
        role: KafkaRole,
        group: Option<&str>,
        sent: u64,
        received: u64,
    ) -> Self {
        KafkaRoleSum {
            iface: iface.into(),
            who: KafkaIdentity {
                group: group.map(String::from),
                ..KafkaIdentity::role(role)
            },
            ambiguous: false,
            flows: 1,
            bytes_sent: sent,
            bytes_received: received,
            data_segs_out: sent / 1000,
            retrans_segs: 1,
            delay_us: Some(100),
        }
    }
}

/// The interval's sums per interface and Kafka identity, the interfaces in
/// the snapshot's order, each by bytes sent then received, largest first.
/// Empty when no flow has a Kafka identity.
pub(crate) fn sums(snap: &Snapshot) -> Vec<KafkaRoleSum> {
    if snap.flows.iter().all(|f| f.kafka.is_none()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for iface in &snap.interfaces {
        let mut by: BTreeMap<(&KafkaIdentity, bool), (KafkaRoleSum, f64)> = BTreeMap::new();
        for f in snap.flows.iter().filter(|f| f.counts_for(&iface.name)) {
            let Some(k) = &f.kafka else { continue };
            let ambiguous = !k.ambiguous.is_empty();
            let (s, delay_weight) = by.entry((&k.who, ambiguous)).or_insert_with(|| {
                (
                    KafkaRoleSum {
                        iface: iface.name.clone(),
                        who: k.who.clone(),
                        ambiguous,
                        flows: 0,
                        bytes_sent: 0,
                        bytes_received: 0,
                        data_segs_out: 0,
                        retrans_segs: 0,
                        delay_us: None,
                    },
                    0.0,
                )
            });
            s.flows += 1;
            s.bytes_sent += f.delta.bytes_sent;
            s.bytes_received += f.delta.bytes_received;
            s.data_segs_out += f.delta.data_segs_out;
            s.retrans_segs += f.delta.lossy_retransmits();
            if f.delta.bytes_sent > 0 && f.min_rtt_us > 0 {
                let srtt = f.srtt_mean_us.unwrap_or(f.srtt_us);
                let d = srtt.saturating_sub(f.min_rtt_us) as f64;
                let w = f.delta.bytes_sent as f64;
                let prev = s.delay_us.unwrap_or(0) as f64 * *delay_weight;
                *delay_weight += w;
                s.delay_us = Some(((prev + d * w) / *delay_weight).round() as u64);
            }
        }
        let mut rows: Vec<KafkaRoleSum> = by.into_values().map(|(s, _)| s).collect();
        rows.sort_by(|a, b| {
            (b.bytes_sent, b.bytes_received).cmp(&(a.bytes_sent, a.bytes_received))
        });
        out.extend(rows);
    }
    out
}

/// The evidence line of a hypervisor verdict on `v.iface`: the role that
/// carried the largest share of the deciding direction's bytes (of every
/// flow on the interface, Kafka's or not), its brokers or groups named.
/// None for other verdicts, or when no flow of the interval has a Kafka
/// identity or moved bytes that way.
pub(crate) fn evidence(
    v: &InterfaceVerdict,
    snap: &Snapshot,
    rows: &[KafkaRoleSum],
) -> Option<Evidence> {
    if !matches!(
        v.verdict,
        Verdict::HypervisorQueuing
            | Verdict::HypervisorDrop
            | Verdict::HypervisorCap
            | Verdict::PpsLimit
    ) {
        return None;
    }
    let inbound = v
        .evidence
        .first()
        .is_some_and(|e| Signal::BwInAllowancePct.is(e));
    let bytes = |sent: u64, received: u64| if inbound { received } else { sent };
    let total: u64 = snap
        .flows
        .iter()
        .filter(|f| f.counts_for(&v.iface))
        .map(|f| bytes(f.delta.bytes_sent, f.delta.bytes_received))
        .sum();
    if total == 0 {
        return None;
    }
    let rows: Vec<&KafkaRoleSum> = rows.iter().filter(|r| r.iface == v.iface).collect();
    let mut by_role: BTreeMap<KafkaRole, u64> = BTreeMap::new();
    for r in &rows {
        *by_role.entry(r.who.role).or_default() += bytes(r.bytes_sent, r.bytes_received);
    }
    let (&role, &top) = by_role.iter().max_by_key(|(_, b)| **b)?;
    if top == 0 {
        return None;
    }
    let pct = top as f64 * 100.0 / total as f64;
    let of_role: Vec<&&KafkaRoleSum> = rows.iter().filter(|r| r.who.role == role).collect();
    let who = describe(role, &of_role, top, &bytes);
    let dir = if inbound { "rx" } else { "tx" };
    let others: Vec<String> = by_role
        .iter()
        .filter(|(r, b)| **r != role && **b > 0)
        .map(|(r, b)| {
            format!(
                "{} {}",
                r.as_str(),
                units::pct(*b as f64 * 100.0 / total as f64)
            )
        })
        .collect();
    let mut note = format!("{who} carried {} of {dir}", units::pct(pct));
    if !others.is_empty() {
        note.push_str(&format!(" (then {})", others.join(", ")));
    }
    Some(Evidence {
        signal: Signal::KafkaRolePct.as_str().into(),
        value: (pct * 10.0).round() / 10.0,
        threshold: 0.0,
        note,
        exceeded: false,
    })
}

/// The role's words, with the brokers, or the groups and their shares.
fn describe(
    role: KafkaRole,
    rows: &[&&KafkaRoleSum],
    top: u64,
    bytes: &dyn Fn(u64, u64) -> u64,
) -> String {
    let brokers = || {
        let mut ids: Vec<i32> = rows.iter().filter_map(|r| r.who.broker).collect();
        ids.sort_unstable();
        ids.dedup();
        let ids: Vec<String> = ids.iter().map(i32::to_string).collect();
        match ids.len() {
            0 => String::new(),
            1 => format!(" {}", ids[0]),
            n => format!(" {} and {}", ids[..n - 1].join(", "), ids[n - 1]),
        }
    };
    match role {
        KafkaRole::ReplicationToFollower => {
            let b = brokers();
            let s = if b.contains("and") { "s" } else { "" };
            format!("replication to follower{s}{b}")
        }
        KafkaRole::ReplicationFromLeader => {
            let b = brokers();
            let s = if b.contains("and") { "s" } else { "" };
            format!("replication from leader{s}{b}")
        }
        KafkaRole::Consume => {
            let mut groups: BTreeMap<String, u64> = BTreeMap::new();
            for r in rows {
                let name = match (&r.who.group, r.ambiguous) {
                    (Some(g), false) => format!("group {}", crate::shared::terminal_text::inert(g)),
                    (Some(g), true) => format!(
                        "group {} (clients ambiguous)",
                        crate::shared::terminal_text::inert(g)
                    ),
                    (None, _) => "groups ambiguous".into(),
                };
                *groups.entry(name).or_default() += bytes(r.bytes_sent, r.bytes_received);
            }
            let mut list: Vec<(String, u64)> = groups.into_iter().collect();
            list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            let parts: Vec<String> = list
                .iter()
                .take(3)
                .map(|(g, b)| format!("{g} {}", units::pct(*b as f64 * 100.0 / top as f64)))
                .collect();
            format!("consumers ({} of theirs)", parts.join(", "))
        }
        KafkaRole::Produce => "producers".into(),
        KafkaRole::Client => "clients in no consumer group".into(),
        KafkaRole::Controller => "the controller quorum".into(),
        KafkaRole::OtherClient => format!("other processes of this host to broker{}", brokers()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::kafka::KafkaFlow;

    /// The identity is held once (`KafkaIdentity`) and flattened: a flow's
    /// `kafka` and a sum read and write the fields trace format 1.13 and
    /// `--json` have always had, so recordings of 1.13 still read.
    #[test]
    fn the_identity_is_flattened_into_the_json_of_flows_and_sums() {
        let flow =
            r#"{"role":"consume","group":"orders","client_id":"orders-1","ambiguous":["a/b"]}"#;
        let f: KafkaFlow = serde_json::from_str(flow).unwrap();
        assert_eq!(f.who.role, KafkaRole::Consume);
        assert_eq!(f.who.group.as_deref(), Some("orders"));
        assert_eq!(f.who.client_id.as_deref(), Some("orders-1"));
        assert_eq!(serde_json::to_string(&f).unwrap(), flow);
        let sum = KafkaRoleSum {
            iface: "eth0".into(),
            who: KafkaIdentity {
                broker: Some(2),
                ..KafkaIdentity::role(KafkaRole::ReplicationToFollower)
            },
            ambiguous: false,
            flows: 1,
            bytes_sent: 10,
            bytes_received: 2,
            data_segs_out: 3,
            retrans_segs: 0,
            delay_us: Some(7),
        };
        let json = r#"{"iface":"eth0","role":"replication_to_follower","broker":2,"flows":1,"bytes_sent":10,"bytes_received":2,"data_segs_out":3,"retrans_segs":0,"delay_us":7}"#;
        assert_eq!(serde_json::to_string(&sum).unwrap(), json);
        assert_eq!(serde_json::from_str::<KafkaRoleSum>(json).unwrap(), sum);
    }
}
