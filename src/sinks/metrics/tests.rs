//! The exposition from hand-built intervals: exact names and values, no
//! `_total` on the node_exporter names, the per-flow bound.

use std::collections::HashSet;

use super::encode_state;
use super::state::ExporterState;
use crate::analysis::{
    FlowAttribution, HeldVerdict, InterfaceVerdict, IntervalAnalysis, NormalisedRates, Verdict,
};
use crate::model::snapshot::{
    AllowanceCounters, AllowanceSample, AllowanceStatus, FlowSample, Health, InterfaceSample,
    LinkCounters, Owner, ProgramHealth, Snapshot,
};

fn iface(name: &str, allowance: Option<AllowanceCounters>) -> InterfaceSample {
    InterfaceSample {
        name: name.into(),
        driver: Some("ena".into()),
        totals: LinkCounters {
            tx_packets: 1000,
            rx_packets: 900,
            tx_bytes: 1_500_000,
            rx_bytes: 60_000,
            tx_dropped: 3,
            rx_dropped: 4,
            ..Default::default()
        },
        delta: LinkCounters::default(),
        offloads: None,
        mtu: 1500,
        allowance: match allowance {
            Some(totals) => AllowanceStatus::Read(Box::new(AllowanceSample {
                source: "file:x".into(),
                totals,
                delta: AllowanceCounters::default(),
                resets: 1,
                zeroed_reads: 0,
                read_failures: 2,
                untrusted_reads: 4,
                admin_cmd_failures: None,
                last_error: None,
                ..Default::default()
            })),
            None => AllowanceStatus::Unavailable {
                reason: "not ENA".into(),
            },
        },
        host_queue: None,
        ..Default::default()
    }
}

fn snapshot(seq: u64) -> Snapshot {
    Snapshot {
        folded: Default::default(),
        udp_openers: None,
        icmp_openers: None,
        fragments_created: None,
        seq,
        mono_ns: 1_000_000_000 * (seq + 1),
        unix_ms: 1_762_000_000_000 + 1000 * seq,
        interval_ns: 1_000_000_000,
        interfaces: vec![
            iface(
                "b0",
                Some(AllowanceCounters {
                    bw_out_allowance_exceeded: Some(123),
                    bw_in_allowance_exceeded: Some(7),
                    pps_allowance_exceeded: Some(0),
                    conntrack_allowance_available: Some(5000),
                    ..Default::default()
                }),
            ),
            iface("lo", None),
        ],
        flows: Vec::new(),
        idle_flows: 9_800,
        events: Vec::new(),
        health: Health {
            programs: vec![ProgramHealth {
                name: "tcp_probe".into(),
                events: 42,
                missed: 1,
                ..Default::default()
            }],
            ringbuf_drops: 5,
            untracked_flows: 6,
            untracked_open: 2,
            untracked_bytes_sent: 1_000,
            counter_read_failures: 7,
            late_intervals: 3,
            ..Default::default()
        },
    }
}

fn verdict(name: &str, v: Verdict, tx_wire: u64, segs: u64, retrans: u64) -> InterfaceVerdict {
    InterfaceVerdict {
        iface: name.into(),
        verdict: v,
        confidence: 0.75,
        held: HeldVerdict {
            verdict: v,
            confidence: 0.75,
            ..HeldVerdict::default()
        },
        evidence: Vec::new(),
        rates: NormalisedRates {
            tx_wire_packets: tx_wire,
            rx_wire_packets: 10,
            bw_out_pct: Some(12.5),
            segs_out: segs,
            retrans_segs: retrans,
            retransmit_pct: (segs > 0).then(|| retrans as f64 / segs as f64 * 100.0),
            ..Default::default()
        },
    }
}

/// A flow ranked `rank`, its peer port telling it apart.
fn flow(rank: usize, peer_port: u16) -> FlowAttribution {
    FlowAttribution {
        flow_id: u64::from(peer_port),
        local: "10.0.0.1:9092".parse().unwrap(),
        peer: format!("10.0.0.2:{peer_port}").parse().unwrap(),
        owner: Some(Owner {
            pid: 1,
            comm: "java".into(),
            thread: None,
            cgroup_id: 0,
            cgroup: None,
            workload: None,
        }),
        state: "ESTAB".into(),
        ca_state: "open".into(),
        bytes_sent: 2_000_000,
        bytes_received: 0,
        bytes_share_pct: 10.0,
        received_share_pct: 0.0,
        rtt_inflation: Some(1.5),
        srtt_us: 2500,
        min_rtt_us: 1000,
        cwnd: 10,
        cwnd_reductions: 0,
        segs_out: 100,
        retransmits: 3,
        spurious_retransmits: 1,
        failed_retransmits: 0,
        recovery_loss_ms: 0.0,
        base_rtt_us: 1000,
        added_delay_us: 1500,
        backoff_parts: Default::default(),
        backoff_score: 100.0 - rank as f64,
        inbound: false,
        rank,
    }
}

