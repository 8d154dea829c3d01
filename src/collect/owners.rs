//! Finds the process owning a socket inode through /proc, for flows that
//! have not called sendmsg since the observer started (so the kernel probe
//! never saw their owner).

use std::collections::HashMap;
use std::fs;

use crate::model::snapshot::Owner;

/// Socket inode -> owner, rebuilt from /proc on demand.
#[derive(Debug, Default)]
pub(crate) struct OwnerIndex {
    by_inode: HashMap<u64, Owner>,
    /// The owners the rescan before the latest found and the latest did
    /// not (the socket closed, or its process exited, in between): still
    /// answered until the next rescan, so that what a socket sent just
    /// before it closed is named for its process even when another lookup
    /// rescanned first (with --all-netns, every new flow of any namespace
    /// may). Bounded by one scan.
    departed: HashMap<u64, Owner>,
    /// Inodes already looked for and not found since the last rebuild.
    missing: std::collections::HashSet<u64>,
    rebuilt_at_seq: Option<u64>,
}

impl OwnerIndex {
    /// The owner of `inode`; rescans /proc at most once per interval `seq`.
    pub(crate) fn lookup(&mut self, inode: u64, seq: u64) -> Option<Owner> {
        self.find(inode, seq).cloned()
    }

    fn find(&mut self, inode: u64, seq: u64) -> Option<&Owner> {
        if inode == 0 {
            return None;
        }
        if self.known(inode).is_none()
            && self.rebuilt_at_seq != Some(seq)
            && !self.missing.contains(&inode)
        {
            self.rebuild_from(scan_proc());
            self.rebuilt_at_seq = Some(seq);
        }
        if self.known(inode).is_none() {
            self.missing.insert(inode);
        }
        self.known(inode)
    }

    fn known(&self, inode: u64) -> Option<&Owner> {
        self.by_inode
            .get(&inode)
            .or_else(|| self.departed.get(&inode))
    }

    /// As [`Self::lookup`], but an inode not found before is looked for
    /// again (at most one rescan per interval all the same): a link-local
    /// sender's socket seen first between a rescan and the kernel's read
    /// would otherwise stay unnamed while it keeps sending.
    pub(crate) fn lookup_retry(&mut self, inode: u64, seq: u64) -> Option<Owner> {
        self.missing.remove(&inode);
        self.lookup(inode, seq)
    }

    /// Takes a new scan: what the previous one found and this one does not
    /// is kept as departed for one scan more.
    fn rebuild_from(&mut self, scanned: HashMap<u64, Owner>) {
        let previous = std::mem::replace(&mut self.by_inode, scanned);
        self.departed = previous
            .into_iter()
            .filter(|(ino, _)| !self.by_inode.contains_key(ino))
            .collect();
        self.missing.clear();
    }
}

/// Every socket inode held open in /proc/PID/fd, with its process.
fn scan_proc() -> HashMap<u64, Owner> {
    let mut by_inode = HashMap::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return by_inode;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let name = p.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let comm = fs::read_to_string(p.path().join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        for fd in fds.filter_map(|e| e.ok()) {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            let t = target.to_string_lossy();
            if let Some(ino) = t
                .strip_prefix("socket:[")
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse::<u64>().ok())
            {
                by_inode.entry(ino).or_insert_with(|| owner(pid, &comm));
            }
        }
    }
    by_inode
}

fn owner(pid: u32, comm: &str) -> Owner {
    Owner {
        pid,
        comm: comm.to_string(),
        thread: None,
        cgroup_id: 0,
        cgroup: None,
        workload: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_gone_from_a_rescan_is_kept_for_one_more() {
        let mut idx = OwnerIndex::default();
        idx.rebuild_from(HashMap::from([
            (10, owner(1, "dns")),
            (11, owner(2, "app")),
        ]));
        // The process holding socket 10 exited; another lookup rescanned.
        idx.rebuild_from(HashMap::from([(11, owner(2, "app"))]));
        assert_eq!(idx.known(10).map(|o| o.pid), Some(1));
        assert_eq!(idx.known(11).map(|o| o.pid), Some(2));
        // One more rescan without it: forgotten (bounded by one scan).
        idx.rebuild_from(HashMap::from([(11, owner(2, "app"))]));
        assert_eq!(idx.known(10), None);
        // A socket found again is current, not departed.
        idx.rebuild_from(HashMap::from([(10, owner(3, "new"))]));
        assert_eq!(idx.known(10).map(|o| o.pid), Some(3));
        assert_eq!(idx.known(11).map(|o| o.pid), Some(2));
    }
}
