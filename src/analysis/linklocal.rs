//! The packets sent to the instance's link-local services through one
//! interface in one interval, by sender (src/model/linklocal.rs): UDP
//! datagrams counted in the kernel, and the segments out of TCP flows whose
//! peer is a service. The rates take the total and the top senders from it
//! (`linklocal_pps`, `linklocal_senders`, rates.rs); a report sums every
//! sender over an episode or its span (src/report/linklocal.rs). Pure.

use std::collections::BTreeMap;

use crate::model::linklocal::{LinkLocalSender, LinkLocalService};
use crate::model::snapshot::{InterfaceSample, Owner, Snapshot};

use super::rates::owner_name;

/// Who sent: owner (as [`sender_name`] words it), service, protocol and
/// the destination's family (4 or 6).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct SenderKey {
    pub sender: String,
    pub service: LinkLocalService,
    pub proto: String,
    pub family: u8,
}

/// One interface's packets to the link-local services in one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LinkLocalCounts {
    /// Every packet sent to them: the senders', the folded ones and those
    /// no sender was kept for.
    pub packets: u64,
    /// Every sender named, with its packets, most first (ties by key).
    pub senders: Vec<(SenderKey, u64)>,
    /// Senders the recorder folded past its list
    /// (`LINKLOCAL_SENDERS_LISTED`), and their packets: in `packets`, in
    /// no sender.
    pub folded_senders: u64,
    pub folded_packets: u64,
    /// Datagrams no sender was kept for (the kernel's sender map was
    /// full): in `packets`, in no sender.
    pub unattributed: u64,
}

/// The packets sent to the link-local services through `iface` in `snap`'s
/// interval, by sender; None when the link-local probes did not measure
/// the interface (then the TCP side is not counted either, as the rates do
/// not count it).
pub(crate) fn counts(snap: &Snapshot, iface: &InterfaceSample) -> Option<LinkLocalCounts> {
    let sample = iface.linklocal.as_ref()?;
    let mut by: BTreeMap<SenderKey, u64> = BTreeMap::new();
    for s in &sample.senders {
        let key = SenderKey {
            sender: udp_sender_name(s),
            service: s.service,
            proto: s.proto.clone(),
            family: s.family,
        };
        *by.entry(key).or_default() += s.packets;
    }
    let mut packets = sample.packets() + sample.unattributed;
    for f in snap.flows.iter().filter(|f| f.counts_for(&iface.name)) {
        let Some(service) = LinkLocalService::of(f.peer.ip(), None) else {
            continue;
        };
        if f.delta.segs_out == 0 {
            continue;
        }
        let family = if f.peer.is_ipv4()
            || matches!(f.peer.ip(), std::net::IpAddr::V6(a) if a.to_ipv4_mapped().is_some())
        {
            4
        } else {
            6
        };
        let sender = f
            .owner
            .as_ref()
            .map_or_else(|| "owner unknown".to_string(), owner_name);
        let key = SenderKey {
            sender,
            service,
            proto: "tcp".into(),
            family,
        };
        *by.entry(key).or_default() += f.delta.segs_out;
        packets += f.delta.segs_out;
    }
    let mut senders: Vec<(SenderKey, u64)> = by.into_iter().collect();
    senders.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Some(LinkLocalCounts {
        packets,
        senders,
        folded_senders: sample.folded_senders,
        folded_packets: sample.folded_packets,
        unattributed: sample.unattributed,
    })
}

/// A UDP sender to the link-local services, as [`sender_name`] words its
/// owner; one forwarded from another namespace (a pod's, `--all-netns`)
/// says so, with that namespace, or that its socket was not seen.
fn udp_sender_name(s: &LinkLocalSender) -> String {
    match (&s.from_netns, s.forwarded) {
        (_, false) => sender_name(&s.owner),
        (Some(ns), true) => format!(
            "{} via netns {}",
            sender_name(&s.owner),
            crate::shared::terminal_text::inert(ns)
        ),
        (None, true) => "forwarded, sender not seen".to_string(),
    }
}

/// An owner of sockets (a UDP sender to the link-local services, a UDP
/// opener): its owner as a flow's, or,
/// when its socket's process was not found (pid 0: the socket was closed
/// before the read, as a resolver's socket per query is), the socket's
/// cgroup: the workload it names, else its path.
pub(crate) fn sender_name(o: &Owner) -> String {
    if o.pid != 0 {
        return owner_name(o);
    }
    match (o.workload.as_ref().and_then(|w| w.label()), &o.cgroup) {
        (Some(w), _) => format!("process unknown ({w})"),
        (None, Some(c)) => format!(
            "process unknown (cgroup {})",
            crate::shared::terminal_text::inert(c)
        ),
        (None, None) => "process unknown".to_string(),
    }
}
