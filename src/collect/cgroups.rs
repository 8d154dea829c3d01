//! Who owns a flow, read from the host: the kernel gives a cgroup id
//! (`bpf_get_current_cgroup_id`), the inode number of the cgroup's
//! directory in the cgroup v2 hierarchy; [`CgroupPaths`] maps ids to paths
//! by walking that hierarchy, and [`WorkloadResolver`] names each flow's
//! workload from its path (src/model/workload.rs reads the text).

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::model::snapshot::{FlowSample, Owner};
use crate::model::workload::{pod_log_dirs, PodName, Workload};

/// Where the cgroup v2 hierarchy is mounted, from the text of /proc/mounts:
/// /sys/fs/cgroup on a unified host, /sys/fs/cgroup/unified on a hybrid one.
/// The first cgroup2 mount wins (the host's, when the observer runs there).
pub fn cgroup2_mount(proc_mounts: &str) -> Option<PathBuf> {
    proc_mounts.lines().find_map(|line| {
        let mut f = line.split_whitespace();
        let (_src, target, fstype) = (f.next()?, f.next()?, f.next()?);
        (fstype == "cgroup2").then(|| PathBuf::from(unescape_mount_path(target)))
    })
}

/// /proc/mounts writes space, tab, newline and backslash as octal escapes.
fn unescape_mount_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let oct: String = chars.clone().take(3).collect();
            if oct.len() == 3 && oct.chars().all(|d| ('0'..='7').contains(&d)) {
                if let Ok(v) = u8::from_str_radix(&oct, 8) {
                    out.push(v as char);
                    for _ in 0..3 {
                        chars.next();
                    }
                    continue;
                }
            }
        }
        out.push(c);
    }
    out
}

/// cgroup id (the directory's inode) -> path relative to the cgroup v2 root,
/// by walking the hierarchy. A miss rescans, at most once per `generation`
/// (the caller passes the interval's sequence number), so a cgroup made
/// since the last walk is found on the next interval at the latest. A
/// cgroup removed since it was seen keeps its last path: a flow whose
/// container exited is still named after it.
#[derive(Debug)]
pub(crate) struct CgroupPaths {
    root: PathBuf,
    by_id: HashMap<u64, String>,
    scanned_at: Option<u64>,
    /// Directories walked by the last scan (a cost figure for docs and health).
    pub last_scan_dirs: usize,
    /// Scans since start.
    pub scans: u64,
}

impl CgroupPaths {
    pub(crate) fn new(root: PathBuf) -> Self {
        CgroupPaths {
            root,
            by_id: HashMap::new(),
            scanned_at: None,
            last_scan_dirs: 0,
            scans: 0,
        }
    }

    /// The path of cgroup `id` (`/` for the root), or None when no
    /// directory of the hierarchy has that inode (and none had it before).
    pub(crate) fn lookup(&mut self, id: u64, generation: u64) -> Option<&str> {
        if id == 0 {
            return None;
        }
        if !self.by_id.contains_key(&id) && self.scanned_at != Some(generation) {
            self.scan();
            self.scanned_at = Some(generation);
        }
        self.by_id.get(&id).map(String::as_str)
    }

    fn scan(&mut self) {
        self.scans += 1;
        let mut dirs = 0usize;
        let mut stack = vec![(self.root.clone(), String::from("/"))];
        while let Some((dir, rel)) = stack.pop() {
            let Ok(meta) = fs::metadata(&dir) else {
                continue; // removed while we walked
            };
            dirs += 1;
            self.by_id.insert(meta.ino(), rel.clone());
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = e.file_name().to_string_lossy().into_owned();
                let child = if rel == "/" {
                    format!("/{name}")
                } else {
                    format!("{rel}/{name}")
                };
                stack.push((e.path(), child));
            }
        }
        self.last_scan_dirs = dirs;
    }
}

/// Fills in each flow owner's cgroup path and workload, once per interval.
///
/// An owner the kernel probe saw carries the cgroup id of its first send:
/// its path comes from [`CgroupPaths`], even after the cgroup is removed.
/// An owner found through /proc (the socket's inode, when the probe never
/// saw it send, or on kernels without `tcp_sendmsg_locked`) has no id, and
/// where the hierarchy is not visible the id cannot be looked up: then the
/// path is read from `/proc/<pid>/cgroup`, once per process and interval,
/// and follows a process that moves. Pod names come from the kubelet's log directory,
/// re-read when a pod UID is not in it, at most once per interval.
pub struct WorkloadResolver {
    paths: Option<CgroupPaths>,
    pod_logs: PathBuf,
    pods: HashMap<String, PodName>,
    pods_read_at: Option<u64>,
    by_path: HashMap<String, Workload>,
    /// Paths read from `/proc/<pid>/cgroup`, by pid and the owner's cgroup
    /// id, with the generation that last used each. An owner whose id is
    /// known (0 only for owners found through /proc) keeps its entry while
    /// it is used: the path is the one of that id, which does not change
    /// when the process moves (the id does). Without the v2 mount (a v1
    /// host) every owner goes this way, and reading the file for each
    /// owner every interval was 4% of the process at 200 busy flows.
    proc_paths: HashMap<(u32, u64), (Option<String>, u64)>,
    proc_paths_at: u64,
}

