//! One interface, one interval: what is holding the network back.
//!
//! The decision is a fixed order of questions (docs/verdicts.md, "Decision
//! order"); the first that says yes wins. Every signal that could be judged
//! is kept as evidence, the winning one first, so a reader can check the
//! verdict against the numbers.

pub use super::outcome::{Evidence, InterfaceVerdict, Location, Verdict, VerdictFamily};

use super::outcome::HeldVerdict;
use super::rates::NormalisedRates;
use super::thresholds::Thresholds;
use super::trust::UNTRUSTED_SIGNAL;
use crate::model::snapshot::{AllowanceStatus, InterfaceSample};

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

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The unit a `what` text starts with, repeated after the threshold.
fn unit_of(what: &str) -> &'static str {
    if what.starts_with('%') {
        "%"
    } else if what.starts_with("us") {
        "us"
    } else if what.starts_with('x') {
        "x"
    } else {
        ""
    }
}

/// Every judged signal of an interval, by name.
struct Signals {
    list: Vec<Evidence>,
}

impl Signals {
    fn add(&mut self, signal: &str, value: f64, threshold: f64, what: &str) -> bool {
        let exceeded = value >= threshold;
        let cmp = if exceeded { ">=" } else { "<" };
        self.list.push(Evidence {
            signal: signal.into(),
            value,
            threshold,
            note: format!(
                "{signal} {}{what} {cmp} {}{}",
                fmt_num(value),
                fmt_num(threshold),
                unit_of(what)
            ),
            exceeded,
        });
        exceeded
    }

    fn note(&mut self, signal: &str, note: String) {
        self.list.push(Evidence {
            signal: signal.into(),
            value: 0.0,
            threshold: 0.0,
            note,
            exceeded: false,
        });
    }

    fn get(&self, signal: &str) -> Option<&Evidence> {
        self.list.iter().find(|e| e.signal == signal)
    }

    fn value(&self, signal: &str) -> Option<f64> {
        self.get(signal).map(|e| e.value)
    }

    fn hit(&self, signal: &str) -> bool {
        self.get(signal).is_some_and(|e| e.exceeded)
    }

    /// The evidence list with `primary` first.
    fn ordered(mut self, primary: &str) -> Vec<Evidence> {
        if let Some(i) = self.list.iter().position(|e| e.signal == primary) {
            let p = self.list.remove(i);
            self.list.insert(0, p);
        }
        self.list
    }
}

