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
        host_id: None,
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
        udp_openers: None,
        icmp_openers: None,
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

/// The OTLP exporter's counters (`health.otlp`, with `--otlp`) grow over
/// the span like the other health counters and show in the text report;
/// a recording without them has no OTLP line.
#[test]
fn otlp_delivery_is_part_of_the_health() {
    let mut snaps: Vec<Snapshot> = (0..4).map(|i| snap(i, (300, 0), (0, 0), 10)).collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    assert_eq!(r.health.otlp, None);
    assert!(!crate::report::text::render(&r).contains("OTLP"));
    // (sent, dropped, failures, queued) at each interval's end.
    for (s, (sent, dropped, failures, queued)) in
        snaps
            .iter_mut()
            .zip([(0, 0, 0, 0), (1, 0, 2, 3), (1, 4, 6, 9), (5, 4, 7, 1)])
    {
        s.health.otlp = Some(OtlpHealth {
            sent,
            dropped,
            failures,
            queued,
        });
    }
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let o = r.health.otlp.expect("an OTLP summary");
    assert_eq!((o.sent, o.dropped, o.failures, o.max_queued), (5, 4, 7, 9));
    let text = crate::report::text::render(&r);
    assert!(
        text.contains(
            "OTLP export: 5 batches sent, 4 dropped, 7 failed requests, at most 9 queued"
        ),
        "{text}"
    );
}

/// The Kafka lookup (`health.kafka`, with `--kafka`): its lookups that
/// worked and failed grow over the span, and the text and HTML reports
/// say them with the broker this host runs and the last failure; a
/// recording without a lookup says nothing of Kafka.
#[test]
fn the_kafka_lookup_is_part_of_the_health() {
    use crate::model::snapshot::KafkaHealth;
    let mut snaps: Vec<Snapshot> = (0..4).map(|i| snap(i, (300, 0), (0, 0), 10)).collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    assert_eq!(r.health.kafka, None);
    assert!(!crate::report::text::render(&r).contains("Kafka lookups"));
    // (ok, failed, last error) at each interval's end.
    for (s, (ok, failed, err)) in snaps.iter_mut().zip([
        (1, 0, None),
        (2, 0, None),
        (2, 3, Some("connection refused")),
        (2, 5, Some("connection refused <b>")),
    ]) {
        s.health.kafka = Some(KafkaHealth {
            target: "10.0.0.5:9092".into(),
            lookups_ok: ok,
            lookups_failed: failed,
            last_error: err.map(String::from),
            directory_age_ms: Some(31_000),
            local_broker: Some(2),
            ..Default::default()
        });
    }
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let k = r.health.kafka.clone().expect("a Kafka lookup summary");
    assert_eq!((k.lookups_ok, k.lookups_failed), (2, 5));
    let text = crate::report::text::render(&r);
    assert!(
        text.contains(
            "Kafka lookups of 10.0.0.5:9092: 2 ok, 5 failed; broker 2 runs here; \
             directory 31.0 s old at the end; last: connection refused <b>"
        ),
        "{text}"
    );
    let html = crate::report::html::render(&r);
    assert!(
        html.contains("<tr><th>Kafka lookups failed</th><td class=\"num\">5</td></tr>")
            && html.contains("connection refused &lt;b&gt;"),
        "{html}"
    );
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

/// eth0 at 64 Mbit/s, bw_out counting 24% of its packets while the busiest
/// 12 ms ran at 5.5x the mean (seconds 2-9 of 12; the others smooth):
/// free flow throughout, and the report (text, JSON, HTML) says the
/// counters rose in microbursts, in how many intervals, with the latest
/// interval's busiest window against its mean.
#[test]
fn a_free_flow_whose_counters_rose_in_microbursts_says_so() {
    let snaps: Vec<Snapshot> = (0..12)
        .map(|seq| {
            let mut s = snap(seq, (64, 24), (50, 0), seq * 100);
            if (2..10).contains(&seq) {
                let i = &mut s.interfaces[0];
                i.tx_peak_bps = Some(64_000_000 * 11 / 2);
                i.peak_window_us = Some(12_000);
                s.flows[0].iface = Some("eth0".into());
                s.flows[0].peak_bps = Some(300_000_000);
            }
            s
        })
        .collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let eth0: Vec<_> = r
        .episodes
        .iter()
        .filter(|e| e.episode.iface == "eth0")
        .collect();
    assert_eq!(eth0.len(), 1, "{:#?}", r.episodes);
    assert_eq!(eth0[0].episode.verdict, Verdict::FreeFlow);
    let b = eth0[0]
        .counters_in_microbursts
        .as_ref()
        .unwrap_or_else(|| panic!("{:#?}", eth0[0]));
    assert_eq!(b.intervals, 8);
    assert!(
        b.line.starts_with(
            "allowance counters rose in microbursts: bw_out_allowance_exceeded at 24.0% of \
             tx wire packets (under the 50.0% line); the busiest 12 ms ran at 352Mb/s, 5.5"
        ),
        "{}",
        b.line
    );
    assert!(
        b.line.contains("flows bursting: 10.0.0.2:5201"),
        "{}",
        b.line
    );
    let text = crate::report::text::render(&r);
    assert!(
        text.contains("in 8 of 12 intervals, allowance counters rose in microbursts: "),
        "{text}"
    );
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.contains("\"counters_in_microbursts\":{\"intervals\":8,\"line\":\"allowance"),
        "{json}"
    );
    let html = crate::report::html::render(&r);
    assert!(
        html.contains("<p class=\"bursts\">in 8 of 12 intervals, allowance counters rose"),
        "{html}"
    );
    // eth1 never burst: nothing to say.
    let eth1 = r.episodes.iter().find(|e| e.episode.iface == "eth1");
    assert!(eth1.unwrap().counters_in_microbursts.is_none());
}

