//! The verdict engine: a pure function of snapshots (no I/O, no clock) that
//! says, per interval and interface, what is holding the network back, and
//! which flows paid. Thresholds and the decision order are documented in
//! docs/verdicts.md.

pub mod attribution;
pub mod episodes;
pub mod rates;
pub mod thresholds;
pub mod verdict;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use attribution::FlowAttribution;
pub use episodes::{Episode, EpisodeTracker};
pub use rates::NormalisedRates;
pub use thresholds::{ThresholdInfo, Thresholds};
pub use verdict::{Evidence, InterfaceVerdict, Location, Verdict, VerdictFamily};

use crate::snapshot::{AllowanceStatus, InterfaceSample, Snapshot};

/// The judgement of one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalAnalysis {
    pub seq: u64,
    pub mono_ns: u64,
    pub interfaces: Vec<InterfaceVerdict>,
    /// Flows that did something in the interval, ranked by backoff score.
    pub flows: Vec<FlowAttribution>,
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

/// Why this interval's allowance deltas are no data, when they are not: the
/// read failed (deltas reported as 0) or the driver returned a zeroed
/// struct. Judging those zeros would turn enforcement into free flow.
fn allowance_gap(prev: Option<&Snapshot>, iface: &InterfaceSample) -> Option<String> {
    let now = iface.allowance.sample()?;
    if let Some(e) = &now.last_error {
        return Some(format!("allowance read failed this interval: {e}"));
    }
    let before = prev?
        .interfaces
        .iter()
        .find(|i| i.name == iface.name)?
        .allowance
        .sample()?;
    (now.zeroed_reads > before.zeroed_reads).then(|| {
        "the driver returned all-zero allowance counters this interval (failed admin \
         command): no data"
            .to_string()
    })
}

/// Judge `snap`. `prev` is the history before it, oldest first (may be
/// empty); only the throughput plateau and the zeroed-read check look at it.
pub fn analyze(prev: &[Snapshot], snap: &Snapshot, th: &Thresholds) -> IntervalAnalysis {
    let interfaces = snap
        .interfaces
        .iter()
        .map(|iface| {
            let gap = allowance_gap(prev.last(), iface);
            let patched;
            let iface = match gap {
                Some(reason) => {
                    patched = InterfaceSample {
                        allowance: AllowanceStatus::Unavailable { reason },
                        ..iface.clone()
                    };
                    &patched
                }
                None => iface,
            };
            let r = rates::normalise(iface, snap);
            let tx = throughput_history(prev, snap, &iface.name, false);
            let rx = throughput_history(prev, snap, &iface.name, true);
            verdict::judge(iface, r, &tx, &rx, th)
        })
        .collect();
    IntervalAnalysis {
        seq: snap.seq,
        mono_ns: snap.mono_ns,
        interfaces,
        flows: attribution::attribute(snap, th),
    }
}
