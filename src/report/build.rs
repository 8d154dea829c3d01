//! The report, built one interval at a time. Each snapshot is judged by the
//! same [`Judge`] as the live view (the same look-back and held verdicts),
//! and merged into episodes by the same `EpisodeTracker`, so a report says
//! what the live view said.
//!
//! Memory: the judge's look-back keeps interfaces only, and what grows with
//! the recording is small
//! per interval (one chart point per interface) or per flow and interval
//! (an `f32` pair); no snapshot is kept whole.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;

use anyhow::{bail, Result};

use super::filters::ReportFilters;
use super::model::*;
use super::workloads::WorkloadTotals;
use crate::analysis::trust::UNTRUSTED_SIGNAL;
use crate::analysis::{
    EpisodeTracker, Evidence, FlowAttribution, InterfaceVerdict, IntervalAnalysis, Judge,
    Thresholds, Verdict,
};
use crate::model::snapshot::{Owner, Snapshot};
use crate::record::TraceHeader;
use crate::shared::clock::format_utc;

/// Flows whose RTT inflation is charted.
pub const SERIES_FLOWS: usize = 5;

/// Episode details kept apart from the tracker (which has no room for
/// them); bounded like the tracker's own list of closed episodes.
const EXTRAS_KEPT: usize = 20_000;

/// A cumulative counter of the snapshot's health block, turned into its
/// growth over the report's span.
#[derive(Debug, Default, Clone)]
struct Cumulative {
    prev: Option<u64>,
    total: u64,
}

impl Cumulative {
    /// `value` as read in the next snapshot. `from_zero`: the counter is
    /// known to have started at 0 (the observer's first interval, or a
    /// counter that appears in a recording already under way). A value
    /// lower than the previous one is an observer restart: it counts again
    /// from 0.
    fn observe(&mut self, value: u64, from_zero: bool, count: bool) {
        let base = self.prev.or(from_zero.then_some(0));
        if let (Some(b), true) = (base, count) {
            self.total += if value >= b { value - b } else { value };
        }
        self.prev = Some(value);
    }

    /// A new recording: a new observer, whose counters start again.
    fn restart(&mut self) {
        self.prev = None;
    }
}

#[derive(Debug, Default)]
struct HealthAcc {
    program_events: BTreeMap<String, Cumulative>,
    program_missed: BTreeMap<String, Cumulative>,
    /// Programs not attached: (why, what is lost).
    program_absent: BTreeMap<String, (String, String)>,
    ringbuf_drops: Cumulative,
    untracked_flows: Cumulative,
    counter_read_failures: Cumulative,
    host_queue_untracked: Cumulative,
    allowance_resets: BTreeMap<String, Cumulative>,
    allowance_zeroed: BTreeMap<String, Cumulative>,
    allowance_failures: BTreeMap<String, Cumulative>,
    /// Intervals in the span whose allowance read was not judged.
    allowance_untrusted: BTreeMap<String, u64>,
}

impl HealthAcc {
    fn all_mut(&mut self) -> impl Iterator<Item = &mut Cumulative> {
        self.program_events
            .values_mut()
            .chain(self.program_missed.values_mut())
            .chain(self.allowance_resets.values_mut())
            .chain(self.allowance_zeroed.values_mut())
            .chain(self.allowance_failures.values_mut())
            .chain([
                &mut self.ringbuf_drops,
                &mut self.untracked_flows,
                &mut self.counter_read_failures,
                &mut self.host_queue_untracked,
            ])
    }
}

fn totals(m: &BTreeMap<String, Cumulative>) -> BTreeMap<String, u64> {
    m.iter().map(|(k, c)| (k.clone(), c.total)).collect()
}

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
}

/// An episode by interface, start, and whether it is calm (idle, free
/// flow): a held verdict dated back can start where the calm episode it
/// replaced started, and an episode of one cause can change its name
/// (drop to queuing) as it goes.
type EpisodeKey = (String, u64, u64, bool);

