//! The Prometheus exporter against real clients.
//!
//! - A real Prometheus scrapes `watch --metrics` in a lab's broker namespace
//!   (both on that namespace's own loopback) while the hv_drop scenario
//!   runs; the normalised bw_out rate PromQL computes from the exported
//!   counters must match throttlescope's own over the same intervals.
//! - The server on host loopback: 50 concurrent scrapes, then malformed
//!   requests, each followed by a scrape that must still work.
//! - `watch --metrics` under a 1024 descriptor limit, flooded with idle and
//!   slow-loris connections (reopened as the server closes them) and one
//!   endless request head: scrapes still answer, its threads and memory
//!   stay bounded, and it counts and reports what it refused.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/metrics.rs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::metrics::{exchange, get, OPENMETRICS};
use throttlescope::analysis::{analyze, Thresholds};
use throttlescope::model::snapshot::Snapshot;
use throttlescope::sinks::metrics::MetricsServer;

/// Intervals from the recording fixture, analysed, published to `server`.
fn publish_fixture(server: &MetricsServer) -> usize {
    let path = crate::support::repo_root().join("tests/record_fixtures/v1_0.jsonl");
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

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}
