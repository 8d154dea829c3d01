//! One interval as OTLP: the metrics request (names and attributes:
//! docs/metrics.md, "OTLP") and the log records of held verdicts that
//! started or ended. The figures are the Prometheus exporter's: both
//! render the run as the judging unit keeps it (`Exported`,
//! src/analysis/exported.rs), so both outputs of one interval say the same.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::proto::*;
use crate::analysis::exported::{DeviceState, Exported, ALLOWANCES};
use crate::analysis::{InterfaceVerdict, IntervalAnalysis, Verdict};
use crate::model::snapshot::Snapshot;

/// Who is reporting: the OTLP resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceInfo {
    pub host_name: String,
    /// The instance type, when known (DMI, or `--instance-type`).
    pub instance_type: Option<String>,
    /// DMI says this is an EC2 instance: only then `cloud.*` are set.
    pub on_ec2: bool,
}

impl ResourceInfo {
    pub fn attributes(&self) -> Vec<KeyValue> {
        let mut a = vec![
            kv_str("service.name", "throttlescope"),
            kv_str("service.version", env!("CARGO_PKG_VERSION")),
            kv_str("host.name", self.host_name.clone()),
        ];
        if self.on_ec2 {
            a.push(kv_str("cloud.provider", "aws"));
            a.push(kv_str("cloud.platform", "aws_ec2"));
        }
        if let Some(t) = &self.instance_type {
            a.push(kv_str("host.type", t.clone()));
        }
        a
    }
}

fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "throttlescope".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    }
}

pub const IFACE: &str = "network.interface.name";
pub const DIRECTION: &str = "network.io.direction";

/// Builds the metrics of one interval; every point carries the interval's
/// end as its time, and cumulative sums the observer's start.
struct Metrics {
    start_ns: u64,
    time_ns: u64,
    out: Vec<Metric>,
}

impl Metrics {
    fn metric(&mut self, name: &str, unit: &str, description: &str, data: metric::Data) {
        let empty = match &data {
            metric::Data::Gauge(g) => g.data_points.is_empty(),
            metric::Data::Sum(s) => s.data_points.is_empty(),
        };
        // A metric without points is noise to a backend: left out, as the
        // Prometheus exporter leaves out a family without series.
        if !empty {
            self.out.push(Metric {
                name: name.into(),
                description: description.into(),
                unit: unit.into(),
                data: Some(data),
            });
        }
    }

    fn point(&self, attributes: Vec<KeyValue>, v: number_data_point::Value) -> NumberDataPoint {
        NumberDataPoint {
            attributes,
            start_time_unix_nano: self.start_ns,
            time_unix_nano: self.time_ns,
            value: Some(v),
        }
    }

    fn gauge(
        &mut self,
        name: &str,
        unit: &str,
        description: &str,
        points: Vec<(Vec<KeyValue>, f64)>,
    ) {
        let data_points = points
            .into_iter()
            .map(|(a, v)| NumberDataPoint {
                start_time_unix_nano: 0,
                ..self.point(a, number_data_point::Value::AsDouble(v))
            })
            .collect();
        self.metric(
            name,
            unit,
            description,
            metric::Data::Gauge(Gauge { data_points }),
        );
    }

    fn counter(
        &mut self,
        name: &str,
        unit: &str,
        description: &str,
        points: Vec<(Vec<KeyValue>, u64)>,
    ) {
        let data_points = points
            .into_iter()
            .map(|(a, v)| self.point(a, number_data_point::Value::AsInt(v as i64)))
            .collect();
        self.metric(
            name,
            unit,
            description,
            metric::Data::Sum(Sum {
                data_points,
                aggregation_temporality: AGGREGATION_TEMPORALITY_CUMULATIVE,
                is_monotonic: true,
            }),
        );
    }
}

fn iface(name: &str) -> Vec<KeyValue> {
    vec![kv_str(IFACE, name)]
}

fn iface_dir(name: &str, dir: &str) -> Vec<KeyValue> {
    vec![kv_str(IFACE, name), kv_str(DIRECTION, dir)]
}

