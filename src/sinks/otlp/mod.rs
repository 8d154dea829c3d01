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

mod encode;
mod http;
mod proto;
mod sender;

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use prost::Message;

use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;
use crate::sinks::metrics::ExporterState;

pub use encode::ResourceInfo;
pub use http::Endpoint;
pub(crate) use sender::OtlpCounters;

pub struct OtlpExporter {
    endpoint: Endpoint,
    resource: ResourceInfo,
    /// Metrics are pushed when at least this much snapshot time has passed
    /// since the last push.
    period: Duration,
    /// The same state the Prometheus exporter keeps: the exporter-summed
    /// counters and the top-N bound come from one place.
    state: ExporterState,
    /// The held verdict per interface at the previous interval.
    held: BTreeMap<String, encode::HeldState>,
    started_unix_ms: u64,
    last_push_mono_ns: Option<u64>,
    sender: sender::Sender,
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
            state: ExporterState::new(top_flows),
            held: BTreeMap::new(),
            started_unix_ms: crate::shared::clock::now_unix_ms(),
            last_push_mono_ns: None,
            sender,
        })
    }

    /// Where the metrics go, for the start-up line.
    pub fn metrics_url(&self) -> String {
        self.endpoint.url("/v1/metrics")
    }

    /// Takes in one interval: verdict changes are queued at once, the
    /// metrics when the period is due. Never waits on the network.
    pub fn update(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        self.state.apply(snap, analysis);
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
                &self.state,
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

    pub fn counters(&self) -> OtlpCounters {
        self.sender.counters()
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
