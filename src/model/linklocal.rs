//! Packets sent to the instance's link-local services (the Amazon DNS
//! resolver, instance metadata, the Time Sync service), by sender: what the
//! `linklocal_allowance_exceeded` counter limits to 1,024 packets per second
//! per interface, and whom a `linklocal_limit` names (docs/verdicts.md,
//! "Who sends to the link-local services"). UDP is counted in the kernel
//! per datagram sent (bpf/linklocal.bpf.c); TCP (instance metadata is HTTP)
//! comes from the flows, whose peers are these addresses.

use super::is_zero;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::snapshot::Owner;

/// The packets-per-second limit of the link-local services, per interface
/// (AWS: "1024 packets per second per network interface").
pub const LINKLOCAL_PPS_LIMIT: f64 = 1024.0;

/// Senders listed per interface and interval; the rest are summed in
/// `folded_*` (bounded output, whatever the number of processes).
pub const LINKLOCAL_SENDERS_LISTED: usize = 32;

/// A link-local service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLocalService {
    /// The Amazon DNS resolver: 169.254.169.253, fd00:ec2::253, and the
    /// VPC resolver (the VPC's base + 2).
    Dns,
    /// Instance metadata: 169.254.169.254, fd00:ec2::254.
    Metadata,
    /// The Time Sync service: 169.254.169.123, fd00:ec2::123.
    Time,
    /// Anything else in 169.254.0.0/16 or fd00:ec2::/32.
    Other,
}

impl LinkLocalService {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkLocalService::Dns => "dns",
            LinkLocalService::Metadata => "metadata",
            LinkLocalService::Time => "time",
            LinkLocalService::Other => "other",
        }
    }

    /// The service at `addr`, if it is one (`vpc_dns`: the VPC resolver,
    /// where known). The same classification as bpf/linklocal.bpf.c's.
    pub fn of(addr: IpAddr, vpc_dns: Option<IpAddr>) -> Option<LinkLocalService> {
        if vpc_dns == Some(addr) {
            return Some(LinkLocalService::Dns);
        }
        match addr {
            IpAddr::V4(a) => {
                let o = a.octets();
                if o[0] != 169 || o[1] != 254 {
                    return None;
                }
                Some(match (o[2], o[3]) {
                    (169, 253) => LinkLocalService::Dns,
                    (169, 254) => LinkLocalService::Metadata,
                    (169, 123) => LinkLocalService::Time,
                    _ => LinkLocalService::Other,
                })
            }
            IpAddr::V6(a) => {
                if let Some(v4) = a.to_ipv4_mapped() {
                    return LinkLocalService::of(IpAddr::V4(v4), vpc_dns);
                }
                let s = a.segments();
                if s[0] != 0xfd00 || s[1] != 0x0ec2 {
                    return None;
                }
                if s[2..7].iter().any(|x| *x != 0) {
                    return Some(LinkLocalService::Other);
                }
                Some(match s[7] {
                    0x253 => LinkLocalService::Dns,
                    0x254 => LinkLocalService::Metadata,
                    0x123 => LinkLocalService::Time,
                    _ => LinkLocalService::Other,
                })
            }
        }
    }
}

/// One sender's packets to one service in the interval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkLocalSender {
    /// The sending process (pid, its name, cgroup and workload).
    pub owner: Owner,
    pub service: LinkLocalService,
    /// `udp` (here; TCP is in the flows).
    pub proto: String,
    /// The destination's family: 4 or 6.
    pub family: u8,
    /// Datagrams sent (each one packet on the wire, unfragmented).
    pub packets: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Sent from another network namespace (a pod's, `--all-netns`) and
    /// forwarded through this interface: `owner` is the sending socket's
    /// there, or all zero when that socket was not seen (`from_netns`
    /// None: sent before the observer started, or by a socket whose skb the
    /// kernel did not hand on whole). Absent before format 1.20.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub forwarded: bool,
    /// For a forwarded sender seen: its network namespace, by its `ip
    /// netns` name where it has one, else its inode (a pod's is named by
    /// the owner's workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_netns: Option<String>,
}

/// The UDP sent to the link-local services through one interface in one
/// interval: present on the interface the route to the services takes when
/// the probes run (empty senders: none sent), absent otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkLocalSample {
    /// Most packets first, at most [`LINKLOCAL_SENDERS_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub senders: Vec<LinkLocalSender>,
    /// Senders past the list, and their packets and bytes summed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_senders: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_packets: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub folded_bytes: u64,
    /// Datagrams sent to the services in the interval that no sender could
    /// be kept for (the kernel's sender map was full): in no sender, and
    /// not in `packets()` either.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unattributed: u64,
}

impl LinkLocalSample {
    /// Datagrams of every sender, listed and folded.
    pub fn packets(&self) -> u64 {
        self.senders.iter().map(|s| s.packets).sum::<u64>() + self.folded_packets
    }

    /// Lists `senders` most packets first, at most
    /// [`LINKLOCAL_SENDERS_LISTED`], and folds the rest.
    pub fn of(mut senders: Vec<LinkLocalSender>, unattributed: u64) -> LinkLocalSample {
        senders.sort_by(|a, b| {
            b.packets
                .cmp(&a.packets)
                .then(a.owner.pid.cmp(&b.owner.pid))
                .then(a.service.cmp(&b.service))
                .then(a.family.cmp(&b.family))
        });
        let mut s = LinkLocalSample {
            unattributed,
            ..Default::default()
        };
        s.senders = super::list_first(senders, LINKLOCAL_SENDERS_LISTED, |x| {
            s.folded_senders += 1;
            s.folded_packets += x.packets;
            s.folded_bytes += x.bytes;
        });
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_by_address() {
        let of = |a: &str| LinkLocalService::of(a.parse().unwrap(), None);
        assert_eq!(of("169.254.169.253"), Some(LinkLocalService::Dns));
        assert_eq!(of("169.254.169.254"), Some(LinkLocalService::Metadata));
        assert_eq!(of("169.254.169.123"), Some(LinkLocalService::Time));
        assert_eq!(of("169.254.170.2"), Some(LinkLocalService::Other));
        assert_eq!(of("fd00:ec2::253"), Some(LinkLocalService::Dns));
        assert_eq!(of("fd00:ec2::254"), Some(LinkLocalService::Metadata));
        assert_eq!(of("fd00:ec2::123"), Some(LinkLocalService::Time));
        assert_eq!(of("fd00:ec2::1:253"), Some(LinkLocalService::Other));
        assert_eq!(of("::ffff:169.254.169.253"), Some(LinkLocalService::Dns));
        assert_eq!(of("10.0.0.2"), None);
        assert_eq!(of("fd00:ec3::253"), None);
        let vpc = Some("10.0.0.2".parse().unwrap());
        assert_eq!(
            LinkLocalService::of("10.0.0.2".parse().unwrap(), vpc),
            Some(LinkLocalService::Dns)
        );
    }
}
