//! Who a flow belongs to on a container host: the cgroup v2 path of its
//! owner, and the workload that path names (a Kubernetes pod and container,
//! a Docker container, a systemd service).
//!
//! The kernel gives a cgroup id (`bpf_get_current_cgroup_id`), which is the
//! inode number of the cgroup's directory in the cgroup v2 hierarchy. The
//! [`CgroupPaths`] cache maps ids to paths by walking that hierarchy; the
//! rest of this module is pure text: [`Workload::from_cgroup_path`] reads
//! the layouts kubelet and container runtimes use (docs/workloads.md), and
//! [`pod_log_dirs`] names pods from the kubelet's `/var/log/pods` directory,
//! without any API access.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::model::snapshot::FlowSample;

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

/// The container runtime that named a container's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    Containerd,
    Crio,
    Docker,
    /// A cgroupfs-driver container directory: the id alone does not say.
    Unknown,
}

/// What a cgroup path names. Every field is optional: a path may name a
/// pod and no container (the pod's own slice), a service, or nothing known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Kubernetes pod UID, with dashes (the systemd driver writes `_`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
    /// `guaranteed`, `burstable` or `besteffort`.
    /// Namespace and name of that pod, where the kubelet's log directory
    /// shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    /// Container id as the runtime wrote it (usually 64 hex digits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// A systemd service unit (`kafka.service`) outside any pod or container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
}

impl Workload {
    /// Reads a cgroup v2 path (relative to the hierarchy's root, with or
    /// without a leading `/`) in the layouts of the kubelet's systemd and
    /// cgroupfs drivers, Docker's two drivers and plain systemd services.
    pub fn from_cgroup_path(path: &str) -> Workload {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let mut w = Workload::default();
        if let Some(i) = parts
            .iter()
            .position(|p| *p == "kubepods.slice" || *p == "kubepods")
        {
            w.read_kubepods(&parts[i + 1..]);
            return w;
        }
        for (i, part) in parts.iter().enumerate() {
            // Docker with the systemd driver: system.slice/docker-<id>.scope;
            // with cgroupfs: /docker/<id>.
            if let Some(id) = scope_id(part, "docker-") {
                w.set_container(id, Runtime::Docker);
                return w;
            }
            if *part == "docker" {
                if let Some(id) = parts.get(i + 1).filter(|id| is_container_id(id)) {
                    w.set_container(id, Runtime::Docker);
                    return w;
                }
            }
        }
        // The innermost service unit: a process of kafka.service may sit in
        // a sub-cgroup the service made for itself.
        w.service = parts
            .iter()
            .rev()
            .find(|p| p.ends_with(".service"))
            .map(|p| p.to_string());
        w
    }

    /// The parts below `kubepods.slice` or `kubepods`.
    fn read_kubepods(&mut self, rest: &[&str]) {
        for part in rest {
            let name = part.strip_suffix(".slice").unwrap_or(part);
            // systemd driver: kubepods-<qos>.slice, kubepods-<qos>-pod<uid>.slice,
            // kubepods-pod<uid>.slice (guaranteed: no qos level).
            if let Some(tail) = name.strip_prefix("kubepods-") {
                match tail.rsplit_once("pod") {
                    Some((qos, uid)) if looks_like_uid(uid) => {
                        self.pod_uid = Some(uid.replace('_', "-"));
                        let qos = qos.trim_end_matches('-');
                        self.qos = Some(if qos.is_empty() { "guaranteed" } else { qos }.into());
                    }
                    _ => self.qos = Some(tail.to_string()),
                }
                continue;
            }
            // cgroupfs driver: kubepods/<qos>/pod<uid>/<id>, kubepods/pod<uid>/<id>.
            if let Some(uid) = name.strip_prefix("pod").filter(|u| looks_like_uid(u)) {
                self.pod_uid = Some(uid.replace('_', "-"));
                self.qos.get_or_insert_with(|| "guaranteed".into());
                continue;
            }
            if matches!(*part, "burstable" | "besteffort") {
                self.qos = Some(part.to_string());
                continue;
            }
            for (prefix, runtime) in [
                ("cri-containerd-", Runtime::Containerd),
                ("crio-conmon-", Runtime::Crio),
                ("crio-", Runtime::Crio),
                ("docker-", Runtime::Docker),
            ] {
                if let Some(id) = scope_id(part, prefix) {
                    self.set_container(id, runtime);
                    break;
                }
            }
            if self.container_id.is_none() && self.pod_uid.is_some() && is_container_id(part) {
                self.set_container(part, Runtime::Unknown);
            }
        }
    }

