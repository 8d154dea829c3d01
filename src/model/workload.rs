//! Who a flow belongs to on a container host: the cgroup v2 path of its
//! owner, and the workload that path names (a Kubernetes pod and container,
//! a Docker container, a systemd service).
//!
//! This module is pure text: [`Workload::from_cgroup_path`] reads the
//! layouts kubelet and container runtimes use (docs/workloads.md), and
//! [`pod_log_dirs`] names pods from the kubelet's `/var/log/pods` directory,
//! without any API access. Reading the host (cgroup ids to paths, /proc) is
//! collection's: src/collect/cgroups.rs.
//!
//! The snapshot depends on this module (a flow's owner holds a
//! [`Workload`]), never the other way: [`WorkloadFilter::matches`] takes an
//! owner's cgroup path and workload, not a flow, and `FlowSample::passes`
//! in src/model/snapshot.rs applies it to a flow.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

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
    pub(crate) fn from_cgroup_path(path: &str) -> Workload {
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
    pub(crate) fn key(&self) -> Option<(&'static str, String)> {
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
    pub(crate) fn label(&self) -> Option<String> {
        self.key().map(|(kind, name)| match kind {
            "container" => format!("ctr {name}"),
            _ => name,
        })
    }

    /// Nothing known: the path names no pod, container or service.
    pub(crate) fn is_empty(&self) -> bool {
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
pub(crate) struct PodName {
    pub namespace: String,
    pub name: String,
}

/// Pod UID -> namespace and name, from the names of the directories the
/// kubelet keeps under `/var/log/pods`: `<namespace>_<name>_<uid>`.
/// Neither a namespace nor a pod name can hold `_` (DNS labels), so the
/// split is unambiguous. Entries of any other shape are ignored.
pub(crate) fn pod_log_dirs<I, S>(names: I) -> HashMap<String, PodName>
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
    pub(crate) fn new(
        pods: &[String],
        cgroups: &[String],
        services: &[String],
    ) -> Result<Self, String> {
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

    pub(crate) fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.cgroups.is_empty() && self.services.is_empty()
    }

    /// Whether a flow whose owner has cgroup path `cgroup` and names
    /// `workload` passes; a flow without an owner has neither. It takes the
    /// owner's parts rather than the flow so that this module never needs
    /// the snapshot's types (see `FlowSample::passes`).
    pub(crate) fn matches(&self, cgroup: Option<&str>, workload: Option<&Workload>) -> bool {
        if self.is_empty() {
            return true;
        }
        let w = workload;
        let pod = |p: &String| {
            w.is_some_and(|w| {
                w.pod_uid.as_ref() == Some(p)
                    || w.pod_name.as_ref() == Some(p)
                    || matches!((&w.pod_namespace, &w.pod_name),
                        (Some(ns), Some(n)) if p.split_once('/') == Some((ns.as_str(), n.as_str())))
            })
        };
        let cgroup = |c: &String| {
            cgroup.is_some_and(|path| {
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

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f3a1b2c-4d5e-6f70-8192-a3b4c5d6e7f8";
    const UID_US: &str = "0f3a1b2c_4d5e_6f70_8192_a3b4c5d6e7f8";
    const CID: &str = "4b8c3c0f1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e";

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

    /// An owner's cgroup path and workload, as `WorkloadFilter::matches`
    /// takes them.
    type OwnerParts = (Option<String>, Option<Workload>);

    fn owned(cgroup: &str, w: Workload) -> OwnerParts {
        (Some(cgroup.into()), Some(w))
    }

    fn keeps(filter: &WorkloadFilter, owner: &OwnerParts) -> bool {
        filter.matches(owner.0.as_deref(), owner.1.as_ref())
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
        let nobody: OwnerParts = (None, None);
        let f = |p: &[&str], c: &[&str], s: &[&str]| {
            let v = |a: &[&str]| a.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            WorkloadFilter::new(&v(p), &v(c), &v(s)).unwrap()
        };

        for by in ["broker-0", "kafka/broker-0", UID] {
            let only = f(&[by], &[], &[]);
            assert!(keeps(&only, &in_pod), "{by}");
            assert!(!keeps(&only, &svc) && !keeps(&only, &nobody), "{by}");
        }
        assert!(!keeps(&f(&["kafka/broker-1"], &[], &[]), &in_pod));
        assert!(keeps(&f(&[], &["/kubepods.slice"], &[]), &in_pod));
        assert!(
            !keeps(&f(&[], &["/kubepods.sl"], &[]), &in_pod),
            "whole components only"
        );
        assert!(keeps(&f(&[], &["/system.slice/kafka.service/"], &[]), &svc));
        for unit in ["kafka", "kafka.service"] {
            assert!(keeps(&f(&[], &[], &[unit]), &svc));
            assert!(!keeps(&f(&[], &[], &[unit]), &in_pod));
        }
        // Any one matching option keeps a flow; none given keeps all.
        let either = f(&["broker-0"], &[], &["kafka"]);
        assert!(keeps(&either, &in_pod) && keeps(&either, &svc) && !keeps(&either, &nobody));
        assert!(keeps(&WorkloadFilter::default(), &nobody));

        let s = |a: &str| vec![a.to_string()];
        assert!(WorkloadFilter::new(&s(""), &[], &[]).is_err());
        assert!(WorkloadFilter::new(&[], &s("system.slice"), &[]).is_err());
        assert!(WorkloadFilter::new(&[], &[], &s("a/b")).is_err());
        assert!(WorkloadFilter::new(&s("x\x1b[2J"), &[], &[]).is_err());
    }
}
