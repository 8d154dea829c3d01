//! What the exporter shows, kept between intervals: the latest values of
//! every device and the top flows, plus the counters the exporter sums
//! itself (segments, retransmits, wire packets), which exist only as
//! per-interval deltas in the analysis.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::analysis::headroom::Headroom;
use crate::analysis::{IntervalAnalysis, Verdict};
use crate::model::snapshot::{AllowanceCounters, LinkCounters, ProgramHealth, Snapshot};
use crate::model::workload::Workload;

/// The allowance kinds of `throttlescope_allowance_exceeded_percent`.
pub(crate) const ALLOWANCES: [&str; 5] = ["bw_out", "bw_in", "pps", "conntrack", "linklocal"];

/// One device's series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeviceState {
    /// Interface counters as read at the end of the last interval.
    pub link: LinkCounters,
    /// ENA allowance totals, failures and resets; `None` when the device
    /// reports none (then no `node_ethtool_*` series exist for it).
    pub allowance: Option<AllowanceState>,
    /// Sums over every interval since the exporter started.
    pub segs_out: u64,
    pub retrans_segs: u64,
    /// Of them, reported spurious by the receivers (D-SACK).
    pub retrans_spurious: u64,
    pub tx_wire_packets: u64,
    pub rx_wire_packets: u64,
    /// Last interval's normalised rates, in `ALLOWANCES` order; `None`
    /// where the analysis had none (no counter, no packets, read gap).
    pub exceeded_pct: [Option<f64>; 5],
    pub retransmit_pct: Option<f64>,
    /// The held verdict at the last interval and its confidence.
    pub verdict: Option<(Verdict, f64)>,
    /// How long the held verdict has lasted, seconds (from its onset).
    pub verdict_secs: f64,
    /// Last interval's peak rates (the busiest `--peak-window`), [tx, rx]:
    /// bytes/s and packets/s, and the window in seconds; `None` where not
    /// measured.
    pub peak_bytes_per_s: [Option<f64>; 2],
    pub peak_packets_per_s: [Option<f64>; 2],
    pub peak_window_secs: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllowanceState {
    pub totals: AllowanceCounters,
    pub read_failures: u64,
    /// Reads whose counters were not trusted (stepped back, docs/allowance.md).
    pub untrusted_reads: u64,
    pub resets: u64,
}

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
    /// Per-flow series are exported for flows of rank 1..=top_flows.
    pub top_flows: usize,
    pub devices: BTreeMap<String, DeviceState>,
    /// The top flows of the last interval, best rank first. Replaced whole
    /// each interval: a flow that left the top N has no series any more.
    pub flows: Vec<FlowSeries>,
    /// Top flows not exported because a better-ranked flow had the same
    /// labels (same peer, local port and process, e.g. in two namespaces).
    pub flow_label_collisions: u64,
    pub programs: Vec<ProgramHealth>,
    pub ringbuf_drops: u64,
    pub closes_lost: u64,
    pub closes_deferred: u64,
    pub moved_set_full: u64,
    pub moved_set_gone: u64,
    pub folded_flows: u64,
    pub untracked_flows: u64,
    /// Untracked sockets open at the end of the last interval, and the
    /// bytes untracked sockets sent and received since start (the
    /// snapshots carry each interval's).
    pub untracked_open: u64,
    pub untracked_bytes_sent: u64,
    pub untracked_bytes_received: u64,
    pub counter_read_failures: u64,
    pub late_intervals: u64,
    pub idle_flows: u64,
    /// `--iface` interfaces missing in the last interval.
    pub missing_interfaces: Vec<String>,
    /// The last interval's headroom to the instance's baseline; `None`
    /// when no baseline is known (then no baseline series exist). Its
    /// totals already run since observing started, so they are the
    /// counters as they are.
    pub headroom: Option<Headroom>,
    /// Intervals published since start.
    pub intervals: u64,
    /// Wall clock at the end of the last interval, in ms since the epoch.
    pub last_unix_ms: Option<u64>,
    /// The endpoint's own connection counters; `None` without a server
    /// (text encoded for tools), so no such series are written.
    pub endpoint: Option<EndpointCounters>,
    /// The OTLP exporter's delivery counters (`health.otlp`); `None`
    /// without `--otlp`.
    pub otlp: Option<crate::model::snapshot::OtlpHealth>,
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
            top_flows,
            ..Default::default()
        }
    }

    /// Takes in one interval. Devices not in `snap` are dropped (their
    /// sums restart from 0 if they come back, which Prometheus reads as a
    /// counter reset).
    pub fn apply(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        let mut devices = BTreeMap::new();
        for iface in &snap.interfaces {
            let mut d = self.devices.remove(&iface.name).unwrap_or_default();
            d.link = iface.totals;
            d.peak_bytes_per_s =
                [iface.tx_peak_bps, iface.rx_peak_bps].map(|b| b.map(|b| b as f64 / 8.0));
            d.peak_packets_per_s =
                [iface.tx_peak_pps, iface.rx_peak_pps].map(|p| p.map(|p| p as f64));
            d.peak_window_secs = iface.peak_window_us.map(|us| us as f64 / 1e6);
            d.allowance = iface.allowance.sample().map(|a| AllowanceState {
                totals: a.totals,
                read_failures: a.read_failures,
                untrusted_reads: a.untrusted_reads,
                resets: a.resets,
            });
            match analysis.interfaces.iter().find(|v| v.iface == iface.name) {
                Some(v) => {
                    let r = &v.rates;
                    d.segs_out += r.segs_out;
                    d.retrans_segs += r.retrans_segs;
                    d.retrans_spurious += r.retrans_spurious;
                    d.tx_wire_packets += r.tx_wire_packets;
                    d.rx_wire_packets += r.rx_wire_packets;
                    d.exceeded_pct = [
                        r.bw_out_pct,
                        r.bw_in_pct,
                        r.pps_pct,
                        r.conntrack_pct,
                        r.linklocal_pct,
                    ];
                    d.retransmit_pct = r.retransmit_pct;
                    d.verdict = Some((v.held.verdict, v.held.confidence));
                    d.verdict_secs = snap.mono_ns.saturating_sub(v.held.since_mono_ns) as f64 / 1e9;
                }
                None => {
                    d.exceeded_pct = [None; 5];
                    d.retransmit_pct = None;
                    d.verdict = None;
                }
            }
            devices.insert(iface.name.clone(), d);
        }
        self.devices = devices;

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

        let h = &snap.health;
        self.programs = h.programs.clone();
        self.ringbuf_drops = h.ringbuf_drops;
        self.closes_lost = h.closes_lost;
        self.closes_deferred = h.closes_deferred;
        self.moved_set_full = h.moved_set_full;
        self.moved_set_gone = h.moved_set_gone;
        self.folded_flows = snap.folded.flow_count();
        self.untracked_flows = h.untracked_flows;
        self.untracked_open = h.untracked_open;
        self.untracked_bytes_sent += h.untracked_bytes_sent;
        self.untracked_bytes_received += h.untracked_bytes_received;
        self.counter_read_failures = h.counter_read_failures;
        self.late_intervals = h.late_intervals;
        self.otlp = h.otlp;
        self.idle_flows = snap.idle_flows;
        self.missing_interfaces.clone_from(&h.missing_interfaces);
        self.headroom.clone_from(&analysis.headroom);
        self.intervals += 1;
        self.last_unix_ms = Some(snap.unix_ms);
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
