//! Kafka identity for flows (issue 44), on the lab's real single KRaft
//! broker (`tools/lab traffic --kafka`): its consumers members of a consumer
//! group (`--groups`), a producer beside them, all in the client namespace.
//! `throttlescope watch --json` in the broker namespace finds the broker by
//! itself (`--kafka auto`, the default), says which on stderr, asks it every
//! 2 s, and names each flow:
//!
//! - the broker's consume flows by the group and client id Kafka's own admin
//!   client lists (`tools/lab kafka-groups`), which are those
//!   kafka-consumer-groups.sh --describe --members prints (`tools/lab
//!   kafka-consumer-groups`): at least 99% of the bytes the broker sent on
//!   its listener, in every interval after the first lookup;
//! - its produce flows: at least 95% of the bytes it received there;
//! - its connection to the controller quorum (127.0.0.1:9093): controller;
//! - health counts the lookups (no failure), the brokers, groups and
//!   members; no interval is late;
//! - over those intervals, the bytes per role and group against the
//!   broker's own counters, read over JMX by Kafka's JmxTool every 100 ms
//!   (`tools/lab kafka-jmx`) and taken at the intervals' ends: consume tx
//!   within 5% of BytesOutPerSec (topic lab, whose one reader is the group),
//!   produce rx of BytesInPerSec, each with the protocol overhead stated
//!   (`CONSUME_OVERHEAD`, `PRODUCE_OVERHEAD`); nothing replicated
//!   (ReplicationBytesOutPerSec 0); every flow at the listener within 5% of
//!   what the broker's network threads wrote and read on its sockets.
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
    let _gate = crate::lab_support::gate::alone("a JVM broker and its clients fill the machine");
    let lab = Lab::up("kro");
    lab.tool(&["emulator", "start"]);
    lab.tool(&[
        "traffic",
        "--kafka",
        // A bound, not the timing: the test stops the load (`traffic
        // --stop`) and checks it ran through the watch (`traffic_ran`).
        "--time",
        "600",
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
    // Kafka's own tool, kafka-consumer-groups.sh --describe --all-groups
    // --members (its class, run as the script runs it), prints the same
    // members: the group and client ids the flows below must carry.
    let tool = String::from_utf8_lossy(&lab.tool(&["kafka-consumer-groups"]).stdout).into_owned();
    let mut described = consumer_groups_members(&tool);
    let mut listed = expected.clone();
    described.sort();
    listed.sort();
    eprintln!("kafka-consumer-groups.sh --describe --members:\n{tool}");
    assert_eq!(described, listed, "{tool}");

    // The broker's own counters over the same run (tools/lab kafka-jmx:
    // Kafka's JmxTool on the broker's JMX agent, every 100 ms), read from
    // before the watch's first interval to after its last.
    let dir = crate::support::TempDir::new("kafka-roles");
    let jmx = JmxPoller::start(&lab, &dir.join("jmx.csv"));

    // The same run serves /metrics (scraped meanwhile, in the broker's
    // namespace) and records what the report then reads.
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
    lab.traffic_ran("the consumers and producer");
    let readings = jmx.stop();
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
    let mut first_judged = None;
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
                    // A member the group tool printed, of the flow's host.
                    assert!(
                        described
                            .iter()
                            .any(|(g, c, h)| kafka["group"] == g.as_str()
                                && kafka["client_id"] == c.as_str()
                                && *h == peer.ip().to_string()),
                        "{f}"
                    );
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
        first_judged.get_or_insert(n);
    }
    assert!(
        judged >= 8,
        "only {judged} intervals after the first lookup"
    );
    // The broker's heartbeats to the quorum (every 2 s) move its flow.
    assert!(controller_seen > 0, "no controller flow listed");
    compare_with_the_brokers_counters(&v, first_judged.unwrap() - 1, &readings, &described);
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

/// Kafka's protocol overhead over the record bytes its counters count, on
/// this workload (docs/kafka.md, "Against the broker's own counters"),
/// from the sizes of the messages kafka-clients 4.1.2 encodes: a consume
/// flow carries Fetch v18 responses of 3 partitions of 256 KiB each
/// (`max.partition.fetch.bytes`), 156 bytes of frame and headers a response
/// (4 frame, 5 header, 30 response and topic, 39 a partition) beyond the
/// record bytes BytesOutPerSec counts, 0.020%, and a ListOffsets answer a
/// second to each member; a produce flow carries Produce v13
/// requests of one batch of 100 records (100,997 bytes), 60 bytes of frame,
/// header (client id `producer-1`) and topic id beyond those BytesInPerSec
/// counts, 0.059%.
const CONSUME_OVERHEAD: f64 = 0.0002;
const PRODUCE_OVERHEAD: f64 = 0.0006;

/// (group, client id, host) of each member in what kafka-consumer-groups.sh
/// --describe --members prints: a header (GROUP CONSUMER-ID HOST CLIENT-ID
/// #PARTITIONS) and its members' lines, group after group; the host as
/// Kafka prints it, `/ADDRESS`, without the slash.
fn consumer_groups_members(out: &str) -> Vec<(String, String, String)> {
    let mut columns: Option<Vec<&str>> = None;
    let mut members = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"GROUP") {
            columns = Some(words);
            continue;
        }
        if words.is_empty() {
            columns = None;
        }
        let Some(c) = &columns else { continue };
        assert_eq!(words.len(), c.len(), "a member's line: {line:?}\n{out}");
        let col = |name: &str| words[c.iter().position(|x| *x == name).unwrap()];
        members.push((
            col("GROUP").to_string(),
            col("CLIENT-ID").to_string(),
            col("HOST").trim_start_matches('/').to_string(),
        ));
    }
    members
}

