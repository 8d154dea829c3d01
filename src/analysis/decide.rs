//! The decision order (docs/verdicts.md, "Decision order"): a fixed list of
//! questions, one function each; the first that says yes wins.
//!
//! A confidence is built the same way everywhere (docs/verdicts.md,
//! "Confidence"): a base for the signal being past its threshold at all,
//! plus a span scaled by how far past it is on the way to a full scale, plus
//! small bonuses for signals that agree. The weights below are those of the
//! docs' formulas. They say how sure a verdict is, never which verdict
//! wins (no question below compares a confidence), and they are not
//! calibrated probabilities. They are not `Thresholds` either: those are
//! written into every recording and report, and a re-judged recording is
//! compared against them, so adding weights there would change both.

use super::outcome::Verdict;
use super::rates::NormalisedRates;
use super::signal::{Signal, Signals};
use super::thresholds::Thresholds;

/// The verdict, its confidence (before clamping) and the signal it rests
/// on.
pub(super) type Decision = (Verdict, f64, Signal);

/// How far `value` is past `threshold` on the way to `full`, 0..1, on a log
/// scale (these signals span orders of magnitude).
fn past(value: f64, threshold: f64, full: f64) -> f64 {
    if value < threshold {
        return 0.0;
    }
    if threshold <= 0.0 || full <= threshold {
        return 1.0;
    }
    ((value / threshold).ln() / (full / threshold).ln()).clamp(0.0, 1.0)
}

/// A confidence that starts at `base` when its signal reaches the threshold
/// and gains up to `span` by the signal's full scale.
struct Ramp {
    base: f64,
    span: f64,
}

impl Ramp {
    fn at(&self, past: f64) -> f64 {
        self.base + self.span * past
    }
}

/// Rates of dropping allowances (conntrack, link-local) and the host's drop
/// share span orders of magnitude: full confidence at this many times the
/// threshold.
const DROP_RATE_FULL_SCALE: f64 = 100.0;
/// A conntrack rate past its line: every count is a dropped packet.
const CONNTRACK: Ramp = Ramp {
    base: 0.6,
    span: 0.3,
};
/// The available-entries gauge low as well as the rate: the two agree.
const CONNTRACK_GAUGE_AGREES: f64 = 0.1;
/// The gauge low alone: the table is about to refuse, nothing dropped yet.
const CONNTRACK_GAUGE_ALONE: f64 = 0.5;
/// Link-local has no second signal to agree, so its span is the whole rest.
const LINKLOCAL: Ramp = Ramp {
    base: 0.6,
    span: 0.4,
};

/// Idle: certain with no traffic at all, half sure just under `idle_pps`.
const IDLE_FULL: f64 = 1.0;
const IDLE_AT_LINE_LOSS: f64 = 0.5;

/// The shaper's rate past its line with little retransmission: queuing.
const QUEUING: Ramp = Ramp {
    base: 0.6,
    span: 0.3,
};
/// Retransmits above normal (but under the loss line) on an outbound
/// queuing verdict: the queue may have begun to overflow.
const QUEUING_RETRANS_DOUBT: f64 = 0.15;
/// Past the line with retransmits past theirs: the allowance rate and the
/// loss share what is left above the base equally.
const DROP_BASE: f64 = 0.5;
const DROP_ALLOWANCE_SPAN: f64 = 0.25;
const DROP_RETRANS_SPAN: f64 = 0.25;
/// The pps rate past its line.
const PPS: Ramp = Ramp {
    base: 0.6,
    span: 0.3,
};
/// pps is full at 100% of wire packets counted, or at twice a threshold set
/// above that.
const PPS_FULL_PCT: f64 = 100.0;
const PPS_FULL_TIMES_THRESHOLD: f64 = 2.0;
/// RTT inflation, and throughput on a plateau, each corroborate an
/// enforcement verdict a little; neither makes one.
const RTT_AGREES: f64 = 0.05;
const PLATEAU_AGREES: f64 = 0.05;

/// A hard cap: the counter under the bandwidth line, so the demand signals
/// carry it; confidence stays at 0.5-0.9 since a bottleneck further away
/// can read alike (docs/verdicts.md, 4b).
const CAP: Ramp = Ramp {
    base: 0.5,
    span: 0.2,
};
/// `past` needs a positive threshold: a `cap_allowance_pct` of 0 is judged
/// from this.
const CAP_ALLOWANCE_FLOOR_PCT: f64 = 0.01;
const CAP_RTT_AGREES: f64 = 0.1;
const CAP_DATA_WAITING_SPAN: f64 = 0.1;
/// Data waiting is full when every incoming segment found some.
const CAP_DATA_WAITING_FULL_PCT: f64 = 100.0;

