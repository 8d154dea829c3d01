//! The exporter's state as OpenMetrics text, through prometheus-client: one
//! `Collector` writes every family from the state on each encode.
//!
//! The raw ENA counters keep node_exporter's ethtool collector names
//! (`node_ethtool_<stat>`, label `device`) so dashboards written for
//! node_exporter work unchanged. node_exporter exposes them untyped, with no
//! `_total` suffix; OpenMetrics requires that suffix on counters, so they
//! are encoded with type `unknown` (Prometheus' "untyped").

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::state::{ExporterState, ALLOWANCES};
use crate::analysis::Verdict;
use crate::model::snapshot::AllowanceCounters;

/// The content type of what [`encode`] writes.
pub const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of what [`to_prometheus_text`] writes.
pub const PROMETHEUS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

#[derive(Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Written as `<name>_total`; `name` is given without the suffix.
    Counter,
    Gauge,
    /// node_exporter's untyped counters: the name as given, no suffix.
    Untyped,
}

/// One metric family's samples, written only when it has any.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<(Labels, Value)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str, kind: Kind) -> Self {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn int(&mut self, labels: Labels, v: u64) {
        self.samples.push((labels, Value::Int(v)));
    }

    fn float(&mut self, labels: Labels, v: f64) {
        self.samples.push((labels, Value::Float(v)));
    }

    fn write(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        if self.samples.is_empty() {
            return Ok(());
        }
        let ty = match self.kind {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Untyped => MetricType::Unknown,
        };
        let mut m = enc.encode_descriptor(self.name, self.help, None, ty)?;
        for (labels, v) in &self.samples {
            if labels.is_empty() {
                // Straight on the descriptor: no braces for no labels.
                write_value(&mut m, self.kind, *v)?;
            } else {
                write_value(&mut m.encode_family(labels)?, self.kind, *v)?;
            }
        }
        Ok(())
    }
}

fn write_value(m: &mut MetricEncoder, kind: Kind, v: Value) -> std::fmt::Result {
    match (kind, v) {
        (Kind::Counter, Value::Int(v)) => m.encode_counter::<NoLabelSet, u64, u64>(&v, None),
        (Kind::Counter, Value::Float(v)) => m.encode_counter::<NoLabelSet, f64, f64>(&v, None),
        (_, Value::Int(v)) => m.encode_gauge(&v),
        (_, Value::Float(v)) => m.encode_gauge(&v),
    }
}

fn dev(name: &str) -> Labels {
    vec![("device", name.to_string())]
}

fn dev_dir(name: &str, direction: &'static str) -> Labels {
    vec![
        ("device", name.to_string()),
        ("direction", direction.into()),
    ]
}

/// Picks one statistic out of the allowance totals.
type StatField = fn(&AllowanceCounters) -> Option<u64>;

/// The `node_ethtool_*` families and the field of each.
fn ethtool_families() -> Vec<(Family, StatField)> {
    vec![
        (
            Family::new(
                "node_ethtool_bw_in_allowance_exceeded",
                "ENA: packets queued or dropped because inbound bandwidth exceeded the instance's allowance (ethtool -S bw_in_allowance_exceeded, cumulative).",
                Kind::Untyped,
            ),
            |c| c.bw_in_allowance_exceeded,
        ),
        (
            Family::new(
                "node_ethtool_bw_out_allowance_exceeded",
                "ENA: packets queued or dropped because outbound bandwidth exceeded the instance's allowance (ethtool -S bw_out_allowance_exceeded, cumulative).",
                Kind::Untyped,
            ),
            |c| c.bw_out_allowance_exceeded,
        ),
        (
            Family::new(
                "node_ethtool_pps_allowance_exceeded",
                "ENA: packets queued or dropped because the packets-per-second allowance was exceeded (cumulative).",
                Kind::Untyped,
            ),
            |c| c.pps_allowance_exceeded,
        ),
        (
            Family::new(
                "node_ethtool_conntrack_allowance_exceeded",
                "ENA: packets dropped because connection tracking exceeded its maximum (cumulative).",
                Kind::Untyped,
            ),
            |c| c.conntrack_allowance_exceeded,
        ),
        (
            Family::new(
                "node_ethtool_linklocal_allowance_exceeded",
                "ENA: packets dropped because traffic to link-local services (DNS, IMDS, NTP) exceeded its PPS allowance (cumulative).",
                Kind::Untyped,
            ),
            |c| c.linklocal_allowance_exceeded,
        ),
        (
            Family::new(
                "node_ethtool_conntrack_allowance_available",
                "ENA: tracked connections the instance can still open before reaching its conntrack allowance (a gauge).",
                Kind::Untyped,
            ),
            |c| c.conntrack_allowance_available,
        ),
    ]
}