    fn set_container(&mut self, id: &str, runtime: Runtime) {
        self.container_id = Some(id.to_string());
        self.runtime = Some(runtime);
    }

    /// What the workload is called in summaries: (`pod`, `namespace/name`
    /// or the UID where the name is not known), (`container`, the id's
    /// first 12 digits, as `crictl ps` and `docker ps` print it) for a
    /// container outside any pod, or (`service`, the unit).
    pub fn key(&self) -> Option<(&'static str, String)> {
        if let Some(uid) = &self.pod_uid {
            let name = match (&self.pod_namespace, &self.pod_name) {
                (Some(ns), Some(n)) => format!("{ns}/{n}"),
                _ => uid.clone(),
            };
            return Some(("pod", name));
        }
        if let Some(id) = &self.container_id {
            return Some(("container", id.chars().take(12).collect()));
        }
        self.service.as_ref().map(|s| ("service", s.clone()))
    }

    /// The short name tables show: a pod's `namespace/name` (or UID), `ctr`
    /// and the short id of a container outside pods, a service's unit.
    pub fn label(&self) -> Option<String> {
        self.key().map(|(kind, name)| match kind {
            "container" => format!("ctr {name}"),
            _ => name,
        })
    }

    /// Nothing known: the path names no pod, container or service.
    pub fn is_empty(&self) -> bool {
        self.pod_uid.is_none() && self.container_id.is_none() && self.service.is_none()
    }
}

/// `<prefix><id>.scope` -> id.
fn scope_id<'a>(part: &'a str, prefix: &str) -> Option<&'a str> {
    part.strip_prefix(prefix)?
        .strip_suffix(".scope")
        .filter(|id| !id.is_empty())
}

/// A pod UID: 32 hex digits in 5 groups, joined by `-` or (systemd) `_`.
fn looks_like_uid(s: &str) -> bool {
    let groups: Vec<&str> = s.split(['-', '_']).collect();
    groups.len() == 5
        && groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A runtime's container id: hex, at least 12 digits (Docker's short form).
fn is_container_id(s: &str) -> bool {
    s.len() >= 12 && s.chars().all(|c| c.is_ascii_hexdigit())
}

/// A pod's namespace and name, as the kubelet's log directory shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
}

/// Pod UID -> namespace and name, from the names of the directories the
/// kubelet keeps under `/var/log/pods`: `<namespace>_<name>_<uid>`.
/// Neither a namespace nor a pod name can hold `_` (DNS labels), so the
/// split is unambiguous. Entries of any other shape are ignored.
pub fn pod_log_dirs<I, S>(names: I) -> HashMap<String, PodName>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    names
        .into_iter()
        .filter_map(|n| {
            let mut f = n.as_ref().splitn(3, '_');
            let (ns, name, uid) = (f.next()?, f.next()?, f.next()?);
            (!ns.is_empty() && !name.is_empty() && looks_like_uid(uid)).then(|| {
                (
                    uid.to_string(),
                    PodName {
                        namespace: ns.to_string(),
                        name: name.to_string(),
                    },
                )
            })
        })
        .collect()
}

/// cgroup id (the directory's inode) -> path relative to the cgroup v2 root,
/// by walking the hierarchy. A miss rescans, at most once per `generation`
/// (the caller passes the interval's sequence number), so a cgroup made
/// since the last walk is found on the next interval at the latest. A
/// cgroup removed since it was seen keeps its last path: a flow whose
/// container exited is still named after it.
#[derive(Debug)]
pub struct CgroupPaths {
    root: PathBuf,
    by_id: HashMap<u64, String>,
    scanned_at: Option<u64>,
    /// Directories walked by the last scan (a cost figure for docs and health).
    pub last_scan_dirs: usize,
    /// Scans since start.
    pub scans: u64,
}

