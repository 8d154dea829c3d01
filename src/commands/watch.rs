//! `throttlescope watch` and `throttlescope record`: live observation, shown
//! or recorded (or both).

use std::io::IsTerminal;

use anyhow::Result;

use crate::analysis::Thresholds;
use crate::commands::cli::{RecordArgs, WatchArgs};
use crate::pipeline::{run_live, thresholds_over, RecordTarget};
use crate::sinks::view::SilentView;

pub use crate::sinks::view::WatchLine;

pub fn run(args: &WatchArgs) -> Result<()> {
    // Refuse bad options before taking over the terminal.
    let thresholds = thresholds_over(Thresholds::default(), &args.observe.thresholds)?;
    let target = args
        .record
        .as_deref()
        .map(|p| RecordTarget::new(p, &args.rotate))
        .transpose()?;
    let view = crate::sinks::choose_view(&args.view)?;
    if let Some((path, n)) = run_live(&args.observe, thresholds, view, target)? {
        eprintln!(
            "throttlescope: recorded {n} intervals to {}",
            path.display()
        );
    }
    Ok(())
}

pub fn run_record(args: &RecordArgs) -> Result<()> {
    let thresholds = thresholds_over(Thresholds::default(), &args.observe.thresholds)?;
    let target = RecordTarget::new(&args.output, &args.rotate)?;
    let output = target.path.clone();
    let talk = !args.quiet;
    if talk {
        let until = match args.observe.duration {
            Some(d) => format!("for {d:?}"),
            None if std::io::stderr().is_terminal() => "until Ctrl-C".to_string(),
            None => "until stopped (SIGINT/SIGTERM)".to_string(),
        };
        eprintln!(
            "throttlescope: recording to {} every {:?} {until}",
            output.display(),
            args.observe.interval
        );
    }
    let done = run_live(
        &args.observe,
        thresholds,
        Box::new(SilentView),
        Some(target),
    )?;
    if talk {
        let (path, n) = done.unwrap_or((output, 0));
        eprintln!(
            "throttlescope: {n} intervals in {}; review with `throttlescope report {}`",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

/// `throttlescope thresholds`: every threshold with its default and meaning.
pub fn print_thresholds() {
    for t in Thresholds::describe() {
        println!("{:<28} {:>10}  {}", t.name, t.default, t.doc);
    }
}
