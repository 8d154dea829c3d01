//! The OTLP exporter against a real OpenTelemetry Collector (built by
//! tools/otelcol/build: the OTLP receiver and the file exporter).
//!
//! - `watch --json --otlp` in a lab's broker namespace under the hv_drop
//!   scenario, the collector on that namespace's own loopback writing what
//!   it receives as JSON: names, resource and point attributes, and values
//!   of each interval the collector got equal the same interval's JSON line
//!   (matched by the points' time, the line's `unix_ms`, and
//!   `throttlescope.interval.seq`); every held verdict change in the JSON
//!   is a start log record.
//! - The collector stopped (SIGSTOP: connections hang) then killed
//!   (connections refused) mid-run: the loop keeps its interval, drops and
//!   failures are counted (on /metrics and stderr), and delivery resumes to
//!   a collector started again on the same port.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::lab_support::{in_netns, Lab};
use crate::support::binary;
use serde_json::Value;

/// Attributes as key -> value (the value's one field: a string, an
/// integer as a string, a number).
type Attributes = BTreeMap<String, Value>;

/// A child process killed and reaped on drop (also when a test fails).
struct Proc(Child);

impl Proc {
    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid, not yet reaped.
        unsafe { libc::kill(self.0.id() as libc::pid_t, sig) };
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // SIGKILL ends a stopped process too (no SIGCONT first: a
        // collector let run for a moment would answer what was waiting).
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory of this test's own, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "throttlescope-otlp-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The collector tools/otelcol/build caches beside the build's binaries.
fn collector_binary() -> PathBuf {
    let target = binary()
        .parent()
        .and_then(Path::parent)
        .expect("the binary sits in TARGET/PROFILE/")
        .to_path_buf();
    let bin = target.join("otelcol/otelcol-throttlescope");
    assert!(
        bin.exists(),
        "{} is missing: run tools/otelcol/build (tools/test does)",
        bin.display()
    );
    bin
}

/// The OTLP/HTTP port on the namespace's own loopback: free, since the
/// namespace is this test's.
const OTLP: &str = "127.0.0.1:4318";

/// Starts the collector in `ns`, receiving OTLP/HTTP on `OTLP` and writing
/// each request as a JSON line to `out`; returns once it accepts.
fn start_collector(ns: &str, dir: &Path, out: &Path) -> Proc {
    let config = dir.join(format!(
        "{}.yaml",
        out.file_stem().unwrap().to_string_lossy()
    ));
    // Its own telemetry off: it would listen on :8888 in the namespace.
    std::fs::write(
        &config,
        format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: {OTLP}\n\
             exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n    logs:\n      level: warn\n\
             \x20 pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n\
             \x20   logs:\n      receivers: [otlp]\n      exporters: [file]\n",
            out.display()
        ),
    )
    .unwrap();
    let log = dir.join(format!(
        "{}.log",
        out.file_stem().unwrap().to_string_lossy()
    ));
    let proc = Proc(
        Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(collector_binary())
            .arg(format!("--config={}", config.display()))
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("spawn the collector"),
    );
    let addr: SocketAddr = OTLP.parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = in_netns(ns, move || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        });
        if up {
            return proc;
        }
        assert!(
            Instant::now() < deadline,
            "the collector did not listen within 60 s:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The collector's file: one JSON object per request it took.
fn collector_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `[{key, value: {stringValue|intValue|doubleValue}}]` as key -> value.
fn attributes(v: &Value) -> BTreeMap<String, Value> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|kv| {
                    let value = kv["value"]
                        .as_object()
                        .and_then(|o| o.values().next().cloned())
                        .unwrap_or(Value::Null);
                    (kv["key"].as_str().unwrap().to_string(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A point's number: asInt is a string in OTLP JSON, asDouble a number
/// (absent when 0 in some encoders).
fn number(p: &Value) -> f64 {
    match (&p["asInt"], &p["asDouble"]) {
        (Value::String(s), _) => s.parse().unwrap(),
        (Value::Number(n), _) => n.as_f64().unwrap(),
        (_, Value::Number(n)) => n.as_f64().unwrap(),
        _ => 0.0,
    }
}

/// One point as the collector wrote it.
#[derive(Debug, Clone)]
struct Point {
    metric: String,
    unit: String,
    kind: &'static str,
    attrs: BTreeMap<String, Value>,
    value: f64,
}

/// Every metric point the collector got, by `timeUnixNano`, and every
/// resource's attributes.
fn points_by_time(lines: &[Value]) -> (BTreeMap<u64, Vec<Point>>, Vec<Attributes>) {
    let mut by_time: BTreeMap<u64, Vec<Point>> = BTreeMap::new();
    let mut resources = Vec::new();
    for line in lines {
        for rm in line["resourceMetrics"].as_array().into_iter().flatten() {
            resources.push(attributes(&rm["resource"]["attributes"]));
            for sm in rm["scopeMetrics"].as_array().into_iter().flatten() {
                assert_eq!(sm["scope"]["name"], "throttlescope");
                for m in sm["metrics"].as_array().into_iter().flatten() {
                    let (kind, data) = if m["sum"].is_object() {
                        ("sum", &m["sum"])
                    } else {
                        ("gauge", &m["gauge"])
                    };
                    if kind == "sum" {
                        assert_eq!(data["isMonotonic"], true, "{m}");
                        assert_eq!(
                            data["aggregationTemporality"], 2,
                            "cumulative expected: {m}"
                        );
                    }
                    for p in data["dataPoints"].as_array().into_iter().flatten() {
                        let t: u64 = p["timeUnixNano"].as_str().unwrap().parse().unwrap();
                        by_time.entry(t).or_default().push(Point {
                            metric: m["name"].as_str().unwrap().to_string(),
                            unit: m["unit"].as_str().unwrap_or("").to_string(),
                            kind,
                            attrs: attributes(&p["attributes"]),
                            value: number(p),
                        });
                    }
                }
            }
        }
    }
    (by_time, resources)
}

/// Every log record the collector got: (resource attributes, record).
fn log_records(lines: &[Value]) -> Vec<(BTreeMap<String, Value>, Value)> {
    let mut out = Vec::new();
    for line in lines {
        for rl in line["resourceLogs"].as_array().into_iter().flatten() {
            let res = attributes(&rl["resource"]["attributes"]);
            for sl in rl["scopeLogs"].as_array().into_iter().flatten() {
                for r in sl["logRecords"].as_array().into_iter().flatten() {
                    out.push((res.clone(), r.clone()));
                }
            }
        }
    }
    out
}

fn find<'a>(points: &'a [Point], metric: &str, want: &[(&str, &str)]) -> Vec<&'a Point> {
    points
        .iter()
        .filter(|p| p.metric == metric)
        .filter(|p| {
            want.iter()
                .all(|(k, v)| p.attrs.get(*k).and_then(Value::as_str) == Some(*v))
        })
        .collect()
}

fn one(points: &[Point], metric: &str, want: &[(&str, &str)]) -> f64 {
    let found = find(points, metric, want);
    assert_eq!(found.len(), 1, "{metric} {want:?}: {found:?}");
    found[0].value
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn on_ec2() -> bool {
    std::fs::read_to_string("/sys/devices/virtual/dmi/id/sys_vendor")
        .is_ok_and(|v| v.trim() == "Amazon EC2")
}

#[test]
fn metrics_and_verdict_changes_reach_a_real_collector() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ot");
    let dir = TempDir::new("values");
    lab.tool(&["shape", "hv_drop"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "30"]);
    let broker = lab.broker();
    let received = dir.0.join("collector.jsonl");
    let collector = start_collector(&broker, &dir.0, &received);

    let json_path = dir.0.join("watch.jsonl");
    let status = Command::new("ip")
        .args(["netns", "exec", &broker])
        .arg(binary())
        .args(["watch", "--json", "--interval", "1s", "--duration", "12s"])
        .args(["--otlp", &format!("http://{OTLP}")])
        .args(["--metrics-flows", "3"])
        // A baseline, so the headroom metrics exist.
        .args(["--baseline", "200M"])
        .args(["--counters", &format!("b0={}", lab.counters.display())])
        .stdout(File::create(&json_path).unwrap())
        .stderr(File::create(dir.0.join("watch.err")).unwrap())
        .status()
        .expect("run watch");
    let stderr = std::fs::read_to_string(dir.0.join("watch.err")).unwrap();
    assert!(status.success(), "watch failed: {stderr}");
    assert!(!stderr.contains("delivery failing"), "{stderr}");
    // The file exporter flushes every 100 ms; give it a few.
    std::thread::sleep(Duration::from_secs(1));
    drop(collector);

    let lines = collector_lines(&received);
    let (by_time, resources) = points_by_time(&lines);
    assert!(!resources.is_empty(), "no metrics reached the collector");
    for r in &resources {
        assert_eq!(r["service.name"], "throttlescope");
        assert!(r["host.name"].as_str().is_some_and(|h| !h.is_empty()));
        // Only an EC2 instance (DMI) says it is one.
        assert_eq!(r.contains_key("cloud.provider"), on_ec2(), "{r:?}");
    }

    let watch: Vec<Value> = std::fs::read_to_string(&json_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut matched = 0;
    let mut flows_seen = 0;
    let mut headroom_seen = 0;
    let mut example = None;
    for line in &watch {
        let t = line["unix_ms"].as_u64().unwrap() * 1_000_000;
        let Some(points) = by_time.get(&t) else {
            continue;
        };
        let seq = line["seq"].as_u64().unwrap();
        assert_eq!(one(points, "throttlescope.interval.seq", &[]), seq as f64);
        let iface = line["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "b0")
            .expect("b0 in the JSON");
        let verdict = line["analysis"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["iface"] == "b0")
            .expect("b0's verdict");
        let b0 = [("network.interface.name", "b0")];
        let tx = [
            ("network.interface.name", "b0"),
            ("network.io.direction", "transmit"),
        ];
        let rx = [
            ("network.interface.name", "b0"),
            ("network.io.direction", "receive"),
        ];
        let totals = &iface["totals"];
        let io_tx = one(points, "system.network.io", &tx);
        assert_eq!(io_tx, totals["tx_bytes"].as_f64().unwrap());
        assert_eq!(
            one(points, "system.network.io", &rx),
            totals["rx_bytes"].as_f64().unwrap()
        );
        assert_eq!(
            one(points, "system.network.packet.count", &tx),
            totals["tx_packets"].as_f64().unwrap()
        );
        assert_eq!(
            one(points, "system.network.packet.dropped", &rx),
            totals["rx_dropped"].as_f64().unwrap()
        );
        let io = find(points, "system.network.io", &tx)[0];
        assert_eq!((io.kind, io.unit.as_str()), ("sum", "By"));
        // The emulated ENA counters, as read.
        let allowance = &iface["allowance"];
        let bw_out = allowance
            .pointer("/read/totals/bw_out_allowance_exceeded")
            .or_else(|| allowance.pointer("/totals/bw_out_allowance_exceeded"))
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("no emulated bw_out counter for b0: {allowance}"));
        assert_eq!(
            one(
                points,
                "aws.ec2.network.allowance.exceeded",
                &[
                    ("network.interface.name", "b0"),
                    ("aws.ec2.network.allowance", "bw_out")
                ]
            ),
            bw_out
        );
        if let Some(pct) = verdict["rates"]["bw_out_pct"].as_f64() {
            let ratio = one(
                points,
                "aws.ec2.network.allowance.exceeded.ratio",
                &[
                    ("network.interface.name", "b0"),
                    ("aws.ec2.network.allowance", "bw_out"),
                ],
            );
            assert!(close(ratio, pct / 100.0), "{ratio} vs {pct}%");
        }
        let held = verdict["held"]["verdict"].as_str().unwrap();
        for p in find(points, "throttlescope.verdict", &b0) {
            let state = p.attrs["throttlescope.verdict"].as_str().unwrap();
            assert_eq!(
                p.value,
                f64::from(u8::from(state == held)),
                "{state} vs held {held}"
            );
        }
        assert_eq!(find(points, "throttlescope.verdict", &b0).len(), 11);
        let conf = one(points, "throttlescope.verdict.confidence", &b0);
        assert!(close(conf, verdict["held"]["confidence"].as_f64().unwrap()));

        // Headroom to --baseline, by direction.
        if let Some(h) = line["analysis"].get("headroom") {
            for (dir, key) in [("transmit", "tx"), ("receive", "rx")] {
                let d = [("network.io.direction", dir)];
                let h = &h[key];
                assert_eq!(
                    one(points, "aws.ec2.network.baseline", &d),
                    h["baseline_bps"].as_f64().unwrap()
                );
                let u = one(points, "aws.ec2.network.baseline.utilization", &d);
                assert!(close(u, h["pct"].as_f64().unwrap() / 100.0), "{u} vs {h}");
                let run = one(points, "aws.ec2.network.above_baseline.duration", &d);
                assert!(
                    close(run, h["above_secs"].as_f64().unwrap()),
                    "{run} vs {h}"
                );
            }
            headroom_seen += 1;
        }

        // The top flows: at most --metrics-flows, the best-ranked one's
        // score as the analysis ranked it.
        let scores = find(points, "throttlescope.flow.backoff_score", &[]);
        assert!(scores.len() <= 3, "{scores:?}");
        if let Some(best) = line["analysis"]["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rank"] == 1)
        {
            flows_seen += 1;
            let peer = best["peer"].as_str().unwrap();
            let (ip, port) = peer.rsplit_once(':').unwrap();
            let local_port = best["local"].as_str().unwrap().rsplit_once(':').unwrap().1;
            let mine = scores
                .iter()
                .find(|p| {
                    p.attrs["network.peer.address"].as_str() == Some(ip.trim_matches(['[', ']']))
                        && p.attrs["network.peer.port"].as_str() == Some(port)
                        && p.attrs["network.local.port"].as_str() == Some(local_port)
                })
                .unwrap_or_else(|| panic!("rank 1 flow {peer} not among {scores:?}"));
            assert!(close(mine.value, best["backoff_score"].as_f64().unwrap()));
            assert!(mine.attrs.contains_key("process.executable.name"));
        }
        // The example printed: the first interval held as something else
        // than idle or free flow (the scenario's point), else the first.
        let calm = held == "idle" || held == "free_flow";
        if example
            .as_ref()
            .is_none_or(|(was_calm, _)| *was_calm && !calm)
        {
            example = Some((calm, format!(
                "seq {seq}: JSON b0 tx_bytes {} held {held} ({:.3}) bw_out_pct {:?} | OTLP system.network.io{{b0,transmit}} {io_tx} throttlescope.verdict{{b0,{held}}} 1 confidence {conf:.3}",
                totals["tx_bytes"], verdict["held"]["confidence"].as_f64().unwrap(), verdict["rates"]["bw_out_pct"].as_f64()
            )));
        }
        matched += 1;
    }
    // 12 intervals pushed at 1 s; a loaded machine may lose the edges.
    assert!(
        matched >= 8,
        "only {matched} of {} intervals found at the collector",
        watch.len()
    );
    assert!(flows_seen >= 3, "traffic ran but few intervals had flows");
    assert!(
        headroom_seen >= 8,
        "{headroom_seen} intervals with headroom"
    );
    if let Some((_, e)) = example {
        eprintln!("side by side: {e}");
    }

    // Verdict changes: every held verdict of b0 that started during the
    // run (another verdict or since_seq than the line before) is a start
    // record with the interval's seq and the verdict line as its body.
    let records = log_records(&lines);
    assert!(!records.is_empty(), "no log records");
    let starts: Vec<&Value> = records
        .iter()
        .map(|(_, r)| r)
        .filter(|r| {
            let a = attributes(&r["attributes"]);
            a["network.interface.name"] == "b0" && a["throttlescope.verdict.event"] == "start"
        })
        .collect();
    let mut prev: Option<(String, u64)> = None;
    let mut changes = 0;
    for line in &watch {
        let v = line["analysis"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["iface"] == "b0")
            .unwrap();
        let cur = (
            v["held"]["verdict"].as_str().unwrap().to_string(),
            v["held"]["since_seq"].as_u64().unwrap(),
        );
        if prev.as_ref() != Some(&cur) {
            changes += 1;
            let seq = line["seq"].as_u64().unwrap().to_string();
            let rec = starts
                .iter()
                .find(|r| {
                    let a = attributes(&r["attributes"]);
                    a["throttlescope.interval.seq"].as_str() == Some(seq.as_str())
                })
                .unwrap_or_else(|| panic!("no start record for seq {seq} ({cur:?}): {starts:?}"));
            let a = attributes(&rec["attributes"]);
            assert_eq!(a["throttlescope.verdict"].as_str(), Some(cur.0.as_str()));
            let body = rec["body"]["stringValue"].as_str().unwrap();
            assert!(body.starts_with(&cur.0), "{body}");
            assert!(a.contains_key("throttlescope.evidence.signal"));
            assert!(a.contains_key("throttlescope.verdict.confidence"));
        }
        prev = Some(cur);
    }
    assert!(changes >= 1);
    for r in &starts {
        eprintln!("start record: {}", r["body"]["stringValue"]);
    }
    eprintln!(
        "{matched} intervals matched, {changes} verdict starts in the JSON, {} log records",
        records.len()
    );
}

/// GET /metrics in `ns`: the Prometheus text.
fn scrape(ns: &str, addr: SocketAddr) -> String {
    in_netns(ns, move || {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    })
}

fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_collector_down_costs_the_loop_nothing_and_delivery_resumes() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("od");
    let dir = TempDir::new("down");
    lab.tool(&["traffic", "--time", "50"]);
    let broker = lab.broker();
    let first_out = dir.0.join("first.jsonl");
    let first = start_collector(&broker, &dir.0, &first_out);

    let metrics: SocketAddr = "127.0.0.1:9979".parse().unwrap();
    let json_path = dir.0.join("watch.jsonl");
    let err_path = dir.0.join("watch.err");
    let _observer = Proc(
        Command::new("ip")
            .args(["netns", "exec", &broker])
            .arg(binary())
            .args(["watch", "--json", "--interval", "1s", "--duration", "45s"])
            .args(["--otlp", &format!("http://{OTLP}")])
            .args(["--metrics", &metrics.to_string()])
            .stdout(File::create(&json_path).unwrap())
            .stderr(File::create(&err_path).unwrap())
            .spawn()
            .expect("spawn watch"),
    );
    let lines_now = || {
        std::fs::read_to_string(&json_path)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let wait_lines = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while lines_now() < n {
            assert!(
                Instant::now() < deadline,
                "watch wrote fewer than {n} lines"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    wait_lines(4);
    assert!(
        !collector_lines(&first_out).is_empty(),
        "nothing delivered before the outage"
    );

    // Hung: the kernel still accepts connections, nobody answers (each
    // request waits for its timeout). Then gone: connections refused.
    first.signal(libc::SIGSTOP);
    let outage_from = lines_now();
    std::thread::sleep(Duration::from_secs(8));
    drop(first);
    std::thread::sleep(Duration::from_secs(8));
    let outage_to = lines_now();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(stderr.contains("delivery failing"), "{stderr}");

    // Back: delivery resumes to a new collector on the same port.
    let second_out = dir.0.join("second.jsonl");
    let _second = start_collector(&broker, &dir.0, &second_out);
    let deadline = Instant::now() + Duration::from_secs(40);
    while collector_lines(&second_out).is_empty() {
        assert!(
            Instant::now() < deadline,
            "delivery did not resume within 40 s:\n{}",
            std::fs::read_to_string(&err_path).unwrap()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // One more interval, so /metrics holds counters from after recovery.
    let n = lines_now();
    wait_lines(n + 2);
    let text = scrape(&broker, metrics);
    let sent = counter(&text, "throttlescope_otlp_batches_sent_total");
    let dropped = counter(&text, "throttlescope_otlp_batches_dropped_total");
    let failures = counter(&text, "throttlescope_otlp_failures_total");
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    eprintln!(
        "outage of 16 s over intervals {outage_from}..{outage_to}: sent {sent}, dropped {dropped}, failures {failures}\n{stderr}"
    );
    assert!(failures >= 2, "{failures} failures");
    // 16 s of intervals with room for 8 (+1 in flight): the rest dropped.
    assert!(dropped >= 3, "{dropped} dropped");
    assert!(sent >= 5, "{sent} sent");
    assert!(stderr.contains("delivery recovered"), "{stderr}");
    // One line when failing starts and one when it ends, not one per
    // failed request.
    let failing = stderr.matches("delivery failing").count();
    let recovered = stderr.matches("delivery recovered").count();
    assert_eq!(
        (failing, recovered),
        (1, 1),
        "lines for {failures} failures: {stderr}"
    );

    // The interval was kept throughout: no interval much longer than asked,
    // and the observer counted none late because of the collector.
    let watch: Vec<Value> = std::fs::read_to_string(&json_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        outage_to - outage_from >= 12,
        "{outage_from}..{outage_to}: the loop slowed down"
    );
    for line in &watch[1..] {
        let ns = line["interval_ns"].as_u64().unwrap();
        assert!(ns < 2_000_000_000, "interval {} took {ns} ns", line["seq"]);
    }
    let longest = watch[1..]
        .iter()
        .filter_map(|l| l["interval_ns"].as_u64())
        .max()
        .unwrap();
    eprintln!(
        "{} intervals, the longest {:.3} s",
        watch.len(),
        longest as f64 / 1e9
    );
    let late = watch.last().unwrap()["health"]["late_intervals"]
        .as_u64()
        .unwrap();
    eprintln!("late intervals: {late}");
    assert!(late <= 2, "{late} late intervals");
}

/// A collector that takes connections and never answers: a listener on
/// the host's loopback whose accepting thread keeps every connection open
/// and reads nothing. Its port, and the thread (left to end with the test).
fn silent_collector() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming() {
            held.push(s);
        }
    });
    port
}

fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// SIGTERM to `record --otlp` whose collector never answers: the exporter
/// waits for its queue only for what is left of the stop's 1 s budget, so
/// the stop is the clean one it is: exit 0 within 1 s, the end record
/// `stopped`, and one line saying how many batches were given up, counted
/// as dropped; no line claiming the stop did not finish (the exporter used
/// to wait 2 s, the watchdog ended the process at 1 s with exit 143 and
/// said a finished recording lacked its end record).
#[test]
fn sigterm_with_a_silent_collector_stops_cleanly_within_the_budget() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its 1 s budget");
    crate::lab_support::needs_root("loading the BPF programs");
    let dir = TempDir::new("silent");
    let port = silent_collector();
    let rec = dir.0.join("rec.jsonl");
    let err_path = dir.0.join("record.err");
    let mut child = Command::new(binary())
        .args(["record", "-o"])
        .arg(&rec)
        .args(["--interval", "250ms"])
        .args(["--otlp", &format!("http://127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stderr(File::create(&err_path).unwrap())
        .spawn()
        .expect("spawn record");
    let started = Instant::now();
    // A few intervals: batches queued behind the first request, which
    // hangs (the request timeout, 5 s, is far off).
    while std::fs::read_to_string(&rec).map_or(0, |t| t.lines().count()) < 5 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no intervals recorded in 30 s"
        );
        assert!(child.try_wait().unwrap().is_none(), "record ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "record still running 5 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let took = sent.elapsed();
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    eprintln!(
        "exit {:?} {took:?} after SIGTERM\n{stderr}",
        exit_code(status)
    );
    assert_eq!(exit_code(status), Some(0), "{stderr}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert!(!stderr.contains("did not finish"), "{stderr}");
    let text = std::fs::read_to_string(&rec).unwrap();
    let end: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&end["type"], &end["reason"]),
        (&"end".into(), &"stopped".into())
    );
    // One line about the exporter's end, with what it gave up: every batch
    // (none was delivered), counted as dropped.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("not delivered at the end of the run"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let given_up: u64 = lines[0]
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_once(": "))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {}", lines[0]));
    assert!(given_up >= 4, "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("in all 0 sent, {given_up} dropped")),
        "{}",
        lines[0]
    );
}

/// A port on the host's loopback that refuses connections: bound for a
/// free number, then closed.
fn refusing_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// The collector down for a whole `watch --json --record --otlp` run: the
/// exporter's failed requests, drops and queue are in every JSON line's
/// health and the recording's, and the report of the recording (text,
/// JSON, HTML) gives them; nothing of it was anywhere but on /metrics
/// before.
#[test]
fn otlp_failures_are_in_the_json_the_recording_and_the_report() {
    let _gate = crate::lab_support::gate::shared();
    crate::lab_support::needs_root("loading the BPF programs");
    let dir = TempDir::new("refused");
    let port = refusing_port();
    let rec = dir.0.join("rec.jsonl");
    let json_path = dir.0.join("watch.jsonl");
    let err_path = dir.0.join("watch.err");
    let status = Command::new(binary())
        .args(["watch", "--json", "--interval", "250ms", "--duration", "4s"])
        .args(["--otlp", &format!("http://127.0.0.1:{port}")])
        .arg("--record")
        .arg(&rec)
        .stdin(Stdio::null())
        .stdout(File::create(&json_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .status()
        .expect("run watch");
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.success(), "{status:?}: {stderr}");
    eprintln!("{stderr}");

    let otlp_of = |line: &Value| -> [u64; 4] {
        let o = &line["health"]["otlp"];
        ["sent", "dropped", "failures", "queued"].map(|k| {
            o[k].as_u64()
                .unwrap_or_else(|| panic!("no health.otlp.{k} in {}", line["health"]))
        })
    };
    let watch: Vec<Value> = std::fs::read_to_string(&json_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(watch.len() >= 12, "{} lines", watch.len());
    let mut prev = [0u64; 4];
    for line in &watch {
        let [sent, dropped, failures, queued] = otlp_of(line);
        assert_eq!(sent, 0, "nothing can be delivered: {line}");
        assert!(
            dropped >= prev[1] && failures >= prev[2],
            "{prev:?} then {line}"
        );
        assert!(queued <= 9, "the queue holds 8 and one in flight: {queued}");
        prev = [sent, dropped, failures, queued];
    }
    let [_, dropped, failures, queued] = prev;
    eprintln!("last JSON line: dropped {dropped}, failures {failures}, queued {queued}");
    // Backoff 1 s, 2 s: at least 3 requests in 4 s; 16 batches in 4 s
    // against 9 places.
    assert!(failures >= 2, "{failures} failures");
    assert!(dropped >= 3, "{dropped} dropped");
    assert!(queued >= 8, "{queued} queued");

    // The recording holds the same health as the JSON, interval by interval.
    let recorded: Vec<Value> = std::fs::read_to_string(&rec)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["type"] == "snapshot")
        .collect();
    assert_eq!(recorded.len(), watch.len());
    for (r, w) in recorded.iter().zip(&watch) {
        assert_eq!(r["seq"], w["seq"]);
        assert_eq!(otlp_of(r), otlp_of(w), "seq {}", r["seq"]);
    }

    // The report: over the whole recording, from 0.
    let report = crate::support::run(Command::new(binary()).arg("report").arg(&rec));
    let text = String::from_utf8_lossy(&report.stdout);
    let want = format!(
        "OTLP export: 0 batches sent, {dropped} dropped, {failures} failed requests, at most "
    );
    assert!(text.contains(&want), "{want:?} in\n{text}");
    let report = crate::support::run(Command::new(binary()).args(["report", "--json"]).arg(&rec));
    let json: Value = serde_json::from_slice(&report.stdout).unwrap();
    let o = &json["health"]["otlp"];
    assert_eq!(
        (
            o["sent"].as_u64(),
            o["dropped"].as_u64(),
            o["failures"].as_u64()
        ),
        (Some(0), Some(dropped), Some(failures)),
        "{o}"
    );
    assert!(o["max_queued"].as_u64().unwrap() >= 8, "{o}");
    let html_path = dir.0.join("report.html");
    crate::support::run(
        Command::new(binary())
            .arg("report")
            .arg(&rec)
            .arg("--html")
            .arg(&html_path),
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains(&format!(
            "<tr><th>OTLP batches dropped</th><td class=\"num\">{dropped}</td></tr>"
        )),
        "no OTLP drops in the HTML report"
    );

    // Said on stderr too: failing once, and what the end gave up.
    assert_eq!(stderr.matches("delivery failing").count(), 1, "{stderr}");
    assert!(
        stderr.contains("not delivered at the end of the run (delivery was failing)"),
        "{stderr}"
    );
}
