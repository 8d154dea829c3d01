//! Prometheus exporter: `--metrics ADDR` serves the last interval at
//! `GET /metrics` (names and labels: docs/metrics.md).
//!
//! Collection and serving never wait on each other: `update` encodes the
//! interval once and swaps the text in; HTTP workers hand out whichever text
//! is current. It binds exactly the address given and has no
//! authentication, so a non-loopback address must be asked for on purpose.

mod encode;
mod http;
mod state;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use prometheus_client::registry::Registry;
use tiny_http::Server;

use crate::analysis::IntervalAnalysis;
use crate::snapshot::Snapshot;

pub use encode::{to_prometheus_text, OPENMETRICS_TYPE, PROMETHEUS_TYPE};
pub use state::ExporterState;

/// Threads answering requests. tiny_http reads each connection on a thread
/// of its own, so these only pick up parsed requests and write replies.
const WORKERS: usize = 2;

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

/// Serves /metrics from background threads; `update` publishes an interval.
pub struct MetricsServer {
    addr: SocketAddr,
    state: Arc<Mutex<ExporterState>>,
    registry: Registry,
    published: http::Published,
    server: Arc<Server>,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `addr` and starts serving; `top_flows` bounds per-flow series.
    pub fn start(addr: SocketAddr, top_flows: usize) -> Result<Self> {
        let server = Server::http(addr)
            .map_err(|e| anyhow!("--metrics {addr}: cannot listen on {addr}: {e}"))?;
        // Port 0 asks for any free port: report the one we got.
        let addr = server.server_addr().to_ip().unwrap_or(addr);
        let server = Arc::new(server);
        let state = Arc::new(Mutex::new(ExporterState::new(top_flows)));
        let registry = encode::registry(state.clone());
        // Before the first interval /metrics already answers, with the
        // families that have values (`throttlescope_intervals_total 0`).
        let published = Arc::new(RwLock::new(Arc::new(exposition(&registry))));
        let stop = Arc::new(AtomicBool::new(false));
        let mut workers = Vec::with_capacity(WORKERS);
        for i in 0..WORKERS {
            let (server, published, stop) = (server.clone(), published.clone(), stop.clone());
            let worker = std::thread::Builder::new()
                .name(format!("metrics-http-{i}"))
                .spawn(move || http::worker(server, published, stop))
                .with_context(|| format!("--metrics {addr}: starting an HTTP worker"))?;
            workers.push(worker);
        }
        Ok(MetricsServer {
            addr,
            state,
            registry,
            published,
            server,
            stop,
            workers,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Publishes the latest interval and its analysis.
    pub fn update(&self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .apply(snap, analysis);
        // Encoded outside the published lock: scrapes keep getting the
        // previous text until the new one is swapped in.
        let text = Arc::new(exposition(&self.registry));
        *self.published.write().unwrap_or_else(|e| e.into_inner()) = text;
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Each unblock wakes one worker waiting in recv().
        for _ in 0..self.workers.len() {
            self.server.unblock();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests;
