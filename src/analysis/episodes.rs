//! Consecutive intervals with the same held verdict on an interface, merged
//! into one episode: when it started and ended, how bad it got and, for
//! enforcement, the throughput before (burst ceiling) and during (baseline).
//!
//! A held verdict is dated back to its onset (src/analysis/hold.rs), a few
//! intervals before it is first shown: those intervals move from the
//! episode they were counted in to the new one, so episodes never overlap.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::hold::same_kind;
use super::signal::Signal;
use super::thresholds::Thresholds;
use super::verdict::{InterfaceVerdict, Verdict};
use super::IntervalAnalysis;
use crate::model::snapshot::Snapshot;

/// Intervals of per-interface history kept for "throughput before".
const HISTORY_KEPT: usize = 256;
/// Closed episodes kept; older ones are counted in `forgotten`.
const CLOSED_KEPT: usize = 10_000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Episode {
    pub iface: String,
    pub verdict: Verdict,
    pub start_seq: u64,
    pub end_seq: u64,
    /// Start of the first interval and end of the last (CLOCK_MONOTONIC ns).
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    pub intervals: u64,
    /// The largest value of the deciding signal (the verdict's evidence[0])
    /// over the episode, and that signal's name.
    pub peak: f64,
    pub peak_signal: String,
    /// Enforcement only: mean throughput of the non-idle intervals just
    /// before (the burst ceiling), in the enforced direction.
    /// Outbound, what got past the drops on the way (tx less the
    /// retransmits of lost bytes, `NormalisedRates::tx_passed_bps`): the
    /// allowance is what the shaper lets through, and a dropping shaper
    /// makes the host send each dropped byte twice. Inbound, rx as
    /// counted: the shaper drops before the host sees it.
    pub throughput_before_bps: Option<f64>,
    /// Enforcement only: mean throughput during the episode (the baseline),
    /// measured as `throughput_before_bps` is.
    pub throughput_during_bps: Option<f64>,
    /// Mean confidence over the episode's intervals.
    pub mean_confidence: f64,
    /// Enforcement only: throughput stepped down into the episode (the
    /// mean during it is at most `episode_step_ratio` of the mean before),
    /// so the mean before is a burst ceiling and the mean during a
    /// baseline. False: the hypervisor queued at a steady rate.
    #[serde(default)]
    pub stepped_down: bool,
    /// Still going at the last interval pushed.
    pub open: bool,
    /// The highest peak rate (the busiest `--peak-window`, bits/s) of the
    /// episode's intervals in its direction; None when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rate_bps: Option<f64>,
    /// A microburst episode (at least half its intervals microbursted and
    /// throughput did not step down into it, docs/verdicts.md
    /// "Microbursts"): its latest interval's line, "in microbursts: the
    /// busiest 12 ms ran at ...; flows bursting: ...". Never reported as an
    /// enforcement: bursts over the allowance are not a burst ceiling
    /// falling to a baseline. An episode that stepped down is the
    /// enforcement, even when its senders burst at the host (TCP does under
    /// a standing hypervisor queue: 3-10x the mean in the lab's
    /// burst_then_enforce), and has no line here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub microburst: Option<String>,
    /// Enforcement only, when a baseline is known: what the instance was
    /// planned against and the burst that led into the episode, so the
    /// measured ceiling and baseline can be set against the published ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned: Option<PlannedBaseline>,
}

/// An enforcement episode against the baseline the instance planned on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedBaseline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// AWS's figure (false: the user's `--baseline`).
    pub published: bool,
    /// In the enforced direction, bits/s.
    pub baseline_bps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bps: Option<f64>,
    /// The run above the baseline that led into the episode (the burst):
    /// how long it lasted and the bytes it carried beyond the baseline.
    /// 0 when the interval before the episode was at or below it.
    pub burst_above_secs: f64,
    pub burst_above_bytes: f64,
}

