//! Gather every signal that can be judged this interval, each compared with
//! its threshold, in the order the evidence lists them: traffic, the
//! hypervisor's allowances, the flows, the host queue, the plateaus.

use super::rates::NormalisedRates;
use super::signal::{fmt_num, Signal, Signals};
use super::thresholds::Thresholds;
use crate::model::snapshot::{AllowanceStatus, InterfaceSample};

/// A coefficient of variation needs at least two values, whatever
/// `plateau_intervals` says.
const MIN_PLATEAU_INTERVALS: usize = 2;

/// Failed retransmits judged by their share need at least one, whatever
/// `local_failed_retrans` says: a share of nothing is not a signal.
const MIN_FAILED_RETRANSMITS: f64 = 1.0;

/// Intervals the throughput plateau is judged over.
pub(super) fn plateau_window(th: &Thresholds) -> usize {
    Thresholds::count(th.plateau_intervals).max(MIN_PLATEAU_INTERVALS)
}

/// Throughput flatness over the recent intervals: coefficient of variation
/// of `history` (oldest first, the current interval last).
pub(crate) fn plateau_cv(history: &[f64], th: &Thresholds) -> Option<f64> {
    let n = plateau_window(th);
    if history.len() < n {
        return None;
    }
    let w = &history[history.len() - n..];
    let mean = w.iter().sum::<f64>() / n as f64;
    if mean <= 0.0 {
        return None;
    }
    let var = w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    Some(var.sqrt() / mean)
}

/// Gather every signal that can be judged this interval.
pub(super) fn gather_signals(
    r: &NormalisedRates,
    iface: &InterfaceSample,
    untrusted: Option<&str>,
    tx_history: &[f64],
    rx_history: &[f64],
    th: &Thresholds,
) -> Signals {
    let mut s = Signals::new();
    // An interval of unknown length counts as one second: per-second rates
    // are then the interval's counts.
    let secs = if r.interval_secs > 0.0 {
        r.interval_secs
    } else {
        1.0
    };
    traffic(&mut s, r, secs, th);
    allowances(&mut s, r, iface, untrusted, secs, th);
    flows(&mut s, r, th);
    untracked(&mut s, r);
    host_queue(&mut s, r, th);
    failed_retransmits(&mut s, r, th);
    plateaus(&mut s, tx_history, rx_history, th);
    s
}

/// Whether every TCP byte of the interval went through untracked sockets:
/// the flows could not be seen at all. (The shares are both set once
/// untracked sockets moved anything; a direction is None when no socket
/// moved a byte that way.)
pub(super) fn flows_unseen(r: &NormalisedRates) -> bool {
    let all = |p: Option<f64>| p.is_none_or(|p| p >= 100.0);
    (r.untracked_sent_pct.is_some() || r.untracked_received_pct.is_some())
        && all(r.untracked_sent_pct)
        && all(r.untracked_received_pct)
}

/// The untracked sockets' part of the traffic, when they moved any: the
/// flow signals (retransmits, RTT inflation, data waiting) and the backoff
/// ranking are computed without them, so a reader must know how much they
/// miss. A note, never a cause: what the untracked sockets suffered is not
/// known.
fn untracked(s: &mut Signals, r: &NormalisedRates) {
    let (sent, received) = (r.untracked_sent_pct, r.untracked_received_pct);
    if sent.is_none() && received.is_none() {
        return;
    }
    // Whole percents: the bytes are counted at each socket's events, so a
    // share is as of its last one, not to the byte.
    let share = |p: Option<f64>| format!("~{}%", fmt_num(p.unwrap_or(0.0).round()));
    let why = if r.max_flows > 0 {
        format!("--max-flows {} reached, or storage refused", r.max_flows)
    } else {
        "socket storage could not be created".to_string()
    };
    let note = if flows_unseen(r) {
        format!(
            "flows not seen: untracked sockets ({} open; {why}) carried {} of the TCP \
             bytes sent and {} of those received: retransmits, RTTs and backoff of \
             that traffic are unknown, so loss and queuing on it are neither seen nor \
             excluded",
            r.untracked_flows,
            share(sent),
            share(received)
        )
    } else {
        format!(
            "untracked sockets ({} open; {why}) carried {} of the TCP bytes sent and {} \
             of those received: per-flow figures (retransmits, RTTs, backoff ranking) \
             are incomplete",
            r.untracked_flows,
            share(sent),
            share(received)
        )
    };
    let value = sent.unwrap_or(0.0).max(received.unwrap_or(0.0));
    s.push(Signal::UntrackedFlows, value, 0.0, note, false);
}

