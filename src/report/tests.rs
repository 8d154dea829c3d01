//! The builder on made-up intervals whose right answers are known by
//! construction: filters, the burst before enforcement, health counters
//! over the span (with an observer restart), and `--since`/`--until`.

use std::net::SocketAddr;

use super::build::ReportBuilder;
use super::filters::{FlowPattern, ReportFilters};
use super::model::Report;
use crate::analysis::{Thresholds, Verdict};
use crate::model::snapshot::*;
use crate::record::{InterfaceInfo, TraceHeader, CURRENT_VERSION, FORMAT_NAME};
use crate::shared::clock::TimeSpec;

const START_MS: u64 = 1_763_000_000_000;
const START_MONO: u64 = 7_000_000_000;

fn header() -> TraceHeader {
    TraceHeader {
        format: FORMAT_NAME.into(),
        version: CURRENT_VERSION,
        tool_version: "test".into(),
        tool_commit: String::new(),
        bpf_objects: Default::default(),
        host: "h".into(),
        kernel: "k".into(),
        interfaces: vec![
            InterfaceInfo {
                name: "eth0".into(),
                driver: Some("ena".into()),
                driver_version: None,
            },
            InterfaceInfo {
                name: "eth1".into(),
                driver: Some("ena".into()),
                driver_version: None,
            },
        ],
        interval_ns: 1_000_000_000,
        thresholds: serde_json::to_value(Thresholds::default()).unwrap(),
        start_unix_ms: START_MS,
        start_mono_ns: START_MONO,
        segment: 0,
        instance_type: None,
        baseline: None,
    }
}

/// One interface sending `mbit` Mbit/s in full 1500-byte frames, `bw_pct`
/// of them over the bw_out allowance.
fn iface(name: &str, mbit: u64, bw_pct: u64) -> InterfaceSample {
    let bytes = mbit * 1_000_000 / 8;
    let packets = bytes / 1514;
    InterfaceSample {
        name: name.into(),
        driver: Some("ena".into()),
        totals: LinkCounters::default(),
        delta: LinkCounters {
            tx_packets: packets,
            tx_bytes: packets * 1514,
            ..Default::default()
        },
        offloads: None,
        mtu: 1500,
        allowance: AllowanceStatus::Read(Box::new(AllowanceSample {
            source: "test".into(),
            delta: AllowanceCounters {
                bw_out_allowance_exceeded: Some(packets * bw_pct / 100),
                ..Default::default()
            },
            ..Default::default()
        })),
        host_queue: None,
        ..Default::default()
    }
}

fn flow(id: u64, local: &str, peer: &str, comm: &str, bytes: u64, srtt: u32) -> FlowSample {
    FlowSample {
        local: local.parse::<SocketAddr>().unwrap(),
        peer: peer.parse::<SocketAddr>().unwrap(),
        owner: Some(Owner {
            pid: 10 + id as u32,
            comm: comm.into(),
            thread: None,
            cgroup_id: 0,
            cgroup: None,
            workload: None,
        }),
        srtt_us: srtt,
        min_rtt_us: 100,
        srtt_mean_us: Some(srtt),
        srtt_max_us: Some(srtt),
        delta: FlowCounters {
            bytes_sent: bytes,
            segs_out: bytes / 1448,
            ..Default::default()
        },
        ..FlowSample::example(id)
    }
}

/// Interval `seq` of a recording: eth0 and eth1 as given, two flows
/// (iperf3 to 10.0.0.2:5201 queuing 3x, nginx to 10.0.0.3:80 not), and the
/// tcp_probe program's cumulative event count.
fn snap(seq: u64, eth0: (u64, u64), eth1: (u64, u64), events: u64) -> Snapshot {
    Snapshot {
        folded: Default::default(),
        fragments_created: None,
        seq,
        mono_ns: START_MONO + (seq + 1) * 1_000_000_000,
        unix_ms: START_MS + (seq + 1) * 1000,
        interval_ns: 1_000_000_000,
        interfaces: vec![iface("eth0", eth0.0, eth0.1), iface("eth1", eth1.0, eth1.1)],
        flows: vec![
            flow(
                1,
                "10.0.0.1:40000",
                "10.0.0.2:5201",
                "iperf3",
                1_000_000,
                300,
            ),
            flow(2, "10.0.0.1:9092", "10.0.0.3:80", "nginx", 500_000, 100),
        ],
        idle_flows: 0,
        events: Vec::new(),
        health: Health {
            programs: vec![ProgramHealth {
                name: "tcp_probe".into(),
                events,
                missed: 0,
                ..Default::default()
            }],
            ..Default::default()
        },
    }
}

