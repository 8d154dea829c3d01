//! The first interval counts from the observer's baseline, not from the
//! programs' attach. On a loaded machine the programs load a second or more
//! before the baseline is read; the first interval's length is measured
//! from the baseline, so any count read first at its end (and not at the
//! baseline) covers more time than the interval says. Once in a lab run
//! under load, the UDP sockets a retry storm made read 867 a second in the
//! first interval for the 600 it made.
//!
//! The test-only pause (THROTTLESCOPE_TEST_DUMP_PAUSE_MS, inside every flow
//! dump, the baseline's included) holds the baseline 1.5 s after attach
//! (and every interval's read as long: the intervals run late, each one's
//! length its own).
//! Two workloads in the broker run from before the start: a DNS loop to the
//! Amazon resolver's address (link-local senders) and a retry storm, a new
//! UDP socket per query, to the client (sockets made). In every interval,
//! the first too, each one's count over the interval's own length must be
//! within 5% of the rate it keeps.
//!
//! Needs root (BPF, netns). The lab is made under a unique prefix and
//! removed on drop, also when an assertion fails.

use std::process::{Child, Command, Stdio};

use crate::lab_support::{watch_lines, Lab};
use crate::support::{binary, repo_root, run};
use throttlescope::collect::probes::load::TEST_DUMP_PAUSE_ENV;

/// Link-local queries a second, from one connected socket.
const LINKLOCAL_PPS: u32 = 400;
/// Sockets a second the retry storm makes, one a query.
const STORM_PER_S: u32 = 300;

#[test]
fn the_first_interval_counts_sockets_and_link_local_senders_from_the_baseline() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("fi");
    // A resolver on 169.254.169.253 in hv (its limit of 1,024 a second is
    // past this test's rate): the DNS loop's connected socket gets answers,
    // not ICMP errors.
    lab.tool(&["shape", "linklocal_limit"]);
    let dns = |args: &[&str]| -> Child {
        Command::new("ip")
            .args(["netns", "exec", &lab.broker(), "python3"])
            .arg(repo_root().join("tools/lab.d/dns_loop.py"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dns_loop.py")
    };
    // Sent for longer than the watch lasts, and killed after it.
    let mut linklocal = dns(&["169.254.169.253", &LINKLOCAL_PPS.to_string(), "20", "5353"]);
    let mut storm = dns(&[&lab.client_ip, &STORM_PER_S.to_string(), "20", "new"]);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = run(Command::new("ip")
        .args(["netns", "exec", &lab.broker()])
        .arg(binary())
        // The link-local senders counted in every interval (the default
        // pauses on_dev_xmit, which counts them, while no counter moves).
        .args(["watch", "--json", "--duration", "8s", "--interval", "1s"])
        .args(["--per-packet", "always"])
        .env(TEST_DUMP_PAUSE_ENV, "1500"));
    let (ll_pid, storm_pid) = (linklocal.id(), storm.id());
    for c in [&mut linklocal, &mut storm] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let lines = watch_lines(&out.stdout);
    assert!(lines.len() >= 3, "{} intervals", lines.len());
    for (snap, _) in &lines {
        let secs = snap.interval_ns as f64 / 1e9;
        let b0 = snap
            .interfaces
            .iter()
            .find(|i| i.name == lab.broker_if)
            .expect("b0 in every snapshot");
        let sent: u64 = b0
            .linklocal
            .as_ref()
            .expect("link-local senders measured")
            .senders
            .iter()
            .filter(|s| s.owner.pid == ll_pid)
            .map(|s| s.packets)
            .sum();
        let made: u64 = snap
            .udp_openers
            .as_ref()
            .expect("UDP sockets measured")
            .openers
            .iter()
            .filter(|o| o.owner.pid == storm_pid)
            .map(|o| o.sockets)
            .sum();
        let (ll_rate, storm_rate) = (sent as f64 / secs, made as f64 / secs);
        eprintln!(
            "seq {}: {secs:.3} s, link-local {sent} ({ll_rate:.1}/s), sockets made {made} \
             ({storm_rate:.1}/s)",
            snap.seq
        );
        for (what, rate, kept) in [
            ("link-local datagrams", ll_rate, LINKLOCAL_PPS),
            ("sockets made", storm_rate, STORM_PER_S),
        ] {
            let kept = f64::from(kept);
            assert!(
                (rate - kept).abs() <= 0.05 * kept,
                "seq {}: {what} {rate:.1}/s over the interval's {secs:.3} s, the workload \
                 keeps {kept}/s",
                snap.seq
            );
        }
    }
}
