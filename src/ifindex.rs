//! Interface index -> name, for the observer's own network namespace.
//!
//! The flow probes record the ifindex of a flow's interface (bpf/flows.bpf.c
//! `update_ifindex`); an ifindex only means something inside its namespace,
//! and `/sys/class/net` lists the namespace `/sys` was mounted in (the
//! observer's own, see ifstats.rs). So only flows of the observer's netns
//! are resolved here; the caller gives the others no interface.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

const SYS_NET: &str = "/sys/class/net";

/// Names of this namespace's interfaces by ifindex, re-read when an index
/// shows up that is not known (a new interface), at most once per interval
/// so that an index that stays unknown costs one directory scan per interval.
#[derive(Debug, Default)]
pub struct IfIndexNames {
    names: HashMap<u32, String>,
    /// The interval of the last re-read, if any.
    read_at: Option<u64>,
}

impl IfIndexNames {
    /// The name of `ifindex` (0 means unknown: None). `interval` is the
    /// collector's sequence number: it bounds the re-reads.
    pub fn name(&mut self, ifindex: u32, interval: u64) -> Option<String> {
        if ifindex == 0 {
            return None;
        }
        if !self.names.contains_key(&ifindex) && self.read_at != Some(interval) {
            self.names = read_names(Path::new(SYS_NET));
            self.read_at = Some(interval);
        }
        self.names.get(&ifindex).cloned()
    }
}

/// `<dir>/<name>/ifindex` for every entry of `dir`; entries that cannot be
/// read (an interface removed while listing) are left out: their flows then
/// have no interface and count for every interface, as before.
fn read_names(dir: &Path) -> HashMap<u32, String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return HashMap::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let idx = fs::read_to_string(e.path().join("ifindex")).ok()?;
            let idx: u32 = idx.trim().parse().ok()?;
            Some((idx, e.file_name().to_string_lossy().into_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_sys_class_net_like_directory() {
        let dir = std::env::temp_dir().join(format!("ts-ifindex-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (name, idx) in [("lo", "1\n"), ("ens5", "2\n"), ("ens6", "7\n")] {
            fs::create_dir_all(dir.join(name)).unwrap();
            fs::write(dir.join(name).join("ifindex"), idx).unwrap();
        }
        fs::create_dir_all(dir.join("broken")).unwrap();
        fs::write(dir.join("broken").join("ifindex"), "x\n").unwrap();
        let m = read_names(&dir);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[&1], "lo");
        assert_eq!(m[&7], "ens6");
    }

    #[test]
    fn this_namespace_has_lo() {
        let mut n = IfIndexNames::default();
        assert_eq!(n.name(0, 0), None);
        // lo is ifindex 1 in every namespace.
        assert_eq!(n.name(1, 0).as_deref(), Some("lo"));
        // An index that does not exist: one re-read per interval, then None.
        assert_eq!(n.name(u32::MAX, 0), None);
        assert_eq!(n.read_at, Some(0));
    }
}