/// Host drops past their line.
const LOCAL_DROP: Ramp = Ramp {
    base: 0.6,
    span: 0.3,
};
/// Host drops are full at 1% of tx packets, or at ten times a threshold set
/// above a tenth of that.
const LOCAL_DROP_FULL_PCT: f64 = 1.0;
const LOCAL_DROP_FULL_TIMES_THRESHOLD: f64 = 10.0;
const LOCAL_DROP_RETRANS_AGREES: f64 = 0.1;
/// Host queuing: backlog or sojourn strength, plus each agreeing signal
/// (the queue, failed retransmits, RTT inflation).
const LOCAL_QUEUING: Ramp = Ramp {
    base: 0.45,
    span: 0.3,
};
/// Backlog and sojourn are full at ten times their thresholds.
const LOCAL_QUEUE_FULL_SCALE: f64 = 10.0;
const LOCAL_QUEUING_PER_AGREEING: f64 = 0.1;

/// Retransmits past the loss line with nothing above to blame.
const NETWORK_LOSS: Ramp = Ramp {
    base: 0.5,
    span: 0.4,
};
/// Without allowance counters the hypervisor could be dropping: we cannot
/// see it.
const LOSS_BLIND_TO_HYPERVISOR: f64 = 0.6;
/// The outbound allowance rate at this share of its line or more: not far
/// below it, could be either.
const LOSS_NEAR_LINE_SHARE: f64 = 0.5;
const LOSS_NEAR_ALLOWANCE_LINE: f64 = 0.8;
/// Without host-queue probes the host could be dropping.
const LOSS_BLIND_TO_HOST: f64 = 0.85;

/// Free flow: half sure with some signal at its line, sure with every
/// signal at 0.
const FREE: Ramp = Ramp {
    base: 0.5,
    span: 0.5,
};
/// Without allowance counters free flow cannot exclude the hypervisor; with
/// every flow untracked, it cannot exclude loss on the flows.
const FREE_BLIND_MAX: f64 = 0.6;
/// An RTT inflation of 1.0 is no queueing at all: closeness is measured
/// from there.
const NO_INFLATION: f64 = 1.0;

/// Decide one interface's verdict from its signals.
pub(super) fn decide(s: &Signals, r: &NormalisedRates, th: &Thresholds) -> Decision {
    // 1-2. Allowances whose every count is a dropped packet: they shrink
    // traffic themselves, so they are checked before "idle".
    conntrack_limit(s, th)
        .or_else(|| linklocal_limit(s, th))
        // 3. Too little traffic for any rate to mean anything.
        .or_else(|| idle(s, th))
        // 4. Hypervisor allowances: the one furthest past its threshold wins.
        .or_else(|| hypervisor_allowance(s, th))
        // 4b. A hard cap under the bandwidth line; not when the interval
        // microbursts: a sender that ran several times its mean within the
        // interval was not held at a ceiling (an application sending the
        // same bytes every second is flat too, docs/verdicts.md).
        .or_else(|| {
            hypervisor_cap(s, th)
                .filter(|_| r.microburst(false, false, th.microburst_ratio).is_none())
        })
        // 5-6. The host's own queue.
        .or_else(|| local_drop(s, th))
        .or_else(|| local_queuing(s, th))
        // 7. Loss with neither the hypervisor nor the host to blame.
        .or_else(|| network_loss(s, r, th))
        // 8. Nothing past its threshold.
        .unwrap_or_else(|| free_flow(s, r))
}

fn conntrack_limit(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let rate = s.hit(Signal::ConntrackExceededPerS);
    let low = s.hit(Signal::ConntrackAvailable);
    if !rate && !low {
        return None;
    }
    if !rate {
        return Some((
            Verdict::ConntrackLimit,
            CONNTRACK_GAUGE_ALONE,
            Signal::ConntrackAvailable,
        ));
    }
    let c = CONNTRACK.at(past(
        s.value_or_zero(Signal::ConntrackExceededPerS),
        th.conntrack_exceeded_per_s,
        th.conntrack_exceeded_per_s * DROP_RATE_FULL_SCALE,
    )) + if low { CONNTRACK_GAUGE_AGREES } else { 0.0 };
    Some((Verdict::ConntrackLimit, c, Signal::ConntrackExceededPerS))
}

fn linklocal_limit(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let signal = Signal::LinklocalExceededPerS;
    if !s.hit(signal) {
        return None;
    }
    let c = LINKLOCAL.at(past(
        s.value_or_zero(signal),
        th.linklocal_exceeded_per_s,
        th.linklocal_exceeded_per_s * DROP_RATE_FULL_SCALE,
    ));
    Some((Verdict::LinklocalLimit, c, signal))
}