/// Both directions of a per-interface pair, transmit first.
fn both<T: Copy>(state: &Exported, f: impl Fn(&DeviceState) -> [T; 2]) -> Vec<(Vec<KeyValue>, T)> {
    let mut v = Vec::new();
    for (name, d) in &state.devices {
        let [tx, rx] = f(d);
        v.push((iface_dir(name, "transmit"), tx));
        v.push((iface_dir(name, "receive"), rx));
    }
    v
}

/// The metrics request of the interval `state` last took in (`snap`,
/// `analysis`); `start_unix_ms`: when observing started.
pub fn metrics_request(
    resource: &ResourceInfo,
    state: &Exported,
    snap: &Snapshot,
    analysis: &IntervalAnalysis,
    start_unix_ms: u64,
) -> ExportMetricsServiceRequest {
    let mut m = Metrics {
        start_ns: start_unix_ms * 1_000_000,
        time_ns: snap.unix_ms * 1_000_000,
        out: Vec::new(),
    };

    // Interfaces, on the semantic conventions' system.network.* names.
    m.counter(
        "system.network.io",
        "By",
        "Bytes through the interface since boot (/sys/class/net/<if>/statistics).",
        both(state, |d| [d.link.tx_bytes, d.link.rx_bytes]),
    );
    m.counter(
        "system.network.packet.count",
        "{packet}",
        "Packets through the interface since boot (skbs under TSO/GSO).",
        both(state, |d| [d.link.tx_packets, d.link.rx_packets]),
    );
    m.counter(
        "system.network.packet.dropped",
        "{packet}",
        "Packets the interface dropped since boot.",
        both(state, |d| [d.link.tx_dropped, d.link.rx_dropped]),
    );

    // The ENA allowance counters, as the driver reports them.
    let mut exceeded = Vec::new();
    let mut available = Vec::new();
    for (name, d) in &state.devices {
        let Some(a) = &d.allowance else { continue };
        let t = &a.totals;
        for (kind, v) in [
            ("bw_in", t.bw_in_allowance_exceeded),
            ("bw_out", t.bw_out_allowance_exceeded),
            ("pps", t.pps_allowance_exceeded),
            ("conntrack", t.conntrack_allowance_exceeded),
            ("linklocal", t.linklocal_allowance_exceeded),
        ] {
            if let Some(v) = v {
                exceeded.push((
                    vec![
                        kv_str(IFACE, name.clone()),
                        kv_str("aws.ec2.network.allowance", kind),
                    ],
                    v,
                ));
            }
        }
        if let Some(v) = t.conntrack_allowance_available {
            available.push((iface(name), v as f64));
        }
    }
    m.counter("aws.ec2.network.allowance.exceeded", "{packet}", "Packets queued or dropped because an allowance was exceeded (the ENA driver's *_allowance_exceeded), by allowance: bw_in, bw_out, pps, conntrack, linklocal.", exceeded);
    m.gauge(
        "aws.ec2.network.conntrack.available",
        "{connection}",
        "Connections that can still be tracked (conntrack_allowance_available).",
        available,
    );

    // Who the link-local services hear from: the packets sent to them.
    let (mut ll_packets, mut ll_pps) = (Vec::new(), Vec::new());
    for (name, d) in &state.devices {
        if let Some(n) = d.linklocal_packets {
            ll_packets.push((iface(name), n));
        }
        if let Some(p) = d.linklocal_pps {
            ll_pps.push((iface(name), p));
        }
    }
    m.counter(
        "throttlescope.linklocal.packets",
        "{packet}",
        "Packets sent to the instance's link-local services (Amazon DNS, instance metadata, Time Sync) through the interface, UDP counted in the kernel and TCP flows to them, summed since the exporter started.",
        ll_packets,
    );
    m.gauge(
        "throttlescope.linklocal.packets.rate",
        "{packet}/s",
        "Last interval: packets per second sent to the link-local services (the limit is 1,024 per interface).",
        ll_pps,
    );

    // Who holds the connection table: the TCP flows open, idle ones too.
    let (mut open, mut idle) = (Vec::new(), Vec::new());
    for (name, d) in &state.devices {
        if let Some(n) = d.tcp_flows_open {
            open.push((iface(name), n as f64));
        }
        if let Some(n) = d.tcp_flows_idle {
            idle.push((iface(name), n as f64));
        }
    }
    m.gauge(
        "throttlescope.tcp.flows.open",
        "{flow}",
        "TCP flows open through the interface at the end of the last interval, idle ones included: each holds an entry in the hypervisor's connection table.",
        open,
    );
    m.gauge(
        "throttlescope.tcp.flows.idle",
        "{flow}",
        "Of throttlescope.tcp.flows.open, those that have not moved for 60 s or more (the observer's start at most).",
        idle,
    );

    // The last interval's judgement.
    let mut ratio = Vec::new();
    let mut retrans = Vec::new();
    let mut verdict = Vec::new();
    let mut confidence = Vec::new();
    let mut held = Vec::new();
    for (name, d) in &state.devices {
        for (kind, pct) in ALLOWANCES.iter().zip(d.exceeded_pct) {
            if let Some(pct) = pct {
                ratio.push((
                    vec![
                        kv_str(IFACE, name.clone()),
                        kv_str("aws.ec2.network.allowance", *kind),
                    ],
                    pct / 100.0,
                ));
            }
        }
        if let Some(pct) = d.retransmit_pct {
            retrans.push((iface(name), pct / 100.0));
        }
        if let Some((v, c)) = d.verdict {
            for each in Verdict::ALL {
                verdict.push((
                    vec![
                        kv_str(IFACE, name.clone()),
                        kv_str("throttlescope.verdict", each.as_str()),
                    ],
                    f64::from(u8::from(each == v)),
                ));
            }
            confidence.push((iface(name), c));
            held.push((
                vec![
                    kv_str(IFACE, name.clone()),
                    kv_str("throttlescope.verdict", v.as_str()),
                ],
                d.verdict_secs,
            ));
        }
    }
    m.gauge("aws.ec2.network.allowance.exceeded.ratio", "1", "Last interval: exceeded packets over wire packets, by allowance (absent without a counter or packets).", ratio);
    m.gauge(
        "throttlescope.tcp.retransmit.ratio",
        "1",
        "Last interval: retransmitted segments not reported spurious over segments sent.",
        retrans,
    );
    m.gauge(
        "throttlescope.verdict",
        "1",
        "1 for the held verdict of the interface, 0 for every other verdict.",
        verdict,
    );
    m.gauge(
        "throttlescope.verdict.confidence",
        "1",
        "The held verdict's confidence, 0..1.",
        confidence,
    );
    m.gauge(
        "throttlescope.verdict.held.duration",
        "s",
        "How long the held verdict has held, from its onset.",
        held,
    );

    // Headroom to the instance's baseline, when one is known.
    if let Some(h) = &state.headroom {
        let dirs = |f: &dyn Fn(&crate::analysis::headroom::DirectionHeadroom) -> f64| {
            vec![
                (vec![kv_str(DIRECTION, "transmit")], f(&h.tx)),
                (vec![kv_str(DIRECTION, "receive")], f(&h.rx)),
            ]
        };
        m.gauge(
            "aws.ec2.network.baseline",
            "bit/s",
            "The instance type's network baseline by direction.",
            dirs(&|d| d.baseline_bps),
        );
        m.gauge(
            "aws.ec2.network.baseline.utilization",
            "1",
            "Last interval: the instance's rate over its baseline; above 1 spends burst credits.",
            dirs(&|d| d.pct / 100.0),
        );
        m.gauge(
            "aws.ec2.network.above_baseline.duration",
            "s",
            "The current run above the baseline (0 at or below).",
            dirs(&|d| d.above_secs),
        );
    }

    kafka(&mut m, state);
    kafka_lookup(&mut m, state);
    flows(&mut m, state.top_flows, snap, analysis);

    m.gauge(
        "throttlescope.interval.seq",
        "1",
        "The interval's sequence number, as in `watch --json` (seq).",
        vec![(Vec::new(), snap.seq as f64)],
    );

    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource.attributes(),
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(scope()),
                metrics: m.out,
            }],
        }],
    }
}

