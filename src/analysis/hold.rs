//! Held verdicts: the per-interval judgement smoothed over a short window,
//! with hysteresis, so one noisy second neither starts nor ends a verdict.
//!
//! Counters are noisy from one second to the next: in free flow the
//! normalised bw rate reads anywhere from 0 to about 70% per second, and
//! the first round trips of new flows retransmit. The field figures behind
//! the 50% line were measured over minutes. So a verdict other than idle or
//! free flow is *held* only when
//!
//! - at least `hold_onset_intervals` of the last `hold_window` intervals
//!   were judged it or a verdict of its kind ([`Kind`]), and
//! - for the allowance and loss verdicts, the signal over the window (the
//!   mean of the intervals' allowance rates; retransmits over segments sent)
//!   reaches `hold_onset_ratio` times its threshold;
//!
//! and its onset is dated to the first interval of the run that did so.
//! When the intervals of a hypervisor kind in the window microburst (their
//! peak rate far above their mean, verdict.rs) and every interval of the
//! window is at least at the exit level (`hold_exit_ratio` of the
//! threshold), the onset level is `microburst_onset_ratio` times the
//! threshold instead: traffic queued in every burst counts a share of its
//! packets that never reaches the windowed level of a steady enforcement,
//! and is held all the same. Free flow in bursts reaches the line in single
//! seconds between seconds of plain free flow (under the exit level): those
//! are isolated seconds, and keep the steady onset however they burst.
//! It ends only after `hold_exit_intervals` intervals in a row without
//! support (judged neither it nor its kind, and its windowed signal below
//! `hold_exit_ratio` of the threshold); the verdict that follows is dated
//! to the interval after the last one judged of its kind. Idle and free flow follow the interval's own
//! judgement at once. All of it is a function of the intervals seen, so a
//! recording judged again gives the same held verdicts.

use std::collections::VecDeque;

pub(crate) use super::outcome::HeldVerdict;
use super::outcome::{InterfaceVerdict, Verdict};
use super::signal::Signal;
use super::thresholds::Thresholds;

impl HeldVerdict {
    fn onset(&self) -> Onset {
        Onset {
            seq: self.since_seq,
            start_ns: self.since_mono_ns,
        }
    }
}

/// Verdicts that support each other while held: the same cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Calm,
    HypervisorBandwidth,
    /// Its own kind: a cap is judged under the bandwidth line, so the
    /// bandwidth kind's windowed onset level would never hold it.
    HypervisorCap,
    Pps,
    Conntrack,
    Linklocal,
    Host,
    Network,
}

/// The order in which kinds win a tie: the decision order of the verdict
/// engine (docs/verdicts.md).
const KIND_ORDER: [Kind; 7] = [
    Kind::Conntrack,
    Kind::Linklocal,
    Kind::HypervisorBandwidth,
    Kind::Pps,
    Kind::HypervisorCap,
    Kind::Host,
    Kind::Network,
];

/// Two verdicts of one cause (queuing and drop at the hypervisor, or at
/// the host): an episode goes on from one to the other.
pub(crate) fn same_kind(a: Verdict, b: Verdict) -> bool {
    kind(a) == kind(b) && kind(a) != Kind::Calm
}

fn kind(v: Verdict) -> Kind {
    match v {
        Verdict::Idle | Verdict::FreeFlow => Kind::Calm,
        Verdict::HypervisorQueuing | Verdict::HypervisorDrop => Kind::HypervisorBandwidth,
        Verdict::HypervisorCap => Kind::HypervisorCap,
        Verdict::PpsLimit => Kind::Pps,
        Verdict::ConntrackLimit => Kind::Conntrack,
        Verdict::LinklocalLimit => Kind::Linklocal,
        Verdict::LocalQueuing | Verdict::LocalDrop => Kind::Host,
        Verdict::NetworkLoss => Kind::Network,
    }
}

/// What the window keeps of one interval.
#[derive(Debug, Clone)]
struct Entry {
    seq: u64,
    start_ns: u64,
    end_ns: u64,
    raw: Verdict,
    confidence: f64,
    allowance: bool,
    tx_wire: u64,
    rx_wire: u64,
    bw_out: Option<u64>,
    bw_in: Option<u64>,
    pps: Option<u64>,
    segs_out: u64,
    /// Retransmits not reported spurious.
    retrans: u64,
    /// The interval's microburst line (verdict.rs), when its own verdict
    /// is a hypervisor rate limit whose interval microbursts.
    microburst: Option<String>,
    /// Who used the allowance, as the interval's first line says it after
    /// its deciding figure, for the verdicts that name them (pps,
    /// conntrack, link-local: docs/verdicts.md), and its Kafka role line
    /// (`who_used`).
    who: Option<String>,
}

