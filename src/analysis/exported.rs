//! What the exporters (`--metrics`, `--otlp`) show of the run so far, kept
//! between intervals by the judging unit (judging.rs) once per interval,
//! whichever exporters are on: the latest values of every device, the
//! judgement of its last interval, the observer's health, and the sums
//! that exist only as per-interval deltas in the analysis (segments,
//! retransmits, wire packets, untracked bytes, intervals). The exporters
//! render it; neither sums anything itself.

use std::collections::BTreeMap;

use super::exported_kafka::KafkaExported;
use super::headroom::Headroom;
use super::{IntervalAnalysis, Verdict};
use crate::model::snapshot::{
    AllowanceCounters, KafkaHealth, LinkCounters, OtlpHealth, ProgramHealth, Snapshot,
};

/// The allowance kinds of the exceeded shares, in the order of
/// [`DeviceState::exceeded_pct`].
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
    /// Packets sent to the instance's link-local services through it
    /// (UDP counted in the kernel, TCP flows to them), summed since the
    /// exporter started, and the last interval's per second; `None` until
    /// measured (rates' `linklocal_pps`).
    pub linklocal_packets: Option<u64>,
    pub linklocal_pps: Option<f64>,
    /// TCP flows open through it at the end of the last interval, idle
    /// ones included, and of them the idle (60 s or more); `None` where
    /// not measured (rates' `conntrack_openers.open`).
    pub tcp_flows_open: Option<u64>,
    pub tcp_flows_idle: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllowanceState {
    pub totals: AllowanceCounters,
    pub read_failures: u64,
    /// Reads whose counters were not trusted (stepped back, docs/allowance.md).
    pub untrusted_reads: u64,
    pub resets: u64,
}

/// The run so far, as the exporters show it.
#[derive(Debug, Clone, Default)]
pub struct Exported {
    /// Per-flow series are exported for flows of rank 1..=top_flows
    /// (`--metrics-flows`, one bound for both exporters).
    pub top_flows: usize,
    pub devices: BTreeMap<String, DeviceState>,
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
    /// Intervals taken in since start.
    pub intervals: u64,
    /// Wall clock at the end of the last interval, in ms since the epoch.
    pub last_unix_ms: Option<u64>,
    /// The OTLP exporter's delivery counters (`health.otlp`); `None`
    /// without `--otlp`.
    pub otlp: Option<OtlpHealth>,
    /// Under `--per-packet auto`: whether the per-packet programs run in
    /// the next interval, and the intervals since start whose were paused.
    pub per_packet: Option<(bool, u64)>,
    /// Per device, Kafka role and group (bounded): the traffic's sums
    /// (exported_kafka.rs); empty when no flow has a Kafka identity.
    pub kafka: KafkaExported,
    /// The Kafka lookup's own counters (`health.kafka`); `None` when no
    /// lookup runs (`--kafka off`, or none found).
    pub kafka_lookup: Option<KafkaHealth>,
}

impl Exported {
    pub fn new(top_flows: usize) -> Self {
        Exported {
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
                    d.linklocal_pps = r.linklocal_pps;
                    d.tcp_flows_open = r.conntrack_openers.open;
                    d.tcp_flows_idle = r.conntrack_openers.idle;
                    if let Some(pps) = r.linklocal_pps {
                        let n = (pps * r.interval_secs).round() as u64;
                        d.linklocal_packets = Some(d.linklocal_packets.unwrap_or(0) + n);
                    }
                    d.verdict = Some((v.held.verdict, v.held.confidence));
                    d.verdict_secs = snap.mono_ns.saturating_sub(v.held.since_mono_ns) as f64 / 1e9;
                }
                None => {
                    d.exceeded_pct = [None; 5];
                    d.retransmit_pct = None;
                    d.linklocal_pps = None;
                    d.tcp_flows_open = None;
                    d.tcp_flows_idle = None;
                    d.verdict = None;
                }
            }
            devices.insert(iface.name.clone(), d);
        }
        self.devices = devices;
        let names: Vec<&str> = snap.interfaces.iter().map(|i| i.name.as_str()).collect();
        self.kafka.apply(&names, &analysis.kafka);

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
        if let Some(p) = &h.per_packet {
            let paused = self.per_packet.map_or(0, |(_, n)| n) + u64::from(!p.measured);
            self.per_packet = Some((p.attached, paused));
        }
        self.kafka_lookup.clone_from(&h.kafka);
        self.idle_flows = snap.idle_flows;
        self.missing_interfaces.clone_from(&h.missing_interfaces);
        self.headroom.clone_from(&analysis.headroom);
        self.intervals += 1;
        self.last_unix_ms = Some(snap.unix_ms);
    }
}
