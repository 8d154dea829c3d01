//! UDP and ICMP sockets made in the interval, by owner: the new UDP
//! 5-tuples and ICMP echo flows the hypervisor's connection tracking
//! allowance counts (a resolver that opens a socket per query makes a new
//! source port, so a new flow, per query; a ping a new echo identifier),
//! counted in the kernel once per socket (bpf/udpopen.bpf.h), never per
//! packet. Whom a `conntrack_limit` names beside the TCP openers
//! (docs/verdicts.md, "Who fills the connection table"). One
//! [`SocketOpenSample`] per protocol: the snapshot's `udp_openers` and
//! `icmp_openers`.
//!
//! Per network namespace, not per interface: a socket is made before any
//! route is chosen, so the interface its flows will use is not known then.
//! One socket that sends to many peers from one port counts once here, and
//! as many flows as peers in the table.

use super::is_zero;
use serde::{Deserialize, Serialize};

use super::snapshot::Owner;

/// Owners listed per interval; the rest are summed in `folded_*` (bounded
/// output, whatever the number of processes).
pub const OPENERS_LISTED: usize = 32;

/// One owner's sockets of one protocol made in the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketOpener {
    /// The process that made the sockets: its pid, name, cgroup and
    /// workload.
    pub owner: Owner,
    /// The socket's family: 4 or 6 (an IPv6 socket may send IPv4).
    pub family: u8,
    /// Sockets made.
    pub sockets: u64,
}

/// The sockets of one protocol (UDP, or ICMP) made in the observed
/// namespace in one interval, by owner: present when the program is
/// attached (empty openers: none made), absent otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketOpenSample {
    /// Most sockets first, at most [`OPENERS_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub openers: Vec<SocketOpener>,
    /// Owners past the list, and their sockets summed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_openers: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_sockets: u64,
    /// Sockets made in the interval whose owner could not be kept (the
    /// kernel's owner map was full): in no owner, in `sockets()`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattributed: u64,
}

impl SocketOpenSample {
    /// Sockets made in the interval: every owner's, listed and folded, and
    /// the unattributed ones.
    pub fn sockets(&self) -> u64 {
        self.openers.iter().map(|o| o.sockets).sum::<u64>()
            + self.folded_sockets
            + self.unattributed
    }

    /// Lists `openers` most sockets first, at most [`OPENERS_LISTED`],
    /// and folds the rest.
    pub fn of(mut openers: Vec<SocketOpener>, unattributed: u64) -> SocketOpenSample {
        openers.sort_by(|a, b| {
            b.sockets
                .cmp(&a.sockets)
                .then(a.owner.pid.cmp(&b.owner.pid))
                .then(a.owner.cgroup_id.cmp(&b.owner.cgroup_id))
                .then(a.family.cmp(&b.family))
        });
        let mut s = SocketOpenSample {
            unattributed,
            ..Default::default()
        };
        s.openers = super::list_first(openers, OPENERS_LISTED, |o| {
            s.folded_openers += 1;
            s.folded_sockets += o.sockets;
        });
        s
    }
}
