//! Prometheus exporter. PLACEHOLDER until the exporter lands.

use std::net::SocketAddr;

use anyhow::{bail, Result};

use crate::analysis::IntervalAnalysis;
use crate::snapshot::Snapshot;

/// Serves /metrics from a background thread; `update` publishes an interval.
pub struct MetricsServer;

impl MetricsServer {
    /// Binds `addr` and starts serving; `top_flows` bounds per-flow series.
    pub fn start(addr: SocketAddr, top_flows: usize) -> Result<Self> {
        let _ = top_flows;
        bail!("--metrics {addr}: the exporter is not built yet")
    }

    /// Publishes the latest interval and its analysis.
    pub fn update(&self, snap: &Snapshot, analysis: &IntervalAnalysis) {
        let _ = (snap, analysis);
    }
}
