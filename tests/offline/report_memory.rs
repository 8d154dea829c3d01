//! `report` streams: its peak memory stays far below what holding the
//! recording's snapshots would take. Scale with REPORT_MEMORY_FLOWS and
//! REPORT_MEMORY_INTERVALS (default 1000 flows x 200 intervals; the
//! figure in docs/report.md is 1000 x 3600).

use std::path::Path;
use std::process::Command;

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::model::snapshot::FlowSample;
use throttlescope::record::TraceRecord;

/// Peak resident memory, in bytes, of a command run to its end.
fn peak_rss(cmd: &mut Command) -> (i32, u64) {
    let child = cmd
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawning report");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: zeroed rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 reaps this child only and gives its own rusage, unlike
    // RUSAGE_CHILDREN, which would mix in other tests' children.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4: {}", std::io::Error::last_os_error());
    std::mem::forget(child);
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage.ru_maxrss as u64 * 1024)
}

/// A zstd trace of `intervals` copies of one snapshot with `flows` flows,
/// each with its own seq and times (serialising each interval anew would
/// take longer than the report itself in a debug build).
fn write_trace(path: &Path, flows: usize, intervals: u64) {
    use std::io::Write;
    let mut z = zstd::stream::Encoder::new(std::fs::File::create(path).unwrap(), 3).unwrap();
    writeln!(z, "{}", serde_json::to_string(&header()).unwrap()).unwrap();
    let template = snapshot(0, flows);
    let line = serde_json::to_string(&TraceRecord::Snapshot(Box::new(template.clone()))).unwrap();
    // Everything after the three leading fields that change per interval.
    let rest_at = line.find(",\"interval_ns\"").unwrap();
    let rest = &line[rest_at..];
    for seq in 0..intervals {
        writeln!(
            z,
            "{{\"type\":\"snapshot\",\"seq\":{seq},\"mono_ns\":{},\"unix_ms\":{}{rest}",
            template.mono_ns + seq * 1_000_000_000,
            template.unix_ms + seq * 1000
        )
        .unwrap();
    }
    writeln!(
        z,
        "{{\"type\":\"end\",\"unix_ms\":{},\"intervals\":{intervals},\"reason\":\"stopped\"}}",
        template.unix_ms + intervals * 1000
    )
    .unwrap();
    z.finish().unwrap();
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn report_memory_does_not_grow_with_the_snapshots() {
    // The report's peak RSS would include this program's other tests.
    if !crate::alone::in_fresh_process(
        "report_memory::report_memory_does_not_grow_with_the_snapshots",
    ) {
        return;
    }
    let flows = env_or("REPORT_MEMORY_FLOWS", 1000) as usize;
    let intervals = env_or("REPORT_MEMORY_INTERVALS", 200);
    let dir = TempDir::new("report-mem");
    let path = dir.join("big.jsonl.zst");
    let started = std::time::Instant::now();
    write_trace(&path, flows, intervals);

    eprintln!("written in {:?}", started.elapsed());
    let started = std::time::Instant::now();
    let (code, rss) = peak_rss(
        Command::new(env!("CARGO_BIN_EXE_throttlescope"))
            .args(["report", "--json"])
            .arg(&path),
    );
    assert_eq!(code, 0);
    eprintln!("reported in {:?}", started.elapsed());
    // The flow samples alone, without their strings and vectors.
    let held = intervals * flows as u64 * std::mem::size_of::<FlowSample>() as u64;
    eprintln!(
        "{flows} flows x {intervals} intervals ({} MB compressed): peak RSS {} MB; the snapshots would hold at least {} MB",
        std::fs::metadata(&path).unwrap().len() >> 20,
        rss >> 20,
        held >> 20
    );
    // Fixed costs (binary, zstd window, one snapshot's line and parse)
    // plus 8 bytes per flow and interval for the charts.
    let bound = (40 << 20) + intervals * flows as u64 * 8 * 2;
    assert!(
        rss < bound,
        "peak RSS {} MB over {} MB",
        rss >> 20,
        bound >> 20
    );
    assert!(held > 2 * bound, "the test must be able to fail: grow it");
}
