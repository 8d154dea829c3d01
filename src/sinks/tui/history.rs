//! The recent past of each interface, for the sparklines: throughput and
//! the allowance-exceeded rate of the last [`HISTORY_LEN`] intervals.

use std::collections::{BTreeMap, VecDeque};

use crate::analysis::{IntervalAnalysis, NormalisedRates};

/// Intervals kept per interface (a minute at the default interval).
pub(crate) const HISTORY_LEN: usize = 60;

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct IfaceHistory {
    /// tx bits/s per interval, oldest first.
    pub tx_bps: VecDeque<f64>,
    /// The highest allowance-exceeded % of the interval; `None` when the
    /// interface has no allowance counters or sent nothing.
    pub allowance_pct: VecDeque<Option<f64>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct History {
    per_iface: BTreeMap<String, IfaceHistory>,
}

/// The highest of an interval's allowance-exceeded rates (bandwidth out and
/// in, packet rate, conntrack, link-local): whichever allowance bites.
pub(crate) fn allowance_pct(r: &NormalisedRates) -> Option<f64> {
    [
        r.bw_out_pct,
        r.bw_in_pct,
        r.pps_pct,
        r.conntrack_pct,
        r.linklocal_pct,
    ]
    .into_iter()
    .flatten()
    .reduce(f64::max)
}

impl History {
    /// Adds an interval. Interfaces absent from it are forgotten, so the
    /// history stays bounded when interfaces come and go.
    pub(crate) fn push(&mut self, analysis: &IntervalAnalysis) {
        self.per_iface
            .retain(|name, _| analysis.interfaces.iter().any(|v| &v.iface == name));
        for v in &analysis.interfaces {
            let h = self.per_iface.entry(v.iface.clone()).or_default();
            h.tx_bps.push_back(v.rates.tx_bps);
            h.allowance_pct.push_back(allowance_pct(&v.rates));
            while h.tx_bps.len() > HISTORY_LEN {
                h.tx_bps.pop_front();
            }
            while h.allowance_pct.len() > HISTORY_LEN {
                h.allowance_pct.pop_front();
            }
        }
    }

    pub(crate) fn get(&self, iface: &str) -> Option<&IfaceHistory> {
        self.per_iface.get(iface)
    }
}

/// The newest `width` values of `v` (a sparkline draws one per column,
/// left to right, and would otherwise show the oldest).
pub(crate) fn newest<T: Copy>(v: &VecDeque<T>, width: usize) -> Vec<T> {
    v.iter()
        .skip(v.len().saturating_sub(width))
        .copied()
        .collect()
}
