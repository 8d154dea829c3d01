//! The live view drawn into ratatui's test buffer from hand-built
//! intervals judged by the real analysis.

use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::flows::{rows, SortKey};
use super::history::HISTORY_LEN;
use super::keys::UiState;
use super::render::{draw, Model, Screen};
use crate::analysis::{analyze, IntervalAnalysis, Thresholds, Verdict};
use crate::model::snapshot::{
    AllowanceCounters, AllowanceSample, AllowanceStatus, FlowCounters, FlowSample, Health,
    HostQueueSample, InterfaceSample, LinkCounters, Owner, Snapshot,
};

const MTU: u32 = 1500;
/// Payload of a full-size segment (Ethernet + IP + TCP with timestamps).
const PAYLOAD: u64 = 1500 + 14 - 66;

fn flow(id: u64, peer: &str, comm: &str, segs: u64, retrans: u64, inflation: f64) -> FlowSample {
    let min_rtt = 1_000u32;
    FlowSample {
        local: "10.77.2.1:7201".parse().unwrap(),
        peer: peer.parse().unwrap(),
        owner: Some(Owner {
            pid: 4000 + id as u32,
            comm: comm.into(),
            thread: None,
            cgroup_id: 1,
            cgroup: None,
            workload: None,
        }),
        srtt_us: (min_rtt as f64 * inflation) as u32,
        min_rtt_us: min_rtt,
        rttvar_us: 100,
        cwnd: 10 * id as u32,
        ssthresh: 1000,
        packets_out: 10,
        delta: FlowCounters {
            bytes_sent: segs * PAYLOAD,
            bytes_acked: segs * PAYLOAD,
            segs_out: segs,
            data_segs_out: segs,
            retrans_segs: retrans,
            probe_events: segs / 2,
            ..Default::default()
        },
        ..FlowSample::example(id)
    }
}

/// One second of a 200 Mbit/s shaper holding back everything `b0` sends:
/// a heavy flow (java, inflated RTT) and two light ones.
fn shaped(seq: u64) -> Snapshot {
    let flows = vec![
        flow(1, "10.77.1.1:41000", "java", 15_000, 0, 8.0),
        flow(2, "10.77.1.1:41001", "curl", 800, 1, 1.2),
        flow(3, "10.77.1.9:41002", "java", 200, 0, 1.0),
    ];
    let segs: u64 = flows.iter().map(|f| f.delta.segs_out).sum();
    let counters = |bw_out| AllowanceCounters {
        bw_in_allowance_exceeded: Some(0),
        bw_out_allowance_exceeded: Some(bw_out),
        pps_allowance_exceeded: Some(0),
        conntrack_allowance_exceeded: Some(0),
        linklocal_allowance_exceeded: Some(0),
        conntrack_allowance_available: Some(100_000),
        ..Default::default()
    };
    Snapshot {
        folded: Default::default(),
        udp_openers: None,
        icmp_openers: None,
        fragments_created: None,
        seq,
        mono_ns: (seq + 1) * 1_000_000_000,
        unix_ms: 0,
        interval_ns: 1_000_000_000,
        interfaces: vec![InterfaceSample {
            name: "b0".into(),
            driver: Some("veth".into()),
            totals: LinkCounters::default(),
            delta: LinkCounters {
                tx_packets: segs,
                tx_bytes: segs * (PAYLOAD + 66),
                rx_packets: segs / 2,
                rx_bytes: segs / 2 * 66,
                ..Default::default()
            },
            offloads: None,
            mtu: MTU,
            allowance: AllowanceStatus::Read(Box::new(AllowanceSample {
                source: "file:test".into(),
                totals: counters(segs * (seq + 1)),
                delta: counters(segs),
                ..Default::default()
            })),
            host_queue: Some(HostQueueSample {
                backlog_packets: 3,
                backlog_bytes: 4_500,
                ..Default::default()
            }),
            ..Default::default()
        }],
        flows,
        idle_flows: 0,
        events: vec![],
        health: Health::default(),
    }
}

