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
//! The tests here need root; those that need none are in
//! tests/offline/workloads.rs.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::Duration;

use crate::lab_support::Lab;
use serde_json::Value;
use throttlescope::collect::cgroups::cgroup2_mount;

const CID: &str = "4b8c3c0f1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e";

/// One workload: where its cgroup is, which port its server listens on, and
/// what the observer should say about it.
struct Case {
    rel: String,
    port: u16,
    pod: Option<(&'static str, &'static str, &'static str)>,
    container: Option<&'static str>,
    service: Option<&'static str>,
}

/// A test-owned subtree of the cgroup v2 hierarchy, removed on drop (its
/// processes are killed first: a cgroup with members cannot be removed).
struct CgroupTree {
    root: PathBuf,
    base: String,
}

impl CgroupTree {
    fn new(tag: &str) -> CgroupTree {
        let mounts = fs::read_to_string("/proc/mounts").unwrap();
        let root = cgroup2_mount(&mounts).expect("no cgroup2 mount in /proc/mounts");
        let base = format!("/ts-{tag}-{}", std::process::id());
        CgroupTree { root, base }
    }

    fn dir(&self, rel: &str) -> PathBuf {
        self.root
            .join(format!("{}{rel}", self.base).trim_start_matches('/'))
    }

    fn procs(&self, rel: &str) -> BTreeSet<u32> {
        fs::read_to_string(self.dir(rel).join("cgroup.procs"))
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    }
}

impl Drop for CgroupTree {
    fn drop(&mut self) {
        let top = self.dir("");
        // Deepest first.
        let mut dirs = Vec::new();
        let mut stack = vec![top];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            if let Ok(p) = fs::read_to_string(d.join("cgroup.procs")) {
                for pid in p.lines() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
        }
        sleep(Duration::from_millis(200));
        for d in dirs.iter().rev() {
            let _ = fs::remove_dir(d);
        }
    }
}

/// A scratch directory (the fake `/var/log/pods`, the recording), removed
/// on drop, also when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!("ts-wl-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// An iperf3 server in the broker namespace, moved into its cgroup before
/// any client connects (so before its first send). The test writes the pid:
/// `ip netns exec` gives its command a fresh /sys without the cgroup mounts.
fn server_in_cgroup(lab: &Lab, cgroup_dir: &Path, port: u16) -> Child {
    let child = Command::new("ip")
        .args(["netns", "exec", &lab.broker(), "iperf3", "-s", "-1"])
        .args(["-B", lab.broker_ip.as_str(), "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    // `ip netns exec` execs the command: the pid is iperf3's.
    fs::write(cgroup_dir.join("cgroup.procs"), child.id().to_string()).unwrap();
    child
}

/// A slow reverse stream (the server sends), long enough to cover the watches.
fn client(lab: &Lab, port: u16) -> Child {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.client(),
            "iperf3",
            "-c",
            lab.broker_ip.as_str(),
        ])
        .args(["-p", &port.to_string(), "-R", "-t", "40", "-b", "4M"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 client")
}

/// `watch --json` in the broker namespace with cgroup2 mounted where a
/// unified host has it; the mount is in `ip netns exec`'s own mount
/// namespace and goes away with it.
fn watch_with_cgroup_mount(lab: &Lab, pod_logs: &str) -> Vec<u8> {
    let counters = lab.counters.display();
    let script = format!(
        "mount -t cgroup2 cgroup2 /sys/fs/cgroup && exec {} watch --json --duration 3s --counters b0={counters} --pod-logs {pod_logs}",
        crate::support::binary().display()
    );
    let out = crate::support::run(Command::new("ip").args([
        "netns",
        "exec",
        &lab.broker(),
        "sh",
        "-c",
        &script,
    ]));
    out.stdout
}

/// (local port, peer port) -> owner pid of the broker's sockets, from `ss -tnp`.
fn ss_owners(lab: &Lab) -> BTreeMap<(u16, u16), u32> {
    // `state established` drops the State column: Recv-Q Send-Q Local Peer Process.
    let out = lab.exec(&lab.broker(), "ss", &["-tnpH", "state", "established"]);
    let mut m = BTreeMap::new();
    for line in out.lines().filter(|l| l.contains("users:(")) {
        let f: Vec<&str> = line.split_whitespace().collect();
        let port = |s: &str| s.rsplit(':').next().unwrap().parse::<u16>().unwrap();
        let Some(pid) = line
            .split("pid=")
            .nth(1)
            .and_then(|r| r.split(',').next())
            .and_then(|p| p.parse().ok())
        else {
            continue;
        };
        m.insert((port(f[2]), port(f[3])), pid);
    }
    m
}

/// Every flow of every interval, as JSON values (the owner's new fields
/// are checked by name, as a user reading `--json` sees them).
fn flows_of(lines: &[u8]) -> Vec<Value> {
    crate::lab_support::watch_lines(lines)
        .into_iter()
        .flat_map(|(snap, _)| snap.flows)
        .map(|f| serde_json::to_value(f).unwrap())
        .collect()
}

fn local_port(f: &Value) -> u16 {
    f["local"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn flows_are_attributed_to_pods_containers_and_services() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("wl");
    // The counter file must exist at start (`--counters` refuses a missing
    // one): the emulator writes it.
    lab.tool(&["emulator", "start"]);
    let tree = CgroupTree::new("wl");
    let uid_a = "0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8";
    let uid_b = "11112222-3333-4444-5555-666677778888";
    let uid_c = "9a9a9a9a-8b8b-7c7c-6d6d-5e5e5e5e5e5e";
    let us = |u: &str| u.replace('-', "_");
    let cases = vec![
        Case {
            rel: format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope",
                us(uid_a)
            ),
            port: 7101,
            pod: Some((uid_a, "kafka", "broker-0")),
            container: Some(CID),
            service: None,
        },
        Case {
            rel: format!(
                "/kubepods.slice/kubepods-pod{}.slice/crio-{CID}.scope",
                us(uid_b)
            ),
            port: 7102,
            pod: Some((uid_b, "tenant-a", "consumer-7")),
            container: Some(CID),
            service: None,
        },
        Case {
            rel: format!("/kubepods/besteffort/pod{uid_c}/{CID}"),
            port: 7103,
            pod: Some((uid_c, "", "")),
            container: Some(CID),
            service: None,
        },
        Case {
            rel: format!("/system.slice/docker-{CID}.scope"),
            port: 7104,
            pod: None,
            container: Some(CID),
            service: None,
        },
        Case {
            rel: "/system.slice/kafka.service".into(),
            port: 7105,
            pod: None,
            container: None,
            service: Some("kafka.service"),
        },
    ];
    // The kubelet's log directory: pods a and b are named there, c is not.
    let scratch = Scratch::new();
    let pod_logs = scratch.0.join("pods");
    for (uid, ns, name) in [
        (uid_a, "kafka", "broker-0"),
        (uid_b, "tenant-a", "consumer-7"),
    ] {
        fs::create_dir_all(pod_logs.join(format!("{ns}_{name}_{uid}"))).unwrap();
    }

    let mut children = Vec::new();
    for c in &cases {
        fs::create_dir_all(tree.dir(&c.rel)).unwrap();
        children.push(server_in_cgroup(&lab, &tree.dir(&c.rel), c.port));
    }
    // With a fixed 500 ms for five servers to listen and 1 s for their
    // clients, one run beside another test's load had port 7103's flow
    // missing from every watch while the other four were listed throughout
    // (a client refused by a server not yet listening fits).
    let addrs: Vec<String> = cases
        .iter()
        .map(|c| format!("{}:{}", lab.broker_ip, c.port))
        .collect();
    lab.until_listed(&["-Hltn"], &addrs, "no iperf3 server listening");
    for c in &cases {
        children.push(client(&lab, c.port));
    }
    lab.until_listed(
        &["-Htn", "state", "established"],
        &addrs,
        "no connection established",
    );
    sleep(Duration::from_secs(1));

    let pod_logs_arg = pod_logs.to_string_lossy().into_owned();
    // Two observers: one that sees the cgroup hierarchy (mounted at
    // /sys/fs/cgroup inside the private mount namespace `ip netns exec`
    // makes, as on a unified host: cgroups named by id), and the usual
    // one, which does not (cgroups named through /proc/<pid>/cgroup).
    let by_id = watch_with_cgroup_mount(&lab, &pod_logs_arg);
    let all = lab.watch_json_in_broker("3s", &["--pod-logs", &pod_logs_arg]);
    // Ground truth while every flow is still up.
    let ss = ss_owners(&lab);
    let procs: Vec<BTreeSet<u32>> = cases.iter().map(|c| tree.procs(&c.rel)).collect();
    let only_broker0 = lab.watch_json_in_broker(
        "2s",
        &["--pod-logs", &pod_logs_arg, "--pod", "kafka/broker-0"],
    );
    let only_kafka = lab.watch_json_in_broker("2s", &["--service", "kafka"]);
    // From the root namespace with --all-netns: the broker's flows are
    // named after their namespace (its `ip netns` name).
    let all_netns = crate::support::run(
        Command::new(crate::support::binary())
            .args(["watch", "--json", "--all-netns", "--duration", "2s"])
            .args(["--pod-logs", &pod_logs_arg]),
    )
    .stdout;
    // A recording, reviewed by workload.
    let trace = scratch.0.join("trace.jsonl");
    let counters = lab.counters.display();
    crate::support::run(
        Command::new("ip")
            .args(["netns", "exec", &lab.broker()])
            .arg(crate::support::binary())
            .args(["record", "--quiet", "--duration", "2s", "-o"])
            .arg(&trace)
            .args(["--counters", &format!("b0={counters}")])
            .args(["--pod-logs", &pod_logs_arg]),
    );

    let flows: Vec<Value> = flows_of(&all).into_iter().chain(flows_of(&by_id)).collect();
    for (c, want_pids) in cases.iter().zip(&procs) {
        assert_eq!(want_pids.len(), 1, "{}: one server process", c.rel);
        let mine: Vec<&Value> = flows
            .iter()
            .filter(|f| local_port(f) == c.port && f["state"] == "ESTAB")
            .collect();
        assert!(!mine.is_empty(), "no flow on port {} in {flows:?}", c.port);
        for f in mine {
            let owner = &f["owner"];
            let pid = owner["pid"].as_u64().unwrap() as u32;
            assert!(
                want_pids.contains(&pid),
                "{}: owner {owner} not in cgroup.procs {want_pids:?}",
                c.rel
            );
            let peer_port: u16 = f["peer"]
                .as_str()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(
                ss.get(&(c.port, peer_port)),
                Some(&pid),
                "ss -tnp disagrees on {f}"
            );
            let path = owner["cgroup"]
                .as_str()
                .unwrap_or_else(|| panic!("no cgroup in {owner}"));
            assert_eq!(path, format!("{}{}", tree.base, c.rel));
            let w = &owner["workload"];
            match c.pod {
                Some((uid, ns, name)) => {
                    assert_eq!(w["pod_uid"], uid, "{w}");
                    if ns.is_empty() {
                        assert!(
                            w.get("pod_name").is_none(),
                            "pod c has no log directory: {w}"
                        );
                    } else {
                        assert_eq!(w["pod_namespace"], ns, "{w}");
                        assert_eq!(w["pod_name"], name, "{w}");
                    }
                }
                None => assert!(w.get("pod_uid").is_none(), "{w}"),
            }
            assert_eq!(w["container_id"].as_str(), c.container, "{w}");
            assert_eq!(w["service"].as_str(), c.service, "{w}");
        }
    }

    // The filters keep exactly the chosen workload's flows.
    let ports =
        |lines: &[u8]| -> BTreeSet<u16> { flows_of(lines).iter().map(local_port).collect() };
    assert_eq!(ports(&only_broker0), BTreeSet::from([7101]));
    assert_eq!(ports(&only_kafka), BTreeSet::from([7105]));

    let broker_ino = lab.netns_inode(&lab.broker());
    let named: Vec<Value> = flows_of(&all_netns)
        .into_iter()
        .filter(|f| f["netns"].as_u64() == Some(u64::from(broker_ino)))
        .collect();
    assert!(!named.is_empty(), "no broker flow seen with --all-netns");
    for f in &named {
        assert_eq!(f["netns_name"].as_str(), Some(lab.broker().as_str()), "{f}");
    }

    // The report adds the flows up per workload, and --pod keeps one pod.
    let report = |extra: &[&str]| -> Value {
        let out = crate::support::run(
            Command::new(crate::support::binary())
                .arg("report")
                .arg(&trace)
                .arg("--json")
                .args(extra),
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let r = report(&[]);
    let names: BTreeSet<String> = r["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            format!(
                "{} {}",
                w["kind"].as_str().unwrap(),
                w["name"].as_str().unwrap()
            )
        })
        .collect();
    let short = &CID[..12];
    assert_eq!(
        names,
        BTreeSet::from([
            "pod kafka/broker-0".to_string(),
            "pod tenant-a/consumer-7".to_string(),
            format!("pod {uid_c}"),
            format!("container {short}"),
            "service kafka.service".to_string(),
        ]),
        "{}",
        r["workloads"]
    );
    let r = report(&["--pod", "broker-0"]);
    let kept: BTreeSet<u16> = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            f["local"]
                .as_str()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert_eq!(kept, BTreeSet::from([7101]));

    for mut ch in children {
        let _ = ch.kill();
        let _ = ch.wait();
    }
}
