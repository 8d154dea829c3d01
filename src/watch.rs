//! `throttlescope watch`: the live interval loop.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::analysis::{analyze, IntervalAnalysis, Thresholds};
use crate::cli::WatchArgs;
use crate::collector::{Collector, CollectorConfig};
use crate::signals;
use crate::sinks::table;
use crate::snapshot::Snapshot;

/// Snapshots kept for the analysis' look back (throughput plateau).
const HISTORY: usize = 120;

/// One line of `watch --json`: the snapshot's fields, plus its analysis.
/// A reader that only knows [`Snapshot`] can still parse it.
#[derive(Debug, Serialize)]
pub struct WatchLine<'a> {
    #[serde(flatten)]
    pub snapshot: &'a Snapshot,
    pub analysis: &'a IntervalAnalysis,
}

/// The thresholds of `--threshold NAME=VALUE` options over the defaults.
pub fn thresholds_from(assignments: &[String]) -> Result<Thresholds> {
    let mut th = Thresholds::default();
    for a in assignments {
        th.set_assignment(a)
            .map_err(|e| anyhow::anyhow!("--threshold {a}: {e}"))?;
    }
    Ok(th)
}

pub fn run(args: &WatchArgs) -> Result<()> {
    let thresholds = thresholds_from(&args.thresholds)?;
    signals::install();
    let mut collector = Collector::start(CollectorConfig {
        all_netns: args.all_netns,
        interfaces: args.interfaces.clone(),
        events: !args.no_events,
        counter_files: args.counters.clone(),
        host_queue: !args.no_host_queue,
    })?;
    let started = Instant::now();
    let stdout = std::io::stdout();
    let mut history: VecDeque<Snapshot> = VecDeque::with_capacity(HISTORY + 1);
    let mut next = Instant::now() + args.interval;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        if signals::sleep_or_stop(wait) {
            break;
        }
        next += args.interval;
        let snap = collector.collect()?;
        let analysis = analyze(history.make_contiguous(), &snap, &thresholds);
        let mut out = stdout.lock();
        let written = if args.json {
            let line = WatchLine {
                snapshot: &snap,
                analysis: &analysis,
            };
            serde_json::to_writer(&mut out, &line)
                .map_err(std::io::Error::from)
                .and_then(|_| out.write_all(b"\n"))
        } else {
            out.write_all(table::render(&snap, Some(&analysis), args.top).as_bytes())
        };
        match written.and_then(|_| out.flush()) {
            Ok(()) => {}
            // A closed pipe (`| head`) is a normal way to stop.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(e) => return Err(e).context("writing to stdout"),
        }
        history.push_back(snap);
        if history.len() > HISTORY {
            history.pop_front();
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
    }
    Ok(())
}

/// `throttlescope thresholds`: every threshold with its default and meaning.
pub fn print_thresholds() {
    for t in Thresholds::describe() {
        println!("{:<28} {:>10}  {}", t.name, t.default, t.doc);
    }
}
