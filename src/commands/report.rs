//! `throttlescope report`: a recording summarised as text, `--json` or
//! `--html` (the report itself is built by src/report/).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};

use crate::commands::cli::ReportArgs;
use crate::report::{build, html, text, Report, ReportFilters, ReportRequest};

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
    // The recordings of several hosts: the cluster report.
    if let Some(hosts) = crate::report::cluster::hosts_of(&args.files)? {
        return run_cluster(args, hosts, html);
    }
    let report = match build(request(args)?) {
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
        crate::stderr_line!(
            "throttlescope: warning: {}",
            crate::shared::terminal_text::inert_lines(w)
        );
    }
    if let Some((path, file)) = html {
        write_html(&report, path, file)?;
    }
    print_report(args.json, &report, || text::render(&report))
}

/// The report on stdout: pretty JSON with `--json`, else `text()` made inert
/// for a terminal.
fn print_report<T: serde::Serialize>(
    json: bool,
    report: &T,
    text: impl FnOnce() -> String,
) -> Result<ExitCode> {
    let out = if json {
        let mut s = serde_json::to_string_pretty(report).context("encoding the report")?;
        s.push('\n');
        s
    } else {
        crate::shared::terminal_text::inert_lines(&text()).into_owned()
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

/// The cluster report of several hosts' recordings (src/report/cluster.rs),
/// as text, `--json` or `--html`.
fn run_cluster(
    args: &ReportArgs,
    hosts: Vec<crate::report::cluster::HostFiles>,
    html: Option<(&std::path::PathBuf, File)>,
) -> Result<ExitCode> {
    use crate::report::cluster;
    let report = match request(args).and_then(|req| cluster::build(hosts, req)) {
        Ok(r) => r,
        Err(e) => {
            if let Some((path, file)) = html {
                drop(file);
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    for h in &report.hosts {
        for w in &h.report.health.read_warnings {
            crate::stderr_line!(
                "throttlescope: warning: {}",
                crate::shared::terminal_text::inert_lines(w)
            );
        }
    }
    if let Some((path, mut file)) = html {
        file.write_all(cluster::render_html(&report).as_bytes())
            .and_then(|_| file.sync_all())
            .map_err(|e| anyhow!("--html {}: writing the report failed: {e}", path.display()))?;
    }
    print_report(args.json, &report, || cluster::render_text(&report))
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

/// The report `args` ask for: files, thresholds, filters.
fn request(args: &ReportArgs) -> Result<ReportRequest<'_>> {
    let filters = ReportFilters::parse(
        &args.flows,
        &args.interfaces,
        args.since.as_deref(),
        args.until.as_deref(),
        args.workloads.filter()?,
    )?
    .with_kafka(args.kafka.filter()?);
    Ok(ReportRequest {
        files: &args.files,
        thresholds: &args.thresholds,
        filters,
        top: args.top,
        baseline: args.instance.request(),
        instance_specs: args.instance.table()?,
    })
}
