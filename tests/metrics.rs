//! The Prometheus exporter against real clients.
//!
//! - A real Prometheus scrapes `watch --metrics` in a lab's broker namespace
//!   (both on that namespace's own loopback) while the hv_drop scenario
//!   runs; the normalised bw_out rate PromQL computes from the exported
//!   counters must match throttlescope's own over the same intervals.
//! - The server on host loopback: 50 concurrent scrapes, then malformed
//!   requests, each followed by a scrape that must still work.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{in_netns, Lab};
use serde_json::Value;
use throttlescope::analysis::{analyze, Thresholds};
use throttlescope::sinks::metrics::MetricsServer;
use throttlescope::snapshot::Snapshot;

/// A child process killed and reaped on drop (also when a test fails).
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
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
            "throttlescope-metrics-{tag}-{}-{}",
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

/// One HTTP exchange over a fresh connection: sends `request` as is, reads
/// until the server closes. Returns (status, headers, body); status 0 when
/// the connection closed without an answer.
fn exchange(addr: SocketAddr, request: &[u8]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before it read everything we send.
    let _ = s.write_all(request);
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw) {
        // A reset (the server closed with our bytes unread) is a closed
        // connection; whatever answer came before it is in `raw`.
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset,
            "reading from {addr}: {e} (got {} bytes)",
            raw.len()
        );
    }
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        assert!(
            raw.is_empty(),
            "partial answer: {:?}",
            String::from_utf8_lossy(&raw)
        );
        return (0, String::new(), Vec::new());
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line: {head}"));
    (status, head, raw[split + 4..].to_vec())
}

fn get(addr: SocketAddr, path: &str, accept: &str) -> (u16, String, String) {
    let rq = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    );
    let (status, head, body) = exchange(addr, rq.as_bytes());
    (status, head, String::from_utf8(body).expect("UTF-8 body"))
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0";

/// Intervals from the recording fixture, analysed, published to `server`.
fn publish_fixture(server: &MetricsServer) -> usize {
    let path = common::repo_root().join("tests/record_fixtures/v1_0.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let snaps: Vec<Snapshot> = text
        .lines()
        .filter(|l| l.contains("\"type\":\"snapshot\""))
        .map(|l| serde_json::from_str(l).expect("fixture snapshot"))
        .collect();
    assert!(!snaps.is_empty());
    let th = Thresholds::default();
    for (i, s) in snaps.iter().enumerate() {
        server.update(s, &analyze(&snaps[..i], s, &th));
    }
    snaps.len()
}

/// A scrape that must work: 200, the whole body, the latest interval.
fn check_scrape(addr: SocketAddr, intervals: usize) {
    let (status, head, body) = get(addr, "/metrics", OPENMETRICS);
    assert_eq!(status, 200, "{head}");
    assert_eq!(
        header(&head, "Content-Length").and_then(|v| v.parse::<usize>().ok()),
        Some(body.len()),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "truncated body: {body}");
    let want = format!("throttlescope_intervals_total {intervals}");
    assert!(body.lines().any(|l| l == want), "no {want:?} in {body}");
}

#[test]
fn concurrent_scrapes_and_malformed_requests() {
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), 20).expect("start");
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0);
    let n = publish_fixture(&server);

    // 50 at once; the bound is liveness, not speed.
    let started = Instant::now();
    let threads: Vec<_> = (0..50)
        .map(|_| std::thread::spawn(move || check_scrape(addr, n)))
        .collect();
    for t in threads {
        t.join().expect("a scrape failed");
    }
    let took = started.elapsed();
    eprintln!("50 concurrent scrapes: {took:?}");
    assert!(took < Duration::from_secs(10), "50 scrapes took {took:?}");

    // The text format for clients that do not ask for OpenMetrics.
    let (status, head, body) = get(addr, "/metrics", "*/*");
    assert_eq!(status, 200);
    assert_eq!(
        header(&head, "Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(!body.contains("# EOF"));
    assert!(body.contains("# TYPE throttlescope_intervals_total counter"));

    let (status, _, body) = get(addr, "/", "*/*");
    assert_eq!(status, 200);
    assert!(body.contains("/metrics"));
    assert_eq!(get(addr, "/nope", "*/*").0, 404);

    // Malformed or unwanted: an error status or a closed connection, and
    // the server keeps serving.
    let huge = format!(
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"\x00\xff\x13\x37 garbage \xfe\r\n\r\n".to_vec()),
        ("garbage without line end", vec![0xAB; 4096]),
        ("bad version", b"GET /metrics HTTP/9.9\r\n\r\n".to_vec()),
        ("bad header", b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n".to_vec()),
        ("huge header", huge.into_bytes()),
        (
            "POST",
            b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
                .to_vec(),
        ),
        (
            "DELETE",
            b"DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
        ),
        (
            "made-up method",
            b"BREW /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(),
        ),
    ];
    for (name, rq) in cases {
        let wants_405 = matches!(name, "POST" | "DELETE" | "made-up method");
        let (status, head, _) = if name == "garbage without line end" {
            // No line end: the server waits for more; we give up and close.
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&rq).unwrap();
            drop(s);
            (0, String::new(), Vec::new())
        } else {
            exchange(addr, &rq)
        };
        eprintln!("{name}: status {status}");
        if wants_405 {
            assert_eq!(status, 405, "{name}: {head}");
            assert_eq!(header(&head, "Allow"), Some("GET, HEAD"), "{name}");
        } else {
            assert!(status == 0 || status >= 400, "{name}: answered {head}");
        }
        check_scrape(addr, n);
    }

    // Half a request, then close; and one left hanging while others scrape.
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metr").unwrap();
    }
    check_scrape(addr, n);
    let mut hanging = TcpStream::connect(addr).unwrap();
    hanging.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
    check_scrape(addr, n);
    drop(hanging);

    // Keep-alive: two requests on one connection.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert_eq!(raw.matches("HTTP/1.1 200").count(), 2, "{raw}");

    // A second server on the same address fails, naming it.
    let err = MetricsServer::start(addr, 20)
        .err()
        .expect("address in use");
    let msg = format!("{err:#}");
    assert!(msg.contains(&addr.to_string()), "{msg}");
    drop(server);
    // Stopped: the listener goes away (its accept thread exits just after).
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "{addr} still listening after drop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Percent-encodes a PromQL query for a URL.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET /api/v1/query` of Prometheus at `addr` in namespace `ns`.
fn prom_query(ns: &str, addr: SocketAddr, query: &str, time: f64) -> Value {
    let path = format!("/api/v1/query?query={}&time={time:.3}", urlencode(query));
    let ns = ns.to_string();
    let (status, head, body) = in_netns(&ns, move || get(addr, &path, "application/json"));
    assert_eq!(status, 200, "{query}: {head}\n{body}");
    let v: Value = serde_json::from_str(&body).expect("Prometheus JSON");
    assert_eq!(v["status"], "success", "{query}: {body}");
    v["data"]["result"].clone()
}

