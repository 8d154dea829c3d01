//! The drops a qdisc counts itself (`qstats.drops`, what `tc -s qdisc`
//! shows as dropped) beside the drop events the programs counted
//! (`on_kfree_skb`): the kernel was measured not running tracepoint programs
//! for some hits (docs/architecture.md, "Host queue"), so an event count
//! can fall short, while a cumulative counter read at any later event
//! cannot. The programs note the counter at each qdisc event (hostq.h,
//! `first_drops`, `last_drops`); this module turns those notes into each
//! interval's growth, and the growth past the events counted into the drops
//! the kernel ran no program for: counted, never lost silently.

use std::collections::HashMap;

use super::hostq_skel::types::hq_if_stats;

/// A queue's qdisc drop counter as the CPUs' slots saw it over one read
/// (cumulative, the kernel's `u32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QdiscDrops {
    /// The smallest value at a CPU's first event on the queue.
    first: u32,
    /// The stamp (jiffies) of the latest event, and the value it saw.
    latest: u64,
    last: u32,
}

impl QdiscDrops {
    /// Folds one CPU's slot into `this`: the smallest first value; the
    /// value of the latest event (of events tied in a jiffy, the largest:
    /// the counter only grows). A qdisc with per-CPU stats (drops_known 0)
    /// adds nothing.
    pub(crate) fn fold(this: Option<QdiscDrops>, c: &hq_if_stats) -> Option<QdiscDrops> {
        if c.drops_known == 0 {
            return this;
        }
        let cpu = QdiscDrops {
            first: c.first_drops,
            latest: c.last_jiffies,
            last: c.last_drops,
        };
        Some(match this {
            None => cpu,
            Some(d) => QdiscDrops {
                first: d.first.min(cpu.first),
                latest: d.latest.max(cpu.latest),
                last: if (cpu.latest, cpu.last) > (d.latest, d.last) {
                    cpu.last
                } else {
                    d.last
                },
            },
        })
    }

    /// The value at the latest event.
    pub(crate) fn last(&self) -> u32 {
        self.last
    }

    /// The drops since `prev` (this queue's value at the previous read;
    /// none: since its first event). A value under `prev` is a new qdisc
    /// (`tc qdisc replace`), counting from 0.
    pub(crate) fn since(&self, prev: Option<u32>) -> u64 {
        let base = match prev {
            Some(p) if self.last >= p => p,
            Some(_) => 0,
            None => self.first.min(self.last),
        };
        u64::from(self.last - base)
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

/// Whether a drop reason is a qdisc's: the events `qstats.drops` also
/// counts (QDISC_DROP, QDISC_OVERLIMIT, QDISC_CONGESTED, the fq, cake and
/// dualpi2 reasons of 6.16 and later).
pub(crate) fn is_qdisc_reason(reason: &str) -> bool {
    ["QDISC_", "FQ_", "CAKE_", "DUALPI2_"]
        .iter()
        .any(|p| reason.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(first: u32, jiffies: u64, last: u32, known: bool) -> hq_if_stats {
        hq_if_stats {
            first_drops: first,
            last_jiffies: jiffies,
            last_drops: last,
            drops_known: known as u32,
            ..Default::default()
        }
    }

    #[test]
    fn a_queue_reads_the_smallest_first_and_the_latest_last() {
        let d = QdiscDrops::fold(None, &slot(100, 7, 150, true));
        let d = QdiscDrops::fold(d, &slot(120, 9, 180, true));
        // Tied in a jiffy: the larger, the counter only grows.
        let d = QdiscDrops::fold(d, &slot(130, 9, 175, true)).unwrap();
        assert_eq!((d.first, d.last), (100, 180));
        // Per-CPU stats: nothing known, nothing changed.
        assert_eq!(QdiscDrops::fold(None, &slot(0, 9, 0, false)), None);
        assert_eq!(QdiscDrops::fold(Some(d), &slot(0, 99, 0, false)), Some(d));
    }

    #[test]
    fn growth_from_the_first_event_the_previous_read_or_a_new_qdisc() {
        let d = QdiscDrops::fold(None, &slot(100, 7, 180, true)).unwrap();
        assert_eq!(d.since(None), 80);
        assert_eq!(d.since(Some(150)), 30);
        // Under the previous value: a new qdisc, from 0.
        assert_eq!(d.since(Some(500)), 180);
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

    #[test]
    fn qdisc_reasons() {
        for r in [
            "QDISC_DROP",
            "QDISC_OVERLIMIT",
            "FQ_FLOW_LIMIT",
            "CAKE_FLOOD",
        ] {
            assert!(is_qdisc_reason(r), "{r}");
        }
        for r in ["TC_EGRESS", "NO_SOCKET", "NEIGH_QUEUEFULL"] {
            assert!(!is_qdisc_reason(r), "{r}");
        }
    }
}
