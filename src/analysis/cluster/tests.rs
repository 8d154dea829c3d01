//! Three brokers made up so the right answers are known: broker 1
//! (10.0.0.1) leads and is shaped from 10 s to 20 s; brokers 2 and 3
//! follow it (and each other), and their fetches from broker 1 slow while
//! it is shaped: RTT inflation 5x instead of 1.2x, a tenth of the bytes.

use super::*;
use crate::model::kafka::{KafkaFlow, KafkaIdentity, KafkaRole};
use crate::model::snapshot::{FlowCounters, FlowSample, Snapshot};

const T0: u64 = 1_763_000_000_000;
const ADDR: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];

fn kafka(role: KafkaRole, broker: Option<i32>, group: Option<&str>) -> Option<KafkaFlow> {
    Some(KafkaFlow {
        who: KafkaIdentity {
            role,
            broker,
            group: group.map(str::to_string),
            client_id: None,
        },
        ambiguous: Vec::new(),
    })
}

#[allow(clippy::too_many_arguments)]
fn flow(
    id: u64,
    local: String,
    peer: String,
    sent: u64,
    received: u64,
    srtt: u32,
    k: Option<KafkaFlow>,
) -> FlowSample {
    FlowSample {
        local: local.parse().unwrap(),
        peer: peer.parse().unwrap(),
        srtt_us: srtt,
        srtt_mean_us: Some(srtt),
        min_rtt_us: 100,
        iface: Some("eth0".into()),
        delta: FlowCounters {
            bytes_sent: sent,
            bytes_received: received,
            data_segs_out: sent / 1448 + 1,
            retrans_segs: 0,
            ..Default::default()
        },
        kafka: k,
        ..FlowSample::example(id)
    }
}

fn shaped(t: u64) -> bool {
    (10..20).contains(&t)
}

/// Interval `t` (1 s, ending at T0 + (t+1) s) of broker `b` (0-based).
fn snap(b: usize, t: u64) -> Snapshot {
    let me = ADDR[b];
    let id = b as i32 + 1;
    let mut flows = Vec::new();
    if b == 0 {
        // The leader: two followers fetching, one consumer group.
        for (n, f) in [(1usize, 2), (2, 3)] {
            flows.push(flow(
                n as u64,
                format!("{me}:9092"),
                format!("{}:4000{n}", ADDR[n]),
                if shaped(t) { 2_000_000 } else { 20_000_000 },
                50_000,
                if shaped(t) { 500 } else { 120 },
                kafka(KafkaRole::ReplicationToFollower, Some(f), None),
            ));
        }
        flows.push(flow(
            3,
            format!("{me}:9092"),
            "10.0.1.5:50000".into(),
            if shaped(t) { 1_000_000 } else { 5_000_000 },
            10_000,
            if shaped(t) { 500 } else { 120 },
            kafka(KafkaRole::Consume, None, Some("orders")),
        ));
    } else {
        // A follower: fetching from leader 1 (slow while it is shaped)
        // and from the other follower (never slow).
        let other = 3 - b; // 1 -> 2, 2 -> 1
        flows.push(flow(
            10,
            format!("{me}:41000"),
            format!("{}:9092", ADDR[0]),
            60_000,
            if shaped(t) { 2_000_000 } else { 20_000_000 },
            if shaped(t) { 500 } else { 120 },
            kafka(KafkaRole::ReplicationFromLeader, Some(1), None),
        ));
        flows.push(flow(
            11,
            format!("{me}:41001"),
            format!("{}:9092", ADDR[other]),
            60_000,
            3_000_000,
            110,
            kafka(
                KafkaRole::ReplicationFromLeader,
                Some(other as i32 + 1),
                None,
            ),
        ));
        // What the other follower fetches from us.
        flows.push(flow(
            12,
            format!("{me}:9092"),
            format!("{}:41001", ADDR[other]),
            3_000_000,
            60_000,
            110,
            kafka(
                KafkaRole::ReplicationToFollower,
                Some(other as i32 + 1),
                None,
            ),
        ));
    }
    let _ = id;
    Snapshot {
        seq: t,
        mono_ns: (t + 1) * 1_000_000_000,
        unix_ms: T0 + (t + 1) * 1000,
        interval_ns: 1_000_000_000,
        flows,
        ..Snapshot::example(t)
    }
}

fn plans(scans: &[HostScan]) -> Vec<HostPlan> {
    let whole = |iface: &str, v: Verdict| SpanEpisode {
        iface: iface.into(),
        verdict: v,
        start_ms: T0,
        end_ms: T0 + 30_000,
        inbound: false,
    };
    (0..3)
        .map(|b| HostPlan {
            name: format!("broker-{}", b + 1),
            addrs: scans[b].addrs.keys().copied().collect(),
            episodes: if b == 0 {
                vec![
                    SpanEpisode {
                        end_ms: T0 + 10_000,
                        ..whole("eth0", Verdict::FreeFlow)
                    },
                    SpanEpisode {
                        iface: "eth0".into(),
                        verdict: Verdict::HypervisorQueuing,
                        start_ms: T0 + 10_000,
                        end_ms: T0 + 20_000,
                        inbound: false,
                    },
                    SpanEpisode {
                        start_ms: T0 + 20_000,
                        ..whole("eth0", Verdict::FreeFlow)
                    },
                ]
            } else {
                vec![whole("eth0", Verdict::FreeFlow)]
            },
        })
        .collect()
}

