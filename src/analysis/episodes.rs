//! Consecutive intervals with the same verdict on an interface, merged into
//! one episode: when it started and ended, how bad it got and, for
//! enforcement, the throughput before (burst ceiling) and during (baseline).

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::thresholds::Thresholds;
use super::verdict::{InterfaceVerdict, Verdict};
use super::IntervalAnalysis;
use crate::snapshot::Snapshot;

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
    pub throughput_before_bps: Option<f64>,
    /// Enforcement only: mean throughput during the episode (the baseline).
    pub throughput_during_bps: Option<f64>,
    /// Mean confidence over the episode's intervals.
    pub mean_confidence: f64,
    /// Still going at the last interval pushed.
    pub open: bool,
}

struct Running {
    episode: Episode,
    /// Enforcement in the inbound direction: throughput is rx, not tx.
    inbound: bool,
    throughput_sum: f64,
    confidence_sum: f64,
}

#[derive(Clone, Copy)]
struct Past {
    verdict: Verdict,
    tx_bps: f64,
    rx_bps: f64,
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
    pub fn forgotten(&self) -> u64 {
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

    fn before(&self, iface: &str, inbound: bool) -> Option<f64> {
        let n = Thresholds::count(self.th.episode_before_intervals);
        let picked: Vec<f64> = self
            .history
            .get(iface)?
            .iter()
            .rev()
            .filter(|p| p.verdict != Verdict::Idle)
            .take(n)
            .map(|p| if inbound { p.rx_bps } else { p.tx_bps })
            .collect();
        (!picked.is_empty()).then(|| picked.iter().sum::<f64>() / picked.len() as f64)
    }

    /// Enforcement whose throughput just fell well below the episode's
    /// mean: the shaper moved from the burst ceiling to the baseline.
    fn level_shift(&self, run: &Running, v: &InterfaceVerdict) -> bool {
        if !run.episode.verdict.is_enforcement() || run.episode.intervals == 0 {
            return false;
        }
        let mean = run.throughput_sum / run.episode.intervals as f64;
        let now = if run.inbound {
            v.rates.rx_bps
        } else {
            v.rates.tx_bps
        };
        now < self.th.episode_shift_ratio * mean
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
            let (value, signal) = v
                .evidence
                .first()
                .map_or((0.0, String::new()), |e| (e.value, e.signal.clone()));
            let continues = self.open.get(&v.iface).is_some_and(|r| {
                r.episode.verdict == v.verdict
                    && a.seq == r.episode.end_seq + 1
                    && !self.level_shift(r, v)
            });
            if !continues {
                self.close(&v.iface);
                let inbound = signal.starts_with("bw_in");
                let enforcement = v.verdict.is_enforcement();
                let episode = Episode {
                    iface: v.iface.clone(),
                    verdict: v.verdict,
                    start_seq: a.seq,
                    end_seq: a.seq,
                    start_mono_ns: start_ns,
                    end_mono_ns: a.mono_ns,
                    intervals: 0,
                    peak: value,
                    peak_signal: signal.clone(),
                    throughput_before_bps: if enforcement {
                        self.before(&v.iface, inbound)
                    } else {
                        None
                    },
                    throughput_during_bps: None,
                    mean_confidence: 0.0,
                    open: true,
                };
                self.open.insert(
                    v.iface.clone(),
                    Running {
                        episode,
                        inbound,
                        throughput_sum: 0.0,
                        confidence_sum: 0.0,
                    },
                );
            }
            let run = self.open.get_mut(&v.iface).expect("inserted above");
            let ep = &mut run.episode;
            ep.end_seq = a.seq;
            ep.end_mono_ns = a.mono_ns;
            ep.intervals += 1;
            if value > ep.peak || ep.peak_signal.is_empty() {
                ep.peak = value;
                ep.peak_signal = signal;
            }
            run.throughput_sum += if run.inbound {
                v.rates.rx_bps
            } else {
                v.rates.tx_bps
            };
            run.confidence_sum += v.confidence;
            ep.mean_confidence = run.confidence_sum / ep.intervals as f64;
            if ep.verdict.is_enforcement() {
                ep.throughput_during_bps = Some(run.throughput_sum / ep.intervals as f64);
            }
            let hist = self.history.entry(v.iface.clone()).or_default();
            if hist.len() >= HISTORY_KEPT {
                hist.pop_front();
            }
            hist.push_back(Past {
                verdict: v.verdict,
                tx_bps: v.rates.tx_bps,
                rx_bps: v.rates.rx_bps,
            });
        }
    }

    /// The episode still going on `iface`, if any.
    pub fn current(&self, iface: &str) -> Option<&Episode> {
        self.open.get(iface).map(|r| &r.episode)
    }

    /// Closed episodes in order, then the open ones.
    pub fn episodes(&self) -> Vec<Episode> {
        let mut all: Vec<Episode> = self.closed.iter().cloned().collect();
        all.extend(self.open.values().map(|r| r.episode.clone()));
        all
    }
}
