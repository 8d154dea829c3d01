//! The judging unit: what every interval goes through, wherever it came
//! from and whoever reads it. `watch`, `record` and `replay` (the
//! pipeline, src/pipeline.rs) and `report` (src/report/build.rs) each hold
//! one, so the order below is written once and the live views, the
//! exporters, a replay and a report cannot disagree:
//!
//! 1. the judge: the interval's own verdict over a look-back, then the
//!    verdict held over a window (judge.rs);
//! 2. headroom to the baseline (headroom.rs), before the episodes see the
//!    interval, so an enforcement is set against the plan;
//! 3. the verdicts kept (`--iface` in a report; all of them live) go on to
//!    the episodes (episodes.rs), where the interval is tracked (a report
//!    tracks only those within `--since`/`--until`);
//! 4. with an exporter on, the run so far as the exporters show it
//!    (exported.rs), summed here once per interval.
//!
//! Recordings restart it: at the walk's `NewRecording` (src/record/walk.rs,
//! the one place that decides where a recording starts) the look-back, the
//! held verdicts and the headroom runs start again, as they did for the
//! observer that wrote it, and time is measured from the new recording's
//! origin ([`Timeline`]). Episodes and the exporters' sums go on.

use super::episodes::EpisodeTracker;
use super::exported::Exported;
use super::headroom::HeadroomTracker;
use super::judge::Judge;
use super::thresholds::Thresholds;
use super::IntervalAnalysis;
use crate::model::instance::Baseline;
use crate::model::snapshot::Snapshot;

/// Closed episodes per interface that each interval carries for the views
/// (the one under way comes on top).
const RECENT_EPISODES: usize = 3;

pub(crate) struct Judging {
    judge: Judge,
    headroom: HeadroomTracker,
    episodes: EpisodeTracker,
    /// `None` until an exporter asks for it ([`Self::export`]).
    exported: Option<Exported>,
    timeline: Timeline,
}

impl Judging {
    /// `baseline`: what headroom is measured against (None: no headroom).
    pub(crate) fn new(thresholds: Thresholds, baseline: Option<Baseline>) -> Self {
        Judging {
            episodes: EpisodeTracker::new(&thresholds),
            headroom: HeadroomTracker::new(baseline),
            judge: Judge::new(thresholds),
            exported: None,
            timeline: Timeline::default(),
        }
    }

    pub(crate) fn thresholds(&self) -> &Thresholds {
        self.judge.thresholds()
    }

    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        self.headroom.baseline()
    }

    /// Measures headroom against `baseline` from now on (a report's plan,
    /// set before its first interval).
    pub(crate) fn plan_against(&mut self, baseline: Option<Baseline>) {
        self.headroom = HeadroomTracker::new(baseline);
    }

    /// Keeps the run as the exporters show it ([`Exported`]), flows of
    /// rank 1..=`top_flows` exported; from the next interval on.
    pub(crate) fn export(&mut self, top_flows: usize) {
        self.exported
            .get_or_insert_with(|| Exported::new(top_flows));
    }

    /// The run so far as the exporters show it, as of the last interval
    /// judged; `None` without [`Self::export`].
    pub(crate) fn exported(&self) -> Option<&Exported> {
        self.exported.as_ref()
    }

    /// The episodes tracked so far.
    pub(crate) fn episodes(&self) -> &EpisodeTracker {
        &self.episodes
    }

    /// A new recording starts (the walk's `NewRecording`, and nothing
    /// else): no look-back, no held verdicts, no run above the baseline;
    /// its time starts at `start` (its header's unix ms and monotonic ns)
    /// or its first interval (see [`Timeline`]).
    pub(crate) fn new_recording(&mut self, start: (u64, u64)) {
        self.judge.restart();
        self.headroom.restart();
        self.timeline.new_recording(start);
    }

    /// The intervals that follow come from a file of the same recording,
    /// whose header says it started at `start` (what its time is measured
    /// from if no interval came before).
    pub(crate) fn read_file(&mut self, start: (u64, u64)) {
        self.timeline.read_file(start);
    }

    /// Seconds from the first recording's origin to the end of `snap`, as
    /// replay labels and report dates each interval.
    pub(crate) fn place(&mut self, snap: &Snapshot) -> f64 {
        self.timeline.place(snap)
    }

    /// The first recording's origin (unix ms, monotonic ns), once an
    /// interval was placed.
    pub(crate) fn origin(&self) -> Option<(u64, u64)> {
        self.timeline.first
    }

    /// Judges the next interval, in the order of the module's text.
    /// `keep`: the interfaces whose verdicts are kept (and go on to the
    /// episodes); `track_episodes`: whether this interval counts for the
    /// episodes (a report's span).
    pub(crate) fn judge(
        &mut self,
        snap: &Snapshot,
        keep: impl Fn(&str) -> bool,
        track_episodes: bool,
    ) -> IntervalAnalysis {
        let mut analysis = self.judge.judge(snap);
        analysis.headroom = self.headroom.push(snap);
        analysis.interfaces.retain(|v| keep(&v.iface));
        if track_episodes {
            self.episodes.push(&analysis, snap);
        }
        analysis.episodes = self.episodes.recent(RECENT_EPISODES);
        if let Some(e) = &mut self.exported {
            e.apply(snap, &analysis);
        }
        analysis
    }
}

/// Each interval's time since the start, one rule for `replay` and
/// `report`: each recording measured on its own monotonic clock from its
/// own origin (the header's start, or its first interval's start when that
/// is later: a file whose header was written after its first interval
/// began, as recorders before the pipeline's fix did), and placed after
/// the first recording by the wall clock. A later recording's clock is
/// another observer's (after a reboot it starts again near zero).
#[derive(Debug, Default)]
struct Timeline {
    /// The current file's header start (unix ms, mono ns).
    start: (u64, u64),
    /// Where the current recording's time starts; set by its first interval.
    recording: Option<(u64, u64)>,
    /// The first recording's: what every label counts from.
    first: Option<(u64, u64)>,
}

impl Timeline {
    fn new_recording(&mut self, start: (u64, u64)) {
        self.start = start;
        self.recording = None;
    }

    fn read_file(&mut self, start: (u64, u64)) {
        self.start = start;
    }

    fn place(&mut self, snap: &Snapshot) -> f64 {
        let start = self.start;
        let (unix, mono) = *self.recording.get_or_insert_with(|| {
            let snap_mono = snap.mono_ns.saturating_sub(snap.interval_ns);
            if start.1 <= snap_mono {
                start
            } else {
                (
                    snap.unix_ms.saturating_sub(snap.interval_ns / 1_000_000),
                    snap_mono,
                )
            }
        });
        let (first_unix, _) = *self.first.get_or_insert((unix, mono));
        (unix as f64 - first_unix as f64) / 1e3 + snap.mono_ns.saturating_sub(mono) as f64 / 1e9
    }
}