fn idle(s: &Signals, th: &Thresholds) -> Option<Decision> {
    if s.hit(Signal::WirePps) {
        return None;
    }
    let share = s.value_or_zero(Signal::WirePps) / th.idle_pps.max(f64::MIN_POSITIVE);
    let c = IDLE_FULL - IDLE_AT_LINE_LOSS * share.min(1.0);
    Some((Verdict::Idle, c, Signal::WirePps))
}

/// The shaper's rates past their lines; the one furthest past (as a
/// multiple of its threshold) decides.
fn hypervisor_allowance(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let ratio = |signal: Signal, t: f64| {
        s.hit(signal)
            .then(|| (signal, s.value_or_zero(signal) / t.max(f64::MIN_POSITIVE)))
    };
    let top = [
        ratio(Signal::BwOutAllowancePct, th.bw_allowance_pct),
        ratio(Signal::BwInAllowancePct, th.bw_allowance_pct),
        ratio(Signal::PpsAllowancePct, th.pps_allowance_pct),
    ]
    .into_iter()
    .flatten()
    .max_by(|a, b| a.1.total_cmp(&b.1));
    let (signal, _) = top?;
    let value = s.value_or_zero(signal);
    let retrans_hit = s.hit(Signal::RetransmitPct);
    Some(match signal {
        Signal::PpsAllowancePct => {
            let full = PPS_FULL_PCT.max(th.pps_allowance_pct * PPS_FULL_TIMES_THRESHOLD);
            let c = PPS.at(past(value, th.pps_allowance_pct, full));
            (Verdict::PpsLimit, enforcement_agrees(s, c), signal)
        }
        Signal::BwOutAllowancePct if retrans_hit => {
            let retrans = s.value_or_zero(Signal::RetransmitPct);
            let c = DROP_BASE
                + DROP_ALLOWANCE_SPAN * past(value, th.bw_allowance_pct, th.bw_enforced_pct)
                + DROP_RETRANS_SPAN * past(retrans, th.retrans_pct, th.retrans_severe_pct);
            (Verdict::HypervisorDrop, c, signal)
        }
        _ => {
            let mut c = enforcement_agrees(
                s,
                QUEUING.at(past(value, th.bw_allowance_pct, th.bw_enforced_pct)),
            );
            // Retransmits above normal but below the loss line: the queue
            // may have begun to overflow. Inbound, our retransmits say
            // nothing about the remote sender's queue.
            if s.value_or_zero(Signal::RetransmitPct) >= th.retrans_normal_pct
                && signal == Signal::BwOutAllowancePct
            {
                c -= QUEUING_RETRANS_DOUBT;
            }
            (Verdict::HypervisorQueuing, c, signal)
        }
    })
}

/// `c` raised by the corroborating signals of an enforcement: RTT inflation
/// and a throughput plateau either way.
fn enforcement_agrees(s: &Signals, c: f64) -> f64 {
    c + if s.hit(Signal::RttInflationP50) {
        RTT_AGREES
    } else {
        0.0
    } + if s.hit(Signal::TxPlateauCv) || s.hit(Signal::RxPlateauCv) {
        PLATEAU_AGREES
    } else {
        0.0
    }
}

/// A hard cap: under the bandwidth line, but the senders want more than
/// they get (data waiting, receivers no limit), outbound throughput is
/// flat, and pushing against it queues or loses packets while the
/// hypervisor's counter climbs.
fn hypervisor_cap(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let p = s.value(Signal::BwOutAllowancePct)?;
    let rtt_hit = s.hit(Signal::RttInflationP50);
    let pushing = rtt_hit || s.hit(Signal::RetransmitPct);
    // Flat throughput is required once it can be told: in the first
    // intervals (too little history) nothing says it is not.
    let capped = p >= th.cap_allowance_pct
        && s.hit(Signal::DataWaitingPct)
        && !s.hit(Signal::RwndLimitedPct)
        && s.get(Signal::TxPlateauCv).is_none_or(|e| e.exceeded)
        && pushing;
    if !capped {
        return None;
    }
    let c = CAP.at(past(
        p,
        th.cap_allowance_pct.max(CAP_ALLOWANCE_FLOOR_PCT),
        th.bw_allowance_pct,
    )) + if rtt_hit { CAP_RTT_AGREES } else { 0.0 }
        + CAP_DATA_WAITING_SPAN
            * past(
                s.value_or_zero(Signal::DataWaitingPct),
                th.cap_data_waiting_pct,
                CAP_DATA_WAITING_FULL_PCT,
            );
    Some((Verdict::HypervisorCap, c, Signal::BwOutAllowancePct))
}