impl Episode {
    /// The enforcement set against the plan: "baseline 1.58Gb/s measured,
    /// 1.25Gb/s published (m5.xlarge); burst ceiling 9.95Gb/s measured,
    /// 10.0Gb/s published; the burst lasted 16.1min, 1.71TB above the
    /// baseline". None without a plan.
    pub fn against_plan(&self) -> Option<String> {
        use crate::shared::units::{bytes, rate_bits, secs, UNKNOWN};
        let p = self.planned.as_ref()?;
        let said = if p.published { "published" } else { "planned" };
        let of = p
            .instance_type
            .as_deref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default();
        let measured = |v: Option<f64>| v.map_or(UNKNOWN.to_string(), rate_bits);
        let mut s = format!(
            "baseline {} measured, {} {said}{of}",
            measured(self.throughput_during_bps),
            rate_bits(p.baseline_bps)
        );
        if self.stepped_down {
            s.push_str(&format!(
                "; burst ceiling {} measured",
                measured(self.throughput_before_bps)
            ));
            if let Some(b) = p.burst_bps.filter(|b| *b > p.baseline_bps) {
                s.push_str(&format!(", {} {said}", rate_bits(b)));
            }
        }
        if p.burst_above_secs > 0.0 {
            s.push_str(&format!(
                "; the burst lasted {}, {} above the baseline",
                secs(p.burst_above_secs),
                bytes(p.burst_above_bytes as u64)
            ));
        } else {
            s.push_str("; no run above the baseline led into it");
        }
        Some(s)
    }
}

struct Running {
    episode: Episode,
    /// Intervals per held verdict: an episode of one cause takes the name
    /// of the verdict it held longest (hypervisor_drop for two seconds,
    /// then queuing for minutes, is one enforcement, named queuing).
    verdicts: BTreeMap<Verdict, u64>,
    /// Enforcement in the inbound direction: throughput is rx, not tx.
    inbound: bool,
    /// Throughput summed over the episode's intervals that were not idle
    /// (`idle`): an interval with no traffic to shape (a queue still
    /// draining after the application stopped sending) keeps the held
    /// verdict but says nothing of the rate the shaper lets through.
    throughput_sum: f64,
    idle: u64,
    /// Enforcement stepped down from a burst ceiling: the episode's first
    /// intervals that still ran at the ceiling (above `episode_step_ratio`
    /// of it), their count and throughput. An onset dated back can take in
    /// a second or two of the burst; they are the episode's onset, not its
    /// baseline, which is measured from the first interval under the step.
    lead: Lead,
    confidence_sum: f64,
    /// Intervals of the episode that microbursted, and the latest line.
    microbursts: u64,
    microburst_line: Option<String>,
}

#[derive(Clone)]
struct Past {
    seq: u64,
    start_ns: u64,
    end_ns: u64,
    verdict: Verdict,
    /// The interval's own verdict was idle (see `Running::idle`).
    idle: bool,
    /// Outbound: what got past the drops (see `throughput_before_bps`).
    tx_bps: f64,
    rx_bps: f64,
    confidence: f64,
    /// The interval's peak rates (tx, rx) and microburst line.
    peak: (Option<f64>, Option<f64>),
    microburst: Option<String>,
    /// The instance's run above its baseline at this interval (seconds,
    /// bytes beyond), outbound and inbound; None without a baseline.
    above: Option<[(f64, f64); 2]>,
}

/// A running episode's sums an interval taken back leaves.
struct Sums<'a> {
    throughput: &'a mut f64,
    confidence: &'a mut f64,
    idle: &'a mut u64,
}

/// See `Running::lead`.
#[derive(Default)]
struct Lead {
    intervals: u64,
    throughput_sum: f64,
    /// An interval under the step came: the lead is over.
    closed: bool,
}

impl Running {
    /// Counts one interval's throughput into the episode, unless it was
    /// idle (its interval count is the caller's).
    fn add_throughput(&mut self, bps: f64, idle: bool, step_ratio: f64) {
        if idle {
            self.idle += 1;
            return;
        }
        self.throughput_sum += bps;
        let ceiling = self.episode.throughput_before_bps.unwrap_or(0.0);
        if !self.lead.closed && ceiling > 0.0 && bps > ceiling * step_ratio {
            self.lead.intervals += 1;
            self.lead.throughput_sum += bps;
        } else {
            self.lead.closed = true;
        }
    }

    /// The episode's intervals that count for its throughput.
    fn busy(&self) -> u64 {
        self.episode.intervals.saturating_sub(self.idle)
    }

    /// Mean throughput during the episode's busy intervals: from the first
    /// one under the step on (`lead`), or over all of them when none came
    /// under.
    fn throughput_during(&self) -> f64 {
        let n = self.busy();
        let lead = self.lead.intervals.min(n);
        if lead < n {
            (self.throughput_sum - self.lead.throughput_sum) / (n - lead) as f64
        } else {
            self.throughput_sum / n.max(1) as f64
        }
    }

    /// A microburst episode: at least half its intervals microbursted, and
    /// throughput did not step down into it (that is an enforcement).
    fn microbursting(&self) -> bool {
        self.episode.intervals > 0
            && self.microbursts * 2 >= self.episode.intervals
            && !self.episode.stepped_down
    }