/// The plan a report is given: `instance_type` looked up in `table` as
/// `--instance-type` is, or `--baseline` (bits/s, both ways) when given.
fn plan(
    table: crate::model::instance::SpecTable,
    instance_type: Option<&str>,
    baseline: Option<f64>,
) -> crate::model::instance::Plan {
    use crate::model::instance::{resolve, BaselineRequest, HostIdentity};
    let req = BaselineRequest {
        instance_type: instance_type.map(str::to_string),
        baseline: baseline.map(|b| (b, b)),
    };
    let host = HostIdentity::Unknown("test".into());
    let resolved = resolve(&host, &req, &table).unwrap();
    let (baseline, note) = match resolved {
        Ok(b) => (Some(b), None),
        Err(why) => (None, Some(why)),
    };
    crate::model::instance::Plan {
        table,
        instance_type: instance_type.map(str::to_string),
        baseline,
        note,
    }
}

fn build_planned(
    snaps: &[Snapshot],
    filters: ReportFilters,
    plan: crate::model::instance::Plan,
) -> Report {
    let h = header();
    let mut b = ReportBuilder::new(
        vec!["t.jsonl".into()],
        std::slice::from_ref(&h),
        &Thresholds::default(),
        Thresholds::default(),
        filters,
        10,
    )
    .unwrap();
    b.set_plan(plan);
    for s in snaps {
        b.push(s);
    }
    b.finish().unwrap()
}

/// Ten intervals of exact rates: eth0 sends 100, 200 .. 1000 Mbit/s (out
/// of order) and receives 20 Mbit/s; eth1 sends 50 Mbit/s. The instance
/// (both ENA, summed) sends 150 .. 1050 Mbit/s.
fn exact_rates() -> Vec<Snapshot> {
    [700, 100, 1000, 300, 500, 200, 900, 400, 800, 600]
        .iter()
        .enumerate()
        .map(|(seq, &mbit)| {
            let mut s = snap(seq as u64, (0, 0), (0, 0), seq as u64);
            s.interfaces[0].delta.tx_bytes = mbit * 125_000;
            s.interfaces[0].delta.rx_bytes = 20 * 125_000;
            s.interfaces[1].delta.tx_bytes = 50 * 125_000;
            s
        })
        .collect()
}

/// A small table whose answers are known: two x86_64 and two arm64 types
/// cover 1.05 Gb/s, one of each does not.
fn small_table() -> crate::model::instance::SpecTable {
    crate::model::instance::SpecTable::parse(
        "# source: https://example.com/specs\n# retrieved: 2026-11-01\n\
         n1.small x86_64 2 0.5 5\n\
         n1.large x86_64 4 1.25 10\n\
         n1.xlarge x86_64 8 2.5 10\n\
         m1g.small arm64 2 0.5 5\n\
         m1g.large arm64 4 1.1 10\n\
         m1g.xlarge arm64 8 2.5 2.5\n",
        "specs.tsv",
    )
    .unwrap()
}