/// One reading of `tools/lab kafka-jmx`: its time (ms since the epoch)
/// and each `OBJECT:ATTRIBUTE`'s value.
pub(crate) struct Reading {
    pub(crate) ms: f64,
    pub(crate) values: Vec<(String, f64)>,
}

/// Whether `key` (JmxTool's `DOMAIN:K=V,...:ATTRIBUTE`) is `attribute` of
/// an object having every `K=V` of `props`, and a topic only if one of
/// them names it (BrokerTopicMetrics' all-topics object has none).
pub(crate) fn is(key: &str, props: &[&str], attribute: &str) -> bool {
    let Some((object, attr)) = key.rsplit_once(':') else {
        return false;
    };
    let have: Vec<&str> = object
        .split_once(':')
        .map_or("", |(_, p)| p)
        .split(',')
        .collect();
    attr == attribute
        && props.iter().all(|p| have.contains(p))
        && (props.iter().any(|p| p.starts_with("topic="))
            || !have.iter().any(|p| p.starts_with("topic=")))
}

/// JmxTool's CSV readings, every 100 ms, in the broker's namespace, from
/// `start` to `stop`.
pub(crate) struct JmxPoller {
    child: Option<std::process::Child>,
    path: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl JmxPoller {
    fn start(lab: &Lab, path: &std::path::Path) -> JmxPoller {
        JmxPoller::start_with(
            &["--every", "100", "--for", "90", "--prefix", &lab.prefix],
            path,
        )
    }

    /// `tools/lab kafka-jmx ARGS` (e.g. `--broker N` of the cluster).
    pub(crate) fn start_with(args: &[&str], path: &std::path::Path) -> JmxPoller {
        let err = path.with_extension("stderr");
        let child = std::process::Command::new(crate::support::repo_root().join("tools/lab"))
            .arg("kafka-jmx")
            .args(args)
            .stdout(std::fs::File::create(path).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("tools/lab kafka-jmx");
        let mut poller = JmxPoller {
            child: Some(child),
            path: path.to_path_buf(),
            err,
        };
        // Its JVM takes a few seconds to start on a loaded 2-core machine.
        for _ in 0..300 {
            if poller.readings().len() >= 2 {
                return poller;
            }
            let exited = poller.child.as_mut().unwrap().try_wait().unwrap();
            assert!(exited.is_none(), "kafka-jmx exited: {}", poller.stderr());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("no JMX readings in 30 s: {}", poller.stderr());
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// The complete readings so far (the last one may be half written).
    fn readings(&self) -> Vec<Reading> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let mut readings: Vec<Reading> = Vec::new();
        for line in text.lines() {
            let Some((key, value)) = line.rsplit_once(",\"") else {
                continue;
            };
            let value: f64 = value.trim_end_matches('"').parse().unwrap_or(f64::NAN);
            if key == "time" {
                readings.push(Reading {
                    ms: value,
                    values: Vec::new(),
                });
            } else if let Some(r) = readings.last_mut() {
                r.values.push((key.to_string(), value));
            }
        }
        readings.pop();
        readings
    }

    /// Stops JmxTool (a TERM, which timeout passes on) once it has a
    /// complete reading taken after this call, and returns every complete
    /// reading: the last ones span what ended before the call.
    pub(crate) fn stop(mut self) -> Vec<Reading> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as f64;
        for _ in 0..100 {
            if self.readings().last().is_some_and(|r| r.ms > now) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let mut child = self.child.take().unwrap();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
        let readings = self.readings();
        assert!(
            readings
                .iter()
                .all(|r| r.values.iter().all(|(_, v)| v.is_finite())),
            "a reading that is no number: {}",
            std::fs::read_to_string(&self.path).unwrap_or_default()
        );
        readings
    }
}

impl Drop for JmxPoller {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The sum of the values whose key `pick` takes, at `ms`, linearly between
/// the readings around it (a counter absent from a reading, not created
/// yet, is 0 there).
pub(crate) fn counter_at(readings: &[Reading], ms: f64, pick: &dyn Fn(&str) -> bool) -> f64 {
    let sum = |r: &Reading| -> f64 {
        r.values
            .iter()
            .filter(|(k, _)| pick(k))
            .map(|(_, v)| v)
            .sum()
    };
    let i = readings
        .windows(2)
        .position(|w| w[0].ms <= ms && ms <= w[1].ms)
        .unwrap_or_else(|| {
            panic!(
                "no JMX readings around {ms} (from {} to {})",
                readings[0].ms,
                readings[readings.len() - 1].ms
            )
        });
    let (a, b) = (&readings[i], &readings[i + 1]);
    let f = if b.ms > a.ms {
        (ms - a.ms) / (b.ms - a.ms)
    } else {
        0.0
    };
    sum(a) + f * (sum(b) - sum(a))
}

/// Issue 44: the bytes per role and group of the intervals after `a` (the
/// last one before the first judged), against the broker's own counters
/// over the same span, interpolated at the intervals' ends.
fn compare_with_the_brokers_counters(
    v: &[Value],
    a: usize,
    readings: &[Reading],
    described: &[(String, String, String)],
) {
    let (t0, t1) = (
        v[a]["unix_ms"].as_f64().unwrap(),
        v[v.len() - 1]["unix_ms"].as_f64().unwrap(),
    );
    let delta = |pick: &dyn Fn(&str) -> bool| {
        counter_at(readings, t1, pick) - counter_at(readings, t0, pick)
    };
    let topic = |name: &str| {
        delta(&|k: &str| is(k, &["type=BrokerTopicMetrics", name, "topic=lab"], "Count"))
    };
    let all_topics =
        |name: &str| delta(&|k: &str| is(k, &["type=BrokerTopicMetrics", name], "Count"));
    let socket = |attr: &str| {
        delta(&|k: &str| is(k, &["type=socket-server-metrics", "listener=CLIENT"], attr))
    };
    let (records_out, records_out_all, replication_out) = (
        topic("name=BytesOutPerSec"),
        all_topics("name=BytesOutPerSec"),
        all_topics("name=ReplicationBytesOutPerSec"),
    );
    let (records_in, records_in_all) = (
        topic("name=BytesInPerSec"),
        all_topics("name=BytesInPerSec"),
    );
    let (socket_out, socket_in) = (socket("outgoing-byte-total"), socket("incoming-byte-total"));
    // Requests answered in the span, by type and version (Fetch and
    // FetchConsumer both count a consumer's fetch).
    let mut requests: Vec<(String, f64)> = Vec::new();
    for (k, _) in &readings[readings.len() - 1].values {
        if !is(k, &["type=RequestMetrics", "name=RequestsPerSec"], "Count") {
            continue;
        }
        let prop = |name: &str| {
            k.split([',', ':'])
                .find_map(|p| p.strip_prefix(name))
                .unwrap_or("")
        };
        let n = delta(&|key: &str| key == k);
        if n >= 0.5 {
            requests.push((format!("{} v{}", prop("request="), prop("version=")), n));
        }
    }
    requests.sort_by(|x, y| y.1.total_cmp(&x.1));

    // throttlescope's sums over the same intervals.
    let (mut consume_tx, mut produce_rx, mut replication) = (0u64, 0u64, 0u64);
    let mut by_group: Vec<(String, u64)> = Vec::new();
    let (mut listener_tx, mut listener_rx, mut listener_acked, mut listener_retrans) =
        (0u64, 0u64, 0u64, 0u64);
    for line in &v[a + 1..] {
        for r in line["analysis"]["kafka"].as_array().into_iter().flatten() {
            let (tx, rx) = (
                r["bytes_sent"].as_u64().unwrap(),
                r["bytes_received"].as_u64().unwrap(),
            );
            match r["role"].as_str().unwrap() {
                "consume" => {
                    consume_tx += tx;
                    let g = r["group"].as_str().unwrap_or("").to_string();
                    match by_group.iter_mut().find(|(n, _)| *n == g) {
                        Some((_, b)) => *b += tx,
                        None => by_group.push((g, tx)),
                    }
                }
                "produce" => produce_rx += rx,
                role if role.starts_with("replication") => replication += tx + rx,
                _ => {}
            }
        }
        for f in line["flows"].as_array().unwrap() {
            let local: std::net::SocketAddr = f["local"].as_str().unwrap().parse().unwrap();
            if local.port() == 9092 {
                listener_tx += f["delta"]["bytes_sent"].as_u64().unwrap();
                listener_acked += f["delta"]["bytes_acked"].as_u64().unwrap();
                listener_retrans += f["delta"]["bytes_retrans"].as_u64().unwrap();
                listener_rx += f["delta"]["bytes_received"].as_u64().unwrap();
            }
        }
    }
    let ratio = |x: u64, y: f64| x as f64 / y;
    eprintln!(
        "the broker's own counters over {:.3} s (intervals {}..={}), JMX readings {} to {}:\n\
         \x20 BytesOutPerSec topic=lab {records_out:.0} (all topics {records_out_all:.0}), \
         ReplicationBytesOutPerSec {replication_out:.0}, BytesInPerSec topic=lab {records_in:.0} \
         (all topics {records_in_all:.0})\n\
         \x20 listener CLIENT's sockets: out {socket_out:.0}, in {socket_in:.0} \
         (over the records: out x{:.5}, in x{:.5})\n\
         \x20 requests answered: {requests:?}\n\
         throttlescope: consume tx {consume_tx} (x{:.5} the records out; by group {by_group:?}), \
         produce rx {produce_rx} (x{:.5} the records in), replication {replication}\n\
         \x20 every flow at the listener: tx {listener_tx} (acked {listener_acked}, retransmitted {listener_retrans}), rx {listener_rx} \
         (x{:.5} and x{:.5} the sockets' out and in)",
        (t1 - t0) / 1000.0,
        a + 1,
        v.len() - 1,
        readings[0].ms,
        readings[readings.len() - 1].ms,
        socket_out / records_out_all,
        socket_in / records_in_all,
        ratio(consume_tx, records_out),
        ratio(produce_rx, records_in),
        ratio(listener_tx, socket_out),
        ratio(listener_rx, socket_in),
    );
    eprintln!(
        "after the stated overhead (consume {:.3}%, produce {:.3}%): consume tx x{:.5}, produce rx x{:.5} \
         Kafka's counts",
        CONSUME_OVERHEAD * 100.0,
        PRODUCE_OVERHEAD * 100.0,
        ratio(consume_tx, records_out * (1.0 + CONSUME_OVERHEAD)),
        ratio(produce_rx, records_in * (1.0 + PRODUCE_OVERHEAD)),
    );
    // One broker: nothing replicated, by its count or ours.
    assert_eq!(replication_out, 0.0);
    assert_eq!(replication, 0);
    assert!(
        records_out > 50e6 && records_in > 5e6,
        "{records_out} {records_in}"
    );
    // Within 5% of Kafka's counts, once the stated overhead is added.
    let within = |ours: u64, theirs: f64| (ours as f64 / theirs - 1.0).abs() <= 0.05;
    assert!(
        within(consume_tx, records_out * (1.0 + CONSUME_OVERHEAD)),
        "consume tx {consume_tx} against BytesOutPerSec {records_out}"
    );
    assert!(
        within(produce_rx, records_in * (1.0 + PRODUCE_OVERHEAD)),
        "produce rx {produce_rx} against BytesInPerSec {records_in}"
    );
    // The one group is the only reader of topic lab: its count is the group's.
    assert_eq!(by_group.len(), 1, "{by_group:?}");
    assert!(described.iter().any(|(g, _, _)| *g == by_group[0].0));
    // And the TCP payload at the listener, every role, is the bytes the
    // broker's network threads wrote and read there.
    assert!(
        within(listener_tx, socket_out),
        "{listener_tx} {socket_out}"
    );
    assert!(within(listener_rx, socket_in), "{listener_rx} {socket_in}");
}

#[test]
fn an_unreachable_or_secured_admin_listener_leaves_observing_alone() {
    let _gate = crate::lab_support::gate::alone("a JVM broker and its clients fill the machine");
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
    // Listening before the watch's first lookup: a fixed 500 ms for the
    // interpreter's start would make that lookup "connection refused" on a
    // loaded machine, a line of its own.
    lab.until_listed(
        &["-Hltn"],
        &["127.0.0.1:9443".to_string()],
        "the closing listener not listening",
    );
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