fn local_drop(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let signal = Signal::LocalDropPct;
    if !s.hit(signal) {
        return None;
    }
    let full = LOCAL_DROP_FULL_PCT.max(th.local_drop_pct * LOCAL_DROP_FULL_TIMES_THRESHOLD);
    let c = LOCAL_DROP.at(past(s.value_or_zero(signal), th.local_drop_pct, full))
        + if s.hit(Signal::RetransmitPct) {
            LOCAL_DROP_RETRANS_AGREES
        } else {
            0.0
        };
    Some((Verdict::LocalDrop, c, signal))
}

fn local_queuing(s: &Signals, th: &Thresholds) -> Option<Decision> {
    let backlog = s.hit(Signal::LocalBacklogPackets);
    let sojourn = s.hit(Signal::LocalSojournUs);
    let failed = s.hit(Signal::FailedRetransmits);
    if !(backlog || sojourn || failed) {
        return None;
    }
    let strength = past(
        s.value_or_zero(Signal::LocalBacklogPackets),
        th.local_backlog_packets,
        th.local_backlog_packets * LOCAL_QUEUE_FULL_SCALE,
    )
    .max(past(
        s.value_or_zero(Signal::LocalSojournUs),
        th.local_sojourn_us,
        th.local_sojourn_us * LOCAL_QUEUE_FULL_SCALE,
    ));
    let agreeing = [backlog || sojourn, failed, s.hit(Signal::RttInflationP50)]
        .iter()
        .filter(|x| **x)
        .count();
    let c = LOCAL_QUEUING.at(strength) + LOCAL_QUEUING_PER_AGREEING * agreeing as f64;
    let primary = if backlog {
        Signal::LocalBacklogPackets
    } else if sojourn {
        Signal::LocalSojournUs
    } else {
        Signal::FailedRetransmits
    };
    Some((Verdict::LocalQueuing, c, primary))
}

fn network_loss(s: &Signals, r: &NormalisedRates, th: &Thresholds) -> Option<Decision> {
    let signal = Signal::RetransmitPct;
    if !s.hit(signal) {
        return None;
    }
    let retrans = s.value_or_zero(signal);
    let mut c = NETWORK_LOSS.at(past(retrans, th.retrans_pct, th.retrans_severe_pct));
    if !r.allowance_available {
        c *= LOSS_BLIND_TO_HYPERVISOR;
    } else if s.value_or_zero(Signal::BwOutAllowancePct)
        >= th.bw_allowance_pct * LOSS_NEAR_LINE_SHARE
    {
        c *= LOSS_NEAR_ALLOWANCE_LINE;
    }
    if !r.host_queue_available {
        c *= LOSS_BLIND_TO_HOST;
    }
    Some((Verdict::NetworkLoss, c, signal))
}

/// Nothing past its threshold: the closer the nearest signal came to its
/// line, the less sure. Plateaus (corroboration), traffic (the idle line)
/// and the conntrack gauge (its bad side is low) are not causes, so they
/// are left out.
fn free_flow(s: &Signals, r: &NormalisedRates) -> Decision {
    // The signal nearest its threshold leads the evidence, so the verdict's
    // value is a level against a threshold, not the throughput: "free, and
    // this is how close it came".
    let (closest, closeness) = s
        .iter()
        .filter(|(_, e)| e.threshold > 0.0)
        .filter(|(signal, _)| {
            !signal.is_plateau()
                && *signal != Signal::WirePps
                && *signal != Signal::ConntrackAvailable
        })
        .map(|(signal, e)| {
            let near = if signal == Signal::RttInflationP50 {
                ((e.value - NO_INFLATION) / (e.threshold - NO_INFLATION).max(f64::MIN_POSITIVE))
                    .clamp(0.0, 1.0)
            } else {
                (e.value / e.threshold).min(1.0)
            };
            (signal, near)
        })
        .reduce(|best, x| if x.1 > best.1 { x } else { best })
        .map_or((None, 0.0), |(signal, near)| (Some(signal), near));
    let mut c = FREE.at(1.0 - closeness);
    // Blind to the hypervisor without counters, or to loss and queuing on
    // the flows when every flow that moved was untracked.
    if !r.allowance_available || super::gather::flows_unseen(r) {
        c = c.min(FREE_BLIND_MAX);
    }
    (Verdict::FreeFlow, c, closest.unwrap_or(Signal::WirePps))
}
