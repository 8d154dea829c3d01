//! The verdict engine: a pure function of snapshots (no I/O, no clock) that
//! says, per interval and interface, what is holding the network back, and
//! which flows paid. Thresholds and the decision order are documented in
//! docs/verdicts.md.

pub(crate) mod attribution;
pub(crate) mod attribution_json;
pub(crate) mod cluster;
pub(crate) mod conntrack;
mod decide;
pub(crate) mod episodes;
pub(crate) mod exported;
pub(crate) mod exported_kafka;
mod gather;
pub(crate) mod headroom;
pub(crate) mod hold;
pub(crate) mod judge;
pub(crate) mod judging;
pub mod kafka_roles;
pub(crate) mod linklocal;
mod outcome;
pub(crate) mod rates;
pub(crate) mod signal;
pub(crate) mod threshold_range;
pub(crate) mod thresholds;
pub(crate) mod trust;
pub(crate) mod verdict;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub(crate) use attribution::{BackoffParts, FlowAttribution};
pub use episodes::{Episode, EpisodeTracker};
pub(crate) use headroom::Headroom;
pub use headroom::HeadroomTracker;
pub(crate) use hold::HeldVerdict;
#[cfg(test)]
use judge::Judge;
pub(crate) use judging::Judging;
pub(crate) use rates::NormalisedRates;
pub use thresholds::Thresholds;
pub use verdict::InterfaceVerdict;
pub use verdict::{Evidence, Location, Verdict, VerdictFamily};

use crate::model::snapshot::Snapshot;

/// The judgement of one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalAnalysis {
    pub seq: u64,
    pub mono_ns: u64,
    pub interfaces: Vec<InterfaceVerdict>,
    /// Flows that did something in the interval, ranked by backoff score.
    #[serde(serialize_with = "attribution_json::serialize_attributions")]
    pub flows: Vec<FlowAttribution>,
    /// Per interface, the episode under way and the last few before it
    /// (filled by the judging unit, judging.rs; empty elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub episodes: Vec<Episode>,
    /// The instance against its baseline (filled by the judging unit;
    /// absent when no baseline is known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom: Option<Headroom>,
    /// Per interface, the interval's traffic by Kafka role, broker, group
    /// and client (kafka_roles.rs); empty when no flow has a Kafka
    /// identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kafka: Vec<kafka_roles::KafkaRoleSum>,
}

/// Throughput of `iface` over the contiguous run of snapshots that have it,
/// oldest first, ending with `snap`.
fn throughput_history(prev: &[Snapshot], snap: &Snapshot, iface: &str, rx: bool) -> Vec<f64> {
    let bps = |s: &Snapshot| {
        s.interfaces.iter().find(|i| i.name == iface).map(|i| {
            let bytes = if rx {
                i.delta.rx_bytes
            } else {
                i.delta.tx_bytes
            };
            let secs = s.interval_secs();
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        })
    };
    let mut out: Vec<f64> = std::iter::once(snap)
        .chain(prev.iter().rev())
        .map_while(bps)
        .collect();
    out.reverse();
    out
}

/// Judge `snap`. `prev` is the history before it, oldest first (may be
/// empty); only the throughput plateau and the checks on zeroed and failed
/// reads look at it.
pub fn analyze(prev: &[Snapshot], snap: &Snapshot, th: &Thresholds) -> IntervalAnalysis {
    let start_ns = snap.mono_ns.saturating_sub(snap.interval_ns);
    let bases = attribution::BaseRtts::of(snap);
    let kafka = kafka_roles::sums(snap);
    let interfaces: Vec<InterfaceVerdict> = snap
        .interfaces
        .iter()
        .map(|iface| {
            let tx = throughput_history(prev, snap, &iface.name, false);
            let rx = throughput_history(prev, snap, &iface.name, true);
            let mut r = rates::normalise(iface, snap, &bases);
            r.conntrack_openers = conntrack::openers(snap, &iface.name);
            r.conntrack_trend = conntrack::trend(prev, snap, &iface.name);
            let untrusted =
                trust::read_gap(prev, iface).or_else(|| trust::implausible(iface, &r, th));
            let r = match untrusted {
                Some(_) => r.without_allowance(),
                None => r,
            };
            let mut v = verdict::judge(iface, r, untrusted.as_deref(), &tx, &rx, th);
            // Which Kafka role used the allowance: right after the cause
            // and the line that says how it happened.
            if let Some(line) = kafka_roles::evidence(&v, snap, &kafka) {
                let at = v.evidence.len().min(
                    1 + usize::from(v.evidence.get(1).is_some_and(|e| {
                        signal::Signal::MicroburstRatio.is(e)
                            || signal::Signal::CountersInMicrobursts.is(e)
                    })),
                );
                v.evidence.insert(at, line);
            }
            // Alone, an interval holds its own verdict; the `Judge` holds
            // it over a window instead.
            v.held = HeldVerdict::alone(&v, snap.seq, start_ns);
            v
        })
        .collect();
    let flows = attribution::attribute(snap, &interfaces, &bases, th);
    IntervalAnalysis {
        seq: snap.seq,
        mono_ns: snap.mono_ns,
        interfaces,
        flows,
        episodes: Vec::new(),
        headroom: None,
        kafka,
    }
}