/// The role's attribute, and the consumer group's (OpenTelemetry's
/// messaging convention) where the series has one.
pub const KAFKA_ROLE: &str = "throttlescope.kafka.role";
/// The broker the Kafka lookup asks (`HOST:PORT`).
pub const KAFKA_TARGET: &str = "server.address";
pub const KAFKA_LOOKUP_RESULT: &str = "throttlescope.kafka.lookup.result";
pub const KAFKA_BROKER_ID: &str = "throttlescope.kafka.broker.id";
pub const KAFKA_GROUP: &str = "messaging.consumer.group.name";

/// Who used the allowance, by Kafka role and consumer group: the Prometheus
/// exporter's `throttlescope_kafka_*` series, with the same bound
/// (src/analysis/exported_kafka.rs).
fn kafka(m: &mut Metrics, state: &Exported) {
    let k = &state.kafka;
    let mut bytes = Vec::new();
    let mut segs = Vec::new();
    let mut retrans = Vec::new();
    let mut delay = Vec::new();
    for ((device, role, group), s) in &k.series {
        let attrs = |direction: Option<&str>| {
            let mut a = vec![
                kv_str(IFACE, device.clone()),
                kv_str(KAFKA_ROLE, role.as_str()),
            ];
            if !group.is_empty() {
                a.push(kv_str(KAFKA_GROUP, group.clone()));
            }
            if let Some(d) = direction {
                a.push(kv_str(DIRECTION, d));
            }
            a
        };
        bytes.push((attrs(Some("transmit")), s.bytes_sent));
        bytes.push((attrs(Some("receive")), s.bytes_received));
        segs.push((attrs(None), s.data_segs_out));
        retrans.push((attrs(None), s.retrans_segs));
        if let Some(us) = s.delay_us {
            delay.push((attrs(None), us as f64 / 1e6));
        }
    }
    let folded = k
        .folded_groups
        .iter()
        .map(|(d, n)| (iface(d), *n as f64))
        .collect();
    m.counter("throttlescope.kafka.io", "By", "Bytes of the flows of a Kafka role and consumer group (at most 10 groups named per interface, the rest under ~other), by direction, since the exporter started.", bytes);
    m.counter(
        "throttlescope.kafka.segments.sent",
        "{segment}",
        "TCP data segments sent by the flows of a Kafka role and group.",
        segs,
    );
    m.counter("throttlescope.kafka.segments.retransmitted", "{segment}", "Retransmitted segments of the flows of a Kafka role and group that may have repaired a loss (spurious ones apart).", retrans);
    m.gauge("throttlescope.kafka.queuing_delay", "s", "Last interval: the queuing delay of the flows of a Kafka role and group (smoothed RTT over the minimum, weighted by bytes sent).", delay);
    m.gauge(
        "throttlescope.kafka.groups.folded",
        "{group}",
        "Last interval: consumer groups not named, their traffic under ~other.",
        folded,
    );
}

