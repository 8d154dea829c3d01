//! Which flows paid in an interval: each flow's share of the bytes sent and
//! how much it was held back (queuing delay added to its RTT, cwnd cuts,
//! retransmits that were not spurious, time in Recovery/Loss), folded into
//! one backoff score for ranking.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use super::rates::{flow_rtt_inflation, flow_sent, flow_srtt_us};
use super::thresholds::Thresholds;
use crate::model::snapshot::{FlowSample, Owner, Snapshot};

/// Share of the cwnd-changing ACKs that were cuts at which the cwnd part of
/// the backoff score is full: one ACK in ten shrinking the window means the
/// sender is backing off all the time.
const CWND_CUT_FRACTION_FULL: f64 = 0.1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowAttribution {
    pub flow_id: u64,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub owner: Option<Owner>,
    pub state: String,
    pub ca_state: String,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// This flow's bytes sent as % of all flows' bytes sent in the interval
    /// (sums to 100 over the flows that sent).
    pub bytes_share_pct: f64,
    /// srtt (interval mean when sampled) / min_rtt; None when unknown or
    /// when the flow did not send.
    pub rtt_inflation: Option<f64>,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub cwnd: u32,
    pub cwnd_reductions: u64,
    pub segs_out: u64,
    /// Segments retransmitted; of them, `spurious_retransmits` the receiver
    /// reported as duplicates (D-SACK). Backoff counts only the others.
    pub retransmits: u64,
    #[serde(default)]
    pub spurious_retransmits: u64,
    pub failed_retransmits: u64,
    /// Time spent in the Recovery and Loss congestion states, in ms.
    pub recovery_loss_ms: f64,
    /// The base RTT the added delay is taken from: the lowest min_rtt of
    /// the flows to the same peer address on the same interface, this one
    /// included (a flow that first measured under a standing queue has a
    /// min_rtt that hides the queue; its neighbours' does not). 0 unknown.
    #[serde(default)]
    pub base_rtt_us: u32,
    /// srtt (interval mean when sampled) minus `base_rtt_us`: the queuing
    /// delay the flow carried, in time. 0 when unknown.
    #[serde(default)]
    pub added_delay_us: u32,
    /// The parts of the score, each 0..1 ([`backoff_score`]).
    #[serde(default)]
    pub backoff_parts: BackoffParts,
    /// 0..100, see [`backoff_score`].
    pub backoff_score: f64,
    /// 1 for the flow that paid most.
    pub rank: usize,
}

/// The four parts of a flow's backoff score, each 0..1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BackoffParts {
    /// Time in Recovery + Loss, as a fraction of the interval.
    pub recovery: f64,
    /// Retransmits not reported spurious, relative to `retrans_severe_pct`.
    pub retransmits: f64,
    /// Added queuing delay relative to `backoff_full_delay_ms`, times the
    /// share of the interval the flow had data in flight.
    pub delay: f64,
    /// cwnd cuts per tcp_probe sample, full at one in ten.
    pub cwnd: f64,
}

impl BackoffParts {
    /// `100 x (1 - prod(1 - part))`: any one part alone can reach the top,
    /// and parts that agree push it further. One decimal.
    pub(crate) fn score(&self) -> f64 {
        let kept = (1.0 - self.recovery)
            * (1.0 - self.retransmits)
            * (1.0 - self.delay)
            * (1.0 - self.cwnd);
        ((1.0 - kept) * 100.0 * 10.0).round() / 10.0
    }
}