/// Every family of `state`, in exposition order.
fn families(state: &ExporterState) -> Vec<Family> {
    let mut ethtool = ethtool_families();
    let mut packets = Family::new(
        "throttlescope_interface_packets",
        "Packets through the interface since boot (/sys/class/net/<if>/statistics; skbs when segmentation offload is on).",
        Kind::Counter,
    );
    let mut bytes = Family::new(
        "throttlescope_interface_bytes",
        "Bytes through the interface since boot (/sys/class/net/<if>/statistics).",
        Kind::Counter,
    );
    let mut dropped = Family::new(
        "throttlescope_interface_dropped",
        "Packets the interface dropped since boot (/sys/class/net/<if>/statistics).",
        Kind::Counter,
    );
    let mut segs = Family::new(
        "throttlescope_tcp_segments_sent",
        "TCP segments sent by the observed flows, summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut retrans = Family::new(
        "throttlescope_tcp_retransmitted_segments",
        "TCP segments retransmitted by the observed flows, summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut spurious = Family::new(
        "throttlescope_tcp_spurious_retransmitted_segments",
        "Of the retransmitted segments, those the receivers reported as duplicates (D-SACK): the original had arrived, nothing was lost. Summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut wire = Family::new(
        "throttlescope_wire_packets",
        "Wire packets (what the hypervisor shaper counts; estimated from bytes and MTU under segmentation offload), summed by the exporter since it started: the denominator of the normalised allowance rates.",
        Kind::Counter,
    );
    let mut exceeded = Family::new(
        "throttlescope_allowance_exceeded_percent",
        "Last interval: allowance-exceeded packets as % of wire packets (bw_out of tx, bw_in of rx, the others of tx+rx).",
        Kind::Gauge,
    );
    let mut retrans_pct = Family::new(
        "throttlescope_retransmit_percent",
        "Last interval: retransmitted segments not reported spurious, as % of segments sent (what loss is judged on).",
        Kind::Gauge,
    );
    let mut ll_packets = Family::new(
        "throttlescope_linklocal_packets",
        "Packets sent to the instance's link-local services (Amazon DNS, instance metadata, Time Sync) through the device, UDP counted in the kernel and TCP flows to them, summed by the exporter since it started: against the 1,024 packets/s per interface that linklocal_allowance_exceeded counts past.",
        Kind::Counter,
    );
    let mut ll_pps = Family::new(
        "throttlescope_linklocal_packets_per_second",
        "Last interval: packets per second sent to the link-local services through the device (limit: 1,024).",
        Kind::Gauge,
    );
    let mut flows_open = Family::new(
        "throttlescope_tcp_flows_open",
        "TCP flows open through the device at the end of the last interval, idle ones included: each holds an entry in the hypervisor's connection table (conntrack_allowance_available).",
        Kind::Gauge,
    );
    let mut flows_idle = Family::new(
        "throttlescope_tcp_flows_idle",
        "Of throttlescope_tcp_flows_open, those that have not moved for 60 s or more (the observer's start at most).",
        Kind::Gauge,
    );
    let mut verdict = Family::new(
        "throttlescope_verdict",
        "The device's verdict, held over the last intervals (no flapping at a threshold): 1 for the current verdict, 0 for every other.",
        Kind::Gauge,
    );
    let mut confidence = Family::new(
        "throttlescope_verdict_confidence",
        "Confidence of the held verdict, 0..1.",
        Kind::Gauge,
    );
    let mut verdict_secs = Family::new(
        "throttlescope_verdict_held_seconds",
        "How long the device's current verdict has held, from its onset, in seconds.",
        Kind::Gauge,
    );
    let mut peak_bytes = Family::new(
        "throttlescope_interface_peak_bytes_per_second",
        "Last interval: the busiest window (throttlescope_interface_peak_window_seconds) of the interval, in frame bytes per second, measured in the kernel; far above the mean (rate of throttlescope_interface_bytes_total), the traffic microbursts.",
        Kind::Gauge,
    );
    let mut peak_packets = Family::new(
        "throttlescope_interface_peak_packets_per_second",
        "Last interval: the busiest window of the interval, in wire packets per second, measured in the kernel.",
        Kind::Gauge,
    );
    let mut peak_window = Family::new(
        "throttlescope_interface_peak_window_seconds",
        "The window of the peak rates: --peak-window.",
        Kind::Gauge,
    );
    let mut read_failures = Family::new(
        "throttlescope_allowance_read_failures",
        "Failed reads of the device's allowance counters since start.",
        Kind::Counter,
    );
    let mut untrusted = Family::new(
        "throttlescope_allowance_untrusted_reads",
        "Reads of the device's allowance counters not trusted since start (a counter stepped back, not a reset to near zero: a second writer, a stale copy; not judged).",
        Kind::Counter,
    );
    let mut resets = Family::new(
        "throttlescope_allowance_counter_resets",
        "Times the device's allowance counters went down (a driver reset) since start.",
        Kind::Counter,
    );

    for (name, d) in &state.devices {
        if let Some(a) = &d.allowance {
            for (family, field) in ethtool.iter_mut() {
                if let Some(v) = field(&a.totals) {
                    family.int(dev(name), v);
                }
            }
            read_failures.int(dev(name), a.read_failures);
            untrusted.int(dev(name), a.untrusted_reads);
            resets.int(dev(name), a.resets);
        }
        let l = &d.link;
        packets.int(dev_dir(name, "tx"), l.tx_packets);
        packets.int(dev_dir(name, "rx"), l.rx_packets);
        bytes.int(dev_dir(name, "tx"), l.tx_bytes);
        bytes.int(dev_dir(name, "rx"), l.rx_bytes);
        dropped.int(dev_dir(name, "tx"), l.tx_dropped);
        dropped.int(dev_dir(name, "rx"), l.rx_dropped);
        segs.int(dev(name), d.segs_out);
        retrans.int(dev(name), d.retrans_segs);
        spurious.int(dev(name), d.retrans_spurious);
        wire.int(dev_dir(name, "tx"), d.tx_wire_packets);
        wire.int(dev_dir(name, "rx"), d.rx_wire_packets);
        for (allowance, pct) in ALLOWANCES.iter().zip(d.exceeded_pct) {
            if let Some(p) = pct {
                let labels = vec![
                    ("device", name.clone()),
                    ("allowance", allowance.to_string()),
                ];
                exceeded.float(labels, p);
            }
        }
        if let Some(p) = d.retransmit_pct {
            retrans_pct.float(dev(name), p);
        }
        if let Some(n) = d.linklocal_packets {
            ll_packets.int(dev(name), n);
        }
        if let Some(p) = d.linklocal_pps {
            ll_pps.float(dev(name), p);
        }
        if let Some(n) = d.tcp_flows_open {
            flows_open.int(dev(name), n);
        }
        if let Some(n) = d.tcp_flows_idle {
            flows_idle.int(dev(name), n);
        }
        for (i, direction) in ["tx", "rx"].into_iter().enumerate() {
            if let Some(v) = d.peak_bytes_per_s[i] {
                peak_bytes.float(dev_dir(name, direction), v);
            }
            if let Some(v) = d.peak_packets_per_s[i] {
                peak_packets.float(dev_dir(name, direction), v);
            }
        }
        if let Some(w) = d.peak_window_secs {
            peak_window.float(dev(name), w);
        }
        if let Some((current, conf)) = d.verdict {
            for v in Verdict::ALL {
                let labels = vec![("device", name.clone()), ("verdict", v.as_str().into())];
                verdict.int(labels, u64::from(v == current));
            }
            confidence.float(dev(name), conf);
            verdict_secs.float(dev(name), d.verdict_secs);
        }
    }

    let mut out: Vec<Family> = ethtool.into_iter().map(|(f, _)| f).collect();
    out.extend([
        packets,
        bytes,
        dropped,
        segs,
        retrans,
        spurious,
        wire,
        exceeded,
        retrans_pct,
        peak_bytes,
        peak_packets,
        peak_window,
        ll_packets,
        ll_pps,
        flows_open,
        flows_idle,
        verdict,
        confidence,
        verdict_secs,
        read_failures,
        untrusted,
        resets,
    ]);
    out.extend(headroom_families(state));
    out.extend(kafka_families(state));
    out.extend(flow_families(state));
    out.extend(health_families(state));
    out.extend(endpoint_families(state));
    out.extend(otlp_families(state));
    out.extend(per_packet_families(state));
    out.extend(kafka_lookup_families(state));
    out
}

