//! OpenTelemetry exporter: `--otlp URL` pushes each interval's metrics to
//! an OTLP/HTTP collector (`POST /v1/metrics`, protobuf) every
//! `--otlp-period`, and the held verdicts' starts and ends as log records
//! (`POST /v1/logs`) as they happen. Names and attributes: docs/metrics.md,
//! "OTLP".
//!
//! A sink like the others: `update` renders the interval into encoded
//! batches and queues them; delivery runs on its own thread with a bounded
//! queue (sender.rs), so a collector that is down or slow costs the
//! pipeline nothing but the encoding, and memory stays bounded.
//!
//! The counters of that delivery (`OtlpHealth`: sent, dropped, failed
//! requests, queued) go into each snapshot's health, so every sink shows
//! them. At the end of a run the queue is drained only for what is left of
//! the stop's budget ([`OtlpExporter::stop`], then drop): what is given up
//! is counted as dropped and said in one line.

mod encode;
mod http;
mod proto;
mod sender;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use prost::Message;

use crate::analysis::exported::Exported;
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;

pub use encode::ResourceInfo;
pub use http::Endpoint;

/// How long the end of a run waits for the queue to drain when nothing
/// else bounds it (a `--duration` that ended, the view quit): a down
/// collector must not hold the end of a run for its backoff.
const DRAIN_AT_EXIT: Duration = Duration::from_secs(2);
/// After a signal the drain ends this long before the watchdog would end
/// the process (`signals::stop_budget_left`): what follows it (the last
/// line, the process's exit) fits in that.
const STOP_MARGIN: Duration = Duration::from_millis(200);

/// One stderr line through the program's one writer (`stderr_line!`),
/// from any thread; none while the full-screen view owns the terminal (it
/// would draw over it): the counts are in its health line then.
pub(crate) fn say(line: std::fmt::Arguments) {
    if crate::sinks::tui::terminal::is_taken() {
        return;
    }
    crate::stderr_line!("{line}");
}

pub struct OtlpExporter {
    endpoint: Endpoint,
    resource: ResourceInfo,
    /// Metrics are pushed when at least this much snapshot time has passed
    /// since the last push.
    period: Duration,
    /// Per-flow series for flows of rank 1..=top_flows (`--metrics-flows`).
    top_flows: usize,
    /// The held verdict per interface at the previous interval.
    held: BTreeMap<String, encode::HeldState>,
    started_unix_ms: u64,
    last_push_mono_ns: Option<u64>,
    sender: sender::Sender,
    /// When the run's end began ([`OtlpExporter::stop`]).
    stopping_since: Option<Instant>,
}

impl OtlpExporter {
    /// `url`: `http://host[:port][/prefix]`; `top_flows`: the per-flow
    /// bound (`--metrics-flows`).
    pub fn start(
        url: &str,
        period: Duration,
        top_flows: usize,
        resource: ResourceInfo,
    ) -> Result<Self> {
        let endpoint = Endpoint::parse(url).map_err(|e| anyhow!("--otlp {e}"))?;
        let sender = sender::Sender::start(endpoint.clone())
            .with_context(|| format!("--otlp {url}: starting the push thread"))?;
        Ok(OtlpExporter {
            endpoint,
            resource,
            period,
            top_flows,
            held: BTreeMap::new(),
            started_unix_ms: crate::shared::clock::now_unix_ms(),
            last_push_mono_ns: None,
            sender,
            stopping_since: None,
        })
    }

    /// Per-flow series for flows of rank 1..=top_flows: the bound the
    /// judging unit keeps the run with (`Exported::top_flows`).
    pub(crate) fn top_flows(&self) -> usize {
        self.top_flows
    }

    /// Where the metrics go, for the start-up line.
    pub fn metrics_url(&self) -> String {
        self.endpoint.url("/v1/metrics")
    }

    /// Takes in one interval, with the run so far as the judging unit
    /// keeps it (`exported`): verdict changes are queued at once, the
    /// metrics when the period is due. Never waits on the network.
    pub(crate) fn update(
        &mut self,
        snap: &Snapshot,
        analysis: &IntervalAnalysis,
        exported: &Exported,
    ) {
        let records = encode::verdict_changes(&mut self.held, snap, analysis);
        if !records.is_empty() {
            let req = encode::logs_request(&self.resource, records);
            self.sender.queue(sender::Batch {
                path: "/v1/logs",
                body: req.encode_to_vec(),
            });
        }
        if period_due(self.last_push_mono_ns, snap, self.period) {
            self.last_push_mono_ns = Some(snap.mono_ns);
            let req = encode::metrics_request(
                &self.resource,
                exported,
                snap,
                analysis,
                self.started_unix_ms,
            );
            self.sender.queue(sender::Batch {
                path: "/v1/metrics",
                body: req.encode_to_vec(),
            });
        }
    }

    pub fn counters(&self) -> crate::model::snapshot::OtlpHealth {
        self.sender.counters()
    }

    /// The run is ending: the last deliveries go on while the rest of the
    /// stop does (the view, the recording, the probes); dropping the
    /// exporter then waits for them, bounded.
    pub fn stop(&mut self) {
        self.stopping_since.get_or_insert_with(Instant::now);
        self.sender.stop();
    }
}

impl Drop for OtlpExporter {
    /// Waits for the last deliveries until [`DRAIN_AT_EXIT`] after the
    /// stop began, and after a signal no later than [`STOP_MARGIN`] before
    /// the watchdog's end; what is left is given up, counted as dropped,
    /// and said in one line.
    fn drop(&mut self) {
        self.stop();
        let since = self.stopping_since.unwrap_or_else(Instant::now);
        let deadline = || {
            let end = since + DRAIN_AT_EXIT;
            // The watchdog's end, as an instant (fixed once passed: the
            // budget left shrinks as the clock goes), less the margin.
            match crate::shared::signals::stop_budget_left() {
                Some(left) => {
                    let watchdog = Instant::now() + left;
                    end.min(watchdog.checked_sub(STOP_MARGIN).unwrap_or(watchdog))
                }
                None => end,
            }
        };
        let drained = self.sender.drain(&deadline);
        if drained.given_up == 0 {
            return;
        }
        let c = self.sender.counters();
        let why = if drained.timed_out {
            format!(
                "the collector had not answered within {} of the stop",
                crate::shared::units::secs(since.elapsed().as_secs_f64())
            )
        } else {
            "delivery was failing".to_string()
        };
        say(format_args!(
            "throttlescope: OTLP {}: {} batches not delivered at the end of the run ({why}), counted as dropped; in all {} sent, {} dropped, {} failed requests",
            self.endpoint.url(""),
            drained.given_up,
            c.sent,
            c.dropped,
            c.failures
        ));
    }
}

/// Whether the metrics push is due at `snap`: at the first interval, then
/// when a period has passed since `last` (the last push's interval end),
/// less half an interval, so a period equal to the interval pushes every
/// interval despite jitter and `--otlp-period 10s` at 1 s pushes every 10th.
fn period_due(last: Option<u64>, snap: &Snapshot, period: Duration) -> bool {
    match last {
        None => true,
        Some(last) => {
            snap.mono_ns.saturating_sub(last) + snap.interval_ns / 2 >= period.as_nanos() as u64
        }
    }
}

#[cfg(test)]
mod tests;
