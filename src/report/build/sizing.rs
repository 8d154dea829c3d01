//! The right-sizing section: the instance's interval rates over the span
//! (the interfaces summed as headroom sums them), their percentiles against
//! the baseline, the time and bytes above it, and the instance types whose
//! baseline covers what was needed.
//!
//! Only the baseline is sized against: burst is best effort and how long
//! it lasts cannot be predicted (docs/headroom.md), so a type is offered
//! when its baseline alone covers the p99 of both directions.
//!
//! Memory: one `f32` pair per interval in the span (the percentiles need
//! every rate); an `f32` keeps 7 significant digits, more than a rate is
//! shown with.

use std::collections::BTreeSet;

use crate::analysis::headroom::{is_ena, Headroom};
use crate::model::capacity::{BrokerCapacity, MeasuredBaseline, DEFAULT_MARGIN_PCT};
use crate::model::instance::Plan;
use crate::model::instance::{Arch, Baseline, SpecTable};
use crate::model::snapshot::{InterfaceSample, Snapshot};
use crate::report::filters::ReportFilters;
use crate::report::model::{CoveringType, DirectionSizing, EpisodeReport, RightSizing};

/// Covering types listed of the architecture offered first, and of others.
const SAME_ARCH_LISTED: usize = 5;
const OTHER_ARCH_LISTED: usize = 3;

/// One direction's rates and its time above the baseline.
#[derive(Debug, Default)]
struct Direction {
    rates: Vec<f32>,
    max_bps: f64,
    above_secs: f64,
    above_bytes: f64,
}

impl Direction {
    fn summary(&self, baseline_bps: Option<f64>) -> DirectionSizing {
        let mut sorted = self.rates.clone();
        sorted.sort_by(f32::total_cmp);
        let pct = |v: f64| baseline_bps.map(|b| v / b * 100.0);
        let p50 = nearest_rank(&sorted, 50.0);
        let p99 = nearest_rank(&sorted, 99.0);
        DirectionSizing {
            p50_bps: p50,
            p99_bps: p99,
            max_bps: self.max_bps,
            baseline_bps,
            p50_pct: pct(p50),
            p99_pct: pct(p99),
            max_pct: pct(self.max_bps),
            above_secs: self.above_secs,
            above_bytes: self.above_bytes,
        }
    }
}

