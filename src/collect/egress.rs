//! The interface of the observer's namespace that a flow of another
//! namespace (`--all-netns`: a pod's, a container's) leaves by.
//!
//! A socket in a pod knows only the pod's own device (its `eth0`, a veth
//! end). Its packets cross to the node through the veth's other end, where
//! the node routes them: out of an ENI for the world, into another pod's
//! veth for a pod on the same node, up the node's own stack (`lo`) for the
//! node's addresses. The node's route decides, and the node's route is
//! asked, the way `ip route get PEER from POD_IP iif VETH` asks it:
//!
//! 1. the flow's namespace gets its id in the observer's namespace
//!    (RTM_GETNSID on a file of that namespace: /run/netns/NAME or a
//!    process's /proc/PID/ns/net);
//! 2. the observer's link dump names the veth end whose peer
//!    (IFLA_LINK_NETNSID, IFLA_LINK) is the flow's device in that namespace
//!    (a flow that leaves its namespace by another device never passes
//!    here); a veth enslaved to a bridge (Docker's docker0, bridge CNIs) is
//!    routed on the bridge;
//! 3. an input route lookup (RTM_GETROUTE with RTA_IIF, the flow's local
//!    address as source and its peer as destination) gives the output
//!    device: policy routing by source (a pod's ENI on a multi-ENI node)
//!    is the kernel's to apply, as it does for the packets.
//!
//! A flow to a service's address is routed where the node's conntrack
//! sends it (nat.rs: a ClusterIP's backend, perhaps a pod on this node),
//! not as the service's address; one its own namespace's conntrack
//! redirects to itself (a sidecar proxy's REDIRECT) never leaves it.
//!
//! A flow whose peer is its own namespace (loopback, or its own address),
//! or whose local address is a loopback one, never leaves it: `lo`. A flow with no path found (its device is no
//! veth into the observer's namespace, or not known yet; an ipvlan pod; a
//! refused lookup) is unrouted: the analysis counts it for none.
//!
//! Routes are cached per (namespace, device, local address, destination),
//! translations per flow (namespace and both ends, ports included), and the caches
//! are dropped every `REFRESH_INTERVALS` intervals, so a changed route is
//! seen within that; a namespace met for the first time is looked up in
//! the interval it appears, and one with no path found again after
//! `RETRY_INTERVALS`.

use std::collections::HashMap;
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use crate::collect::nat::NatLookup;
use crate::collect::netns::inode_of;
use crate::collect::rtnetlink::{
    attribute, attributes, family_octets, u32_at, NetlinkSocket, IFINFOMSG,
};

/// rtnetlink message types and attributes (linux/rtnetlink.h,
/// linux/if_link.h, linux/net_namespace.h).
const RTM_GETLINK: u16 = 18;
const RTM_NEWLINK: u16 = 16;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETNSID: u16 = 90;
const RTM_NEWNSID: u16 = 88;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_LINK_NETNSID: u16 = 37;
const RTA_DST: u16 = 1;
const RTA_SRC: u16 = 2;
const RTA_IIF: u16 = 3;
const RTA_OIF: u16 = 4;
const NETNSA_NSID: u16 = 1;
const NETNSA_FD: u16 = 3;
/// struct rtmsg and struct rtgenmsg (padded) sizes.
const RTMSG: usize = 12;
const RTGENMSG: usize = 4;

/// Caches live this many intervals (a minute at the default interval).
pub(crate) const REFRESH_INTERVALS: u64 = 60;
/// A namespace or flow with no path found is asked again after this many
/// intervals (not every interval: each asking reads the links and /proc).
pub(crate) const RETRY_INTERVALS: u64 = 5;

/// A link of the observer's namespace whose other end is in another
/// namespace (a veth end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PeerLink {
    ifindex: u32,
    /// The peer namespace's id here (IFLA_LINK_NETNSID).
    peer_nsid: i32,
    /// The peer's ifindex in its namespace (IFLA_LINK).
    peer_ifindex: u32,
    /// The bridge it is a port of (IFLA_MASTER), 0 for none.
    master: u32,
}

/// What a flow of another namespace needs looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct ForeignFlow {
    pub netns: u32,
    /// The flow's device in its namespace (0: not known yet).
    pub ifindex: u32,
    pub local: SocketAddr,
    pub peer: SocketAddr,
}

/// The answer: the observer's ifindex the flow leaves by, `Loopback` for
/// a flow that stays in its namespace, or nothing found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Egress {
    Ifindex(u32),
    Loopback,
    Unknown,
}