/// Who used the allowance, by Kafka role and consumer group (issue 44;
/// bounded, src/analysis/exported_kafka.rs): none of these exist when no
/// flow has had a Kafka identity.
fn kafka_families(state: &ExporterState) -> Vec<Family> {
    let k = &state.kafka;
    if k.series.is_empty() {
        return Vec::new();
    }
    let mut bytes = Family::new(
        "throttlescope_kafka_bytes",
        "Bytes of the flows of a Kafka role (kafka_role) and consumer group (kafka_group: at most 10 named per device, the rest summed under ~other; absent for flows of no group), by direction, summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut segs = Family::new(
        "throttlescope_kafka_segments_sent",
        "TCP data segments sent by the flows of a Kafka role and group, summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut retrans = Family::new(
        "throttlescope_kafka_retransmitted_segments",
        "Retransmitted segments of the flows of a Kafka role and group that may have repaired a loss (spurious ones apart), summed by the exporter since it started.",
        Kind::Counter,
    );
    let mut delay = Family::new(
        "throttlescope_kafka_queuing_delay_seconds",
        "Last interval: the queuing delay of the flows of a Kafka role and group (smoothed RTT over the path's minimum, weighted by bytes sent); absent when they sent nothing.",
        Kind::Gauge,
    );
    let mut folded = Family::new(
        "throttlescope_kafka_groups_folded",
        "Last interval: consumer groups that moved bytes on the device but were not named (past the 10 named), their traffic summed under kafka_group=\"~other\".",
        Kind::Gauge,
    );
    for ((device, role, group), s) in &k.series {
        let labels = |direction: Option<&'static str>| {
            let mut l = vec![
                ("device", device.clone()),
                ("kafka_role", role.as_str().to_string()),
            ];
            if !group.is_empty() {
                l.push(("kafka_group", group.clone()));
            }
            if let Some(d) = direction {
                l.push(("direction", d.into()));
            }
            l
        };
        bytes.int(labels(Some("tx")), s.bytes_sent);
        bytes.int(labels(Some("rx")), s.bytes_received);
        segs.int(labels(None), s.data_segs_out);
        retrans.int(labels(None), s.retrans_segs);
        if let Some(us) = s.delay_us {
            delay.float(labels(None), us as f64 / 1e6);
        }
    }
    for (device, n) in &k.folded_groups {
        folded.int(dev(device), *n);
    }
    vec![bytes, segs, retrans, delay, folded]
}