#[test]
fn right_sizing_percentiles_and_time_above_the_baseline() {
    // m5.large: 750 Mbit/s baseline. Above it: 850, 950 and 1050 Mbit/s,
    // 3 s and (100 + 200 + 300) Mbit = 75 MB beyond.
    let table = crate::model::instance::SpecTable::built_in();
    let r = build_planned(
        &exact_rates(),
        ReportFilters::default(),
        plan(table, Some("m5.large"), None),
    );
    let s = &r.right_sizing;
    assert_eq!(s.intervals, 10);
    assert_eq!(s.interfaces, vec!["eth0".to_string(), "eth1".to_string()]);
    assert_eq!(s.interval_secs, 1.0);
    // Nearest rank of 10 values: p50 the 5th (550), p99 the 10th (1050).
    assert_eq!(s.tx.p50_bps, 550e6);
    assert_eq!(s.tx.p99_bps, 1050e6);
    assert_eq!(s.tx.max_bps, 1050e6);
    assert_eq!(s.tx.baseline_bps, Some(750e6));
    assert!((s.tx.p99_pct.unwrap() - 140.0).abs() < 1e-9);
    assert_eq!(s.tx.above_secs, 3.0);
    assert!(
        (s.tx.above_bytes - 75e6).abs() < 1.0,
        "{}",
        s.tx.above_bytes
    );
    assert_eq!(
        (s.rx.p50_bps, s.rx.p99_bps, s.rx.max_bps),
        (20e6, 20e6, 20e6)
    );
    assert_eq!(s.rx.above_secs, 0.0);
    // The types named cover the p99 of both directions: x86_64 (m5.large's)
    // first, up to 5, then up to 3 others, each by baseline.
    assert_eq!(s.arch, Some(crate::model::instance::Arch::X86_64));
    assert_eq!(s.covering.len(), 8, "{:#?}", s.covering);
    assert!(s.covering.iter().all(|c| c.baseline_bps >= 1050e6));
    assert!(s.covering[..5].iter().all(|c| c.same_arch));
    assert!(s.covering[5..].iter().all(|c| !c.same_arch));
    assert!(s.covering_total > 8);
    assert_eq!(s.table_origin, "built-in table");
    let text = crate::report::text::render(&r);
    assert!(
        text.contains(
            "right-sizing (1-second rates of the instance: eth0 + eth1 summed, 10 intervals)"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!("    {:<16} x86_64", s.covering[0].instance_type)),
        "{text}"
    );
    assert!(
        text.contains("out p50 550Mb/s (73.3%), p99 1.05Gb/s (140%), max 1.05Gb/s (140%) of baseline 750Mb/s; above it 3.00s, 75.0MB beyond"),
        "{text}"
    );
    assert!(
        text.contains("only the baseline can be planned against"),
        "{text}"
    );
    assert!(
        text.contains("plan        baseline 750Mb/s each way"),
        "{text}"
    );
}

#[test]
fn the_time_above_is_the_trackers_totals() {
    // The section's time and bytes above are the headroom tracker's totals,
    // those the live view and the exporter count.
    let table = crate::model::instance::SpecTable::built_in();
    let p = plan(table, Some("m5.large"), None);
    let mut tracker = crate::analysis::headroom::HeadroomTracker::new(p.baseline.clone());
    let last = exact_rates()
        .iter()
        .map(|s| tracker.push(s).unwrap())
        .last()
        .unwrap();
    let r = build_planned(&exact_rates(), ReportFilters::default(), p);
    assert_eq!(r.right_sizing.tx.above_secs, last.tx.above_secs_total);
    assert_eq!(r.right_sizing.tx.above_bytes, last.tx.above_bytes_total);
}