fn analysis(seq: u64, flows: Vec<FlowAttribution>) -> IntervalAnalysis {
    IntervalAnalysis {
        seq,
        mono_ns: 0,
        interfaces: vec![
            verdict("b0", Verdict::HypervisorQueuing, 1000, 200, 4),
            verdict("lo", Verdict::Idle, 0, 200, 4),
        ],
        flows,
        episodes: Vec::new(),
        headroom: None,
        kafka: Vec::new(),
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn exact_names_and_values() {
    let mut st = ExporterState::new(20);
    // The flow's interface comes from the snapshot's flow of the same id.
    let on_b0 = |seq| {
        let mut snap = snapshot(seq);
        snap.flows.push(FlowSample {
            iface: Some("b0".into()),
            ..FlowSample::example(5000)
        });
        snap
    };
    st.apply(&on_b0(0), &analysis(0, vec![flow(1, 5000)]));
    st.apply(&on_b0(1), &analysis(1, vec![flow(1, 5000)]));
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        r#"node_ethtool_bw_out_allowance_exceeded{device="b0"} 123"#,
        r#"node_ethtool_bw_in_allowance_exceeded{device="b0"} 7"#,
        r#"node_ethtool_pps_allowance_exceeded{device="b0"} 0"#,
        r#"node_ethtool_conntrack_allowance_available{device="b0"} 5000"#,
        "# TYPE node_ethtool_bw_out_allowance_exceeded unknown",
        r#"throttlescope_interface_packets_total{device="b0",direction="tx"} 1000"#,
        r#"throttlescope_interface_bytes_total{device="lo",direction="rx"} 60000"#,
        r#"throttlescope_interface_dropped_total{device="b0",direction="rx"} 4"#,
        // Sums of two intervals.
        r#"throttlescope_tcp_segments_sent_total{device="b0"} 400"#,
        r#"throttlescope_tcp_retransmitted_segments_total{device="b0"} 8"#,
        r#"throttlescope_wire_packets_total{device="b0",direction="tx"} 2000"#,
        r#"throttlescope_wire_packets_total{device="b0",direction="rx"} 20"#,
        r#"throttlescope_allowance_exceeded_percent{device="b0",allowance="bw_out"} 12.5"#,
        r#"throttlescope_retransmit_percent{device="b0"} 2.0"#,
        r#"throttlescope_verdict{device="b0",verdict="hypervisor_queuing"} 1"#,
        r#"throttlescope_verdict{device="b0",verdict="idle"} 0"#,
        r#"throttlescope_verdict{device="lo",verdict="idle"} 1"#,
        r#"throttlescope_verdict_confidence{device="b0"} 0.75"#,
        r#"throttlescope_allowance_read_failures_total{device="b0"} 2"#,
        r#"throttlescope_allowance_untrusted_reads_total{device="b0"} 4"#,
        r#"throttlescope_allowance_counter_resets_total{device="b0"} 1"#,
        r#"throttlescope_bpf_events_total{program="tcp_probe"} 42"#,
        r#"throttlescope_bpf_missed_total{program="tcp_probe"} 1"#,
        r#"throttlescope_bpf_attached{program="tcp_probe"} 1"#,
        "throttlescope_ringbuf_drops_total 5",
        "throttlescope_untracked_flows_total 6",
        "throttlescope_untracked_open_flows 2",
        // 1,000 in each of the two intervals.
        r#"throttlescope_untracked_bytes_total{direction="sent"} 2000"#,
        r#"throttlescope_untracked_bytes_total{direction="received"} 0"#,
        "throttlescope_counter_read_failures_total 7",
        "throttlescope_late_intervals_total 3",
        "throttlescope_idle_flows 9800",
        "throttlescope_intervals_total 2",
        "throttlescope_last_interval_timestamp_seconds 1762000001.0",
        r#"throttlescope_flow_backoff_score{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 99.0"#,
        r#"throttlescope_flow_rtt_inflation_ratio{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 1.5"#,
        r#"throttlescope_flow_srtt_seconds{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 0.0025"#,
        r#"throttlescope_flow_cwnd{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 10"#,
        r#"throttlescope_flow_retransmits{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 3"#,
        r#"throttlescope_flow_tx_bytes_per_second{device="b0",peer="10.0.0.2:5000",local_port="9092",process="java"} 2000000.0"#,
        "# EOF",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
    // Every verdict once per judged device.
    assert_eq!(
        l.iter()
            .filter(|x| x.starts_with("throttlescope_verdict{device=\"b0\""))
            .count(),
        Verdict::ALL.len()
    );
    // Only what the device reports, and nothing for a device without.
    assert!(!text.contains("node_ethtool_conntrack_allowance_exceeded{"));
    assert!(!text.contains("node_ethtool_bw_out_allowance_exceeded{device=\"lo\"}"));
    assert!(
        !text.contains("node_ethtool_")
            || !text.contains("node_ethtool_bw_in_allowance_exceeded_total")
    );
    for line in &l {
        if line.starts_with("node_ethtool_") || line.starts_with("# TYPE node_ethtool_") {
            let name = line
                .trim_start_matches("# TYPE ")
                .split(['{', ' '])
                .next()
                .unwrap();
            assert!(!name.ends_with("_total"), "{line}");
        }
    }
}

#[test]
fn a_program_not_attached_is_0_and_has_no_event_series() {
    let mut st = ExporterState::new(20);
    let mut snap = snapshot(0);
    snap.health.programs.push(ProgramHealth {
        name: "tcp_sendmsg_locked".into(),
        attached: false,
        not_attached: Some("tracepoint tcp_sendmsg_locked does not exist in this kernel".into()),
        lost: Some("owners from the kernel".into()),
        ..Default::default()
    });
    st.apply(&snap, &analysis(0, vec![]));
    let text = encode_state(st);
    let l = lines(&text);
    assert!(l.contains(&r#"throttlescope_bpf_attached{program="tcp_sendmsg_locked"} 0"#));
    assert!(l.contains(&r#"throttlescope_bpf_attached{program="tcp_probe"} 1"#));
    assert!(!text.contains(r#"throttlescope_bpf_events_total{program="tcp_sendmsg_locked"}"#));
    assert!(!text.contains(r#"throttlescope_bpf_missed_total{program="tcp_sendmsg_locked"}"#));
}

#[test]
fn per_packet_auto_says_running_or_paused_and_counts_the_paused_intervals() {
    let mut st = ExporterState::new(20);
    st.apply(&snapshot(0), &analysis(0, vec![]));
    assert!(
        !encode_state(st.clone()).contains("per_packet"),
        "none with always"
    );
    for (seq, measured, attached) in [(1, true, false), (2, false, false), (3, false, true)] {
        let mut snap = snapshot(seq);
        snap.health.per_packet = Some(crate::model::snapshot::PerPacketState {
            measured,
            attached,
            why: String::new(),
        });
        st.apply(&snap, &analysis(seq, vec![]));
    }
    let text = encode_state(st);
    let l = lines(&text);
    assert!(l.contains(&"throttlescope_per_packet_running 1"), "{text}");
    assert!(
        l.contains(&"throttlescope_per_packet_paused_intervals_total 2"),
        "{text}"
    );
}

#[test]
fn every_family_has_help_and_type() {
    let mut st = ExporterState::new(5);
    st.apply(&snapshot(0), &analysis(0, vec![flow(1, 5000)]));
    let text = encode_state(st);
    let mut helped = HashSet::new();
    let mut typed = HashSet::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap();
            assert!(help.len() > 10, "{l}");
            helped.insert(name.to_string());
        } else if let Some(rest) = l.strip_prefix("# TYPE ") {
            typed.insert(rest.split(' ').next().unwrap().to_string());
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap();
            let family = name.strip_suffix("_total").unwrap_or(name);
            assert!(
                helped.contains(name) || helped.contains(family),
                "sample without HELP: {l}"
            );
        }
    }
    assert_eq!(helped, typed);
}

fn flow_peers(text: &str) -> HashSet<String> {
    text.lines()
        .filter(|l| l.starts_with("throttlescope_flow_backoff_score{"))
        .map(|l| {
            let start = l.find("peer=\"").unwrap() + 6;
            l[start..].split('"').next().unwrap().to_string()
        })
        .collect()
}

#[test]
fn top_n_bound_holds_and_departed_flows_vanish() {
    let mut st = ExporterState::new(3);
    // 10 flows, ranks 1..=10: only ranks 1..=3 get series.
    let many: Vec<_> = (1..=10).map(|r| flow(r, 5000 + r as u16)).collect();
    st.apply(&snapshot(0), &analysis(0, many));
    let text = encode_state(st.clone());
    let want: HashSet<String> = (1..=3).map(|r| format!("10.0.0.2:{}", 5000 + r)).collect();
    assert_eq!(flow_peers(&text), want);
    for family in [
        "throttlescope_flow_srtt_seconds{",
        "throttlescope_flow_cwnd{",
        "throttlescope_flow_retransmits{",
        "throttlescope_flow_tx_bytes_per_second{",
        "throttlescope_flow_rtt_inflation_ratio{",
    ] {
        assert_eq!(text.lines().filter(|l| l.starts_with(family)).count(), 3);
    }

    // Next interval other flows lead: the old ones' series are gone.
    let next = vec![flow(1, 6001), flow(2, 5001), flow(3, 6003), flow(4, 5002)];
    st.apply(&snapshot(1), &analysis(1, next));
    let text = encode_state(st.clone());
    let want: HashSet<String> = ["10.0.0.2:6001", "10.0.0.2:5001", "10.0.0.2:6003"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(flow_peers(&text), want);
    assert!(!text.contains("10.0.0.2:5002\""));
    assert!(!text.contains("10.0.0.2:5003\""));

    // No flows: no flow series at all.
    st.apply(&snapshot(2), &analysis(2, Vec::new()));
    assert!(flow_peers(&encode_state(st.clone())).is_empty());

    // 0 exports none.
    let mut none = ExporterState::new(0);
    none.apply(&snapshot(0), &analysis(0, vec![flow(1, 5000)]));
    assert!(flow_peers(&encode_state(none)).is_empty());
}

#[test]
fn colliding_flow_labels_are_counted_not_duplicated() {
    let mut st = ExporterState::new(5);
    st.apply(
        &snapshot(0),
        &analysis(0, vec![flow(1, 5000), flow(2, 5000)]),
    );
    let text = encode_state(st);
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("throttlescope_flow_cwnd{"))
            .count(),
        1
    );
    assert!(text.contains("throttlescope_flow_backoff_score{device=\"unknown\",peer=\"10.0.0.2:5000\",local_port=\"9092\",process=\"java\"} 99.0"));
    assert!(text
        .lines()
        .any(|l| l == "throttlescope_flow_label_collisions_total 1"));
}

#[test]
fn departed_device_vanishes_and_before_first_interval_is_valid() {
    let st = ExporterState::new(20);
    let text = encode_state(st.clone());
    assert!(text.lines().any(|l| l == "throttlescope_intervals_total 0"));
    assert!(text.ends_with("# EOF\n"));

    let mut st = st;
    st.apply(&snapshot(0), &analysis(0, Vec::new()));
    let mut snap = snapshot(1);
    snap.interfaces.retain(|i| i.name != "b0");
    st.apply(&snap, &analysis(1, Vec::new()));
    let text = encode_state(st);
    assert!(!text.contains("device=\"b0\""));
    assert!(text.contains("device=\"lo\""));
}

/// A flow ranked `rank` owned by pod `n` of 500 (each its own pod).
fn pod_flow(rank: usize, n: u16) -> FlowAttribution {
    let mut f = flow(rank, 10_000 + n);
    if let Some(o) = f.owner.as_mut() {
        o.workload = Some(crate::model::workload::Workload {
            pod_uid: Some(format!("00000000-0000-0000-0000-{n:012}")),
            pod_namespace: Some("kafka".into()),
            pod_name: Some(format!("consumer-{n}")),
            container_id: Some(format!("{n:064x}")),
            runtime: Some(crate::model::workload::Runtime::Containerd),
            ..Default::default()
        });
    }
    f
}

#[test]
fn flow_series_carry_the_workload_and_stay_bounded_with_500_pods() {
    let mut st = ExporterState::new(20);
    let flows: Vec<FlowAttribution> = (0..500).map(|n| pod_flow(n as usize + 1, n)).collect();
    st.apply(&snapshot(0), &analysis(0, flows));
    let text = encode_state(st);
    let cwnd: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("throttlescope_flow_cwnd{"))
        .collect();
    assert_eq!(cwnd.len(), 20, "500 pods, top 20 exported");
    assert!(
        cwnd[0].contains(",namespace=\"kafka\",pod=\"consumer-0\",container=\"000000000000\"}"),
        "{}",
        cwnd[0]
    );
    // Every flow family together: 7 per exported flow, whatever the pod count.
    let flow_series = text
        .lines()
        .filter(|l| l.starts_with("throttlescope_flow_") && l.contains("pod=\""))
        .count();
    assert_eq!(flow_series, 20 * 7);

    // A pod known only by UID is labelled with it; a service with its unit.
    let mut f = flow(1, 6000);
    f.owner.as_mut().unwrap().workload = Some(crate::model::workload::Workload {
        pod_uid: Some("0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8".into()),
        ..Default::default()
    });
    let mut g = flow(2, 6001);
    g.owner.as_mut().unwrap().workload = Some(crate::model::workload::Workload {
        service: Some("kafka.service".into()),
        ..Default::default()
    });
    let mut st = ExporterState::new(5);
    st.apply(&snapshot(1), &analysis(1, vec![f, g]));
    let text = encode_state(st);
    assert!(text.contains("process=\"java\",pod=\"0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8\"}"));
    assert!(text.contains("process=\"java\",service=\"kafka.service\"}"));
}

/// The OTLP exporter's delivery comes in the interval's health (with
/// `--otlp`): its counters and queue depth are served, and nothing of it
/// without.
#[test]
fn otlp_delivery_from_the_health_only_with_otlp() {
    let mut st = ExporterState::new(20);
    st.apply(&snapshot(0), &analysis(0, Vec::new()));
    assert!(!encode_state(st.clone()).contains("throttlescope_otlp"));
    let mut snap = snapshot(1);
    snap.health.otlp = Some(crate::model::snapshot::OtlpHealth {
        sent: 10,
        dropped: 3,
        failures: 6,
        queued: 9,
    });
    st.apply(&snap, &analysis(1, Vec::new()));
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        "throttlescope_otlp_batches_sent_total 10",
        "throttlescope_otlp_batches_dropped_total 3",
        "throttlescope_otlp_failures_total 6",
        "# TYPE throttlescope_otlp_batches_queued gauge",
        "throttlescope_otlp_batches_queued 9",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
}

#[test]
fn endpoint_counters_only_with_a_server() {
    let st = ExporterState::new(20);
    assert!(!encode_state(st.clone()).contains("throttlescope_metrics_connections"));
    let mut st = st;
    st.endpoint = Some(super::state::EndpointCounters {
        evicted: 3,
        timeout: 4,
        header_too_large: 1,
        accept_error: 2,
        open: 17,
        max: 256,
    });
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        "# TYPE throttlescope_metrics_connections_dropped counter",
        r#"throttlescope_metrics_connections_dropped_total{reason="evicted"} 3"#,
        r#"throttlescope_metrics_connections_dropped_total{reason="timeout"} 4"#,
        r#"throttlescope_metrics_connections_dropped_total{reason="header_too_large"} 1"#,
        r#"throttlescope_metrics_connections_dropped_total{reason="accept_error"} 2"#,
        "throttlescope_metrics_connections_open 17",
        "throttlescope_metrics_connections_max 256",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
}

#[test]
fn peak_gauges_only_where_measured() {
    let mut st = ExporterState::new(20);
    let mut snap = snapshot(0);
    let b0 = snap.interfaces.iter_mut().find(|i| i.name == "b0").unwrap();
    b0.tx_peak_bps = Some(352_000_000);
    b0.tx_peak_pps = Some(30_000);
    b0.rx_peak_bps = Some(1_200_000);
    b0.rx_peak_pps = Some(800);
    b0.peak_window_us = Some(12_000);
    st.apply(&snap, &analysis(0, vec![]));
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        r#"throttlescope_interface_peak_bytes_per_second{device="b0",direction="tx"} 44000000.0"#,
        r#"throttlescope_interface_peak_bytes_per_second{device="b0",direction="rx"} 150000.0"#,
        r#"throttlescope_interface_peak_packets_per_second{device="b0",direction="tx"} 30000.0"#,
        r#"throttlescope_interface_peak_window_seconds{device="b0"} 0.012"#,
        "# TYPE throttlescope_interface_peak_bytes_per_second gauge",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
    assert!(!text.contains(r#"throttlescope_interface_peak_bytes_per_second{device="lo""#));
}

/// Two intervals of a 1 Gb/s baseline: b0 sends 3 Gb/s then 2 Gb/s, lo
/// (not summed) 1 Gb/s; inbound stays below.
fn with_headroom() -> ExporterState {
    use crate::analysis::HeadroomTracker;
    use crate::model::instance::{Baseline, BaselineFrom};
    let mut tracker = HeadroomTracker::new(Some(Baseline {
        instance_type: Some("m5.xlarge".into()),
        from: BaselineFrom::Dmi,
        tx_bps: 1e9,
        rx_bps: 1e9,
        burst_bps: Some(10e9),
        arch: None,
        source: "test".into(),
    }));
    let mut st = ExporterState::new(20);
    for (seq, gbps) in [(0, 3.0), (1, 2.0)] {
        let mut snap = snapshot(seq);
        let bytes = |gbps: f64| (gbps * 1e9 / 8.0) as u64;
        snap.interfaces[0].delta.tx_bytes = bytes(gbps);
        snap.interfaces[0].delta.rx_bytes = bytes(0.25);
        snap.interfaces[1].driver = Some("loopback".into());
        snap.interfaces[1].delta.tx_bytes = bytes(1.0);
        let mut a = analysis(seq, vec![]);
        a.headroom = tracker.push(&snap);
        st.apply(&snap, &a);
    }
    st
}

#[test]
fn baseline_series_follow_the_headroom() {
    let text = encode_state(with_headroom());
    let l = lines(&text);
    for want in [
        r#"throttlescope_instance_info{instance_type="m5.xlarge",published="true"} 1"#,
        r#"throttlescope_baseline_bits_per_second{direction="tx"} 1000000000.0"#,
        r#"throttlescope_baseline_bits_per_second{direction="rx"} 1000000000.0"#,
        r#"throttlescope_baseline_utilisation_ratio{direction="tx"} 2.0"#,
        r#"throttlescope_baseline_utilisation_ratio{direction="rx"} 0.25"#,
        r#"throttlescope_interface_baseline_utilisation_ratio{device="b0",direction="tx"} 2.0"#,
        r#"throttlescope_interface_baseline_utilisation_ratio{device="lo",direction="tx"} 1.0"#,
        r#"throttlescope_interface_baseline_utilisation_ratio{device="lo",direction="rx"} 0.0"#,
        // The run: two seconds, 2 Gb then 1 Gb beyond the baseline.
        r#"throttlescope_above_baseline_run_seconds{direction="tx"} 2.0"#,
        r#"throttlescope_above_baseline_run_bytes{direction="tx"} 375000000.0"#,
        r#"throttlescope_above_baseline_run_seconds{direction="rx"} 0.0"#,
        r#"throttlescope_above_baseline_run_bytes{direction="rx"} 0.0"#,
        r#"throttlescope_above_baseline_seconds_total{direction="tx"} 2.0"#,
        r#"throttlescope_above_baseline_bytes_total{direction="tx"} 375000000.0"#,
        r#"throttlescope_above_baseline_seconds_total{direction="rx"} 0.0"#,
        "# TYPE throttlescope_above_baseline_seconds counter",
        "# TYPE throttlescope_above_baseline_run_seconds gauge",
        "# TYPE throttlescope_instance_info gauge",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
}

#[test]
fn no_baseline_no_baseline_series() {
    let mut st = with_headroom();
    st.apply(&snapshot(2), &analysis(2, vec![]));
    let text = encode_state(st);
    for name in [
        "throttlescope_instance_info",
        "baseline",
        "throttlescope_above_baseline",
    ] {
        assert!(!text.contains(name), "{name} in:\n{text}");
    }
}

#[test]
fn a_baseline_given_without_a_type_is_not_published() {
    let mut st = with_headroom();
    if let Some(h) = &mut st.headroom {
        h.instance_type = None;
        h.published = false;
    }
    let text = encode_state(st);
    assert!(
        text.contains(
            r#"throttlescope_instance_info{instance_type="unknown",published="false"} 1"#
        ),
        "{text}"
    );
}

fn kafka_row(
    iface: &str,
    role: crate::model::kafka::KafkaRole,
    group: Option<&str>,
    sent: u64,
) -> crate::analysis::kafka_roles::KafkaRoleSum {
    let mut r = crate::analysis::kafka_roles::KafkaRoleSum::example(iface, role, group, sent, 100);
    r.who.client_id = group.map(|g| format!("{g}-client"));
    r.retrans_segs = 3;
    r.delay_us = Some(2500);
    r
}

/// Issue 44: the traffic by Kafka role and group, summed over intervals,
/// the delay the last interval's; no client id label; none of it without
/// Kafka identities.
#[test]
fn kafka_roles_and_groups_as_labelled_series() {
    use crate::model::kafka::KafkaRole;
    let mut st = ExporterState::new(20);
    let with = |seq| {
        let mut a = analysis(seq, Vec::new());
        a.kafka = vec![
            kafka_row("b0", KafkaRole::ReplicationToFollower, None, 600_000),
            kafka_row("b0", KafkaRole::Consume, Some("orders"), 400_000),
        ];
        a
    };
    st.apply(&snapshot(0), &with(0));
    st.apply(&snapshot(1), &with(1));
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        "# TYPE throttlescope_kafka_bytes counter",
        r#"throttlescope_kafka_bytes_total{device="b0",kafka_role="replication_to_follower",direction="tx"} 1200000"#,
        r#"throttlescope_kafka_bytes_total{device="b0",kafka_role="consume",kafka_group="orders",direction="tx"} 800000"#,
        r#"throttlescope_kafka_bytes_total{device="b0",kafka_role="consume",kafka_group="orders",direction="rx"} 200"#,
        r#"throttlescope_kafka_segments_sent_total{device="b0",kafka_role="consume",kafka_group="orders"} 800"#,
        r#"throttlescope_kafka_retransmitted_segments_total{device="b0",kafka_role="consume",kafka_group="orders"} 6"#,
        r#"throttlescope_kafka_queuing_delay_seconds{device="b0",kafka_role="consume",kafka_group="orders"} 0.0025"#,
        r#"throttlescope_kafka_groups_folded{device="b0"} 0"#,
    ] {
        assert!(l.contains(&want), "missing {want}\n{text}");
    }
    assert!(!text.contains("client"), "{text}");
    let mut st = ExporterState::new(20);
    st.apply(&snapshot(0), &analysis(0, Vec::new()));
    assert!(!encode_state(st).contains("kafka"));
}

/// Issue 44: the Kafka lookup's health reaches the fleet: lookups by
/// result, the directory's age, what it misses, its cost, and the broker
/// this host runs as an info series; nothing before a lookup is known.
#[test]
fn the_kafka_lookups_health_and_the_local_broker_are_series() {
    use crate::model::snapshot::KafkaHealth;
    let mut st = ExporterState::new(20);
    let mut snap = snapshot(0);
    snap.health.kafka = Some(KafkaHealth {
        target: "10.0.0.5:9092".into(),
        lookups_ok: 7,
        lookups_failed: 2,
        directory_age_ms: Some(12_500),
        groups_not_described: 3,
        brokers_not_asked: 1,
        requests: 40,
        bytes_sent: 1_321,
        bytes_received: 6_249,
        local_broker: Some(2),
        ..Default::default()
    });
    st.apply(&snap, &analysis(0, Vec::new()));
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        "# TYPE throttlescope_kafka_lookups counter",
        r#"throttlescope_kafka_lookups_total{target="10.0.0.5:9092",result="ok"} 7"#,
        r#"throttlescope_kafka_lookups_total{target="10.0.0.5:9092",result="failed"} 2"#,
        r#"throttlescope_kafka_directory_age_seconds{target="10.0.0.5:9092"} 12.5"#,
        r#"throttlescope_kafka_directory_missing{target="10.0.0.5:9092",what="groups"} 3"#,
        r#"throttlescope_kafka_directory_missing{target="10.0.0.5:9092",what="brokers"} 1"#,
        r#"throttlescope_kafka_lookup_requests_total{target="10.0.0.5:9092"} 40"#,
        r#"throttlescope_kafka_lookup_bytes_total{target="10.0.0.5:9092",direction="tx"} 1321"#,
        r#"throttlescope_kafka_lookup_bytes_total{target="10.0.0.5:9092",direction="rx"} 6249"#,
        r#"throttlescope_kafka_broker_info{target="10.0.0.5:9092",broker_id="2"} 1"#,
    ] {
        assert!(l.contains(&want), "missing {want}\n{text}");
    }
    // Failing from the start: counted, no age and no broker yet.
    let mut st = ExporterState::new(20);
    snap.health.kafka = Some(KafkaHealth {
        target: "10.0.0.5:9092".into(),
        lookups_failed: 4,
        last_error: Some("connection refused".into()),
        ..Default::default()
    });
    st.apply(&snap, &analysis(0, Vec::new()));
    let text = encode_state(st);
    assert!(
        lines(&text).contains(
            &r#"throttlescope_kafka_lookups_total{target="10.0.0.5:9092",result="failed"} 4"#
        ),
        "{text}"
    );
    assert!(
        !text.contains("directory_age") && !text.contains("broker_info"),
        "{text}"
    );
}

/// The bound: 500 consumer groups on one device give at most
/// KAFKA_TOP_GROUPS named `kafka_group` values plus `~other`, the folded
/// groups counted, every byte in some series.
#[test]
fn kafka_group_labels_stay_bounded_with_500_groups() {
    use crate::analysis::exported_kafka::{KAFKA_TOP_GROUPS, OTHER_GROUPS};
    use crate::model::kafka::KafkaRole;
    let mut st = ExporterState::new(20);
    let mut a = analysis(0, Vec::new());
    a.kafka = (0..500)
        .map(|i| {
            kafka_row(
                "b0",
                KafkaRole::Consume,
                Some(&format!("g{i:03}")),
                1000 + i,
            )
        })
        .collect();
    let total: u64 = a.kafka.iter().map(|r| r.bytes_sent).sum();
    st.apply(&snapshot(0), &a);
    let text = encode_state(st);
    let groups: HashSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("throttlescope_kafka_bytes_total"))
        .filter_map(|l| l.split("kafka_group=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(groups.len(), KAFKA_TOP_GROUPS + 1, "{groups:?}");
    assert!(groups.contains(OTHER_GROUPS) && groups.contains("g499"));
    assert!(text.contains(r#"throttlescope_kafka_groups_folded{device="b0"} 490"#));
    let exported: u64 = text
        .lines()
        .filter(|l| l.starts_with("throttlescope_kafka_bytes_total") && l.contains("\"tx\""))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(exported, total);
}

/// Issue 45, item 4: the packets sent to the link-local services, summed
/// over intervals (a counter) and the last interval's rate, one series per
/// device, only where measured.
#[test]
fn tcp_flows_open_and_idle_only_where_measured() {
    let mut st = ExporterState::new(20);
    let mut a = analysis(0, vec![]);
    for v in a.interfaces.iter_mut().filter(|v| v.iface == "b0") {
        v.rates.conntrack_openers.open = Some(1_000);
        v.rates.conntrack_openers.idle = Some(990);
    }
    st.apply(&snapshot(0), &a);
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        r#"throttlescope_tcp_flows_open{device="b0"} 1000"#,
        r#"throttlescope_tcp_flows_idle{device="b0"} 990"#,
        "# TYPE throttlescope_tcp_flows_open gauge",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
    assert!(!text.contains(r#"throttlescope_tcp_flows_open{device="lo""#));
}

#[test]
fn linklocal_packets_only_where_measured() {
    let mut st = ExporterState::new(20);
    for seq in 0..2 {
        let mut a = analysis(seq, vec![]);
        for v in a.interfaces.iter_mut().filter(|v| v.iface == "b0") {
            v.rates.interval_secs = 1.0;
            v.rates.linklocal_pps = Some(1_500.0 + seq as f64 * 100.0);
        }
        st.apply(&snapshot(seq), &a);
    }
    let text = encode_state(st);
    let l = lines(&text);
    for want in [
        r#"throttlescope_linklocal_packets_total{device="b0"} 3100"#,
        r#"throttlescope_linklocal_packets_per_second{device="b0"} 1600.0"#,
        "# TYPE throttlescope_linklocal_packets counter",
    ] {
        assert!(l.contains(&want), "missing line {want:?} in:\n{text}");
    }
    assert!(!text.contains(r#"throttlescope_linklocal_packets_total{device="lo""#));
}
