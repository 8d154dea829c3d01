//! Where a TCP flow's packets really go when the node rewrites their
//! destination. A pod that connects to a service's address (a Kubernetes
//! ClusterIP, a Docker published port) holds a socket whose peer is that
//! address, but the node's conntrack translates it (DNAT: kube-proxy's
//! iptables or nftables rules, IPVS with `conntrack=1`) to a backend,
//! which may be another pod on the same node. Routing the service's
//! address would send such a flow out of the ENI (the default route) and
//! judge the ENI by a flow that never crossed it; the backend's address is
//! what the node routes.
//!
//! The translation is the connection's own conntrack entry, read with one
//! ctnetlink request (IPCTNL_MSG_CT_GET with the socket's tuple,
//! linux/netfilter/nfnetlink_conntrack.h), which the kernel finds by
//! either of the entry's tuples: for a connection the socket opened, its
//! packets go where the reply tuple comes from; for one it accepted, back
//! to where the original tuple came from (a NodePort's client behind the
//! node's SNAT). A flow with no entry (an untracked flow) or whose packets
//! go to its peer (no translation; masquerading on the way out keeps it)
//! is not translated.
//!
//! Read only, and nothing loaded: the lookup is made only where the
//! kernel already has ctnetlink (built in, or its module loaded: its
//! functions are in /proc/kallsyms) and conntrack itself. A request to a
//! kernel with ctnetlink as a module not loaded would make the kernel load
//! it; without it no flow is translated, and [`NatLookup::available`] says
//! so.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::OnceLock;

use crate::collect::rtnetlink::{attribute, attributes, family_octets, NetlinkSocket};

/// nfnetlink: ctnetlink's subsystem and messages (nfnetlink.h,
/// nfnetlink_conntrack.h).
const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_GET: u16 = 1;
/// struct nfgenmsg: family, version, resource id.
const NFGENMSG: usize = 4;
const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_IP_V6_SRC: u16 = 3;
const CTA_IP_V6_DST: u16 = 4;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;
/// An attribute holding attributes (netlink.h).
const NLA_F_NESTED: u16 = 0x8000;
const IPPROTO_TCP: u8 = 6;

/// Present where conntrack is in the kernel (a per-namespace sysctl).
const CONNTRACK_SYSCTL: &str = "/proc/sys/net/netfilter/nf_conntrack_count";
/// A prefix of ctnetlink's functions' names, listed in /proc/kallsyms
/// when it is built in or its module (nf_conntrack_netlink) is loaded.
const CTNETLINK_SYMBOL: &str = "ctnetlink_";

/// Conntrack lookups in the calling thread's namespace.
pub(crate) struct NatLookup {
    socket: Option<NetlinkSocket>,
}

impl NatLookup {
    /// A lookup for this namespace: none (every flow untranslated) where
    /// the kernel has no conntrack or no ctnetlink loaded, or the socket
    /// cannot be opened.
    pub(crate) fn new() -> Self {
        NatLookup {
            socket: ctnetlink_ready()
                .then(|| NetlinkSocket::open(libc::NETLINK_NETFILTER, 0, 0).ok())
                .flatten(),
        }
    }