#[test]
fn covering_types_same_architecture_first() {
    // --baseline with no type: the arch is the kernel's (`k` says none),
    // so the types come by baseline alone.
    let r = build_planned(
        &exact_rates(),
        ReportFilters::default(),
        plan(small_table(), None, Some(1e9)),
    );
    let names = |r: &Report| -> Vec<String> {
        r.right_sizing
            .covering
            .iter()
            .map(|c| c.instance_type.clone())
            .collect()
    };
    assert_eq!(r.right_sizing.arch, None);
    assert_eq!(
        names(&r),
        ["m1g.large", "n1.large", "m1g.xlarge", "n1.xlarge"]
    );
    // The instance type's architecture first: arm64, then x86_64.
    let r = build_planned(
        &exact_rates(),
        ReportFilters::default(),
        plan(small_table(), Some("m1g.small"), None),
    );
    assert_eq!(
        r.right_sizing.arch,
        Some(crate::model::instance::Arch::Arm64)
    );
    assert_eq!(
        names(&r),
        ["m1g.large", "m1g.xlarge", "n1.large", "n1.xlarge"]
    );
    let r = build_planned(
        &exact_rates(),
        ReportFilters::default(),
        plan(small_table(), Some("n1.small"), None),
    );
    assert_eq!(
        names(&r),
        ["n1.large", "n1.xlarge", "m1g.large", "m1g.xlarge"]
    );
    assert_eq!(r.right_sizing.covering_total, 4);
    let text = crate::report::text::render(&r);
    assert!(text.contains("x86_64 first (that of n1.small)"), "{text}");
    assert!(
        text.contains("specs: specs.tsv, retrieved 2026-11-01"),
        "{text}"
    );
    // A fixed-bandwidth type has no burst to show.
    let g1 = text.lines().find(|l| l.contains("m1g.xlarge")).unwrap();
    assert!(g1.ends_with("baseline 2.50Gb/s"), "{g1}");
    // JSON carries the section.
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(
        json["right_sizing"]["covering"][0]["instance_type"],
        "n1.large"
    );
    assert_eq!(json["right_sizing"]["tx"]["p99_bps"], 1050e6);
}

#[test]
fn right_sizing_keeps_to_iface_since_and_until() {
    let filters = ReportFilters {
        interfaces: vec!["eth1".into()],
        ..Default::default()
    };
    let r = build_planned(
        &exact_rates(),
        filters,
        plan(small_table(), None, Some(40e6)),
    );
    let s = &r.right_sizing;
    assert_eq!(s.interfaces, vec!["eth1".to_string()]);
    assert_eq!((s.tx.p50_bps, s.tx.max_bps), (50e6, 50e6));
    // eth1 alone: 10 Mbit/s over the 40 Mbit/s baseline every second.
    assert_eq!(s.tx.above_secs, 10.0);
    assert!((s.tx.above_bytes - 10.0 * 10e6 / 8.0).abs() < 1.0);

    // Seconds 3 to 5 (middles 3.5, 4.5): eth0 sends 300 and 500.
    let filters = ReportFilters {
        since: Some(TimeSpec::Offset(3_000)),
        until: Some(TimeSpec::Offset(5_000)),
        ..Default::default()
    };
    let r = build_planned(
        &exact_rates(),
        filters,
        plan(small_table(), None, Some(400e6)),
    );
    let s = &r.right_sizing;
    assert_eq!(s.intervals, 2);
    assert_eq!((s.tx.p50_bps, s.tx.max_bps), (350e6, 550e6));
    assert_eq!(s.tx.above_secs, 1.0);
    assert!((s.tx.above_bytes - 150e6 / 8.0).abs() < 1.0);
}

#[test]
fn no_baseline_is_said_with_how_to_give_one() {
    let mut p = plan(small_table(), None, None);
    p.note = Some("the recording has no baseline".into());
    let r = build_planned(&exact_rates(), ReportFilters::default(), p);
    let s = &r.right_sizing;
    assert!(s.baseline.is_none());
    assert_eq!(s.tx.p99_pct, None);
    let text = crate::report::text::render(&r);
    assert!(
        text.contains("plan        no baseline: the recording has no baseline"),
        "{text}"
    );
    assert!(
        text.contains("  no baseline: the recording has no baseline"),
        "{text}"
    );
    assert!(text.contains("give --instance-type TYPE"), "{text}");
    assert!(!text.contains("above it"), "{text}");
    // Still the types that would cover what was needed.
    assert_eq!(s.covering.len(), 4);
}

