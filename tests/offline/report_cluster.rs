//! `throttlescope report` over the recordings of three brokers (issue 44,
//! item 4): three small recordings written with the product's own
//! `TraceWriter`, all of host name `lab` (brokers in network namespaces of
//! one machine) told apart by their `host_id`. Broker 1 (10.77.1.1) leads
//! and its outbound allowance is exceeded from 10 s to 25 s; brokers 2 and 3
//! follow it, and their fetches from it slow then. The `report` binary
//! must lay the three on one time axis, name the shaped broker's episode
//! and the replication that carried it, and say what the followers saw,
//! as text, `--json` and HTML (opened by headless Chromium). And the
//! input errors: a file that is no recording, two recordings of one host
//! that overlap, hosts whose recordings share no time.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support::record::{header, snapshot};
use crate::support::report::{report, report_json};
use crate::support::report_html::{bands, chromium, element};
use crate::support::TempDir;
use throttlescope::model::kafka::{KafkaFlow, KafkaIdentity, KafkaRole};
use throttlescope::model::snapshot::*;
use throttlescope::record::{RotateOptions, TraceHeader, TraceWriter};

const T0: u64 = 1_763_000_000_000;
const ADDR: [&str; 3] = ["10.77.1.1", "10.77.2.1", "10.77.3.1"];
const SECONDS: u64 = 40;

fn shaped(t: u64) -> bool {
    (10..25).contains(&t)
}

fn host_header(b: usize, start_ms: u64) -> TraceHeader {
    TraceHeader {
        host: "lab".into(),
        host_id: Some(format!("0123456789abcdef/net:40265330{b}")),
        start_unix_ms: start_ms,
        start_mono_ns: 1_000_000_000 * (b as u64 + 1),
        thresholds: serde_json::json!({}),
        ..header()
    }
}

/// eth0 sending `mbit` Mbit/s, `bw_pct` of its packets over the bw_out
/// allowance.
fn eth0(mbit: u64, bw_pct: u64) -> InterfaceSample {
    let bytes = mbit * 1_000_000 / 8;
    let packets = bytes / 1514;
    InterfaceSample {
        name: "eth0".into(),
        driver: Some("ena".into()),
        delta: LinkCounters {
            tx_packets: packets,
            tx_bytes: packets * 1514,
            rx_packets: packets / 4,
            rx_bytes: packets / 4 * 1514,
            ..Default::default()
        },
        mtu: 1500,
        allowance: AllowanceStatus::Read(Box::new(AllowanceSample {
            source: "test".into(),
            delta: AllowanceCounters {
                bw_out_allowance_exceeded: Some(packets * bw_pct / 100),
                ..Default::default()
            },
            ..Default::default()
        })),
        ..Default::default()
    }
}

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
    let template = snapshot(1, 1).flows.remove(0);
    FlowSample {
        id,
        local: local.parse().unwrap(),
        peer: peer.parse().unwrap(),
        ca_state: "open".into(),
        owner: None,
        srtt_us: srtt,
        srtt_mean_us: Some(srtt),
        srtt_max_us: Some(srtt),
        min_rtt_us: 200,
        iface: Some("eth0".into()),
        totals: FlowCounters::default(),
        delta: FlowCounters {
            bytes_sent: sent,
            bytes_acked: sent,
            bytes_received: received,
            segs_out: sent / 1448 + 1,
            data_segs_out: sent / 1448 + 1,
            ..Default::default()
        },
        opened: false,
        kafka: k,
        ..template
    }
}

/// Second `t` of broker `b` (0-based).
fn interval(b: usize, t: u64, t0: u64) -> Snapshot {
    let me = ADDR[b];
    let mut flows = Vec::new();
    let iface = if b == 0 {
        for (n, f) in [(1usize, 2), (2, 3)] {
            flows.push(flow(
                n as u64,
                format!("{me}:9092"),
                format!("{}:4100{n}", ADDR[n]),
                if shaped(t) { 5_000_000 } else { 15_000_000 },
                40_000,
                if shaped(t) { 1_400 } else { 240 },
                kafka(KafkaRole::ReplicationToFollower, Some(f), None),
            ));
        }
        flows.push(flow(
            3,
            format!("{me}:9092"),
            "10.77.9.9:50000".into(),
            if shaped(t) { 2_000_000 } else { 6_000_000 },
            10_000,
            if shaped(t) { 1_400 } else { 240 },
            kafka(KafkaRole::Consume, None, Some("orders")),
        ));
        if shaped(t) {
            eth0(100, 90)
        } else {
            eth0(300, 0)
        }
    } else {
        let other = 3 - b;
        flows.push(flow(
            10,
            format!("{me}:4100{b}"),
            format!("{}:9092", ADDR[0]),
            40_000,
            if shaped(t) { 5_000_000 } else { 15_000_000 },
            if shaped(t) { 1_400 } else { 240 },
            kafka(KafkaRole::ReplicationFromLeader, Some(1), None),
        ));
        flows.push(flow(
            11,
            format!("{me}:42000"),
            format!("{}:9092", ADDR[other]),
            40_000,
            2_000_000,
            220,
            kafka(
                KafkaRole::ReplicationFromLeader,
                Some(other as i32 + 1),
                None,
            ),
        ));
        flows.push(flow(
            12,
            format!("{me}:9092"),
            format!("{}:42000", ADDR[other]),
            2_000_000,
            40_000,
            220,
            kafka(
                KafkaRole::ReplicationToFollower,
                Some(other as i32 + 1),
                None,
            ),
        ));
        eth0(150, 0)
    };
    Snapshot {
        seq: t,
        mono_ns: 1_000_000_000 * (b as u64 + 1) + (t + 1) * 1_000_000_000,
        unix_ms: t0 + (t + 1) * 1000,
        interval_ns: 1_000_000_000,
        interfaces: vec![iface],
        flows,
        ..snapshot(t, 0)
    }
}