    /// Counts one interval's peak and microburst into the episode.
    fn note_burst(&mut self, peak: (Option<f64>, Option<f64>), microburst: Option<&String>) {
        let p = if self.inbound { peak.1 } else { peak.0 };
        if let Some(p) = p {
            let ep = &mut self.episode;
            ep.peak_rate_bps = Some(ep.peak_rate_bps.map_or(p, |q| q.max(p)));
        }
        if let Some(m) = microburst {
            self.microbursts += 1;
            self.microburst_line = Some(m.clone());
        }
    }
}

/// Throughput stepped down into an enforcement episode: the mean during it
/// is at most `episode_step_ratio` of the mean before.
fn stepped_down(ep: &Episode, step_ratio: f64) -> bool {
    match (ep.throughput_before_bps, ep.throughput_during_bps) {
        (Some(b), Some(d)) => b > 0.0 && d <= b * step_ratio,
        _ => false,
    }
}

pub struct EpisodeTracker {
    th: Thresholds,
    open: BTreeMap<String, Running>,
    closed: VecDeque<Episode>,
    history: BTreeMap<String, VecDeque<Past>>,
    forgotten: u64,
}

impl EpisodeTracker {
    pub fn new(th: &Thresholds) -> Self {
        EpisodeTracker {
            th: th.clone(),
            open: BTreeMap::new(),
            closed: VecDeque::new(),
            history: BTreeMap::new(),
            forgotten: 0,
        }
    }

    /// Closed episodes dropped because more than `CLOSED_KEPT` piled up.
    pub(crate) fn forgotten(&self) -> u64 {
        self.forgotten
    }

    fn close(&mut self, iface: &str) {
        if let Some(mut run) = self.open.remove(iface) {
            run.episode.open = false;
            if self.closed.len() >= CLOSED_KEPT {
                self.closed.pop_front();
                self.forgotten += 1;
            }
            self.closed.push_back(run.episode);
        }
    }

    /// Mean throughput of the intervals before `seq` that were not idle,
    /// held or on their own.
    fn before(&self, iface: &str, inbound: bool, seq: u64) -> Option<f64> {
        let n = Thresholds::count(self.th.episode_before_intervals);
        let picked: Vec<f64> = self
            .history
            .get(iface)?
            .iter()
            .rev()
            .filter(|p| p.seq < seq && !p.idle && p.verdict != Verdict::Idle)
            .take(n)
            .map(|p| if inbound { p.rx_bps } else { p.tx_bps })
            .collect();
        (!picked.is_empty()).then(|| picked.iter().sum::<f64>() / picked.len() as f64)
    }

    /// The plan an enforcement starting at `seq` is set against, with the
    /// run above the baseline at the interval before it.
    fn planned(
        &self,
        iface: &str,
        a: &IntervalAnalysis,
        inbound: bool,
        seq: u64,
    ) -> Option<PlannedBaseline> {
        let h = a.headroom.as_ref()?;
        let dir = usize::from(inbound);
        let (secs, bytes) = self
            .history
            .get(iface)
            .and_then(|hist| hist.iter().rev().find(|p| p.seq + 1 == seq))
            .and_then(|p| p.above)
            .map_or((0.0, 0.0), |runs| runs[dir]);
        Some(PlannedBaseline {
            instance_type: h.instance_type.clone(),
            published: h.published,
            baseline_bps: if inbound {
                h.rx.baseline_bps
            } else {
                h.tx.baseline_bps
            },
            burst_bps: h.burst_bps,
            burst_above_secs: secs,
            burst_above_bytes: bytes,
        })
    }

    /// Enforcement whose throughput just fell well below the episode's
    /// mean: the shaper moved from the burst ceiling to the baseline.
    fn level_shift(&self, run: &Running, v: &InterfaceVerdict) -> bool {
        if !run.episode.verdict.is_enforcement()
            || run.busy() == 0
            || run.microbursting()
            || v.verdict == Verdict::Idle
        {
            return false;
        }
        let mean = run.throughput_during();
        let now = if run.inbound {
            v.rates.rx_bps
        } else {
            v.rates.tx_passed_or_sent_bps()
        };
        now < self.th.episode_shift_ratio * mean
    }