/// The non-idle run an interface is in.
#[derive(Debug, Default, Clone, Copy)]
struct Run {
    last_seq: Option<u64>,
    secs: f64,
}

/// Allowance exceeded over the span, with its denominator.
#[derive(Debug, Default, Clone)]
struct AllowanceAcc {
    exceeded: u64,
    packets: u64,
    peak_pct: Option<f64>,
}

#[derive(Debug, Clone)]
struct IfaceAcc {
    name: String,
    driver: Option<String>,
    verdicts: BTreeMap<Verdict, u64>,
    secs: f64,
    tx_bytes: u64,
    rx_bytes: u64,
    peak_tx_bps: f64,
    peak_rx_bps: f64,
    tx_wire: u64,
    rx_wire: u64,
    allowance_available: bool,
    allowance: BTreeMap<String, AllowanceAcc>,
    retrans_segs: u64,
    segs_out: u64,
    peak_retrans_pct: Option<f64>,
    peak_backlog_bytes: u64,
    host_drops: BTreeMap<String, u64>,
}

impl IfaceAcc {
    fn new(name: &str) -> Self {
        IfaceAcc {
            name: name.to_string(),
            driver: None,
            verdicts: BTreeMap::new(),
            secs: 0.0,
            tx_bytes: 0,
            rx_bytes: 0,
            peak_tx_bps: 0.0,
            peak_rx_bps: 0.0,
            tx_wire: 0,
            rx_wire: 0,
            allowance_available: false,
            allowance: BTreeMap::new(),
            retrans_segs: 0,
            segs_out: 0,
            peak_retrans_pct: None,
            peak_backlog_bytes: 0,
            host_drops: BTreeMap::new(),
        }
    }

    fn summary(&self) -> InterfaceSummary {
        let per_s = |bytes: u64| {
            if self.secs > 0.0 {
                bytes as f64 * 8.0 / self.secs
            } else {
                0.0
            }
        };
        InterfaceSummary {
            name: self.name.clone(),
            driver: self.driver.clone(),
            verdicts: self.verdicts.clone(),
            tx_bytes: self.tx_bytes,
            rx_bytes: self.rx_bytes,
            mean_tx_bps: per_s(self.tx_bytes),
            peak_tx_bps: self.peak_tx_bps,
            mean_rx_bps: per_s(self.rx_bytes),
            peak_rx_bps: self.peak_rx_bps,
            tx_wire_packets: self.tx_wire,
            rx_wire_packets: self.rx_wire,
            allowance_available: self.allowance_available,
            allowance: self
                .allowance
                .iter()
                .map(|(k, a)| {
                    (
                        k.clone(),
                        AllowanceSummary {
                            exceeded: a.exceeded,
                            pct: (a.packets > 0)
                                .then(|| a.exceeded as f64 / a.packets as f64 * 100.0),
                            peak_pct: a.peak_pct,
                        },
                    )
                })
                .collect(),
            retrans_segs: self.retrans_segs,
            segs_out: self.segs_out,
            retrans_pct: (self.segs_out > 0)
                .then(|| self.retrans_segs as f64 / self.segs_out as f64 * 100.0),
            peak_retrans_pct: self.peak_retrans_pct,
            peak_backlog_bytes: self.peak_backlog_bytes,
            host_drops: self.host_drops.clone(),
        }
    }
}

/// One flow over the span: sums, and its RTT inflation as compact points.
#[derive(Debug, Clone)]
struct FlowAcc {
    local: SocketAddr,
    peer: SocketAddr,
    owner: Option<Owner>,
    intervals: u64,
    bytes_sent: u64,
    bytes_received: u64,
    retransmits: u64,
    failed_retransmits: u64,
    cwnd_reductions: u64,
    recovery_loss_ms: f64,
    inflation_sum: f64,
    inflation_n: u64,
    peak_inflation: Option<f64>,
    min_rtt_us: u32,
    backoff_total: f64,
    peak_backoff: f64,
    backoff_intervals: u64,
    closed: bool,
    iface: Option<String>,
    /// (seconds since start, srtt/min_rtt): 8 bytes per point.
    points: Vec<(f32, f32)>,
}

