//! Which flows paid in an interval: each flow's share of the bytes sent and
//! how much it was held back (queuing delay added to its RTT, cwnd cuts,
//! retransmits that were not spurious, time in Recovery/Loss), folded into
//! one backoff score for ranking.
//!
//! Who can have paid depends on what was exceeded (docs/verdicts.md, "Which
//! flows paid"): the flows that sent, as a rule; on an interface whose
//! inbound allowance (bw_in) decided its verdict, the flows receiving
//! through it. A flow that never leaves the host passes through no
//! allowance, host queue or path, and has no rank.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use super::outcome::{InterfaceVerdict, Verdict};
use super::rates::{flow_rtt_inflation, flow_sent, flow_srtt_us};
use super::signal::Signal;
use super::thresholds::Thresholds;
use crate::model::snapshot::{FlowSample, Owner, Snapshot};

/// Full-sized segments a receiver acknowledges at once (RFC 5681: an ACK
/// at least for every second one). A flow that sent less in the interval
/// had every ACK held by its peer's delayed-ACK timer (40 ms and more on
/// Linux, up to 200 ms elsewhere) or by the peer's reply: its srtt is that
/// timing, the flow's own, not a queue it waited in, and its added delay
/// does not count in its backoff.
const DELAYED_ACK_SEGMENTS: u64 = 2;
/// The MSS assumed where a flow's is not known (RFC 1122's default).
const DEFAULT_MSS: u64 = 536;

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
    /// This flow's bytes received as % of all flows' bytes received in the
    /// interval: what an inbound ranking orders by after the score.
    #[serde(default)]
    pub received_share_pct: f64,
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
    /// Ranked among the flows receiving through an interface whose
    /// inbound allowance (bw_in) decided its verdict: after the score, by
    /// `received_share_pct`, and ranked for what it received even when it
    /// sent nothing.
    #[serde(default)]
    pub inbound: bool,
    /// 1 for the flow that paid most; 0 for a flow with no rank: one that
    /// sent no data (outside an inbound ranking), received nothing in one,
    /// or never left the host ([`is_local`]).
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
/// of delayed ACKs). `added_delay_us` is srtt over the flow's base RTT
/// ([`BaseRtts::added_delay_us`]); it counts only for a flow that sent
/// enough for its srtt to be the path's ([`delay_is_the_paths`]).
/// `busy_known`: the snapshot's flows carry busy time ([`busy_known`]).
pub(crate) fn backoff_parts(
    f: &FlowSample,
    added_delay_us: Option<u32>,
    interval_us: f64,
    busy_known: bool,
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
    // for a moment of an otherwise idle interval cost little. Busy time
    // counts in kernel ticks, so a flow busy for less than one reads 0:
    // a moment, not the whole interval. Recordings before busy time was
    // kept (format 1.4), or made where the tick was not known, have none
    // at all and count the whole interval.
    let busy = if busy_known && interval_us > 0.0 {
        (d.busy_us as f64 / interval_us).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let full_us = (th.backoff_full_delay_ms * 1e3).max(f64::MIN_POSITIVE);
    let delay = added_delay_us
        .filter(|_| delay_is_the_paths(f))
        .map_or(0.0, |a| (a as f64 / full_us).min(1.0))
        * busy;
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

/// Do the flows of `snap` carry busy time? Not in recordings before format
/// 1.4, nor where the kernel's tick rate could not be told: no flow has any.
pub(crate) fn busy_known(snap: &Snapshot) -> bool {
    snap.flows.iter().any(|f| f.totals.busy_us > 0)
}

/// Did `f` send enough in the interval for its srtt to be the path's
/// rather than its peer's delayed-ACK timing ([`DELAYED_ACK_SEGMENTS`]
/// full segments)?
pub(crate) fn delay_is_the_paths(f: &FlowSample) -> bool {
    let mss = if f.mss > 0 {
        u64::from(f.mss)
    } else {
        DEFAULT_MSS
    };
    f.delta.bytes_sent >= DELAYED_ACK_SEGMENTS * mss
}

/// Does `f` stay on this host: on the loopback interface, or to a peer
/// address that is a loopback one or its own local address (the kernel
/// routes those through `lo` too; a flow of another namespace has no
/// interface to say so)? It passes through no allowance, host queue or
/// network path.
pub(crate) fn is_local(f: &FlowSample) -> bool {
    let peer = f.peer.ip().to_canonical();
    f.iface.as_deref() == Some("lo") || peer.is_loopback() || peer == f.local.ip().to_canonical()
}

/// Per (interface, peer address), the lowest min_rtt of its flows: the
/// base RTT the added delay is taken from. The one definition of a flow's
/// added delay, for the ranking, the interfaces' evidence and the views.
pub(crate) struct BaseRtts<'a> {
    base: HashMap<(Option<&'a str>, IpAddr), u32>,
}

impl<'a> BaseRtts<'a> {
    pub(crate) fn of(snap: &'a Snapshot) -> Self {
        let mut base: HashMap<(Option<&str>, IpAddr), u32> = HashMap::new();
        for f in snap.flows.iter().filter(|f| f.min_rtt_us > 0) {
            let b = base
                .entry((f.iface.as_deref(), f.peer.ip()))
                .or_insert(u32::MAX);
            *b = (*b).min(f.min_rtt_us);
        }
        BaseRtts { base }
    }

    /// `f`'s base RTT; 0 when unknown.
    pub(crate) fn base_us(&self, f: &FlowSample) -> u32 {
        self.base
            .get(&(f.iface.as_deref(), f.peer.ip()))
            .copied()
            .unwrap_or(0)
    }

    /// srtt (the interval's mean when sampled) over `f`'s base RTT: the
    /// queuing delay it carried. None when either is unknown.
    pub(crate) fn added_delay_us(&self, f: &FlowSample) -> Option<u32> {
        let (base, srtt) = (self.base_us(f), flow_srtt_us(f));
        (base > 0 && srtt > 0).then(|| srtt.saturating_sub(base))
    }
}

/// Was `v`'s verdict decided by the inbound allowance (bw_in)?
fn inbound_exceeded(v: &InterfaceVerdict) -> bool {
    matches!(
        v.verdict,
        Verdict::HypervisorQueuing | Verdict::HypervisorDrop
    ) && v
        .evidence
        .first()
        .is_some_and(|e| Signal::BwInAllowancePct.is(e))
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
/// bytes share, then id, so the order is stable); the flows with no rank
/// after them. `interfaces`: the interval's verdicts, which say where the
/// inbound allowance was the one exceeded.
pub(crate) fn attribute(
    snap: &Snapshot,
    interfaces: &[InterfaceVerdict],
    bases: &BaseRtts,
    th: &Thresholds,
) -> Vec<FlowAttribution> {
    let interval_us = snap.interval_ns as f64 / 1e3;
    let busy = busy_known(snap);
    let inbound_ifaces: Vec<&str> = interfaces
        .iter()
        .filter(|v| inbound_exceeded(v))
        .map(|v| v.iface.as_str())
        .collect();
    // Folded flows (src/model/fold.rs) sent part of the interval's bytes:
    // a listed flow's share is of all of them.
    let total_sent: u64 = snap.flows.iter().map(|f| f.delta.bytes_sent).sum::<u64>()
        + snap
            .folded
            .flows
            .iter()
            .map(|g| g.delta.bytes_sent)
            .sum::<u64>();
    let total_received: u64 = snap
        .flows
        .iter()
        .map(|f| f.delta.bytes_received)
        .sum::<u64>()
        + snap
            .folded
            .flows
            .iter()
            .map(|g| g.delta.bytes_received)
            .sum::<u64>();
    let share = |part: u64, whole: u64| {
        if whole > 0 {
            part as f64 / whole as f64 * 100.0
        } else {
            0.0
        }
    };
    let mut out: Vec<FlowAttribution> = snap
        .flows
        .iter()
        .filter(|f| active(f))
        .map(|f| {
            let d = &f.delta;
            let local = is_local(f);
            let base = bases.base_us(f);
            let added = bases.added_delay_us(f);
            let inbound = !local && inbound_ifaces.iter().any(|i| f.counts_for(i));
            // A flow that stays on the host paid for nothing it passed.
            let parts = if local {
                BackoffParts::default()
            } else {
                backoff_parts(f, added, interval_us, busy, th)
            };
            let ranked = !local
                && if inbound {
                    d.bytes_received > 0
                } else {
                    d.bytes_sent > 0
                };
            FlowAttribution {
                flow_id: f.id,
                local: f.local,
                peer: f.peer,
                owner: f.owner.clone(),
                state: f.state.clone(),
                ca_state: f.ca_state.clone(),
                bytes_sent: d.bytes_sent,
                bytes_received: d.bytes_received,
                bytes_share_pct: share(d.bytes_sent, total_sent),
                received_share_pct: share(d.bytes_received, total_received),
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
                inbound,
                // Marks the flows to rank; numbered below.
                rank: usize::from(ranked),
            }
        })
        .collect();
    // The share a tie is broken on: of what the flow passed through the
    // allowance it is ranked against.
    let passed = |f: &FlowAttribution| {
        if f.inbound {
            f.received_share_pct
        } else {
            f.bytes_share_pct
        }
    };
    out.sort_by(|a, b| {
        b.rank
            .cmp(&a.rank)
            .then(b.backoff_score.total_cmp(&a.backoff_score))
            .then(passed(b).total_cmp(&passed(a)))
            .then(a.flow_id.cmp(&b.flow_id))
    });
    for (i, f) in out.iter_mut().enumerate() {
        if f.rank > 0 {
            f.rank = i + 1;
        }
    }
    out
}