/// The instance against its baseline (docs/headroom.md): none of these
/// exist when no baseline is known, rather than zeros that would read as an
/// idle instance with a baseline of 0.
fn headroom_families(state: &ExporterState) -> Vec<Family> {
    let Some(h) = &state.headroom else {
        return Vec::new();
    };
    let mut info = Family::new(
        "throttlescope_instance_info",
        "Always 1: the instance type the baseline was taken for (unknown with --baseline alone), and published=\"true\" when the baseline is AWS's published figure for it, \"false\" when given with --baseline.",
        Kind::Gauge,
    );
    info.int(
        vec![
            (
                "instance_type",
                h.instance_type.clone().unwrap_or_else(|| "unknown".into()),
            ),
            ("published", h.published.to_string()),
        ],
        1,
    );
    let mut baseline = Family::new(
        "throttlescope_baseline_bits_per_second",
        "The instance's network baseline by direction (tx out, rx in), in bits per second: what it can count on; above it the instance spends burst credits.",
        Kind::Gauge,
    );
    let mut ratio = Family::new(
        "throttlescope_baseline_utilisation_ratio",
        "Last interval: the instance's rate (its ENA interfaces summed, else every reported one) over its baseline, by direction; 1 is at the baseline, above 1 spends burst credits.",
        Kind::Gauge,
    );
    let mut iface_ratio = Family::new(
        "throttlescope_interface_baseline_utilisation_ratio",
        "Last interval: the interface's rate over the instance's baseline, by direction (its share of the baseline; interfaces not summed into the instance, such as veths beside ENA ones, carry the same bytes again).",
        Kind::Gauge,
    );
    let mut run_secs = Family::new(
        "throttlescope_above_baseline_run_seconds",
        "The current run above the baseline, by direction: seconds since the last interval at or below it; 0 at or below. Burst is best effort: enforcement can start at any time in a run.",
        Kind::Gauge,
    );
    let mut run_bytes = Family::new(
        "throttlescope_above_baseline_run_bytes",
        "The current run above the baseline, by direction: bytes beyond the baseline since the last interval at or below it; 0 at or below.",
        Kind::Gauge,
    );
    let mut secs_total = Family::new(
        "throttlescope_above_baseline_seconds",
        "Seconds of intervals above the baseline since observing started, by direction.",
        Kind::Counter,
    );
    let mut bytes_total = Family::new(
        "throttlescope_above_baseline_bytes",
        "Bytes beyond the baseline since observing started, by direction.",
        Kind::Counter,
    );
    for (direction, d) in [("tx", &h.tx), ("rx", &h.rx)] {
        let dir = || vec![("direction", direction.to_string())];
        baseline.float(dir(), d.baseline_bps);
        ratio.float(dir(), d.pct / 100.0);
        run_secs.float(dir(), d.above_secs);
        run_bytes.float(dir(), d.above_bytes);
        secs_total.float(dir(), d.above_secs_total);
        bytes_total.float(dir(), d.above_bytes_total);
    }
    for i in &h.interfaces {
        iface_ratio.float(dev_dir(&i.iface, "tx"), i.tx_pct / 100.0);
        iface_ratio.float(dev_dir(&i.iface, "rx"), i.rx_pct / 100.0);
    }
    vec![
        info,
        baseline,
        ratio,
        iface_ratio,
        run_secs,
        run_bytes,
        secs_total,
        bytes_total,
    ]
}