/// Offered packets: what went out and in, and what the host dropped on the
/// way out (a host that drops everything is not idle).
fn traffic(s: &mut Signals, r: &NormalisedRates, secs: f64, th: &Thresholds) {
    let offered_pps = r.wire_pps + r.local_drops as f64 / secs;
    s.add(
        Signal::WirePps,
        offered_pps,
        th.idle_pps,
        " wire packets/s (tx+rx)",
    );
}

/// The hypervisor's allowance counters, or why there are none to judge.
fn allowances(
    s: &mut Signals,
    r: &NormalisedRates,
    iface: &InterfaceSample,
    untrusted: Option<&str>,
    secs: f64,
    th: &Thresholds,
) {
    match (untrusted, &iface.allowance) {
        (Some(reason), _) => allowance_unavailable(s, Signal::AllowanceUntrusted, reason),
        (None, AllowanceStatus::Unavailable { reason }) => {
            allowance_unavailable(s, Signal::AllowanceUnavailable, reason)
        }
        (None, AllowanceStatus::Read(_)) => {
            shaper_rates(s, r, th);
            dropping_allowances(s, r, secs, th);
        }
    }
}

fn allowance_unavailable(s: &mut Signals, signal: Signal, reason: &str) {
    s.note(
        signal,
        format!(
            "allowance counters unavailable ({reason}): hypervisor shaping can be \
             neither seen nor excluded, so no hypervisor verdict is given"
        ),
    )
}

/// The shaper's rates (bandwidth each way, packets), each judged only when
/// its own denominator has `min_rate_packets`.
fn shaper_rates(s: &mut Signals, r: &NormalisedRates, th: &Thresholds) {
    let min = th.min_rate_packets;
    if let Some(p) = r.bw_out_pct.filter(|_| r.tx_wire_packets as f64 >= min) {
        s.add(
            Signal::BwOutAllowancePct,
            p,
            th.bw_allowance_pct,
            "% of tx wire packets queued or dropped for bw_out",
        );
    }
    if let Some(p) = r.bw_in_pct.filter(|_| r.rx_wire_packets as f64 >= min) {
        s.add(
            Signal::BwInAllowancePct,
            p,
            th.bw_allowance_pct,
            "% of rx wire packets queued or dropped for bw_in",
        );
    }
    let both = (r.tx_wire_packets + r.rx_wire_packets) as f64;
    if let Some(p) = r.pps_pct.filter(|_| both >= min) {
        s.add(
            Signal::PpsAllowancePct,
            p,
            th.pps_allowance_pct,
            "% of tx+rx wire packets queued or dropped for pps",
        );
    }
}

/// Allowances whose every count is a dropped packet (conntrack,
/// link-local), and the conntrack table's room left. A threshold of 0 is
/// raised to the smallest positive rate so that no drops never exceed it.
fn dropping_allowances(s: &mut Signals, r: &NormalisedRates, secs: f64, th: &Thresholds) {
    if let Some(n) = r.conntrack_exceeded {
        s.add(
            Signal::ConntrackExceededPerS,
            n as f64 / secs,
            th.conntrack_exceeded_per_s.max(f64::MIN_POSITIVE),
            " packets/s dropped by conntrack allowance",
        );
    }
    if let Some(a) = r.conntrack_available {
        // Low is the bad side here: exceeded at or below the threshold.
        let low = a as f64 <= th.conntrack_available_low;
        s.push(
            Signal::ConntrackAvailable,
            a as f64,
            th.conntrack_available_low,
            format!(
                "conntrack_allowance_available {a} entries {} {}",
                if low { "<=" } else { ">" },
                fmt_num(th.conntrack_available_low)
            ),
            low,
        );
    }
    if let Some(n) = r.linklocal_exceeded {
        s.add(
            Signal::LinklocalExceededPerS,
            n as f64 / secs,
            th.linklocal_exceeded_per_s.max(f64::MIN_POSITIVE),
            " packets/s dropped by link-local allowance",
        );
    }
}