/// Who used the allowance in `v`: the part of its first line that names
/// them (after the deciding figure, before any microburst, which the held
/// note adds on its own), for the verdicts that name them, and the Kafka
/// role that carried most of the deciding direction's bytes (its
/// `kafka_role_pct` line, kafka_roles.rs), for the hypervisor verdicts
/// that have one. A held verdict's note names them from the latest
/// interval of its verdict, so an interval held on without its own (the
/// counters still for a moment) still says who used the allowance.
fn who_used(v: &InterfaceVerdict) -> Option<String> {
    let own = matches!(
        v.verdict,
        Verdict::PpsLimit | Verdict::ConntrackLimit | Verdict::LinklocalLimit
    )
    .then(|| {
        let note = &v.evidence.first()?.note;
        let (_, rest) = note.split_once("; ")?;
        let rest = rest.split("; in microbursts: ").next().unwrap_or(rest);
        Some(rest.to_string())
    })
    .flatten();
    let kafka = v
        .evidence
        .iter()
        .find(|e| Signal::KafkaRolePct.is(e))
        .map(|e| e.note.clone());
    match (own, kafka) {
        (Some(own), Some(kafka)) => Some(format!("{own}; {kafka}")),
        (own, kafka) => own.or(kafka),
    }
}

/// Where a held verdict is dated from: an interval and its start.
#[derive(Debug, Clone, Copy)]
struct Onset {
    seq: u64,
    start_ns: u64,
}

impl Entry {
    fn onset(&self) -> Onset {
        Onset {
            seq: self.seq,
            start_ns: self.start_ns,
        }
    }
}

/// A signal summed over the window: its name, value and threshold.
struct Windowed {
    signal: Signal,
    value: f64,
    threshold: f64,
}

/// The mean over the window of an interval's exceeded share of packets,
/// in %, over the intervals with counters and enough packets to judge.
/// Each interval counts once, not by its packets: a burst at a high rate
/// just before enforcement would otherwise drown its first intervals.
fn summed_pct<'a>(
    w: impl Iterator<Item = &'a Entry>,
    part: impl Fn(&Entry) -> Option<u64>,
    whole: impl Fn(&Entry) -> u64,
    min_packets: f64,
) -> Option<f64> {
    let pcts: Vec<f64> = w
        .filter(|e| e.allowance && whole(e) as f64 >= min_packets.max(1.0))
        .filter_map(|e| part(e).map(|p| p as f64 * 100.0 / whole(e) as f64))
        .collect();
    (!pcts.is_empty()).then(|| pcts.iter().sum::<f64>() / pcts.len() as f64)
}

/// The signal of `k` over the intervals `w` (the window, or one of its
/// intervals), for kinds judged by a rate.
fn windowed<'a>(
    w: impl Iterator<Item = &'a Entry> + Clone,
    k: Kind,
    th: &Thresholds,
) -> Option<Windowed> {
    let min = th.min_rate_packets;
    match k {
        Kind::HypervisorBandwidth => {
            let out = summed_pct(w.clone(), |e| e.bw_out, |e| e.tx_wire, min);
            let inn = summed_pct(w, |e| e.bw_in, |e| e.rx_wire, min);
            let (signal, value) = match (out, inn) {
                (Some(o), Some(i)) if i > o => (Signal::BwInAllowancePct, i),
                (Some(o), _) => (Signal::BwOutAllowancePct, o),
                (None, Some(i)) => (Signal::BwInAllowancePct, i),
                (None, None) => return None,
            };
            Some(Windowed {
                signal,
                value,
                threshold: th.bw_allowance_pct,
            })
        }
        Kind::Pps => {
            summed_pct(w, |e| e.pps, |e| e.tx_wire + e.rx_wire, min).map(|value| Windowed {
                signal: Signal::PpsAllowancePct,
                value,
                threshold: th.pps_allowance_pct,
            })
        }
        Kind::Network => {
            let segs: u64 = w.clone().map(|e| e.segs_out).sum();
            let retrans: u64 = w.map(|e| e.retrans).sum();
            (segs > 0 && segs as f64 >= th.min_segs_out).then(|| Windowed {
                signal: Signal::RetransmitPct,
                value: retrans as f64 * 100.0 / segs as f64,
                threshold: th.retrans_pct,
            })
        }
        _ => None,
    }
}