fn flow_families(state: &ExporterState) -> Vec<Family> {
    let mut backoff = Family::new(
        "throttlescope_flow_backoff_score",
        "Last interval: how much the flow was held back, 0..100 (top flows by this score only).",
        Kind::Gauge,
    );
    let mut inflation = Family::new(
        "throttlescope_flow_rtt_inflation_ratio",
        "Last interval: the flow's smoothed RTT over its minimum RTT (1 = no queueing delay).",
        Kind::Gauge,
    );
    let mut srtt = Family::new(
        "throttlescope_flow_srtt_seconds",
        "The flow's smoothed RTT at the end of the last interval.",
        Kind::Gauge,
    );
    let mut cwnd = Family::new(
        "throttlescope_flow_cwnd",
        "The flow's congestion window (segments) at the end of the last interval.",
        Kind::Gauge,
    );
    let mut retransmits = Family::new(
        "throttlescope_flow_retransmits",
        "Segments the flow retransmitted in the last interval.",
        Kind::Gauge,
    );
    let mut spurious_retransmits = Family::new(
        "throttlescope_flow_spurious_retransmits",
        "Of the flow's retransmits in the last interval, those its receiver reported as duplicates (D-SACK).",
        Kind::Gauge,
    );
    let mut tx = Family::new(
        "throttlescope_flow_tx_bytes_per_second",
        "Bytes the flow sent per second over the last interval.",
        Kind::Gauge,
    );
    for f in &state.flows {
        let labels = || f.labels();
        backoff.float(labels(), f.backoff_score);
        if let Some(i) = f.rtt_inflation {
            inflation.float(labels(), i);
        }
        srtt.float(labels(), f.srtt_seconds);
        cwnd.int(labels(), u64::from(f.cwnd));
        retransmits.int(labels(), f.retransmits);
        spurious_retransmits.int(labels(), f.spurious_retransmits);
        tx.float(labels(), f.tx_bytes_per_second);
    }
    let mut collisions = Family::new(
        "throttlescope_flow_label_collisions",
        "Top flows not exported because a better-ranked flow had the same peer, local_port and process labels.",
        Kind::Counter,
    );
    collisions.int(Vec::new(), state.flow_label_collisions);
    vec![
        backoff,
        inflation,
        srtt,
        cwnd,
        retransmits,
        spurious_retransmits,
        tx,
        collisions,
    ]
}