/// A few shaped intervals through the analysis into a model.
fn model(intervals: u64) -> (Model, IntervalAnalysis) {
    let th = Thresholds::default();
    let mut history = Vec::new();
    let mut m = Model::default();
    let mut last = None;
    for seq in 0..intervals {
        let snap = shaped(seq);
        let a = analyze(&history, &snap, &th);
        m.push(&snap, &a, "live");
        history.push(snap);
        last = Some(a);
    }
    (m, last.unwrap())
}

fn render(m: &Model, ui: &UiState, w: u16, h: u16) -> Vec<String> {
    render_screen(m, ui, false, w, h)
}

fn render_screen(m: &Model, ui: &UiState, ended: bool, w: u16, h: u16) -> Vec<String> {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    let screen = Screen {
        model: m,
        ui,
        new_while_paused: 2,
        ended,
    };
    term.draw(|f| draw(f, &screen)).unwrap();
    let buf = term.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect())
        .collect()
}

fn find(lines: &[String], text: &str) -> Option<usize> {
    lines.iter().position(|l| l.contains(text))
}

/// A failed allowance read shows its reason on the interface's allowance
/// line, and the health line counts it apart from interface counters.
#[test]
fn full_screen_shows_a_failed_allowance_read_with_its_reason() {
    let th = Thresholds::default();
    let mut m = Model::default();
    let first = shaped(0);
    let a = analyze(&[], &first, &th);
    m.push(&first, &a, "live");
    let mut snap = shaped(1);
    if let AllowanceStatus::Read(s) = &mut snap.interfaces[0].allowance {
        s.read_failures = 1;
        s.last_error = Some("/tmp/ena.txt: cannot read: No such file or directory".into());
    }
    snap.health.allowance_read_failures = 1;
    let a = analyze(std::slice::from_ref(&first), &snap, &th);
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 140, 40);
    let screen = lines.join("\n");
    let rates = find(&lines, "b0 (veth)").expect(&screen);
    assert!(
        lines[rates + 1].contains(
            "allowance read FAILED (1 since start): /tmp/ena.txt: cannot read: No such file"
        ),
        "{screen}"
    );
    let health = find(&lines, "health:").expect(&screen);
    assert!(
        lines[health].contains("read failures 0 | allowance read failures 1"),
        "{screen}"
    );
}

/// With `--otlp` the health line carries the exporter's delivery (its
/// stderr lines are held back under this view), and drops or failures
/// make it not healthy.
#[test]
fn full_screen_health_shows_the_otlp_delivery() {
    let th = Thresholds::default();
    let mut m = Model::default();
    let mut snap = shaped(0);
    snap.health.otlp = Some(crate::model::snapshot::OtlpHealth {
        sent: 12,
        dropped: 3,
        failures: 5,
        queued: 8,
    });
    let a = analyze(&[], &snap, &th);
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 200, 40);
    let screen = lines.join("\n");
    let health = find(&lines, "health:").expect(&screen);
    assert!(
        lines[health].contains("OTLP sent 12 dropped 3 failed 5 queued 8"),
        "{screen}"
    );
    assert!(!super::render::health_ok(&snap.health));
    snap.health.otlp = Some(crate::model::snapshot::OtlpHealth {
        sent: 12,
        ..Default::default()
    });
    assert!(super::render::health_ok(&snap.health));
}

/// With `--kafka` the health line carries the lookup's counts and its last
/// failure (its stderr lines are held back under this view); a failing
/// lookup makes it not healthy.
#[test]
fn full_screen_health_shows_the_kafka_lookup() {
    let th = Thresholds::default();
    let mut m = Model::default();
    let mut snap = shaped(0);
    snap.health.kafka = Some(crate::model::snapshot::KafkaHealth {
        target: "10.0.0.5:9092".into(),
        lookups_ok: 4,
        lookups_failed: 2,
        last_error: Some("connection refused".into()),
        ..Default::default()
    });
    let a = analyze(&[], &snap, &th);
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 220, 40);
    let screen = lines.join("\n");
    let health = find(&lines, "health:").expect(&screen);
    assert!(
        lines[health].contains("Kafka lookups ok 4 failed 2 (last: connection refused)"),
        "{screen}"
    );
    assert!(!super::render::health_ok(&snap.health));
    snap.health.kafka.as_mut().unwrap().last_error = None;
    assert!(super::render::health_ok(&snap.health));
}

