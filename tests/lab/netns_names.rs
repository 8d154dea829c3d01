//! A flow of another namespace (`--all-netns`) keeps its namespace's name in
//! its close record, with the real BPF programs and real connections. Run as
//! root.
//!
//! `ip netns del` removes the name (/run/netns/NAME) while the namespace
//! lives on in its sockets, as a pod's namespace outlives its name while it
//! is torn down. The observer reads names again when it meets a namespace it
//! does not know: here a second namespace opened after the first lost its
//! name. The first namespace's flows then close: their close records must
//! still say its name.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::lab_support::needs_root;
use crate::lab_support::traffic::Bulk;
use crate::support::run;
use throttlescope::collect::collector::{Collector, CollectorConfig};
use throttlescope::model::snapshot::Snapshot;

/// A namespace with its loopback up, deleted on drop if still named.
struct Netns(String);

impl Netns {
    fn add(name: String) -> Netns {
        run(Command::new("ip").args(["netns", "add", &name]));
        let ns = Netns(name);
        run(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        ns
    }

    fn delete(&self) {
        run(Command::new("ip").args(["netns", "del", &self.0]));
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

#[test]
fn close_records_keep_the_name_of_a_namespace_gone_from_run_netns() {
    let _gate = crate::lab_support::gate::shared();
    needs_root("network namespaces and BPF");
    let tag = std::process::id() % 100_000;
    let gone = Netns::add(format!("tsnn{tag}a"));
    let local = |port: u16| -> SocketAddr { format!("127.0.0.1:{port}").parse().unwrap() };
    let mut c = Collector::start(CollectorConfig {
        all_netns: true,
        ..CollectorConfig::default()
    })
    .expect("attach probes");
    let mut collect = |n: usize, snaps: &mut Vec<Snapshot>| {
        for _ in 0..n {
            std::thread::sleep(Duration::from_millis(500));
            snaps.push(c.collect().unwrap());
        }
    };
    let mut snaps = Vec::new();
    // Both ends of the connection are in `gone`: its two sockets.
    let a = Bulk::start(
        &gone.0,
        &gone.0,
        local(5501),
        1,
        Duration::from_secs(1),
        500_000,
    );
    collect(2, &mut snaps);
    // Found by its namespace's inode as well as its port: with --all-netns
    // the observer sees every namespace of the host, and another test's
    // lab may have a socket on port 5501 too.
    let gone_ino = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/run/netns/{}", gone.0))
            .expect("the namespace's file")
            .ino() as u32
    };
    let named = snaps
        .iter()
        .flat_map(|s| &s.flows)
        .find(|f| f.netns == gone_ino && (f.local.port() == 5501 || f.peer.port() == 5501))
        .expect("a flow of the first namespace listed");
    assert_eq!(named.netns_name.as_deref(), Some(gone.0.as_str()));

    gone.delete();
    // A namespace made after the names were read: the observer reads them
    // again when it meets it, and `gone`'s is no longer among them.
    let later = Netns::add(format!("tsnn{tag}b"));
    let b = Bulk::start(
        &later.0,
        &later.0,
        local(5502),
        1,
        Duration::from_secs(1),
        500_000,
    );
    collect(2, &mut snaps);
    assert!(
        snaps
            .iter()
            .flat_map(|s| &s.flows)
            .any(|f| f.netns != gone_ino && f.netns_name.as_deref() == Some(later.0.as_str())),
        "the second namespace's flows were named (the names were read again)"
    );

    a.close();
    let mut closed = Vec::new();
    for _ in 0..10 {
        collect(1, &mut snaps);
        closed.extend(
            snaps
                .last()
                .unwrap()
                .flows
                .iter()
                .filter(|f| f.closed && f.netns == gone_ino)
                .cloned(),
        );
        if closed.len() >= 2 {
            break;
        }
    }
    b.close();
    assert_eq!(closed.len(), 2, "both sockets' close records");
    for f in &closed {
        assert_eq!(
            f.netns_name.as_deref(),
            Some(gone.0.as_str()),
            "close record of {} -> {}",
            f.local,
            f.peer
        );
    }
}