/// How much a flow was held back, 0..100, from [`BackoffParts`]; 0 for a
/// flow that sent no data in the interval (it cannot have paid for
/// sending, whatever its RTT: an idle or receive-only flow's srtt is made
/// of delayed ACKs). `added_delay_us` is srtt over the flow's base RTT.
pub(crate) fn backoff_parts(
    f: &FlowSample,
    added_delay_us: Option<u32>,
    interval_us: f64,
    th: &Thresholds,
) -> BackoffParts {
    let d = &f.delta;
    if d.bytes_sent == 0 {
        return BackoffParts::default();
    }
    let time = if interval_us > 0.0 {
        ((d.ca_time_us.recovery + d.ca_time_us.loss) as f64 / interval_us).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let lossy = d.lossy_retransmits();
    let retrans = if d.segs_out > 0 {
        let pct = lossy as f64 / d.segs_out as f64 * 100.0;
        (pct / th.retrans_severe_pct.max(f64::MIN_POSITIVE)).min(1.0)
    } else if lossy > 0 {
        1.0
    } else {
        0.0
    };
    // The share of the interval with data in flight: a delay that held
    // for a moment of an otherwise idle interval cost little. Recordings
    // before busy time was kept (format 1.4) count the whole interval.
    let busy = if d.busy_us > 0 && interval_us > 0.0 {
        (d.busy_us as f64 / interval_us).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let full_us = (th.backoff_full_delay_ms * 1e3).max(f64::MIN_POSITIVE);
    let delay = added_delay_us.map_or(0.0, |a| (a as f64 / full_us).min(1.0)) * busy;
    let cwnd = if d.probe_events > 0 {
        (d.cwnd_reductions as f64 / d.probe_events as f64 / CWND_CUT_FRACTION_FULL).min(1.0)
    } else if d.cwnd_reductions > 0 {
        1.0
    } else {
        0.0
    };
    BackoffParts {
        recovery: time,
        retransmits: retrans,
        delay,
        cwnd,
    }
}

/// Per (interface, peer address), the lowest min_rtt of its flows: the
/// base RTT the added delay is taken from.
fn base_rtts(snap: &Snapshot) -> HashMap<(Option<&str>, IpAddr), u32> {
    let mut base: HashMap<(Option<&str>, IpAddr), u32> = HashMap::new();
    for f in snap.flows.iter().filter(|f| f.min_rtt_us > 0) {
        let b = base
            .entry((f.iface.as_deref(), f.peer.ip()))
            .or_insert(u32::MAX);
        *b = (*b).min(f.min_rtt_us);
    }
    base
}

/// Did anything happen to this flow in the interval?
fn active(f: &FlowSample) -> bool {
    let d = &f.delta;
    flow_sent(f)
        || d.bytes_received > 0
        || d.retrans_segs > 0
        || d.retrans_failed > 0
        || d.cwnd_reductions > 0
        || d.ca_time_us.recovery + d.ca_time_us.loss > 0
}

/// The flows of `snap` that did something, ranked by backoff score (then by
/// bytes share, then id, so the order is stable).
pub(crate) fn attribute(snap: &Snapshot, th: &Thresholds) -> Vec<FlowAttribution> {
    let interval_us = snap.interval_ns as f64 / 1e3;
    // Folded flows (src/model/fold.rs) sent part of the interval's bytes:
    // a listed flow's share is of all of them.
    let total_sent: u64 = snap.flows.iter().map(|f| f.delta.bytes_sent).sum::<u64>()
        + snap
            .folded
            .flows
            .iter()
            .map(|g| g.delta.bytes_sent)
            .sum::<u64>();
    let bases = base_rtts(snap);
    let mut out: Vec<FlowAttribution> = snap
        .flows
        .iter()
        .filter(|f| active(f))
        .map(|f| {
            let d = &f.delta;
            let base = bases
                .get(&(f.iface.as_deref(), f.peer.ip()))
                .copied()
                .unwrap_or(0);
            let srtt = flow_srtt_us(f);
            let added = (base > 0 && srtt > 0).then(|| srtt.saturating_sub(base));
            let parts = backoff_parts(f, added, interval_us, th);
            FlowAttribution {
                flow_id: f.id,
                local: f.local,
                peer: f.peer,
                owner: f.owner.clone(),
                state: f.state.clone(),
                ca_state: f.ca_state.clone(),
                bytes_sent: d.bytes_sent,
                bytes_received: d.bytes_received,
                bytes_share_pct: if total_sent > 0 {
                    d.bytes_sent as f64 / total_sent as f64 * 100.0
                } else {
                    0.0
                },
                rtt_inflation: flow_sent(f).then(|| flow_rtt_inflation(f)).flatten(),
                srtt_us: f.srtt_us,
                min_rtt_us: f.min_rtt_us,
                cwnd: f.cwnd,
                cwnd_reductions: d.cwnd_reductions,
                segs_out: d.segs_out,
                retransmits: d.retrans_segs,
                spurious_retransmits: d.spurious_retransmits(),
                failed_retransmits: d.retrans_failed,
                recovery_loss_ms: (d.ca_time_us.recovery + d.ca_time_us.loss) as f64 / 1e3,
                base_rtt_us: base,
                added_delay_us: added.unwrap_or(0),
                backoff_parts: parts,
                backoff_score: parts.score(),
                rank: 0,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.backoff_score
            .total_cmp(&a.backoff_score)
            .then(b.bytes_share_pct.total_cmp(&a.bytes_share_pct))
            .then(a.flow_id.cmp(&b.flow_id))
    });
    for (i, f) in out.iter_mut().enumerate() {
        f.rank = i + 1;
    }
    out
}
