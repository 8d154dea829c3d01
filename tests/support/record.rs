//! Synthetic recordings: a trace header and snapshots with every part of
//! the type filled in, different for every seq.

use std::collections::BTreeMap;

use throttlescope::model::snapshot::*;
use throttlescope::record::{InterfaceInfo, TraceHeader, CURRENT_VERSION, FORMAT_NAME};

pub fn header() -> TraceHeader {
    TraceHeader {
        format: FORMAT_NAME.into(),
        version: CURRENT_VERSION,
        tool_version: "test".into(),
        tool_commit: String::new(),
        bpf_objects: Default::default(),
        host: "test-host".into(),
        kernel: "6.18.0-test".into(),
        interfaces: vec![
            InterfaceInfo {
                name: "eth0".into(),
                driver: Some("ena".into()),
                driver_version: None,
            },
            InterfaceInfo {
                name: "veth0".into(),
                driver: None,
                driver_version: None,
            },
        ],
        interval_ns: 1_000_000_000,
        thresholds: serde_json::json!({"rtt_inflation": 1.5, "min_retrans": 3}),
        start_unix_ms: 1_763_000_000_000,
        start_mono_ns: 5_000_000_000,
        segment: 0,
        instance_type: None,
        baseline: None,
        host_id: None,
    }
}

fn counters(seq: u64, salt: u64) -> FlowCounters {
    let v = seq * 1000 + salt;
    FlowCounters {
        bytes_sent: v * 1448,
        bytes_acked: v * 1400,
        bytes_retrans: seq * salt,
        bytes_received: v / 3,
        segs_out: v,
        data_segs_out: v - seq,
        segs_in: v / 2,
        retrans_segs: seq % 7,
        retrans_spurious: seq % 3,
        retrans_skbs_traced: seq % 5,
        retrans_segs_traced: seq % 6,
        retrans_failed: seq % 2,
        delivered: v,
        probe_events: v * 2,
        cwnd_reductions: seq % 3,
        ca_time_us: PerCaState::from_array([v, 1, 2, 3, seq]),
        ca_entries: PerCaState::from_array([1, 0, seq % 2, 0, 0]),
        waiting_events: v / 2,
        busy_us: v * 100,
        rwnd_limited_us: seq * 10,
        sndbuf_limited_us: salt,
        retrans_dsack: seq % 3,
        retrans_undone: seq % 2,
        retrans_probes: seq % 4,
        rto_undone: seq % 2,
        recovery_undone: salt % 2,
    }
}

