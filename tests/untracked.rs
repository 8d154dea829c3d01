//! Untracked flows, with the real BPF programs and real TCP traffic through a
//! lab of namespaces. Run as root.
//!
//! `watch --max-flows 2` leaves sockets past the cap untracked, as a kernel
//! that refuses socket storage would, but on purpose and in a known order:
//! an idle connection open before the observer starts (seeded: the first
//! slot), then connection A (the second), then B1-B3, which find the cap
//! reached. Checked:
//! - each untracked socket is counted once (3, however many events they
//!   had; before, every failed attempt counted), and once closed, not open;
//! - the bytes they sent are counted (against what B's writers wrote), and
//!   the tracked flow's are not among them;
//! - while A and B send, b0's verdict says what share the untracked sockets
//!   carried; once only B sends, free flow says the flows were not seen.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::traffic::Bulk;
use common::{binary, close_to, watch_lines, Lab};

/// Each sending connection's rate: slow enough that the send buffers hold
/// little when the writers stop, so what was written is what was sent.
const RATE: u64 = 1_000_000;

#[test]
fn sockets_past_max_flows_are_counted_once_with_their_share() {
    let lab = Lab::up("ut");
    let (broker, client) = (lab.broker(), lab.client());
    let addr = |port: u16| -> SocketAddr { format!("{}:{port}", lab.broker_ip).parse().unwrap() };
    // Opened before the observer: found by seeding, it takes the first slot.
    let idle = Bulk::start(&broker, &client, addr(5401), 1, Duration::ZERO, 0);
    // --duration bounds the run; the test stops it once it has seen the
    // closes.
    let mut watch = Command::new("ip")
        .args(["netns", "exec", &broker])
        .arg(binary())
        .args([
            "watch",
            "--json",
            "--interval",
            "500ms",
            "--duration",
            "40s",
        ])
        .args(["--max-flows", "2"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting watch");
    let (line_tx, line_rx) = mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line_tx.send(l).is_err() {
                break;
            }
        }
    });
    let next = || {
        line_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from watch")
    };
    // The first line: the probes are attached and the idle socket seeded.
    let mut lines = vec![next()];
    // A connects first and takes the second slot; Bulk::start returns once
    // its connection is accepted, so B's come after.
    let (a_addr, b_addr) = (addr(5402), addr(5403));
    let a = Bulk::start(
        &broker,
        &client,
        a_addr,
        1,
        Duration::from_millis(1500),
        RATE,
    );
    let b = Bulk::start(&broker, &client, b_addr, 3, Duration::from_secs(3), RATE);
    let (a_sent, b_sent) = (a.wait_sent(), b.wait_sent());
    b.close();
    a.close();
    // Until an interval has seen B's closes.
    loop {
        let l = next();
        let v: serde_json::Value = serde_json::from_str(&l).expect("JSON line");
        lines.push(l);
        if v["health"]["untracked_flows"] == 3 && v["health"]["untracked_open"] == 0 {
            break;
        }
        assert!(lines.len() < 60, "B's closes never seen");
    }
    // SAFETY: kill(2) on our own child: SIGINT ends watch cleanly.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    watch.wait().unwrap();
    drop(line_rx);
    reader.join().unwrap();
    idle.close();

    let rows = watch_lines(lines.join("\n").as_bytes());
    let last = &rows.last().unwrap().0.health;
    assert_eq!(last.max_flows, 2);
    assert_eq!(
        last.untracked_flows, 3,
        "B's three sockets, each counted once"
    );
    assert_eq!(last.untracked_open, 0, "all three closed");

    let snaps = rows.iter().map(|(s, _)| s);
    let untracked_sent: u64 = snaps.clone().map(|s| s.health.untracked_bytes_sent).sum();
    let a_flow_sent: u64 = snaps
        .clone()
        .flat_map(|s| &s.flows)
        .filter(|f| f.local.port() == a_addr.port())
        .map(|f| f.delta.bytes_sent)
        .sum();
    let b_listed = snaps
        .flat_map(|s| &s.flows)
        .any(|f| f.local.port() == b_addr.port());
    eprintln!(
        "A wrote {a_sent}, its flow sent {a_flow_sent}; B wrote {b_sent}, untracked sent \
         {untracked_sent}"
    );
    assert!(!b_listed, "no B socket is listed as a flow");
    assert!(
        close_to(untracked_sent as f64, b_sent as f64, 0.05, 0.0),
        "untracked bytes sent {untracked_sent} vs B's {b_sent} written"
    );
    assert!(
        close_to(a_flow_sent as f64, a_sent as f64, 0.05, 0.0),
        "A's flow sent {a_flow_sent} vs {a_sent} written"
    );

    // As watch judged each interval: the share is said while A also sends,
    // and free flow says the flows were not seen once only B sends (its
    // held verdict, what the views show, too).
    let verdicts: Vec<_> = rows
        .iter()
        .filter_map(|(_, a)| a.interfaces.iter().find(|v| v.iface == lab.broker_if))
        .collect();
    for v in &verdicts {
        eprintln!(
            "{:?} sent {:?}% received {:?}%: {}",
            v.verdict,
            v.rates.untracked_sent_pct,
            v.rates.untracked_received_pct,
            v.evidence[0].note
        );
    }
    let shared = verdicts.iter().find(|v| {
        v.rates
            .untracked_sent_pct
            .is_some_and(|p| (50.0..95.0).contains(&p))
    });
    let shared = shared.expect("an interval where A and B both sent");
    let line = shared
        .evidence
        .iter()
        .find(|e| e.signal == "untracked_flows")
        .expect("the untracked line");
    assert!(
        line.note.contains("3 open; --max-flows 2") && line.note.contains("incomplete"),
        "{}",
        line.note
    );
    let unseen = verdicts
        .iter()
        .find(|v| v.rates.untracked_sent_pct == Some(100.0))
        .expect("an interval where only B sent");
    assert!(
        unseen.evidence[0].note.contains("flows were not seen")
            && unseen.held.note.contains("flows were not seen"),
        "{:?}: {}",
        unseen.verdict,
        unseen.evidence[0].note
    );
}
