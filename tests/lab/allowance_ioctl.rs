//! The SIOCETHTOOL path against the real kernel and the real `ethtool`: a
//! veth pair in a namespace this test creates (veth implements ETH_SS_STATS:
//! `peer_ifindex` and per-queue stats whose number follows `ethtool -L`).
//! Needs root.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use throttlescope::collect::allowance::ethtool::Ethtool;
use throttlescope::collect::allowance::parse::parse_stats;
use throttlescope::collect::allowance::{AllowanceReader, CounterSource};
use throttlescope::model::snapshot::{AllowanceStatus, Offloads};

const A: &str = "tsva";
const B: &str = "tsvb";
const QUEUES: u32 = 4;

/// A network namespace holding a veth pair with `QUEUES` queues each side,
/// deleted on drop (also when the test panics).
struct VethNs {
    name: String,
}

impl VethNs {
    fn new(tag: &str) -> VethNs {
        Self::with_queues(tag, QUEUES)
    }

    fn with_queues(tag: &str, queues: u32) -> VethNs {
        crate::lab_support::needs_root("a veth pair in its own network namespace");
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let ns = VethNs {
            name: format!(
                "tsallow-{tag}-{}-{}-{nanos}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ),
        };
        sh(&["ip", "netns", "add", &ns.name]);
        let q = queues.to_string();
        #[rustfmt::skip]
        ns.ip(&[
            "link", "add", A, "numtxqueues", &q, "numrxqueues", &q, "type", "veth",
            "peer", "name", B, "numtxqueues", &q, "numrxqueues", &q,
        ]);
        ns.ip(&["link", "set", A, "up"]);
        ns.ip(&["link", "set", B, "up"]);
        ns
    }

    fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "-n", &self.name];
        full.extend_from_slice(args);
        sh(&full)
    }

    /// Runs a command inside the namespace.
    fn exec(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        sh(&full)
    }

    fn ethtool_s(&self, iface: &str) -> Vec<(String, u64)> {
        let text = self.exec(&["ethtool", "-S", iface]);
        parse_stats(&text, &format!("ethtool -S {iface}")).expect("ethtool -S output parses")
    }

    fn ifindex(&self, iface: &str) -> u64 {
        let line = self.ip(&["-o", "link", "show", "dev", iface]);
        line.split(':').next().unwrap().trim().parse().unwrap()
    }

    /// Runs `f` on a thread moved into the namespace: the ethtool socket
    /// is made there, so it addresses the namespace's interfaces.
    fn run_inside<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        crate::lab_support::in_netns(&self.name, f)
    }
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn sh(args: &[&str]) -> String {
    let out = crate::support::run(Command::new(args[0]).args(&args[1..]));
    String::from_utf8(out.stdout).unwrap()
}

/// `ethtool -k` lines for the three offloads we read.
fn ethtool_k(ns: &VethNs, iface: &str) -> Offloads {
    let text = ns.exec(&["ethtool", "-k", iface]);
    let flag = |key: &str| {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{key}:")))
            .unwrap_or_else(|| panic!("no {key} in ethtool -k:\n{text}"));
        line.split(':').nth(1).unwrap().trim().starts_with("on")
    };
    Offloads {
        tso: flag("tcp-segmentation-offload"),
        gso: flag("generic-segmentation-offload"),
        gro: flag("generic-receive-offload"),
    }
}

/// The veth stat count for `rx` and `tx` queues: peer_ifindex, 7 per rx
/// queue, 2 per tx queue (drivers/net/veth.c on this kernel).
fn veth_count(rx: u32, tx: u32) -> usize {
    (1 + 7 * rx + 2 * tx) as usize
}

#[test]
fn ioctl_stats_driver_and_offloads_match_ethtool() {
    let _gate = crate::lab_support::gate::shared();
    let ns = Arc::new(VethNs::new("match"));
    let ethtool = ns.ethtool_s(A);
    assert_eq!(ethtool.len(), veth_count(QUEUES, QUEUES));
    let peer = ns.ifindex(B);

    // Made inside the namespace; the socket keeps addressing it after the
    // handle moves back to this thread.
    let (mut dev, stats) = ns.run_inside(|| {
        let mut dev = Ethtool::open(A).expect("socket");
        let stats = dev.stats().expect("GSTATS on veth");
        (dev, stats)
    });
    assert_eq!(stats, ethtool, "ioctl vs ethtool -S");
    let peer_ifindex = stats.iter().find(|(n, _)| n == "peer_ifindex").unwrap().1;
    assert_eq!(peer_ifindex, peer);
    assert!(peer_ifindex > 0);

    assert_eq!(dev.driver().expect("GDRVINFO"), "veth");
    let info = ns.exec(&["ethtool", "-i", A]);
    assert!(info.lines().any(|l| l == "driver: veth"), "{info}");

    // Fewer queues at run time: the count changes and the names follow.
    ns.exec(&["ethtool", "-L", A, "rx", "2", "tx", "1"]);
    let stats = dev.stats().expect("GSTATS after -L");
    assert_eq!(stats.len(), veth_count(2, 1));
    assert_eq!(stats, ns.ethtool_s(A));
    assert!(!stats.iter().any(|(n, _)| n.starts_with("rx_queue_2_")));
    // And more again.
    ns.exec(&["ethtool", "-L", A, "rx", "3", "tx", "4"]);
    let stats = dev.stats().expect("GSTATS after second -L");
    assert_eq!(stats.len(), veth_count(3, 4));
    assert_eq!(stats, ns.ethtool_s(A));
    assert_eq!(dev.names().len(), stats.len());

    // Offloads, as set and as `ethtool -k` reports them.
    assert_eq!(dev.offloads().expect("offloads"), ethtool_k(&ns, A));
    ns.exec(&["ethtool", "-K", A, "tso", "off", "gso", "off", "gro", "on"]);
    let now = dev.offloads().expect("offloads after -K");
    assert_eq!(
        now,
        Offloads {
            tso: false,
            gso: false,
            gro: true
        }
    );
    assert_eq!(now, ethtool_k(&ns, A));
    ns.exec(&["ethtool", "-K", A, "tso", "on", "gso", "on", "gro", "off"]);
    let now = dev.offloads().expect("offloads after second -K");
    assert_eq!(
        now,
        Offloads {
            tso: true,
            gso: true,
            gro: false
        }
    );
    assert_eq!(now, ethtool_k(&ns, A));
}

