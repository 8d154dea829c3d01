//! What the report tells of an episode beyond the tracker's own record:
//! its times from the report's origin, the peak interval's evidence, the
//! burst of traffic before it, and for enforcement the direction and the
//! step down.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::analysis::kafka_roles::KafkaRoleSum;
use crate::analysis::linklocal::LinkLocalCounts;
use crate::analysis::{Episode, EpisodeTracker, Evidence, IntervalAnalysis, Location, Verdict};
use crate::model::kafka::KafkaFilter;
use crate::model::snapshot::Snapshot;
use crate::report::kafka::KafkaAcc;
use crate::report::linklocal::{LinkLocalAcc, EPISODE_SENDERS_KEPT};
use crate::report::model::{
    CountersInMicrobursts, EnforcementSummary, EpisodeReport, PlanComparison,
};

/// The evidence that says an interval's counters rose in microbursts
/// (src/analysis/verdict.rs).
const COUNTERS_IN_MICROBURSTS: &str = "counters_in_microbursts";
/// Lines of it kept per episode, the latest: a held verdict dated back
/// takes at most a window's worth of the episode's last intervals.
const BURST_LINES_KEPT: usize = 16;

/// Episode details kept apart from the tracker (which has no room for
/// them); bounded like the tracker's own list of closed episodes.
const EXTRAS_KEPT: usize = 20_000;

/// What an episode needs that the tracker does not keep.
#[derive(Debug, Clone)]
struct EpisodeExtra {
    start_t: f64,
    end_t: f64,
    /// The deciding signal's value at the peak interval, and that
    /// interval's evidence.
    peak: f64,
    evidence: Vec<Evidence>,
    held_note: String,
    burst_secs: f64,
    /// The deciding signal of the first interval: it sets the direction.
    start_signal: String,
    /// Calm episodes: the intervals judged otherwise on their own (by seq),
    /// a verdict never held.
    judged_alone: Vec<(u64, Verdict)>,
    /// Intervals whose counters rose in microbursts (by seq), and the
    /// lines of the latest of them.
    bursts: Vec<u64>,
    burst_lines: VecDeque<(u64, String)>,
    /// The Kafka roles and groups and the link-local senders of its
    /// intervals: the last [`USE_TAIL`] by seq (a later onset dated back
    /// may take them), the earlier ones summed.
    uses: UseAcc,
    use_tail: VecDeque<(u64, IntervalUse)>,
}

/// What one interval of an interface adds to its episode: its Kafka sums
/// (those `--kafka-role`/`--kafka-group` keep) and its packets to the
/// link-local services with the interval's seconds.
#[derive(Debug, Clone, Default)]
struct IntervalUse {
    kafka: Vec<KafkaRoleSum>,
    linklocal: Option<(LinkLocalCounts, f64)>,
}

/// An episode's intervals summed: by Kafka role, and by link-local sender.
#[derive(Debug, Clone)]
struct UseAcc {
    kafka: KafkaAcc,
    linklocal: LinkLocalAcc,
}

impl Default for UseAcc {
    fn default() -> Self {
        UseAcc {
            kafka: KafkaAcc::default(),
            linklocal: LinkLocalAcc::new(EPISODE_SENDERS_KEPT),
        }
    }
}

impl UseAcc {
    fn add(&mut self, u: &IntervalUse) {
        self.kafka.add_all(&u.kafka);
        if let Some((c, secs)) = &u.linklocal {
            self.linklocal.add(c, *secs);
        }
    }
}

/// Intervals of Kafka sums and link-local counts kept apart per episode
/// and interface, by seq: a held verdict dated back up to this many
/// intervals takes its own (`--threshold hold_window` beyond it leaves the
/// older ones with the episode before).
const USE_TAIL: usize = 64;

/// Keeps `u` of `seq` in `tail`, summing what falls out into `acc`.
fn keep_use(acc: &mut UseAcc, tail: &mut VecDeque<(u64, IntervalUse)>, seq: u64, u: IntervalUse) {
    tail.push_back((seq, u));
    if tail.len() > USE_TAIL {
        if let Some((_, old)) = tail.pop_front() {
            acc.add(&old);
        }
    }
}

impl EpisodeExtra {
    /// Keeps the interval's "counters rose in microbursts" line, if any.
    fn note_bursts(&mut self, seq: u64, evidence: &[Evidence]) {
        let Some(e) = evidence
            .iter()
            .find(|e| e.signal == COUNTERS_IN_MICROBURSTS)
        else {
            return;
        };
        self.bursts.push(seq);
        if self.burst_lines.len() >= BURST_LINES_KEPT {
            self.burst_lines.pop_front();
        }
        self.burst_lines.push_back((seq, e.note.clone()));
    }
}

