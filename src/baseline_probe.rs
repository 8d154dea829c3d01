//! `throttlescope baseline-probe` (hidden): attaches the empty program
//! (bpf/empty.bpf.c) to `tp_btf/tcp_probe` for a while, so tools/bench can
//! compare `on_tcp_probe`'s cost per event with the fixed cost of running
//! any BPF program on that tracepoint, over the same events.
//!
//! Output, for scripts: one JSON line when attached (the program's kernel
//! id, to read its stats with bpftool over an exact window) and one JSON
//! line at exit with the cumulative kernel stats since load.

use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::OpenObject;
use serde::Serialize;

use crate::collect::probes::empty_skel::EmptySkelBuilder;
use crate::shared::signals;

/// The one program in bpf/empty.bpf.c.
const PROGRAM: &str = "empty_tcp_probe";

/// What the program's `bpf_prog_info` says; run counters stay 0 unless
/// `kernel.bpf_stats_enabled` is 1.
#[derive(Debug, Clone, Copy, Serialize)]
struct EmptyProgramInfo {
    id: u32,
    run_cnt: u64,
    run_time_ns: u64,
    recursion_misses: u64,
}

#[derive(Serialize)]
struct Report<'a> {
    event: &'a str,
    program: &'a str,
    #[serde(flatten)]
    info: EmptyProgramInfo,
}

/// Attaches, waits for `duration` (or until SIGINT/SIGTERM), detaches.
pub fn run(duration: Option<Duration>) -> Result<()> {
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

fn print_report(event: &str, info: EmptyProgramInfo) {
    let line = serde_json::to_string(&Report {
        event,
        program: PROGRAM,
        info,
    })
    .expect("a flat struct of numbers serializes");
    println!("{line}");
}

fn program_info(fd: i32) -> Result<EmptyProgramInfo> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: `info` is a valid, writable bpf_prog_info and `len` its size.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if rc != 0 {
        bail!(
            "reading the empty program's info: {}",
            std::io::Error::from_raw_os_error(-rc)
        );
    }
    Ok(EmptyProgramInfo {
        id: info.id,
        run_cnt: info.run_cnt,
        run_time_ns: info.run_time_ns,
        recursion_misses: info.recursion_misses,
    })
}