impl FlowAcc {
    fn add(&mut self, a: &FlowAttribution, t: f64) {
        self.bytes_sent += a.bytes_sent;
        self.bytes_received += a.bytes_received;
        self.retransmits += a.retransmits;
        self.failed_retransmits += a.failed_retransmits;
        self.cwnd_reductions += a.cwnd_reductions;
        self.recovery_loss_ms += a.recovery_loss_ms;
        self.backoff_total += a.backoff_score;
        self.peak_backoff = self.peak_backoff.max(a.backoff_score);
        if a.backoff_score > 0.0 {
            self.backoff_intervals += 1;
        }
        if let Some(i) = a.rtt_inflation {
            self.inflation_sum += i;
            self.inflation_n += 1;
            self.peak_inflation = Some(self.peak_inflation.map_or(i, |p| p.max(i)));
            self.points.push((t as f32, i as f32));
        }
    }

    fn label(&self) -> String {
        match &self.owner {
            Some(o) => format!("{} {}/{}", self.peer, o.comm, o.pid),
            None => self.peer.to_string(),
        }
    }
}

/// Rounds a chart value back from `f32` to a short decimal.
fn short(v: f32) -> f64 {
    (f64::from(v) * 1000.0).round() / 1000.0
}

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
    /// Where the current recording's time starts (unix ms, monotonic ns),
    /// and where the report's starts (unix ms, monotonic ns of the first
    /// recording): set by the first interval, see [`Self::set_origin`].
    recording_origin: Option<(u64, u64)>,
    report_origin: Option<(u64, u64)>,
    /// Snapshots seen since the current recording started.
    seen_in_recording: u64,
    judge: Judge,
    tracker: EpisodeTracker,
    extras: HashMap<EpisodeKey, EpisodeExtra>,
    extras_order: VecDeque<EpisodeKey>,
    runs: HashMap<String, Run>,
    interfaces: Vec<IfaceAcc>,
    flows: HashMap<u64, FlowAcc>,
    health: HealthAcc,
    span: Span,
    series: Vec<IntervalPoint>,
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
        Ok(ReportBuilder {
            files,
            recording,
            recorded_thresholds: recorded.clone(),
            tracker: EpisodeTracker::new(&thresholds),
            filters,
            resolved,
            top,
            header: first.clone(),
            recording_origin: None,
            report_origin: None,
            seen_in_recording: 0,
            judge: Judge::new(thresholds),
            extras: HashMap::new(),
            extras_order: VecDeque::new(),
            runs: HashMap::new(),
            interfaces,
            flows: HashMap::new(),
            health: HealthAcc::default(),
            span: Span::default(),
            series: Vec::new(),
            warnings: Vec::new(),
            ifaces_seen,
            read_range: None,
        })
    }

    /// The intervals that follow come from the file with `header`. A new
    /// recording means a new observer: its look-back and counters start
    /// empty, as they did live.
    pub fn start_file(&mut self, header: &TraceHeader) {
        if !header.same_recording(&self.header) {
            self.judge.restart();
            self.health.all_mut().for_each(Cumulative::restart);
            self.seen_in_recording = 0;
            self.recording_origin = None;
        }
        self.header = header.clone();
    }

    /// Something the reader skipped or found missing: shown with the report.
    pub fn warn(&mut self, warning: String) {
        self.warnings.push(warning);
    }

    /// Where time starts: the header's start or, when that is later (a
    /// file whose header was written after its first interval began, as
    /// recorders before the pipeline's fix did), the start of the first
    /// interval. `--since`/`--until` are resolved
    /// against the report's origin.
    fn set_origin(&mut self, snap: &Snapshot) {
        if self.recording_origin.is_some() {
            return;
        }
        let snap_mono = snap.mono_ns.saturating_sub(snap.interval_ns);
        let origin = if self.header.start_mono_ns <= snap_mono {
            (self.header.start_unix_ms, self.header.start_mono_ns)
        } else {
            (
                snap.unix_ms.saturating_sub(snap.interval_ns / 1_000_000),
                snap_mono,
            )
        };
        self.recording_origin = Some(origin);
        if self.report_origin.is_none() {
            self.report_origin = Some(origin);
            self.recording.start_unix_ms = origin.0;
            self.resolved.since_unix_ms = self.filters.since.map(|s| s.resolve(origin.0));
            self.resolved.until_unix_ms = self.filters.until.map(|s| s.resolve(origin.0));
        }
    }

    /// Seconds from the report's origin to the end of `snap`.
    fn t_secs(&self, snap: &Snapshot) -> f64 {
        let (unix, mono) = self.recording_origin.unwrap_or_default();
        let (first_unix, _) = self.report_origin.unwrap_or_default();
        (unix as f64 - first_unix as f64) / 1e3 + snap.mono_ns.saturating_sub(mono) as f64 / 1e9
    }

    /// An interval counts when its middle lies within --since/--until.
    fn in_span(&self, snap: &Snapshot) -> bool {
        let mid = snap.unix_ms.saturating_sub(snap.interval_ns / 2_000_000);
        self.resolved.since_unix_ms.is_none_or(|s| mid >= s)
            && self.resolved.until_unix_ms.is_none_or(|u| mid <= u)
    }

    pub fn push(&mut self, snap: &Snapshot) {
        self.set_origin(snap);
        let mut analysis = self.judge.judge(snap);
        let in_span = self.in_span(snap);
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

        self.observe_health(snap, in_span);
        analysis
            .interfaces
            .retain(|v| self.filters.iface_matches(&v.iface));
        if in_span {
            let t = self.t_secs(snap);
            self.tracker.push(&analysis, snap);
            self.note_episodes(&analysis, snap, t);
            self.add_interfaces(&analysis, snap, t);
            self.add_flows(&analysis, snap, t);
            self.add_span(snap);
        }
        self.advance_runs(&analysis, snap);
        self.seen_in_recording += 1;
    }

    fn observe_health(&mut self, snap: &Snapshot, count: bool) {
        let from_zero = snap.seq == 0 || self.seen_in_recording > 0;
        let h = &snap.health;
        let acc = &mut self.health;
        for p in &h.programs {
            if !p.attached {
                acc.program_absent.insert(
                    p.name.clone(),
                    (
                        p.not_attached.clone().unwrap_or_default(),
                        p.lost.clone().unwrap_or_default(),
                    ),
                );
            }
            acc.program_events
                .entry(p.name.clone())
                .or_default()
                .observe(p.events, from_zero, count);
            acc.program_missed
                .entry(p.name.clone())
                .or_default()
                .observe(p.missed, from_zero, count);
        }
        acc.ringbuf_drops.observe(h.ringbuf_drops, from_zero, count);
        acc.untracked_flows
            .observe(h.untracked_flows, from_zero, count);
        acc.counter_read_failures
            .observe(h.counter_read_failures, from_zero, count);
        acc.host_queue_untracked
            .observe(h.host_queue_untracked, from_zero, count);
        for i in &snap.interfaces {
            if !self.filters.iface_matches(&i.name) {
                continue;
            }
            if let Some(a) = i.allowance.sample() {
                acc.allowance_resets
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.resets, from_zero, count);
                acc.allowance_zeroed
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.zeroed_reads, from_zero, count);
                acc.allowance_failures
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.read_failures, from_zero, count);
            }
        }
    }

    /// Keeps, per episode, the start and end time, the peak interval's
    /// evidence and the burst before it. Mirrors the tracker's peak rule:
    /// the first interval with the largest deciding value.
    fn note_episodes(&mut self, a: &IntervalAnalysis, snap: &Snapshot, t: f64) {
        for v in &a.interfaces {
            let Some(ep) = self.tracker.current(&v.iface) else {
                continue;
            };
            let key = (
                ep.iface.clone(),
                ep.start_seq,
                ep.start_mono_ns,
                ep.verdict.is_calm(),
            );
            let (value, signal) = (v.held.value, v.held.signal.clone());
            let alone =
                (ep.verdict.is_calm() && !v.verdict.is_calm()).then_some((snap.seq, v.verdict));
            if let Some(x) = self.extras.get_mut(&key) {
                x.end_t = t;
                x.judged_alone.extend(alone);
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
            let extra = EpisodeExtra {
                start_t: t - snap.interval_secs() - back,
                end_t: t,
                peak: value,
                evidence: v.evidence.clone(),
                held_note: v.held.note.clone(),
                burst_secs,
                start_signal: signal,
                judged_alone: alone.into_iter().collect(),
            };
            self.extras.insert(key.clone(), extra);
            self.extras_order.push_back(key);
            if self.extras_order.len() > EXTRAS_KEPT {
                if let Some(old) = self.extras_order.pop_front() {
                    self.extras.remove(&old);
                }
            }
        }
    }

    /// Extends (or ends) each interface's non-idle run with this interval.
    fn advance_runs(&mut self, a: &IntervalAnalysis, snap: &Snapshot) {
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

    fn iface_acc(&mut self, name: &str) -> &mut IfaceAcc {
        let i = match self.interfaces.iter().position(|a| a.name == name) {
            Some(i) => i,
            None => {
                self.interfaces.push(IfaceAcc::new(name));
                self.interfaces.len() - 1
            }
        };
        &mut self.interfaces[i]
    }

    fn add_interfaces(&mut self, a: &IntervalAnalysis, snap: &Snapshot, t: f64) {
        for v in &a.interfaces {
            if v.evidence.iter().any(|e| e.signal == UNTRUSTED_SIGNAL) {
                *self
                    .health
                    .allowance_untrusted
                    .entry(v.iface.clone())
                    .or_default() += 1;
            }
        }
        let min_packets = self.judge.thresholds().min_rate_packets;
        let min_segs = self.judge.thresholds().min_segs_out;
        let mut points = Vec::with_capacity(a.interfaces.len());
        for v in &a.interfaces {
            let sample = snap.interfaces.iter().find(|i| i.name == v.iface);
            let acc = self.iface_acc(&v.iface);
            add_interface(acc, v, sample, min_packets, min_segs);
            let r = &v.rates;
            points.push(InterfacePoint {
                iface: v.iface.clone(),
                verdict: v.held.verdict,
                tx_bps: r.tx_bps,
                rx_bps: r.rx_bps,
                bw_out_pct: r.bw_out_pct,
                bw_in_pct: r.bw_in_pct,
                pps_pct: r.pps_pct,
                conntrack_pct: r.conntrack_pct,
                retrans_pct: r.retransmit_pct,
                backlog_bytes: r.host_queue_available.then_some(r.local_backlog_bytes),
            });
        }
        self.series.push(IntervalPoint {
            seq: snap.seq,
            t_secs: (t * 1000.0).round() / 1000.0,
            interfaces: points,
        });
        for v in &a.interfaces {
            self.date_back(&v.iface, v.held.since_seq, v.held.verdict);
        }
    }

    /// A held verdict dated back to `since`: the intervals it now covers
    /// were shown (and counted) with the verdict before; they take this one,
    /// as its episode does.
    fn date_back(&mut self, iface: &str, since: u64, verdict: Verdict) {
        let mut moved: Vec<Verdict> = Vec::new();
        for p in self.series.iter_mut().rev().skip(1) {
            if p.seq < since {
                break;
            }
            if let Some(i) = p.interfaces.iter_mut().find(|i| i.iface == iface) {
                if i.verdict != verdict {
                    moved.push(i.verdict);
                    i.verdict = verdict;
                }
            }
        }
        if moved.is_empty() {
            return;
        }
        let acc = self.iface_acc(iface);
        for old in moved {
            if let Some(n) = acc.verdicts.get_mut(&old) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    acc.verdicts.remove(&old);
                }
            }
            *acc.verdicts.entry(verdict).or_default() += 1;
        }
    }

    fn add_flows(&mut self, a: &IntervalAnalysis, snap: &Snapshot, t: f64) {
        let attributed: HashMap<u64, &FlowAttribution> =
            a.flows.iter().map(|f| (f.flow_id, f)).collect();
        for f in &snap.flows {
            if !self.flows.contains_key(&f.id) && !self.filters.flow_matches(f) {
                continue;
            }
            let acc = self.flows.entry(f.id).or_insert_with(|| FlowAcc {
                local: f.local,
                peer: f.peer,
                owner: None,
                intervals: 0,
                bytes_sent: 0,
                bytes_received: 0,
                retransmits: 0,
                failed_retransmits: 0,
                cwnd_reductions: 0,
                recovery_loss_ms: 0.0,
                inflation_sum: 0.0,
                inflation_n: 0,
                peak_inflation: None,
                min_rtt_us: 0,
                backoff_total: 0.0,
                peak_backoff: 0.0,
                backoff_intervals: 0,
                closed: false,
                iface: None,
                points: Vec::new(),
            });
            acc.intervals += 1;
            if f.owner.is_some() {
                acc.owner.clone_from(&f.owner);
            }
            acc.closed |= f.closed;
            if f.iface.is_some() && acc.iface != f.iface {
                acc.iface.clone_from(&f.iface);
            }
            if f.min_rtt_us > 0 && (acc.min_rtt_us == 0 || f.min_rtt_us < acc.min_rtt_us) {
                acc.min_rtt_us = f.min_rtt_us;
            }
            if let Some(attr) = attributed.get(&f.id) {
                acc.add(attr, t);
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

    fn episodes(&self) -> Vec<EpisodeReport> {
        let start_mono = self.report_origin.map_or(0, |o| o.1);
        let mut out: Vec<EpisodeReport> = self
            .tracker
            .episodes()
            .into_iter()
            .map(|episode| {
                let key = (
                    episode.iface.clone(),
                    episode.start_seq,
                    episode.start_mono_ns,
                    episode.verdict.is_calm(),
                );
                let extra = self.extras.get(&key);
                let enforcement = episode.verdict.is_enforcement().then(|| {
                    let signal = extra.map(|x| x.start_signal.as_str()).unwrap_or("");
                    EnforcementSummary {
                        burst_ceiling_bps: episode
                            .throughput_before_bps
                            .filter(|_| episode.stepped_down),
                        baseline_bps: episode.throughput_during_bps,
                        stepped_down: episode.stepped_down,
                        burst_secs: extra.map_or(0.0, |x| (x.burst_secs * 1000.0).round() / 1000.0),
                        direction: if signal.starts_with("bw_in") {
                            "in"
                        } else if episode.verdict == Verdict::PpsLimit {
                            "both"
                        } else {
                            "out"
                        }
                        .to_string(),
                    }
                });
                // Without the details (only past EXTRAS_KEPT episodes), the
                // offsets come from the monotonic clock of the first file.
                let mono = |ns: u64| ns.saturating_sub(start_mono) as f64 / 1e9;
                EpisodeReport {
                    start_offset_secs: extra.map_or(mono(episode.start_mono_ns), |x| {
                        (x.start_t * 1000.0).round() / 1000.0
                    }),
                    // An episode cut short by the next one's onset ends
                    // earlier than its last note.
                    end_offset_secs: extra.map_or(mono(episode.end_mono_ns), |x| {
                        let span = episode.end_mono_ns.saturating_sub(episode.start_mono_ns);
                        let end = x.end_t.min(x.start_t + span as f64 / 1e9);
                        (end * 1000.0).round() / 1000.0
                    }),
                    evidence: extra.map(|x| x.evidence.clone()).unwrap_or_default(),
                    held_note: extra.map(|x| x.held_note.clone()).unwrap_or_default(),
                    // Only the intervals still inside the episode: an onset
                    // dated back takes the calm episode's last intervals.
                    judged_alone: extra
                        .map(|x| {
                            let mut m = BTreeMap::new();
                            for (seq, v) in &x.judged_alone {
                                if (episode.start_seq..=episode.end_seq).contains(seq) {
                                    *m.entry(*v).or_insert(0) += 1;
                                }
                            }
                            m
                        })
                        .unwrap_or_default(),
                    enforcement,
                    episode,
                }
            })
            .collect();
        out.sort_by(|a, b| {
            a.start_offset_secs
                .total_cmp(&b.start_offset_secs)
                .then_with(|| a.episode.iface.cmp(&b.episode.iface))
        });
        out
    }

    fn flows_ranked(&self) -> Vec<(u64, &FlowAcc)> {
        let mut v: Vec<(u64, &FlowAcc)> = self.flows.iter().map(|(k, f)| (*k, f)).collect();
        v.sort_by(|(ia, a), (ib, b)| {
            b.backoff_total
                .total_cmp(&a.backoff_total)
                .then(b.bytes_sent.cmp(&a.bytes_sent))
                .then(ia.cmp(ib))
        });
        v
    }

    fn thresholds_changed(&self) -> Vec<String> {
        let now = serde_json::to_value(self.judge.thresholds()).unwrap_or_default();
        let then = serde_json::to_value(&self.recorded_thresholds).unwrap_or_default();
        Thresholds::names()
            .into_iter()
            .filter(|n| now.get(n) != then.get(n))
            .map(str::to_string)
            .collect()
    }

    /// The report. Fails when `--iface` names an interface the recording
    /// does not have, or when no interval falls within `--since`/`--until`.
    pub fn finish(self) -> Result<Report> {
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
        let ranked = self.flows_ranked();
        let mut workloads = WorkloadTotals::default();
        for (_, f) in &ranked {
            workloads.add(
                f.owner.as_ref(),
                f.bytes_sent,
                f.retransmits,
                f.backoff_total,
            );
        }
        let flows = ranked
            .iter()
            .take(self.top)
            .enumerate()
            .map(|(i, (id, f))| FlowSummary {
                rank: i + 1,
                flow_id: *id,
                local: f.local,
                peer: f.peer,
                owner: f.owner.clone(),
                intervals: f.intervals,
                bytes_sent: f.bytes_sent,
                bytes_received: f.bytes_received,
                retransmits: f.retransmits,
                failed_retransmits: f.failed_retransmits,
                cwnd_reductions: f.cwnd_reductions,
                recovery_loss_ms: (f.recovery_loss_ms * 1000.0).round() / 1000.0,
                mean_rtt_inflation: (f.inflation_n > 0)
                    .then(|| f.inflation_sum / f.inflation_n as f64),
                peak_rtt_inflation: f.peak_inflation,
                min_rtt_us: f.min_rtt_us,
                backoff_total: (f.backoff_total * 10.0).round() / 10.0,
                peak_backoff: f.peak_backoff,
                backoff_intervals: f.backoff_intervals,
                closed: f.closed,
                iface: f.iface.clone(),
            })
            .collect();
        let flow_series = ranked
            .iter()
            .filter(|(_, f)| !f.points.is_empty())
            .take(SERIES_FLOWS)
            .map(|(id, f)| FlowSeries {
                flow_id: *id,
                label: f.label(),
                points: f
                    .points
                    .iter()
                    .map(|(t, i)| (short(*t), short(*i)))
                    .collect(),
            })
            .collect();
        let h = &self.health;
        let health = HealthSummary {
            programs: h
                .program_events
                .iter()
                .map(|(name, ev)| {
                    let missed = h.program_missed.get(name).map_or(0, |m| m.total);
                    (
                        name.clone(),
                        ProgramSummary {
                            events: ev.total,
                            missed,
                            not_attached: h.program_absent.get(name).map(|a| a.0.clone()),
                            lost: h.program_absent.get(name).map(|a| a.1.clone()),
                        },
                    )
                })
                .collect(),
            ringbuf_drops: h.ringbuf_drops.total,
            untracked_flows: h.untracked_flows.total,
            counter_read_failures: h.counter_read_failures.total,
            host_queue_untracked: h.host_queue_untracked.total,
            allowance_resets: totals(&h.allowance_resets),
            allowance_zeroed_reads: totals(&h.allowance_zeroed),
            allowance_read_failures: totals(&h.allowance_failures),
            allowance_untrusted_intervals: h.allowance_untrusted.clone(),
            episodes_forgotten: self.tracker.forgotten(),
            read_warnings: self.warnings.clone(),
        };
        Ok(Report {
            files: self.files.clone(),
            recording: self.recording.clone(),
            thresholds: self.judge.thresholds().clone(),
            thresholds_changed: self.thresholds_changed(),
            filters: self.resolved.clone(),
            span: self.span.clone(),
            episodes: self.episodes(),
            interfaces: self.interfaces.iter().map(IfaceAcc::summary).collect(),
            flows,
            workloads: workloads.finish(),
            health,
            series: self.series,
            flow_series,
        })
    }
}

/// One interval of one interface into its summary.
fn add_interface(
    acc: &mut IfaceAcc,
    v: &InterfaceVerdict,
    sample: Option<&crate::model::snapshot::InterfaceSample>,
    min_packets: f64,
    min_segs: f64,
) {
    let r = &v.rates;
    *acc.verdicts.entry(v.held.verdict).or_default() += 1;
    acc.secs += r.interval_secs;
    if let Some(s) = sample {
        acc.tx_bytes += s.delta.tx_bytes;
        acc.rx_bytes += s.delta.rx_bytes;
        if s.driver.is_some() {
            acc.driver.clone_from(&s.driver);
        }
        if let Some(h) = &s.host_queue {
            for (reason, n) in &h.drops {
                *acc.host_drops.entry(reason.clone()).or_default() += n;
            }
        }
    }
    acc.peak_tx_bps = acc.peak_tx_bps.max(r.tx_bps);
    acc.peak_rx_bps = acc.peak_rx_bps.max(r.rx_bps);
    acc.tx_wire += r.tx_wire_packets;
    acc.rx_wire += r.rx_wire_packets;
    acc.peak_backlog_bytes = acc.peak_backlog_bytes.max(r.local_backlog_bytes);
    acc.retrans_segs += r.retrans_segs;
    acc.segs_out += r.segs_out;
    if r.segs_out as f64 >= min_segs {
        if let Some(p) = r.retransmit_pct {
            acc.peak_retrans_pct = Some(acc.peak_retrans_pct.map_or(p, |x| x.max(p)));
        }
    }
    if !r.allowance_available {
        return;
    }
    acc.allowance_available = true;
    let both = r.tx_wire_packets + r.rx_wire_packets;
    // Each rate over the packets it is a share of (docs/verdicts.md); the
    // peak only over intervals with enough packets to judge, as live.
    let counters = [
        ("bw_out", r.bw_out_exceeded, r.tx_wire_packets),
        ("bw_in", r.bw_in_exceeded, r.rx_wire_packets),
        ("pps", r.pps_exceeded, both),
        ("conntrack", r.conntrack_exceeded, both),
        ("linklocal", r.linklocal_exceeded, both),
    ];
    for (name, exceeded, packets) in counters {
        let Some(n) = exceeded else { continue };
        let a = acc.allowance.entry(name.to_string()).or_default();
        a.exceeded += n;
        a.packets += packets;
        if packets > 0 && packets as f64 >= min_packets {
            let p = n as f64 / packets as f64 * 100.0;
            a.peak_pct = Some(a.peak_pct.map_or(p, |x| x.max(p)));
        }
    }
}
