//! The cluster report (issue 44, item 4) over real recordings of two hosts
//! of the lab: the Kafka broker's namespace and its clients' namespace
//! (two consumers of group `lab-orders` paced to 320 Mbit/s, a producer),
//! each recorded by its own `throttlescope record` at the same time. The
//! broker's outbound allowance is exceeded for the middle 15 s
//! (`tools/lab shape hv_queuing`, 200 Mbit/s). Both namespaces have one
//! host name; the headers' `host_id` (their network namespaces) tells them
//! apart. `report` over the two files must:
//!
//! - lay them as two hosts on one time axis;
//! - give the broker a hypervisor episode whose traffic the consumers of
//!   `lab-orders` carried (>= 90% of tx: the broker's own Kafka lookup);
//! - show what the client host saw then: its flows to the broker, whose
//!   RTT inflation was higher and rate lower than at the other times.
//!
//! The two-host case, recorded for real (the three-broker lab, issue 44
//! item 3, is tests/lab/kafka_cluster.rs). Needs the Kafka jars that
//! tools/setup fetches.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::lab_support::Lab;
use crate::support::binary;
use crate::support::report::{report, report_json};
use crate::support::report_html::{bands, chromium, element};

const RECORD_SECS: u64 = 45;

fn record(lab: &Lab, ns: &str, out: &std::path::Path, extra: &[&str]) -> Child {
    Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(binary())
        .args(["record", "-q", "--interval", "1s", "--duration"])
        .arg(format!("{RECORD_SECS}s"))
        .arg("-o")
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting record in {ns} ({}): {e}", lab.prefix))
}