fn health_families(state: &ExporterState) -> Vec<Family> {
    let mut events = Family::new(
        "throttlescope_bpf_events",
        "Runs of the BPF program on observed sockets, counted by the program.",
        Kind::Counter,
    );
    let mut missed = Family::new(
        "throttlescope_bpf_missed",
        "Runs of the BPF program the kernel skipped (recursion misses; for tcp_cong_state_set also the skips it did not count, found at the socket's next change): events lost.",
        Kind::Counter,
    );
    let mut attached = Family::new(
        "throttlescope_bpf_attached",
        "1 when the BPF program runs; 0 when this kernel lacks or rejected it (its figures are missing, see the health block).",
        Kind::Gauge,
    );
    for p in &state.programs {
        attached.int(vec![("program", p.name.clone())], u64::from(p.attached));
        // A program that is not attached has no events: no series, rather
        // than a 0 that reads as attached and idle.
        if p.attached {
            events.int(vec![("program", p.name.clone())], p.events);
            missed.int(vec![("program", p.name.clone())], p.missed);
        }
    }
    let mut ringbuf = Family::new(
        "throttlescope_ringbuf_drops",
        "Flow events lost because the ring buffer was full.",
        Kind::Counter,
    );
    ringbuf.int(Vec::new(), state.ringbuf_drops);
    let mut untracked = Family::new(
        "throttlescope_untracked_flows",
        "Sockets whose BPF storage could not be created: not observed.",
        Kind::Counter,
    );
    untracked.int(Vec::new(), state.untracked_flows);
    let mut untracked_open = Family::new(
        "throttlescope_untracked_open_flows",
        "Untracked sockets not closed yet, at the end of the last interval: in no per-flow figure.",
        Kind::Gauge,
    );
    untracked_open.int(Vec::new(), state.untracked_open);
    let mut untracked_bytes = Family::new(
        "throttlescope_untracked_bytes",
        "TCP bytes untracked sockets sent and received (by direction): traffic the per-flow figures miss.",
        Kind::Counter,
    );
    for (direction, v) in [
        ("sent", state.untracked_bytes_sent),
        ("received", state.untracked_bytes_received),
    ] {
        untracked_bytes.int(vec![("direction", direction.to_string())], v);
    }
    let mut counter_failures = Family::new(
        "throttlescope_counter_read_failures",
        "Failed reads of interface counters.",
        Kind::Counter,
    );
    counter_failures.int(Vec::new(), state.counter_read_failures);
    let mut late = Family::new(
        "throttlescope_late_intervals",
        "Intervals that ended later than asked because the observer could not keep up.",
        Kind::Counter,
    );
    late.int(Vec::new(), state.late_intervals);
    let mut idle = Family::new(
        "throttlescope_idle_flows",
        "Open flows tracked but not listed in the last interval: they did not move.",
        Kind::Gauge,
    );
    idle.int(Vec::new(), state.idle_flows);
    let mut folded = Family::new(
        "throttlescope_folded_flows",
        "Flows of the last interval past --list-flows: not listed one by one, summed per \
         interface and counted in every verdict.",
        Kind::Gauge,
    );
    folded.int(Vec::new(), state.folded_flows);
    let mut closes_lost = Family::new(
        "throttlescope_closes_lost",
        "Close records lost (ring buffer and its overflow map full): those flows' last \
         counters are missing.",
        Kind::Counter,
    );
    closes_lost.int(Vec::new(), state.closes_lost);
    let mut closes_deferred = Family::new(
        "throttlescope_closes_deferred",
        "Close records that found the ring buffer full and waited in the kernel for the \
         next interval: late, not lost.",
        Kind::Counter,
    );
    closes_deferred.int(Vec::new(), state.closes_deferred);
    let mut moved_full = Family::new(
        "throttlescope_moved_set_full",
        "Flows that moved and found the moved set full: the next dump read every flow \
         (nothing missing; that interval cost a full dump).",
        Kind::Counter,
    );
    moved_full.int(Vec::new(), state.moved_set_full);
    let mut moved_gone = Family::new(
        "throttlescope_moved_set_gone",
        "Members of the moved set whose socket was gone when the sweep came (their close \
         event was missed): dropped, their flows forgotten at the next full dump.",
        Kind::Counter,
    );
    moved_gone.int(Vec::new(), state.moved_set_gone);
    let mut missing = Family::new(
        "throttlescope_interface_missing",
        "1 for an interface asked for with --iface that was missing in the last interval \
         (deleted, renamed or moved); the other interfaces are still reported.",
        Kind::Gauge,
    );
    for name in &state.missing_interfaces {
        missing.int(vec![("device", name.clone())], 1);
    }
    let mut intervals = Family::new(
        "throttlescope_intervals",
        "Intervals published to this endpoint since start.",
        Kind::Counter,
    );
    intervals.int(Vec::new(), state.intervals);
    let mut last = Family::new(
        "throttlescope_last_interval_timestamp_seconds",
        "Wall clock at the end of the last published interval, in seconds since the Unix epoch.",
        Kind::Gauge,
    );
    if let Some(ms) = state.last_unix_ms {
        last.float(Vec::new(), ms as f64 / 1000.0);
    }
    vec![
        attached,
        events,
        missed,
        ringbuf,
        untracked,
        untracked_open,
        untracked_bytes,
        counter_failures,
        late,
        idle,
        folded,
        closes_lost,
        closes_deferred,
        moved_full,
        moved_gone,
        missing,
        intervals,
        last,
    ]
}