/// What the flows say: loss, RTT inflation, and whether the senders or the
/// receivers were the limit.
fn flows(s: &mut Signals, r: &NormalisedRates, th: &Thresholds) {
    if let Some(p) = r.retransmit_pct {
        if r.segs_out as f64 >= th.min_segs_out {
            s.add(
                Signal::RetransmitPct,
                p,
                th.retrans_pct,
                &if r.retrans_spurious > 0 {
                    format!(
                        "% of {} segments retransmitted and not reported spurious \
                         ({} spurious by D-SACK or undo not counted)",
                        r.segs_out, r.retrans_spurious
                    )
                } else {
                    format!("% of {} segments retransmitted", r.segs_out)
                },
            );
        }
    }
    if let Some(i) = r.rtt_inflation_p50 {
        s.add(
            Signal::RttInflationP50,
            i,
            th.rtt_inflation,
            &format!(
                "x srtt/min_rtt (byte-weighted median over {} sending flows{})",
                r.active_flows,
                r.added_delay_p50_us.map_or(String::new(), |d| format!(
                    "; {} added",
                    crate::shared::units::secs(d / 1e6)
                ))
            ),
        );
    }
    if let Some(p) = r.data_waiting_pct {
        s.add(
            Signal::DataWaitingPct,
            p,
            th.cap_data_waiting_pct,
            "% of the sending flows' incoming segments found data written and not yet sent",
        );
    }
    if let Some(p) = r.rwnd_limited_pct {
        s.add(
            Signal::RwndLimitedPct,
            p,
            th.cap_rwnd_limited_pct,
            "% of the sending flows' busy time stalled by the receivers' windows",
        );
    }
}

/// The host's qdisc and egress drops, or a note that the probes are not
/// reporting.
fn host_queue(s: &mut Signals, r: &NormalisedRates, th: &Thresholds) {
    if !r.host_queue_available {
        s.note(
            Signal::HostQueueUnavailable,
            "host queue probes not reporting: host queuing and drops are judged from \
             failed retransmits only"
                .into(),
        );
        return;
    }
    if r.host_queue_paused {
        s.note(
            Signal::HostQueuePaused,
            "per-packet programs paused for part of the interval (--per-packet auto): \
             host qdisc backlog, sojourn and peak rates (microbursts) not measured; \
             host drops are"
                .into(),
        );
    } else {
        s.add(
            Signal::LocalBacklogPackets,
            r.local_backlog_packets as f64,
            th.local_backlog_packets,
            " packets peak host qdisc backlog",
        );
    }
    if let Some(us) = r.local_sojourn_mean_us {
        s.add(
            Signal::LocalSojournUs,
            us as f64,
            th.local_sojourn_us,
            "us mean host qdisc sojourn",
        );
    }
    let attempted = r.tx_wire_packets + r.local_drops;
    let drop_pct = if attempted > 0 {
        r.local_drops as f64 / attempted as f64 * 100.0
    } else {
        0.0
    };
    let hit = s.add(
        Signal::LocalDropPct,
        drop_pct,
        th.local_drop_pct,
        &format!("% of tx packets dropped by the host ({})", r.local_drops),
    );
    if hit && r.local_drops == 0 {
        // A 0% threshold must not turn "no drops" into a drop verdict.
        s.unexceed_last();
    }
}

/// Retransmits that could not be sent, the original still in a host queue.
/// Judged as a share of retransmit attempts: a lossy path also sees a few
/// failed attempts (measured: 2-5 per second against ~11,000 retransmits at
/// 1% random loss), a host queue makes them common.
fn failed_retransmits(s: &mut Signals, r: &NormalisedRates, th: &Thresholds) {
    let attempts = r.failed_retransmits + r.retrans_segs;
    let failed_pct = if attempts > 0 {
        r.failed_retransmits as f64 * 100.0 / attempts as f64
    } else {
        0.0
    };
    let failed = s.add(
        Signal::FailedRetransmits,
        failed_pct,
        th.local_failed_retrans_pct,
        &format!(
            "% of retransmit attempts failed, original still in a host queue ({} failed)",
            r.failed_retransmits
        ),
    );
    if failed && (r.failed_retransmits as f64) < th.local_failed_retrans.max(MIN_FAILED_RETRANSMITS)
    {
        s.unexceed_last();
    }
}

/// Throughput flat over the last intervals, each way: corroboration only.
/// Flat is the "exceeded" side (cv at or below the threshold).
fn plateaus(s: &mut Signals, tx_history: &[f64], rx_history: &[f64], th: &Thresholds) {
    if let Some(cv) = plateau_cv(tx_history, th) {
        let flat = cv <= th.plateau_cv;
        s.push(
            Signal::TxPlateauCv,
            cv,
            th.plateau_cv,
            format!(
                "tx throughput {} over the last {} intervals (cv {} {} {})",
                if flat { "flat" } else { "varies" },
                plateau_window(th),
                fmt_num(cv),
                if flat { "<=" } else { ">" },
                fmt_num(th.plateau_cv)
            ),
            flat,
        );
    }
    if let Some(cv) = plateau_cv(rx_history, th) {
        let flat = cv <= th.plateau_cv;
        s.push(
            Signal::RxPlateauCv,
            cv,
            th.plateau_cv,
            format!("rx throughput cv {}", fmt_num(cv)),
            flat,
        );
    }
}