/// An episode by interface, start, and whether it is calm (idle, free
/// flow): a held verdict dated back can start where the calm episode it
/// replaced started, and an episode of one cause can change its name
/// (drop to queuing) as it goes.
type EpisodeKey = (String, u64, u64, bool);

fn key(ep: &Episode) -> EpisodeKey {
    (
        ep.iface.clone(),
        ep.start_seq,
        ep.start_mono_ns,
        ep.verdict.is_calm(),
    )
}

/// The non-idle run an interface is in.
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    last_seq: Option<u64>,
    secs: f64,
}

/// Per episode, the details the tracker does not keep; per interface, the
/// run of traffic the next episode's burst is measured from.
#[derive(Debug, Default)]
pub(super) struct EpisodeNotes {
    extras: HashMap<EpisodeKey, EpisodeExtra>,
    extras_order: VecDeque<EpisodeKey>,
    runs: HashMap<String, Run>,
    /// Per interface, the Kafka sums and link-local counts of its last
    /// [`USE_TAIL`] intervals: what an episode dated back takes from
    /// before it began.
    recent: HashMap<String, VecDeque<(u64, IntervalUse)>>,
    /// Per interface, its latest episode: the only one that keeps a tail
    /// of interval uses by seq (memory: interfaces x [`USE_TAIL`]).
    latest: HashMap<String, EpisodeKey>,
}

/// Rounds seconds to milliseconds.
fn ms(secs: f64) -> f64 {
    (secs * 1000.0).round() / 1000.0
}

impl EpisodeNotes {
    /// Keeps, per episode, the start and end time, the peak interval's
    /// evidence and the burst before it. Mirrors the tracker's peak rule:
    /// the first interval with the largest deciding value.
    pub(super) fn note(
        &mut self,
        tracker: &EpisodeTracker,
        a: &IntervalAnalysis,
        snap: &Snapshot,
        t: f64,
        kafka: &KafkaFilter,
        linklocal: &[(String, LinkLocalCounts)],
    ) {
        for v in &a.interfaces {
            let rows = IntervalUse {
                kafka: a
                    .kafka
                    .iter()
                    .filter(|r| r.iface == v.iface && kafka.keeps_identity(&r.who))
                    .cloned()
                    .collect(),
                linklocal: linklocal
                    .iter()
                    .find(|(i, _)| *i == v.iface)
                    .map(|(_, c)| (c.clone(), snap.interval_secs())),
            };
            let recent = self.recent.entry(v.iface.clone()).or_default();
            recent.push_back((snap.seq, rows.clone()));
            if recent.len() > USE_TAIL {
                recent.pop_front();
            }
            let Some(ep) = tracker.current(&v.iface) else {
                continue;
            };
            let key = key(ep);
            let (value, signal) = (v.held.value, v.held.signal.clone());
            let alone =
                (ep.verdict.is_calm() && !v.verdict.is_calm()).then_some((snap.seq, v.verdict));
            if let Some(x) = self.extras.get_mut(&key) {
                x.end_t = t;
                x.judged_alone.extend(alone);
                x.note_bursts(snap.seq, &v.evidence);
                keep_use(&mut x.uses, &mut x.use_tail, snap.seq, rows);
                if value > x.peak {
                    x.peak = value;
                    x.evidence = v.evidence.clone();
                    x.held_note.clone_from(&v.held.note);
                }
                continue;
            }
            // A held verdict is dated back to its onset: the episode began
            // that much before this interval, and the run of traffic before
            // it (the burst) ended there.
            let back = snap
                .mono_ns
                .saturating_sub(snap.interval_ns)
                .saturating_sub(ep.start_mono_ns) as f64
                / 1e9;
            let run = self.runs.get(&v.iface).copied().unwrap_or_default();
            let burst_secs = if run.last_seq.is_some_and(|l| l + 1 == snap.seq) {
                (run.secs - back).max(0.0)
            } else {
                0.0
            };
            let mut extra = EpisodeExtra {
                start_t: t - snap.interval_secs() - back,
                end_t: t,
                peak: value,
                evidence: v.evidence.clone(),
                held_note: v.held.note.clone(),
                burst_secs,
                start_signal: signal,
                judged_alone: alone.into_iter().collect(),
                bursts: Vec::new(),
                burst_lines: VecDeque::new(),
                uses: UseAcc::default(),
                use_tail: VecDeque::new(),
            };
            extra.note_bursts(snap.seq, &v.evidence);
            // The episode before keeps its intervals before this one's
            // onset, summed; this one takes the rest, when dated back.
            if let Some(prev) = self
                .latest
                .insert(v.iface.clone(), key.clone())
                .and_then(|k| self.extras.get_mut(&k))
            {
                for (seq, rows) in prev.use_tail.drain(..) {
                    if seq < ep.start_seq {
                        prev.uses.add(&rows);
                    }
                }
            }
            for (seq, rows) in &self.recent[&v.iface] {
                if *seq >= ep.start_seq {
                    keep_use(&mut extra.uses, &mut extra.use_tail, *seq, rows.clone());
                }
            }
            self.keep(key, extra);
        }
    }

