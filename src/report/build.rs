//! The report, built one interval at a time. Each snapshot is judged by the
//! judging unit (src/analysis/judging.rs), as the live pipeline and replay
//! (src/pipeline.rs) judge every interval: the same look-back, held
//! verdicts and headroom, started again where the walk says a new
//! recording starts, as its observer did. The unit tracks as episodes the
//! verdicts of the interfaces `--iface` keeps, of the intervals within
//! `--since`/`--until`; it also dates each interval, as replay labels it. Judged
//! with the recorded thresholds over the whole recording, the held verdicts
//! and episodes are those the live views showed; with other thresholds,
//! what they would have shown; over a narrower span, episodes begin and
//! end at its edges.
//!
//! This file is the builder's skeleton: the report's origin and span, and
//! each interval handed to the parts, one idea each: the health counters
//! (build/health.rs), the episodes' details (build/episodes.rs), the
//! interfaces and the chart series (build/interfaces.rs), the flows and
//! their backoff (build/flows.rs), the instance's rates against its
//! baseline (build/sizing.rs).
//!
//! Memory: the judge's look-back keeps interfaces only, and what grows with
//! the recording is small
//! per interval (one chart point per interface) or per flow and interval
//! (an `f32` pair); no snapshot is kept whole.

mod episodes;
mod flows;
mod health;
mod interfaces;
mod sizing;

use std::collections::BTreeSet;

use anyhow::{bail, Result};

use super::filters::ReportFilters;
use super::model::*;
use crate::analysis::{Judging, Thresholds};
use crate::model::instance::Plan;
use crate::model::snapshot::Snapshot;
use crate::record::TraceHeader;
use crate::shared::clock::format_utc;
use episodes::EpisodeNotes;
use flows::{FlowParts, Flows};
use health::HealthAcc;
use interfaces::{IfaceAcc, Interfaces};
use sizing::Sizing;

/// Builds a [`Report`] from snapshots pushed in recording order.
pub struct ReportBuilder {
    files: Vec<String>,
    recording: RecordingInfo,
    recorded_thresholds: Thresholds,
    filters: ReportFilters,
    resolved: Filters,
    top: usize,
    /// The current file's header.
    header: TraceHeader,
    /// Where the report's time starts (unix ms, monotonic ns of the first
    /// recording): set by the first interval, see [`Self::set_origin`].
    report_origin: Option<(u64, u64)>,
    /// Snapshots seen since the current recording started.
    seen_in_recording: u64,
    /// Judges, dates and tracks episodes, as live.
    judging: Judging,
    sizing: Sizing,
    episode_notes: EpisodeNotes,
    interfaces: Interfaces,
    flows: Flows,
    health: HealthAcc,
    span: Span,
    warnings: Vec<String>,
    /// Every interface met (before `--iface`), to check `--iface` names.
    ifaces_seen: BTreeSet<String>,
    /// Wall-clock range of every interval read (before `--since`/`--until`).
    read_range: Option<(u64, u64)>,
}

impl ReportBuilder {
    /// `headers`: the files' headers in recording order (at least one);
    /// `recorded`: what the recording was judged with live; `thresholds`:
    /// what to judge with now.
    pub fn new(
        files: Vec<String>,
        headers: &[TraceHeader],
        recorded: &Thresholds,
        thresholds: Thresholds,
        filters: ReportFilters,
        top: usize,
    ) -> Result<Self> {
        let Some(first) = headers.first() else {
            bail!("no trace file to report on");
        };
        let start = first.start_unix_ms;
        let resolved = Filters {
            flows: filters.flow_texts.clone(),
            interfaces: filters.interfaces.clone(),
            since_unix_ms: filters.since.map(|s| s.resolve(start)),
            until_unix_ms: filters.until.map(|s| s.resolve(start)),
        };
        if let (Some(s), Some(u)) = (resolved.since_unix_ms, resolved.until_unix_ms) {
            if s > u {
                bail!(
                    "--since ({}) is after --until ({})",
                    format_utc(s),
                    format_utc(u)
                );
            }
        }
        let recording = RecordingInfo {
            host: first.host.clone(),
            kernel: first.kernel.clone(),
            tool_version: first.tool_version.clone(),
            format_version: first.version.to_string(),
            interfaces: first.interfaces.clone(),
            interval_ns: first.interval_ns,
            start_unix_ms: start,
            segments: headers.len(),
        };
        let (accs, ifaces_seen) = header_interfaces(headers, &filters);
        let mut judging = Judging::new(thresholds, None);
        judging.read_file(first.start());
        Ok(ReportBuilder {
            files,
            recording,
            recorded_thresholds: recorded.clone(),
            filters,
            resolved,
            top,
            header: first.clone(),
            report_origin: None,
            seen_in_recording: 0,
            judging,
            sizing: Sizing::new(Plan::none(), &first.kernel),
            episode_notes: EpisodeNotes::default(),
            interfaces: Interfaces::new(accs),
            flows: Flows::default(),
            health: HealthAcc::default(),
            span: Span::default(),
            warnings: Vec::new(),
            ifaces_seen,
            read_range: None,
        })
    }

