//! What naming flows' workloads costs: `WorkloadResolver::resolve` over
//! 10,000 flows per interval, their owners spread over pods laid out as the
//! kubelet's systemd driver lays them out, in a real cgroup v2 hierarchy
//! (a subtree this benchmark makes and removes). Needs root.
//!
//! cargo run --release --example workloads -- [--flows N] [--pods P] [--intervals I]

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Instant;

use throttlescope::collect::cgroups::{cgroup2_mount, WorkloadResolver};
use throttlescope::model::snapshot::{FlowSample, Owner};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let flows_n = arg("--flows", 10_000);
    let pods = arg("--pods", 500);
    let intervals = arg("--intervals", 60);
    let mounts = fs::read_to_string("/proc/mounts").unwrap();
    let root = cgroup2_mount(&mounts).expect("no cgroup2 mount");
    let base = root.join(format!("ts-bench-wl-{}", std::process::id()));
    let pod_logs = std::env::temp_dir().join(format!("ts-bench-pods-{}", std::process::id()));
    fs::create_dir_all(&pod_logs).unwrap();

    // pods x 1 container each; cgroup ids are the directories' inodes.
    let mut ids = Vec::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in 0..pods {
        let uid = format!("00000000-0000-0000-0000-{p:012}");
        let pod = base.join(format!(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice",
            uid.replace('-', "_")
        ));
        let ctr = pod.join(format!("cri-containerd-{p:064x}.scope"));
        fs::create_dir_all(&ctr).unwrap();
        fs::create_dir_all(pod_logs.join(format!("bench_pod-{p}_{uid}"))).unwrap();
        ids.push(fs::metadata(&ctr).unwrap().ino());
        dirs.push(ctr);
        dirs.push(pod);
    }
    let flows: Vec<FlowSample> = (0..flows_n)
        .map(|i| {
            let mut f: FlowSample = serde_json::from_value(serde_json::json!({
                "id": i, "netns": 1, "local": "10.0.0.1:9092",
                "peer": format!("10.0.{}.{}:{}", i / 65536 % 256, i / 256 % 256, 40000 + i % 20000),
                "state": "ESTAB", "ca_state": "open", "owner": null,
                "srtt_us": 0, "min_rtt_us": 0, "rttvar_us": 0, "cwnd": 10, "ssthresh": 0,
                "mss": 1448, "packets_out": 0, "retrans_out": 0, "lost_out": 0,
                "sacked_out": 0, "srtt_mean_us": null, "srtt_max_us": null, "cwnd_min": null,
                "totals": zero(), "delta": zero(), "opened": false, "closed": false
            }))
            .unwrap();
            f.owner = Some(Owner {
                pid: 1000 + (i % pods) as u32,
                comm: "java".into(),
                thread: None,
                cgroup_id: ids[i % pods],
                cgroup: None,
                workload: None,
            });
            f
        })
        .collect();

    let mut r = WorkloadResolver::new(Some(root.clone()), pod_logs.clone());
    let t0 = Instant::now();
    let mut first = flows.clone();
    r.resolve(&mut first, 0);
    let first_s = t0.elapsed().as_secs_f64();
    assert!(first
        .iter()
        .all(|f| f.owner.as_ref().unwrap().workload.is_some()));
    let (scans, walked) = r.cgroup_scans();

    let t1 = Instant::now();
    for g in 1..=intervals {
        let mut batch = flows.clone();
        r.resolve(&mut batch, g as u64);
    }
    let total = t1.elapsed().as_secs_f64();
    // The clone each interval is not resolution: measure it alone.
    let t2 = Instant::now();
    for _ in 1..=intervals {
        std::hint::black_box(flows.clone());
    }
    let clone_s = t2.elapsed().as_secs_f64();
    let steady = (total - clone_s).max(0.0) / intervals as f64;
    println!(
        "flows {flows_n}, pods {pods}: first interval {:.1} ms ({scans} walk of {walked} cgroup dirs); \
         then {:.2} ms per interval = {:.0} ns per flow",
        first_s * 1e3,
        steady * 1e3,
        steady * 1e9 / flows_n as f64
    );

    for d in dirs {
        let _ = fs::remove_dir(d);
    }
    let _ = fs::remove_dir(base.join("kubepods.slice/kubepods-burstable.slice"));
    let _ = fs::remove_dir(base.join("kubepods.slice"));
    let _ = fs::remove_dir(&base);
    let _ = fs::remove_dir_all(&pod_logs);
}

fn zero() -> serde_json::Value {
    serde_json::to_value(throttlescope::model::snapshot::FlowCounters::default()).unwrap()
}
