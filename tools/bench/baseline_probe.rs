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
//!
//! `baseline-probe --dispatch-cost [--rounds N] [--calls N]` measures what
//! `kernel.bpf_stats_enabled` cannot: the whole cost of one run of an empty
//! program, with the stats off as on a user's host. The stats time a
//! program between two clock reads, so they see neither the tracepoint's
//! call into BPF nor their own clock reads. Here the probe makes
//! `prctl(PR_SET_NAME)` calls in a loop (each fires `task_rename` once) and
//! times its own CPU with an empty program on that tracepoint detached,
//! attached with the stats off, and attached with them on; per round one
//! JSON line, then the medians. Run it before the stats are turned on.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::btf::types::Typedef;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;
use throttlescope::collect::probes::flows::{prog_stats, ProgStats};

use throttlescope::shared::units::parse_duration;
use throttlescope::shared::{clock, signals};

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

/// The calibration's program (`--dispatch-cost`), on `task_rename`.
const CALIBRATION: &str = "empty_task_rename";

const USAGE: &str = "usage: baseline-probe [--duration D] [--only NAME,...]  (D: 30s, 5m, ...)
       baseline-probe --dispatch-cost [--rounds N] [--calls N]  (defaults: 7 rounds of 2000000 calls)";

fn main() -> Result<()> {
    let mut duration = None;
    let mut only: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--dispatch-cost") {
        args.next();
        let (mut rounds, mut calls) = (7u32, 2_000_000u64);
        while let Some(a) = args.next() {
            let value = args.next();
            match (a.as_str(), value.as_deref().map(str::parse::<u64>)) {
                ("--rounds", Some(Ok(n))) if n > 0 => rounds = u32::try_from(n)?,
                ("--calls", Some(Ok(n))) if n > 0 => calls = n,
                _ => bail!("{USAGE}"),
            }
        }
        return dispatch_cost(rounds, calls);
    }
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

/// The empty object with the programs `keep` names loaded, none attached.
fn load(
    storage: &mut MaybeUninit<OpenObject>,
    keep: impl Fn(&str) -> bool,
) -> Result<empty_skel::EmptySkel<'_>> {
    let mut open = EmptySkelBuilder::default()
        .open(storage)
        .context("opening the empty BPF object")?;
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().to_string();
        prog.set_autoload(keep(&name));
    }
    open.load()
        .context("loading the yardstick programs (needs root or CAP_BPF+CAP_PERFMON, and BTF)")
}

