//! The report's per-workload summary: the flows' backoff added up by the
//! pod, container or service that owned them (docs/workloads.md), so a
//! review can say which tenant paid, not only which socket.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::model::snapshot::Owner;

/// One pod, container or service, over the report's span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSummary {
    /// `pod`, `container` or `service`.
    pub kind: String,
    /// `namespace/name` (the UID where the name is not known), a container
    /// id's first 12 digits, or a unit name.
    pub name: String,
    pub flows: u64,
    pub bytes_sent: u64,
    pub retransmits: u64,
    /// Sum of its flows' backoff totals: what ranks the workloads.
    pub backoff_total: f64,
}

/// What a flow owner's workload is called in the summary; None when the
/// owner names no pod, container or service.
pub(crate) fn workload_key(owner: Option<&Owner>) -> Option<(&'static str, String)> {
    owner?.workload.as_ref()?.key()
}

/// Adds up flows by workload, most backoff first.
#[derive(Debug, Default)]
pub(crate) struct WorkloadTotals {
    by_key: HashMap<(&'static str, String), WorkloadSummary>,
}

impl WorkloadTotals {
    pub(crate) fn add(
        &mut self,
        owner: Option<&Owner>,
        bytes_sent: u64,
        retransmits: u64,
        backoff: f64,
    ) {
        let Some((kind, name)) = workload_key(owner) else {
            return;
        };
        let s = self
            .by_key
            .entry((kind, name.clone()))
            .or_insert_with(|| WorkloadSummary {
                kind: kind.to_string(),
                name,
                flows: 0,
                bytes_sent: 0,
                retransmits: 0,
                backoff_total: 0.0,
            });
        s.flows += 1;
        s.bytes_sent += bytes_sent;
        s.retransmits += retransmits;
        s.backoff_total += backoff;
    }

    pub(crate) fn finish(self) -> Vec<WorkloadSummary> {
        let mut v: Vec<WorkloadSummary> = self
            .by_key
            .into_values()
            .map(|mut s| {
                s.backoff_total = (s.backoff_total * 10.0).round() / 10.0;
                s
            })
            .collect();
        v.sort_by(|a, b| {
            b.backoff_total
                .total_cmp(&a.backoff_total)
                .then(b.bytes_sent.cmp(&a.bytes_sent))
                .then(a.name.cmp(&b.name))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::workload::Workload;

    fn owner(w: Workload) -> Owner {
        Owner {
            pid: 1,
            comm: "java".into(),
            thread: None,
            cgroup_id: 0,
            cgroup: None,
            workload: Some(w),
        }
    }

    #[test]
    fn flows_add_up_per_workload_most_backoff_first() {
        let pod = owner(Workload {
            pod_uid: Some("u1".into()),
            pod_namespace: Some("kafka".into()),
            pod_name: Some("broker-0".into()),
            container_id: Some("ab".repeat(32)),
            ..Workload::default()
        });
        let uid_only = owner(Workload {
            pod_uid: Some("u2".into()),
            ..Workload::default()
        });
        let svc = owner(Workload {
            service: Some("kafka.service".into()),
            ..Workload::default()
        });
        let docker = owner(Workload {
            container_id: Some("cd".repeat(32)),
            ..Workload::default()
        });
        let mut t = WorkloadTotals::default();
        t.add(Some(&pod), 100, 1, 10.0);
        t.add(Some(&pod), 50, 2, 5.04);
        t.add(Some(&uid_only), 10, 0, 1.0);
        t.add(Some(&svc), 1000, 9, 30.0);
        t.add(Some(&docker), 5, 0, 0.0);
        t.add(None, 1, 1, 99.0); // no owner: not a workload
        let v = t.finish();
        let names: Vec<(&str, &str)> = v
            .iter()
            .map(|s| (s.kind.as_str(), s.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("service", "kafka.service"),
                ("pod", "kafka/broker-0"),
                ("pod", "u2"),
                ("container", "cdcdcdcdcdcd")
            ]
        );
        assert_eq!((v[1].flows, v[1].bytes_sent, v[1].retransmits), (2, 150, 3));
        assert_eq!(v[1].backoff_total, 15.0);
    }
}
