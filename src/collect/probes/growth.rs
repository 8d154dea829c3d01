//! Cumulative per-key counters read from a BPF hash once an interval (the
//! link-local senders, the UDP socket owners): each key's growth since the
//! previous read, and which keys went idle, to be deleted from the kernel's
//! map so that short-lived keys (a process per query) do not fill it.

use std::collections::HashMap;

/// A key's counters, cumulative in the kernel.
pub(crate) trait Cumulative: Copy + Default {
    /// The growth from `before` to `self` (0 where a counter went back).
    fn since(&self, before: &Self) -> Self;
    /// Whether a growth counts as having moved.
    fn moved(&self) -> bool;
}

impl Cumulative for u64 {
    fn since(&self, before: &Self) -> Self {
        self.saturating_sub(*before)
    }
    fn moved(&self) -> bool {
        *self > 0
    }
}

/// One cumulative kernel counter (a map-full count, say) read once an
/// interval: its growth since the previous read (the first: since attach).
#[derive(Debug, Default)]
pub(crate) struct CounterGrowth {
    prev: u64,
}

impl CounterGrowth {
    /// The growth from the previous read to `now` (0 where it went back).
    pub(crate) fn since_last(&mut self, now: u64) -> u64 {
        let grew = now.saturating_sub(self.prev);
        self.prev = now;
        grew
    }
}

/// Each key's counters at the previous read and the read it last moved at,
/// by the key's bytes; and the kernel's map-full counter.
pub(crate) struct GrowthByKey<T> {
    prev: HashMap<Vec<u8>, (T, u64)>,
    map_full: CounterGrowth,
    reads: u64,
    /// Reads without growth after which a key is idle.
    idle_reads: u64,
}

impl<T: Cumulative> GrowthByKey<T> {
    pub(crate) fn new(idle_reads: u64) -> Self {
        GrowthByKey {
            prev: HashMap::new(),
            map_full: CounterGrowth::default(),
            reads: 0,
            idle_reads,
        }
    }

    /// A new read of the map begins.
    pub(crate) fn start_read(&mut self) {
        self.reads += 1;
    }

    /// `now`, read for `key`: its growth since the previous read (the
    /// first: since attach), and whether the key is idle now (no growth
    /// for `idle_reads` reads: delete it from the map, then [`Self::forget`]).
    pub(crate) fn note(&mut self, key: Vec<u8>, now: T) -> (T, bool) {
        let (before, moved_at) = self.prev.get(&key).copied().unwrap_or_default();
        let grew = now.since(&before);
        let moved_at = if grew.moved() { self.reads } else { moved_at };
        let idle = self.reads.saturating_sub(moved_at) >= self.idle_reads;
        self.prev.insert(key, (now, moved_at));
        (grew, idle)
    }

    /// An idle key deleted from the map: a later entry starts from 0.
    pub(crate) fn forget(&mut self, key: &[u8]) {
        self.prev.remove(key);
    }

    /// The growth of the kernel's map-full counter (cumulative `map_full`)
    /// since the previous read: what could not be attributed to a key.
    pub(crate) fn unattributed(&mut self, map_full: u64) -> u64 {
        self.map_full.since_last(map_full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_idle_keys_and_the_unattributed() {
        let mut g = GrowthByKey::<u64>::new(1);
        g.start_read();
        assert_eq!(g.note(b"a".to_vec(), 5), (5, false));
        assert_eq!(g.unattributed(3), 3);
        g.start_read();
        // No growth for one read: idle.
        assert_eq!(g.note(b"a".to_vec(), 5), (0, true));
        g.forget(b"a");
        assert_eq!(g.unattributed(4), 1);
        g.start_read();
        // Back after its delete: from 0 again.
        assert_eq!(g.note(b"a".to_vec(), 2), (2, false));
        // A counter that went back counts nothing.
        g.start_read();
        assert_eq!(g.note(b"a".to_vec(), 1).0, 0);
    }

    #[test]
    fn a_counter_grows_from_its_previous_read_and_never_back() {
        let mut c = CounterGrowth::default();
        assert_eq!(c.since_last(7), 7);
        assert_eq!(c.since_last(7), 0);
        assert_eq!(c.since_last(10), 3);
        // Reset under it (the program reloaded): no growth, then from there.
        assert_eq!(c.since_last(2), 0);
        assert_eq!(c.since_last(5), 3);
    }
}