/// Where a flow's packets go after the NAT of its own namespace and the
/// node's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Back into its own namespace (a sidecar's REDIRECT to its proxy).
    Home,
    /// To this address, the peer's or the one conntrack translated it to.
    To(IpAddr),
}

/// Sockets open at once for lookups in other namespaces' conntrack; past
/// it they are all closed and opened again as flows need them.
const NAMESPACE_LOOKUPS: usize = 128;

/// The resolver, one per collector.
pub(crate) struct NodeEgress {
    socket: Option<NetlinkSocket>,
    links: Vec<PeerLink>,
    /// The interval `links` and `netns_files` were last read in.
    read_at: Option<u64>,
    /// netns inode -> a file of that namespace, from /run/netns and /proc.
    netns_files: HashMap<u32, PathBuf>,
    /// netns inode -> its id here, or none found (and when it was asked).
    nsids: HashMap<u32, (Option<i32>, u64)>,
    /// (netns, device, local, destination) -> the answer and when it was
    /// found.
    routes: HashMap<(u32, u32, IpAddr, IpAddr), (Egress, u64)>,
    /// The node's conntrack: where a flow to a service's address goes.
    nat: NatLookup,
    /// Each other namespace's own conntrack (a sidecar's REDIRECT), by
    /// netns inode: at most `NAMESPACE_LOOKUPS` sockets open at once, all
    /// closed with the caches (a socket keeps its namespace alive).
    namespace_nat: HashMap<u32, NatLookup>,
    /// (netns, local, peer) -> where the flow's packets go after NAT.
    translated: HashMap<(u32, SocketAddr, SocketAddr), Sent>,
    /// netns inode -> whether a veth end here leads into it, and when.
    reach: HashMap<u32, (bool, u64)>,
    /// The interval the caches were started in.
    started_at: u64,
}

impl NodeEgress {
    /// A resolver for the calling thread's namespace; one whose socket
    /// cannot be opened finds nothing (every flow `Unknown`).
    pub(crate) fn new() -> Self {
        NodeEgress {
            socket: NetlinkSocket::route(0, 0).ok(),
            links: Vec::new(),
            read_at: None,
            netns_files: HashMap::new(),
            nsids: HashMap::new(),
            routes: HashMap::new(),
            nat: NatLookup::new(),
            namespace_nat: HashMap::new(),
            translated: HashMap::new(),
            reach: HashMap::new(),
            started_at: 0,
        }
    }

    /// Drops the caches every `REFRESH_INTERVALS`.
    fn age(&mut self, seq: u64) {
        if seq >= self.started_at + REFRESH_INTERVALS || seq < self.started_at {
            self.routes.clear();
            self.translated.clear();
            // A socket holds its namespace: a deleted pod's is let go.
            self.namespace_nat.clear();
            self.nsids.clear();
            self.reach.clear();
            self.started_at = seq;
        }
    }

    /// Whether a veth end here leads into namespace `netns`: whether its
    /// sockets' packets can pass through this namespace at all. What is
    /// counted by namespace and not by flow (the UDP and ICMP sockets
    /// made, the TCP flows held) counts only for namespaces that do.
    pub(crate) fn reaches(&mut self, netns: u32, seq: u64) -> bool {
        self.age(seq);
        match self.reach.get(&netns) {
            Some((false, at)) if seq >= at + RETRY_INTERVALS => {}
            Some((known, _)) => return *known,
            None => {}
        }
        let into = |links: &[PeerLink], nsid: Option<i32>| {
            nsid.is_some_and(|id| links.iter().any(|l| l.peer_nsid == id))
        };
        let nsid = self.nsid(netns, seq);
        let mut found = into(&self.links, nsid);
        if !found && self.read_at != Some(seq) {
            self.read(seq);
            let nsid = self.nsid(netns, seq);
            found = into(&self.links, nsid);
        }
        self.reach.insert(netns, (found, seq));
        found
    }