/// Attaches, waits for `duration` (or until SIGINT/SIGTERM), detaches.
fn run(duration: Option<Duration>, only: Option<Vec<String>>) -> Result<()> {
    signals::install();
    let btf = Btf::from_vmlinux().context("reading the kernel's BTF")?;
    let wanted = |name: &str, tp: &str| {
        name != CALIBRATION
            && only.as_ref().is_none_or(|o| o.iter().any(|n| n == name))
            && btf
                .type_by_name::<Typedef<'_>>(&format!("btf_trace_{tp}"))
                .is_some()
    };
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut skel = load(&mut storage, |name| {
        let tp = PROGRAMS
            .iter()
            .find(|(p, _)| *p == name)
            .map_or("", |(_, t)| *t);
        wanted(name, tp)
    })?;
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

/// One round of `--dispatch-cost`: the loop's CPU per call, in ns.
struct Round {
    detached: f64,
    attached: f64,
    attached_with_stats: f64,
    /// What the stats said a run took, over the stats-on window.
    stats_ns_per_run: f64,
}

impl Round {
    /// A run's whole cost with the stats off: attached minus detached.
    fn run_cost(&self) -> f64 {
        self.attached - self.detached
    }
    fn run_cost_with_stats(&self) -> f64 {
        self.attached_with_stats - self.detached
    }
}

/// `--dispatch-cost`: see the module's comment.
fn dispatch_cost(rounds: u32, calls: u64) -> Result<()> {
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let skel = load(&mut storage, |name| name == CALIBRATION)?;
    let prog = &skel.progs.empty_task_rename;
    let fd = prog.as_fd().as_raw_fd();
    pin_to_this_cpu();
    let name = this_thread_name();
    let mut all = Vec::new();
    for round in 1..=rounds {
        let before = cpu_ns_per_call(calls, &name);
        let link = prog
            .attach()
            .context("attaching the calibration program to task_rename")?;
        let s0 = program_info(fd)?;
        let attached = cpu_ns_per_call(calls, &name);
        let s1 = program_info(fd)?;
        if s1.run_cnt != s0.run_cnt {
            bail!(
                "the BPF stats were on in the stats-off window ({} runs counted: \
                 kernel.bpf_stats_enabled is 1, or a process holds BPF_ENABLE_STATS); a run's \
                 cost with them off cannot be measured now; run --dispatch-cost before turning \
                 them on",
                s1.run_cnt - s0.run_cnt
            );
        }
        let stats = enable_stats()?;
        let s2 = program_info(fd)?;
        let attached_with_stats = cpu_ns_per_call(calls, &name);
        let s3 = program_info(fd)?;
        drop(stats);
        drop(link);
        let after = cpu_ns_per_call(calls, &name);
        let runs = s3.run_cnt.saturating_sub(s2.run_cnt);
        if runs < calls {
            bail!(
                "the program ran {runs} times for {calls} calls: task_rename did not fire per call"
            );
        }
        let r = Round {
            detached: (before + after) / 2.0,
            attached,
            attached_with_stats,
            stats_ns_per_run: s3.run_time_ns.saturating_sub(s2.run_time_ns) as f64 / runs as f64,
        };
        println!(
            "{}",
            serde_json::json!({
                "event": "round",
                "round": round,
                "calls": calls,
                "call_ns_detached": r.detached,
                "run_ns": r.run_cost(),
                "run_ns_with_stats": r.run_cost_with_stats(),
                "stats_ns_per_run": r.stats_ns_per_run,
            })
        );
        all.push(r);
    }
    let median = |f: &dyn Fn(&Round) -> f64| {
        let mut v: Vec<f64> = all.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "{}",
        serde_json::json!({
            "event": "dispatch_cost",
            "rounds": rounds,
            "calls": calls,
            "run_ns": median(&Round::run_cost),
            "run_ns_with_stats": median(&Round::run_cost_with_stats),
            "stats_ns_per_run": median(&|r: &Round| r.stats_ns_per_run),
        })
    );
    Ok(())
}

/// `calls` renames of this thread to its own name, each firing
/// `task_rename` once; this thread's CPU time per call, in ns.
fn cpu_ns_per_call(calls: u64, name: &[u8; 16]) -> f64 {
    let start = thread_cpu_ns();
    for _ in 0..calls {
        // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16
        // bytes from `name`, which is one (from PR_GET_NAME).
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
    }
    (thread_cpu_ns() - start) as f64 / calls as f64
}

fn this_thread_name() -> [u8; 16] {
    let mut name = [0u8; 16];
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    name
}

fn thread_cpu_ns() -> u64 {
    clock::ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Keeps the loop on one CPU, so no round pays for a migration's cold cache.
fn pin_to_this_cpu() {
    // SAFETY: sched_getcpu has no preconditions; the set is a valid,
    // zeroed cpu_set_t with one CPU added.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu >= 0 {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// The BPF run-time stats on while the returned descriptor is open.
fn enable_stats() -> Result<std::os::fd::OwnedFd> {
    // SAFETY: BPF_ENABLE_STATS takes the stats type and returns a new fd.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        bail!(
            "turning the BPF run-time stats on (BPF_ENABLE_STATS): {}",
            std::io::Error::from_raw_os_error(-fd)
        );
    }
    // SAFETY: a new descriptor this process owns.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}