fn fmt_pct(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.1}%")
    } else if v >= 0.1 {
        format!("{v:.2}%")
    } else {
        format!("{v:.4}%")
    }
}

/// One interface's held verdict, advanced one interval at a time.
#[derive(Debug, Clone, Default)]
pub(crate) struct Hold {
    window: VecDeque<Entry>,
    held: Option<HeldVerdict>,
    /// The last interval judged of the held verdict's kind: a held verdict
    /// that ends is dated to end there.
    last_seen: Option<Entry>,
}

impl Hold {
    fn count(&self, k: Kind) -> usize {
        self.window.iter().filter(|e| kind(e.raw) == k).count()
    }

    fn count_verdict(&self, v: Verdict) -> usize {
        self.window.iter().filter(|e| e.raw == v).count()
    }

    /// The onset level of kind `k`, times its threshold: lower when the
    /// window microbursts (module doc, [`Hold::microbursting`]).
    fn onset_ratio(&self, k: Kind, th: &Thresholds) -> f64 {
        if self.microbursting(k, th).is_ok() {
            th.microburst_onset_ratio
        } else {
            th.hold_onset_ratio
        }
    }

    /// The window microbursts as traffic queued in every burst does,
    /// interval after interval: enough of its intervals of kind `k`
    /// microburst, and every interval with a rate of the kind supports it
    /// (its own rate at `hold_exit_ratio` of the threshold). Free flow in
    /// bursts reaches the line in single seconds between seconds of plain
    /// free flow (12-37% in the field); a window of such isolated seconds
    /// is judged at the steady onset, however they burst. Err: the lowest
    /// rate of the kind in the window, when that is what kept it from
    /// microbursting.
    fn microbursting(&self, k: Kind, th: &Thresholds) -> Result<(), Option<f64>> {
        let needed = Thresholds::count(th.hold_onset_intervals).max(1);
        let bursting = self
            .window
            .iter()
            .filter(|e| kind(e.raw) == k && e.microburst.is_some())
            .count();
        if bursting < needed {
            return Err(None);
        }
        let lowest = self
            .window
            .iter()
            .filter_map(|e| windowed(std::iter::once(e), k, th))
            .min_by(|a, b| a.value.total_cmp(&b.value));
        match lowest {
            Some(s) if s.value < s.threshold * th.hold_exit_ratio => Err(Some(s.value)),
            _ => Ok(()),
        }
    }

    /// Kind `k` may start (or go on as) a held verdict: enough intervals of
    /// it in the window, and its windowed signal at the onset level.
    fn qualifies(&self, k: Kind, th: &Thresholds) -> bool {
        let needed = Thresholds::count(th.hold_onset_intervals).max(1);
        let onset = self.onset_ratio(k, th);
        self.count(k) >= needed
            && windowed(self.window.iter(), k, th).is_none_or(|s| s.value >= s.threshold * onset)
    }

    /// An interval that can date an onset of kind `k`: judged of it and,
    /// for a rate, at the onset level itself (its own microburst's, when it
    /// microbursts).
    fn starts(e: &Entry, k: Kind, th: &Thresholds) -> bool {
        let onset = if e.microburst.is_some() {
            th.microburst_onset_ratio
        } else {
            th.hold_onset_ratio
        };
        kind(e.raw) == k
            && windowed(std::iter::once(e), k, th).is_none_or(|s| s.value >= s.threshold * onset)
    }

    /// The interval still supports a held verdict of kind `k`.
    fn supports(&self, k: Kind, th: &Thresholds) -> bool {
        let last = self.window.back().expect("pushed before");
        kind(last.raw) == k
            || windowed(self.window.iter(), k, th)
                .is_some_and(|s| s.value >= s.threshold * th.hold_exit_ratio)
    }

    /// The verdict of kind `k` the window holds: the one judged most often
    /// (the latest on a tie), and the interval its onset is dated to.
    fn verdict_of(&self, k: Kind, th: &Thresholds) -> (Verdict, Onset) {
        let mut best: Option<(usize, Verdict)> = None;
        for e in self.window.iter().filter(|e| kind(e.raw) == k) {
            let n = self.count_verdict(e.raw);
            if best.is_none_or(|(b, _)| n >= b) {
                best = Some((n, e.raw));
            }
        }
        let v = best.expect("kind present in the window").1;
        (v, self.onset_of(|e| Self::starts(e, k, th)).onset())
    }