    /// What headroom is measured against (`report::plan::for_recording`);
    /// before the first interval. Without it the report has no headroom.
    pub fn set_plan(&mut self, plan: Plan) {
        self.judging.plan_against(plan.baseline.clone());
        self.sizing = Sizing::new(plan, &self.recording.kernel);
    }

    /// The walk's `NewRecording`: the intervals that follow come from a
    /// new recording, whose first file has `header`. A new recording means
    /// a new observer: its look-back and counters start empty, as they did
    /// live.
    pub(crate) fn new_recording(&mut self, header: &TraceHeader) {
        self.judging.new_recording(header.start());
        self.interfaces.new_recording();
        self.health.restart();
        self.seen_in_recording = 0;
        self.header = header.clone();
    }

    /// The walk's `NextFile`: the intervals that follow come from the next
    /// file of the same recording.
    pub(crate) fn next_file(&mut self, header: &TraceHeader) {
        self.judging.read_file(header.start());
        self.header = header.clone();
    }

    /// The intervals that follow come from the file with `header`, a new
    /// recording or not as the walk's rule says (`walk::file_item`): for
    /// tests that feed headers by hand.
    #[cfg(test)]
    pub(crate) fn start_file(&mut self, header: &TraceHeader) {
        use crate::record::WalkItem;
        match crate::record::walk::file_item(Some(&self.header), header.clone()) {
            WalkItem::NewRecording(h) => self.new_recording(&h),
            _ => self.next_file(header),
        }
    }