fn build(snaps: &[Snapshot], filters: ReportFilters, th: Thresholds) -> anyhow::Result<Report> {
    let h = header();
    let mut b = ReportBuilder::new(
        vec!["t.jsonl".into()],
        std::slice::from_ref(&h),
        &Thresholds::default(),
        th,
        filters,
        10,
    )?;
    for s in snaps {
        b.push(s);
    }
    b.finish()
}

/// eth0: idle 0-1, free flow at 300 Mbit/s 2-6, enforced at 100 Mbit/s
/// (90% over allowance) 7-12. eth1: free flow throughout.
fn burst_then_enforcement() -> Vec<Snapshot> {
    (0..13)
        .map(|seq| {
            let eth0 = match seq {
                0..=1 => (0, 0),
                2..=6 => (300, 10),
                _ => (100, 90),
            };
            snap(seq, eth0, (50, 0), seq * 100)
        })
        .collect()
}

#[test]
fn burst_before_enforcement_is_measured() {
    let r = build(
        &burst_then_enforcement(),
        ReportFilters::default(),
        Thresholds::default(),
    )
    .unwrap();
    let enforced: Vec<_> = r
        .episodes
        .iter()
        .filter(|e| e.episode.verdict.is_enforcement())
        .collect();
    assert_eq!(enforced.len(), 1, "{:#?}", r.episodes);
    let e = enforced[0];
    assert_eq!(e.episode.iface, "eth0");
    assert_eq!(e.episode.verdict, Verdict::HypervisorQueuing);
    assert_eq!((e.episode.start_seq, e.episode.end_seq), (7, 12));
    let x = e.enforcement.as_ref().unwrap();
    assert_eq!(x.burst_secs, 5.0);
    assert_eq!(x.direction, "out");
    let ceiling = x.burst_ceiling_bps.unwrap();
    let baseline = x.baseline_bps.unwrap();
    assert!((ceiling - 300e6).abs() < 3e6, "{ceiling}");
    assert!((baseline - 100e6).abs() < 1e6, "{baseline}");
    // The evidence is that of the peak interval: the deciding signal first.
    assert_eq!(e.evidence[0].signal, "bw_out_allowance_pct");
    assert!((e.evidence[0].value - 90.0).abs() < 0.5);
    // Offsets: seq 7 starts 7 s after the recording's start.
    assert_eq!(e.start_offset_secs, 7.0);
    assert_eq!(e.end_offset_secs, 13.0);
    assert_eq!(r.span.intervals, 13);
    assert_eq!(r.series.len(), 13);
    assert_eq!(
        r.series[7].interfaces[0].verdict,
        Verdict::HypervisorQueuing
    );
    let eth0 = &r.interfaces[0];
    assert_eq!(eth0.verdicts[&Verdict::HypervisorQueuing], 6);
    assert_eq!(eth0.verdicts[&Verdict::Idle], 2);
    let bw = &eth0.allowance["bw_out"];
    assert!(bw.pct.unwrap() > 10.0 && bw.pct.unwrap() < 90.0);
    assert!((bw.peak_pct.unwrap() - 90.0).abs() < 0.5);
}

#[test]
fn a_burst_broken_by_an_idle_interval_restarts() {
    let mut snaps = burst_then_enforcement();
    // Idle at seq 4: the run before enforcement is 5-6 only.
    snaps[4] = snap(4, (0, 0), (50, 0), 400);
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let e = r
        .episodes
        .iter()
        .find(|e| e.episode.verdict.is_enforcement())
        .unwrap();
    assert_eq!(e.enforcement.as_ref().unwrap().burst_secs, 2.0);
}

#[test]
fn iface_filter_keeps_only_that_interface() {
    let filters = ReportFilters {
        interfaces: vec!["eth1".into()],
        ..Default::default()
    };
    let r = build(&burst_then_enforcement(), filters, Thresholds::default()).unwrap();
    assert_eq!(r.interfaces.len(), 1);
    assert_eq!(r.interfaces[0].name, "eth1");
    assert!(r.episodes.iter().all(|e| e.episode.iface == "eth1"));
    assert!(r.series.iter().all(|p| p.interfaces.len() == 1));
    assert_eq!(r.filters.interfaces, vec!["eth1".to_string()]);

    let filters = ReportFilters {
        interfaces: vec!["eth9".into()],
        ..Default::default()
    };
    let err = build(&burst_then_enforcement(), filters, Thresholds::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "--iface eth9: not in the recording (it has: eth0, eth1)"
    );
}

