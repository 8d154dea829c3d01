//! Netlink, read by hand: the few messages the collector reads from
//! rtnetlink, the kernel's routing socket (link notices, link dumps,
//! namespace ids, route lookups), laid out from linux/netlink.h and
//! linux/rtnetlink.h, and the socket ctnetlink's lookups use too
//! (nat.rs). Every request is a read of kernel state: nothing here changes
//! a link, route, namespace or connection.
//!
//! A netlink socket belongs to the network namespace of the thread that
//! opens it: the observer's.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// struct nlmsghdr's size, and the header of an attribute (struct rtattr,
/// struct nlattr: the same layout).
pub(crate) const NLMSG_HDR: usize = 16;
pub(crate) const RTA_HDR: usize = 4;
/// struct ifinfomsg's size: the fixed header of link messages.
pub(crate) const IFINFOMSG: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Netlink lengths are padded to 4 bytes.
pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The messages of one datagram: (type, payload after the nlmsghdr). A
/// message cut short ends the walk; nothing is made up from it.
pub(crate) fn messages(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u32_at(buf, at)? as usize;
        let kind = u16_at(buf, at + 4)?;
        if len < NLMSG_HDR || at + len > buf.len() {
            return None;
        }
        let body = &buf[at + NLMSG_HDR..at + len];
        at += align4(len);
        Some((kind, body))
    })
}

/// The attributes of a message payload after its fixed header of `fixed`
/// bytes: (type with the nested/byte-order flags cleared, data).
pub(crate) fn attributes(payload: &[u8], fixed: usize) -> impl Iterator<Item = (u16, &[u8])> {
    let mut at = fixed;
    std::iter::from_fn(move || {
        let len = u16_at(payload, at)? as usize;
        let kind = u16_at(payload, at + 2)? & 0x3fff;
        if len < RTA_HDR || at + len > payload.len() {
            return None;
        }
        let data = &payload[at + RTA_HDR..at + len];
        at += align4(len);
        Some((kind, data))
    })
}

/// The address family of `a` and `b` and their bytes in network order;
/// None when their families differ (a request names one family).
pub(crate) fn family_octets(a: IpAddr, b: IpAddr) -> Option<(u8, Vec<u8>, Vec<u8>)> {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            Some((libc::AF_INET as u8, a.octets().into(), b.octets().into()))
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            Some((libc::AF_INET6 as u8, a.octets().into(), b.octets().into()))
        }
        _ => None,
    }
}

/// One attribute, padded.
pub(crate) fn attribute(kind: u16, data: &[u8]) -> Vec<u8> {
    let mut a = Vec::with_capacity(align4(RTA_HDR + data.len()));
    a.extend(((RTA_HDR + data.len()) as u16).to_ne_bytes());
    a.extend(kind.to_ne_bytes());
    a.extend(data);
    a.resize(align4(a.len()), 0);
    a
}

/// A netlink socket of the calling thread's namespace.
pub(crate) struct NetlinkSocket {
    fd: OwnedFd,
    seq: u32,
}

impl NetlinkSocket {
    /// Opens a NETLINK_ROUTE socket, joined to the multicast `groups` (0:
    /// none), with `flags` for socket(2) (SOCK_NONBLOCK for a notice
    /// reader).
    pub(crate) fn route(groups: u32, flags: libc::c_int) -> io::Result<Self> {
        Self::open(libc::NETLINK_ROUTE, groups, flags)
    }

    /// Opens a socket of netlink `protocol` (NETLINK_ROUTE,
    /// NETLINK_NETFILTER), as [`Self::route`].
    pub(crate) fn open(protocol: libc::c_int, groups: u32, flags: libc::c_int) -> io::Result<Self> {
        // SAFETY: plain socket(2); the fd is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | flags,
                protocol,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new fd nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid; fields set below.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        sa.nl_groups = groups;
        // SAFETY: `sa` is a sockaddr_nl of the size given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel answers a request before send(2) returns; the timeout
        // only bounds a wait that would otherwise be a bug.
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        // SAFETY: setsockopt(2) with a timeval of the size given.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &timeout as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        Ok(NetlinkSocket { fd, seq: 0 })
    }