/// Throughput flatness over the recent intervals: coefficient of variation
/// of `history` (oldest first, the current interval last).
pub(crate) fn plateau_cv(history: &[f64], th: &Thresholds) -> Option<f64> {
    let n = Thresholds::count(th.plateau_intervals).max(2);
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
fn collect(
    r: &NormalisedRates,
    iface: &InterfaceSample,
    untrusted: Option<&str>,
    tx_history: &[f64],
    rx_history: &[f64],
    th: &Thresholds,
) -> Signals {
    let mut s = Signals { list: Vec::new() };
    let secs = if r.interval_secs > 0.0 {
        r.interval_secs
    } else {
        1.0
    };
    let min = th.min_rate_packets;
    let offered_pps = r.wire_pps + r.local_drops as f64 / secs;
    s.add(
        "wire_pps",
        offered_pps,
        th.idle_pps,
        " wire packets/s (tx+rx)",
    );

    let unavailable = |s: &mut Signals, signal: &str, reason: &str| {
        s.note(
            signal,
            format!(
                "allowance counters unavailable ({reason}): hypervisor shaping can be \
                 neither seen nor excluded, so no hypervisor verdict is given"
            ),
        )
    };
    match (untrusted, &iface.allowance) {
        (Some(reason), _) => unavailable(&mut s, UNTRUSTED_SIGNAL, reason),
        (None, AllowanceStatus::Unavailable { reason }) => {
            unavailable(&mut s, "allowance_unavailable", reason)
        }
        (None, AllowanceStatus::Read(_)) => {
            if let Some(p) = r.bw_out_pct.filter(|_| r.tx_wire_packets as f64 >= min) {
                s.add(
                    "bw_out_allowance_pct",
                    p,
                    th.bw_allowance_pct,
                    "% of tx wire packets queued or dropped for bw_out",
                );
            }
            if let Some(p) = r.bw_in_pct.filter(|_| r.rx_wire_packets as f64 >= min) {
                s.add(
                    "bw_in_allowance_pct",
                    p,
                    th.bw_allowance_pct,
                    "% of rx wire packets queued or dropped for bw_in",
                );
            }
            let both = (r.tx_wire_packets + r.rx_wire_packets) as f64;
            if let Some(p) = r.pps_pct.filter(|_| both >= min) {
                s.add(
                    "pps_allowance_pct",
                    p,
                    th.pps_allowance_pct,
                    "% of tx+rx wire packets queued or dropped for pps",
                );
            }
            if let Some(n) = r.conntrack_exceeded {
                s.add(
                    "conntrack_allowance_exceeded_per_s",
                    n as f64 / secs,
                    th.conntrack_exceeded_per_s.max(f64::MIN_POSITIVE),
                    " packets/s dropped by conntrack allowance",
                );
            }
            if let Some(a) = r.conntrack_available {
                let low = a as f64 <= th.conntrack_available_low;
                s.list.push(Evidence {
                    signal: "conntrack_allowance_available".into(),
                    value: a as f64,
                    threshold: th.conntrack_available_low,
                    note: format!(
                        "conntrack_allowance_available {a} entries {} {}",
                        if low { "<=" } else { ">" },
                        fmt_num(th.conntrack_available_low)
                    ),
                    exceeded: low,
                });
            }
            if let Some(n) = r.linklocal_exceeded {
                s.add(
                    "linklocal_allowance_exceeded_per_s",
                    n as f64 / secs,
                    th.linklocal_exceeded_per_s.max(f64::MIN_POSITIVE),
                    " packets/s dropped by link-local allowance",
                );
            }
        }
    }

    if let Some(p) = r.retransmit_pct {
        if r.segs_out as f64 >= th.min_segs_out {
            s.add(
                "retransmit_pct",
                p,
                th.retrans_pct,
                &format!("% of {} segments retransmitted", r.segs_out),
            );
        }
    }
    if let Some(i) = r.rtt_inflation_p50 {
        s.add(
            "rtt_inflation_p50",
            i,
            th.rtt_inflation,
            &format!(
                "x srtt/min_rtt (byte-weighted median over {} sending flows)",
                r.active_flows
            ),
        );
    }
    if let Some(p) = r.data_waiting_pct {
        s.add(
            "data_waiting_pct",
            p,
            th.cap_data_waiting_pct,
            "% of the sending flows' incoming segments found data written and not yet sent",
        );
    }
    if let Some(p) = r.rwnd_limited_pct {
        s.add(
            "rwnd_limited_pct",
            p,
            th.cap_rwnd_limited_pct,
            "% of the sending flows' busy time stalled by the receivers' windows",
        );
    }
    if r.host_queue_available {
        s.add(
            "local_backlog_packets",
            r.local_backlog_packets as f64,
            th.local_backlog_packets,
            " packets peak host qdisc backlog",
        );
        if let Some(us) = r.local_sojourn_mean_us {
            s.add(
                "local_sojourn_us",
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
            "local_drop_pct",
            drop_pct,
            th.local_drop_pct,
            &format!("% of tx packets dropped by the host ({})", r.local_drops),
        );
        if hit && r.local_drops == 0 {
            // A 0% threshold must not turn "no drops" into a drop verdict.
            s.list.last_mut().expect("just added").exceeded = false;
        }
    } else {
        s.note(
            "host_queue_unavailable",
            "host queue probes not reporting: host queuing and drops are judged from \
             failed retransmits only"
                .into(),
        );
    }
    // Judged as a share of retransmit attempts: a lossy path also sees a
    // few failed attempts (measured: 2-5 per second against ~11,000
    // retransmits at 1% random loss), a host queue makes them common.
    let attempts = r.failed_retransmits + r.retrans_segs;
    let failed_pct = if attempts > 0 {
        r.failed_retransmits as f64 * 100.0 / attempts as f64
    } else {
        0.0
    };
    let failed = s.add(
        "failed_retransmits",
        failed_pct,
        th.local_failed_retrans_pct,
        &format!(
            "% of retransmit attempts failed, original still in a host queue ({} failed)",
            r.failed_retransmits
        ),
    );
    if failed && (r.failed_retransmits as f64) < th.local_failed_retrans.max(1.0) {
        s.list.last_mut().expect("just added").exceeded = false;
    }
    if let Some(cv) = plateau_cv(tx_history, th) {
        let flat = cv <= th.plateau_cv;
        s.list.push(Evidence {
            signal: "tx_plateau_cv".into(),
            value: cv,
            threshold: th.plateau_cv,
            note: format!(
                "tx throughput {} over the last {} intervals (cv {} {} {})",
                if flat { "flat" } else { "varies" },
                Thresholds::count(th.plateau_intervals).max(2),
                fmt_num(cv),
                if flat { "<=" } else { ">" },
                fmt_num(th.plateau_cv)
            ),
            exceeded: flat,
        });
    }
    if let Some(cv) = plateau_cv(rx_history, th) {
        let flat = cv <= th.plateau_cv;
        s.list.push(Evidence {
            signal: "rx_plateau_cv".into(),
            value: cv,
            threshold: th.plateau_cv,
            note: format!("rx throughput cv {}", fmt_num(cv)),
            exceeded: flat,
        });
    }
    s
}

/// Decide one interface's verdict. `tx_history`/`rx_history` hold this
/// interface's throughput (bps) of the previous intervals, oldest first,
/// then the current one. `untrusted`: why this interval's allowance read
/// is no data (src/analysis/trust.rs); `rates` then carry no allowance part.
pub fn judge(
    iface: &InterfaceSample,
    rates: NormalisedRates,
    untrusted: Option<&str>,
    tx_history: &[f64],
    rx_history: &[f64],
    th: &Thresholds,
) -> InterfaceVerdict {
    let s = collect(&rates, iface, untrusted, tx_history, rx_history, th);
    let (verdict, confidence, primary) = decide(&s, &rates, th);
    let mut evidence = s.ordered(primary);
    if verdict == Verdict::FreeFlow {
        evidence.insert(
            0,
            Evidence {
                signal: "tx_bps".into(),
                value: rates.tx_bps,
                threshold: 0.0,
                note: format!(
                    "no allowance, loss or host-queue signal past its threshold; tx {:.3} Gbps, \
                     rx {:.3} Gbps{}",
                    rates.tx_bps / 1e9,
                    rates.rx_bps / 1e9,
                    if evidence
                        .iter()
                        .any(|e| e.signal == "rtt_inflation_p50" && e.exceeded)
                    {
                        " (RTTs inflated with no cause seen here: queuing further away, or \
                         receivers reading slowly)"
                    } else {
                        ""
                    }
                ),
                exceeded: false,
            },
        );
    }
    if verdict == Verdict::PpsLimit {
        // Fragmented egress has a packet-rate limit of its own that counts
        // in pps_allowance_exceeded too: say whether there was any.
        let frags = match rates.fragments_per_s {
            Some(f) if f > 0.0 => format!(
                "; the host sent {} IPv4 fragments/s: fragments have a packet-rate limit of \
                 their own that counts here too (check the MTU toward the peers)",
                fmt_num(f)
            ),
            Some(_) => "; no IPv4 fragments sent: whole packets are over the allowance".into(),
            None => "; IPv4 fragments sent unknown".into(),
        };
        if let Some(e) = evidence.first_mut() {
            e.note.push_str(&frags);
        }
    }
    if verdict == Verdict::HypervisorCap {
        let value = rates.bw_out_pct.unwrap_or(0.0);
        let flat = evidence
            .iter()
            .find(|e| e.signal == "tx_plateau_cv")
            .map_or(
                format!(
                    "flatness not known yet: {} intervals needed",
                    Thresholds::count(th.plateau_intervals).max(2)
                ),
                |e| format!("cv {}", fmt_num(e.value)),
            );
        evidence.insert(
            0,
            Evidence {
                signal: "bw_out_cap_pct".into(),
                value,
                threshold: th.cap_allowance_pct,
                note: format!(
                    "hard cap: tx at {:.3} Gbps ({flat}), the senders had data waiting in {}% \
                     of their incoming segments, and bw_out counted {}% of tx wire packets \
                     (>= {}%, under the {}% line); a bottleneck beyond the hypervisor would read \
                     alike only if the counter's microbursts coincided",
                    rates.tx_bps / 1e9,
                    fmt_num(rates.data_waiting_pct.unwrap_or(0.0)),
                    fmt_num(value),
                    th.cap_allowance_pct,
                    th.bw_allowance_pct
                ),
                exceeded: true,
            },
        );
    }
    InterfaceVerdict {
        iface: iface.name.clone(),
        verdict,
        confidence: (confidence.clamp(0.05, 1.0) * 1000.0).round() / 1000.0,
        evidence,
        rates,
        held: HeldVerdict::default(),
    }
}

fn decide(s: &Signals, r: &NormalisedRates, th: &Thresholds) -> (Verdict, f64, &'static str) {
    let v = |name: &str| s.value(name).unwrap_or(0.0);
    let retrans_hit = s.hit("retransmit_pct");
    let retrans = v("retransmit_pct");
    let rtt_hit = s.hit("rtt_inflation_p50");
    let allowance = r.allowance_available;

    // 1-2. Allowances whose every count is a dropped packet: they shrink
    // traffic themselves, so they are checked before "idle".
    let ct_rate = s.hit("conntrack_allowance_exceeded_per_s");
    let ct_low = s.hit("conntrack_allowance_available");
    if ct_rate || ct_low {
        let c = if ct_rate {
            0.6 + 0.3
                * past(
                    v("conntrack_allowance_exceeded_per_s"),
                    th.conntrack_exceeded_per_s,
                    th.conntrack_exceeded_per_s * 100.0,
                )
                + if ct_low { 0.1 } else { 0.0 }
        } else {
            0.5
        };
        let primary = if ct_rate {
            "conntrack_allowance_exceeded_per_s"
        } else {
            "conntrack_allowance_available"
        };
        return (Verdict::ConntrackLimit, c, primary);
    }
    if s.hit("linklocal_allowance_exceeded_per_s") {
        let c = 0.6
            + 0.4
                * past(
                    v("linklocal_allowance_exceeded_per_s"),
                    th.linklocal_exceeded_per_s,
                    th.linklocal_exceeded_per_s * 100.0,
                );
        return (
            Verdict::LinklocalLimit,
            c,
            "linklocal_allowance_exceeded_per_s",
        );
    }

    // 3. Too little traffic for any rate to mean anything.
    if !s.hit("wire_pps") {
        let c = 1.0 - 0.5 * (v("wire_pps") / th.idle_pps.max(f64::MIN_POSITIVE)).min(1.0);
        return (Verdict::Idle, c, "wire_pps");
    }

    // 4. Hypervisor allowances: the one furthest past its threshold wins.
    let ratio = |name: &str, t: f64| s.hit(name).then(|| v(name) / t.max(f64::MIN_POSITIVE));
    let candidates = [
        (
            "bw_out_allowance_pct",
            ratio("bw_out_allowance_pct", th.bw_allowance_pct),
        ),
        (
            "bw_in_allowance_pct",
            ratio("bw_in_allowance_pct", th.bw_allowance_pct),
        ),
        (
            "pps_allowance_pct",
            ratio("pps_allowance_pct", th.pps_allowance_pct),
        ),
    ];
    let top = candidates
        .iter()
        .filter_map(|(n, r)| r.map(|r| (*n, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((name, _)) = top {
        let agree = |c: f64| {
            c + if rtt_hit { 0.05 } else { 0.0 }
                + if s.hit("tx_plateau_cv") || s.hit("rx_plateau_cv") {
                    0.05
                } else {
                    0.0
                }
        };
        return match name {
            "pps_allowance_pct" => {
                let c = 0.6
                    + 0.3
                        * past(
                            v(name),
                            th.pps_allowance_pct,
                            100.0_f64.max(th.pps_allowance_pct * 2.0),
                        );
                (Verdict::PpsLimit, agree(c), name)
            }
            "bw_out_allowance_pct" if retrans_hit => {
                let c = 0.5
                    + 0.25 * past(v(name), th.bw_allowance_pct, th.bw_enforced_pct)
                    + 0.25 * past(retrans, th.retrans_pct, th.retrans_severe_pct);
                (Verdict::HypervisorDrop, c, name)
            }
            _ => {
                let mut c =
                    agree(0.6 + 0.3 * past(v(name), th.bw_allowance_pct, th.bw_enforced_pct));
                // Retransmits above normal but below the loss line: the
                // queue may have begun to overflow.
                if retrans >= th.retrans_normal_pct && name == "bw_out_allowance_pct" {
                    c -= 0.15;
                }
                (Verdict::HypervisorQueuing, c, name)
            }
        };
    }

    // 4b. A hard cap: under the bandwidth line, but the senders want more
    // than they get (data waiting, receivers no limit), outbound
    // throughput is flat, and pushing against it queues or loses packets
    // while the hypervisor's counter climbs.
    if let Some(p) = s.value("bw_out_allowance_pct") {
        let pushing = rtt_hit || retrans_hit;
        // Flat throughput is required once it can be told: in the first
        // intervals (too little history) nothing says it is not.
        if p >= th.cap_allowance_pct
            && s.hit("data_waiting_pct")
            && !s.hit("rwnd_limited_pct")
            && s.get("tx_plateau_cv").is_none_or(|e| e.exceeded)
            && pushing
        {
            let c = 0.5
                + 0.2 * past(p, th.cap_allowance_pct.max(0.01), th.bw_allowance_pct)
                + if rtt_hit { 0.1 } else { 0.0 }
                + 0.1 * past(v("data_waiting_pct"), th.cap_data_waiting_pct, 100.0);
            return (Verdict::HypervisorCap, c, "bw_out_allowance_pct");
        }
    }

    // 5-6. The host's own queue.
    if s.hit("local_drop_pct") {
        let c = 0.6
            + 0.3
                * past(
                    v("local_drop_pct"),
                    th.local_drop_pct,
                    1.0_f64.max(th.local_drop_pct * 10.0),
                )
            + if retrans_hit { 0.1 } else { 0.0 };
        return (Verdict::LocalDrop, c, "local_drop_pct");
    }
    let backlog = s.hit("local_backlog_packets");
    let sojourn = s.hit("local_sojourn_us");
    let failed = s.hit("failed_retransmits");
    if backlog || sojourn || failed {
        let strength = past(
            v("local_backlog_packets"),
            th.local_backlog_packets,
            th.local_backlog_packets * 10.0,
        )
        .max(past(
            v("local_sojourn_us"),
            th.local_sojourn_us,
            th.local_sojourn_us * 10.0,
        ));
        let agreeing = [backlog || sojourn, failed, rtt_hit]
            .iter()
            .filter(|x| **x)
            .count();
        let c = 0.45 + 0.3 * strength + 0.1 * agreeing as f64;
        let primary = if backlog {
            "local_backlog_packets"
        } else if sojourn {
            "local_sojourn_us"
        } else {
            "failed_retransmits"
        };
        return (Verdict::LocalQueuing, c, primary);
    }

    // 7. Loss with neither the hypervisor nor the host to blame.
    if retrans_hit {
        let mut c = 0.5 + 0.4 * past(retrans, th.retrans_pct, th.retrans_severe_pct);
        if !allowance {
            // The hypervisor could be dropping: we cannot see it.
            c *= 0.6;
        } else if v("bw_out_allowance_pct") >= th.bw_allowance_pct * 0.5 {
            // Allowance rate not far below its line: could be either.
            c *= 0.8;
        }
        if !r.host_queue_available {
            c *= 0.85;
        }
        return (Verdict::NetworkLoss, c, "retransmit_pct");
    }

    // 8. Nothing past its threshold.
    let closeness = s
        .list
        .iter()
        .filter(|e| e.threshold > 0.0 && !e.signal.ends_with("plateau_cv"))
        .filter(|e| e.signal != "wire_pps" && e.signal != "conntrack_allowance_available")
        .map(|e| {
            if e.signal == "rtt_inflation_p50" {
                // An inflation of 1.0 is no queueing at all.
                ((e.value - 1.0) / (e.threshold - 1.0).max(f64::MIN_POSITIVE)).clamp(0.0, 1.0)
            } else {
                (e.value / e.threshold).min(1.0)
            }
        })
        .fold(0.0_f64, f64::max);
    let mut c = 0.5 + 0.5 * (1.0 - closeness);
    if !allowance {
        c = c.min(0.6);
    }
    (Verdict::FreeFlow, c, "tx_bps")
}