/// The raw samples of a range selector: (timestamp, value), oldest first.
fn raw_samples(ns: &str, addr: SocketAddr, selector: &str, time: f64) -> Vec<(f64, f64)> {
    let r = prom_query(ns, addr, selector, time);
    let series = r.as_array().expect("result list");
    assert_eq!(series.len(), 1, "{selector}: one series expected: {r}");
    series[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn prometheus_computes_the_normalised_rate_throttlescope_reports() {
    let lab = Lab::up("pm");
    let dir = TempDir::new("prom");
    lab.tool(&["shape", "hv_drop"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "40"]);
    let broker = lab.broker();
    let counters = format!("/run/throttlescope-lab/{}/ethtool-S-b0.txt", lab.prefix);

    // The broker namespace is this test's own: its loopback ports are free.
    let exporter: SocketAddr = "127.0.0.1:9979".parse().unwrap();
    let prom: SocketAddr = "127.0.0.1:9090".parse().unwrap();
    let json_path = dir.0.join("watch.jsonl");
    let _observer = Proc(
        Command::new("ip")
            .args(["netns", "exec", &broker])
            .arg(common::binary())
            .args(["watch", "--json", "--interval", "1s", "--duration", "45s"])
            .args(["--metrics", &exporter.to_string()])
            .args(["--counters", &format!("b0={counters}")])
            .stdout(File::create(&json_path).unwrap())
            .stderr(File::create(dir.0.join("watch.err")).unwrap())
            .spawn()
            .expect("spawn watch"),
    );
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: throttlescope\n    \
             static_configs:\n      - targets: ['{exporter}']\n"
        ),
    )
    .unwrap();
    let _prometheus = Proc(
        Command::new("ip")
            .args(["netns", "exec", &broker, "prometheus"])
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(File::create(dir.0.join("prometheus.log")).unwrap())
            .spawn()
            .expect("spawn prometheus (Debian package `prometheus`; tools/setup installs it)"),
    );

    // Wait until Prometheus holds 10 s of scrapes of a running observer.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (t, intervals) = loop {
        assert!(
            Instant::now() < deadline,
            "no 10 s of scrapes within 60 s; prometheus log:\n{}\nwatch stderr:\n{}",
            std::fs::read_to_string(dir.0.join("prometheus.log")).unwrap_or_default(),
            std::fs::read_to_string(dir.0.join("watch.err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_secs(1));
        let ready = in_netns(&broker, move || {
            TcpStream::connect_timeout(&prom, Duration::from_secs(1)).is_ok()
        });
        if !ready {
            continue;
        }
        let now = unix_now() - 0.5;
        let r = prom_query(&broker, prom, "throttlescope_intervals_total[10s]", now);
        let Some(series) = r.as_array().and_then(|a| a.first()) else {
            continue;
        };
        let samples = series["values"].as_array().unwrap().len();
        // Past the first intervals (warm-up) and with a full window.
        let last: f64 = series["values"][samples - 1][1]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        if samples >= 9 && last >= 12.0 {
            let t = series["values"][samples - 1][0].as_f64().unwrap();
            break (
                t,
                raw_samples(&broker, prom, "throttlescope_intervals_total[10s]", t),
            );
        }
    };

    // `ignoring(direction)`: the wire packets carry a label the ethtool
    // counter has not; without it the division matches no series.
    let promql = r#"increase(node_ethtool_bw_out_allowance_exceeded{device="b0"}[10s]) / ignoring(direction) increase(throttlescope_wire_packets_total{device="b0",direction="tx"}[10s]) * 100"#;
    let r = prom_query(&broker, prom, promql, t);
    assert_eq!(r.as_array().unwrap().len(), 1, "{promql}: {r}");
    let prom_pct: f64 = r[0]["value"][1].as_str().unwrap().parse().unwrap();
    // The same from the raw samples, no extrapolation.
    let exceeded = raw_samples(
        &broker,
        prom,
        r#"node_ethtool_bw_out_allowance_exceeded{device="b0"}[10s]"#,
        t,
    );
    let wire = raw_samples(
        &broker,
        prom,
        r#"throttlescope_wire_packets_total{device="b0",direction="tx"}[10s]"#,
        t,
    );
    let diff = |v: &[(f64, f64)]| v.last().unwrap().1 - v.first().unwrap().1;
    let raw_pct = diff(&exceeded) / diff(&wire) * 100.0;

    // throttlescope's own rate over the intervals between the window's
    // first and last scrape: after `a` intervals the first scrape had seen
    // seq 0..a, the last seq 0..b.
    let (a, b) = (
        intervals.first().unwrap().1 as u64,
        intervals.last().unwrap().1 as u64,
    );
    assert!(b - a >= 5, "too few intervals in the window: {intervals:?}");
    let text = std::fs::read_to_string(&json_path).unwrap();
    let (mut sum_exceeded, mut sum_wire, mut seen) = (0u64, 0u64, 0u64);
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("watch JSON line");
        let seq = v["seq"].as_u64().unwrap();
        if seq < a || seq >= b {
            continue;
        }
        let b0 = v["analysis"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["iface"] == "b0")
            .expect("b0 judged");
        sum_exceeded += b0["rates"]["bw_out_exceeded"].as_u64().unwrap_or(0);
        sum_wire += b0["rates"]["tx_wire_packets"].as_u64().unwrap();
        seen += 1;
    }
    assert_eq!(seen, b - a, "JSON lines for seq {a}..{b}");
    let ours = sum_exceeded as f64 / sum_wire as f64 * 100.0;
    eprintln!(
        "window seq {a}..{b} ending {t}: PromQL {prom_pct:.3}%, raw samples {raw_pct:.3}%, \
         throttlescope {ours:.3}% ({sum_exceeded} of {sum_wire} wire packets)"
    );
    assert!(
        sum_exceeded > 0 && ours > 0.1,
        "hv_drop: no bw_out enforcement seen ({sum_exceeded} of {sum_wire})"
    );
    for (what, v) in [("PromQL", prom_pct), ("raw samples", raw_pct)] {
        assert!(
            common::close_to(v, ours, 0.10, 0.0),
            "{what} {v:.3}% vs throttlescope {ours:.3}%"
        );
    }

    // What a scraper without OpenMetrics gets passes promtool; the only
    // lint findings allowed are the fixed names that contain "counter".
    let (status, head, body) = in_netns(&broker, move || get(exporter, "/metrics", "*/*"));
    assert_eq!(status, 200, "{head}");
    assert!(body.contains("# TYPE node_ethtool_bw_out_allowance_exceeded untyped"));
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    lint.stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let findings =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    eprintln!("promtool: {:?} {findings}", out.status.code());
    assert!(
        matches!(out.status.code(), Some(0) | Some(3)),
        "promtool could not parse it: {findings}"
    );
    for l in findings.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            l.ends_with("metric name should not include type 'counter'"),
            "promtool: {l}"
        );
    }
}