    /// A verdict dated back to `since`: the intervals from `since` on leave
    /// the episodes they were counted in (the one running, and closed ones
    /// of this interface that reach that far), and are returned to be
    /// counted in the new one. An episode left with no interval is gone.
    fn take_back(&mut self, iface: &str, since: u64) -> Vec<Past> {
        let moved: Vec<Past> = self
            .history
            .get(iface)
            .map(|h| h.iter().filter(|p| p.seq >= since).cloned().collect())
            .unwrap_or_default();
        if moved.is_empty() {
            return moved;
        }
        let kept_end = self
            .history
            .get(iface)
            .and_then(|h| h.iter().rev().find(|p| p.seq < since))
            .map(|p| (p.seq, p.end_ns));
        let trim = |ep: &mut Episode, sums: Option<(&mut Sums, bool)>| {
            let gone: Vec<&Past> = moved
                .iter()
                .filter(|p| p.seq >= ep.start_seq && p.seq <= ep.end_seq)
                .collect();
            let n = gone.len() as u64;
            if let Some((sums, inbound)) = sums {
                for p in &gone {
                    if p.idle {
                        *sums.idle -= 1;
                    } else {
                        *sums.throughput -= if inbound { p.rx_bps } else { p.tx_bps };
                    }
                    *sums.confidence -= p.confidence;
                }
            }
            ep.intervals = ep.intervals.saturating_sub(n);
            if let Some((seq, end)) = kept_end {
                ep.end_seq = ep.end_seq.min(seq);
                ep.end_mono_ns = ep.end_mono_ns.min(end);
            }
        };
        if let Some(mut run) = self.open.remove(iface) {
            let inbound = run.inbound;
            let mut sums = Sums {
                throughput: &mut run.throughput_sum,
                confidence: &mut run.confidence_sum,
                idle: &mut run.idle,
            };
            trim(&mut run.episode, Some((&mut sums, inbound)));
            if run.episode.intervals > 0 {
                // The intervals taken are the latest: the lead shrinks only
                // when they reach into it.
                if run.lead.intervals >= run.busy() {
                    run.lead = Lead {
                        intervals: run.busy(),
                        throughput_sum: run.throughput_sum,
                        closed: false,
                    };
                }
                let during = run.throughput_during();
                let ep = &mut run.episode;
                ep.mean_confidence = run.confidence_sum / ep.intervals as f64;
                if ep.verdict.is_enforcement() {
                    ep.throughput_during_bps = Some(during);
                    ep.stepped_down = stepped_down(ep, self.th.episode_step_ratio);
                }
                self.open.insert(iface.to_string(), run);
            }
        }
        // Closed episodes of this interface that reach into the moved
        // intervals (newest first; at most a window's worth).
        while let Some(i) = self.closed.iter().rposition(|e| e.iface == iface) {
            if self.closed[i].end_seq < since {
                break;
            }
            let mut ep = self.closed.remove(i).expect("found above");
            // Closed episodes keep no sums: the mean confidence and the
            // throughput during stay those of the whole episode.
            trim(&mut ep, None);
            if ep.intervals > 0 {
                self.closed.insert(i, ep);
                break;
            }
        }
        moved
    }