    /// A lookup in the namespace of the file `netns` (/run/netns/NAME,
    /// /proc/PID/ns/net): its socket is opened from a thread that enters
    /// it, and stays that namespace's. None where [`Self::new`] would be,
    /// or the namespace cannot be entered.
    pub(crate) fn in_namespace(netns: &Path) -> Self {
        if !ctnetlink_ready() {
            return NatLookup { socket: None };
        }
        let Ok(file) = std::fs::File::open(netns) else {
            return NatLookup { socket: None };
        };
        // A thread of its own: entering a namespace changes the calling
        // thread's, and the collector's must stay where it is.
        let socket = std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns(2) on an open namespace file; this thread
                // ends here.
                if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return None;
                }
                NetlinkSocket::open(libc::NETLINK_NETFILTER, 0, 0).ok()
            })
            .join()
            .ok()
            .flatten()
        });
        NatLookup { socket }
    }

    /// A lookup that translates nothing.
    #[cfg(test)]
    fn none() -> Self {
        NatLookup { socket: None }
    }

    /// Whether flows can be looked up at all.
    pub(crate) fn available(&self) -> bool {
        self.socket.is_some()
    }

    /// Where the TCP flow `local -> peer` (as its socket holds them) is
    /// sent after the node's NAT: the backend's address when conntrack
    /// translated the destination, None when it did not (or has no entry).
    pub(crate) fn destination(&mut self, local: SocketAddr, peer: SocketAddr) -> Option<IpAddr> {
        let socket = self.socket.as_mut()?;
        let body = get_request(local, peer)?;
        let mut entry = None;
        socket
            .request(
                NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_GET,
                false,
                &body,
                |kind, payload| {
                    if kind == NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_NEW {
                        entry = Entry::of(payload);
                    }
                },
            )
            .ok()?; // ENOENT: no entry, no translation
        entry?.sent_to(local, peer).filter(|to| *to != peer.ip())
    }
}

/// A conntrack entry's two tuples: the first packet as it came (before
/// any translation), and the answer as it comes back (after).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    original: (SocketAddr, SocketAddr),
    reply: (SocketAddr, SocketAddr),
}

impl Entry {
    fn of(payload: &[u8]) -> Option<Entry> {
        let tuple = |kind| {
            attributes(payload, NFGENMSG)
                .find(|(k, _)| *k == kind)
                .and_then(|(_, d)| tuple_of(d))
        };
        Some(Entry {
            original: tuple(CTA_TUPLE_ORIG)?,
            reply: tuple(CTA_TUPLE_REPLY)?,
        })
    }

    /// Where the packets of a socket sending `local -> peer` go. The
    /// kernel finds an entry by either tuple: a connection the socket
    /// opened has it as its original tuple, and its packets go where the
    /// reply comes from; one it accepted has it as its reply tuple, and
    /// its packets go back to where the original came from.
    fn sent_to(&self, local: SocketAddr, peer: SocketAddr) -> Option<IpAddr> {
        if self.original == (local, peer) {
            Some(self.reply.0.ip())
        } else if self.reply == (local, peer) {
            Some(self.original.0.ip())
        } else {
            None
        }
    }
}

/// (source, destination) of a CTA_TUPLE_ORIG or CTA_TUPLE_REPLY.
fn tuple_of(data: &[u8]) -> Option<(SocketAddr, SocketAddr)> {
    let nested = |data: &[u8], kind: u16| {
        attributes(data, 0)
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| d.to_vec())
    };
    let ip = nested(data, CTA_TUPLE_IP)?;
    let proto = nested(data, CTA_TUPLE_PROTO)?;
    let addr = |v4: u16, v6: u16| -> Option<IpAddr> {
        if let Some(a) = nested(&ip, v4) {
            let octets: [u8; 4] = a.get(..4)?.try_into().ok()?;
            return Some(IpAddr::from(octets));
        }
        let a = nested(&ip, v6)?;
        let octets: [u8; 16] = a.get(..16)?.try_into().ok()?;
        Some(IpAddr::from(octets))
    };
    let port = |kind| -> Option<u16> {
        let p = nested(&proto, kind)?;
        Some(u16::from_be_bytes(p.get(..2)?.try_into().ok()?))
    };
    Some((
        SocketAddr::new(
            addr(CTA_IP_V4_SRC, CTA_IP_V6_SRC)?,
            port(CTA_PROTO_SRC_PORT)?,
        ),
        SocketAddr::new(
            addr(CTA_IP_V4_DST, CTA_IP_V6_DST)?,
            port(CTA_PROTO_DST_PORT)?,
        ),
    ))
}

/// Whether conntrack and ctnetlink are in the kernel (asked once).
fn ctnetlink_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| Path::new(CONNTRACK_SYSCTL).exists() && kernel_has_ctnetlink())
}

