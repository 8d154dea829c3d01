//! read-trace: streams trace files through the library's `TraceReader` and
//! counts what it read, doing nothing else: the floor under any command that
//! reads a recording (tools/bench/report compares `replay` and `report`
//! with it).
//!
//!     cargo run --release --example read-trace -- FILE...

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use throttlescope::record;

fn run(paths: &[PathBuf]) -> Result<()> {
    let (mut intervals, mut flow_samples, mut events, mut warnings) = (0u64, 0u64, 0u64, 0u64);
    for path in paths {
        let mut reader = record::open(path)?;
        for item in reader.by_ref() {
            match item {
                Ok(snap) => {
                    intervals += 1;
                    flow_samples += snap.flows.len() as u64;
                    events += snap.events.len() as u64;
                }
                Err(problem) => {
                    warnings += 1;
                    eprintln!("read-trace: warning: {problem}");
                }
            }
        }
        for w in reader.closing_warnings() {
            warnings += 1;
            eprintln!("read-trace: warning: {w}");
        }
    }
    println!(
        "read-trace: {intervals} intervals, {flow_samples} flow samples, {events} events, {warnings} warnings"
    );
    Ok(())
}

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: read-trace FILE...");
        return ExitCode::from(2);
    }
    match run(&paths) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("read-trace: {e:#}");
            ExitCode::FAILURE
        }
    }
}