/// The top N flows by backoff score (the Prometheus exporter's bound):
/// who paid, with its workload where it has one.
fn flows(m: &mut Metrics, top: usize, snap: &Snapshot, analysis: &IntervalAnalysis) {
    let ifaces: HashMap<u64, &str> = snap
        .flows
        .iter()
        .filter_map(|f| Some((f.id, f.iface.as_deref()?)))
        .collect();
    let mut ranked: Vec<_> = analysis
        .flows
        .iter()
        .filter(|f| f.rank >= 1 && f.rank <= top)
        .collect();
    ranked.sort_by_key(|f| f.rank);
    let mut seen = HashSet::new();
    let mut series: BTreeMap<&str, Vec<(Vec<KeyValue>, f64)>> = BTreeMap::new();
    for f in ranked {
        let mut a = vec![
            kv_str(IFACE, *ifaces.get(&f.flow_id).unwrap_or(&"unknown")),
            kv_str("network.peer.address", f.peer.ip().to_string()),
            kv_int("network.peer.port", i64::from(f.peer.port())),
            kv_int("network.local.port", i64::from(f.local.port())),
            kv_str(
                "process.executable.name",
                f.owner.as_ref().map_or("unknown", |o| o.comm.as_str()),
            ),
        ];
        if let Some(w) = f.owner.as_ref().and_then(|o| o.workload.as_ref()) {
            if let Some(ns) = &w.pod_namespace {
                a.push(kv_str("k8s.namespace.name", ns.clone()));
            }
            if let Some(p) = &w.pod_name {
                a.push(kv_str("k8s.pod.name", p.clone()));
            }
            if let Some(u) = &w.pod_uid {
                a.push(kv_str("k8s.pod.uid", u.clone()));
            }
            if let Some(c) = &w.container_id {
                a.push(kv_str("container.id", c.clone()));
            }
            if let Some(s) = &w.service {
                a.push(kv_str("throttlescope.systemd.unit", s.clone()));
            }
        }
        // Two flows with the same attributes (same peer and port in two
        // namespaces) would be one series: the better-ranked one stays,
        // as on the Prometheus side.
        let key = format!("{a:?}");
        if !seen.insert(key) {
            continue;
        }
        let secs = snap.interval_secs();
        let mut add =
            |name: &'static str, v: f64| series.entry(name).or_default().push((a.clone(), v));
        add("throttlescope.flow.backoff_score", f.backoff_score);
        if let Some(r) = f.rtt_inflation {
            add("throttlescope.flow.rtt.inflation", r);
        }
        add("throttlescope.flow.srtt", f64::from(f.srtt_us) / 1e6);
        add("throttlescope.flow.cwnd", f64::from(f.cwnd));
        add("throttlescope.flow.retransmits", f.retransmits as f64);
        add(
            "throttlescope.flow.transmit.rate",
            if secs > 0.0 {
                f.bytes_sent as f64 / secs
            } else {
                0.0
            },
        );
    }
    for (name, unit, desc) in [
        (
            "throttlescope.flow.backoff_score",
            "1",
            "How much the flow was held back in the last interval, 0..100.",
        ),
        (
            "throttlescope.flow.rtt.inflation",
            "1",
            "srtt over min_rtt.",
        ),
        (
            "throttlescope.flow.srtt",
            "s",
            "Smoothed RTT at the end of the interval.",
        ),
        ("throttlescope.flow.cwnd", "{segment}", "Congestion window."),
        (
            "throttlescope.flow.retransmits",
            "{segment}",
            "Segments retransmitted in the last interval.",
        ),
        (
            "throttlescope.flow.transmit.rate",
            "By/s",
            "Bytes sent per second over the last interval.",
        ),
    ] {
        let points = series.remove(name).unwrap_or_default();
        m.gauge(name, unit, desc, points);
    }
}

