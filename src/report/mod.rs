//! `throttlescope report`: one pass over a recording's files (never all of
//! it in memory), judged like the live view, summarised as text, `--json`
//! or `--html`. The model (model.rs) is the contract between the builder
//! and the renderers.

pub mod build;
pub mod filters;
pub mod html;
pub mod model;
pub mod text;
pub mod workloads;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use crate::commands::cli::ReportArgs;
use crate::pipeline::thresholds_over;
use crate::record::{headers_in_order, recorded_thresholds, Continuity};
pub use build::ReportBuilder;
pub use filters::ReportFilters;
pub use model::Report;

/// Reads `args.files` and builds the report; warnings (skipped lines, cut
/// tails, missing segments) are in `report.health.read_warnings`. Fails,
/// naming the files, when no interval could be read.
pub fn build(args: &ReportArgs) -> Result<Report> {
    let filters = ReportFilters::from_args(args)?;
    let (files, errors) = headers_in_order(&args.files);
    if files.is_empty() {
        let why: Vec<String> = errors.iter().map(|e| format!("{e:#}")).collect();
        bail!("nothing to report: {}", why.join("; "));
    }
    let mut warnings: Vec<String> = errors
        .iter()
        .map(|e| format!("{e:#}: skipped this file"))
        .collect();
    let first = &files[0];
    let (recorded, warning) = recorded_thresholds(&first.header, &first.name());
    warnings.extend(warning);
    let thresholds = thresholds_over(recorded.clone(), &args.thresholds)?;
    let headers: Vec<_> = files.iter().map(|f| f.header.clone()).collect();
    let names = args.files.iter().map(|p| p.display().to_string()).collect();
    let mut builder =
        ReportBuilder::new(names, &headers, &recorded, thresholds, filters, args.top)?;
    let mut continuity = Continuity::new();
    let mut read = 0u64;
    for file in &files {
        let name = file.name();
        let mut reader = match file.open() {
            Ok(r) => r,
            Err(e) => {
                warnings.push(format!("{e:#}: skipped this file"));
                continue;
            }
        };
        continuity.start_file(reader.header(), &name);
        builder.start_file(reader.header());
        for item in reader.by_ref() {
            match item {
                Ok(snap) => {
                    continuity.interval(snap.seq);
                    builder.push(&snap);
                    read += 1;
                }
                Err(problem) => warnings.push(problem.to_string()),
            }
        }
        warnings.extend(reader.closing_warnings());
    }
    warnings.extend(continuity.finish());
    if read == 0 {
        let names: Vec<String> = files.iter().map(|f| f.name()).collect();
        let mut msg = format!("no complete interval in {}", names.join(", "));
        if !warnings.is_empty() {
            msg.push_str(": ");
            msg.push_str(&warnings.join("; "));
        }
        bail!(msg);
    }
    for w in warnings {
        builder.warn(w);
    }
    builder.finish()
}

pub fn run(args: &ReportArgs) -> Result<ExitCode> {
    // Open the HTML output first: a path that cannot be written fails
    // before a long read, not after it.
    let html = match &args.html {
        Some(path) if is_one_of(path, &args.files) => bail!(
            "--html {}: is one of the trace files; it would be overwritten",
            path.display()
        ),
        Some(path) => Some((
            path,
            // Never over an existing file; 0640, as recordings: the page
            // names peers and processes.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o640)
                .open(path)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        anyhow!(
                            "--html {}: already exists; refusing to overwrite it (remove it or \
                             choose another name)",
                            path.display()
                        )
                    } else {
                        anyhow!(
                            "--html {}: cannot write the report there: {e}",
                            path.display()
                        )
                    }
                })?,
        )),
        None => None,
    };
    let report = match build(args) {
        Ok(r) => r,
        Err(e) => {
            if let Some((path, file)) = html {
                drop(file);
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    for w in &report.health.read_warnings {
        eprintln!(
            "throttlescope: warning: {}",
            crate::shared::terminal_text::inert_lines(w)
        );
    }
    if let Some((path, file)) = html {
        write_html(&report, path, file)?;
    }
    let out = if args.json {
        let mut s = serde_json::to_string_pretty(&report).context("encoding the report")?;
        s.push('\n');
        s
    } else {
        crate::shared::terminal_text::inert_lines(&text::render(&report)).into_owned()
    };
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    match lock.write_all(out.as_bytes()).and_then(|_| lock.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // `| head` closing the pipe is a normal way to stop reading.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e).context("writing the report to stdout"),
    }
}

/// True when `path` names the same existing file as one of `files`.
fn is_one_of(path: &Path, files: &[std::path::PathBuf]) -> bool {
    let Ok(target) = path.canonicalize() else {
        return false;
    };
    files
        .iter()
        .any(|f| f.canonicalize().is_ok_and(|c| c == target))
}

/// Writes the HTML report to `path` (already created as `file`).
fn write_html(report: &Report, path: &Path, mut file: File) -> Result<()> {
    let page = html::render(report);
    file.write_all(page.as_bytes())
        .and_then(|_| file.sync_all())
        .map_err(|e| anyhow!("--html {}: writing the report failed: {e}", path.display()))
}