#[test]
fn veth_is_unavailable_with_the_driver_named() {
    let _gate = crate::lab_support::gate::shared();
    let ns = VethNs::new("unavail");
    let n = ns.ethtool_s(A).len();
    let statuses = ns.run_inside(|| {
        let mut r = AllowanceReader::new(A, CounterSource::Ioctl);
        (0..3).map(|_| r.read()).collect::<Vec<_>>()
    });
    for s in statuses {
        assert_eq!(
            s,
            AllowanceStatus::Unavailable {
                reason: format!(
                    "{A}: driver veth reports no allowance counters ({n} other statistics)"
                )
            }
        );
    }
}

#[test]
fn a_vanished_interface_is_a_counted_failure() {
    let _gate = crate::lab_support::gate::shared();
    let ns = VethNs::new("gone");
    // The reader's socket is made inside; the interface goes away between
    // reads; the failure is counted and named, and reading goes on.
    let mut reader = ns.run_inside(|| AllowanceReader::new(A, CounterSource::Ioctl));
    assert!(matches!(reader.read(), AllowanceStatus::Unavailable { .. }));
    ns.ip(&["link", "del", A]);
    for expected in 1..=2 {
        match reader.read() {
            AllowanceStatus::Read(s) => {
                assert_eq!(s.read_failures, expected);
                assert_eq!(
                    s.last_error.as_deref(),
                    Some("tsva: SIOCETHTOOL GSSET_INFO: No such device")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn reads_stay_consistent_while_queues_change() {
    let _gate = crate::lab_support::gate::shared();
    let ns = Arc::new(VethNs::new("race"));
    let done = Arc::new(AtomicBool::new(false));
    let changer = {
        let (ns, done) = (Arc::clone(&ns), Arc::clone(&done));
        std::thread::spawn(move || {
            for i in 0..30u32 {
                let rx = (1 + i % QUEUES).to_string();
                let tx = (1 + (i * 3) % QUEUES).to_string();
                ns.exec(&["ethtool", "-L", A, "rx", &rx, "tx", &tx]);
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let reads = {
        let done = Arc::clone(&done);
        ns.run_inside(move || {
            let mut dev = Ethtool::open(A).expect("socket");
            let mut reads = Vec::new();
            while !done.load(Ordering::SeqCst) {
                reads.push(dev.stats().map_err(|e| e.to_string()));
            }
            reads
        })
    };
    changer.join().unwrap();
    let mut ok = 0;
    for r in &reads {
        let stats = match r {
            Ok(s) => s,
            // Only the "kept changing" give-up is acceptable, and counted.
            Err(e) => {
                assert!(e.contains("kept changing"), "{e}");
                continue;
            }
        };
        ok += 1;
        // Names and values belong to the same configuration: as many rx
        // queue names as 7 per queue, tx as 2 per queue, each queue whole.
        let rx = stats
            .iter()
            .filter(|(n, _)| n.starts_with("rx_queue_"))
            .count();
        let tx = stats
            .iter()
            .filter(|(n, _)| n.starts_with("tx_queue_"))
            .count();
        assert_eq!(rx % 7, 0, "{stats:?}");
        assert_eq!(tx % 2, 0, "{stats:?}");
        assert_eq!(stats.len(), veth_count(rx as u32 / 7, tx as u32 / 2));
        assert_eq!(stats[0].0, "peer_ifindex");
    }
    let sizes: std::collections::BTreeSet<usize> =
        reads.iter().flatten().map(|s| s.len()).collect();
    eprintln!(
        "{} reads, {ok} complete, {} distinct stat counts: {sizes:?}",
        reads.len(),
        sizes.len()
    );
    assert!(
        sizes.len() > 1,
        "the queue changes were never seen: {sizes:?}"
    );
}

#[test]
fn a_reply_larger_than_expected_is_refused_without_overrun() {
    let _gate = crate::lab_support::gate::shared();
    // 64 queues: 577 stats, 18 KiB of names, asked for as if there were
    // one. This kernel sees the mismatch and answers with 0 entries;
    // kernels before that check write all 577, and the guard page after our
    // buffer turns that into EFAULT. Either way the answer is "count
    // changed", nothing past the buffer is touched, and the right count
    // works.
    let ns = VethNs::with_queues("big", 64);
    let expected = ns.ethtool_s(A);
    assert_eq!(expected.len(), veth_count(64, 64));
    let n = expected.len();
    let (small_names, small_values, names, values, all) = ns.run_inside(move || {
        let mut dev = Ethtool::open(A).expect("socket");
        (
            dev.read_names(1).expect("GSTRINGS"),
            dev.read_values(1).expect("GSTATS"),
            dev.read_names(n).expect("GSTRINGS"),
            dev.read_values(n).expect("GSTATS"),
            dev.stats().expect("stats"),
        )
    });
    assert_eq!(small_names, None);
    assert_eq!(small_values, None);
    let names = names.expect("names at the right count");
    let values = values.expect("values at the right count");
    assert_eq!(names.into_iter().zip(values).collect::<Vec<_>>(), expected);
    assert_eq!(all, expected);
}
