//! Names of network namespaces, for flows of other namespaces
//! (`--all-netns`): the name `ip netns` gave a namespace (its file under
//! /run/netns), found by the namespace's inode.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The namespace inode behind `path` (a `/proc/PID/ns/net` link or an
/// `ip netns` bind mount).
pub(crate) fn inode_of(path: &Path) -> io::Result<u64> {
    Ok(fs::metadata(path)?.ino())
}

/// Inode of the calling thread's network namespace.
pub(crate) fn own() -> io::Result<u32> {
    inode_of(Path::new("/proc/thread-self/ns/net")).map(|i| i as u32)
}

/// netns inode -> `ip netns` name, re-read from the directory when an
/// inode is not in it, at most once per `generation` (interval).
#[derive(Debug)]
pub(crate) struct NetnsNames {
    dir: PathBuf,
    by_inode: HashMap<u32, String>,
    read_at: Option<u64>,
}

impl NetnsNames {
    pub(crate) fn new(dir: PathBuf) -> Self {
        NetnsNames {
            dir,
            by_inode: HashMap::new(),
            read_at: None,
        }
    }

    /// `ip netns`'s directory, /run/netns.
    pub(crate) fn for_host() -> Self {
        NetnsNames::new(PathBuf::from("/run/netns"))
    }

    pub(crate) fn name(&mut self, inode: u32, generation: u64) -> Option<String> {
        if !self.by_inode.contains_key(&inode) && self.read_at != Some(generation) {
            self.read_at = Some(generation);
            self.by_inode = fs::read_dir(&self.dir)
                .map(|rd| {
                    rd.flatten()
                        .filter_map(|e| {
                            let ino = inode_of(&e.path()).ok()?;
                            Some((ino as u32, e.file_name().to_string_lossy().into_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
        self.by_inode.get(&inode).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_by_inode_and_rereads_once_per_generation() {
        let dir = std::env::temp_dir().join(format!("ts-netns-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // Plain files stand in for the bind-mounted namespace files: only
        // their inodes matter.
        fs::write(dir.join("broker"), "").unwrap();
        let ino = |n: &str| fs::metadata(dir.join(n)).unwrap().ino() as u32;
        let mut names = NetnsNames::new(dir.clone());
        assert_eq!(names.name(ino("broker"), 1).as_deref(), Some("broker"));
        fs::write(dir.join("client"), "").unwrap();
        assert_eq!(
            names.name(ino("client"), 1),
            None,
            "read once per generation"
        );
        assert_eq!(names.name(ino("client"), 2).as_deref(), Some("client"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
