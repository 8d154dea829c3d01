//! What `watch`, `record` and `replay` do with each interval, wherever it
//! came from (the live kernel or a recording): the judging unit
//! (src/analysis/judging.rs), then the sinks (a view, the recorder, the
//! metrics endpoint, the OTLP exporter), which only render what it gives.
//! Data flows one way; the source is the command's (commands/watch.rs,
//! commands/replay.rs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::analysis::{Judging, Thresholds};
use crate::model::instance::Baseline;
use crate::model::snapshot::Snapshot;
use crate::record::format::hostname;
use crate::record::{
    segments, writer, EndReason, InterfaceInfo, RotateOptions, TraceHeader, TraceWriter,
};
use crate::shared::signals;
use crate::sinks::metrics::MetricsServer;
use crate::sinks::otlp::OtlpExporter;
use crate::sinks::view::{Control, View};

/// Where a recording goes. The file is created at the first interval, so
/// its header can name the interfaces and drivers actually observed.
pub(crate) struct RecordTarget {
    pub path: PathBuf,
    pub rotate: RotateOptions,
    /// The driver version of an interface, for the header: read from the
    /// running system by the command that records (the pipeline reads
    /// nothing itself).
    pub driver_version: fn(&str) -> Option<String>,
}

impl RecordTarget {
    /// `path` with `{start}` and `{host}` filled in; refused when a file of
    /// that name exists (checked here, before any view takes the terminal).
    pub(crate) fn new(
        path: &Path,
        rotate: RotateOptions,
        driver_version: fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let path = segments::expand_name(path, crate::shared::clock::now_unix_ms(), &hostname());
        writer::refuse_existing(&path, &rotate)?;
        Ok(RecordTarget {
            path,
            rotate,
            driver_version,
        })
    }
}

struct Recorder {
    target: RecordTarget,
    interval: Duration,
    thresholds: serde_json::Value,
    /// When observing started (wall ms, monotonic ns): the header's start,
    /// though the file is only created at the first interval.
    started: (u64, u64),
    /// The instance type DMI named, for the header.
    instance_type: Option<String>,
    writer: Option<TraceWriter>,
    /// The baseline the run plans against, for the header.
    baseline: Option<Baseline>,
}

impl Recorder {
    fn write(&mut self, snap: &Snapshot) -> Result<()> {
        if self.writer.is_none() {
            let interfaces = snap
                .interfaces
                .iter()
                .map(|i| InterfaceInfo {
                    name: i.name.clone(),
                    driver: i.driver.clone(),
                    driver_version: (self.target.driver_version)(&i.name),
                })
                .collect();
            let mut header = TraceHeader::for_this_host(
                interfaces,
                self.interval.as_nanos() as u64,
                self.thresholds.clone(),
            );
            (header.start_unix_ms, header.start_mono_ns) = self.started;
            header.instance_type = self.instance_type.clone();
            header.baseline = self.baseline.clone();
            self.writer = Some(TraceWriter::create(
                &self.target.path,
                header,
                self.target.rotate.clone(),
            )?);
            signals::recording_open(true);
        }
        let writer = self.writer.as_mut().expect("created above");
        writer.write(snap).with_context(|| {
            format!(
                "{}: recording stopped, and with it observing; the {} intervals already written are intact",
                writer.path().display(),
                writer.intervals()
            )
        })
    }

    /// Closes the file with its end record; returns the intervals written.
    fn finish(self, reason: EndReason) -> Result<u64> {
        match self.writer {
            Some(w) => {
                let n = w.intervals();
                w.finish_with(reason)?;
                signals::recording_open(false);
                Ok(n)
            }
            None => Ok(0),
        }
    }
}

/// Analysis plus every sink of one run.
pub(crate) struct Pipeline {
    /// Holds the run's thresholds and baseline.
    judging: Judging,
    view: Box<dyn View>,
    recorder: Option<Recorder>,
    metrics: Option<MetricsServer>,
    otlp: Option<OtlpExporter>,
}

impl Pipeline {
    /// `baseline`: what headroom is measured against (None: no headroom).
    pub(crate) fn new(
        thresholds: Thresholds,
        baseline: Option<Baseline>,
        view: Box<dyn View>,
    ) -> Self {
        Pipeline {
            judging: Judging::new(thresholds, baseline),
            view,
            recorder: None,
            metrics: None,
            otlp: None,
        }
    }