    /// Where `flow` leaves the observer's namespace, in interval `seq`.
    pub(crate) fn of(&mut self, flow: ForeignFlow, seq: u64) -> Egress {
        // A socket on a loopback address never sends out of its namespace
        // (a proxy's side of a connection redirected to it).
        if flow.peer.ip().is_loopback()
            || flow.local.ip().is_loopback()
            || flow.peer.ip() == flow.local.ip()
        {
            return Egress::Loopback;
        }
        self.age(seq);
        if !self.reaches(flow.netns, seq) {
            // No veth here leads into its namespace: no NAT asked about.
            return Egress::Unknown;
        }
        let destination = match self.sent(flow, seq) {
            Sent::Home => return Egress::Loopback,
            Sent::To(ip) => ip,
        };
        let key = (flow.netns, flow.ifindex, flow.local.ip(), destination);
        match self.routes.get(&key) {
            Some((Egress::Unknown, at)) if seq >= at + RETRY_INTERVALS => {}
            Some((e, _)) => return *e,
            None => {}
        }
        let found = self.look_up(flow, destination, seq);
        self.routes.insert(key, (found, seq));
        found
    }

    /// Where the flow's packets are sent (asked once a flow): back home
    /// when its own namespace's conntrack redirects them to itself (a
    /// sidecar proxy's REDIRECT), else to its peer or the backend the
    /// node's conntrack translated the peer to.
    fn sent(&mut self, flow: ForeignFlow, seq: u64) -> Sent {
        let key = (flow.netns, flow.local, flow.peer);
        if let Some(sent) = self.translated.get(&key) {
            return *sent;
        }
        let home = self.namespace_nat(flow.netns, seq).is_some_and(|nat| {
            nat.destination(flow.local, flow.peer)
                .is_some_and(|to| to.is_loopback() || to == flow.local.ip())
        });
        let sent = if home {
            Sent::Home
        } else {
            Sent::To(
                self.nat
                    .destination(flow.local, flow.peer)
                    .unwrap_or(flow.peer.ip()),
            )
        };
        self.translated.insert(key, sent);
        sent
    }

    /// The conntrack lookup of namespace `netns` (None without ctnetlink,
    /// or no file of the namespace found).
    fn namespace_nat(&mut self, netns: u32, seq: u64) -> Option<&mut NatLookup> {
        if !self.nat.available() {
            return None;
        }
        if !self.namespace_nat.contains_key(&netns) {
            if !self.netns_files.contains_key(&netns) && self.read_at != Some(seq) {
                self.read(seq);
            }
            let path = self.netns_files.get(&netns)?.clone();
            if self.namespace_nat.len() >= NAMESPACE_LOOKUPS {
                self.namespace_nat.clear();
            }
            self.namespace_nat
                .insert(netns, NatLookup::in_namespace(&path));
        }
        self.namespace_nat.get_mut(&netns)
    }

    fn look_up(&mut self, flow: ForeignFlow, destination: IpAddr, seq: u64) -> Egress {
        let Some(nsid) = self.nsid(flow.netns, seq) else {
            return Egress::Unknown;
        };
        let mut link = pick(&self.links, nsid, flow.ifindex);
        if link.is_none() && self.read_at != Some(seq) {
            // A veth made since the links were read.
            self.read(seq);
            link = pick(&self.links, nsid, flow.ifindex);
        }
        let Some(link) = link else {
            return Egress::Unknown;
        };
        let iif = if link.master != 0 {
            link.master
        } else {
            link.ifindex
        };
        match self.route(flow.local.ip(), destination, iif) {
            Some(oif) => Egress::Ifindex(oif),
            None => Egress::Unknown,
        }
    }

    /// The links and the namespace files, read again.
    fn read(&mut self, seq: u64) {
        self.read_at = Some(seq);
        // The link dump first: listing a veth whose peer is in a namespace
        // without an id here gives that namespace one.
        self.links = self.dump_links().unwrap_or_default();
        self.netns_files = netns_files();
    }

    /// The namespace's id here. One not known is asked again (reading the
    /// links and namespace files again, at most once an interval) after
    /// `RETRY_INTERVALS`.
    fn nsid(&mut self, netns: u32, seq: u64) -> Option<i32> {
        match self.nsids.get(&netns) {
            Some((Some(id), _)) => return Some(*id),
            Some((None, at)) if seq < at + RETRY_INTERVALS => return None,
            _ => {}
        }
        if self.read_at != Some(seq) {
            self.read(seq);
        }
        let id = self
            .netns_files
            .get(&netns)
            .cloned()
            .and_then(|path| self.ask_nsid(&path));
        self.nsids.insert(netns, (id, seq));
        id
    }

    fn dump_links(&mut self) -> Option<Vec<PeerLink>> {
        let socket = self.socket.as_mut()?;
        let mut links = Vec::new();
        socket
            .request(RTM_GETLINK, true, &[0u8; IFINFOMSG], |kind, payload| {
                if kind == RTM_NEWLINK {
                    links.extend(peer_link(payload));
                }
            })
            .ok()?;
        Some(links)
    }