    /// One datagram into `buf`: its length, or None when there is none to
    /// read (EAGAIN, the timeout). `Err` only for ENOBUFS (notices lost
    /// because the socket's buffer overflowed) and other errors.
    pub(crate) fn recv(&self, buf: &mut [u8], flags: libc::c_int) -> io::Result<Option<usize>> {
        loop {
            // SAFETY: recv(2) into a buffer of the length given.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    flags,
                )
            };
            if n >= 0 {
                return Ok((n > 0).then_some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(None),
                _ => return Err(e),
            }
        }
    }

    /// Sends a request of type `kind` (fixed header and attributes in
    /// `body`), dumping when `dump`, and hands every answering message of
    /// its sequence number to `each` until the answer ends. A kernel error
    /// (NLMSG_ERROR with a code) is returned as that errno.
    pub(crate) fn request(
        &mut self,
        kind: u16,
        dump: bool,
        body: &[u8],
        mut each: impl FnMut(u16, &[u8]),
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut msg = Vec::with_capacity(NLMSG_HDR + body.len());
        msg.extend(((NLMSG_HDR + body.len()) as u32).to_ne_bytes());
        msg.extend(kind.to_ne_bytes());
        let flags = NLM_F_REQUEST | if dump { NLM_F_DUMP } else { 0 };
        msg.extend(flags.to_ne_bytes());
        msg.extend(seq.to_ne_bytes());
        msg.extend(0u32.to_ne_bytes());
        msg.extend(body);
        // SAFETY: send(2) of a buffer of the length given.
        let n = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let Some(n) = self.recv(&mut buf, 0)? else {
                return Err(io::Error::from(io::ErrorKind::TimedOut));
            };
            let mut at = 0;
            let datagram = &buf[..n];
            while let (Some(len), Some(kind), Some(s)) = (
                u32_at(datagram, at),
                u16_at(datagram, at + 4),
                u32_at(datagram, at + 8),
            ) {
                let len = len as usize;
                if len < NLMSG_HDR || at + len > datagram.len() {
                    break;
                }
                let payload = &datagram[at + NLMSG_HDR..at + len];
                at += align4(len);
                if s != seq {
                    continue; // an answer to an earlier request that timed out
                }
                match kind {
                    NLMSG_DONE => return Ok(()),
                    NLMSG_ERROR => {
                        let code = u32_at(payload, 0).map_or(0, |c| c as i32);
                        return if code == 0 {
                            Ok(()) // an acknowledgement
                        } else {
                            Err(io::Error::from_raw_os_error(-code))
                        };
                    }
                    _ => {
                        each(kind, payload);
                        if !dump {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    /// One request of type `kind` (not a dump) and, from its answer of
    /// type `answer` (a fixed header of `fixed` bytes), the u32 attribute
    /// `attr`: None when the kernel refused or the answer has none.
    pub(crate) fn ask_u32(
        &mut self,
        kind: u16,
        body: &[u8],
        answer: u16,
        fixed: usize,
        attr: u16,
    ) -> Option<u32> {
        let mut value = None;
        self.request(kind, false, body, |k, payload| {
            if k == answer {
                value = attributes(payload, fixed)
                    .find(|(a, _)| *a == attr)
                    .and_then(|(_, d)| u32_at(d, 0));
            }
        })
        .ok()?;
        value
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A message as the kernel lays it out: nlmsghdr, `fixed` zero bytes,
    /// then the attributes.
    pub(crate) fn message(kind: u16, fixed: usize, attrs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = std::iter::repeat_n(0u8, fixed)
            .chain(attrs.iter().flatten().copied())
            .collect();
        let mut m = Vec::new();
        m.extend(((NLMSG_HDR + body.len()) as u32).to_ne_bytes());
        m.extend(kind.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(body);
        m
    }

    /// The attributes after `fixed` bytes, copied out: (type, data).
    pub(crate) fn owned_attributes(payload: &[u8], fixed: usize) -> Vec<(u16, Vec<u8>)> {
        attributes(payload, fixed)
            .map(|(k, d)| (k, d.to_vec()))
            .collect()
    }

    #[test]
    fn messages_and_attributes_walk_a_datagram_and_stop_where_it_is_cut() {
        let mut buf = message(
            16,
            16,
            &[attribute(3, b"va0\0"), attribute(5, &7u32.to_ne_bytes())],
        );
        buf.extend(message(24, 12, &[attribute(4, &9u32.to_ne_bytes())]));
        type Attrs = Vec<(u16, Vec<u8>)>;
        let got: Vec<(u16, Attrs)> = messages(&buf)
            .map(|(k, p)| {
                let fixed = if k == 16 { 16 } else { 12 };
                (
                    k,
                    attributes(p, fixed).map(|(a, d)| (a, d.to_vec())).collect(),
                )
            })
            .collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1[0], (3, b"va0\0".to_vec()));
        assert_eq!(got[0].1[1], (5, 7u32.to_ne_bytes().to_vec()));
        assert_eq!(got[1].1, vec![(4, 9u32.to_ne_bytes().to_vec())]);
        let first = message(16, 16, &[attribute(3, b"va0\0")]).len();
        for cut in 0..first {
            assert_eq!(messages(&buf[..cut]).count(), 0, "cut at {cut}");
        }
    }

    /// A real request to this machine's kernel: the link dump names lo.
    #[test]
    fn a_link_dump_of_this_namespace_names_lo() {
        let mut s = NetlinkSocket::route(0, 0).unwrap();
        let mut names = Vec::new();
        s.request(18, true, &[0u8; 16], |kind, payload| {
            assert_eq!(kind, 16, "RTM_NEWLINK");
            for (a, d) in attributes(payload, 16) {
                if a == 3 {
                    names.push(
                        String::from_utf8_lossy(d)
                            .trim_end_matches('\0')
                            .to_string(),
                    );
                }
            }
        })
        .unwrap();
        assert!(names.iter().any(|n| n == "lo"), "{names:?}");
    }
}