#[test]
fn full_screen_shows_interface_verdict_and_flows() {
    let (m, a) = model(4);
    assert_eq!(a.interfaces[0].verdict, Verdict::HypervisorQueuing);
    let lines = render(&m, &UiState::default(), 120, 40);
    let screen = lines.join("\n");
    assert!(lines[0].contains("throttlescope | live | interval 3 (1.00s)"));
    assert!(lines[0].contains("sort: backoff"));
    // Rates: 16,000 segments of 1514 bytes in 1 s.
    let rates = find(&lines, "b0 (veth)").expect(&screen);
    assert!(lines[rates].contains("tx 194Mb/s 16.0kpps"), "{screen}");
    assert!(lines[rates + 1].contains("bw_out 100%"), "{screen}");
    assert!(lines[rates + 1].contains("backlog 3p 4.50kB"), "{screen}");
    assert!(
        lines[rates + 2].contains("hypervisor_queuing")
            && lines[rates + 2].contains("bw_out_allowance"),
        "verdict with its evidence on one line: {screen}"
    );
    assert!(lines[rates + 3].contains("tx (max 194Mb/s)"), "{screen}");
    assert!(lines[rates + 3].contains("allowance exceeded"), "{screen}");
    // The flow table: header, then the heavy flow first (most backed off).
    let header = find(&lines, "peer").expect(&screen);
    for col in [
        "backoff*",
        "lport",
        "process",
        "tx",
        "srtt/min_rtt",
        "cwnd",
        "retrans",
        "state",
    ] {
        assert!(lines[header].contains(col), "{col}: {}", lines[header]);
    }
    let heavy = &lines[header + 1];
    assert!(heavy.contains("10.77.1.1:41000"), "{screen}");
    assert!(heavy.contains("7201"), "{heavy}");
    assert!(heavy.contains("java/4001"), "{heavy}");
    assert!(heavy.contains("8.00ms/1.00ms 8x"), "{heavy}");
    assert!(heavy.contains("ESTAB"), "{heavy}");
    assert!(find(&lines, "10.77.1.9:41002").is_some());
    assert!(lines[39].contains("health: missed runs 0"), "{}", lines[39]);
}

#[test]
fn tiny_terminal_shows_a_notice() {
    let (m, _) = model(2);
    for (w, h) in [(20, 5), (39, 30), (120, 7), (1, 1)] {
        let lines = render(&m, &UiState::default(), w, h);
        let screen = lines.join("\n");
        if w >= 9 {
            assert!(screen.contains("too small"), "{w}x{h}: {screen}");
        }
    }
    // Zero-sized: nothing drawn, nothing broken.
    render(&m, &UiState::default(), 0, 0);
}

#[test]
fn every_size_draws() {
    let (m, _) = model(3);
    let ui = UiState {
        filter: "java".into(),
        input: Some("jav".into()),
        paused: true,
        ..Default::default()
    };
    for w in [0, 1, 20, 39, 40, 41, 59, 60, 61, 80, 119, 200] {
        for h in [0, 1, 5, 7, 8, 9, 12, 15, 40] {
            let lines = render(&m, &ui, w, h);
            assert_eq!(lines.len(), h as usize);
        }
    }
}

#[test]
fn narrow_screen_keeps_verdict_and_heavy_flow() {
    let (m, _) = model(3);
    let lines = render(&m, &UiState::default(), 60, 15);
    let screen = lines.join("\n");
    assert!(find(&lines, "hypervisor_queuing").is_some(), "{screen}");
    assert!(find(&lines, "b0 (veth)").is_some(), "{screen}");
    let heavy = find(&lines, "10.77.1.1:41000").expect(&screen);
    assert!(lines[heavy].contains("7201"), "{screen}");
}