    fn ask_nsid(&mut self, path: &PathBuf) -> Option<i32> {
        let socket = self.socket.as_mut()?;
        let file = fs::File::open(path).ok()?;
        let mut body = vec![0u8; RTGENMSG];
        body[0] = libc::AF_UNSPEC as u8;
        body.extend(attribute(
            NETNSA_FD,
            &(file.as_raw_fd() as u32).to_ne_bytes(),
        ));
        let id = socket.ask_u32(RTM_GETNSID, &body, RTM_NEWNSID, RTGENMSG, NETNSA_NSID)? as i32;
        // -1: the namespace has no id here (no link into it).
        (id >= 0).then_some(id)
    }

    /// The output device of a packet from `src` to `dst` arriving on
    /// `iif`, as the kernel routes it.
    fn route(&mut self, src: IpAddr, dst: IpAddr, iif: u32) -> Option<u32> {
        let socket = self.socket.as_mut()?;
        let body = route_request(src, dst, iif)?;
        socket.ask_u32(RTM_GETROUTE, &body, RTM_NEWROUTE, RTMSG, RTA_OIF)
    }
}

/// The RTM_GETROUTE body for a lookup of `dst` from `src` arriving on
/// `iif` (None when the families differ).
fn route_request(src: IpAddr, dst: IpAddr, iif: u32) -> Option<Vec<u8>> {
    let (family, src, dst) = family_octets(src, dst)?;
    let bits = (dst.len() * 8) as u8;
    let mut body = vec![0u8; RTMSG];
    body[0] = family;
    body[1] = bits; // rtm_dst_len
    body[2] = bits; // rtm_src_len
    body.extend(attribute(RTA_DST, &dst));
    body.extend(attribute(RTA_SRC, &src));
    body.extend(attribute(RTA_IIF, &iif.to_ne_bytes()));
    Some(body)
}

/// A link of the dump whose peer is in another namespace.
fn peer_link(payload: &[u8]) -> Option<PeerLink> {
    let ifindex = u32_at(payload, 4)?; // ifinfomsg.ifi_index
    let (mut nsid, mut peer, mut master) = (None, 0, 0);
    for (kind, data) in attributes(payload, IFINFOMSG) {
        match kind {
            IFLA_LINK_NETNSID => nsid = u32_at(data, 0).map(|v| v as i32),
            IFLA_LINK => peer = u32_at(data, 0).unwrap_or(0),
            IFLA_MASTER => master = u32_at(data, 0).unwrap_or(0),
            _ => {}
        }
    }
    Some(PeerLink {
        ifindex,
        peer_nsid: nsid.filter(|v| *v >= 0)?,
        peer_ifindex: peer,
        master,
    })
}

/// The link into namespace `nsid` whose peer is the flow's device
/// `ifindex` there. None for a device that does not lead here: a namespace
/// with interfaces of its own (a router's, a pod's second network) sends
/// some flows out of them, never through this namespace; and none while
/// the device is not known (0).
fn pick(links: &[PeerLink], nsid: i32, ifindex: u32) -> Option<PeerLink> {
    links
        .iter()
        .find(|l| ifindex != 0 && l.peer_nsid == nsid && l.peer_ifindex == ifindex)
        .copied()
}