impl CgroupPaths {
    pub fn new(root: PathBuf) -> Self {
        CgroupPaths {
            root,
            by_id: HashMap::new(),
            scanned_at: None,
            last_scan_dirs: 0,
            scans: 0,
        }
    }

    /// The hierarchy this cache walks.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of cgroup `id` (`/` for the root), or None when no
    /// directory of the hierarchy has that inode (and none had it before).
    pub fn lookup(&mut self, id: u64, generation: u64) -> Option<&str> {
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
    proc_paths: HashMap<u32, Option<String>>,
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
    pub fn for_host(pod_logs: PathBuf) -> Self {
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
            self.proc_paths.clear();
            self.proc_paths_at = generation;
        }
        for f in flows.iter_mut() {
            let Some(owner) = f.owner.as_mut() else {
                continue;
            };
            let by_id = (owner.cgroup_id != 0)
                .then(|| self.paths.as_mut()?.lookup(owner.cgroup_id, generation))
                .flatten()
                .map(str::to_string);
            let path = by_id.or_else(|| {
                self.proc_paths
                    .entry(owner.pid)
                    .or_insert_with(|| {
                        fs::read_to_string(format!("/proc/{}/cgroup", owner.pid))
                            .ok()
                            .and_then(|t| proc_cgroup_path(&t))
                    })
                    .clone()
            });
            let Some(path) = path else {
                continue;
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
    }

    /// Walks of the cgroup hierarchy since start, and directories in the last.
    pub fn cgroup_scans(&self) -> (u64, usize) {
        self.paths
            .as_ref()
            .map(|p| (p.scans, p.last_scan_dirs))
            .unwrap_or((0, 0))
    }
}

/// `--pod`, `--cgroup` and `--service`: which flows to keep, by owner.
/// A flow passes when no such option was given, or when any one matches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadFilter {
    /// Pod name, `namespace/name` or UID.
    pub pods: Vec<String>,
    /// cgroup v2 paths: the cgroup and everything below it.
    pub cgroups: Vec<String>,
    /// systemd units; `kafka` means `kafka.service`.
    pub services: Vec<String>,
}

impl WorkloadFilter {
    /// Checks each value; the errors name the option.
    pub fn new(pods: &[String], cgroups: &[String], services: &[String]) -> Result<Self, String> {
        let clean = |opt: &str, v: &String| -> Result<String, String> {
            let t = v.trim();
            if t.is_empty() || t.chars().any(|c| c.is_control()) {
                return Err(format!("{opt} {v:?}: empty, or holds control characters"));
            }
            Ok(t.to_string())
        };
        let mut f = WorkloadFilter::default();
        for p in pods {
            f.pods.push(clean("--pod", p)?);
        }
        for c in cgroups {
            let c = clean("--cgroup", c)?;
            if !c.starts_with('/') {
                return Err(format!(
                    "--cgroup {c:?}: give the path from the cgroup v2 root, starting with / (e.g. /system.slice/kafka.service)"
                ));
            }
            let c = c.trim_end_matches('/');
            f.cgroups
                .push(if c.is_empty() { "/".into() } else { c.into() });
        }
        for s in services {
            let s = clean("--service", s)?;
            if s.contains('/') {
                return Err(format!("--service {s:?}: a unit name, not a path"));
            }
            f.services.push(if s.contains('.') {
                s
            } else {
                format!("{s}.service")
            });
        }
        Ok(f)
    }

    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.cgroups.is_empty() && self.services.is_empty()
    }