#[test]
fn crowded_screen_counts_what_does_not_fit() {
    // Three interfaces and six flows on the smallest screen drawn.
    let mut snap = shaped(0);
    for name in ["b1", "b2"] {
        let mut i = snap.interfaces[0].clone();
        i.name = name.into();
        snap.interfaces.push(i);
    }
    for (n, id) in (10..13).enumerate() {
        snap.flows.push(flow(
            id,
            &format!("10.77.1.2:{}", 42000 + n),
            "java",
            100,
            0,
            1.0,
        ));
    }
    let a = analyze(&[], &snap, &Thresholds::default());
    let mut m = Model::default();
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 40, 8);
    let screen = lines.join("\n");
    // One row each for two interfaces: name and verdict.
    assert!(lines[1].starts_with("b0 hypervisor_queuing"), "{screen}");
    assert!(lines[2].starts_with("b1 hypervisor_queuing"), "{screen}");
    assert!(lines[0].contains("interfaces hidden: 1"), "{screen}");
    // Header, two flows, and how many more.
    assert!(lines[4].contains("10.77.1.1:41000"), "{screen}");
    assert!(lines[6].contains("+4 more flows"), "{screen}");
}

#[test]
fn paused_filter_and_help_show_in_title_and_status() {
    let (m, _) = model(2);
    let ui = UiState {
        paused: true,
        filter: "curl".into(),
        ..Default::default()
    };
    let lines = render(&m, &ui, 120, 20);
    assert!(lines[0].contains("PAUSED (2 new)"), "{}", lines[0]);
    assert!(lines[0].contains("filter: curl"), "{}", lines[0]);
    let screen = lines.join("\n");
    assert!(screen.contains("10.77.1.1:41001"));
    assert!(
        !screen.contains("10.77.1.1:41000"),
        "filtered out: {screen}"
    );

    let typing = UiState {
        input: Some("10.77".into()),
        ..Default::default()
    };
    let lines = render(&m, &typing, 120, 20);
    assert!(lines[19].contains("filter: 10.77_"), "{}", lines[19]);

    let help = UiState {
        help: true,
        ..Default::default()
    };
    let lines = render(&m, &help, 120, 20);
    assert!(lines[19].contains("q/Esc quit"), "{}", lines[19]);

    let none = UiState {
        filter: "nginx".into(),
        ..Default::default()
    };
    let screen = render(&m, &none, 120, 20).join("\n");
    assert!(
        screen.contains("no flow matches filter 'nginx'"),
        "{screen}"
    );
}

#[test]
fn before_the_first_interval() {
    let lines = render(&Model::default(), &UiState::default(), 80, 10);
    assert!(lines[0].contains("starting"));
    assert!(lines.join("\n").contains("waiting for the first interval"));
}

fn ports(snap: &Snapshot, a: &IntervalAnalysis, sort: SortKey, filter: &str) -> Vec<u16> {
    rows(snap, a, sort, filter)
        .iter()
        .map(|r| r.attr.peer.port())
        .collect()
}

/// A flow with no rank (here: it only received, outside an inbound
/// ranking) comes after the ranked ones, not first.
#[test]
fn a_flow_with_no_rank_sorts_after_the_ranked() {
    let mut snap = shaped(0);
    let mut rx_only = flow(4, "10.77.1.1:41003", "java", 0, 0, 1.0);
    rx_only.delta.bytes_received = 1 << 20;
    snap.flows.insert(0, rx_only);
    let a = analyze(&[], &snap, &Thresholds::default());
    assert_eq!(a.flows.iter().find(|f| f.flow_id == 4).unwrap().rank, 0);
    assert_eq!(
        ports(&snap, &a, SortKey::Backoff, ""),
        [41000, 41001, 41002, 41003]
    );
}

