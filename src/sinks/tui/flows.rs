//! The flow table's rows: the analysis' attributions (ranked by backoff)
//! joined with their snapshot samples, filtered and sorted as asked.

use std::cmp::Ordering;

use super::format::clip;
use crate::analysis::{FlowAttribution, IntervalAnalysis};
use crate::model::snapshot::Snapshot;

/// The order of the flow table. Every key puts the most notable flow
/// first: the most backed off, the fastest, the most retransmits, the most
/// inflated RTT, the smallest congestion window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SortKey {
    #[default]
    Backoff,
    TxRate,
    Retransmits,
    RttInflation,
    Cwnd,
}

impl SortKey {
    pub(crate) const ALL: [SortKey; 5] = [
        SortKey::Backoff,
        SortKey::TxRate,
        SortKey::Retransmits,
        SortKey::RttInflation,
        SortKey::Cwnd,
    ];

    pub(crate) fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            SortKey::Backoff => "backoff",
            SortKey::TxRate => "tx rate",
            SortKey::Retransmits => "retransmits",
            SortKey::RttInflation => "rtt inflation",
            SortKey::Cwnd => "cwnd (smallest)",
        }
    }
}

/// One row of the flow table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlowRow<'a> {
    pub attr: &'a FlowAttribution,
    pub tx_bps: f64,
    /// Closed during the interval (shown once, then gone).
    pub closed: bool,
    /// The interface the flow uses (`FlowSample::iface_label`).
    pub iface: Option<String>,
    /// Its pod, container, service or namespace (`FlowSample::workload_label`).
    pub workload: Option<String>,
}

impl FlowRow<'_> {
    /// srtt / min_rtt from the current values; `None` when either is unknown.
    pub(crate) fn rtt_inflation(&self) -> Option<f64> {
        let a = self.attr;
        (a.srtt_us > 0 && a.min_rtt_us > 0).then(|| a.srtt_us as f64 / a.min_rtt_us as f64)
    }

    /// `comm[thread]/pid`, as the plain view and the text report name it (on
    /// a JVM every flow is `java`; the sending thread tells them apart), in
    /// at most `width` characters: the thread's name is cut first, so the
    /// pid stays whole.
    pub(crate) fn owner_label(&self, width: usize) -> String {
        let Some(o) = &self.attr.owner else {
            return "-".into();
        };
        let full = o.label_with_thread();
        if full.chars().count() <= width {
            return full;
        }
        let plain = o.label();
        // `comm[` + `~]` around what is left of the thread.
        let room = width.saturating_sub(plain.chars().count() + 3);
        match o.other_thread() {
            Some(t) if room >= 3 => {
                o.label_naming(&clip(&crate::shared::terminal_text::inert(t), room + 1))
            }
            _ => clip(&plain, width),
        }
    }

    pub(crate) fn state_label(&self) -> String {
        if self.closed {
            "closed".into()
        } else if self.attr.ca_state == "open" || self.attr.ca_state.is_empty() {
            self.attr.state.clone()
        } else {
            format!("{} {}", self.attr.state, self.attr.ca_state)
        }
    }

    /// Does the filter match this flow's peer address (or `addr:port`), its
    /// local port (`:9092`), its owner's process name or its workload (pod,
    /// container, service, namespace)? Case-insensitive;
    /// an empty filter matches every flow.
    pub(crate) fn matches(&self, filter: &str) -> bool {
        let filter = filter.trim().to_lowercase();
        if filter.is_empty() {
            return true;
        }
        let a = self.attr;
        if let Some(port) = filter.strip_prefix(':') {
            if port.parse::<u16>().ok() == Some(a.local.port()) {
                return true;
            }
        }
        a.peer.to_string().to_lowercase().contains(&filter)
            || a.owner.as_ref().is_some_and(|o| {
                o.comm.to_lowercase().contains(&filter)
                    || o.thread
                        .as_ref()
                        .is_some_and(|t| t.to_lowercase().contains(&filter))
            })
            || self
                .workload
                .as_ref()
                .is_some_and(|w| w.to_lowercase().contains(&filter))
    }
}

/// The rows of an interval: `analysis.flows` matching `filter`, in `sort`
/// order (ties keep the backoff rank).
pub(crate) fn rows<'a>(
    snap: &Snapshot,
    analysis: &'a IntervalAnalysis,
    sort: SortKey,
    filter: &str,
) -> Vec<FlowRow<'a>> {
    let secs = snap.interval_secs();
    let mut out: Vec<FlowRow<'a>> = analysis
        .flows
        .iter()
        .map(|attr| {
            let sample = snap.flows.iter().find(|f| f.id == attr.flow_id);
            FlowRow {
                attr,
                tx_bps: if secs > 0.0 {
                    attr.bytes_sent as f64 * 8.0 / secs
                } else {
                    0.0
                },
                closed: sample.is_some_and(|f| f.closed),
                iface: sample.map(|f| f.iface_label().to_string()),
                workload: sample.and_then(|f| f.workload_label()),
            }
        })
        .filter(|r| r.matches(filter))
        .collect();
    // Ties keep the backoff rank; the flows with no rank (0) after them.
    let rank = |r: &FlowRow| (r.attr.rank == 0, r.attr.rank);
    out.sort_by(|a, b| order(sort, a, b).then(rank(a).cmp(&rank(b))));
    out
}

fn order(sort: SortKey, a: &FlowRow, b: &FlowRow) -> Ordering {
    match sort {
        SortKey::Backoff => Ordering::Equal,
        SortKey::TxRate => b.tx_bps.total_cmp(&a.tx_bps),
        SortKey::Retransmits => b.attr.retransmits.cmp(&a.attr.retransmits),
        // Unknown inflation goes last.
        SortKey::RttInflation => match (a.rtt_inflation(), b.rtt_inflation()) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        },
        SortKey::Cwnd => a.attr.cwnd.cmp(&b.attr.cwnd),
    }
}