fn record(path: &Path, b: usize, t0: u64, seconds: std::ops::Range<u64>) {
    let mut w = TraceWriter::create(path, host_header(b, t0), RotateOptions::default()).unwrap();
    for t in seconds {
        w.write(&interval(b, t, t0)).unwrap();
    }
    w.finish().unwrap();
}

/// The three brokers' recordings; broker 3's clock starts 300 ms later.
fn three(dir: &TempDir) -> Vec<PathBuf> {
    (0..3)
        .map(|b| {
            let p = dir.join(&format!("broker{}.jsonl.zst", b + 1));
            record(&p, b, T0 + if b == 2 { 300 } else { 0 }, 0..SECONDS);
            p
        })
        .collect()
}

fn args(paths: &[PathBuf]) -> Vec<&str> {
    paths.iter().map(|p| p.to_str().unwrap()).collect()
}

#[test]
fn three_brokers_on_one_time_axis_as_text_json_and_html() {
    let dir = TempDir::new("report-cluster");
    let files = three(&dir);

    let (code, text, stderr) = report(&args(&files));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.starts_with("cluster report: 3 hosts on one time axis"),
        "{text}"
    );
    // One host name, three hosts: the brokers named with their address.
    for line in [
        "broker 1 (lab 10.77.1.1)",
        "broker 2 (lab 10.77.2.1)",
        "broker 3 (lab 10.77.3.1)",
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    let episode = text
        .lines()
        .find(|l| l.contains("hypervisor_queuing (confidence"))
        .unwrap_or_else(|| panic!("no shaped episode:\n{text}"));
    assert!(
        episode.contains("broker 1 (lab 10.77.1.1)  eth0"),
        "{episode}"
    );
    assert!(
        text.contains("tx carried by: replication to follower 2 4"),
        "{text}"
    );
    assert!(text.contains("consume orders"), "{text}");
    for b in [2, 3] {
        assert!(
            text.contains(&format!("broker {b} (lab 10.77.{b}.1) saw: eth0 free_flow")),
            "{text}"
        );
    }
    // The followers' fetches from the shaped leader: RTT 7x (usual 1.2x),
    // a third of the bytes.
    let slow: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .starts_with("replication from leader 1, 1 flow")
        })
        .collect();
    assert_eq!(slow.len(), 2, "{text}");
    for l in &slow {
        assert!(
            l.contains("RTT inflation 7x (usual 1.2x), delay +1.20ms (usual +40.0us)"),
            "{l}"
        );
        assert!(l.contains("rx 40.0Mb/s (usual 120Mb/s)"), "{l}");
    }
    // The lanes: Q on broker 1's, none on the others'.
    let lanes: Vec<&str> = text.lines().filter(|l| l.contains(" |")).collect();
    assert_eq!(lanes.len(), 3, "{text}");
    assert!(lanes[0].contains('Q') && !lanes[1].contains('Q') && !lanes[2].contains('Q'));

    // --json: the same, and each host's own report.
    let json = report_json(&args(&files));
    let hosts = json["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 3);
    let brokers: Vec<i64> = hosts
        .iter()
        .map(|h| h["broker"].as_i64().unwrap())
        .collect();
    assert_eq!(brokers, vec![1, 2, 3]);
    assert_eq!(hosts[2]["host_id"], "0123456789abcdef/net:402653302");
    assert_eq!(hosts[0]["report"]["span"]["intervals"], SECONDS);
    let eps = json["episodes"].as_array().unwrap();
    assert_eq!(eps.len(), 1, "{eps:#?}");
    let e = &eps[0];
    assert_eq!(
        (e["host"].as_i64(), e["verdict"].as_str()),
        (Some(0), Some("hypervisor_queuing"))
    );
    assert_eq!(e["carriers"][0]["role"], "replication_to_follower");
    let pct = e["carriers"][0]["pct"].as_f64().unwrap();
    assert!((pct - 41.7).abs() < 0.1, "{pct}");
    let peer = &e["others"][0]["peers"][0];
    assert_eq!(peer["role"], "replication_from_leader");
    assert_eq!(peer["broker"], 1);
    let (during, usual) = (
        peer["during"]["rtt_inflation"].as_f64().unwrap(),
        peer["usual"]["rtt_inflation"].as_f64().unwrap(),
    );
    assert!((during - 7.0).abs() < 1e-6 && (usual - 1.2).abs() < 1e-6);

    // HTML, as Chromium parses it: a lane per host, broker 1's band.
    let page = dir.join("cluster.html");
    let mut a = args(&files);
    a.extend(["--html", page.to_str().unwrap()]);
    let (code, _, stderr) = report(&a);
    assert_eq!(code, 0, "{stderr}");
    let dom_path = chromium(&dir.0, "dom", &page, &["--dump-dom".to_string()]);
    let dom = fs::read_to_string(&dom_path).unwrap();
    let svg = element(&dom, "cluster-timeline");
    assert_eq!(svg.matches("<g class=\"lane\"").count(), 3, "{svg}");
    assert_eq!(bands(svg, "hypervisor_queuing"), 1, "{svg}");
    assert!(bands(svg, "free_flow") >= 4, "{svg}");
    assert!(dom.contains("replication from leader 1, 1 flow: RTT inflation 7x (usual 1.2x)"));
    assert!(dom.contains("replication to follower 2 41.7%"), "{dom}");
    if let Ok(keep) = std::env::var("KEEP_REPORT_HTML") {
        let _ = fs::copy(&page, Path::new(&keep).join("cluster.html"));
        for f in &files {
            let _ = fs::copy(f, Path::new(&keep).join(f.file_name().unwrap()));
        }
    }
}