#[test]
fn enforcement_is_set_against_the_plan() {
    // The instance (eth0 + eth1) sends 350 Mbit/s for 5 s (seq 2-6), then
    // is held at 150: against a 200 Mbit/s baseline the burst ran 5 s
    // above it before the enforcement started at seq 7.
    let r = build_planned(
        &burst_then_enforcement(),
        ReportFilters::default(),
        plan(small_table(), None, Some(200e6)),
    );
    let e = r
        .episodes
        .iter()
        .find(|e| e.episode.verdict.is_enforcement())
        .unwrap();
    let p = e
        .enforcement
        .as_ref()
        .unwrap()
        .against_plan
        .as_ref()
        .unwrap();
    assert!(!p.plan.published);
    assert_eq!(p.plan.baseline_bps, 200e6);
    assert_eq!(p.plan.burst_above_secs, 5.0);
    // 150 Mbit/s beyond for 5 s, less the frames' rounding.
    assert!(
        (p.plan.burst_above_bytes - 5.0 * 150e6 / 8.0).abs() < 1e6,
        "{}",
        p.plan.burst_above_bytes
    );
    assert_eq!(Some(p.line.clone()), e.episode.against_plan());
    let text = crate::report::text::render(&r);
    assert!(
        text.contains("against the plan: baseline 100Mb/s measured, 200Mb/s planned; burst ceiling 300Mb/s measured; the burst lasted 5.00s, 93.7MB above the baseline"),
        "{text}"
    );
    let html = crate::report::html::render(&r);
    assert!(
        html.contains("<td class=\"against-plan\">baseline"),
        "html says it"
    );

    // No plan: nothing to set it against.
    let r = build(
        &burst_then_enforcement(),
        ReportFilters::default(),
        Thresholds::default(),
    )
    .unwrap();
    let e = r
        .episodes
        .iter()
        .find(|e| e.episode.verdict.is_enforcement())
        .unwrap();
    assert!(e.enforcement.as_ref().unwrap().against_plan.is_none());
    assert!(!crate::report::text::render(&r).contains("against the plan"));
}

#[test]
fn right_sizing_ends_with_the_capacity_and_the_measured_baseline() {
    // Published baseline 200 Mbit/s; the enforcement held 100 (the
    // instance sends 350 Mbit/s, then is held at 150 on two interfaces:
    // 100 in the enforced one's measure, as the plan line above says).
    let table = crate::model::instance::SpecTable::parse(
        "# source a: https://example.com/specs\n# retrieved a: 2026-11-01\n\
         lab.xlarge x86_64 4 0.2 0.4 a\n",
        "specs.tsv",
    )
    .unwrap();
    let r = build_planned(
        &burst_then_enforcement(),
        ReportFilters::default(),
        plan(table, Some("lab.xlarge"), None),
    );
    let s = &r.right_sizing;
    let c = s.capacity.as_ref().expect("a capacity from the baseline");
    // 200 Mbit/s less 20% = 160 Mbit/s = 20,000,000 B/s = 19,531 KiB/s.
    assert_eq!(c.kib_per_s(), (19_531, 19_531));
    let m = s
        .measured
        .as_ref()
        .expect("the enforcement measured a baseline");
    assert_eq!(m.episodes, 1);
    let measured = m.out_bps.expect("outbound");
    assert!((measured - 100e6).abs() < 1e6, "{measured}");
    let text = crate::report::text::render(&r);
    let start = text.find("\nright-sizing").unwrap();
    let section = &text[start..start + text[start..].find("\nflows").unwrap()];
    assert!(
        section.contains(
            "capacity for Kafka's rebalancers (baseline less 20%, docs/capacity.md):\n    \
             lab.xlarge: baseline 200Mb/s each way (published, specs.tsv, retrieved 2026-11-01), \
             less 20%: Cruise Control NW_IN 19531, NW_OUT 19531 (KiB/s); Strimzi inboundNetwork: \
             19531KiB/s, outboundNetwork: 19531KiB/s"
        ),
        "{section}"
    );
    assert!(
        section
            .contains("this recording's enforcement held another baseline than the published one"),
        "{section}"
    );
    assert!(section.contains("--recording FILE --measured"), "{section}");
    let html = crate::report::html::render(&r);
    assert!(
        html.contains("<ul class=\"capacity\" id=\"capacity\">"),
        "html"
    );
    // No baseline, no capacity.
    let r = build(
        &burst_then_enforcement(),
        ReportFilters::default(),
        Thresholds::default(),
    )
    .unwrap();
    assert!(r.right_sizing.capacity.is_none());
    assert!(!crate::report::text::render(&r).contains("capacity for Kafka"));
}

/// The section as printed, for docs/report.md and review:
/// `cargo test --lib right_sizing_text -- --nocapture`.
#[test]
fn right_sizing_text() {
    let table = crate::model::instance::SpecTable::built_in();
    let r = build_planned(
        &exact_rates(),
        ReportFilters::default(),
        plan(table, Some("m5.large"), None),
    );
    let text = crate::report::text::render(&r);
    let start = text.find("\nright-sizing").unwrap();
    let end = start + text[start..].find("\nflows").unwrap();
    println!("{}", &text[start..end]);
}

