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
    /// Inodes already looked for and not found since the last rebuild.
    missing: std::collections::HashSet<u64>,
    rebuilt_at_seq: Option<u64>,
}

impl OwnerIndex {
    /// The owner of `inode`; rescans /proc at most once per interval `seq`.
    pub(crate) fn lookup(&mut self, inode: u64, seq: u64) -> Option<Owner> {
        if inode == 0 {
            return None;
        }
        if let Some(o) = self.by_inode.get(&inode) {
            return Some(o.clone());
        }
        if self.rebuilt_at_seq != Some(seq) && !self.missing.contains(&inode) {
            self.rebuild();
            self.rebuilt_at_seq = Some(seq);
        }
        match self.by_inode.get(&inode) {
            Some(o) => Some(o.clone()),
            None => {
                self.missing.insert(inode);
                None
            }
        }
    }

    /// As [`Self::lookup`], but an inode not found before is looked for
    /// again (at most one rescan per interval all the same): a link-local
    /// sender's socket seen first between a rescan and the kernel's read
    /// would otherwise stay unnamed while it keeps sending.
    pub(crate) fn lookup_retry(&mut self, inode: u64, seq: u64) -> Option<Owner> {
        self.missing.remove(&inode);
        self.lookup(inode, seq)
    }

    fn rebuild(&mut self) {
        self.by_inode.clear();
        self.missing.clear();
        let Ok(procs) = fs::read_dir("/proc") else {
            return;
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
                    self.by_inode.entry(ino).or_insert_with(|| Owner {
                        pid,
                        comm: comm.clone(),
                        thread: None,
                        cgroup_id: 0,
                        cgroup: None,
                        workload: None,
                    });
                }
            }
        }
    }
}