#[test]
fn bad_cluster_inputs_are_clear_errors() {
    let dir = TempDir::new("report-cluster-bad");
    let files = three(&dir);

    // A file that is no recording among several hosts' files.
    let junk = dir.join("notes.txt");
    fs::write(&junk, "hello\n").unwrap();
    let mut a = args(&files);
    a.push(junk.to_str().unwrap());
    let (code, _, stderr) = report(&a);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("a cluster report needs every file to be a recording")
            && stderr.contains("notes.txt"),
        "{stderr}"
    );

    // Two recordings of broker 2 (one host id) overlapping in time.
    let again = dir.join("broker2-again.jsonl");
    record(&again, 1, T0 + 5_000, 0..10);
    let mut a = args(&files);
    a.push(again.to_str().unwrap());
    let (code, _, stderr) = report(&a);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("overlap in time"), "{stderr}");
    assert!(stderr.contains("broker2-again.jsonl"), "{stderr}");

    // A host recorded an hour later: no common time.
    let later = dir.join("later.jsonl");
    let mut w = TraceWriter::create(
        &later,
        TraceHeader {
            host: "elsewhere".into(),
            ..host_header(2, T0 + 3_600_000)
        },
        RotateOptions::default(),
    )
    .unwrap();
    for t in 0..5 {
        w.write(&interval(2, t, T0 + 3_600_000)).unwrap();
    }
    w.finish().unwrap();
    let (code, _, stderr) = report(&[files[0].to_str().unwrap(), later.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the recordings do not overlap in time")
            && stderr.contains("cannot be laid on one time axis"),
        "{stderr}"
    );

    // One host's rotated set is still the single-host report.
    let (code, text, stderr) = report(&[files[1].to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!text.starts_with("cluster report"), "{text}");
}

/// A host's recording from before format 1.14 (no `host_id`) and its next
/// one (with it) are one host; so are files of hosts named apart.
#[test]
fn an_older_recording_joins_its_hosts_newer_one() {
    let dir = TempDir::new("report-cluster-old");
    let leader = dir.join("b1.jsonl");
    let mut w = TraceWriter::create(
        &leader,
        TraceHeader {
            host: "b1".into(),
            host_id: None,
            ..host_header(0, T0)
        },
        RotateOptions::default(),
    )
    .unwrap();
    for t in 0..SECONDS {
        w.write(&interval(0, t, T0)).unwrap();
    }
    w.finish().unwrap();
    let (old, new) = (dir.join("b2-old.jsonl"), dir.join("b2-new.jsonl"));
    for (path, id, range) in [(&old, None, 0..20), (&new, Some("m/net:1"), 20..SECONDS)] {
        let mut w = TraceWriter::create(
            path,
            TraceHeader {
                host: "b2".into(),
                host_id: id.map(str::to_string),
                start_unix_ms: T0 + range.start * 1000,
                start_mono_ns: 50_000_000_000 + range.start,
                ..host_header(1, T0)
            },
            RotateOptions::default(),
        )
        .unwrap();
        for t in range {
            w.write(&interval(1, t, T0)).unwrap();
        }
        w.finish().unwrap();
    }
    let json = report_json(&args(&[leader, old, new]));
    let hosts = json["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2, "{json:#}");
    assert_eq!(hosts[1]["name"], "broker 2 (b2)");
    assert_eq!(hosts[1]["files"].as_array().unwrap().len(), 2);
    assert_eq!(hosts[1]["report"]["span"]["intervals"], SECONDS);
    // Its slowed fetches from leader 1 are seen across both files.
    let e = &json["episodes"][0];
    assert_eq!(
        e["others"][0]["peers"][0]["label"],
        "replication from leader 1"
    );
}