#[test]
fn sorting_and_filtering() {
    let snap = shaped(0);
    let a = analyze(&[], &snap, &Thresholds::default());
    // Backoff: the analysis' rank (inflated heavy flow, then the one with
    // retransmits).
    assert_eq!(
        ports(&snap, &a, SortKey::Backoff, ""),
        [41000, 41001, 41002]
    );
    assert_eq!(ports(&snap, &a, SortKey::TxRate, ""), [41000, 41001, 41002]);
    assert_eq!(
        ports(&snap, &a, SortKey::Retransmits, ""),
        [41001, 41000, 41002]
    );
    assert_eq!(
        ports(&snap, &a, SortKey::RttInflation, ""),
        [41000, 41001, 41002]
    );
    // Smallest window first.
    assert_eq!(ports(&snap, &a, SortKey::Cwnd, ""), [41000, 41001, 41002]);
    let tx = rows(&snap, &a, SortKey::TxRate, "");
    assert!((tx[0].tx_bps - 15_000.0 * PAYLOAD as f64 * 8.0).abs() < 1.0);

    // Peer address, address:port, process name, local port.
    assert_eq!(ports(&snap, &a, SortKey::Backoff, "10.77.1.9"), [41002]);
    assert_eq!(ports(&snap, &a, SortKey::Backoff, ":41001"), [41001]);
    assert_eq!(ports(&snap, &a, SortKey::Backoff, "JAVA"), [41000, 41002]);
    assert_eq!(ports(&snap, &a, SortKey::Backoff, ":7201").len(), 3);
    assert!(ports(&snap, &a, SortKey::Backoff, "nginx").is_empty());
}

#[test]
fn cwnd_sort_puts_the_smallest_window_first() {
    let mut snap = shaped(0);
    snap.flows[0].cwnd = 500;
    let a = analyze(&[], &snap, &Thresholds::default());
    assert_eq!(ports(&snap, &a, SortKey::Cwnd, ""), [41001, 41002, 41000]);
}

#[test]
fn history_is_bounded_and_follows_interfaces() {
    let (m, _) = model(HISTORY_LEN as u64 + 5);
    let h = m.history.get("b0").unwrap();
    assert_eq!(h.tx_bps.len(), HISTORY_LEN);
    assert_eq!(h.allowance_pct.len(), HISTORY_LEN);
    assert!((h.allowance_pct[0].unwrap() - 100.0).abs() < 0.01);
    let mut m = m;
    let mut snap = shaped(100);
    snap.interfaces[0].name = "b1".into();
    let a = analyze(&[], &snap, &Thresholds::default());
    m.push(&snap, &a, "live");
    assert!(
        m.history.get("b0").is_none(),
        "gone interfaces are forgotten"
    );
    assert_eq!(m.history.get("b1").unwrap().tx_bps.len(), 1);
}

#[test]
fn end_of_a_replay_says_so_first_in_the_title() {
    let (m, _) = model(3);
    let ui = UiState::default();
    let playing = render_screen(&m, &ui, false, 120, 20);
    assert!(!playing[0].contains("end of recording"), "{}", playing[0]);
    let ended = render_screen(&m, &ui, true, 120, 20);
    assert!(
        ended[0].starts_with("throttlescope  end of recording \u{2014} q quits "),
        "{}",
        ended[0]
    );
    // The rest of the title and the screen below are unchanged.
    assert!(ended[0].contains("interval 2"), "{}", ended[0]);
    assert_eq!(ended[1..], playing[1..]);
    // Paused as well: both notices, the end first.
    let paused = UiState {
        paused: true,
        ..Default::default()
    };
    let both = render_screen(&m, &paused, true, 120, 20);
    let end_at = both[0].find("end of recording").unwrap();
    let pause_at = both[0].find("PAUSED").unwrap();
    assert!(end_at < pause_at, "{}", both[0]);
    // A narrow screen keeps the notice (it comes first).
    let narrow = render_screen(&m, &ui, true, 60, 20);
    assert!(narrow[0].contains("q quits"), "{}", narrow[0]);
}