    pub fn push(&mut self, a: &IntervalAnalysis, snap: &Snapshot) {
        let start_ns = snap.mono_ns.saturating_sub(snap.interval_ns);
        let gone: Vec<String> = self
            .open
            .keys()
            .filter(|k| !a.interfaces.iter().any(|v| &v.iface == *k))
            .cloned()
            .collect();
        for k in gone {
            self.close(&k);
        }
        for v in &a.interfaces {
            let held = &v.held;
            let (value, signal) = (held.value, held.signal.clone());
            let continues = self.open.get(&v.iface).is_some_and(|r| {
                (r.episode.verdict == held.verdict || same_kind(r.episode.verdict, held.verdict))
                    && a.seq == r.episode.end_seq + 1
                    && !self.level_shift(r, v)
            });
            let mut moved = Vec::new();
            if !continues {
                // Dated back: the intervals from the onset on belong to the
                // new episode, not the one before.
                let since = held.since_seq.min(a.seq);
                if since < a.seq {
                    moved = self.take_back(&v.iface, since);
                }
                self.close(&v.iface);
                let first = moved.first();
                let inbound = signal.starts_with("bw_in");
                let enforcement = held.verdict.is_enforcement();
                let start_seq = first.map_or(a.seq, |p| p.seq);
                let episode = Episode {
                    iface: v.iface.clone(),
                    verdict: held.verdict,
                    start_seq,
                    end_seq: a.seq,
                    start_mono_ns: first.map_or(start_ns, |p| p.start_ns),
                    end_mono_ns: a.mono_ns,
                    intervals: 0,
                    peak: value,
                    peak_signal: signal.clone(),
                    throughput_before_bps: if enforcement {
                        self.before(&v.iface, inbound, start_seq)
                    } else {
                        None
                    },
                    throughput_during_bps: None,
                    mean_confidence: 0.0,
                    stepped_down: false,
                    open: true,
                    peak_rate_bps: None,
                    microburst: None,
                    planned: if enforcement {
                        self.planned(&v.iface, a, inbound, start_seq)
                    } else {
                        None
                    },
                };
                self.open.insert(
                    v.iface.clone(),
                    Running {
                        episode,
                        verdicts: BTreeMap::new(),
                        inbound,
                        throughput_sum: 0.0,
                        idle: 0,
                        lead: Lead::default(),
                        confidence_sum: 0.0,
                        microbursts: 0,
                        microburst_line: None,
                    },
                );
            }
            let step_ratio = self.th.episode_step_ratio;
            let run = self.open.get_mut(&v.iface).expect("inserted above");
            let inbound = run.inbound;
            for p in &moved {
                let bps = if inbound { p.rx_bps } else { p.tx_bps };
                run.add_throughput(bps, p.idle, step_ratio);
                run.confidence_sum += p.confidence;
                run.episode.intervals += 1;
                *run.verdicts.entry(held.verdict).or_default() += 1;
                run.note_burst(p.peak, p.microburst.as_ref());
            }
            let microburst = v
                .evidence
                .iter()
                .find(|e| Signal::MicroburstRatio.is(e))
                .map(|e| e.note.clone());
            let peak = (v.rates.tx_peak_bps, v.rates.rx_peak_bps);
            run.note_burst(peak, microburst.as_ref());
            *run.verdicts.entry(held.verdict).or_default() += 1;
            let longest = run
                .verdicts
                .iter()
                .max_by_key(|(v, n)| (**n, **v == held.verdict))
                .map(|(v, _)| *v);
            let bps = if inbound {
                v.rates.rx_bps
            } else {
                v.rates.tx_passed_or_sent_bps()
            };
            run.episode.intervals += 1;
            let idle = v.verdict == Verdict::Idle;
            run.add_throughput(bps, idle, step_ratio);
            run.confidence_sum += held.confidence;
            let during = run.throughput_during();
            let ep = &mut run.episode;
            ep.verdict = longest.unwrap_or(held.verdict);
            ep.end_seq = a.seq;
            ep.end_mono_ns = a.mono_ns;
            if value > ep.peak || ep.peak_signal.is_empty() {
                ep.peak = value;
                ep.peak_signal = signal;
            }
            ep.mean_confidence = run.confidence_sum / ep.intervals as f64;
            if ep.verdict.is_enforcement() {
                ep.throughput_during_bps = Some(during);
                ep.stepped_down = stepped_down(ep, step_ratio);
            }
            run.episode.microburst = if run.microbursting() {
                run.microburst_line.clone()
            } else {
                None
            };
            let hist = self.history.entry(v.iface.clone()).or_default();
            if hist.len() >= HISTORY_KEPT {
                hist.pop_front();
            }
            hist.push_back(Past {
                seq: a.seq,
                start_ns,
                end_ns: a.mono_ns,
                verdict: held.verdict,
                idle,
                tx_bps: v.rates.tx_passed_or_sent_bps(),
                rx_bps: v.rates.rx_bps,
                confidence: held.confidence,
                peak,
                microburst,
                above: a.headroom.as_ref().map(|h| {
                    [
                        (h.tx.above_secs, h.tx.above_bytes),
                        (h.rx.above_secs, h.rx.above_bytes),
                    ]
                }),
            });
        }
    }

    /// Per interface, the episode under way and the `closed` before it,
    /// oldest first: what a live view shows as recent history.
    pub(crate) fn recent(&self, closed: usize) -> Vec<Episode> {
        let mut out = Vec::new();
        for (iface, run) in &self.open {
            let mut before: Vec<Episode> = self
                .closed
                .iter()
                .rev()
                .filter(|e| &e.iface == iface)
                .take(closed)
                .cloned()
                .collect();
            before.reverse();
            out.extend(before);
            out.push(run.episode.clone());
        }
        out
    }

    /// The episode still going on `iface`, if any.
    pub(crate) fn current(&self, iface: &str) -> Option<&Episode> {
        self.open.get(iface).map(|r| &r.episode)
    }

    /// Closed episodes in order, then the open ones.
    pub fn episodes(&self) -> Vec<Episode> {
        let mut all: Vec<Episode> = self.closed.iter().cloned().collect();
        all.extend(self.open.values().map(|r| r.episode.clone()));
        all
    }
}