/// The Kafka lookup's health, as the Prometheus exporter's
/// `throttlescope_kafka_lookups` and the rest have it; the broker this host
/// runs as a gauge of 1 with its id.
fn kafka_lookup(m: &mut Metrics, state: &Exported) {
    let Some(k) = &state.kafka_lookup else {
        return;
    };
    let target = || vec![kv_str(KAFKA_TARGET, k.target.clone())];
    let with = |key: &'static str, v: String| {
        let mut a = target();
        a.push(kv_str(key, v));
        a
    };
    m.counter(
        "throttlescope.kafka.lookups",
        "{lookup}",
        "Kafka lookups of the broker asked, by result (ok, failed), since start.",
        vec![
            (with(KAFKA_LOOKUP_RESULT, "ok".into()), k.lookups_ok),
            (with(KAFKA_LOOKUP_RESULT, "failed".into()), k.lookups_failed),
        ],
    );
    m.gauge(
        "throttlescope.kafka.directory.age",
        "s",
        "Age of the Kafka directory the flows are named with (absent before a lookup worked).",
        k.directory_age_ms
            .map(|ms| vec![(target(), ms as f64 / 1000.0)])
            .unwrap_or_default(),
    );
    m.counter(
        "throttlescope.kafka.lookup.io",
        "By",
        "Bytes the Kafka lookups sent to and received from the cluster, by direction, since start.",
        vec![
            (with(DIRECTION, "transmit".into()), k.bytes_sent),
            (with(DIRECTION, "receive".into()), k.bytes_received),
        ],
    );
    m.gauge(
        "throttlescope.kafka.broker",
        "1",
        "1 for the Kafka broker this host runs, by id (absent on a client's host or before a lookup worked).",
        k.local_broker
            .map(|id| vec![(with(KAFKA_BROKER_ID, id.to_string()), 1.0)])
            .unwrap_or_default(),
    );
}

