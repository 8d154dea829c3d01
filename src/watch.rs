//! `throttlescope watch`: the live interval loop.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cli::WatchArgs;
use crate::collector::{Collector, CollectorConfig};
use crate::signals;
use crate::sinks::table;

pub fn run(args: &WatchArgs) -> Result<()> {
    signals::install();
    let mut collector = Collector::start(CollectorConfig {
        all_netns: args.all_netns,
        interfaces: args.interfaces.clone(),
        events: !args.no_events,
    })?;
    let started = Instant::now();
    let stdout = std::io::stdout();
    let mut next = Instant::now() + args.interval;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        if signals::sleep_or_stop(wait) {
            break;
        }
        next += args.interval;
        let snap = collector.collect()?;
        let mut out = stdout.lock();
        let written = if args.json {
            serde_json::to_writer(&mut out, &snap)
                .map_err(std::io::Error::from)
                .and_then(|_| out.write_all(b"\n"))
        } else {
            out.write_all(table::render(&snap, args.top).as_bytes())
        };
        match written.and_then(|_| out.flush()) {
            Ok(()) => {}
            // A closed pipe (`| head`) is a normal way to stop.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
            Err(e) => return Err(e).context("writing to stdout"),
        }
        if args.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
    }
    Ok(())
}
