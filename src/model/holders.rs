//! Who holds TCP flows open through an interface: every tracked flow at the
//! interval's end, the idle ones too (a snapshot lists only the flows that
//! moved), by owner. The hypervisor keeps an entry in the interface's
//! connection table for each, idle or not, until its timeout (long for an
//! established TCP flow), so a pool of idle connections fills the table as
//! surely as a churn of new ones. A `conntrack_limit` names both
//! (docs/verdicts.md, "Who fills the connection table").

use serde::{Deserialize, Serialize};

use super::is_zero;
use super::snapshot::Owner;

/// A flow that has not moved for this long counts as idle.
pub const HOLDER_IDLE_SECS: u64 = 60;

/// Holders listed per interface and interval; the rest are summed in
/// `folded_*` (bounded output, whatever the number of processes).
pub const HOLDERS_LISTED: usize = 16;

/// One owner's open TCP flows through an interface at the interval's end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowHolder {
    /// The process that owns them (pid, its name, cgroup and workload).
    pub owner: Owner,
    /// Open flows, listed in the snapshot or not.
    pub open: u64,
    /// Of them, those that had not moved for [`HOLDER_IDLE_SECS`] or more at
    /// the last read of every flow (the full dump, once a minute: up to a
    /// minute old; src/collect/held.rs).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle: u64,
    /// How long the longest idle of them has not moved, in seconds; a flow
    /// that has not moved since the observer started counts from the start
    /// (a lower bound).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub longest_idle_s: u64,
}

/// The open TCP flows through one interface at the interval's end, by
/// owner: present on every watched interface when the flow probes run
/// (empty: none open), absent in recordings before format 1.20.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowHolderSample {
    /// Most open first, at most [`HOLDERS_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<FlowHolder>,
    /// Owners past the list, and their open and idle flows summed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_holders: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_open: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_idle: u64,
}

impl FlowHolderSample {
    /// Lists `holders` most open first (ties: most idle, then by pid), at
    /// most [`HOLDERS_LISTED`], and folds the rest.
    pub fn of(mut holders: Vec<FlowHolder>) -> FlowHolderSample {
        holders.sort_by(|a, b| {
            b.open
                .cmp(&a.open)
                .then(b.idle.cmp(&a.idle))
                .then(a.owner.pid.cmp(&b.owner.pid))
                .then(a.owner.cgroup_id.cmp(&b.owner.cgroup_id))
        });
        let mut s = FlowHolderSample::default();
        s.holders = super::list_first(holders, HOLDERS_LISTED, |h| {
            s.folded_holders += 1;
            s.folded_open += h.open;
            s.folded_idle += h.idle;
        });
        s
    }

    /// Open flows of every owner, listed and folded.
    pub fn open(&self) -> u64 {
        self.holders.iter().map(|h| h.open).sum::<u64>() + self.folded_open
    }

    /// Of them, the idle ones.
    pub fn idle(&self) -> u64 {
        self.holders.iter().map(|h| h.idle).sum::<u64>() + self.folded_idle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(pid: u32, open: u64, idle: u64) -> FlowHolder {
        FlowHolder {
            owner: Owner {
                pid,
                comm: format!("p{pid}"),
                thread: None,
                cgroup_id: 0,
                cgroup: None,
                workload: None,
            },
            open,
            idle,
            longest_idle_s: 0,
        }
    }

    #[test]
    fn most_open_first_and_the_rest_folded() {
        let many: Vec<FlowHolder> = (0..20).map(|i| holder(i, u64::from(i) + 1, 1)).collect();
        let s = FlowHolderSample::of(many);
        assert_eq!(s.holders.len(), HOLDERS_LISTED);
        assert_eq!(s.holders[0].owner.pid, 19);
        assert_eq!(
            (s.folded_holders, s.folded_open, s.folded_idle),
            (4, 1 + 2 + 3 + 4, 4)
        );
        assert_eq!(s.open(), (1..=20).sum::<u64>());
        assert_eq!(s.idle(), 20);
        // Ties: the idler first.
        let s = FlowHolderSample::of(vec![holder(1, 5, 0), holder(2, 5, 3)]);
        assert_eq!(s.holders[0].owner.pid, 2);
    }
}
