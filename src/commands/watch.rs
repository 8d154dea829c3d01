//! `throttlescope watch` and `throttlescope record`: live observation, shown
//! or recorded (or both).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;

use crate::analysis::Thresholds;
use crate::collect::allowance::ethtool::driver_version;
use crate::collect::collector::{Collector, CollectorConfig};
use crate::commands::cli::{ObserveArgs, RotateArgs};
use crate::commands::cli::{RecordArgs, WatchArgs};
use crate::pipeline::{Pipeline, RecordTarget};
use crate::record::RotateOptions;
use crate::shared::signals;
use crate::shared::usage_error::UsageError;
use crate::sinks::metrics::MetricsServer;
use crate::sinks::view::SilentView;
use crate::sinks::view::{Control, View};

pub fn run(args: &WatchArgs) -> Result<()> {
    // Refuse bad options before taking over the terminal.
    let thresholds = Thresholds::default()
        .with_assignments(&args.observe.thresholds)
        .map_err(anyhow::Error::msg)?;
    check_counter_paths(&args.observe.counters)?;
    let plan = crate::commands::baseline::for_live(&args.observe.instance)?;
    crate::commands::baseline::say(&plan);
    let target = args
        .record
        .as_deref()
        .map(|p| record_target(p, &args.rotate))
        .transpose()?;
    let view = crate::commands::choose_view(&args.view)?;
    if let Some((path, n)) = run_live(&args.observe, thresholds, plan, view, target)? {
        crate::stderr_line!(
            "throttlescope: recorded {n} intervals to {}",
            path.display()
        );
    }
    Ok(())
}

pub fn run_record(args: &RecordArgs) -> Result<()> {
    let thresholds = Thresholds::default()
        .with_assignments(&args.observe.thresholds)
        .map_err(anyhow::Error::msg)?;
    check_counter_paths(&args.observe.counters)?;
    let plan = crate::commands::baseline::for_live(&args.observe.instance)?;
    let target = record_target(&args.output, &args.rotate)?;
    let output = target.path.clone();
    let talk = !args.quiet;
    if talk {
        let until = match args.observe.duration {
            Some(d) => format!("for {d:?}"),
            None if std::io::stderr().is_terminal() => "until Ctrl-C".to_string(),
            None => "until stopped (SIGINT/SIGTERM)".to_string(),
        };
        crate::stderr_line!(
            "throttlescope: recording to {} every {:?} {until}",
            output.display(),
            args.observe.interval
        );
        crate::commands::baseline::say(&plan);
    }
    let done = run_live(
        &args.observe,
        thresholds,
        plan,
        Box::new(SilentView),
        Some(target),
    )?;
    if talk {
        let (path, n) = done.unwrap_or((output, 0));
        crate::stderr_line!(
            "throttlescope: {n} intervals in {}; review with `throttlescope report {}`",
            path.display(),
            path.display()
        );
    }
    Ok(())
}

/// Refuses a `--counters` file that does not exist, is a directory or is
/// not a regular file: a usage error (exit 2), one line, before anything
/// is attached or the terminal taken.
fn check_counter_paths(counters: &[(String, PathBuf)]) -> Result<()> {
    for (iface, path) in counters {
        if let Some(why) = crate::collect::allowance::counter_path_problem(path) {
            return Err(UsageError(format!("--counters {iface}={}: {why}", path.display())).into());
        }
    }
    Ok(())
}

/// `throttlescope thresholds`: every threshold with its default and meaning.
pub fn print_thresholds() {
    for t in Thresholds::describe() {
        println!(
            "{:<28} {:>10}  {} (allowed: {})",
            t.name, t.default, t.doc, t.range
        );
    }
}

/// Where `--record`/`record -o` writes, with the rotation options; refused
/// when the file exists (before any view takes the terminal).
fn record_target(path: &Path, rotate: &RotateArgs) -> Result<RecordTarget> {
    let rotate = RotateOptions {
        max_bytes: rotate.rotate_size,
        max_age: rotate.rotate_time,
        keep: rotate.keep,
    };
    RecordTarget::new(path, rotate, driver_version)
}