    /// Something the reader skipped or found missing: shown with the report.
    pub(crate) fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Dates `snap` (the unit's timeline: each recording from its own
    /// origin, see `Judging::place`) and, at the first interval, sets the
    /// report's origin: `--since`/`--until` are resolved against it.
    fn set_origin(&mut self, snap: &Snapshot) -> f64 {
        let t = self.judging.place(snap);
        if self.report_origin.is_none() {
            let origin = self.judging.origin();
            self.report_origin = origin;
            if let Some((unix_ms, _)) = origin {
                self.recording.start_unix_ms = unix_ms;
                self.resolved.since_unix_ms = self.filters.since.map(|s| s.resolve(unix_ms));
                self.resolved.until_unix_ms = self.filters.until.map(|s| s.resolve(unix_ms));
            }
        }
        t
    }

    /// An interval counts when its middle lies within --since/--until.
    fn in_span(&self, snap: &Snapshot) -> bool {
        let mid = snap.unix_ms.saturating_sub(snap.interval_ns / 2_000_000);
        self.resolved.since_unix_ms.is_none_or(|s| mid >= s)
            && self.resolved.until_unix_ms.is_none_or(|u| mid <= u)
    }

    pub fn push(&mut self, snap: &Snapshot) {
        let t = self.set_origin(snap);
        let in_span = self.in_span(snap);
        let filters = &self.filters;
        let analysis = self
            .judging
            .judge(snap, |iface| filters.iface_matches(iface), in_span);
        self.sizing
            .push(snap, analysis.headroom.as_ref(), in_span, &self.filters);
        self.note_read(snap);

        let from_zero = snap.seq == 0 || self.seen_in_recording > 0;
        self.health.observe(snap, from_zero, in_span, &self.filters);
        if in_span {
            let linklocal = linklocal_counts(&analysis, snap);
            let tracker = self.judging.episodes();
            self.episode_notes
                .note(tracker, &analysis, snap, t, &self.filters.kafka, &linklocal);
            self.health.count_untrusted(&analysis);
            self.interfaces.add(
                &analysis,
                snap,
                t,
                self.judging.thresholds(),
                &self.filters.kafka,
                &linklocal,
            );
            self.flows.add(&self.filters, &analysis, snap, t);
            self.add_span(snap);
        }
        self.episode_notes.advance_runs(&analysis, snap);
        self.seen_in_recording += 1;
    }

    /// Every interval read, in the span or not: the range covered and the
    /// interfaces met, to say what `--since`/`--until`/`--iface` missed.
    fn note_read(&mut self, snap: &Snapshot) {
        let start_ms = snap.unix_ms.saturating_sub(snap.interval_ns / 1_000_000);
        self.read_range = Some(match self.read_range {
            Some((a, b)) => (a.min(start_ms), b.max(snap.unix_ms)),
            None => (start_ms, snap.unix_ms),
        });
        for i in &snap.interfaces {
            if !self.ifaces_seen.contains(&i.name) {
                self.ifaces_seen.insert(i.name.clone());
            }
        }
    }

    fn add_span(&mut self, snap: &Snapshot) {
        let s = &mut self.span;
        s.intervals += 1;
        s.first_seq.get_or_insert(snap.seq);
        s.last_seq = Some(snap.seq);
        s.start_unix_ms
            .get_or_insert(snap.unix_ms.saturating_sub(snap.interval_ns / 1_000_000));
        s.end_unix_ms = Some(snap.unix_ms);
        s.seconds += snap.interval_secs();
    }

    fn thresholds_changed(&self) -> Vec<String> {
        let now = serde_json::to_value(self.judging.thresholds()).unwrap_or_default();
        let then = serde_json::to_value(&self.recorded_thresholds).unwrap_or_default();
        Thresholds::names()
            .into_iter()
            .filter(|n| now.get(n) != then.get(n))
            .map(str::to_string)
            .collect()
    }

    /// Fails when `--iface` names an interface the recording does not have,
    /// or when no interval fell within `--since`/`--until`.
    fn check_filters(&self) -> Result<()> {
        let unknown: Vec<&String> = self
            .filters
            .interfaces
            .iter()
            .filter(|i| !self.ifaces_seen.contains(*i))
            .collect();
        if !unknown.is_empty() {
            bail!(
                "--iface {}: not in the recording (it has: {})",
                unknown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.ifaces_seen
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if self.span.intervals == 0 {
            let covered = match self.read_range {
                Some((a, b)) => format!("{} to {}", format_utc(a), format_utc(b)),
                None => "nothing".into(),
            };
            let bound = |b: Option<u64>| b.map_or("-".to_string(), format_utc);
            bail!(
                "no interval between --since {} and --until {} (the recording covers {covered})",
                bound(self.resolved.since_unix_ms),
                bound(self.resolved.until_unix_ms)
            );
        }
        Ok(())
    }

    /// The report. Fails when `--iface` names an interface the recording
    /// does not have, or when no interval falls within `--since`/`--until`.
    pub fn finish(self) -> Result<Report> {
        self.check_filters()?;
        let FlowParts {
            flows,
            flow_series,
            workloads,
        } = self.flows.finish(self.top);
        let health = self
            .health
            .summary(self.judging.episodes().forgotten(), self.warnings.clone());
        let start_mono = self.report_origin.map_or(0, |o| o.1);
        let episodes = self
            .episode_notes
            .reports(self.judging.episodes(), start_mono);
        Ok(Report {
            files: self.files.clone(),
            recording: self.recording.clone(),
            thresholds: self.judging.thresholds().clone(),
            thresholds_changed: self.thresholds_changed(),
            filters: self.resolved.clone(),
            span: self.span.clone(),
            right_sizing: {
                let mut s = self.sizing.finish(self.recording.interval_ns as f64 / 1e9);
                s.measured = sizing::measured(&episodes);
                s
            },
            episodes,
            interfaces: self.interfaces.summaries(),
            flows,
            workloads: workloads.finish(),
            health,
            series: self.interfaces.into_series(),
            flow_series,
        })
    }
}

/// The interval's packets to the link-local services by sender, of each
/// interface judged that the link-local probes measured.
fn linklocal_counts(
    a: &crate::analysis::IntervalAnalysis,
    snap: &Snapshot,
) -> Vec<(String, crate::analysis::linklocal::LinkLocalCounts)> {
    a.interfaces
        .iter()
        .filter_map(|v| {
            let sample = snap.interfaces.iter().find(|i| i.name == v.iface)?;
            Some((
                v.iface.clone(),
                crate::analysis::linklocal::counts(snap, sample)?,
            ))
        })
        .collect()
}

/// No baseline: the built-in table, for the types that cover the rates.
/// The headers' interfaces kept by `--iface`, each once, in their order;
/// and every interface they name, kept or not.
fn header_interfaces(
    headers: &[TraceHeader],
    filters: &ReportFilters,
) -> (Vec<IfaceAcc>, BTreeSet<String>) {
    let mut interfaces = Vec::new();
    let mut ifaces_seen = BTreeSet::new();
    for h in headers {
        for i in &h.interfaces {
            ifaces_seen.insert(i.name.clone());
            if filters.iface_matches(&i.name)
                && !interfaces.iter().any(|a: &IfaceAcc| a.name == i.name)
            {
                let mut acc = IfaceAcc::new(&i.name);
                acc.driver = i.driver.clone();
                interfaces.push(acc);
            }
        }
    }
    (interfaces, ifaces_seen)
}