#[test]
fn flow_filter_by_port_address_and_process() {
    for (pattern, want) in [
        (":9092", 2),
        ("10.0.0.2", 1),
        ("10.0.0.2:5201", 1),
        ("nginx", 2),
        ("iperf3", 1),
    ] {
        let filters = ReportFilters {
            flow_texts: vec![pattern.into()],
            flows: vec![FlowPattern::parse(pattern).unwrap()],
            ..Default::default()
        };
        let r = build(&burst_then_enforcement(), filters, Thresholds::default()).unwrap();
        let ids: Vec<u64> = r.flows.iter().map(|f| f.flow_id).collect();
        assert_eq!(ids, vec![want], "{pattern}");
        assert!(r.flow_series.iter().all(|s| s.flow_id == want));
    }
    // No filter: the flow that queued (srtt 3x min_rtt) ranks first.
    let r = build(
        &burst_then_enforcement(),
        ReportFilters::default(),
        Thresholds::default(),
    )
    .unwrap();
    assert_eq!(r.flows.len(), 2);
    assert_eq!(r.flows[0].flow_id, 1);
    assert_eq!(r.flows[0].intervals, 13);
    assert_eq!(r.flows[0].bytes_sent, 13_000_000);
    assert_eq!(r.flows[0].mean_rtt_inflation, Some(3.0));
    assert!(r.flows[0].backoff_total > r.flows[1].backoff_total);
    assert_eq!(r.flow_series[0].points.len(), 13);
    assert_eq!(r.flow_series[0].points[0], (1.0, 3.0));
    assert_eq!(r.flow_series[0].label, "10.0.0.2:5201 iperf3/11");
}

#[test]
fn health_counters_grow_over_the_span_through_a_restart() {
    // Cumulative events: 100, 250, 300, then the observer restarted (20).
    let snaps: Vec<Snapshot> = [100, 250, 300, 20]
        .iter()
        .enumerate()
        .map(|(i, &ev)| snap(i as u64, (300, 0), (0, 0), ev))
        .collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    assert_eq!(r.health.programs["tcp_probe"].events, 100 + 150 + 50 + 20);

    // From seq 1 on (the interval ending at +2 s has its middle at +1.5 s):
    // seq 0's events are before the span, its count is the base.
    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(1_200)),
        ..Default::default()
    };
    let r = build(&snaps, filters, Thresholds::default()).unwrap();
    assert_eq!(r.span.first_seq, Some(1));
    assert_eq!(r.health.programs["tcp_probe"].events, 150 + 50 + 20);

    // A recording whose first interval is not seq 0 (segments rotated
    // away): the first count has no base and is not counted.
    let late: Vec<Snapshot> = snaps
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s.seq += 100;
            s
        })
        .collect();
    let r = build(&late, ReportFilters::default(), Thresholds::default()).unwrap();
    assert_eq!(r.health.programs["tcp_probe"].events, 150 + 50 + 20);
}

#[test]
fn since_and_until_pick_intervals_by_their_middle() {
    let snaps = burst_then_enforcement();
    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(3_000)),
        until: Some(TimeSpec::Wall(START_MS + 12_000)),
        ..Default::default()
    };
    let r = build(&snaps, filters, Thresholds::default()).unwrap();
    // Interval seq covers +seq s to +seq+1 s: middles 3.5 .. 11.5 are in.
    assert_eq!((r.span.first_seq, r.span.last_seq), (Some(3), Some(11)));
    assert_eq!(r.span.intervals, 9);
    assert_eq!(r.filters.since_unix_ms, Some(START_MS + 3_000));
    assert_eq!(r.filters.until_unix_ms, Some(START_MS + 12_000));
    assert_eq!(r.series.first().unwrap().seq, 3);
    // Episodes are cut at the bounds; the enforcement, held from seq 11
    // (its fifth interval), is dated back to its onset at 7.
    let e = r
        .episodes
        .iter()
        .find(|e| e.episode.verdict.is_enforcement())
        .unwrap();
    assert_eq!((e.episode.start_seq, e.episode.end_seq), (7, 11));

    // A window after the recording is an error that says what it covers.
    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(3_600_000)),
        ..Default::default()
    };
    let err = build(&snaps, filters, Thresholds::default())
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("no interval between --since"), "{err}");
    assert!(err.contains("the recording covers"), "{err}");

    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(5_000)),
        until: Some(TimeSpec::Offset(2_000)),
        ..Default::default()
    };
    let err = build(&snaps, filters, Thresholds::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("is after --until"), "{err}");
}

#[test]
fn thresholds_rejudge_and_are_named() {
    let th = Thresholds {
        bw_allowance_pct: 95.0,
        ..Default::default()
    };
    let r = build(&burst_then_enforcement(), ReportFilters::default(), th).unwrap();
    assert_eq!(r.thresholds_changed, vec!["bw_allowance_pct".to_string()]);
    assert!(r
        .episodes
        .iter()
        .all(|e| !e.episode.verdict.is_enforcement()));
}

