//! An interface deleted while `watch` runs: what it carried in its last
//! interval, up to its removal, is accounted to it. Real namespaces, a real
//! veth and real TCP traffic; needs root.
//!
//! Two namespaces joined by a veth (`va` in the observed one, `vb` in the
//! other). Right after an interval ends (its JSON line is out), a known
//! number of bytes crosses `va` and is read by the far side, and `va` is
//! deleted, all well within the next interval: /sys has nothing left to read
//! when it ends. The bytes must still be counted on `va`, in a last sample
//! marked `removed`, and `va` must then be gone.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::lab_support::{enter_netns, needs_root, watch_lines};
use crate::support::{binary, run};

/// Bytes sent across `va` before it is deleted.
const BURST: usize = 4 << 20;

struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

#[test]
fn a_deleted_interface_keeps_its_last_interval() {
    let _gate = crate::lab_support::gate::shared();
    needs_root("network namespaces and BPF");
    let tag = std::process::id() % 100_000;
    let (a, b) = (Netns(format!("tsrm{tag}a")), Netns(format!("tsrm{tag}b")));
    for ns in [&a, &b] {
        ip(&["netns", "add", &ns.0]);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
    }
    ip(&[
        "-n", &a.0, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &b.0,
    ]);
    ip(&["-n", &a.0, "addr", "add", "10.251.0.1/30", "dev", "va"]);
    ip(&["-n", &b.0, "addr", "add", "10.251.0.2/30", "dev", "vb"]);
    ip(&["-n", &a.0, "link", "set", "va", "up"]);
    ip(&["-n", &b.0, "link", "set", "vb", "up"]);

    let mut watch = Command::new("ip")
        .args(["netns", "exec", &a.0])
        .arg(binary())
        .args(["watch", "--json", "--interval", "1s", "--duration", "30s"])
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

    // The far side listens and counts what it reads.
    let (b_path, a_path) = (
        PathBuf::from("/run/netns").join(&b.0),
        PathBuf::from("/run/netns").join(&a.0),
    );
    let (ready_tx, ready_rx) = mpsc::channel();
    let far = std::thread::spawn(move || {
        enter_netns(&b_path);
        let l = TcpListener::bind("10.251.0.2:5701").expect("bind");
        ready_tx.send(()).unwrap();
        let (mut s, _) = l.accept().expect("accept");
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0;
        while got < BURST {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        got
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // Connected before the burst's interval: the handshake is not in it.
    let (conn_tx, conn_rx) = mpsc::channel::<TcpStream>();
    std::thread::spawn(move || {
        enter_netns(&a_path);
        let s = TcpStream::connect("10.251.0.2:5701").expect("connect");
        conn_tx.send(s).unwrap();
    });
    let mut conn = conn_rx.recv_timeout(Duration::from_secs(10)).unwrap();

    let mut lines = vec![next(), next()];
    // An interval has just ended: the burst and the deletion fall in the
    // next one.
    let before = lines.len();
    conn.write_all(&vec![0x5au8; BURST]).expect("write");
    let got = far.join().unwrap();
    assert_eq!(got, BURST, "the far side read the whole burst");
    ip(&["-n", &a.0, "link", "del", "va"]);
    loop {
        let l = next();
        let gone = !l.contains("\"name\":\"va\"");
        lines.push(l);
        if gone {
            break;
        }
        assert!(lines.len() < 20, "va never went away");
    }
    // SIGTERM, not SIGINT: run as a background job of a shell (`tools/test &`),
    // the tests inherit SIGINT ignored, and watch keeps an ignored SIGINT
    // ignored (src/shared/signals.rs): it would run its whole --duration.
    // SAFETY: kill(2) on our own child: SIGTERM ends watch cleanly.
    unsafe { libc::kill(watch.id() as i32, libc::SIGTERM) };
    watch.wait().unwrap();
    drop(line_rx);
    reader.join().unwrap();
    drop(conn);

    let rows = watch_lines(lines.join("\n").as_bytes());
    let va: Vec<_> = rows
        .iter()
        .skip(before)
        .filter_map(|(s, _)| s.interfaces.iter().find(|i| i.name == "va"))
        .collect();
    let after: u64 = va.iter().map(|i| i.delta.tx_bytes).sum();
    eprintln!(
        "va after the burst: {:?}",
        va.iter()
            .map(|i| (i.delta.tx_bytes, i.removed))
            .collect::<Vec<_>>()
    );
    assert!(
        after >= BURST as u64,
        "va's tx bytes counted after the burst {after} < the {BURST} read on the far side"
    );
    let last = va.last().expect("va sampled after the burst");
    assert!(last.removed, "va's last sample says it was removed");
    assert!(va[..va.len() - 1].iter().all(|i| !i.removed));
    assert!(
        !rows
            .last()
            .unwrap()
            .0
            .interfaces
            .iter()
            .any(|i| i.name == "va"),
        "gone after its removal"
    );
}