/// The nearest-rank percentile: the smallest value with at least `p`% of
/// the values at or below it (always one of the values; 0 when none).
pub(super) fn nearest_rank(sorted: &[f32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    f64::from(sorted[rank.clamp(1, sorted.len()) - 1])
}

pub(super) struct Sizing {
    table: SpecTable,
    baseline: Option<Baseline>,
    note: Option<String>,
    arch: Option<(Arch, String)>,
    tx: Direction,
    rx: Direction,
    interfaces: BTreeSet<String>,
    intervals: u64,
    /// The headroom tracker's totals above the baseline after the last
    /// interval (tx secs, tx bytes, rx secs, rx bytes): an interval's share
    /// is the difference.
    last_totals: [f64; 4],
}

impl Sizing {
    /// `kernel`: the recording's `uname -r`, which on many distributions
    /// ends with the architecture.
    pub(super) fn new(plan: Plan, kernel: &str) -> Self {
        let arch = arch_of(&plan, kernel);
        Sizing {
            table: plan.table,
            baseline: plan.baseline,
            note: plan.note,
            arch,
            tx: Direction::default(),
            rx: Direction::default(),
            interfaces: BTreeSet::new(),
            intervals: 0,
            last_totals: [0.0; 4],
        }
    }

    /// Every interval read, in the span or not (the tracker's totals run
    /// over all of them); `headroom`: the tracker's figures for `snap`.
    pub(super) fn push(
        &mut self,
        snap: &Snapshot,
        headroom: Option<&Headroom>,
        in_span: bool,
        filters: &ReportFilters,
    ) {
        let totals = headroom.map(|h| {
            [
                h.tx.above_secs_total,
                h.tx.above_bytes_total,
                h.rx.above_secs_total,
                h.rx.above_bytes_total,
            ]
        });
        let before = totals.map(|t| std::mem::replace(&mut self.last_totals, t));
        let secs = snap.interval_secs();
        if !in_span || secs <= 0.0 {
            return;
        }
        let kept: Vec<&InterfaceSample> = snap
            .interfaces
            .iter()
            .filter(|i| filters.iface_matches(&i.name))
            .collect();
        // Headroom's rule over the interfaces `--iface` keeps: the ENA
        // ones when there are any, else all of them.
        let any_ena = kept.iter().any(|i| is_ena(i));
        let summed: Vec<&InterfaceSample> =
            kept.into_iter().filter(|i| is_ena(i) || !any_ena).collect();
        for i in &summed {
            if !self.interfaces.contains(&i.name) {
                self.interfaces.insert(i.name.clone());
            }
        }
        let bits = |rx: bool| -> f64 {
            summed
                .iter()
                .map(|i| if rx { i.delta.rx_bytes } else { i.delta.tx_bytes } as f64 * 8.0)
                .sum()
        };
        let (tx_bits, rx_bits) = (bits(false), bits(true));
        self.intervals += 1;
        for (d, b) in [(&mut self.tx, tx_bits), (&mut self.rx, rx_bits)] {
            let bps = b / secs;
            d.rates.push(bps as f32);
            d.max_bps = d.max_bps.max(bps);
        }
        match (totals.zip(before), &self.baseline) {
            // Every interface: the tracker's own figures, those the live
            // view and the exporter counted.
            (Some((now, before)), _) if filters.interfaces.is_empty() => {
                self.tx.above_secs += now[0] - before[0];
                self.tx.above_bytes += now[1] - before[1];
                self.rx.above_secs += now[2] - before[2];
                self.rx.above_bytes += now[3] - before[3];
            }
            // `--iface`: the same rule over the interfaces kept.
            (_, Some(b)) => {
                for (d, bits, base) in [
                    (&mut self.tx, tx_bits, b.tx_bps),
                    (&mut self.rx, rx_bits, b.rx_bps),
                ] {
                    let beyond = bits - base * secs;
                    if beyond > 0.0 {
                        d.above_secs += secs;
                        d.above_bytes += beyond / 8.0;
                    }
                }
            }
            _ => {}
        }
    }

    pub(super) fn finish(&self, interval_secs: f64) -> RightSizing {
        let b = self.baseline.as_ref();
        let tx = self.tx.summary(b.map(|b| b.tx_bps));
        let rx = self.rx.summary(b.map(|b| b.rx_bps));
        let arch = self.arch.as_ref().map(|(a, _)| *a);
        let all = if self.intervals > 0 {
            self.table.covering(tx.p99_bps, rx.p99_bps, arch)
        } else {
            Vec::new()
        };
        let entry = |s: &crate::model::instance::InstanceSpec| CoveringType {
            instance_type: s.instance_type.clone(),
            arch: s.arch,
            vcpus: s.vcpus,
            baseline_bps: s.baseline_bps,
            burst_bps: s.burst_bps,
            same_arch: Some(s.arch) == arch,
        };
        let covering = match arch {
            Some(a) => all
                .iter()
                .filter(|s| s.arch == a)
                .take(SAME_ARCH_LISTED)
                .chain(all.iter().filter(|s| s.arch != a).take(OTHER_ARCH_LISTED))
                .map(|s| entry(s))
                .collect(),
            None => all
                .iter()
                .take(SAME_ARCH_LISTED + OTHER_ARCH_LISTED)
                .map(|s| entry(s))
                .collect(),
        };
        RightSizing {
            baseline: self.baseline.clone(),
            note: self.note.clone(),
            interval_secs,
            intervals: self.intervals,
            interfaces: self.interfaces.iter().cloned().collect(),
            tx,
            rx,
            arch,
            arch_from: self.arch.as_ref().map(|(_, from)| from.clone()),
            covering,
            covering_total: all.len(),
            capacity: self.capacity(),
            measured: None,
            table_origin: self.table.origin.clone(),
            table_retrieved: self.table.retrieved.clone(),
            table_sources: self.table.sources.clone(),
        }
    }
}

impl Sizing {
    /// The capacity lines `throttlescope capacity` prints for this host:
    /// from the baseline planned against, with the default margin.
    fn capacity(&self) -> Option<BrokerCapacity> {
        let b = self.baseline.as_ref()?;
        let spec = b.instance_type.as_deref().and_then(|t| self.table.get(t));
        Some(BrokerCapacity {
            broker_id: None,
            instance_type: b
                .instance_type
                .clone()
                .unwrap_or_else(|| "this host".to_string()),
            vcpus: spec.and_then(|s| s.vcpus),
            out_bps: b.tx_bps,
            in_bps: b.rx_bps,
            from: if b.published() {
                format!("published, {}", b.source)
            } else {
                b.source.clone()
            },
            margin_pct: DEFAULT_MARGIN_PCT,
        })
    }
}

/// The baseline the recording's enforcement episodes held: those that
/// stepped down from a burst against a published baseline, the rate during
/// each (the lowest per direction). None when there were none.
pub(super) fn measured(episodes: &[EpisodeReport]) -> Option<MeasuredBaseline> {
    let mut m = MeasuredBaseline::default();
    for e in episodes {
        let e = &e.episode;
        let Some(during) = e.throughput_during_bps else {
            continue;
        };
        if e.stepped_down && e.planned.as_ref().is_some_and(|p| p.published) {
            m.add(e.peak_signal.starts_with("bw_in"), during);
        }
    }
    (m.episodes > 0).then_some(m)
}

/// The architecture to offer first: the baseline's, else the recorded
/// instance type's in the table, else the one the kernel release names.
fn arch_of(plan: &Plan, kernel: &str) -> Option<(Arch, String)> {
    if let Some(b) = &plan.baseline {
        if let Some(a) = b.arch {
            let of = b.instance_type.as_deref().unwrap_or("the baseline");
            return Some((a, format!("that of {of}")));
        }
    }
    if let Some(spec) = plan
        .instance_type
        .as_deref()
        .and_then(|t| plan.table.get(t))
    {
        return Some((spec.arch, format!("that of {}", spec.instance_type)));
    }
    // Amazon Linux's and Debian's say (`6.1.55-75.123.amzn2023.x86_64`,
    // `6.1.0-18-cloud-amd64`); Ubuntu's (`6.8.0-1015-aws`) does not.
    let k = kernel.to_ascii_lowercase();
    let named = if k.contains("aarch64") || k.contains("arm64") {
        Some(Arch::Arm64)
    } else if k.contains("x86_64") || k.contains("amd64") {
        Some(Arch::X86_64)
    } else {
        None
    };
    named.map(|a| (a, format!("the recording host's (kernel {kernel})")))
}
