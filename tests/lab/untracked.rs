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
//!
//! And the same with no cap, where the kernel refuses the storage (the
//! namespace's option memory too small for it): the failure the count was
//! first made for.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::lab_support::traffic::Bulk;
use crate::lab_support::{close_to, watch_lines, Lab};
use crate::support::binary;

/// Each sending connection's rate: slow enough that the send buffers hold
/// little when the writers stop, so what was written is what was sent.
const RATE: u64 = 1_000_000;

/// `throttlescope watch --json --interval 500ms` in a namespace, its lines
/// read as they come.
struct Watch {
    child: Child,
    lines: mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
}

impl Watch {
    fn start(ns: &str, extra: &[&str]) -> Watch {
        // --duration bounds the run; the tests stop it once they have seen
        // what they wait for.
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(binary())
            .args(["watch", "--json", "--interval", "500ms"])
            .args(["--duration", "40s"])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting watch");
        let (tx, lines) = mpsc::channel::<String>();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Watch {
            child,
            lines,
            reader,
        }
    }

    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(20))
            .expect("a line from watch")
    }

    /// Lines until one whose health has `untracked` sockets counted and
    /// none open (their closes seen), that one included.
    fn until_closed(&self, untracked: u64, lines: &mut Vec<String>) {
        loop {
            let l = self.next();
            let v: serde_json::Value = serde_json::from_str(&l).expect("JSON line");
            lines.push(l);
            let h = &v["health"];
            if h["untracked_flows"] == untracked && h["untracked_open"] == 0 {
                return;
            }
            assert!(lines.len() < 60, "the untracked sockets' closes never seen");
        }
    }

    fn stop(mut self) {
        // SIGTERM, not SIGINT: run as a background job of a shell (`tools/test &`),
        // the tests inherit SIGINT ignored, and watch keeps an ignored SIGINT
        // ignored (src/shared/signals.rs): it would run its whole --duration.
        // SAFETY: kill(2) on our own child: SIGTERM ends watch cleanly.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        self.child.wait().unwrap();
        drop(self.lines);
        self.reader.join().unwrap();
    }
}

#[test]
fn sockets_past_max_flows_are_counted_once_with_their_share() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ut");
    let (broker, client) = (lab.broker(), lab.client());
    let addr = |port: u16| -> SocketAddr { format!("{}:{port}", lab.broker_ip).parse().unwrap() };
    // Opened before the observer: found by seeding, it takes the first slot.
    let idle = Bulk::start(&broker, &client, addr(5401), 1, Duration::ZERO, 0);
    let watch = Watch::start(&broker, &["--max-flows", "2"]);
    // The first line: the probes are attached and the idle socket seeded.
    let mut lines = vec![watch.next()];
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
    watch.until_closed(3, &mut lines);
    watch.stop();
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

/// The kernel itself refuses the sockets' storage: socket-local storage is
/// charged to the socket's option memory, which the namespace's
/// `net.core.optmem_max` bounds (per namespace since 6.9), and 64 bytes
/// hold no flow's storage. Every flow is untracked, as on the host of the
/// report (2 sockets counted 180, 483, 784... failed attempts): each socket
/// must count once, and free flow must say that the flows were not seen.
#[test]
fn storage_refused_by_the_kernel_is_counted_per_socket_and_said() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("us");
    let (broker, client) = (lab.broker(), lab.client());
    lab.exec(&broker, "sysctl", &["-qw", "net.core.optmem_max=64"]);
    let watch = Watch::start(&broker, &[]);
    let mut lines = vec![watch.next()];
    let port = 5411;
    let listen: SocketAddr = format!("{}:{port}", lab.broker_ip).parse().unwrap();
    let bulk = Bulk::start(&broker, &client, listen, 2, Duration::from_secs(2), RATE);
    let sent = bulk.wait_sent();
    bulk.close();
    watch.until_closed(2, &mut lines);
    watch.stop();

    let rows = watch_lines(lines.join("\n").as_bytes());
    let last = &rows.last().unwrap().0.health;
    assert_eq!(last.max_flows, 0, "no cap: the kernel refused");
    assert_eq!(last.untracked_flows, 2, "two sockets, each counted once");
    assert!(
        !rows
            .iter()
            .flat_map(|(s, _)| &s.flows)
            .any(|f| f.local.port() == port),
        "no flow of the refused sockets is listed"
    );
    let untracked_sent: u64 = rows
        .iter()
        .map(|(s, _)| s.health.untracked_bytes_sent)
        .sum();
    assert!(
        close_to(untracked_sent as f64, sent as f64, 0.05, 0.0),
        "untracked bytes sent {untracked_sent} vs {sent} written"
    );
    let unseen: Vec<_> = rows
        .iter()
        .filter_map(|(_, a)| a.interfaces.iter().find(|v| v.iface == lab.broker_if))
        .filter(|v| v.rates.untracked_sent_pct == Some(100.0) && v.rates.tx_bps > 1e6)
        .collect();
    assert!(!unseen.is_empty(), "intervals of traffic judged");
    for v in unseen {
        let line = v
            .evidence
            .iter()
            .find(|e| e.signal == "untracked_flows")
            .expect("the untracked line");
        assert!(
            line.note.starts_with("flows not seen")
                && line.note.contains("socket storage could not be created"),
            "{}",
            line.note
        );
        if v.verdict == throttlescope::analysis::Verdict::FreeFlow {
            assert!(
                v.held.note.contains("flows were not seen"),
                "{}",
                v.held.note
            );
        }
    }
}
