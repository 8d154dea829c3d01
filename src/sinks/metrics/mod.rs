//! Prometheus exporter: `--metrics ADDR` serves the last interval at
//! `GET /metrics` (names and labels: docs/metrics.md).
//!
//! Collection and serving never wait on each other: `update` encodes the
//! interval once and swaps the text in; the server thread hands out
//! whichever text is current. It binds exactly the address given and has
//! no authentication, so a non-loopback address must be asked for on
//! purpose; the connections, bytes and time any client can claim are
//! bounded (server.rs).

mod encode;
mod http;
mod server;
mod state;

use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use prometheus_client::registry::Registry;

use crate::analysis::exported::Exported;
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;
use crate::shared::stop_fd::StopFd;

pub use encode::to_prometheus_text;
#[doc(hidden)]
pub use http::fuzz_connection;
pub use state::ExporterState;

/// The exporter's state as it would be served: for tests and tools that
/// want the text without a server.
pub fn encode_state(state: ExporterState) -> String {
    encode::encode(&encode::registry(Arc::new(Mutex::new(state))))
}

fn exposition(registry: &Registry) -> http::Exposition {
    let openmetrics = encode::encode(registry);
    http::Exposition {
        prometheus: Arc::new(to_prometheus_text(&openmetrics)),
        openmetrics: Arc::new(openmetrics),
    }
}

/// Serves /metrics from a background thread; `update` publishes an
/// interval.
pub struct MetricsServer {
    addr: SocketAddr,
    top_flows: usize,
    state: Arc<Mutex<ExporterState>>,
    registry: Registry,
    published: http::Published,
    stats: Arc<server::Stats>,
    stop: Arc<StopFd>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving; `top_flows` bounds per-flow series.
    pub fn start(addr: SocketAddr, top_flows: usize) -> Result<Self> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| anyhow!("--metrics {addr}: cannot listen on {addr}: {e}"))?;
        listener
            .set_nonblocking(true)
            .with_context(|| format!("--metrics {addr}: making the listener non-blocking"))?;
        // Port 0 asks for any free port: report the one we got.
        let addr = listener.local_addr().unwrap_or(addr);
        let cap = server::connection_cap(server::soft_nofile());
        let stats = Arc::new(server::Stats::new(cap));
        let mut initial = ExporterState::new(top_flows);
        initial.endpoint = Some(stats.read());
        let state = Arc::new(Mutex::new(initial));
        let registry = encode::registry(state.clone());
        // Before the first interval /metrics already answers, with the
        // families that have values (`throttlescope_intervals_total 0`).
        let published = Arc::new(RwLock::new(Arc::new(exposition(&registry))));
        let stop = Arc::new(
            StopFd::new().with_context(|| format!("--metrics {addr}: making the stop eventfd"))?,
        );
        let thread = {
            let (published, stop, stats) = (published.clone(), stop.clone(), stats.clone());
            std::thread::Builder::new()
                .name("metrics-http".into())
                .spawn(move || server::run(listener, published, stop, stats, cap))
                .with_context(|| format!("--metrics {addr}: starting the HTTP thread"))?
        };
        Ok(MetricsServer {
            addr,
            top_flows,
            state,
            registry,
            published,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Per-flow series are exported for flows of rank 1..=top_flows.
    pub(crate) fn top_flows(&self) -> usize {
        self.top_flows
    }

    /// Publishes the latest interval and its analysis, keeping the run so
    /// far itself: for tools and tests without a judging unit (the
    /// pipeline's is [`Self::show`]).
    pub fn update(&self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        self.publish(|state| state.apply(snap, analysis));
    }

    /// Publishes the latest interval, its analysis and the run so far as
    /// the judging unit keeps it (the OTLP exporter's counters, with
    /// `--otlp`, come in its health).
    pub(crate) fn show(&self, snap: &Snapshot, analysis: &IntervalAnalysis, exported: &Exported) {
        self.publish(|state| state.show(snap, analysis, exported));
    }

    fn publish(&self, take: impl FnOnce(&mut ExporterState)) {
        {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            take(&mut state);
            // The endpoint's own counters as of this interval: one read
            // per interval keeps every scrape one consistent text.
            state.endpoint = Some(self.stats.read());
        }
        // Encoded outside the published lock: scrapes keep getting the
        // previous text until the new one is swapped in.
        let text = Arc::new(exposition(&self.registry));
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = text;
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // The server thread waits on `stop` beside its sockets; it closes
        // the listener and every connection as it returns.
        self.stop.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
