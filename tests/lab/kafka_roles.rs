//! Kafka identity for flows (issue 44), on the lab's real single KRaft
//! broker (`tools/lab traffic --kafka`): its consumers members of a consumer
//! group (`--groups`), a producer beside them, all in the client namespace.
//! `throttlescope watch --json` in the broker namespace finds the broker by
//! itself (`--kafka auto`, the default), says which on stderr, asks it every
//! 2 s, and names each flow:
//!
//! - the broker's consume flows by the group and client id Kafka's own admin
//!   client lists (`tools/lab kafka-groups`, what kafka-consumer-groups.sh
//!   --describe --members prints): at least 99% of the bytes the broker sent
//!   on its listener, in every interval after the first lookup;
//! - its produce flows: at least 95% of the bytes it received there;
//! - its connection to the controller quorum (127.0.0.1:9093): controller;
//! - health counts the lookups (no failure), the brokers, groups and
//!   members; no interval is late.
//!
//! And a broker whose admin listener cannot be asked: refused, or a listener
//! that closes without answering (as a TLS one does to PLAINTEXT): observing
//! goes on, every interval comes on time, health counts each failed lookup,
//! and stderr has one line saying what to do.
//!
//! Needs the Kafka jars that tools/setup fetches.

use crate::lab_support::Lab;
use serde_json::Value;

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