#[test]
fn a_shaped_broker_and_its_clients_on_one_time_axis() {
    let _gate = crate::lab_support::gate::alone("JVM brokers and their clients fill the machine");
    let lab = Lab::up("rcl");
    lab.tool(&["emulator", "start"]);
    lab.tool(&[
        "traffic",
        "--kafka",
        // A bound, not the timing: the test stops the load (`traffic
        // --stop`) and checks it ran through the recordings (`traffic_ran`).
        "--time",
        "600",
        "--consumers",
        "2",
        "--producers",
        "1",
        "--consume-rate",
        "320",
        "--groups",
        "lab-orders",
    ]);
    let joined = std::time::Instant::now();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let members = String::from_utf8_lossy(&lab.tool(&["kafka-groups"]).stdout).into_owned();
        if members.lines().count() >= 2 {
            break;
        }
        // Said, not fallen through: the checks below need both consumers.
        assert!(
            joined.elapsed() < Duration::from_secs(60),
            "the consumers never joined lab-orders: {members}"
        );
    }
    let dir = crate::support::TempDir::new("lab-report-cluster");
    let broker_file = dir.join("broker.jsonl.zst");
    let client_file = dir.join("client.jsonl.zst");
    let counters = format!("{}={}", lab.broker_if, lab.counters.display());
    let broker = record(
        &lab,
        &lab.broker(),
        &broker_file,
        &["--counters", &counters, "--kafka-period", "2s"],
    );
    let client = record(&lab, &lab.client(), &client_file, &["--kafka", "off"]);
    std::thread::sleep(Duration::from_secs(15));
    // Well under what the consumers pull (~250 Mbit/s): at hv_queuing's
    // default 200 Mbit/s their bursty fetches left many shaped seconds
    // under half queued, judged free flow as such seconds must be, and the
    // broker's episode covered 3 of the 15 shaped seconds (29 November).
    lab.tool(&["shape", "hv_queuing", "--rate", "120mbit"]);
    std::thread::sleep(Duration::from_secs(15));
    lab.tool(&["shape", "none"]);
    for (name, child) in [("broker", broker), ("client", client)] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "record in the {name} namespace: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    lab.traffic_ran("the consumers and producer");
    lab.tool(&["traffic", "--stop"]);

    let files = [broker_file.to_str().unwrap(), client_file.to_str().unwrap()];
    let (code, text, stderr) = report(&files);
    eprintln!("{text}\n{stderr}");
    assert_eq!(code, 0, "{stderr}");
    assert!(text.starts_with("cluster report: 2 hosts"), "{text}");

    let json = report_json(&files);
    let hosts = json["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0]["host"], hosts[1]["host"], "one host name");
    assert_ne!(hosts[0]["host_id"], hosts[1]["host_id"]);
    let broker_ix = hosts
        .iter()
        .position(|h| {
            h["addrs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a.as_str() == Some(lab.broker_ip.as_str()))
        })
        .expect("a host with the broker's address");
    let client_ix = 1 - broker_ix;
    let eps: Vec<&serde_json::Value> = json["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["host"].as_u64() == Some(broker_ix as u64)
                && e["iface"] == lab.broker_if.as_str()
                && e["verdict"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("hypervisor_"))
        })
        .collect();
    assert!(
        !eps.is_empty(),
        "no hypervisor episode of the broker: {text}"
    );
    // The longest one.
    let e = eps
        .iter()
        .max_by_key(|e| e["end_ms"].as_u64().unwrap() - e["start_ms"].as_u64().unwrap())
        .unwrap();
    let secs = (e["end_ms"].as_u64().unwrap() - e["start_ms"].as_u64().unwrap()) / 1000;
    assert!(secs >= 8, "{secs} s: {e}");
    let top = &e["carriers"][0];
    assert_eq!(top["role"], "consume", "{e}");
    assert_eq!(top["group"], "lab-orders", "{e}");
    assert!(top["pct"].as_f64().unwrap() >= 90.0, "{e}");

    let other = e["others"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["host"].as_u64() == Some(client_ix as u64))
        .expect("the client host's view");
    // The client's intervals whose middles fall in the episode: its span
    // within an interval (1 s) either way. Their lengths are measured, so
    // eight of them may sum to 7.9992 s: never held to a whole number.
    let span = (e["end_ms"].as_u64().unwrap() - e["start_ms"].as_u64().unwrap()) as f64 / 1000.0;
    let seen = other["secs"].as_f64().unwrap();
    assert!(
        seen >= span - 1.5,
        "{seen} s of the {span} s episode: {other}"
    );
    let peer = &other["peers"][0];
    let d = &peer["during"];
    let u = &peer["usual"];
    let (di, ui) = (
        d["rtt_inflation"].as_f64().unwrap(),
        u["rtt_inflation"].as_f64().unwrap(),
    );
    let (dd, ud) = (
        d["added_delay_us"].as_f64().unwrap(),
        u["added_delay_us"].as_f64().unwrap(),
    );
    let rate = |f: &serde_json::Value| {
        f["bytes_received"].as_f64().unwrap() * 8.0 / f["secs"].as_f64().unwrap()
    };
    eprintln!(
        "the client's flows to the broker: RTT inflation {di:.2}x during, {ui:.2}x usual; \
         delay +{dd:.0} us during, +{ud:.0} us usual; rx {:.0} Mbit/s during, {:.0} usual",
        rate(d) / 1e6,
        rate(u) / 1e6
    );
    assert!(di > ui * 1.5, "RTT inflation {di} during, {ui} usual");

    // The page, as headless Chromium parses it: two lanes, the broker's
    // hypervisor band in its lane.
    let page = dir.join("cluster.html");
    let mut a = files.to_vec();
    a.extend(["--html", page.to_str().unwrap()]);
    let (code, _, stderr) = report(&a);
    assert_eq!(code, 0, "{stderr}");
    let dom_path = chromium(&dir.0, "dom", &page, &["--dump-dom".to_string()]);
    let dom = std::fs::read_to_string(&dom_path).unwrap();
    let svg = element(&dom, "cluster-timeline");
    assert_eq!(svg.matches("<g class=\"lane\"").count(), 2, "{svg}");
    let verdict = e["verdict"].as_str().unwrap();
    assert!(bands(svg, verdict) >= 1, "{svg}");
    if let Ok(keep) = std::env::var("KEEP_REPORT_HTML") {
        let _ = std::fs::copy(&page, std::path::Path::new(&keep).join("lab-cluster.html"));
    }
    assert!(dd > ud * 1.5, "added delay {dd} us during, {ud} us usual");
    assert!(rate(d) < rate(u) * 0.85, "{peer}");
}
