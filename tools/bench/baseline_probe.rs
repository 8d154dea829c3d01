//! `baseline-probe [--duration D] [--only NAME,...]`, the benchmark's
//! yardstick (an example, so it never ships in the product): attaches empty
//! programs (tools/bench/empty.bpf.c), one on each tracepoint the
//! observer's per-event programs use that this kernel has, for a while, so
//! tools/bench can compare each program's cost per event with the fixed
//! cost of running any BPF program on its tracepoint, over the same events.
//! `--only` attaches the named ones only (`empty_tcp_probe,...`). Beside the
//! empty programs, `count_*` programs add one to a per-CPU counter and do
//! nothing else: the floor of any program that counts per packet.
//!
//! Output, for scripts: per program, one JSON line when attached (its
//! kernel id, to read its stats with bpftool over an exact window) and one
//! JSON line at exit with the cumulative kernel stats since load.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::btf::types::Typedef;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;
use throttlescope::collect::probes::flows::{prog_stats, ProgStats};

use throttlescope::shared::signals;
use throttlescope::shared::units::parse_duration;

#[allow(clippy::all, dead_code, non_camel_case_types, unused_imports)]
mod empty_skel {
    include!(concat!(env!("OUT_DIR"), "/empty.skel.rs"));
}
use empty_skel::EmptySkelBuilder;

/// Each program of tools/bench/empty.bpf.c and its tracepoint.
const PROGRAMS: &[(&str, &str)] = &[
    ("empty_tcp_probe", "tcp_probe"),
    ("empty_tcp_sendmsg_locked", "tcp_sendmsg_locked"),
    ("empty_qdisc_enqueue", "qdisc_enqueue"),
    ("empty_qdisc_dequeue", "qdisc_dequeue"),
    ("empty_kfree_skb", "kfree_skb"),
    ("empty_net_dev_start_xmit", "net_dev_start_xmit"),
    ("empty_netif_receive_skb", "netif_receive_skb"),
    ("count_qdisc_enqueue", "qdisc_enqueue"),
    ("count_qdisc_dequeue", "qdisc_dequeue"),
    ("count_net_dev_start_xmit", "net_dev_start_xmit"),
];

const USAGE: &str = "usage: baseline-probe [--duration D] [--only NAME,...]  (D: 30s, 5m, ...)";

fn main() -> Result<()> {
    let mut duration = None;
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--duration", Some(d)) => {
                duration = Some(parse_duration(&d).map_err(anyhow::Error::msg)?)
            }
            ("--only", Some(names)) => {
                let names: Vec<String> = names.split(',').map(str::to_string).collect();
                if let Some(n) = names.iter().find(|n| !PROGRAMS.iter().any(|(p, _)| p == n)) {
                    bail!("no program {n}; there are: {}", names_of_all());
                }
                only = Some(names);
            }
            _ => bail!("{USAGE}"),
        }
    }
    run(duration, only)
}

fn names_of_all() -> String {
    PROGRAMS
        .iter()
        .map(|(p, _)| *p)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Attaches, waits for `duration` (or until SIGINT/SIGTERM), detaches.
fn run(duration: Option<Duration>, only: Option<Vec<String>>) -> Result<()> {
    signals::install();
    let btf = Btf::from_vmlinux().context("reading the kernel's BTF")?;
    let wanted = |name: &str, tp: &str| {
        only.as_ref().is_none_or(|o| o.iter().any(|n| n == name))
            && btf
                .type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))
                .is_some()
    };
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut open = EmptySkelBuilder::default()
        .open(&mut storage)
        .context("opening the empty BPF object")?;
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().to_string();
        let tp = PROGRAMS
            .iter()
            .find(|(p, _)| *p == name)
            .map_or("", |(_, t)| *t);
        prog.set_autoload(wanted(&name, tp));
    }
    let mut skel = open
        .load()
        .context("loading the yardstick programs (needs root or CAP_BPF+CAP_PERFMON, and BTF)")?;
    skel.attach()
        .context("attaching the yardstick programs to their tracepoints")?;
    let loaded: Vec<(String, i32)> = skel
        .object()
        .progs()
        .filter(|p| p.as_fd().as_raw_fd() >= 0 && p.autoload())
        .map(|p| {
            (
                p.name().to_string_lossy().to_string(),
                p.as_fd().as_raw_fd(),
            )
        })
        .collect();
    if loaded.is_empty() {
        bail!("none of the yardstick programs' tracepoints is in this kernel");
    }
    for (name, fd) in &loaded {
        print_report("attached", name, program_info(*fd)?);
    }
    match duration {
        Some(d) => {
            signals::sleep_or_stop(d);
        }
        None => while !signals::sleep_or_stop(Duration::from_secs(3600)) {},
    }
    // Read before the skeleton (and so the programs) go away.
    let last: Vec<ProgStats> = loaded
        .iter()
        .map(|(_, fd)| program_info(*fd))
        .collect::<Result<_>>()?;
    drop(skel);
    for ((name, _), info) in loaded.iter().zip(last) {
        print_report("detached", name, info);
    }
    Ok(())
}

/// One JSON line: the event, the program, its id and its kernel stats (run
/// counters stay 0 unless `kernel.bpf_stats_enabled` is 1).
fn print_report(event: &str, program: &str, info: ProgStats) {
    let line = serde_json::json!({
        "event": event,
        "program": program,
        "id": info.id,
        "run_cnt": info.run_cnt,
        "run_time_ns": info.run_time_ns,
        "recursion_misses": info.recursion_misses,
    });
    println!("{line}");
}

fn program_info(fd: i32) -> Result<ProgStats> {
    prog_stats(fd).context("reading a yardstick program's info (bpf_prog_get_info_by_fd)")
}
