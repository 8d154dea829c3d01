//! The health block over the report's span: the snapshots' cumulative
//! counters turned into their growth, programs never attached, and the
//! intervals whose allowance read was not judged.

use std::collections::BTreeMap;

use crate::analysis::trust::UNTRUSTED_SIGNAL;
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::Snapshot;
use crate::report::filters::ReportFilters;
use crate::report::model::{HealthSummary, KafkaLookupSummary, OtlpSummary, ProgramSummary};

/// A cumulative counter of the snapshot's health block, turned into its
/// growth over the report's span.
#[derive(Debug, Default, Clone)]
struct Cumulative {
    prev: Option<u64>,
    total: u64,
}

impl Cumulative {
    /// `value` as read in the next snapshot. `from_zero`: the counter is
    /// known to have started at 0 (the observer's first interval, or a
    /// counter that appears in a recording already under way). A value
    /// lower than the previous one is an observer restart: it counts again
    /// from 0.
    fn observe(&mut self, value: u64, from_zero: bool, count: bool) {
        let base = self.prev.or(from_zero.then_some(0));
        if let (Some(b), true) = (base, count) {
            self.total += if value >= b { value - b } else { value };
        }
        self.prev = Some(value);
    }

    /// A new recording: a new observer, whose counters start again.
    fn restart(&mut self) {
        self.prev = None;
    }
}

#[derive(Debug, Default)]
pub(super) struct HealthAcc {
    program_events: BTreeMap<String, Cumulative>,
    program_missed: BTreeMap<String, Cumulative>,
    /// Programs not attached: (why, what is lost).
    program_absent: BTreeMap<String, (String, String)>,
    ringbuf_drops: Cumulative,
    closes_lost: Cumulative,
    closes_deferred: Cumulative,
    /// Flows whose close the kernel did not run the close program for,
    /// found gone by the sweep (`Health::moved_set_gone`).
    closes_missed: Cumulative,
    /// Flows folded past the listing limit, and the intervals that folded.
    folded_flows: u64,
    folded_intervals: u64,
    untracked_flows: Cumulative,
    counter_read_failures: Cumulative,
    host_queue_untracked: Cumulative,
    late_intervals: Cumulative,
    /// The OTLP exporter's counters (sent, dropped, failures), the deepest
    /// queue, and whether any interval of the span carried them.
    otlp: [Cumulative; 3],
    otlp_max_queued: u64,
    otlp_seen: bool,
    /// The Kafka lookup's counters (ok, failed), and what the span's last
    /// interval with a lookup said (target, latest error, local broker,
    /// directory age), when any interval carried them.
    kafka: [Cumulative; 2],
    kafka_last: Option<crate::model::snapshot::KafkaHealth>,
    probe_sampling: u32,
    /// Under `--per-packet auto`: the span's intervals, and those whose
    /// per-packet programs were paused (`Health::per_packet`).
    per_packet: Option<(u64, u64)>,
    allowance_resets: BTreeMap<String, Cumulative>,
    allowance_zeroed: BTreeMap<String, Cumulative>,
    allowance_failures: BTreeMap<String, Cumulative>,
    /// Intervals in the span whose allowance read was not judged.
    allowance_untrusted: BTreeMap<String, u64>,
}

fn totals(m: &BTreeMap<String, Cumulative>) -> BTreeMap<String, u64> {
    m.iter().map(|(k, c)| (k.clone(), c.total)).collect()
}

impl HealthAcc {
    fn all_mut(&mut self) -> impl Iterator<Item = &mut Cumulative> {
        self.program_events
            .values_mut()
            .chain(self.program_missed.values_mut())
            .chain(self.allowance_resets.values_mut())
            .chain(self.allowance_zeroed.values_mut())
            .chain(self.allowance_failures.values_mut())
            .chain(self.otlp.iter_mut())
            .chain(self.kafka.iter_mut())
            .chain([
                &mut self.ringbuf_drops,
                &mut self.closes_lost,
                &mut self.closes_deferred,
                &mut self.closes_missed,
                &mut self.untracked_flows,
                &mut self.counter_read_failures,
                &mut self.host_queue_untracked,
                &mut self.late_intervals,
            ])
    }

    /// A new recording: a new observer, whose counters start again.
    pub(super) fn restart(&mut self) {
        self.all_mut().for_each(Cumulative::restart);
    }