    pub fn matches(&self, f: &FlowSample) -> bool {
        if self.is_empty() {
            return true;
        }
        let Some(owner) = &f.owner else {
            return false;
        };
        let w = owner.workload.as_ref();
        let pod = |p: &String| {
            w.is_some_and(|w| {
                w.pod_uid.as_ref() == Some(p)
                    || w.pod_name.as_ref() == Some(p)
                    || matches!((&w.pod_namespace, &w.pod_name),
                        (Some(ns), Some(n)) if p.split_once('/') == Some((ns.as_str(), n.as_str())))
            })
        };
        let cgroup = |c: &String| {
            owner.cgroup.as_deref().is_some_and(|path| {
                c == "/"
                    || path == c
                    || path
                        .strip_prefix(c.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            })
        };
        let service = |s: &String| w.is_some_and(|w| w.service.as_ref() == Some(s));
        self.pods.iter().any(pod)
            || self.cgroups.iter().any(cgroup)
            || self.services.iter().any(service)
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
pub fn proc_cgroup_path(proc_pid_cgroup: &str) -> Option<String> {
    proc_pid_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8";
    const UID_US: &str = "0f3a1b2c_4d5e_6f70_8192_a3b4c5d6e7f8";
    const CID: &str = "4b8c3c0f1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e";

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
    fn systemd_driver_with_each_runtime() {
        for (scope, runtime) in [
            (format!("cri-containerd-{CID}.scope"), Runtime::Containerd),
            (format!("crio-{CID}.scope"), Runtime::Crio),
            (format!("docker-{CID}.scope"), Runtime::Docker),
        ] {
            let path = format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/{scope}"
            );
            let w = Workload::from_cgroup_path(&path);
            assert_eq!(w.pod_uid.as_deref(), Some(UID), "{path}");
            assert_eq!(w.qos.as_deref(), Some("burstable"));
            assert_eq!(w.container_id.as_deref(), Some(CID));
            assert_eq!(w.runtime, Some(runtime));
            assert_eq!(w.service, None);
        }
    }

    #[test]
    fn systemd_driver_guaranteed_pod_and_pod_slice_alone() {
        let path = format!("/kubepods.slice/kubepods-pod{UID_US}.slice/cri-containerd-{CID}.scope");
        let w = Workload::from_cgroup_path(&path);
        assert_eq!(w.pod_uid.as_deref(), Some(UID));
        assert_eq!(w.qos.as_deref(), Some("guaranteed"));
        assert_eq!(w.container_id.as_deref(), Some(CID));

        let pod_only = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_US}.slice"
        );
        let w = Workload::from_cgroup_path(&pod_only);
        assert_eq!(w.pod_uid.as_deref(), Some(UID));
        assert_eq!(w.qos.as_deref(), Some("besteffort"));
        assert_eq!(w.container_id, None);
    }