fn run() -> (Vec<HostScan>, Vec<EpisodeView>) {
    let mut scans = vec![HostScan::default(); 3];
    for (b, scan) in scans.iter_mut().enumerate() {
        for t in 0..30 {
            scan.push(&snap(b, t));
        }
    }
    let mut tracker = ClusterTracker::new(plans(&scans));
    for b in 0..3 {
        for t in 0..30 {
            tracker.push(b, &snap(b, t));
        }
    }
    (scans, tracker.finish())
}

#[test]
fn hosts_are_placed_by_their_addresses_and_the_others_lookups() {
    let (scans, _) = run();
    let addrs: Vec<Vec<String>> = scans
        .iter()
        .map(|s| s.addrs.keys().map(|a| a.to_string()).collect())
        .collect();
    assert_eq!(
        addrs,
        vec![vec!["10.0.0.1"], vec!["10.0.0.2"], vec!["10.0.0.3"]]
    );
    assert_eq!(broker_ids(&scans), vec![Some(1), Some(2), Some(3)]);
    assert_eq!(scans[0].first_ms, Some(T0));
    assert_eq!(scans[0].last_ms, Some(T0 + 30_000));
}

#[test]
fn the_shaped_leaders_episode_names_replication_and_the_followers_slowing() {
    let (_, views) = run();
    // Only the notable episode: the free flow ones are not listed.
    assert_eq!(views.len(), 1, "{views:#?}");
    let v = &views[0];
    assert_eq!((v.host, v.span.verdict), (0, Verdict::HypervisorQueuing));
    assert_eq!(v.direction, "tx");
    // Replication to followers 2 and 3 carried 2 MB each of 5 MB a second.
    let labels: Vec<(&str, i64)> = v
        .carriers
        .iter()
        .map(|c| (c.label.as_str(), c.pct.round() as i64))
        .collect();
    assert_eq!(
        labels,
        vec![
            ("replication to follower 2", 40),
            ("replication to follower 3", 40),
            ("consume orders", 20)
        ]
    );
    assert_eq!(v.carriers[0].bytes, 10 * 2_000_000);
    // Both followers saw it: their fetches from leader 1 slowed.
    assert_eq!(v.others.len(), 2);
    for (o, name) in v.others.iter().zip(["broker-2", "broker-3"]) {
        assert_eq!(o.name, name);
        assert_eq!(o.secs, 10.0);
        assert_eq!(o.verdicts.len(), 1);
        assert_eq!(o.verdicts[0].verdict, Verdict::FreeFlow);
        assert_eq!(o.verdicts[0].secs, 10.0);
        // Only their flows to broker 1: the follower's own peer is not in.
        assert_eq!(o.peers.len(), 1, "{:#?}", o.peers);
        let p = &o.peers[0];
        assert_eq!(p.label, "replication from leader 1");
        let during = p.during.rtt_inflation.unwrap();
        assert!((during - 5.0).abs() < 1e-9, "{during}");
        let usual = p.usual.as_ref().unwrap();
        assert!((usual.rtt_inflation.unwrap() - 1.2).abs() < 1e-9);
        assert_eq!(p.during.added_delay_us, Some(400.0));
        assert_eq!(usual.added_delay_us, Some(20.0));
        assert_eq!(usual.secs, 20.0);
        assert_eq!(p.during.rx_bps(), Some(16e6));
        assert_eq!(usual.rx_bps(), Some(160e6));
        assert_eq!(p.during.flows, 1);
    }
}

#[test]
fn an_inbound_episode_shares_the_bytes_received() {
    let mut scans = vec![HostScan::default(); 3];
    for (b, scan) in scans.iter_mut().enumerate() {
        for t in 0..30 {
            scan.push(&snap(b, t));
        }
    }
    let mut p = plans(&scans);
    // Broker 2 under bw_in for the whole time: what it received was
    // mostly replication from leader 1.
    p[1].episodes = vec![SpanEpisode {
        iface: "eth0".into(),
        verdict: Verdict::HypervisorQueuing,
        start_ms: T0,
        end_ms: T0 + 30_000,
        inbound: true,
    }];
    let mut tracker = ClusterTracker::new(p);
    for b in 0..3 {
        for t in 0..30 {
            tracker.push(b, &snap(b, t));
        }
    }
    let views = tracker.finish();
    let v = views.iter().find(|v| v.host == 1).unwrap();
    assert_eq!(v.direction, "rx");
    assert_eq!(v.carriers[0].label, "replication from leader 1");
    // Broker 1's flows to broker 2 during it: replication to follower 2,
    // with no time outside broker 2's episode to compare with.
    let o = v.others.iter().find(|o| o.host == 0).unwrap();
    assert_eq!(o.peers[0].label, "replication to follower 2");
    assert_eq!(o.peers[0].usual, None);
}
