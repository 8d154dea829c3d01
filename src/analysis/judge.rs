//! One judge for every sink: the interval's own verdict ([`analyze`]) over
//! a look-back of past intervals, then the verdict held over a window
//! ([`Hold`]). `watch` (every view, `--json`, `--metrics`), `record`,
//! `replay` and `report` all judge through it, so they cannot disagree.

use std::collections::{BTreeMap, VecDeque};

use super::hold::Hold;
use super::thresholds::Thresholds;
use super::{analyze, IntervalAnalysis};
use crate::model::snapshot::{Health, Snapshot};

/// Intervals of look-back the interval's own judgement may read (the
/// throughput plateau, the zeroed-read check).
pub(crate) const LOOK_BACK: usize = 120;

pub(crate) struct Judge {
    thresholds: Thresholds,
    /// Past intervals, interfaces only: the analysis reads nothing else
    /// from them, and whole snapshots of thousands of flows would cost
    /// memory for nothing.
    history: VecDeque<Snapshot>,
    holds: BTreeMap<String, Hold>,
}

impl Judge {
    pub(crate) fn new(thresholds: Thresholds) -> Self {
        Judge {
            thresholds,
            history: VecDeque::with_capacity(LOOK_BACK + 1),
            holds: BTreeMap::new(),
        }
    }

    pub(crate) fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    /// A new observer (the next recording of a report): no look-back, no
    /// held verdicts.
    pub(crate) fn restart(&mut self) {
        self.history.clear();
        self.holds.clear();
    }

    /// Judges `snap`: each interface's own verdict and the held one.
    pub(crate) fn judge(&mut self, snap: &Snapshot) -> IntervalAnalysis {
        let th = &self.thresholds;
        let mut a = analyze(self.history.make_contiguous(), snap, th);
        let start_ns = snap.mono_ns.saturating_sub(snap.interval_ns);
        self.holds
            .retain(|name, _| snap.interfaces.iter().any(|i| &i.name == name));
        for v in &mut a.interfaces {
            let hold = self.holds.entry(v.iface.clone()).or_default();
            v.held = hold.push(v, snap.seq, (start_ns, snap.mono_ns), th);
        }
        self.history.push_back(Snapshot {
            folded: Default::default(),
            udp_openers: None,
            icmp_openers: None,
            fragments_created: None,
            seq: snap.seq,
            mono_ns: snap.mono_ns,
            unix_ms: snap.unix_ms,
            interval_ns: snap.interval_ns,
            interfaces: snap.interfaces.clone(),
            flows: Vec::new(),
            idle_flows: 0,
            events: Vec::new(),
            health: Health::default(),
        });
        if self.history.len() > LOOK_BACK {
            self.history.pop_front();
        }
        a
    }
}