/// One snapshot with `flows` flows; every value depends on `seq`.
pub fn snapshot(seq: u64, flow_count: usize) -> Snapshot {
    let link = LinkCounters {
        tx_packets: seq * 100,
        rx_packets: seq * 90,
        tx_bytes: seq * 150_000,
        rx_bytes: seq * 7_000,
        tx_dropped: seq % 3,
        rx_dropped: 0,
        tx_errors: 0,
        rx_errors: seq % 2,
    };
    let allowance = AllowanceSample {
        source: "file:/tmp/ena".into(),
        totals: AllowanceCounters {
            bw_out_allowance_exceeded: Some(seq * 4),
            pps_allowance_exceeded: Some(seq),
            conntrack_allowance_available: Some(1000 - seq % 1000),
            ..Default::default()
        },
        delta: AllowanceCounters {
            bw_out_allowance_exceeded: Some(4),
            ..Default::default()
        },
        resets: 0,
        zeroed_reads: seq % 4,
        read_failures: 0,
        admin_cmd_failures: Some(seq / 10),
        last_error: (seq % 10 == 9).then(|| "short read".to_string()),
        untrusted: (seq % 10 == 5).then(|| "went down, not to near zero".to_string()),
        untrusted_reads: seq / 10,
        skipped_lines: seq / 20,
        skipped: (seq % 20 == 3).then(|| "/tmp/ena:4: no value for \"x\"".to_string()),
    };
    let mut drops = BTreeMap::new();
    drops.insert("QDISC_DROP".to_string(), seq % 11);
    let interfaces = vec![
        InterfaceSample {
            name: "eth0".into(),
            driver: Some("ena".into()),
            totals: link,
            delta: LinkCounters::default(),
            offloads: Some(Offloads {
                tso: true,
                gso: true,
                gro: seq % 2 == 0,
            }),
            mtu: 9001,
            allowance: AllowanceStatus::Read(Box::new(allowance)),
            host_queue: Some(HostQueueSample {
                enqueued: seq * 10,
                dequeued: seq * 10 - seq % 3,
                backlog_packets: seq % 3,
                backlog_bytes: (seq % 3) * 1500,
                peak_backlog_packets: 40,
                peak_backlog_bytes: 60_000,
                sojourn_mean_us: Some(120 + seq),
                sojourn_max_us: None,
                qdisc_drops: Some(seq * 2),
                qdisc_sent: Some(seq * 10),
                unseen_drops: seq % 2,
                paused: false,
                drops,
            }),
            ..Default::default()
        },
        InterfaceSample {
            name: "veth0".into(),
            driver: None,
            totals: link,
            delta: link,
            offloads: None,
            mtu: 1500,
            allowance: AllowanceStatus::Unavailable {
                reason: "driver veth has no allowance counters".into(),
            },
            host_queue: None,
            ..Default::default()
        },
    ];
    let flows = (0..flow_count as u64)
        .map(|i| FlowSample {
            id: 0x1000 + i,
            netns: 4026531840,
            local: format!("10.0.0.1:{}", 40000 + i).parse().unwrap(),
            peer: "[fd00::2]:5201".parse().unwrap(),
            state: "ESTAB".into(),
            ca_state: ["open", "recovery", "loss"][(seq + i) as usize % 3].into(),
            owner: (i % 2 == 0).then(|| Owner {
                pid: 4242,
                comm: "iperf3".into(),
                thread: None,
                cgroup_id: 77,
                cgroup: None,
                workload: None,
            }),
            srtt_us: 200 + (seq as u32 + i as u32) % 50,
            min_rtt_us: 180,
            rttvar_us: 30,
            cwnd: 10 + (seq % 40) as u32,
            ssthresh: u32::MAX,
            mss: 1448,
            packets_out: 12,
            retrans_out: 1,
            lost_out: 0,
            sacked_out: 2,
            srtt_mean_us: Some(210),
            srtt_max_us: (seq % 2 == 0).then_some(900),
            cwnd_min: None,
            notsent_bytes: (seq * 1448) as u32,
            cwnd_limited: seq % 2 == 1,
            totals: counters(seq, i),
            delta: counters(1, i),
            opened: seq == 0,
            closed: false,
            iface: None,
            unrouted: false,
            netns_name: None,
            peak_bps: None,
            kafka: None,
        })
        .collect();
    Snapshot {
        folded: Default::default(),
        udp_openers: None,
        icmp_openers: None,
        fragments_created: (seq % 3 != 0).then_some(seq % 4),
        seq,
        mono_ns: 5_000_000_000 + (seq + 1) * 1_000_000_000,
        unix_ms: 1_763_000_000_000 + (seq + 1) * 1000,
        interval_ns: 1_000_000_000 + seq % 1000,
        interfaces,
        flows,
        idle_flows: 0,
        events: vec![
            FlowEvent {
                mono_ns: 5_000_000_000 + seq * 1_000_000_000 + 5,
                flow_id: 0x1000,
                netns: 4026531840,
                kind: FlowEventKind::Retransmit { segs: 2 },
            },
            FlowEvent {
                mono_ns: 5_000_000_000 + seq * 1_000_000_000 + 9,
                flow_id: 0x1000,
                netns: 4026531840,
                kind: FlowEventKind::CongestionState {
                    from: "open".into(),
                    to: "recovery".into(),
                },
            },
        ],
        health: Health {
            programs: vec![ProgramHealth {
                name: "tcp_probe".into(),
                events: seq * 500,
                missed: seq / 100,
                ..Default::default()
            }],
            untracked_flows: 0,
            ringbuf_drops: seq / 50,
            iter_records: seq * flow_count as u64,
            seeded_flows: 3,
            counter_read_failures: 0,
            ..Default::default()
        },
    }
}