/// Whether the running kernel has ctnetlink's functions: a symbol of it
/// in /proc/kallsyms (names are listed to root whatever kptr_restrict
/// hides of the addresses). Read once, at most to its end (~120,000
/// lines, tens of ms).
fn kernel_has_ctnetlink() -> bool {
    let Ok(file) = std::fs::File::open("/proc/kallsyms") else {
        return false;
    };
    BufReader::new(file)
        .lines()
        .map_while(Result::ok)
        .any(|line| {
            line.split_whitespace()
                .nth(2)
                .is_some_and(|name| name.starts_with(CTNETLINK_SYMBOL))
        })
}

/// The IPCTNL_MSG_CT_GET body for the original tuple `local -> peer`
/// (None when the families differ).
fn get_request(local: SocketAddr, peer: SocketAddr) -> Option<Vec<u8>> {
    let (family, src, dst) = family_octets(local.ip(), peer.ip())?;
    let (src_attr, dst_attr) = if family == libc::AF_INET as u8 {
        (CTA_IP_V4_SRC, CTA_IP_V4_DST)
    } else {
        (CTA_IP_V6_SRC, CTA_IP_V6_DST)
    };
    let ips = [attribute(src_attr, &src), attribute(dst_attr, &dst)].concat();
    // Ports in network order, as in the packets.
    let proto = [
        attribute(CTA_PROTO_NUM, &[IPPROTO_TCP]),
        attribute(CTA_PROTO_SRC_PORT, &local.port().to_be_bytes()),
        attribute(CTA_PROTO_DST_PORT, &peer.port().to_be_bytes()),
    ]
    .concat();
    let tuple = [
        attribute(CTA_TUPLE_IP | NLA_F_NESTED, &ips),
        attribute(CTA_TUPLE_PROTO | NLA_F_NESTED, &proto),
    ]
    .concat();
    // nfgenmsg: the family, NFNETLINK_V0, resource id 0.
    let mut body = vec![family, 0, 0, 0];
    body.extend(attribute(CTA_TUPLE_ORIG | NLA_F_NESTED, &tuple));
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::rtnetlink::tests::owned_attributes;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The request as the kernel parses it: nfgenmsg, then the original
    /// tuple's addresses and TCP ports in network order.
    #[test]
    fn a_get_request_carries_the_original_tuple() {
        let body = get_request(sa("10.77.3.2:40000"), sa("10.96.0.10:7300")).unwrap();
        assert_eq!(&body[..NFGENMSG], &[libc::AF_INET as u8, 0, 0, 0]);
        let orig = owned_attributes(&body, NFGENMSG);
        assert_eq!(orig.len(), 1);
        assert_eq!(orig[0].0, CTA_TUPLE_ORIG, "the nested flag is cleared");
        let parts = owned_attributes(&orig[0].1, 0);
        let ip = owned_attributes(&parts[0].1, 0);
        assert_eq!(
            ip,
            vec![
                (CTA_IP_V4_SRC, vec![10, 77, 3, 2]),
                (CTA_IP_V4_DST, vec![10, 96, 0, 10])
            ]
        );
        let proto = owned_attributes(&parts[1].1, 0);
        assert_eq!(
            proto,
            vec![
                (CTA_PROTO_NUM, vec![6]),
                (CTA_PROTO_SRC_PORT, vec![0x9c, 0x40]),
                (CTA_PROTO_DST_PORT, vec![0x1c, 0x84]),
            ]
        );
        assert!(get_request(sa("10.0.0.1:1"), sa("[::1]:2")).is_none());
    }

    /// An entry as ctnetlink answers it (nested flags set).
    fn entry_payload(original: (&str, &str), reply: (&str, &str)) -> Vec<u8> {
        let tuple = |(src, dst): (&str, &str)| {
            let (src, dst) = (sa(src), sa(dst));
            let v4 = |a: SocketAddr| match a.ip() {
                IpAddr::V4(v) => v.octets(),
                IpAddr::V6(_) => unreachable!(),
            };
            [
                attribute(
                    CTA_TUPLE_IP | NLA_F_NESTED,
                    &[
                        attribute(CTA_IP_V4_SRC, &v4(src)),
                        attribute(CTA_IP_V4_DST, &v4(dst)),
                    ]
                    .concat(),
                ),
                attribute(
                    CTA_TUPLE_PROTO | NLA_F_NESTED,
                    &[
                        attribute(CTA_PROTO_NUM, &[6]),
                        attribute(CTA_PROTO_SRC_PORT, &src.port().to_be_bytes()),
                        attribute(CTA_PROTO_DST_PORT, &dst.port().to_be_bytes()),
                    ]
                    .concat(),
                ),
            ]
            .concat()
        };
        let mut payload = vec![libc::AF_INET as u8, 0, 0, 0];
        payload.extend(attribute(CTA_TUPLE_ORIG | NLA_F_NESTED, &tuple(original)));
        payload.extend(attribute(CTA_TUPLE_REPLY | NLA_F_NESTED, &tuple(reply)));
        payload
    }

    /// A pod that opened a connection to a service: its packets go where
    /// the reply comes from, the backend.
    #[test]
    fn a_connection_opened_to_a_service_goes_to_its_backend() {
        let p = entry_payload(
            ("10.77.3.2:40000", "10.96.0.10:7300"),
            ("10.77.4.2:7300", "10.77.3.2:40000"),
        );
        let e = Entry::of(&p).unwrap();
        let (local, peer) = (sa("10.77.3.2:40000"), sa("10.96.0.10:7300"));
        assert_eq!(e.sent_to(local, peer), Some(IpAddr::from([10, 77, 4, 2])));
        assert_eq!(Entry::of(&p[..NFGENMSG]), None);
    }

    /// A pod that accepted a connection: the entry is found by its reply
    /// tuple, and its packets go back to where the original came from;
    /// masquerading on the way out (the reply to the node's address)
    /// changes nothing of that.
    #[test]
    fn an_accepted_connection_goes_back_to_its_origin() {
        let (local, peer) = (sa("10.77.3.2:7203"), sa("10.77.1.1:42056"));
        let plain = Entry::of(&entry_payload(
            ("10.77.1.1:42056", "10.77.3.2:7203"),
            ("10.77.3.2:7203", "10.77.1.1:42056"),
        ))
        .unwrap();
        assert_eq!(plain.sent_to(local, peer), Some(peer.ip()));
        // A NodePort with the client's address translated to the node's
        // (10.77.1.2): the pod answers the node, the node the client.
        let node_port = Entry::of(&entry_payload(
            ("10.9.9.9:5000", "10.77.1.2:30000"),
            ("10.77.3.2:7203", "10.77.1.2:61000"),
        ))
        .unwrap();
        assert_eq!(
            node_port.sent_to(local, sa("10.77.1.2:61000")),
            Some(IpAddr::from([10, 9, 9, 9]))
        );
        assert_eq!(
            plain.sent_to(sa("10.77.3.2:1"), peer),
            None,
            "not this flow"
        );
    }

    #[test]
    fn without_ctnetlink_nothing_is_translated() {
        let mut nat = NatLookup::none();
        assert!(!nat.available());
        assert_eq!(
            nat.destination(sa("10.77.3.2:40000"), sa("10.96.0.10:7300")),
            None
        );
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// Not a check: how long a conntrack lookup takes here (run with
    /// `--ignored --nocapture`; in a namespace with conntrack entries for
    /// flows from NAT_SRC, e.g. a lab broker with a pod, some are found).
    #[test]
    #[ignore]
    fn conntrack_lookup_cost() {
        let src: IpAddr = std::env::var("NAT_SRC")
            .unwrap_or_else(|_| "10.77.3.2".to_string())
            .parse()
            .unwrap();
        let mut nat = NatLookup::new();
        assert!(nat.available(), "no ctnetlink in this kernel");
        let n = 10_000u32;
        let t = std::time::Instant::now();
        let mut found = 0;
        for i in 0..n {
            let local = SocketAddr::new(src, 30_000 + (i % 30_000) as u16);
            let peer = SocketAddr::new(IpAddr::from([10, 96, (i / 256) as u8, i as u8]), 80);
            found += nat.destination(local, peer).is_some() as u32;
        }
        let per = t.elapsed() / n;
        eprintln!("{n} lookups, {found} translated: {per:?} each");
    }
}