    /// Keeps `extra`, forgetting the oldest past `EXTRAS_KEPT`.
    fn keep(&mut self, key: EpisodeKey, extra: EpisodeExtra) {
        self.extras.insert(key.clone(), extra);
        self.extras_order.push_back(key);
        if self.extras_order.len() > EXTRAS_KEPT {
            if let Some(old) = self.extras_order.pop_front() {
                self.extras.remove(&old);
            }
        }
    }

    /// Extends (or ends) each interface's non-idle run with this interval.
    pub(super) fn advance_runs(&mut self, a: &IntervalAnalysis, snap: &Snapshot) {
        for v in &a.interfaces {
            let run = self.runs.entry(v.iface.clone()).or_default();
            if v.verdict == Verdict::Idle {
                *run = Run {
                    last_seq: Some(snap.seq),
                    secs: 0.0,
                };
                continue;
            }
            let continues = run.last_seq.is_some_and(|l| l + 1 == snap.seq);
            run.secs = if continues { run.secs } else { 0.0 } + snap.interval_secs();
            run.last_seq = Some(snap.seq);
        }
    }

    /// The tracker's episodes with their details, by start time.
    /// `start_mono`: the monotonic clock of the report's origin.
    pub(super) fn reports(&self, tracker: &EpisodeTracker, start_mono: u64) -> Vec<EpisodeReport> {
        let mut out: Vec<EpisodeReport> = tracker
            .episodes()
            .into_iter()
            .map(|episode| {
                let extra = self.extras.get(&key(&episode));
                report(episode, extra, start_mono)
            })
            .collect();
        out.sort_by(|a, b| {
            a.start_offset_secs
                .total_cmp(&b.start_offset_secs)
                .then_with(|| a.episode.iface.cmp(&b.episode.iface))
        });
        out
    }
}

fn report(episode: Episode, extra: Option<&EpisodeExtra>, start_mono: u64) -> EpisodeReport {
    // Without the details (only past EXTRAS_KEPT episodes), the offsets
    // come from the monotonic clock of the first file.
    let mono = |ns: u64| ns.saturating_sub(start_mono) as f64 / 1e9;
    let uses = extra.map(|x| uses_of(&episode, x));
    EpisodeReport {
        start_offset_secs: extra.map_or(mono(episode.start_mono_ns), |x| ms(x.start_t)),
        // An episode cut short by the next one's onset ends earlier than
        // its last note.
        end_offset_secs: extra.map_or(mono(episode.end_mono_ns), |x| {
            let span = episode.end_mono_ns.saturating_sub(episode.start_mono_ns);
            ms(x.end_t.min(x.start_t + span as f64 / 1e9))
        }),
        evidence: extra.map(|x| x.evidence.clone()).unwrap_or_default(),
        held_note: extra
            .map(|x| {
                // An enforcement's senders burst under its standing queue
                // (TCP does), but the bursts are not its cause: the
                // episode-level call (`Episode::microburst`) says which
                // episodes microburst, and only those keep the line.
                if enforced(&episode) {
                    without_microburst(&x.held_note)
                } else {
                    x.held_note.clone()
                }
            })
            .unwrap_or_default(),
        judged_alone: extra.map(|x| judged_alone(&episode, x)).unwrap_or_default(),
        counters_in_microbursts: extra.and_then(|x| counters_in_microbursts(&episode, x)),
        enforcement: enforcement(&episode, extra),
        kafka: uses.as_ref().map(|u| u.kafka.finish()).unwrap_or_default(),
        linklocal: uses.as_ref().and_then(|u| u.linklocal.finish()),
        episode,
    }
}