/// A held verdict as the log records remember it, per interface.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldState {
    pub verdict: Verdict,
    pub since_seq: u64,
    /// Its one-line description at its last interval (the end's body).
    pub line: String,
    pub confidence: f64,
    pub signal: String,
    pub value: f64,
    pub since_unix_ms: u64,
}

impl HeldState {
    pub fn of(v: &InterfaceVerdict, snap: &Snapshot) -> Self {
        let h = &v.held;
        // The onset in wall time: the monotonic distance back from this
        // interval's end.
        let back_ms = snap.mono_ns.saturating_sub(h.since_mono_ns) / 1_000_000;
        HeldState {
            verdict: h.verdict,
            since_seq: h.since_seq,
            line: crate::sinks::held::one_line(v),
            confidence: h.confidence,
            signal: h.signal.clone(),
            value: h.value,
            since_unix_ms: snap.unix_ms.saturating_sub(back_ms),
        }
    }

    fn same_hold(&self, other: &HeldState) -> bool {
        self.verdict == other.verdict && self.since_seq == other.since_seq
    }
}

/// The log records of interval `snap`: per interface, the end of the held
/// verdict it had at the previous interval and the start of a new one.
/// `prev` is updated to this interval's.
pub fn verdict_changes(
    prev: &mut BTreeMap<String, HeldState>,
    snap: &Snapshot,
    analysis: &IntervalAnalysis,
) -> Vec<LogRecord> {
    let now_ns = snap.unix_ms * 1_000_000;
    let mut records = Vec::new();
    let mut next = BTreeMap::new();
    let record = |event: &str, name: &str, s: &HeldState, body: String| {
        let severity = if s.verdict.is_calm() || event == "end" {
            (SEVERITY_INFO, "INFO")
        } else {
            (SEVERITY_WARN, "WARN")
        };
        let mut attributes = vec![
            kv_str(IFACE, name),
            kv_str("throttlescope.verdict.event", event),
            kv_str("throttlescope.verdict", s.verdict.as_str()),
            kv_f64("throttlescope.verdict.confidence", s.confidence),
            kv_str("throttlescope.evidence.signal", s.signal.clone()),
            kv_f64("throttlescope.evidence.value", s.value),
            kv_int("throttlescope.verdict.since_seq", s.since_seq as i64),
            kv_int("throttlescope.interval.seq", snap.seq as i64),
        ];
        if event == "end" {
            let secs = now_ns.saturating_sub(s.since_unix_ms * 1_000_000) as f64 / 1e9;
            attributes.push(kv_f64("throttlescope.verdict.duration", secs));
        }
        LogRecord {
            time_unix_nano: now_ns,
            observed_time_unix_nano: now_ns,
            severity_number: severity.0,
            severity_text: severity.1.into(),
            body: Some(AnyValue {
                value: Some(any_value::Value::String(body)),
            }),
            attributes,
        }
    };
    for v in &analysis.interfaces {
        let cur = HeldState::of(v, snap);
        match prev.remove(&v.iface) {
            Some(old) if old.same_hold(&cur) => {}
            Some(old) => {
                records.push(record(
                    "end",
                    &v.iface,
                    &old,
                    format!("{} ended: {}", old.verdict, old.line),
                ));
                records.push(record("start", &v.iface, &cur, cur.line.clone()));
            }
            None => records.push(record("start", &v.iface, &cur, cur.line.clone())),
        }
        next.insert(v.iface.clone(), cur);
    }
    // Interfaces gone from the analysis: their verdict ended with them.
    for (name, old) in std::mem::take(prev) {
        records.push(record(
            "end",
            &name,
            &old,
            format!("{} ended (interface gone): {}", old.verdict, old.line),
        ));
    }
    *prev = next;
    records
}

pub fn logs_request(resource: &ResourceInfo, records: Vec<LogRecord>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: resource.attributes(),
            }),
            scope_logs: vec![ScopeLogs {
                scope: Some(scope()),
                log_records: records,
            }],
        }],
    }
}