/// The /metrics endpoint's own bounds at work (server.rs): what it closed
/// or refused and how full it is, so an alert can tell a scraper locked out
/// from an observer down.
fn endpoint_families(state: &ExporterState) -> Vec<Family> {
    let Some(e) = state.endpoint else {
        return Vec::new();
    };
    let mut dropped = Family::new(
        "throttlescope_metrics_connections_dropped",
        "Connections to this /metrics endpoint closed before an answer, and failed accepts, by reason: evicted (closed to make room at the connection cap: the one waiting longest for its request), timeout (no complete request head within 5 s, or the answer not taken within 10 s), header_too_large (request head over 8 KiB: 431), accept_error (accept() failed, e.g. out of file descriptors). As of the last interval.",
        Kind::Counter,
    );
    for (reason, v) in [
        ("evicted", e.evicted),
        ("timeout", e.timeout),
        ("header_too_large", e.header_too_large),
        ("accept_error", e.accept_error),
    ] {
        dropped.int(vec![("reason", reason.to_string())], v);
    }
    let mut open = Family::new(
        "throttlescope_metrics_connections_open",
        "Connections open to this /metrics endpoint at the end of the last interval.",
        Kind::Gauge,
    );
    open.int(Vec::new(), e.open);
    let mut max = Family::new(
        "throttlescope_metrics_connections_max",
        "The cap on connections open to this /metrics endpoint (256, or a quarter of the soft file descriptor limit if lower); at it a new connection evicts the one waiting longest for its request.",
        Kind::Gauge,
    );
    max.int(Vec::new(), e.max);
    vec![dropped, open, max]
}

/// The per-packet programs under `--per-packet auto`: running or paused,
/// and how many intervals went unmeasured.
fn per_packet_families(state: &ExporterState) -> Vec<Family> {
    let Some((running, paused)) = state.per_packet else {
        return Vec::new();
    };
    let mut run = Family::new(
        "throttlescope_per_packet_running",
        "1 when the host queue's per-packet programs (qdisc backlog and sojourn, peak rates) run in the next interval, 0 when paused while quiet (--per-packet auto).",
        Kind::Gauge,
    );
    run.int(Vec::new(), u64::from(running));
    let mut unmeasured = Family::new(
        "throttlescope_per_packet_paused_intervals",
        "Intervals since start whose per-packet programs were paused for some of it (--per-packet auto): their host qdisc backlog, sojourn and peak rates were not measured; host drops were.",
        Kind::Counter,
    );
    unmeasured.int(Vec::new(), paused);
    vec![run, unmeasured]
}

/// The OTLP exporter's delivery (`--otlp`, src/sinks/otlp/): what reached
/// the collector, what was given up and how many requests failed.
fn otlp_families(state: &ExporterState) -> Vec<Family> {
    let Some(o) = state.otlp else {
        return Vec::new();
    };
    let mut sent = Family::new(
        "throttlescope_otlp_batches_sent",
        "OTLP batches (metrics or logs requests) the collector accepted, since start.",
        Kind::Counter,
    );
    sent.int(Vec::new(), o.sent);
    let mut dropped = Family::new(
        "throttlescope_otlp_batches_dropped",
        "OTLP batches given up, since start: the oldest when the queue of 8 was full (collector down or slow), those the collector refused for good (a 4xx other than 429), and those undelivered when the run ended.",
        Kind::Counter,
    );
    dropped.int(Vec::new(), o.dropped);
    let mut failures = Family::new(
        "throttlescope_otlp_failures",
        "Failed OTLP requests (no connection, timeout, error status), each attempt counted, since start.",
        Kind::Counter,
    );
    failures.int(Vec::new(), o.failures);
    let mut queued = Family::new(
        "throttlescope_otlp_batches_queued",
        "OTLP batches not delivered yet: waiting in the queue (at most 8) and the one being sent or retried.",
        Kind::Gauge,
    );
    queued.int(Vec::new(), o.queued);
    vec![sent, dropped, failures, queued]
}