    /// The interval an onset is dated to: the first of the run of intervals
    /// matching `is` that ends the window, walking back over a one-interval
    /// gap only where at least two matching intervals precede it. A spike a
    /// few intervals before, or a verdict that flapped before it held, does
    /// not date it.
    fn onset_of(&self, is: impl Fn(&Entry) -> bool) -> &Entry {
        let w: Vec<&Entry> = self.window.iter().collect();
        // The window's latest interval when none matches (cannot happen
        // for a kind that qualifies: a window mean at the onset level has
        // an interval at it).
        let mut k = w.iter().rposition(|e| is(e)).unwrap_or(w.len() - 1);
        loop {
            if k >= 1 && is(w[k - 1]) {
                k -= 1;
            } else if k >= 3 && is(w[k - 2]) && is(w[k - 3]) {
                k -= 2;
            } else {
                break;
            }
        }
        w[k]
    }

    /// Mean confidence of the window's intervals judged `v`.
    fn confidence_of(&self, v: Verdict) -> f64 {
        let c: Vec<f64> = self
            .window
            .iter()
            .filter(|e| e.raw == v)
            .map(|e| e.confidence)
            .collect();
        if c.is_empty() {
            0.5
        } else {
            c.iter().sum::<f64>() / c.len() as f64
        }
    }

    fn window_note(&self, v: Verdict, th: &Thresholds) -> (String, f64, String) {
        let k = kind(v);
        let n = self.count(k);
        let len = self.window.len();
        match windowed(self.window.iter(), k, th) {
            Some(s) => (
                s.signal.to_string(),
                s.value,
                format!(
                    "{v} in {n} of the last {len} intervals; {} {} over them (threshold {})",
                    s.signal,
                    fmt_pct(s.value),
                    fmt_pct(s.threshold)
                ),
            ),
            None => {
                let last = self.window.back().expect("pushed before");
                (
                    v.as_str().to_string(),
                    n as f64,
                    format!("{v} in {n} of the last {len} intervals (now: {})", last.raw),
                )
            }
        }
    }

    /// A calm verdict (idle or free flow) for this interval, dated to
    /// `since`, with the interval's own evidence; a verdict seen but not
    /// held is named.
    fn calm(&self, v: &InterfaceVerdict, since: Onset, th: &Thresholds) -> HeldVerdict {
        let last = self.window.back().expect("pushed before");
        let own = HeldVerdict::alone(v, since.seq, since.start_ns);
        let intervals = last.seq.saturating_sub(since.seq) + 1;
        let k = kind(v.verdict);
        if k == Kind::Calm {
            return HeldVerdict { intervals, ..own };
        }
        let needed = Thresholds::count(th.hold_onset_intervals).max(1);
        let n = self.count(k);
        let why = match windowed(self.window.iter(), k, th) {
            Some(s) if n >= needed => format!(
                "{} {} over them < {}{}",
                s.signal,
                fmt_pct(s.value),
                fmt_pct(s.threshold * self.onset_ratio(k, th)),
                match self.microbursting(k, th) {
                    Err(Some(low)) => format!(
                        "; in microbursts, but in single seconds: one at {} between them",
                        fmt_pct(low)
                    ),
                    _ => String::new(),
                }
            ),
            _ => format!("{needed} needed"),
        };
        let note = format!(
            "{} this interval ({}), in {n} of the last {} intervals: not held ({why})",
            v.verdict,
            own.note,
            self.window.len()
        );
        HeldVerdict {
            verdict: Verdict::FreeFlow,
            confidence: 0.5,
            intervals,
            note,
            ..own
        }
    }

    fn hold(&self, v: Verdict, since: Onset, quiet: u64, th: &Thresholds) -> HeldVerdict {
        let last = self.window.back().expect("pushed before");
        let (signal, value, mut note) = self.window_note(v, th);
        // How the allowance was exceeded, from the latest interval of the
        // kind that microbursted in the window.
        let k = kind(v);
        if let Some(w) = self
            .window
            .iter()
            .rev()
            .filter(|e| e.raw == v)
            .find_map(|e| e.who.as_ref())
        {
            note.push_str("; ");
            note.push_str(w);
        }
        if let Some(m) = self
            .window
            .iter()
            .rev()
            .filter(|e| kind(e.raw) == k)
            .find_map(|e| e.microburst.as_ref())
        {
            note.push_str("; ");
            note.push_str(m);
        }
        if quiet > 0 {
            note.push_str(&format!(
                "; ending: {quiet} of {} intervals without it",
                Thresholds::count(th.hold_exit_intervals).max(1)
            ));
        }
        HeldVerdict {
            verdict: v,
            confidence: (self.confidence_of(v) * 1000.0).round() / 1000.0,
            since_seq: since.seq,
            since_mono_ns: since.start_ns,
            intervals: last.seq.saturating_sub(since.seq) + 1,
            signal,
            value,
            quiet,
            note,
        }
    }

