//! `baseline-probe [--duration D]`, the benchmark's yardstick (an example,
//! so it never ships in the product): attaches the empty program
//! (tools/bench/empty.bpf.c) to `tp_btf/tcp_probe` for a while, so
//! tools/bench can compare `on_tcp_probe`'s cost per event with the fixed
//! cost of running any BPF program on that tracepoint, over the same events.
//!
//! Output, for scripts: one JSON line when attached (the program's kernel
//! id, to read its stats with bpftool over an exact window) and one JSON
//! line at exit with the cumulative kernel stats since load.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use anyhow::{bail, Context, Result};
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

/// The one program in bpf/empty.bpf.c.
const PROGRAM: &str = "empty_tcp_probe";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let duration = match args.as_slice() {
        [] => None,
        [flag, d] if flag == "--duration" => Some(parse_duration(d).map_err(anyhow::Error::msg)?),
        _ => bail!("usage: baseline-probe [--duration D]  (D: 30s, 5m, ...)"),
    };
    run(duration)
}

/// Attaches, waits for `duration` (or until SIGINT/SIGTERM), detaches.
fn run(duration: Option<Duration>) -> Result<()> {
    signals::install();
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let open = EmptySkelBuilder::default()
        .open(&mut storage)
        .context("opening the empty BPF object")?;
    let mut skel = open
        .load()
        .context("loading the empty program (needs root or CAP_BPF+CAP_PERFMON, and BTF)")?;
    skel.attach()
        .context("attaching empty_tcp_probe to tp_btf/tcp_probe")?;
    let fd = skel.progs.empty_tcp_probe.as_fd().as_raw_fd();

    print_report("attached", program_info(fd)?);
    match duration {
        Some(d) => {
            signals::sleep_or_stop(d);
        }
        None => while !signals::sleep_or_stop(Duration::from_secs(3600)) {},
    }
    // Read before the skeleton (and so the program) goes away.
    let last = program_info(fd)?;
    drop(skel);
    print_report("detached", last);
    Ok(())
}

/// One JSON line: the event, the program, its id and its kernel stats (run
/// counters stay 0 unless `kernel.bpf_stats_enabled` is 1).
fn print_report(event: &str, info: ProgStats) {
    let line = serde_json::json!({
        "event": event,
        "program": PROGRAM,
        "id": info.id,
        "run_cnt": info.run_cnt,
        "run_time_ns": info.run_time_ns,
        "recursion_misses": info.recursion_misses,
    });
    println!("{line}");
}

fn program_info(fd: i32) -> Result<ProgStats> {
    prog_stats(fd).context("reading the empty program's info (bpf_prog_get_info_by_fd)")
}