#[test]
fn kafka_flows_are_named_by_group_client_and_role() {
    let lab = Lab::up("kro");
    lab.tool(&["emulator", "start"]);
    lab.tool(&[
        "traffic",
        "--kafka",
        "--time",
        "45",
        "--consumers",
        "2",
        "--producers",
        "1",
        "--consume-rate",
        "200",
        "--groups",
        "lab-orders",
    ]);
    // The members join the group within a few seconds of starting.
    let mut members = String::new();
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_secs(1));
        members = String::from_utf8_lossy(&lab.tool(&["kafka-groups"]).stdout).into_owned();
        if members.lines().count() >= 2 {
            break;
        }
    }
    let expected: Vec<(String, String, String)> = members
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (
                v[0].into(),
                v[1].into(),
                v[2].trim_start_matches('/').into(),
            )
        })
        .collect();
    eprintln!("Kafka's admin client lists: {expected:?}");
    assert_eq!(expected.len(), 2, "two members: {members}");
    assert!(expected
        .iter()
        .all(|(g, c, h)| g == "lab-orders" && c == "lab-orders-client" && *h == lab.client_ip));

    // The same run serves /metrics (scraped meanwhile, in the broker's
    // namespace) and records what the report then reads.
    let dir = crate::support::TempDir::new("kafka-roles");
    let recording = dir.join("kro.jsonl");
    let recording_name = recording.display().to_string();
    let metrics: std::net::SocketAddr = "127.0.0.1:9979".parse().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let (out, scrapes) = std::thread::scope(|s| {
        let watch = s.spawn(|| {
            let out = lab.watch_json_in_broker_output(
                "14s",
                &[
                    "--interval",
                    "1s",
                    "--kafka-period",
                    "2s",
                    "--metrics",
                    &metrics.to_string(),
                    "--record",
                    &recording_name,
                ],
            );
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            out
        });
        let mut scrapes = Vec::new();
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(300));
            let got = crate::lab_support::in_netns(&lab.broker(), move || {
                std::net::TcpStream::connect_timeout(
                    &metrics,
                    std::time::Duration::from_millis(200),
                )
                .ok()?;
                // The server may be gone mid-request at the run's end.
                std::panic::catch_unwind(|| {
                    crate::support::metrics::get(metrics, "/metrics", "text/plain")
                })
                .ok()
            });
            if let Some((200, _, body)) = got {
                scrapes.push(body);
            }
        }
        (watch.join().expect("watch thread"), scrapes)
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("watch's stderr:\n{stderr}");
    let asking: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Kafka: asking"))
        .collect();
    assert_eq!(asking.len(), 1, "one line says which broker: {stderr}");
    assert!(
        asking[0].contains(&format!("{}:9092", lab.broker_ip)) && asking[0].contains("kafka.Kafka"),
        "{}",
        asking[0]
    );
    assert!(!stderr.contains("lookup failed"), "{stderr}");

    let v = lines(&out.stdout);
    assert!(v.len() >= 13, "{} intervals", v.len());
    let mut judged = 0;
    let mut controller_seen = 0;
    for (n, line) in v.iter().enumerate() {
        let h = &line["health"];
        assert_eq!(h["late_intervals"], 0, "interval {n}: late");
        let k = &h["kafka"];
        assert_eq!(k["lookups_failed"], 0, "interval {n}: {k}");
        if k["lookups_ok"].as_u64().unwrap_or(0) == 0 || n == 0 {
            continue;
        }
        assert_eq!(k["brokers"], 1, "{k}");
        assert_eq!(k["members"].as_u64(), Some(expected.len() as u64), "{k}");
        let (mut sent, mut sent_consume, mut received, mut received_produce) =
            (0u64, 0u64, 0u64, 0u64);
        let mut shown = Vec::new();
        for f in line["flows"].as_array().unwrap() {
            let local: std::net::SocketAddr = f["local"].as_str().unwrap().parse().unwrap();
            let peer: std::net::SocketAddr = f["peer"].as_str().unwrap().parse().unwrap();
            let kafka = &f["kafka"];
            if peer.port() == 9093 || local.port() == 9093 {
                assert_eq!(kafka["role"], "controller", "{f}");
                controller_seen += 1;
                continue;
            }
            if local.port() != 9092 || peer.ip().to_string() != lab.client_ip {
                continue;
            }
            let (s, r) = (
                f["delta"]["bytes_sent"].as_u64().unwrap(),
                f["delta"]["bytes_received"].as_u64().unwrap(),
            );
            sent += s;
            received += r;
            shown.push(format!("{peer} {s}/{r} {kafka}"));
            match kafka["role"].as_str() {
                Some("consume") => {
                    assert_eq!(kafka["group"], "lab-orders", "{f}");
                    assert_eq!(kafka["client_id"], "lab-orders-client", "{f}");
                    sent_consume += s;
                }
                Some("produce") => received_produce += r,
                other => panic!("interval {n}: a client flow named {other:?}: {f}"),
            }
        }
        eprintln!(
            "interval {n}: consume {sent_consume}/{sent} B sent, produce {received_produce}/{received} B received | {}",
            shown.join(", ")
        );
        if sent > 1_000_000 {
            assert!(sent_consume * 100 >= sent * 99, "interval {n}: {shown:?}");
        }
        if received > 500_000 {
            assert!(
                received_produce * 100 >= received * 95,
                "interval {n}: {shown:?}"
            );
        }
        // The by-role sums carry the same bytes.
        let by_role: u64 = line["analysis"]["kafka"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter(|r| r["role"] == "consume")
                    .map(|r| r["bytes_sent"].as_u64().unwrap())
                    .sum()
            })
            .unwrap_or(0);
        assert_eq!(by_role, sent_consume, "interval {n}");
        judged += 1;
    }
    assert!(
        judged >= 8,
        "only {judged} intervals after the first lookup"
    );
    // The broker's heartbeats to the quorum (every 2 s) move its flow.
    assert!(controller_seen > 0, "no controller flow listed");
    lab.tool(&["traffic", "--stop"]);

    // The Prometheus endpoint's by-role bytes are the --json sums of the
    // same intervals: the last scrape, up to the interval it names.
    let value = |body: &str, name: &str| -> Option<f64> {
        body.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let body = scrapes
        .iter()
        .rev()
        .find(|b| b.contains("throttlescope_kafka_bytes_total{"))
        .expect("a scrape with Kafka series");
    let published = value(body, "throttlescope_intervals_total").unwrap() as usize;
    let last_s = value(body, "throttlescope_last_interval_timestamp_seconds").unwrap();
    let at = v
        .iter()
        .position(|l| (l["unix_ms"].as_f64().unwrap() / 1000.0 - last_s).abs() < 0.0005)
        .expect("the scraped interval among the JSON lines");
    assert_eq!(at + 1, published, "every interval printed was published");
    assert!(published >= 8, "scraped after {published} intervals");
    let mut checked = 0;
    let mut consume_tx = 0;
    for l in body
        .lines()
        .filter(|l| l.starts_with("throttlescope_kafka_bytes_total{"))
    {
        let label = |k: &str| {
            l.split(&format!("{k}=\""))
                .nth(1)
                .and_then(|r| r.split('"').next())
                .map(String::from)
        };
        let (device, role, group, direction) = (
            label("device").unwrap(),
            label("kafka_role").unwrap(),
            label("kafka_group"),
            label("direction").unwrap(),
        );
        let exported: u64 = l.rsplit(' ').next().unwrap().parse().unwrap();
        let field = if direction == "tx" {
            "bytes_sent"
        } else {
            "bytes_received"
        };
        let from_json: u64 = v[..=at]
            .iter()
            .flat_map(|line| {
                line["analysis"]["kafka"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|r| {
                r["iface"] == device.as_str()
                    && r["role"] == role.as_str()
                    && r["group"].as_str().map(String::from) == group
            })
            .map(|r| r[field].as_u64().unwrap())
            .sum();
        assert_eq!(exported, from_json, "{l}");
        if role == "consume" && direction == "tx" {
            assert_eq!(group.as_deref(), Some("lab-orders"), "{l}");
            consume_tx += exported;
        }
        checked += 1;
    }
    eprintln!(
        "/metrics after {published} intervals: {checked} Kafka byte series equal to --json's sums, \
         consume lab-orders tx {consume_tx} B"
    );
    assert!(consume_tx > 10_000_000, "consume tx {consume_tx} B");
    assert!(body.contains("throttlescope_kafka_groups_folded{"));

    // The report of the recording names the role and group that carried
    // the broker's traffic, per interface.
    let (code, text, stderr) = crate::support::report::report(&[&recording_name]);
    assert_eq!(code, 0, "{stderr}");
    let by_role: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("by Kafka role: "))
        .collect();
    eprintln!("report: {by_role:?}");
    // The share a part of a line gives, e.g. "tx: consume group lab-orders "
    // in "tx: consume group lab-orders 99.9% (355MB)".
    let share = |l: &str, part: &str| -> Option<f64> {
        l.split(part).nth(1)?.split('%').next()?.parse().ok()
    };
    // As the JSON lines say per interval: the consumers at least 99% of
    // the bytes sent on the listener, the producer 95% of those received.
    assert!(
        by_role.iter().any(|l| {
            share(l, "tx: consume group lab-orders ").is_some_and(|p| p >= 99.0)
                && share(l, "rx: produce ").is_some_and(|p| p >= 95.0)
        }),
        "{text}"
    );
    // Only producers: the report lists their flows, and says so per role.
    let (code, text, stderr) =
        crate::support::report::report(&[&recording_name, "--kafka-role", "produce"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.lines()
            .any(|l| l.contains("by Kafka role: ") && l.contains("rx: produce 100% (")),
        "{text}"
    );
    assert!(!text.contains("consume group"), "{text}");
}

#[test]
fn an_unreachable_or_secured_admin_listener_leaves_observing_alone() {
    let lab = Lab::up("krx");
    lab.tool(&["emulator", "start"]);
    // Refused.
    let out = lab.watch_json_in_broker_output(
        "6s",
        &[
            "--interval",
            "1s",
            "--kafka",
            "127.0.0.1:1",
            "--kafka-period",
            "1s",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("Kafka")).collect();
    assert_eq!(said.len(), 1, "one line: {stderr}");
    assert!(
        said[0].contains("connection refused") && said[0].contains("--kafka off"),
        "{}",
        said[0]
    );
    let v = lines(&out.stdout);
    assert!(v.len() >= 5, "{} intervals", v.len());
    let last = &v[v.len() - 1]["health"];
    assert_eq!(last["late_intervals"], 0);
    assert!(
        last["kafka"]["lookups_failed"].as_u64().unwrap() >= 4,
        "{last}"
    );
    assert_eq!(last["kafka"]["lookups_ok"], 0);

    // A listener that takes the connection and closes it unanswered, as a
    // TLS listener does with a PLAINTEXT request.
    let mut server = std::process::Command::new("ip")
        .args(["netns", "exec", &lab.broker(), "python3", "-c"])
        .arg(
            "import socket\n\
             s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             s.bind(('127.0.0.1', 9443)); s.listen(16)\n\
             s.settimeout(30)\n\
             while True:\n  c,_=s.accept(); c.recv(100); c.close()\n",
        )
        .spawn()
        .expect("a closing listener");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = lab.watch_json_in_broker_output(
        "5s",
        &[
            "--interval",
            "1s",
            "--kafka",
            "127.0.0.1:9443",
            "--kafka-period",
            "1s",
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("Kafka")).collect();
    assert_eq!(said.len(), 1, "one line: {stderr}");
    assert!(
        said[0].contains("no Kafka answer to ApiVersions") && said[0].contains("PLAINTEXT only"),
        "{}",
        said[0]
    );
    let v = lines(&out.stdout);
    let last = &v[v.len() - 1]["health"];
    assert_eq!(last["late_intervals"], 0);
    assert!(
        last["kafka"]["lookups_failed"].as_u64().unwrap() >= 3,
        "{last}"
    );
}