#[test]
fn time_starts_at_the_first_interval_when_the_header_is_written_later() {
    // The recorder writes its header once the first interval is in: its
    // start is the end of seq 0.
    let mut h = header();
    h.start_mono_ns += 1_000_000_000;
    h.start_unix_ms += 1000;
    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(2_000)),
        ..Default::default()
    };
    let mut b = ReportBuilder::new(
        vec!["t.jsonl".into()],
        std::slice::from_ref(&h),
        &Thresholds::default(),
        Thresholds::default(),
        filters,
        10,
    )
    .unwrap();
    for s in burst_then_enforcement() {
        b.push(&s);
    }
    let r = b.finish().unwrap();
    assert_eq!(r.recording.start_unix_ms, START_MS);
    assert_eq!(r.filters.since_unix_ms, Some(START_MS + 2_000));
    assert_eq!(r.span.first_seq, Some(2));
    assert_eq!(r.series[0].t_secs, 3.0);
    assert_eq!(r.episodes[0].start_offset_secs, 2.0);
}

#[test]
fn flows_carry_their_interface_into_the_report() {
    let mut snaps = burst_then_enforcement();
    for s in &mut snaps {
        s.flows[0].iface = Some("eth0".into());
        // Flow 2's interface is unknown at first (an older segment), then known.
        if s.seq >= 5 {
            s.flows[1].iface = Some("eth1".into());
        }
    }
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let by_id = |id: u64| r.flows.iter().find(|f| f.flow_id == id).unwrap();
    assert_eq!(by_id(1).iface.as_deref(), Some("eth0"));
    assert_eq!(by_id(2).iface.as_deref(), Some("eth1"));
    let text = crate::report::text::render(&r);
    let line = |peer: &str| text.lines().find(|l| l.contains(peer)).unwrap().to_string();
    assert!(line("10.0.0.2:5201").contains(" eth0 "), "{text}");
    assert!(line("10.0.0.3:80").contains(" eth1 "), "{text}");

    // An old recording: no interface anywhere, and the text says so.
    let r = build(
        &burst_then_enforcement(),
        ReportFilters::default(),
        Thresholds::default(),
    )
    .unwrap();
    assert!(r.flows.iter().all(|f| f.iface.is_none()));
    let text = crate::report::text::render(&r);
    assert!(text.contains(" iface "), "{text}");
}

#[test]
fn a_program_not_attached_is_reported_as_such_not_as_idle() {
    let snaps: Vec<Snapshot> = (0..3)
        .map(|i| {
            let mut s = snap(i, (300, 0), (0, 0), 10 * i);
            s.health.programs.push(ProgramHealth {
                name: "tcp_sendmsg_locked".into(),
                attached: false,
                not_attached: Some(
                    "tracepoint tcp_sendmsg_locked does not exist in this kernel".into(),
                ),
                lost: Some("owners from the kernel".into()),
                ..Default::default()
            });
            s
        })
        .collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let p = &r.health.programs["tcp_sendmsg_locked"];
    assert!(p
        .not_attached
        .as_deref()
        .unwrap()
        .contains("does not exist"));
    assert_eq!(r.health.programs["tcp_probe"].not_attached, None);
    let text = crate::report::text::render(&r);
    assert!(
        text.contains("tcp_sendmsg_locked NOT attached (tracepoint tcp_sendmsg_locked does not exist in this kernel; missing: owners from the kernel)"),
        "{text}"
    );
    assert!(!text.contains("tcp_sendmsg_locked 0 events"), "{text}");
    let html = crate::report::html::render(&r);
    assert!(html.contains("NOT attached"), "html says it");
}

/// eth0 at 300 Mbit/s reading 10% with single seconds at 60%: each of
/// those is judged hypervisor_queuing alone and never held. The free-flow
/// episode says how many there were, and the text says so.
#[test]
fn a_calm_episode_names_what_was_judged_alone_and_never_held() {
    let snaps: Vec<Snapshot> = (0..12)
        .map(|seq| {
            let pct = if seq % 4 == 2 { 60 } else { 10 };
            snap(seq, (300, pct), (50, 0), seq * 100)
        })
        .collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let eth0: Vec<_> = r
        .episodes
        .iter()
        .filter(|e| e.episode.iface == "eth0")
        .collect();
    assert_eq!(eth0.len(), 1, "{:#?}", r.episodes);
    let e = eth0[0];
    assert_eq!(e.episode.verdict, Verdict::FreeFlow);
    assert_eq!(
        e.judged_alone.get(&Verdict::HypervisorQueuing),
        Some(&3),
        "{:?}",
        e.judged_alone
    );
    let text = crate::report::text::render(&r);
    assert!(
        text.contains("judged alone: hypervisor_queuing in 3 of 12 intervals, never held"),
        "{text}"
    );
    // eth1 was never judged anything but free flow: nothing to say.
    let eth1 = r
        .episodes
        .iter()
        .find(|e| e.episode.iface == "eth1")
        .unwrap();
    assert!(eth1.judged_alone.is_empty());
}