impl WorkloadResolver {
    /// `cgroup_root`: the cgroup v2 mount (None where there is none: then
    /// only /proc-found owners get a path). `pod_logs`: the kubelet's
    /// `/var/log/pods`, or another directory laid out like it.
    pub fn new(cgroup_root: Option<PathBuf>, pod_logs: PathBuf) -> Self {
        WorkloadResolver {
            paths: cgroup_root.map(CgroupPaths::new),
            pod_logs,
            pods: HashMap::new(),
            pods_read_at: None,
            by_path: HashMap::new(),
            proc_paths: HashMap::new(),
            proc_paths_at: 0,
        }
    }

    /// This host's: the cgroup v2 mount from /proc/self/mounts, else the
    /// one of pid 1's mount namespace reached through /proc/1/root (`ip
    /// netns exec` gives its command a fresh /sys without the cgroup
    /// mounts); and `pod_logs`.
    pub(crate) fn for_host(pod_logs: PathBuf) -> Self {
        let own = fs::read_to_string("/proc/self/mounts")
            .ok()
            .and_then(|m| cgroup2_mount(&m))
            .filter(|p| p.join("cgroup.procs").exists());
        let root = own.or_else(|| {
            let init = fs::read_to_string("/proc/1/mounts").ok()?;
            let p = cgroup2_mount(&init)?;
            let via_init = Path::new("/proc/1/root").join(p.strip_prefix("/").unwrap_or(&p));
            via_init.join("cgroup.procs").exists().then_some(via_init)
        });
        WorkloadResolver::new(root, pod_logs)
    }

    /// Sets `owner.cgroup` and `owner.workload` of every owned flow.
    pub fn resolve(&mut self, flows: &mut [FlowSample], generation: u64) {
        if self.proc_paths_at != generation {
            let last = self.proc_paths_at;
            self.proc_paths
                .retain(|&(_, id), &mut (_, used)| id != 0 && used == last);
            self.proc_paths_at = generation;
        }
        for f in flows.iter_mut() {
            if let Some(owner) = f.owner.as_mut() {
                self.resolve_owner(owner, generation);
            }
        }
    }

    /// Sets `owner.cgroup` and `owner.workload` of one owner; the caller
    /// has started `generation` (see [`WorkloadResolver::resolve`]).
    pub(crate) fn resolve_owner(&mut self, owner: &mut Owner, generation: u64) {
        let by_id = (owner.cgroup_id != 0)
            .then(|| self.paths.as_mut()?.lookup(owner.cgroup_id, generation))
            .flatten()
            .map(str::to_string);
        let path = by_id.or_else(|| {
            let (path, used) = self
                .proc_paths
                .entry((owner.pid, owner.cgroup_id))
                .or_insert_with(|| {
                    let path = fs::read_to_string(format!("/proc/{}/cgroup", owner.pid))
                        .ok()
                        .and_then(|t| proc_cgroup_path(&t));
                    (path, generation)
                });
            *used = generation;
            path.clone()
        });
        let Some(path) = path else {
            return;
        };
        let mut w = self
            .by_path
            .entry(path.clone())
            .or_insert_with(|| Workload::from_cgroup_path(&path))
            .clone();
        if let Some(uid) = &w.pod_uid {
            if !self.pods.contains_key(uid) && self.pods_read_at != Some(generation) {
                self.pods = read_pod_log_dirs(&self.pod_logs);
                self.pods_read_at = Some(generation);
            }
            if let Some(p) = self.pods.get(uid) {
                w.pod_namespace = Some(p.namespace.clone());
                w.pod_name = Some(p.name.clone());
            }
        }
        owner.cgroup = Some(path);
        owner.workload = (!w.is_empty()).then_some(w);
    }

    /// Walks of the cgroup hierarchy since start, and directories in the last.
    pub fn cgroup_scans(&self) -> (u64, usize) {
        self.paths
            .as_ref()
            .map(|p| (p.scans, p.last_scan_dirs))
            .unwrap_or((0, 0))
    }
}

