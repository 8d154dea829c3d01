//! The open TCP flows by holder (namespace, interface, owner), kept by the
//! flow table as flows come and go: a count per holder moved when a flow
//! opens, closes, vanishes or changes owner, never a pass over every flow
//! an interval (a broker's 30,000 idle flows would cost one each). Which of
//! them are idle is counted at each full dump, which reads every flow
//! anyway (once a minute), and carried until the next: idle counts are up
//! to a minute old, open counts are the interval's (src/model/holders.rs).

use std::collections::HashMap;

use super::probes::flows_skel::types::ts_flow_record;
use crate::model::holders::HOLDER_IDLE_SECS;

/// Who holds a flow, and through which interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub(crate) struct HolderKey {
    pub netns: u32,
    /// The flow's interface in its own namespace.
    pub ifindex: u32,
    /// Its owner's process: the task the kernel saw sending, else the
    /// socket's process found through /proc; 0 when neither is known.
    pub pid: u32,
    /// The owner's cgroup as the kernel read it (0 when it did not).
    pub cgroup_id: u64,
}

impl HolderKey {
    /// `rec`'s holder; `pid_of` gives the socket's process when the kernel
    /// saw no sender.
    pub(crate) fn of(rec: &ts_flow_record, pid_of: impl FnOnce() -> Option<u32>) -> Self {
        let (pid, cgroup_id) = match rec.st.owner_tgid {
            0 => (pid_of().unwrap_or(0), 0),
            tgid => (tgid, rec.st.owner_cgroup_id),
        };
        HolderKey {
            netns: rec.netns,
            ifindex: rec.st.ifindex,
            pid,
            cgroup_id,
        }
    }
}

/// One holder's flows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Held {
    pub open: u64,
    /// Idle for `HOLDER_IDLE_SECS` or more at the last full dump, and the
    /// longest idle then (ns).
    pub idle: u64,
    pub longest_idle_ns: u64,
    /// A name to give it: the kernel's comm of its sending task (empty
    /// when the kernel saw none), and a socket of it to look its process
    /// up by otherwise.
    pub comm: [u8; 16],
    pub sock_ino: u64,
}

#[derive(Debug, Default)]
pub(crate) struct HeldFlows {
    by: HashMap<HolderKey, Held>,
}

impl HeldFlows {
    /// A flow of `key` opened (or was first seen).
    pub(crate) fn add(&mut self, key: HolderKey, rec: &ts_flow_record) {
        let h = self.by.entry(key).or_default();
        h.open += 1;
        if h.comm[0] == 0 && rec.st.owner_comm[0] != 0 {
            h.comm = rec.st.owner_comm.map(|c| c as u8);
        }
        if h.sock_ino == 0 {
            h.sock_ino = rec.sock_ino;
        }
    }

    /// A flow of `key` closed, vanished or moved to another holder.
    pub(crate) fn remove(&mut self, key: HolderKey) {
        if let Some(h) = self.by.get_mut(&key) {
            h.open = h.open.saturating_sub(1);
            if h.open == 0 {
                self.by.remove(&key);
            }
        }
    }

    /// Counts the idle flows again, from every open flow's holder and the
    /// time it last moved (a full dump's pass): what was idle before and
    /// is not now (moved, or closed) stops counting.
    pub(crate) fn count_idle<'k>(
        &mut self,
        flows: impl Iterator<Item = (HolderKey, u64)> + 'k,
        now_ns: u64,
    ) {
        for h in self.by.values_mut() {
            h.idle = 0;
            h.longest_idle_ns = 0;
        }
        for (key, moved_ns) in flows {
            let idle_ns = now_ns.saturating_sub(moved_ns);
            if idle_ns < HOLDER_IDLE_SECS * 1_000_000_000 {
                continue;
            }
            if let Some(h) = self.by.get_mut(&key) {
                h.idle += 1;
                h.longest_idle_ns = h.longest_idle_ns.max(idle_ns);
            }
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&HolderKey, &Held)> {
        self.by.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: u32) -> HolderKey {
        HolderKey {
            netns: 1,
            ifindex: 2,
            pid,
            cgroup_id: 0,
        }
    }

    #[test]
    fn open_counts_follow_flows_and_idle_is_counted_at_a_pass() {
        let rec = ts_flow_record::default();
        let mut h = HeldFlows::default();
        for _ in 0..3 {
            h.add(key(7), &rec);
        }
        h.add(key(8), &rec);
        h.remove(key(8));
        let open = |h: &HeldFlows| {
            let mut v: Vec<(u32, u64)> = h.iter().map(|(k, x)| (k.pid, x.open)).collect();
            v.sort();
            v
        };
        assert_eq!(open(&h), [(7, 3)]);
        let s = 1_000_000_000u64;
        // At 200 s: two moved 100 s and 150 s ago, one 10 s ago.
        h.count_idle(
            [(key(7), 100 * s), (key(7), 50 * s), (key(7), 190 * s)].into_iter(),
            200 * s,
        );
        let x = h.iter().next().unwrap().1;
        assert_eq!((x.idle, x.longest_idle_ns), (2, 150 * s));
        // The next pass: they moved.
        h.count_idle([(key(7), 200 * s)].into_iter(), 210 * s);
        assert_eq!(h.iter().next().unwrap().1.idle, 0);
    }
}