#[test]
fn a_new_recording_starts_the_run_above_the_baseline_again() {
    // Recording A ends 3 s above a 200 Mbit/s baseline (eth0 300 + eth1
    // 50); recording B, an hour later, is 2 s above, then enforced. The
    // burst that led into B's enforcement is B's own 2 s, as its live
    // observer saw it; the section's totals count all 5 s.
    let a: Vec<Snapshot> = (0..3)
        .map(|seq| snap(seq, (300, 10), (50, 0), seq))
        .collect();
    let hour_ms = 3_600_000;
    let b: Vec<Snapshot> = (0..10)
        .map(|seq| {
            let eth0 = if seq < 2 { (300, 10) } else { (100, 90) };
            let mut s = snap(seq, eth0, (50, 0), seq);
            s.unix_ms += hour_ms;
            s.mono_ns += hour_ms * 1_000_000;
            s
        })
        .collect();
    let ha = header();
    let mut hb = header();
    hb.start_unix_ms += hour_ms;
    hb.start_mono_ns += hour_ms * 1_000_000;
    let mut builder = ReportBuilder::new(
        vec!["a.jsonl".into(), "b.jsonl".into()],
        &[ha.clone(), hb.clone()],
        &Thresholds::default(),
        Thresholds::default(),
        ReportFilters::default(),
        10,
    )
    .unwrap();
    builder.set_plan(plan(small_table(), None, Some(200e6)));
    builder.start_file(&ha);
    a.iter().for_each(|s| builder.push(s));
    builder.start_file(&hb);
    b.iter().for_each(|s| builder.push(s));
    let r = builder.finish().unwrap();
    let e = r
        .episodes
        .iter()
        .find(|e| e.episode.verdict.is_enforcement())
        .unwrap_or_else(|| panic!("{:#?}", r.episodes));
    let p = e
        .enforcement
        .as_ref()
        .unwrap()
        .against_plan
        .as_ref()
        .unwrap();
    assert_eq!(p.plan.burst_above_secs, 2.0, "{}", p.line);
    assert_eq!(r.right_sizing.tx.above_secs, 5.0);
}

/// Issue 44: the report says which Kafka role and group used the
/// allowance, per episode (its intervals) and per interface (the span);
/// `--kafka-role`/`--kafka-group` keep flows and lines by their identity.
#[test]
fn kafka_roles_per_episode_and_interface_and_their_filters() {
    use crate::model::kafka::{KafkaFilter, KafkaFlow, KafkaIdentity, KafkaRole};
    let snaps: Vec<Snapshot> = burst_then_enforcement()
        .into_iter()
        .map(|mut s| {
            for f in &mut s.flows {
                f.iface = Some("eth0".into());
                f.kafka = Some(KafkaFlow {
                    who: if f.id == 1 {
                        KafkaIdentity {
                            broker: Some(2),
                            ..KafkaIdentity::role(KafkaRole::ReplicationToFollower)
                        }
                    } else {
                        KafkaIdentity {
                            group: Some("orders".into()),
                            client_id: Some("orders-1".into()),
                            ..KafkaIdentity::role(KafkaRole::Consume)
                        }
                    },
                    ambiguous: Vec::new(),
                });
            }
            s
        })
        .collect();
    let r = build(&snaps, ReportFilters::default(), Thresholds::default()).unwrap();
    let text = super::text::render(&r);
    assert!(
        text.contains(
            "             by Kafka role: tx: replication to followers 66.7% (6.00MB), consume group orders 33.3%\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "    by Kafka role: tx: replication to followers 66.7% (13.0MB), consume group orders 33.3%\n"
        ),
        "{text}"
    );
    // The burst before it keeps its own five intervals, the onset dated
    // back into it given to the enforcement.
    assert!(
        text.contains(
            "             by Kafka role: tx: replication to followers 66.7% (5.00MB), consume group orders 33.3%\n"
        ),
        "{text}"
    );
    let eth1 = &r.interfaces[1];
    assert!(eth1.kafka.is_empty(), "{:?}", eth1.kafka);
    // Only consumers of group orders: their flow, their line.
    let filters = ReportFilters::default()
        .with_kafka(KafkaFilter::new(&["consume".into()], &["orders".into()]).unwrap());
    let r = build(&snaps, filters, Thresholds::default()).unwrap();
    let ids: Vec<u64> = r.flows.iter().map(|f| f.flow_id).collect();
    assert_eq!(ids, vec![2]);
    let text = super::text::render(&r);
    assert!(
        text.contains("    by Kafka role: tx: consume group orders 100% (6.50MB)\n"),
        "{text}"
    );
    // The verdicts are the same: the filter lists, it does not judge.
    assert!(r
        .episodes
        .iter()
        .any(|e| e.episode.verdict == Verdict::HypervisorQueuing));
}