/// A file of each network namespace on the host by inode: `ip netns`'s
/// names, then every process's (a pod's namespace has its sandbox's).
fn netns_files() -> HashMap<u32, PathBuf> {
    let mut out = HashMap::new();
    let mut add = |path: PathBuf| {
        if let Ok(ino) = inode_of(&path) {
            out.entry(ino as u32).or_insert(path);
        }
    };
    for dir in ["/run/netns", "/var/run/docker/netns"] {
        if let Ok(rd) = fs::read_dir(dir) {
            rd.flatten().for_each(|e| add(e.path()));
        }
    }
    if let Ok(rd) = fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name();
            if name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
                add(e.path().join("ns/net"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::rtnetlink::tests::{message, owned_attributes};
    use crate::collect::rtnetlink::{messages, NLMSG_HDR};

    fn link(ifindex: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut m = message(RTM_NEWLINK, IFINFOMSG, attrs);
        m[NLMSG_HDR + 4..NLMSG_HDR + 8].copy_from_slice(&ifindex.to_ne_bytes());
        m
    }

    #[test]
    fn a_veth_end_names_its_peer_and_a_plain_link_is_not_one() {
        let veth = link(
            7,
            &[
                attribute(IFLA_LINK, &2u32.to_ne_bytes()),
                attribute(IFLA_LINK_NETNSID, &3i32.to_ne_bytes()),
                attribute(IFLA_MASTER, &5u32.to_ne_bytes()),
            ],
        );
        let eth = link(2, &[attribute(IFLA_LINK, &2u32.to_ne_bytes())]);
        let mut buf = veth.clone();
        buf.extend(eth);
        let got: Vec<PeerLink> = messages(&buf).filter_map(|(_, p)| peer_link(p)).collect();
        assert_eq!(
            got,
            vec![PeerLink {
                ifindex: 7,
                peer_nsid: 3,
                peer_ifindex: 2,
                master: 5
            }]
        );
    }

    #[test]
    fn the_link_to_a_flows_device_is_picked_and_no_other() {
        let l = |ifindex, peer_nsid, peer_ifindex| PeerLink {
            ifindex,
            peer_nsid,
            peer_ifindex,
            master: 0,
        };
        let links = [l(10, 1, 2), l(11, 1, 3), l(12, 2, 2)];
        assert_eq!(pick(&links, 1, 3).map(|l| l.ifindex), Some(11));
        assert_eq!(pick(&links, 2, 2).map(|l| l.ifindex), Some(12));
        assert_eq!(pick(&links, 1, 0), None, "device not known");
        assert_eq!(pick(&links, 2, 0), None, "device not known, one link in");
        assert_eq!(
            pick(&links, 2, 9),
            None,
            "a device of its own, not the link"
        );
        assert_eq!(pick(&links, 4, 2), None, "no link into that namespace");
    }

    #[test]
    fn a_flow_to_its_own_namespace_stays_on_loopback() {
        let mut e = NodeEgress::new();
        let f = |local: &str, peer: &str| ForeignFlow {
            netns: 1,
            ifindex: 2,
            local: local.parse().unwrap(),
            peer: peer.parse().unwrap(),
        };
        assert_eq!(
            e.of(f("127.0.0.1:5000", "127.0.0.1:80"), 1),
            Egress::Loopback
        );
        assert_eq!(e.of(f("10.0.0.5:5000", "10.0.0.5:80"), 1), Egress::Loopback);
        assert_eq!(e.of(f("[::1]:5000", "[::1]:80"), 1), Egress::Loopback);
        assert_eq!(
            e.of(f("127.0.0.1:15001", "10.0.0.5:5000"), 1),
            Egress::Loopback,
            "a proxy's side of a redirected connection"
        );
    }

    #[test]
    fn a_route_request_carries_source_destination_and_iif() {
        let body = route_request(
            "10.77.3.2".parse().unwrap(),
            "10.77.1.2".parse().unwrap(),
            9,
        )
        .unwrap();
        assert_eq!(&body[..3], &[libc::AF_INET as u8, 32, 32]);
        assert_eq!(
            owned_attributes(&body, RTMSG),
            vec![
                (RTA_DST, vec![10, 77, 1, 2]),
                (RTA_SRC, vec![10, 77, 3, 2]),
                (RTA_IIF, 9u32.to_ne_bytes().to_vec()),
            ]
        );
        assert!(route_request("10.77.3.2".parse().unwrap(), "::1".parse().unwrap(), 9).is_none());
    }
}

#[cfg(test)]
mod cost {
    use super::*;

    /// Not a check: how long a route lookup takes here (run with
    /// `--ignored --nocapture`, in a namespace where ROUTE_IIF (an
    /// ifindex) forwards from ROUTE_SRC, e.g. a lab broker with a pod).
    #[test]
    #[ignore]
    fn route_lookup_cost() {
        let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
        let iif: u32 = var("ROUTE_IIF", "1").parse().unwrap();
        let src: IpAddr = var("ROUTE_SRC", "127.0.0.1").parse().unwrap();
        let mut e = NodeEgress::new();
        let n = 10_000;
        let t = std::time::Instant::now();
        let mut found = 0;
        for i in 0..n {
            let dst = IpAddr::from([10, 1, (i / 256) as u8, (i % 256) as u8]);
            found += e.route(src, dst, iif).is_some() as u32;
        }
        let per = t.elapsed() / n;
        eprintln!("{n} lookups, {found} answered: {per:?} each");
    }
}