    /// Reads `snap`'s counters; their growth counts only when `count` (the
    /// interval is in the span). `from_zero`: see [`Cumulative::observe`].
    pub(super) fn observe(
        &mut self,
        snap: &Snapshot,
        from_zero: bool,
        count: bool,
        filters: &ReportFilters,
    ) {
        let h = &snap.health;
        for p in &h.programs {
            if !p.attached {
                self.program_absent.insert(
                    p.name.clone(),
                    (
                        p.not_attached.clone().unwrap_or_default(),
                        p.lost.clone().unwrap_or_default(),
                    ),
                );
            }
            self.program_events
                .entry(p.name.clone())
                .or_default()
                .observe(p.events, from_zero, count);
            self.program_missed
                .entry(p.name.clone())
                .or_default()
                .observe(p.missed, from_zero, count);
        }
        self.ringbuf_drops
            .observe(h.ringbuf_drops, from_zero, count);
        self.closes_lost.observe(h.closes_lost, from_zero, count);
        self.closes_deferred
            .observe(h.closes_deferred, from_zero, count);
        self.closes_missed
            .observe(h.moved_set_gone, from_zero, count);
        if count && !snap.folded.flows.is_empty() {
            self.folded_flows += snap.folded.flow_count();
            self.folded_intervals += 1;
        }
        self.untracked_flows
            .observe(h.untracked_flows, from_zero, count);
        self.counter_read_failures
            .observe(h.counter_read_failures, from_zero, count);
        self.host_queue_untracked
            .observe(h.host_queue_untracked, from_zero, count);
        self.late_intervals
            .observe(h.late_intervals, from_zero, count);
        if let Some(o) = h.otlp {
            for (c, v) in self.otlp.iter_mut().zip([o.sent, o.dropped, o.failures]) {
                c.observe(v, from_zero, count);
            }
            if count {
                self.otlp_seen = true;
                self.otlp_max_queued = self.otlp_max_queued.max(o.queued);
            }
        }
        if let Some(k) = &h.kafka {
            for (c, v) in self.kafka.iter_mut().zip([k.lookups_ok, k.lookups_failed]) {
                c.observe(v, from_zero, count);
            }
            if count {
                self.kafka_last = Some(k.clone());
            }
        }
        if count {
            self.probe_sampling = self.probe_sampling.max(h.probe_sampling);
            if let Some(p) = &h.per_packet {
                let (all, paused) = self.per_packet.get_or_insert((0, 0));
                *all += 1;
                *paused += u64::from(!p.measured);
            }
        }
        for i in &snap.interfaces {
            if !filters.iface_matches(&i.name) {
                continue;
            }
            if let Some(a) = i.allowance.sample() {
                self.allowance_resets
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.resets, from_zero, count);
                self.allowance_zeroed
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.zeroed_reads, from_zero, count);
                self.allowance_failures
                    .entry(i.name.clone())
                    .or_default()
                    .observe(a.read_failures, from_zero, count);
            }
        }
    }

    /// Counts the interfaces whose allowance read was not judged this
    /// interval.
    pub(super) fn count_untrusted(&mut self, a: &IntervalAnalysis) {
        for v in &a.interfaces {
            if v.evidence.iter().any(|e| e.signal == UNTRUSTED_SIGNAL) {
                *self.allowance_untrusted.entry(v.iface.clone()).or_default() += 1;
            }
        }
    }

    pub(super) fn summary(
        &self,
        episodes_forgotten: u64,
        read_warnings: Vec<String>,
    ) -> HealthSummary {
        HealthSummary {
            programs: self
                .program_events
                .iter()
                .map(|(name, ev)| {
                    let missed = self.program_missed.get(name).map_or(0, |m| m.total);
                    (
                        name.clone(),
                        ProgramSummary {
                            events: ev.total,
                            missed,
                            not_attached: self.program_absent.get(name).map(|a| a.0.clone()),
                            lost: self.program_absent.get(name).map(|a| a.1.clone()),
                        },
                    )
                })
                .collect(),
            ringbuf_drops: self.ringbuf_drops.total,
            closes_lost: self.closes_lost.total,
            closes_deferred: self.closes_deferred.total,
            closes_missed: self.closes_missed.total,
            folded_flows: self.folded_flows,
            folded_intervals: self.folded_intervals,
            untracked_flows: self.untracked_flows.total,
            counter_read_failures: self.counter_read_failures.total,
            host_queue_untracked: self.host_queue_untracked.total,
            late_intervals: self.late_intervals.total,
            otlp: self.otlp_seen.then(|| OtlpSummary {
                sent: self.otlp[0].total,
                dropped: self.otlp[1].total,
                failures: self.otlp[2].total,
                max_queued: self.otlp_max_queued,
            }),
            kafka: self.kafka_last.as_ref().map(|k| KafkaLookupSummary {
                target: k.target.clone(),
                lookups_ok: self.kafka[0].total,
                lookups_failed: self.kafka[1].total,
                last_error: k.last_error.clone(),
                directory_age_ms: k.directory_age_ms,
                local_broker: k.local_broker,
            }),
            probe_sampling: self.probe_sampling,
            per_packet_paused: self.per_packet.map(|(all, paused)| [paused, all]),
            allowance_resets: totals(&self.allowance_resets),
            allowance_zeroed_reads: totals(&self.allowance_zeroed),
            allowance_read_failures: totals(&self.allowance_failures),
            allowance_untrusted_intervals: self.allowance_untrusted.clone(),
            episodes_forgotten,
            read_warnings,
        }
    }
}