/// Observes live until the duration ends, the view quits or a signal.
pub(crate) fn run_live(
    observe: &ObserveArgs,
    thresholds: Thresholds,
    plan: crate::model::instance::Plan,
    view: Box<dyn View>,
    record: Option<RecordTarget>,
) -> Result<Option<(PathBuf, u64)>> {
    if let Some(d) = observe.duration.filter(|d| *d < observe.interval) {
        anyhow::bail!(
            "--duration {d:?} is shorter than one --interval {:?}: nothing would be reported",
            observe.interval
        );
    }
    let workloads = observe.workloads.filter()?;
    signals::install();
    let metrics = match observe.metrics {
        Some(addr) => {
            let m = MetricsServer::start(addr, observe.metrics_flows)?;
            // Port 0 asks the kernel for one: say which (not over the
            // full-screen view, which shows its own title).
            if !crate::sinks::tui::terminal::is_taken() {
                crate::stderr_line!(
                    "throttlescope: metrics on http://{}/metrics",
                    m.local_addr()
                );
            }
            Some(m)
        }
        None => None,
    };
    // Named in the OTLP resource (host.type) too.
    let plan_instance_type = plan.instance_type.clone();
    let mut pipeline = Pipeline::new(thresholds, plan.baseline, view);
    // The recording starts when observing does: the collector's baseline.
    if let Some(target) = record {
        pipeline.record_to(target, observe.interval, plan.instance_type)?;
    }
    if let Some(m) = metrics {
        pipeline.serve_metrics(m);
    }
    if let Some(url) = &observe.otlp {
        let resource = crate::sinks::otlp::ResourceInfo {
            host_name: crate::record::format::hostname(),
            on_ec2: matches!(
                crate::collect::instance::this_host(),
                crate::model::instance::HostIdentity::Ec2(_)
            ),
            instance_type: plan_instance_type.clone(),
        };
        let period = observe.otlp_period.unwrap_or(observe.interval);
        let exporter = match crate::sinks::otlp::OtlpExporter::start(
            url,
            period,
            observe.metrics_flows,
            resource,
        ) {
            Ok(e) => e,
            Err(e) => return pipeline.finish(Err(e)),
        };
        if !crate::sinks::tui::terminal::is_taken() {
            crate::stderr_line!(
                "throttlescope: pushing OTLP metrics to {} every {}",
                exporter.metrics_url(),
                crate::shared::units::secs(period.as_secs_f64())
            );
        }
        pipeline.push_otlp(exporter);
    }
    let collector = Collector::start(CollectorConfig {
        all_netns: observe.all_netns,
        interfaces: observe.interfaces.clone(),
        events: !observe.no_events,
        counter_files: observe.counters.clone(),
        host_queue: !observe.no_host_queue,
        per_packet: observe.per_packet,
        linklocal: !observe.no_linklocal,
        udp_openers: !observe.no_udp_openers,
        workloads,
        pod_logs: observe.pod_logs.clone(),
        probe_sampling: observe.probe_sampling,
        listed_flows: observe.list_flows,
        max_flows: observe.max_flows,
        peak_window_us: observe.peak_window,
        kafka: observe.kafka.clone(),
        kafka_period: observe.kafka_period,
        kafka_say: crate::sinks::otlp::say,
    });
    let mut collector = match collector {
        Ok(c) => c,
        Err(e) => return pipeline.finish(Err(e)),
    };
    let outcome = live_loop(observe, &mut collector, &mut pipeline);
    // The exporter's last deliveries overlap the rest of the stop (the
    // view, the recording's end record, the probes detached); it waits
    // last, and only for what is left of the stop's budget.
    let otlp = pipeline.take_otlp();
    let done = pipeline.finish(outcome);
    drop(collector);
    drop(otlp);
    done
}

fn live_loop(
    observe: &ObserveArgs,
    collector: &mut Collector,
    pipeline: &mut Pipeline,
) -> Result<()> {
    let started = Instant::now();
    let mut next = Instant::now() + observe.interval;
    loop {
        if pipeline.wait(next)? == Control::Quit {
            return Ok(());
        }
        // An interval that ends later than asked (by more than a tenth:
        // collecting and showing the last one took too long, or the
        // process was starved) is counted by the collector, and the next
        // one is a whole interval, not squeezed short to catch up.
        let due = next + observe.interval / 10;
        let now = Instant::now();
        if now > due {
            next = now;
        }
        next += observe.interval;
        collector.due_by(due);
        let snap = collector.collect()?;
        let storm = !snap.folded.is_empty();
        if pipeline.process(snap, "live")? == Control::Quit {
            return Ok(());
        }
        if storm {
            // A storm's interval held tens of MB for a moment (its flows'
            // samples, close records, a long encoded line); hand the freed
            // memory back instead of keeping it for the next storm.
            // SAFETY: glibc's malloc_trim takes no pointers; it only walks
            // the allocator's free lists.
            unsafe { libc::malloc_trim(0) };
        }
        if observe.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(());
        }
    }
}
