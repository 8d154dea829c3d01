//! The OTLP requests from hand-built intervals, decoded again: names,
//! attributes, values, the resource, and the verdict log records.

use std::collections::BTreeMap;

use prost::Message;

use super::encode::{self, ResourceInfo};
use super::proto::*;
use crate::analysis::{analyze, IntervalAnalysis, Thresholds, Verdict};
use crate::model::snapshot::{InterfaceSample, LinkCounters, Snapshot};
use crate::sinks::metrics::ExporterState;

fn snapshot(seq: u64) -> Snapshot {
    Snapshot {
        seq,
        mono_ns: 1_000_000_000 * (seq + 1),
        unix_ms: 1_762_000_000_000 + 1000 * seq,
        interval_ns: 1_000_000_000,
        interfaces: vec![InterfaceSample {
            name: "eth0".into(),
            totals: LinkCounters {
                tx_bytes: 1_500_000,
                rx_bytes: 60_000,
                tx_packets: 1000,
                rx_packets: 900,
                tx_dropped: 3,
                rx_dropped: 4,
                ..Default::default()
            },
            ..Default::default()
        }],
        ..Snapshot::example(seq)
    }
}

fn judged(seq: u64) -> (Snapshot, IntervalAnalysis) {
    let snap = snapshot(seq);
    let a = analyze(&[], &snap, &Thresholds::default());
    (snap, a)
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn s(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attr(attrs, key)? {
        any_value::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn ec2() -> ResourceInfo {
    ResourceInfo {
        host_name: "broker-1".into(),
        instance_type: Some("m5.large".into()),
        on_ec2: true,
    }
}

#[test]
fn the_metrics_request_names_and_values() {
    let (snap, a) = judged(4);
    let mut state = ExporterState::new(20);
    state.apply(&snap, &a);
    let req = encode::metrics_request(&ec2(), &state, &snap, &a, 1_761_999_000_000);
    // Through the wire format and back, as the collector reads it.
    let req = ExportMetricsServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
    let rm = &req.resource_metrics[0];
    let res = &rm.resource.as_ref().unwrap().attributes;
    assert_eq!(s(res, "service.name").as_deref(), Some("throttlescope"));
    assert_eq!(s(res, "cloud.provider").as_deref(), Some("aws"));
    assert_eq!(s(res, "cloud.platform").as_deref(), Some("aws_ec2"));
    assert_eq!(s(res, "host.type").as_deref(), Some("m5.large"));
    assert_eq!(s(res, "host.name").as_deref(), Some("broker-1"));
    let metrics: BTreeMap<&str, &Metric> = rm.scope_metrics[0]
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();

    let io = metrics["system.network.io"];
    assert_eq!(io.unit, "By");
    let Some(metric::Data::Sum(sum)) = &io.data else {
        panic!("system.network.io is not a sum")
    };
    assert!(sum.is_monotonic);
    assert_eq!(
        sum.aggregation_temporality,
        AGGREGATION_TEMPORALITY_CUMULATIVE
    );
    let tx = sum
        .data_points
        .iter()
        .find(|p| s(&p.attributes, encode::DIRECTION).as_deref() == Some("transmit"))
        .unwrap();
    assert_eq!(s(&tx.attributes, encode::IFACE).as_deref(), Some("eth0"));
    assert_eq!(tx.value, Some(number_data_point::Value::AsInt(1_500_000)));
    assert_eq!(tx.time_unix_nano, snap.unix_ms * 1_000_000);
    assert_eq!(tx.start_time_unix_nano, 1_761_999_000_000 * 1_000_000);

    // One verdict point per verdict state, the held one at 1.
    let Some(metric::Data::Gauge(g)) = &metrics["throttlescope.verdict"].data else {
        panic!("throttlescope.verdict is not a gauge")
    };
    assert_eq!(g.data_points.len(), Verdict::ALL.len());
    let held = a.interfaces[0].held.verdict.as_str();
    for p in &g.data_points {
        let is_held = s(&p.attributes, "throttlescope.verdict").as_deref() == Some(held);
        let want = if is_held { 1.0 } else { 0.0 };
        assert_eq!(p.value, Some(number_data_point::Value::AsDouble(want)));
    }
    let Some(metric::Data::Gauge(seq)) = &metrics["throttlescope.interval.seq"].data else {
        panic!()
    };
    assert_eq!(
        seq.data_points[0].value,
        Some(number_data_point::Value::AsDouble(4.0))
    );
    // No allowance counters, no flows, no baseline: no such metrics.
    assert!(!metrics.contains_key("aws.ec2.network.allowance.exceeded"));
    assert!(!metrics.contains_key("throttlescope.flow.backoff_score"));
    assert!(!metrics.contains_key("aws.ec2.network.baseline"));
}

#[test]
fn off_ec2_there_are_no_cloud_attributes() {
    let r = ResourceInfo {
        host_name: "lab".into(),
        instance_type: None,
        on_ec2: false,
    };
    let a = r.attributes();
    assert!(s(&a, "cloud.provider").is_none());
    assert!(s(&a, "host.type").is_none());
    assert_eq!(s(&a, "service.name").as_deref(), Some("throttlescope"));
}

/// A start at the first interval, nothing while the hold lasts, an end and
/// a start when it changes, an end when the interface goes.
#[test]
fn verdict_changes_are_log_records() {
    let mut prev = BTreeMap::new();
    let (snap, a) = judged(1);
    let first = encode::verdict_changes(&mut prev, &snap, &a);
    assert_eq!(first.len(), 1);
    assert_eq!(
        s(&first[0].attributes, "throttlescope.verdict.event").as_deref(),
        Some("start")
    );

    let (snap2, mut a2) = judged(2);
    a2.interfaces[0].held = a.interfaces[0].held.clone();
    assert!(encode::verdict_changes(&mut prev, &snap2, &a2).is_empty());

    let (snap3, mut a3) = judged(3);
    let h = &mut a3.interfaces[0].held;
    h.verdict = Verdict::HypervisorQueuing;
    h.confidence = 0.9;
    h.signal = "bw_out_pct".into();
    h.value = 12.5;
    h.since_seq = 3;
    h.since_mono_ns = snap3.mono_ns - snap3.interval_ns;
    h.note = "bw_out 12.5% over 3 intervals".into();
    let changed = encode::verdict_changes(&mut prev, &snap3, &a3);
    let events: Vec<_> = changed
        .iter()
        .map(|r| s(&r.attributes, "throttlescope.verdict.event").unwrap())
        .collect();
    assert_eq!(events, ["end", "start"]);
    let start = &changed[1];
    assert_eq!(start.severity_number, SEVERITY_WARN);
    assert_eq!(
        s(&start.attributes, "throttlescope.verdict").as_deref(),
        Some("hypervisor_queuing")
    );
    assert_eq!(
        attr(&start.attributes, "throttlescope.evidence.value"),
        Some(&any_value::Value::Double(12.5))
    );
    let Some(any_value::Value::String(body)) = start.body.as_ref().unwrap().value.as_ref() else {
        panic!()
    };
    assert!(body.starts_with("hypervisor_queuing (90%"), "{body}");

    let (snap4, mut a4) = judged(4);
    a4.interfaces.clear();
    let gone = encode::verdict_changes(&mut prev, &snap4, &a4);
    assert_eq!(gone.len(), 1);
    assert_eq!(
        s(&gone[0].attributes, "throttlescope.verdict").as_deref(),
        Some("hypervisor_queuing")
    );
    assert!(prev.is_empty());
}

/// `--otlp-period`: every interval by default, every 3rd at 3 s, and a
/// late interval (1.04 s) does not skip a push.
#[test]
fn pushes_follow_the_period() {
    let pushed = |period_ms: u64, ends_ms: &[u64]| {
        let mut last = None;
        let mut out = Vec::new();
        for (seq, &end) in ends_ms.iter().enumerate() {
            let snap = Snapshot {
                seq: seq as u64,
                mono_ns: end * 1_000_000,
                interval_ns: 1_000_000_000,
                ..Snapshot::example(seq as u64)
            };
            if super::period_due(last, &snap, std::time::Duration::from_millis(period_ms)) {
                last = Some(snap.mono_ns);
                out.push(seq);
            }
        }
        out
    };
    let ends = [1000, 2000, 2990, 4030, 5000, 6000, 7000];
    assert_eq!(pushed(1000, &ends), [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(pushed(3000, &ends), [0, 3, 6]);
}

/// Issue 44: the Kafka series as the Prometheus exporter has them (the same
/// `Exported`): by role and group (messaging.consumer.group.name), bytes
/// by direction, with the same bound on groups.
#[test]
fn kafka_roles_and_groups_with_the_same_bound() {
    use crate::analysis::exported_kafka::{KAFKA_TOP_GROUPS, OTHER_GROUPS};
    use crate::model::kafka::{KafkaFlow, KafkaIdentity, KafkaRole};
    use crate::model::snapshot::{FlowCounters, FlowSample};
    let mut snap = snapshot(4);
    let flow = |id: u64, role: KafkaRole, group: Option<String>, sent: u64| FlowSample {
        iface: Some("eth0".into()),
        srtt_us: 3000,
        min_rtt_us: 1000,
        delta: FlowCounters {
            bytes_sent: sent,
            bytes_received: 10,
            data_segs_out: 5,
            ..Default::default()
        },
        kafka: Some(KafkaFlow {
            who: KafkaIdentity {
                group,
                ..KafkaIdentity::role(role)
            },
            ambiguous: Vec::new(),
        }),
        ..FlowSample::example(id)
    };
    snap.flows = (0..50)
        .map(|i| flow(i, KafkaRole::Consume, Some(format!("g{i:02}")), 1000 + i))
        .collect();
    snap.flows
        .push(flow(99, KafkaRole::ReplicationToFollower, None, 7000));
    let total: u64 = snap.flows.iter().map(|f| f.delta.bytes_sent).sum();
    let a = analyze(&[], &snap, &Thresholds::default());
    let mut state = ExporterState::new(20);
    state.apply(&snap, &a);
    let req = encode::metrics_request(&ec2(), &state, &snap, &a, 1_761_999_000_000);
    let req = ExportMetricsServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let io = metrics
        .iter()
        .find(|m| m.name == "throttlescope.kafka.io")
        .unwrap();
    let Some(metric::Data::Sum(sum)) = &io.data else {
        panic!("{io:?}")
    };
    assert!(sum.is_monotonic);
    let mut groups = std::collections::BTreeSet::new();
    let mut sent = 0;
    for p in &sum.data_points {
        if let Some(g) = s(&p.attributes, encode::KAFKA_GROUP) {
            groups.insert(g);
        }
        if s(&p.attributes, encode::DIRECTION).as_deref() == Some("transmit") {
            let Some(number_data_point::Value::AsInt(v)) = p.value else {
                panic!()
            };
            sent += v as u64;
            if s(&p.attributes, encode::KAFKA_ROLE).as_deref() == Some("replication_to_follower") {
                assert_eq!(v, 7000);
            }
        }
    }
    assert_eq!(sent, total);
    assert_eq!(groups.len(), KAFKA_TOP_GROUPS + 1, "{groups:?}");
    assert!(groups.contains(OTHER_GROUPS) && groups.contains("g49"));
    let delay = metrics
        .iter()
        .find(|m| m.name == "throttlescope.kafka.queuing_delay")
        .unwrap();
    let Some(metric::Data::Gauge(g)) = &delay.data else {
        panic!()
    };
    assert!(g
        .data_points
        .iter()
        .all(|p| p.value == Some(number_data_point::Value::AsDouble(0.002))));
    let folded = metrics
        .iter()
        .find(|m| m.name == "throttlescope.kafka.groups.folded")
        .unwrap();
    let Some(metric::Data::Gauge(g)) = &folded.data else {
        panic!()
    };
    assert_eq!(
        g.data_points[0].value,
        Some(number_data_point::Value::AsDouble(40.0))
    );
}

/// Issue 44: the Kafka lookup's health and the local broker, as the
/// Prometheus exporter has them.
#[test]
fn the_kafka_lookups_health_and_the_local_broker() {
    use crate::model::snapshot::KafkaHealth;
    let mut snap = snapshot(4);
    snap.health.kafka = Some(KafkaHealth {
        target: "10.0.0.5:9092".into(),
        lookups_ok: 7,
        lookups_failed: 2,
        directory_age_ms: Some(12_500),
        bytes_sent: 1_321,
        bytes_received: 6_249,
        local_broker: Some(2),
        ..Default::default()
    });
    let a = analyze(&[], &snap, &Thresholds::default());
    let mut state = ExporterState::new(20);
    state.apply(&snap, &a);
    let req = encode::metrics_request(&ec2(), &state, &snap, &a, 1_761_999_000_000);
    let req = ExportMetricsServiceRequest::decode(req.encode_to_vec().as_slice()).unwrap();
    let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
    let find = |name: &str| {
        metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let Some(metric::Data::Sum(lookups)) = &find("throttlescope.kafka.lookups").data else {
        panic!()
    };
    let by_result: Vec<(Option<String>, Option<number_data_point::Value>)> = lookups
        .data_points
        .iter()
        .map(|p| {
            (
                s(&p.attributes, encode::KAFKA_LOOKUP_RESULT),
                p.value.clone(),
            )
        })
        .collect();
    assert_eq!(
        by_result,
        vec![
            (Some("ok".into()), Some(number_data_point::Value::AsInt(7))),
            (
                Some("failed".into()),
                Some(number_data_point::Value::AsInt(2))
            ),
        ]
    );
    let Some(metric::Data::Gauge(age)) = &find("throttlescope.kafka.directory.age").data else {
        panic!()
    };
    assert_eq!(
        age.data_points[0].value,
        Some(number_data_point::Value::AsDouble(12.5))
    );
    let Some(metric::Data::Gauge(b)) = &find("throttlescope.kafka.broker").data else {
        panic!()
    };
    assert_eq!(
        s(&b.data_points[0].attributes, encode::KAFKA_BROKER_ID).as_deref(),
        Some("2")
    );
    assert_eq!(
        s(&b.data_points[0].attributes, encode::KAFKA_TARGET).as_deref(),
        Some("10.0.0.5:9092")
    );
}

/// Issue 45, item 4: the packets sent to the link-local services (UDP
/// counted in the kernel), a cumulative sum and the last interval's rate,
/// one point per interface; absent where not measured.
#[test]
fn tcp_flows_open_where_measured() {
    use crate::model::holders::{FlowHolder, FlowHolderSample};
    let mut snap = snapshot(0);
    let (_, plain) = judged(0);
    snap.interfaces[0].tcp_holders = Some(FlowHolderSample::of(vec![FlowHolder {
        owner: crate::model::snapshot::Owner {
            pid: 7,
            comm: "pool".into(),
            thread: None,
            cgroup_id: 0,
            cgroup: None,
            workload: None,
        },
        open: 400,
        idle: 380,
        longest_idle_s: 900,
    }]));
    let a = analyze(&[], &snap, &Thresholds::default());
    let mut state = ExporterState::new(20);
    state.apply(&snap, &a);
    let req = encode::metrics_request(&ec2(), &state, &snap, &a, 1_761_999_000_000);
    let metrics: BTreeMap<&str, &Metric> = req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    for (name, want) in [
        ("throttlescope.tcp.flows.open", 400.0),
        ("throttlescope.tcp.flows.idle", 380.0),
    ] {
        let Some(metric::Data::Gauge(g)) = &metrics[name].data else {
            panic!("{name} is not a gauge")
        };
        assert_eq!(
            g.data_points[0].value,
            Some(number_data_point::Value::AsDouble(want))
        );
    }
    // Not measured: no such metric.
    assert!(!unmeasured_names(&plain)
        .iter()
        .any(|m| m.starts_with("throttlescope.tcp.flows")));
}

/// The metric names of `plain`'s interval over a plain snapshot (nothing
/// optional measured).
fn unmeasured_names(plain: &IntervalAnalysis) -> Vec<String> {
    let mut state = ExporterState::new(20);
    let plain_snap = snapshot(0);
    state.apply(&plain_snap, plain);
    let req = encode::metrics_request(&ec2(), &state, &plain_snap, plain, 1_761_999_000_000);
    req.resource_metrics[0].scope_metrics[0]
        .metrics
        .iter()
        .map(|m| m.name.clone())
        .collect()
}

#[test]
fn linklocal_packets_where_measured() {
    use crate::model::linklocal::{LinkLocalSample, LinkLocalSender, LinkLocalService};
    let mut snap = snapshot(0);
    let (_, plain) = judged(0);
    snap.interfaces[0].linklocal = Some(LinkLocalSample::of(
        vec![LinkLocalSender {
            owner: crate::model::snapshot::Owner {
                pid: 7,
                comm: "dig".into(),
                thread: None,
                cgroup_id: 0,
                cgroup: None,
                workload: None,
            },
            service: LinkLocalService::Dns,
            proto: "udp".into(),
            family: 4,
            packets: 1_300,
            bytes: 52_000,
            forwarded: false,
            from_netns: None,
        }],
        0,
    ));
    let a = analyze(&[], &snap, &Thresholds::default());
    let mut state = ExporterState::new(20);
    state.apply(&snap, &a);
    let req = encode::metrics_request(&ec2(), &state, &snap, &a, 1_761_999_000_000);
    let rm = &req.resource_metrics[0];
    let metrics: BTreeMap<&str, &Metric> = rm.scope_metrics[0]
        .metrics
        .iter()
        .map(|m| (m.name.as_str(), m))
        .collect();
    let Some(metric::Data::Sum(sum)) = &metrics["throttlescope.linklocal.packets"].data else {
        panic!("throttlescope.linklocal.packets is not a sum")
    };
    assert_eq!(
        sum.data_points[0].value,
        Some(number_data_point::Value::AsInt(1_300))
    );
    let Some(metric::Data::Gauge(g)) = &metrics["throttlescope.linklocal.packets.rate"].data else {
        panic!()
    };
    assert_eq!(
        g.data_points[0].value,
        Some(number_data_point::Value::AsDouble(1_300.0))
    );
    // Not measured: no such metric.
    assert!(!unmeasured_names(&plain)
        .iter()
        .any(|m| m.starts_with("throttlescope.linklocal")));
}