/// The sums of the episode's intervals: those summed, and of the tail
/// those still inside it (an onset dated back takes the last ones).
fn uses_of(episode: &Episode, x: &EpisodeExtra) -> UseAcc {
    let mut acc = x.uses.clone();
    for (seq, rows) in &x.use_tail {
        if (episode.start_seq..=episode.end_seq).contains(seq) {
            acc.add(rows);
        }
    }
    acc
}

/// The intervals of a calm episode judged otherwise on their own. Only
/// those still inside the episode: an onset dated back takes the calm
/// episode's last intervals.
fn judged_alone(episode: &Episode, x: &EpisodeExtra) -> BTreeMap<Verdict, u64> {
    let mut m = BTreeMap::new();
    for (seq, v) in &x.judged_alone {
        if (episode.start_seq..=episode.end_seq).contains(seq) {
            *m.entry(*v).or_insert(0) += 1;
        }
    }
    m
}

/// The intervals of an episode other than the hypervisor's whose
/// counters rose in microbursts, and the latest line; only those still
/// inside the episode (an onset dated back takes its last intervals).
fn counters_in_microbursts(episode: &Episode, x: &EpisodeExtra) -> Option<CountersInMicrobursts> {
    if episode.verdict.location() == Location::Hypervisor {
        return None;
    }
    let inside = |seq: &u64| (episode.start_seq..=episode.end_seq).contains(seq);
    let intervals = x.bursts.iter().filter(|s| inside(s)).count() as u64;
    let (_, line) = x.burst_lines.iter().rev().find(|(s, _)| inside(s))?;
    (intervals > 0).then(|| CountersInMicrobursts {
        intervals,
        line: line.clone(),
    })
}

/// An enforcement episode, not a microburst one.
fn enforced(episode: &Episode) -> bool {
    episode.verdict.is_enforcement() && episode.microburst.is_none()
}

/// `note` less its "; in microbursts: ... flows bursting: ..." part (the
/// held verdict's note carries it from the latest microbursting interval,
/// src/analysis/hold.rs).
fn without_microburst(note: &str) -> String {
    let Some(start) = note.find("; in microbursts: ") else {
        return note.to_string();
    };
    let flows = note[start..]
        .find("flows bursting: ")
        .map_or(start, |i| start + i);
    let end = note[flows..].find("; ").map_or(note.len(), |i| flows + i);
    format!("{}{}", &note[..start], &note[end..])
}

/// For enforcement verdicts: the burst ceiling (only after a step down),
/// the baseline, the burst's length and the enforced direction.
fn enforcement(episode: &Episode, extra: Option<&EpisodeExtra>) -> Option<EnforcementSummary> {
    // A microburst episode is never an enforcement: bursts over the
    // allowance, not a burst ceiling falling to a baseline.
    enforced(episode).then(|| {
        let signal = extra.map(|x| x.start_signal.as_str()).unwrap_or("");
        EnforcementSummary {
            burst_ceiling_bps: episode
                .throughput_before_bps
                .filter(|_| episode.stepped_down),
            baseline_bps: episode.throughput_during_bps,
            stepped_down: episode.stepped_down,
            burst_secs: extra.map_or(0.0, |x| ms(x.burst_secs)),
            direction: if signal.starts_with("bw_in") {
                "in"
            } else if episode.verdict == Verdict::PpsLimit {
                "both"
            } else {
                "out"
            }
            .to_string(),
            against_plan: against_plan(episode),
        }
    })
}

/// The episode set against the baseline it was planned on: the tracker's
/// line and the numbers behind it.
fn against_plan(episode: &Episode) -> Option<PlanComparison> {
    let p = episode.planned.as_ref()?;
    Some(PlanComparison {
        line: episode.against_plan()?,
        plan: p.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::without_microburst;

    #[test]
    fn an_enforcement_note_loses_only_its_microburst_part() {
        let note = "hypervisor_queuing in 5 of the last 5 intervals; bw_out_allowance_pct 106.1% \
                    over them (threshold 50.0%); in microbursts: the busiest 12 ms ran at \
                    348Mb/s, 3.4x the interval's mean of 102Mb/s; flows bursting: a:1 at \
                    234Mb/s, b:2 at 91.4Mb/s; ending: 1 of 3 intervals without it";
        assert_eq!(
            without_microburst(note),
            "hypervisor_queuing in 5 of the last 5 intervals; bw_out_allowance_pct 106.1% over \
             them (threshold 50.0%); ending: 1 of 3 intervals without it"
        );
        let at_end = "queuing; in microbursts: x; flows bursting: a at 1Mb/s, b at 2Mb/s";
        assert_eq!(without_microburst(at_end), "queuing");
        assert_eq!(without_microburst("plain"), "plain");
    }
}