/// The Kafka lookup (`--kafka`, src/collect/kafka/): whether it works, how
/// old the directory the flows are named with is, and what it cost the
/// cluster; and the broker this host runs, as an info series to join on.
fn kafka_lookup_families(state: &ExporterState) -> Vec<Family> {
    let Some(k) = &state.kafka_lookup else {
        return Vec::new();
    };
    let target = || vec![("target", k.target.clone())];
    let with = |name: &'static str, v: &str| {
        let mut l = target();
        l.push((name, v.to_string()));
        l
    };
    let mut lookups = Family::new(
        "throttlescope_kafka_lookups",
        "Kafka lookups of the broker asked (target), by result: ok, or failed (refused, timed out, a TLS or SASL listener, an old broker, a response past the bounds; the flows then keep the last directory, or their addresses), since start.",
        Kind::Counter,
    );
    lookups.int(with("result", "ok"), k.lookups_ok);
    lookups.int(with("result", "failed"), k.lookups_failed);
    let mut age = Family::new(
        "throttlescope_kafka_directory_age_seconds",
        "Age of the Kafka directory (brokers, groups, members) the flows are named with; absent before a lookup worked.",
        Kind::Gauge,
    );
    if let Some(ms) = k.directory_age_ms {
        age.float(target(), ms as f64 / 1000.0);
    }
    let mut missing = Family::new(
        "throttlescope_kafka_directory_missing",
        "In the last directory: consumer groups not described (an error, past the bounds) and brokers whose groups could not be listed; their flows are not named.",
        Kind::Gauge,
    );
    missing.int(with("what", "groups"), k.groups_not_described);
    missing.int(with("what", "brokers"), k.brokers_not_asked);
    let mut requests = Family::new(
        "throttlescope_kafka_lookup_requests",
        "Requests the Kafka lookups sent to the cluster, since start.",
        Kind::Counter,
    );
    requests.int(target(), k.requests);
    let mut bytes = Family::new(
        "throttlescope_kafka_lookup_bytes",
        "Bytes the Kafka lookups sent to and received from the cluster, by direction, since start.",
        Kind::Counter,
    );
    bytes.int(with("direction", "tx"), k.bytes_sent);
    bytes.int(with("direction", "rx"), k.bytes_received);
    let mut broker = Family::new(
        "throttlescope_kafka_broker_info",
        "1 for the Kafka broker this host runs (broker_id, as the cluster's metadata names it); absent on a client's host or before a lookup worked.",
        Kind::Gauge,
    );
    if let Some(id) = k.local_broker {
        broker.int(with("broker_id", &id.to_string()), 1);
    }
    vec![lookups, age, missing, requests, bytes, broker]
}

/// Reads the shared state on each encode.
#[derive(Debug)]
struct StateCollector(Arc<Mutex<ExporterState>>);

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // A panic elsewhere while holding the lock leaves valid data: the
        // state is only ever replaced field by field.
        let state = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for family in families(&state) {
            family.write(&mut encoder)?;
        }
        Ok(())
    }
}

/// A registry whose only collector reads `state`.
pub(crate) fn registry(state: Arc<Mutex<ExporterState>>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(StateCollector(state)));
    r
}

/// The whole exposition of `registry`, `# EOF` included.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(16 * 1024);
    if let Err(e) = prometheus_client::encoding::text::encode(&mut out, registry) {
        // Writing to a String cannot fail; say so rather than serve half.
        out.clear();
        let _ = writeln!(out, "# encoding the metrics failed: {e}\n# EOF");
    }
    out
}

/// The same exposition in the Prometheus text format 0.0.4, for scrapers
/// and tools (promtool, older agents) that do not take OpenMetrics. The
/// two differ where it matters here in three ways: a counter family is
/// named with its `_total` suffix, the untyped type is `untyped`, and there
/// is no `# EOF`.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let tail = if prefix == "# TYPE " && tail == "unknown" {
                    "untyped"
                } else {
                    tail
                };
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                let _ = writeln!(out, "{prefix}{name}{suffix} {tail}");
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}