#[test]
fn with_two_interfaces_a_wide_flow_table_says_which_each_flow_uses() {
    let th = Thresholds::default();
    let mut snap = shaped(0);
    let mut second = snap.interfaces[0].clone();
    second.name = "b1".into();
    snap.interfaces.push(second);
    snap.flows[0].iface = Some("b0".into());
    snap.flows[1].iface = Some("b1".into());
    let a = analyze(&[], &snap, &th);
    let mut m = Model::default();
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 140, 40);
    let screen = lines.join("\n");
    let header = find(&lines, "peer").expect(&screen);
    assert!(lines[header].contains("iface"), "{}", lines[header]);
    let row = |peer: &str| lines[find(&lines, peer).expect(&screen)].clone();
    assert!(row("10.77.1.1:41000").contains(" b0 "), "{screen}");
    assert!(row("10.77.1.1:41001").contains(" b1 "), "{screen}");
    assert!(row("10.77.1.9:41002").contains(" - "), "{screen}");

    // A flow of another namespace that passes through neither: `none`.
    snap.flows[2].unrouted = true;
    let a = analyze(&[], &snap, &th);
    let mut m = Model::default();
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 140, 40);
    let screen = lines.join("\n");
    let row = |peer: &str| lines[find(&lines, peer).expect(&screen)].clone();
    assert!(row("10.77.1.9:41002").contains(" none "), "{screen}");

    // One interface: no such column, even on a wide screen.
    let (m, _) = model(1);
    let lines = render(&m, &UiState::default(), 140, 40);
    let header = find(&lines, "peer").unwrap();
    assert!(!lines[header].contains("iface"), "{}", lines[header]);
}

#[test]
fn the_process_column_names_the_sending_thread() {
    let th = Thresholds::default();
    let mut snap = shaped(0);
    snap.flows[0].owner.as_mut().unwrap().comm = "java".into();
    snap.flows[0].owner.as_mut().unwrap().thread = Some("data-plane-kafk".into());
    let a = analyze(&[], &snap, &th);
    let mut m = Model::default();
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 160, 40);
    let screen = lines.join("\n");
    let row = &lines[find(&lines, "10.77.1.1:41000").expect(&screen)];
    let pid = snap.flows[0].owner.as_ref().unwrap().pid;
    // 22 columns: the thread's name is cut, the pid stays whole.
    assert!(
        row.contains(&format!("java[data-plane~]/{pid}")),
        "{screen}"
    );
    // The filter finds the flow by its thread too.
    assert_eq!(ports(&snap, &a, SortKey::Backoff, "data-plane").len(), 1);
}

#[test]
fn workloads_get_a_column_and_the_filter_finds_them() {
    let th = Thresholds::default();
    let mut snap = shaped(0);
    snap.flows[0].owner.as_mut().unwrap().workload = Some(crate::model::workload::Workload {
        pod_uid: Some("0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8".into()),
        pod_namespace: Some("kafka".into()),
        pod_name: Some("broker-0".into()),
        ..Default::default()
    });
    snap.flows[1].netns_name = Some("tenant-b".into());
    let a = analyze(&[], &snap, &th);
    let mut m = Model::default();
    m.push(&snap, &a, "live");
    let lines = render(&m, &UiState::default(), 160, 40);
    let screen = lines.join("\n");
    let header = find(&lines, "peer").expect(&screen);
    assert!(lines[header].contains("workload"), "{}", lines[header]);
    let row = |peer: &str| lines[find(&lines, peer).expect(&screen)].clone();
    assert!(
        row("10.77.1.1:41000").contains("kafka/broker-0"),
        "{screen}"
    );
    assert!(
        row("10.77.1.1:41001").contains("netns tenant-b"),
        "{screen}"
    );

    // `/` finds flows by pod and by namespace name.
    assert_eq!(ports(&snap, &a, SortKey::Backoff, "broker-0").len(), 1);
    assert_eq!(ports(&snap, &a, SortKey::Backoff, "TENANT-B").len(), 1);

    // Nobody known: no column.
    let (m, _) = model(1);
    let lines = render(&m, &UiState::default(), 160, 40);
    let header = find(&lines, "peer").unwrap();
    assert!(!lines[header].contains("workload"), "{}", lines[header]);
}

