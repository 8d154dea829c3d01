//! What `/metrics` shows: the run so far as the judging unit keeps it for
//! every exporter ([`Exported`], src/analysis/exported.rs: the devices'
//! latest values and sums, the health), plus what only this endpoint has:
//! the top flows as labelled series, the labels that collided, and the
//! endpoint's own connection counters.

use std::collections::{HashMap, HashSet};
use std::ops::{Deref, DerefMut};

use crate::analysis::exported::Exported;
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;
use crate::model::workload::Workload;

pub(crate) use crate::analysis::exported::ALLOWANCES;

/// One exported flow: the labels and the last interval's values.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSeries {
    /// The interface the flow uses, `unknown` when not resolved.
    pub device: String,
    pub peer: String,
    pub local_port: u16,
    pub process: String,
    /// The owner's workload (docs/workloads.md), where known: pod namespace
    /// and name (the UID where the name is not known), container id (12
    /// digits, as `docker ps` and `crictl ps` print it), systemd service.
    pub workload: Vec<(&'static str, String)>,
    pub backoff_score: f64,
    pub rtt_inflation: Option<f64>,
    pub srtt_seconds: f64,
    pub cwnd: u32,
    pub retransmits: u64,
    pub spurious_retransmits: u64,
    pub tx_bytes_per_second: f64,
}

impl FlowSeries {
    /// The identifying labels, then the workload's (only those known: an
    /// absent label and an empty one are the same to Prometheus).
    pub(crate) fn labels(&self) -> Vec<(&'static str, String)> {
        let mut l = vec![
            ("device", self.device.clone()),
            ("peer", self.peer.clone()),
            ("local_port", self.local_port.to_string()),
            ("process", self.process.clone()),
        ];
        l.extend(self.workload.iter().cloned());
        l
    }
}

/// Everything `/metrics` shows.
#[derive(Debug, Clone, Default)]
pub struct ExporterState {
    /// The run so far, as the judging unit keeps it for every exporter
    /// (its fields read through this state).
    pub exported: Exported,
    /// The top flows of the last interval, best rank first. Replaced whole
    /// each interval: a flow that left the top N has no series any more.
    pub flows: Vec<FlowSeries>,
    /// Top flows not exported because a better-ranked flow had the same
    /// labels (same peer, local port and process, e.g. in two namespaces).
    pub flow_label_collisions: u64,
    /// The endpoint's own connection counters; `None` without a server
    /// (text encoded for tools), so no such series are written.
    pub endpoint: Option<EndpointCounters>,
}

impl Deref for ExporterState {
    type Target = Exported;
    fn deref(&self) -> &Exported {
        &self.exported
    }
}

impl DerefMut for ExporterState {
    fn deref_mut(&mut self) -> &mut Exported {
        &mut self.exported
    }
}

/// What the /metrics server refused or closed, since it started, and how
/// full it is (server.rs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointCounters {
    /// Connections closed to make room for a new one at the cap.
    pub evicted: u64,
    /// Connections without a complete request head, or whose answer was
    /// not taken, in time.
    pub timeout: u64,
    /// Requests whose head passed `MAX_HEADER_BYTES`: 431 and closed.
    pub header_too_large: u64,
    /// Failed accept() calls (out of descriptors, aborted handshakes...).
    pub accept_error: u64,
    /// Connections open when read.
    pub open: u64,
    /// The cap on open connections.
    pub max: u64,
}

impl ExporterState {
    pub fn new(top_flows: usize) -> Self {
        ExporterState {
            exported: Exported::new(top_flows),
            ..Default::default()
        }
    }

    /// Takes in one interval, keeping [`Exported`] itself: for tools and
    /// tests that encode without a judging unit. The live endpoint takes
    /// the unit's instead ([`Self::show`]).
    pub fn apply(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        self.exported.apply(snap, analysis);
        self.take_flows(snap, analysis);
    }

    /// Takes in one interval as the judging unit kept it (`exported`).
    pub(crate) fn show(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        exported: &Exported,
    ) {
        self.exported.clone_from(exported);
        self.take_flows(snap, analysis);
    }

    /// The interval's top flows as labelled series.
    fn take_flows(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        let secs = snap.interval_secs();
        let mut seen = HashSet::new();
        let mut ranked: Vec<_> = analysis
            .flows
            .iter()
            .filter(|f| f.rank >= 1 && f.rank <= self.top_flows)
            .collect();
        ranked.sort_by_key(|f| f.rank);
        self.flows.clear();
        let ifaces: HashMap<u64, &str> = snap
            .flows
            .iter()
            .filter_map(|f| Some((f.id, f.iface.as_deref()?)))
            .collect();
        for f in ranked {
            let series = FlowSeries {
                device: ifaces.get(&f.flow_id).unwrap_or(&"unknown").to_string(),
                peer: f.peer.to_string(),
                local_port: f.local.port(),
                process: f
                    .owner
                    .as_ref()
                    .map_or_else(|| "unknown".to_string(), |o| o.comm.clone()),
                workload: f
                    .owner
                    .as_ref()
                    .and_then(|o| o.workload.as_ref())
                    .map(workload_labels)
                    .unwrap_or_default(),
                backoff_score: f.backoff_score,
                rtt_inflation: f.rtt_inflation,
                srtt_seconds: f64::from(f.srtt_us) / 1e6,
                cwnd: f.cwnd,
                retransmits: f.retransmits,
                spurious_retransmits: f.spurious_retransmits,
                tx_bytes_per_second: if secs > 0.0 {
                    f.bytes_sent as f64 / secs
                } else {
                    0.0
                },
            };
            if seen.insert(series.labels()) {
                self.flows.push(series);
            } else {
                self.flow_label_collisions += 1;
            }
        }
    }
}

/// `namespace`, `pod`, `container`, `service` labels of a workload.
fn workload_labels(w: &Workload) -> Vec<(&'static str, String)> {
    let mut l = Vec::new();
    if let Some(ns) = &w.pod_namespace {
        l.push(("namespace", ns.clone()));
    }
    if let Some(pod) = w.pod_name.as_ref().or(w.pod_uid.as_ref()) {
        l.push(("pod", pod.clone()));
    }
    if let Some(id) = &w.container_id {
        l.push(("container", id.chars().take(12).collect()));
    }
    if let Some(s) = &w.service {
        l.push(("service", s.clone()));
    }
    l
}