    /// Takes this interval's own judgement (`v`, of the interval `seq`
    /// that started at `start_ns`) and returns the held verdict.
    pub(crate) fn push(
        &mut self,
        v: &InterfaceVerdict,
        seq: u64,
        (start_ns, end_ns): (u64, u64),
        th: &Thresholds,
    ) -> HeldVerdict {
        let r = &v.rates;
        let gap = self.window.back().is_some_and(|e| e.seq + 1 != seq);
        if gap {
            // A missing interval (a new recording, a filtered span): the
            // window starts again, and so does the held verdict.
            self.window.clear();
            self.held = None;
            self.last_seen = None;
        }
        self.window.push_back(Entry {
            seq,
            start_ns,
            end_ns,
            raw: v.verdict,
            confidence: v.confidence,
            allowance: r.allowance_available,
            tx_wire: r.tx_wire_packets,
            rx_wire: r.rx_wire_packets,
            bw_out: r.bw_out_exceeded,
            bw_in: r.bw_in_exceeded,
            pps: r.pps_exceeded,
            segs_out: r.segs_out,
            retrans: r.lossy_retransmits(),
            microburst: v
                .evidence
                .iter()
                .find(|e| Signal::MicroburstRatio.is(e))
                .map(|e| e.note.clone()),
            who: who_used(v),
        });
        let n = Thresholds::count(th.hold_window).max(1);
        while self.window.len() > n {
            self.window.pop_front();
        }
        let exit_after = Thresholds::count(th.hold_exit_intervals).max(1) as u64;
        let last = self.window.back().expect("just pushed").clone();

        // A kind that qualifies now, other than the one held.
        let held_kind = self.held.as_ref().map(|h| kind(h.verdict));
        let candidate = KIND_ORDER
            .iter()
            .copied()
            .filter(|k| Some(*k) != held_kind && self.qualifies(*k, th))
            .max_by_key(|k| {
                // Most intervals wins; the decision order breaks ties.
                let rank = KIND_ORDER.len() - KIND_ORDER.iter().position(|x| x == k).unwrap_or(0);
                (self.count(*k), rank)
            });
        let start_held = |c: Kind| {
            let (v, onset) = self.verdict_of(c, th);
            self.hold(v, onset, 0, th)
        };

        let next = match &self.held {
            Some(h) if kind(h.verdict) != Kind::Calm => {
                let k = kind(h.verdict);
                let quiet = if self.supports(k, th) { 0 } else { h.quiet + 1 };
                let since = h.onset();
                match candidate {
                    // Another cause now holds the window.
                    Some(c) if !self.qualifies(k, th) => start_held(c),
                    // Ended: what follows is dated to the interval after
                    // the last one judged of its kind.
                    _ if quiet >= exit_after => {
                        let after = self.last_seen.as_ref().map_or(last.onset(), |e| Onset {
                            seq: e.seq + 1,
                            start_ns: e.end_ns,
                        });
                        self.calm(v, after, th)
                    }
                    // Held, dated from the kind's onset; its name follows a
                    // verdict of the kind that now holds the window
                    // (queuing becoming drop), as its episode's does.
                    _ => {
                        let needed = Thresholds::count(th.hold_onset_intervals).max(1);
                        let name = match self.count(k) {
                            0 => h.verdict,
                            _ => self.verdict_of(k, th).0,
                        };
                        let name = if self.count_verdict(name) >= needed {
                            name
                        } else {
                            h.verdict
                        };
                        self.hold(name, since, quiet, th)
                    }
                }
            }
            held => match candidate {
                Some(c) => start_held(c),
                None => {
                    let calm_now = if kind(v.verdict) == Kind::Calm {
                        v.verdict
                    } else {
                        Verdict::FreeFlow
                    };
                    let since = match held {
                        Some(h) if h.verdict == calm_now => h.onset(),
                        _ => last.onset(),
                    };
                    self.calm(v, since, th)
                }
            },
        };
        if kind(next.verdict) != Kind::Calm && kind(last.raw) == kind(next.verdict) {
            self.last_seen = Some(last);
        }
        self.held = Some(next.clone());
        next
    }
}
