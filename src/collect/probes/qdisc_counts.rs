//! A qdisc's own counters (`qstats.drops` and `bstats.packets`, what `tc -s
//! qdisc` shows as dropped and sent) beside the events the programs
//! counted: the kernel was measured not running tracepoint programs for
//! some hits (docs/architecture.md, "Host queue"), so an event count can
//! fall short, while a cumulative counter read at any later event cannot.
//! The programs note both counters at each qdisc event (hostq.h,
//! `first_*`, `last_*`); this module turns those notes into each
//! interval's growth, and the drops past the drop events counted into the
//! drops the kernel ran no program for: counted, never lost silently.

use std::collections::HashMap;

use super::hostq_skel::types::hq_if_stats;

/// (drops, packets sent), as a qdisc counts them.
pub(crate) type Counts = [u64; 2];

/// A queue's qdisc counters as the CPUs' slots saw them over one read
/// (cumulative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QdiscCounts {
    /// The smallest values at a CPU's first event on the queue.
    first: Counts,
    /// The stamp (jiffies) of the latest event, and the values it saw.
    latest: u64,
    last: Counts,
}

impl QdiscCounts {
    /// Folds one CPU's slot into `this`: the smallest first values; the
    /// values of the latest event (of events tied in a jiffy, the largest:
    /// the counters only grow). A qdisc with per-CPU stats (counts_known
    /// 0) adds nothing.
    pub(crate) fn fold(this: Option<QdiscCounts>, c: &hq_if_stats) -> Option<QdiscCounts> {
        if c.counts_known == 0 {
            return this;
        }
        let cpu = QdiscCounts {
            first: [c.first_drops.into(), c.first_sent],
            latest: c.last_jiffies,
            last: [c.last_drops.into(), c.last_sent],
        };
        Some(match this {
            None => cpu,
            Some(d) => QdiscCounts {
                first: [d.first[0].min(cpu.first[0]), d.first[1].min(cpu.first[1])],
                latest: d.latest.max(cpu.latest),
                last: if (cpu.latest, cpu.last) > (d.latest, d.last) {
                    cpu.last
                } else {
                    d.last
                },
            },
        })
    }

    /// The values at the latest event.
    pub(crate) fn last(&self) -> Counts {
        self.last
    }

    /// Each counter's growth since `prev` (this queue's values at the
    /// previous read; none: since its first event). A value under `prev`
    /// is a new qdisc (`tc qdisc replace`), counting from 0.
    pub(crate) fn since(&self, prev: Option<Counts>) -> Counts {
        let grew = |i: usize| {
            let base = match prev {
                Some(p) if self.last[i] >= p[i] => p[i],
                Some(_) => 0,
                None => self.first[i].min(self.last[i]),
            };
            self.last[i] - base
        };
        [grew(0), grew(1)]
    }
}

/// Per interface, the qdisc's own drops against the drop events counted for
/// its qdiscs, both summed since start, and the gap already reported.
#[derive(Debug, Default)]
pub(crate) struct UnseenDrops {
    sums: HashMap<(u32, u32), Gap>,
    /// Every interface's reported gaps, summed: the health counter.
    total: u64,
}

#[derive(Debug, Default)]
struct Gap {
    qdisc: u64,
    events: u64,
    reported: u64,
}

impl UnseenDrops {
    /// One interval of `interface`: `qdisc` drops by the qdisc's own
    /// counter, `events` qdisc drop events counted. Returns the drops the
    /// kernel ran no program for, found this interval: how far the qdisc's
    /// sum has run ahead of the events' past what was reported before. Sums,
    /// not each interval's difference: the counter is read at the latest
    /// qdisc event, the events at the read, so a drop after the latest event
    /// is in this interval's events and the next one's counter.
    pub(crate) fn note(&mut self, interface: (u32, u32), qdisc: u64, events: u64) -> u64 {
        let g = self.sums.entry(interface).or_default();
        g.qdisc += qdisc;
        g.events += events;
        let unseen = g.qdisc.saturating_sub(g.events).saturating_sub(g.reported);
        g.reported += unseen;
        self.total += unseen;
        unseen
    }

    /// The drops found unseen since start, every interface.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot whose drops and sent packets are `first` and `last` (sent:
    /// ten times the drops).
    fn slot(first: u32, jiffies: u64, last: u32, known: bool) -> hq_if_stats {
        hq_if_stats {
            first_drops: first,
            first_sent: u64::from(first) * 10,
            last_jiffies: jiffies,
            last_drops: last,
            last_sent: u64::from(last) * 10,
            counts_known: known as u32,
            ..Default::default()
        }
    }

    #[test]
    fn a_queue_reads_the_smallest_first_and_the_latest_last() {
        let d = QdiscCounts::fold(None, &slot(100, 7, 150, true));
        let d = QdiscCounts::fold(d, &slot(120, 9, 180, true));
        // Tied in a jiffy: the larger, the counters only grow.
        let d = QdiscCounts::fold(d, &slot(130, 9, 175, true)).unwrap();
        assert_eq!((d.first, d.last), ([100, 1000], [180, 1800]));
        // Per-CPU stats: nothing known, nothing changed.
        assert_eq!(QdiscCounts::fold(None, &slot(0, 9, 0, false)), None);
        assert_eq!(QdiscCounts::fold(Some(d), &slot(0, 99, 0, false)), Some(d));
    }

    #[test]
    fn growth_from_the_first_event_the_previous_read_or_a_new_qdisc() {
        let d = QdiscCounts::fold(None, &slot(100, 7, 180, true)).unwrap();
        assert_eq!(d.since(None), [80, 800]);
        assert_eq!(d.since(Some([150, 1500])), [30, 300]);
        // Under the previous value: a new qdisc, from 0.
        assert_eq!(d.since(Some([500, 5000])), [180, 1800]);
    }

    #[test]
    fn unseen_drops_are_the_sums_gap_reported_once() {
        let mut u = UnseenDrops::default();
        let b0 = (1, 2);
        // The counter lags the events by 10 (drops after the latest qdisc
        // event): nothing unseen, then caught up: still nothing.
        assert_eq!(u.note(b0, 90, 100), 0);
        assert_eq!(u.note(b0, 110, 100), 0);
        // 25 drops the programs never ran for.
        assert_eq!(u.note(b0, 125, 100), 25);
        // Reported once.
        assert_eq!(u.note(b0, 0, 0), 0);
        assert_eq!(u.note((1, 3), 5, 0), 5);
        assert_eq!(u.total(), 30);
    }
}