/// `model(intervals)` with a baseline of 100 Mb/s each way (the shaped
/// intervals send 194 Mb/s: above it from the first) and, on b0, an
/// enforcement episode under way set against that plan.
fn model_with_baseline(intervals: u64) -> Model {
    use crate::analysis::HeadroomTracker;
    use crate::model::instance::{Baseline, BaselineFrom};
    let th = Thresholds::default();
    let mut tracker = HeadroomTracker::new(Some(Baseline {
        instance_type: Some("m5.large".into()),
        from: BaselineFrom::InstanceTypeFlag,
        tx_bps: 100e6,
        rx_bps: 100e6,
        burst_bps: Some(10e9),
        arch: None,
        source: "test".into(),
    }));
    let mut history = Vec::new();
    let mut m = Model::default();
    for seq in 0..intervals {
        let snap = shaped(seq);
        let mut a = analyze(&history, &snap, &th);
        a.headroom = tracker.push(&snap);
        a.episodes = vec![crate::sinks::headroom::tests::planned_episode("b0", true)];
        m.push(&snap, &a, "live");
        history.push(snap);
    }
    m
}

#[test]
fn headroom_row_shares_and_the_plan_show_with_a_baseline() {
    let m = model_with_baseline(4);
    let lines = render(&m, &UiState::default(), 200, 40);
    let screen = lines.join("\n");
    // Right under the title, the whole line on a wide screen.
    assert!(
        lines[1].starts_with("headroom m5.large: out 194% of 100Mb/s, above for 4.00s (")
            && lines[1].contains("; in 4.22% of 100Mb/s"),
        "{screen}"
    );
    let rates = find(&lines, "b0 (veth)").expect(&screen);
    assert_eq!(rates, 2, "{screen}");
    assert!(
        lines[rates]
            .contains("tx 194Mb/s 16.0kpps  rx 4.22Mb/s 8.00kpps  194%/4.22% of baseline  wire"),
        "{screen}"
    );
    assert!(
        lines[rates + 2].contains(
            "| against plan: hypervisor_queuing 60.0s (under way): baseline 1.58Gb/s measured"
        ),
        "{screen}"
    );
}

#[test]
fn at_80_columns_the_headroom_row_keeps_both_directions() {
    let m = model_with_baseline(4);
    let lines = render(&m, &UiState::default(), 80, 24);
    let screen = lines.join("\n");
    assert!(
        lines[1]
            .trim_end()
            .starts_with("headroom m5.large: out 194%, above 4.00s (")
            && lines[1].trim_end().ends_with("; in 4.22%"),
        "{screen}"
    );
    // The interface keeps its four rows, its share of the baseline within
    // the 80 columns, and the flows their table.
    let rates = find(&lines, "b0 (veth)").expect(&screen);
    assert!(lines[rates].contains("194%/4.22% of baseline"), "{screen}");
    assert!(lines[rates + 3].contains("tx "), "{screen}");
    assert!(find(&lines, "10.77.1.1:41000").is_some(), "{screen}");
    assert!(lines[23].contains("health:"), "{screen}");
    for w in [40, 41, 59, 60, 61, 80, 119, 200] {
        for h in [8, 9, 12, 15, 40] {
            let lines = render(&m, &UiState::default(), w, h);
            assert_eq!(lines.len(), h as usize);
            assert!(lines[1].starts_with("headroom"), "{w}x{h}: {lines:?}");
        }
    }
}

#[test]
fn without_a_baseline_there_is_no_headroom_anywhere() {
    let (m, a) = model(4);
    assert!(a.headroom.is_none());
    let lines = render(&m, &UiState::default(), 200, 40);
    let screen = lines.join("\n");
    for absent in ["headroom", "baseline", "against plan"] {
        assert!(!screen.contains(absent), "{absent}: {screen}");
    }
    assert!(lines[1].starts_with("b0 (veth)"), "{screen}");
}

