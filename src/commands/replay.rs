//! `throttlescope replay`: a recording through the same view as `watch`, at
//! the recorded pace, faster, or as fast as possible.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::commands::cli::ReplayArgs;
use crate::pipeline::Pipeline;
use crate::record::{recorded_thresholds, walk, WalkItem};
use crate::shared::signals;
use crate::sinks::view::Control;

pub fn run(args: &ReplayArgs) -> Result<()> {
    // The same walk as `report`: files in recording order, an unreadable
    // one skipped with a warning, judging started again at each new
    // recording, gaps and cut tails said; so a replay holds the verdicts
    // the report shows.
    let mut walk = walk(&args.files);
    let Some(first) = walk.files().first().cloned() else {
        bail!("nothing to replay: {}", walk.into_warnings().join("; "));
    };
    let (base, warning) = recorded_thresholds(&first.header, &first.name());
    let thresholds = base
        .with_assignments(&args.thresholds)
        .map_err(anyhow::Error::msg)?;
    let plan = crate::commands::baseline::for_recording(&args.instance, &first.header)?;
    let mut warnings: Vec<String> = warning.into_iter().collect();
    signals::install();
    let mut pipeline = Pipeline::new(
        thresholds,
        plan.baseline,
        crate::commands::choose_view(&args.view)?,
    );
    let mut shown = 0u64;
    let outcome = (|| -> Result<()> {
        let mut prev_mono: Option<u64> = None;
        for item in walk.by_ref() {
            let (snap, name) = match item {
                WalkItem::NewRecording(header) => {
                    pipeline.new_recording(header.start());
                    // Another recording's clock: no pause to sit through.
                    prev_mono = None;
                    continue;
                }
                WalkItem::NextFile { header } => {
                    pipeline.read_file(header.start());
                    continue;
                }
                WalkItem::Warning(w) => {
                    warnings.push(w);
                    continue;
                }
                WalkItem::Interval { snapshot, file } => (*snapshot, file),
            };
            if !args.as_fast_as_possible {
                if let Some(p) = prev_mono {
                    let gap = snap.mono_ns.saturating_sub(p) as f64 / args.speed;
                    // A gap over a minute is a pause in the recording, not
                    // something to sit through.
                    let gap = Duration::from_nanos(gap.min(60e9) as u64);
                    if pipeline.wait(Instant::now() + gap)? == Control::Quit {
                        return Ok(());
                    }
                }
            } else if pipeline.wait(Instant::now())? == Control::Quit {
                // No pause to wait in, but keys (q, Ctrl-C in the
                // full-screen view) and signals still count.
                return Ok(());
            }
            prev_mono = Some(snap.mono_ns);
            let offset = pipeline.place(&snap);
            let source = format!(
                "replay {name} {} seq {}",
                crate::shared::clock::format_offset(offset.floor()),
                snap.seq
            );
            shown += 1;
            if pipeline.process(snap, &source)? == Control::Quit {
                return Ok(());
            }
        }
        // Played to the end (not quit): the full-screen view stays on the
        // last interval until the person quits.
        if shown > 0 {
            pipeline.end_of_input()?;
        }
        Ok(())
    })();
    pipeline.finish(outcome)?;
    for w in &warnings {
        crate::stderr_line!(
            "throttlescope: warning: {}",
            crate::shared::terminal_text::inert_lines(w)
        );
    }
    if shown == 0 {
        bail!(
            "no complete interval in {}",
            args.files
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}