    /// Records every interval to `target`; `instance_type` is what DMI
    /// named, for the header.
    pub(crate) fn record_to(
        &mut self,
        target: RecordTarget,
        interval: Duration,
        instance_type: Option<String>,
    ) -> Result<()> {
        let thresholds =
            serde_json::to_value(self.judging.thresholds()).context("encoding the thresholds")?;
        self.recorder = Some(Recorder {
            target,
            interval,
            thresholds,
            started: (
                crate::shared::clock::now_unix_ms(),
                crate::shared::clock::monotonic_ns(),
            ),
            writer: None,
            instance_type,
            baseline: self.judging.baseline().cloned(),
        });
        Ok(())
    }

    pub(crate) fn serve_metrics(&mut self, server: MetricsServer) {
        self.judging.export(server.top_flows());
        self.metrics = Some(server);
    }

    /// Pushes every interval to an OTLP collector (`--otlp`).
    pub fn push_otlp(&mut self, exporter: OtlpExporter) {
        self.judging.export(exporter.top_flows());
        self.otlp = Some(exporter);
    }

    /// Judges `snap` against the history and hands both to every sink.
    pub(crate) fn process(&mut self, mut snap: Snapshot, source: &str) -> Result<Control> {
        // The exporter's delivery so far is part of the observer's health:
        // recorded, shown and served with the rest.
        if let Some(o) = &self.otlp {
            snap.health.otlp = Some(o.counters());
        }
        let analysis = self.judging.judge(&snap, |_| true, true);
        // The recording first: it is what survives the incident.
        if let Some(r) = &mut self.recorder {
            r.write(&snap)?;
        }
        // Queues the interval's batches (delivery is on the exporter's
        // own thread).
        if let Some(exported) = self.judging.exported() {
            if let Some(o) = &mut self.otlp {
                o.update(&snap, &analysis, exported);
            }
            if let Some(m) = &self.metrics {
                m.show(&snap, &analysis, exported);
            }
        }
        self.view.show(&snap, &analysis, source)
    }

    /// The OTLP exporter, its stop begun: its last deliveries go on while
    /// the rest of the run ends, and dropping it (last) waits for them
    /// within the stop's budget.
    pub(crate) fn take_otlp(&mut self) -> Option<OtlpExporter> {
        let mut o = self.otlp.take()?;
        o.stop();
        Some(o)
    }

    /// The walk's `NewRecording`: the next intervals are another
    /// recording's, judged from a fresh start (`Judging::new_recording`),
    /// as `report` does at the same place; `start` is its header's.
    pub(crate) fn new_recording(&mut self, start: (u64, u64)) {
        self.judging.new_recording(start);
    }

    /// The walk's `NextFile`: another file of the same recording.
    pub(crate) fn read_file(&mut self, start: (u64, u64)) {
        self.judging.read_file(start);
    }

    /// Seconds from the first recording's origin to the end of `snap`: the
    /// time `report` gives the same interval.
    pub(crate) fn place(&mut self, snap: &Snapshot) -> f64 {
        self.judging.place(snap)
    }

    pub(crate) fn wait(&mut self, deadline: Instant) -> Result<Control> {
        self.view.wait(deadline)
    }

    /// The source has no more intervals: the view may hold its last screen.
    pub(crate) fn end_of_input(&mut self) -> Result<()> {
        self.view.end_of_input()
    }

    /// Restores the view, then closes the recording (its end record says
    /// `hangup` when the stop came from the terminal going away);
    /// `outcome` is the loop's result, kept in front of any error from
    /// closing.
    pub(crate) fn finish(mut self, outcome: Result<()>) -> Result<Option<(PathBuf, u64)>> {
        let view_done = self.view.finish();
        let reason = if signals::hung_up() {
            EndReason::Hangup
        } else {
            EndReason::Stopped
        };
        let recorded = match self.recorder.take() {
            Some(r) => {
                let path = r.target.path.clone();
                r.finish(reason).map(|n| Some((path, n)))
            }
            None => Ok(None),
        };
        outcome?;
        view_done?;
        recorded
    }
}
