//! Per flow over the span: its totals, its backoff score, and its RTT
//! inflation as compact chart points; then the flows ranked by how much
//! they backed off, and the workloads they belong to.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::analysis::{BackoffParts, FlowAttribution, IntervalAnalysis};
use crate::model::kafka::KafkaFlow;
use crate::model::snapshot::{FlowSample, Owner, Snapshot};
use crate::report::filters::ReportFilters;
use crate::report::model::{FlowSeries, FlowSummary};
use crate::report::workloads::WorkloadTotals;

/// Flows whose RTT inflation is charted.
pub(crate) const SERIES_FLOWS: usize = 5;

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
    spurious_retransmits: u64,
    failed_retransmits: u64,
    cwnd_reductions: u64,
    recovery_loss_ms: f64,
    peak_added_delay_us: u32,
    backoff_parts: BackoffParts,
    inflation_sum: f64,
    inflation_n: u64,
    peak_inflation: Option<f64>,
    min_rtt_us: u32,
    backoff_total: f64,
    peak_backoff: f64,
    backoff_intervals: u64,
    closed: bool,
    iface: Option<String>,
    peak_bps: Option<f64>,
    /// Its Kafka identity, as last known.
    kafka: Option<KafkaFlow>,
    /// (seconds since start, srtt/min_rtt): 8 bytes per point.
    points: Vec<(f32, f32)>,
}

impl FlowAcc {
    fn new(f: &FlowSample) -> Self {
        FlowAcc {
            local: f.local,
            peer: f.peer,
            owner: None,
            intervals: 0,
            bytes_sent: 0,
            bytes_received: 0,
            retransmits: 0,
            spurious_retransmits: 0,
            failed_retransmits: 0,
            cwnd_reductions: 0,
            recovery_loss_ms: 0.0,
            peak_added_delay_us: 0,
            backoff_parts: BackoffParts::default(),
            inflation_sum: 0.0,
            inflation_n: 0,
            peak_inflation: None,
            min_rtt_us: 0,
            backoff_total: 0.0,
            peak_backoff: 0.0,
            backoff_intervals: 0,
            closed: false,
            iface: None,
            peak_bps: None,
            kafka: None,
            points: Vec::new(),
        }
    }

    /// What the snapshot says of the flow itself: owner, close, interface,
    /// Kafka identity and the smallest min_rtt seen.
    fn observe(&mut self, f: &FlowSample) {
        self.intervals += 1;
        if f.owner.is_some() {
            self.owner.clone_from(&f.owner);
        }
        self.closed |= f.closed;
        if f.kafka.is_some() && self.kafka != f.kafka {
            self.kafka.clone_from(&f.kafka);
        }
        if f.iface.is_some() && self.iface != f.iface {
            self.iface.clone_from(&f.iface);
        }
        if let Some(p) = f.peak_bps.map(|p| p as f64) {
            self.peak_bps = Some(self.peak_bps.map_or(p, |q| q.max(p)));
        }
        if f.min_rtt_us > 0 && (self.min_rtt_us == 0 || f.min_rtt_us < self.min_rtt_us) {
            self.min_rtt_us = f.min_rtt_us;
        }
    }

    /// What the analysis says of the flow in the interval ending at `t`.
    fn add(&mut self, a: &FlowAttribution, t: f64) {
        self.bytes_sent += a.bytes_sent;
        self.bytes_received += a.bytes_received;
        self.retransmits += a.retransmits;
        self.spurious_retransmits += a.spurious_retransmits;
        self.failed_retransmits += a.failed_retransmits;
        if a.bytes_sent > 0 {
            self.peak_added_delay_us = self.peak_added_delay_us.max(a.added_delay_us);
        }
        let p = &mut self.backoff_parts;
        p.recovery += a.backoff_parts.recovery;
        p.retransmits += a.backoff_parts.retransmits;
        p.delay += a.backoff_parts.delay;
        p.cwnd += a.backoff_parts.cwnd;
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

    fn summary(&self, rank: usize, flow_id: u64) -> FlowSummary {
        FlowSummary {
            rank,
            flow_id,
            local: self.local,
            peer: self.peer,
            owner: self.owner.clone(),
            intervals: self.intervals,
            bytes_sent: self.bytes_sent,
            bytes_received: self.bytes_received,
            retransmits: self.retransmits,
            spurious_retransmits: self.spurious_retransmits,
            failed_retransmits: self.failed_retransmits,
            peak_added_delay_us: self.peak_added_delay_us,
            backoff_parts_total: self.backoff_parts,
            cwnd_reductions: self.cwnd_reductions,
            recovery_loss_ms: (self.recovery_loss_ms * 1000.0).round() / 1000.0,
            mean_rtt_inflation: (self.inflation_n > 0)
                .then(|| self.inflation_sum / self.inflation_n as f64),
            peak_rtt_inflation: self.peak_inflation,
            min_rtt_us: self.min_rtt_us,
            backoff_total: (self.backoff_total * 10.0).round() / 10.0,
            peak_backoff: self.peak_backoff,
            peak_bps: self.peak_bps,
            backoff_intervals: self.backoff_intervals,
            closed: self.closed,
            iface: self.iface.clone(),
            kafka: self.kafka.clone(),
        }
    }
}

/// Rounds a chart value back from `f32` to a short decimal.
fn short(v: f32) -> f64 {
    (f64::from(v) * 1000.0).round() / 1000.0
}

/// The flows kept by the filters, by flow id.
#[derive(Debug, Default)]
pub(super) struct Flows {
    flows: HashMap<u64, FlowAcc>,
}

/// The flows' part of the report.
pub(super) struct FlowParts {
    pub(super) flows: Vec<FlowSummary>,
    pub(super) flow_series: Vec<FlowSeries>,
    pub(super) workloads: WorkloadTotals,
}

impl Flows {
    /// One interval of every flow the filters keep. A flow kept once stays
    /// kept, in the intervals where it no longer matches too.
    pub(super) fn add(
        &mut self,
        filters: &ReportFilters,
        a: &IntervalAnalysis,
        snap: &Snapshot,
        t: f64,
    ) {
        let attributed: HashMap<u64, &FlowAttribution> =
            a.flows.iter().map(|f| (f.flow_id, f)).collect();
        for f in &snap.flows {
            if !self.flows.contains_key(&f.id) && !filters.flow_matches(f) {
                continue;
            }
            let acc = self.flows.entry(f.id).or_insert_with(|| FlowAcc::new(f));
            acc.observe(f);
            if let Some(attr) = attributed.get(&f.id) {
                acc.add(attr, t);
            }
        }
    }

    /// Most backoff first, then most bytes sent, then by id.
    fn ranked(&self) -> Vec<(u64, &FlowAcc)> {
        let mut v: Vec<(u64, &FlowAcc)> = self.flows.iter().map(|(k, f)| (*k, f)).collect();
        v.sort_by(|(ia, a), (ib, b)| {
            b.backoff_total
                .total_cmp(&a.backoff_total)
                .then(b.bytes_sent.cmp(&a.bytes_sent))
                .then(ia.cmp(ib))
        });
        v
    }

    /// The `top` flows ranked, the charted ones, and every flow's workload.
    pub(super) fn finish(&self, top: usize) -> FlowParts {
        let ranked = self.ranked();
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
            .take(top)
            .enumerate()
            .map(|(i, (id, f))| f.summary(i + 1, *id))
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
        FlowParts {
            flows,
            flow_series,
            workloads,
        }
    }
}