    #[test]
    fn crio_conmon_scope_is_the_container() {
        let path = format!(
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_US}.slice/crio-conmon-{CID}.scope"
        );
        let w = Workload::from_cgroup_path(&path);
        assert_eq!(w.container_id.as_deref(), Some(CID));
        assert_eq!(w.runtime, Some(Runtime::Crio));
    }

    #[test]
    fn cgroupfs_driver() {
        let w = Workload::from_cgroup_path(&format!("/kubepods/burstable/pod{UID}/{CID}"));
        assert_eq!(w.pod_uid.as_deref(), Some(UID));
        assert_eq!(w.qos.as_deref(), Some("burstable"));
        assert_eq!(w.container_id.as_deref(), Some(CID));
        assert_eq!(w.runtime, Some(Runtime::Unknown));

        let w = Workload::from_cgroup_path(&format!("/kubepods/pod{UID}/{CID}"));
        assert_eq!(w.qos.as_deref(), Some("guaranteed"));
        assert_eq!(w.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn docker_both_drivers_and_plain_services() {
        let w = Workload::from_cgroup_path(&format!("/system.slice/docker-{CID}.scope"));
        assert_eq!(w.container_id.as_deref(), Some(CID));
        assert_eq!(w.runtime, Some(Runtime::Docker));
        assert_eq!(w.pod_uid, None);

        let w = Workload::from_cgroup_path(&format!("/docker/{CID}"));
        assert_eq!(w.container_id.as_deref(), Some(CID));

        let w = Workload::from_cgroup_path("/system.slice/kafka.service");
        assert_eq!(w.service.as_deref(), Some("kafka.service"));
        assert!(w.container_id.is_none() && w.pod_uid.is_none());

        // A service's own sub-cgroup still names the service.
        let w = Workload::from_cgroup_path("/system.slice/kafka.service/broker");
        assert_eq!(w.service.as_deref(), Some("kafka.service"));

        for nothing in [
            "/",
            "",
            "/user.slice/user-1000.slice/session-3.scope",
            "/docker",
        ] {
            assert!(Workload::from_cgroup_path(nothing).is_empty(), "{nothing}");
        }
    }

    #[test]
    fn look_alikes_are_not_pods() {
        // "pod" inside a name that is not a UID, and short hex that is not an id.
        let w = Workload::from_cgroup_path("/kubepods.slice/kubepods-burstable.slice/podcast/abc");
        assert_eq!(w.pod_uid, None);
        assert_eq!(w.container_id, None);
        assert!(!looks_like_uid("0f3a1b2c-4d5e-6f70-8192"));
        assert!(!looks_like_uid("zf3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8"));
    }

    #[test]
    fn pod_names_from_the_kubelet_log_directory() {
        let names = [
            format!("kafka_broker-0_{UID}"),
            "not-a-pod".to_string(),
            "kube-system_coredns-abc_short".to_string(),
        ];
        let pods = pod_log_dirs(&names);
        assert_eq!(pods.len(), 1);
        assert_eq!(
            pods[UID],
            PodName {
                namespace: "kafka".into(),
                name: "broker-0".into()
            }
        );
    }

    fn owned(cgroup: &str, w: Workload) -> FlowSample {
        FlowSample {
            owner: Some(crate::model::snapshot::Owner {
                pid: 1,
                comm: "java".into(),
                cgroup_id: 0,
                cgroup: Some(cgroup.into()),
                workload: Some(w),
            }),
            ..FlowSample::example(1)
        }
    }

    #[test]
    fn filter_by_pod_cgroup_and_service() {
        let pod = Workload {
            pod_uid: Some(UID.into()),
            pod_namespace: Some("kafka".into()),
            pod_name: Some("broker-0".into()),
            ..Workload::default()
        };
        let path = format!("/kubepods.slice/kubepods-pod{UID_US}.slice/cri-containerd-{CID}.scope");
        let in_pod = owned(&path, pod);
        let svc = owned(
            "/system.slice/kafka.service",
            Workload::from_cgroup_path("/system.slice/kafka.service"),
        );
        let nobody = FlowSample::example(3);
        let f = |p: &[&str], c: &[&str], s: &[&str]| {
            let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            WorkloadFilter::new(&v(p), &v(c), &v(s)).unwrap()
        };

        for by in ["broker-0", "kafka/broker-0", UID] {
            let only = f(&[by], &[], &[]);
            assert!(only.matches(&in_pod), "{by}");
            assert!(!only.matches(&svc) && !only.matches(&nobody), "{by}");
        }
        assert!(!f(&["kafka/broker-1"], &[], &[]).matches(&in_pod));
        assert!(f(&[], &["/kubepods.slice"], &[]).matches(&in_pod));
        assert!(
            !f(&[], &["/kubepods.sl"], &[]).matches(&in_pod),
            "whole components only"
        );
        assert!(f(&[], &["/system.slice/kafka.service/"], &[]).matches(&svc));
        for unit in ["kafka", "kafka.service"] {
            assert!(f(&[], &[], &[unit]).matches(&svc));
            assert!(!f(&[], &[], &[unit]).matches(&in_pod));
        }
        // Any one matching option keeps a flow; none given keeps all.
        let either = f(&["broker-0"], &[], &["kafka"]);
        assert!(either.matches(&in_pod) && either.matches(&svc) && !either.matches(&nobody));
        assert!(WorkloadFilter::default().matches(&nobody));

        let s = |a: &str| vec![a.to_string()];
        assert!(WorkloadFilter::new(&s(""), &[], &[]).is_err());
        assert!(WorkloadFilter::new(&[], &s("system.slice"), &[]).is_err());
        assert!(WorkloadFilter::new(&[], &[], &s("a/b")).is_err());
        assert!(WorkloadFilter::new(&s("x\x1b[2J"), &[], &[]).is_err());
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
