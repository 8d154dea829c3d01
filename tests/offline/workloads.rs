//! Flows attributed to pods, containers and services (docs/workloads.md),
//! with real processes in real cgroups: a cgroup v2 tree laid out as the
//! kubelet's systemd driver (containerd, CRI-O and Docker scopes) and cgroupfs
//! driver lay it out, plus a `kafka.service`, under a test-owned subtree of
//! the cgroup v2 hierarchy, and a fake `/var/log/pods`. Each workload is an
//! iperf3 server in the lab's broker namespace, placed in its cgroup before
//! it starts; a client sends it a slow reverse stream. The observer's
//! attribution is checked against the cgroup's `cgroup.procs` and the
//! process `ss -tnp` names for each socket; `--pod` and `--service` must
//! keep exactly the flows of that workload. Needs root.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/workloads.rs.

use std::process::Command;

#[test]
fn bad_workload_filters_are_refused_before_observing() {
    for (args, want) in [
        (vec!["--cgroup", "system.slice"], "--cgroup"),
        (vec!["--pod", ""], "--pod"),
        (vec!["--service", "a/b"], "--service"),
    ] {
        let out = Command::new(crate::support::binary())
            .args(["watch", "--json", "--duration", "1s"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