fn read_pod_log_dirs(dir: &Path) -> HashMap<String, PodName> {
    let names: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    pod_log_dirs(names)
}

/// The cgroup v2 path of a process, from `/proc/<pid>/cgroup`'s `0::` line:
/// how flows whose owner was found through /proc (not by the probe) get one.
pub(crate) fn proc_cgroup_path(proc_pid_cgroup: &str) -> Option<String> {
    proc_pid_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::Owner;

    #[test]
    fn finds_the_cgroup2_mount_on_hybrid_and_unified_hosts() {
        let hybrid = "tmpfs /sys/fs/cgroup tmpfs rw 0 0\n\
                      cgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n\
                      cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        assert_eq!(
            cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(cgroup2_mount("proc /proc proc rw 0 0\n"), None);
        let spaced = "cgroup2 /mnt/cg\\040two cgroup2 rw 0 0\n";
        assert_eq!(cgroup2_mount(spaced), Some(PathBuf::from("/mnt/cg two")));
    }

    #[test]
    fn a_proc_path_is_read_again_each_interval_only_for_owners_without_a_cgroup_id() {
        // No v2 mount: every owner's path comes from /proc (ours here).
        let mut r = WorkloadResolver::new(None, PathBuf::from("/nonexistent"));
        let owner = |cgroup_id| Owner {
            pid: std::process::id(),
            comm: "t".into(),
            thread: None,
            cgroup_id,
            cgroup: None,
            workload: None,
        };
        let mut flows = vec![
            FlowSample {
                owner: Some(owner(0)),
                ..FlowSample::example(1)
            },
            FlowSample {
                owner: Some(owner(77)),
                ..FlowSample::example(2)
            },
        ];
        let ours = proc_cgroup_path(&fs::read_to_string("/proc/self/cgroup").unwrap());
        assert!(ours.is_some());
        let cgroup = |f: &FlowSample| f.owner.as_ref().unwrap().cgroup.clone();
        r.resolve(&mut flows, 1);
        assert_eq!(cgroup(&flows[0]), ours);
        assert_eq!(cgroup(&flows[1]), ours);
        // Marked, to tell a kept entry from one read again.
        for (path, _) in r.proc_paths.values_mut() {
            *path = Some("/marked".into());
        }
        for generation in 2..=3 {
            r.resolve(&mut flows, generation);
            assert_eq!(cgroup(&flows[0]), ours, "read again: no id");
            assert_eq!(cgroup(&flows[1]).as_deref(), Some("/marked"), "kept");
            assert!(r.proc_paths.values().all(|&(_, used)| used == generation));
        }
        // An entry not used in the interval before is dropped.
        r.resolve(&mut flows[..0], 4);
        r.resolve(&mut flows[..0], 5);
        assert!(r.proc_paths.is_empty());
        r.resolve(&mut flows[1..], 6);
        assert_eq!(r.proc_paths.keys().map(|k| k.1).collect::<Vec<_>>(), [77]);
    }

    #[test]
    fn proc_cgroup_line() {
        let text = "12:memory:/x\n0::/system.slice/kafka.service\n";
        assert_eq!(
            proc_cgroup_path(text).as_deref(),
            Some("/system.slice/kafka.service")
        );
        assert_eq!(proc_cgroup_path("1:cpu:/\n"), None);
    }

    #[test]
    fn cgroup_paths_walks_a_tree_and_keeps_removed_ones() {
        let root = std::env::temp_dir().join(format!("ts-cgpaths-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("system.slice/kafka.service")).unwrap();
        let ino = |p: &Path| fs::metadata(p).unwrap().ino();
        let kafka = ino(&root.join("system.slice/kafka.service"));

        let mut c = CgroupPaths::new(root.clone());
        assert_eq!(c.lookup(kafka, 1), Some("/system.slice/kafka.service"));
        assert_eq!(c.lookup(ino(&root), 1), Some("/"));
        assert_eq!(c.scans, 1, "a hit does not rescan");

        // A cgroup made later is found at the next generation, not twice
        // in one (a miss rescans at most once per generation).
        fs::create_dir_all(root.join("system.slice/zk.service")).unwrap();
        let zk = ino(&root.join("system.slice/zk.service"));
        assert_eq!(c.lookup(u64::MAX, 1), None);
        assert_eq!(c.scans, 1);
        assert_eq!(c.lookup(zk, 2), Some("/system.slice/zk.service"));
        assert_eq!(c.scans, 2);

        // Removed: still named after what it was.
        fs::remove_dir(root.join("system.slice/kafka.service")).unwrap();
        assert_eq!(c.lookup(kafka, 3), Some("/system.slice/kafka.service"));
        fs::remove_dir_all(&root).unwrap();
    }
}