/// `shaped`, but under the line: bw_out counted 24% of the wire packets
/// while the busiest 12 ms ran at 5.5x the mean (free flow in bursts).
fn bursting(seq: u64) -> Snapshot {
    let mut s = shaped(seq);
    let i = &mut s.interfaces[0];
    let segs = i.delta.tx_packets;
    if let AllowanceStatus::Read(a) = &mut i.allowance {
        a.delta.bw_out_allowance_exceeded = Some(segs * 24 / 100);
    }
    let mean = i.delta.tx_bytes as f64 * 8.0;
    i.tx_peak_bps = Some((mean * 5.5) as u64);
    i.peak_window_us = Some(12_000);
    s.flows[0].peak_bps = Some((mean * 5.0) as u64);
    s
}

#[test]
fn counters_rising_in_microbursts_are_said_in_both_views() {
    let th = Thresholds::default();
    let mut m = Model::default();
    let mut history = Vec::new();
    let mut last = None;
    for seq in 0..4 {
        let snap = bursting(seq);
        let a = analyze(&history, &snap, &th);
        m.push(&snap, &a, "live");
        history.push(snap);
        last = Some(a);
    }
    let a = last.unwrap();
    assert_eq!(a.interfaces[0].held.verdict, Verdict::FreeFlow);
    let lines = render(&m, &UiState::default(), 300, 40);
    let screen = lines.join("\n");
    let rates = find(&lines, "b0 (veth)").expect(&screen);
    assert!(
        lines[rates + 1].contains("bw_out 24.0%")
            && lines[rates + 1].contains("linklocal 0%  rose in microbursts (peak 5.5x the mean)"),
        "{screen}"
    );
    assert!(
        lines[rates + 2].contains("free_flow")
            && lines[rates + 2].contains("allowance counters rose in microbursts"),
        "{screen}"
    );
    // The plain view says it on the verdict's line, whole.
    let plain = crate::sinks::table::render(history.last().unwrap(), Some(&a), 10);
    assert!(
        plain.contains(
            "allowance counters rose in microbursts: bw_out_allowance_exceeded at 24.0% of tx \
             wire packets (under the 50.0% line); the busiest 12 ms ran at"
        ) && plain.contains("flows bursting: 10.77.1.1:41000"),
        "{plain}"
    );
}

/// Issue 44: with flows named by the Kafka lookup, a by-role line over the
/// flow table says which role and group carried the interface's bytes;
/// without, none.
#[test]
fn a_kafka_by_role_line_over_the_flow_table() {
    use crate::model::kafka::{KafkaFlow, KafkaIdentity, KafkaRole};
    let th = Thresholds::default();
    let mut history = Vec::new();
    let mut m = Model::default();
    for seq in 0..4 {
        let mut snap = shaped(seq);
        for f in &mut snap.flows {
            f.kafka = Some(KafkaFlow {
                who: if f.peer.port() == 41000 {
                    KafkaIdentity {
                        group: Some("orders".into()),
                        ..KafkaIdentity::role(KafkaRole::Consume)
                    }
                } else {
                    KafkaIdentity {
                        broker: Some(2),
                        ..KafkaIdentity::role(KafkaRole::ReplicationToFollower)
                    }
                },
                ambiguous: Vec::new(),
            });
        }
        let a = analyze(&history, &snap, &th);
        m.push(&snap, &a, "live");
        history.push(snap);
    }
    let lines = render(&m, &UiState::default(), 120, 40);
    let screen = lines.join("\n");
    let at = find(&lines, "kafka on b0: tx: consume group orders ").expect(&screen);
    assert!(
        lines[at].contains("replication to followers"),
        "{}",
        lines[at]
    );
    assert!(
        lines[at + 1].contains("peer"),
        "the table right under: {screen}"
    );
    let (m, _) = model(4);
    assert!(find(&render(&m, &UiState::default(), 120, 40), "kafka on").is_none());
}
