//! The counters of interfaces removed from the namespace, as they were at
//! removal, from the kernel's RTM_DELLINK notices.
//!
//! Interface counters are read from /sys once per interval; an interface
//! deleted (or moved to another namespace) between two reads has no /sys
//! entry left to read, so what it carried since the last read would be
//! lost. The kernel's notice of the removal carries the link's statistics
//! (IFLA_STATS64) taken as it goes, so the interval's last deltas can be
//! accounted to it. The socket belongs to the network namespace of the
//! thread that opens it: the observer's.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::model::snapshot::LinkCounters;

/// rtnetlink's link multicast group (RTMGRP_LINK), message type
/// (RTM_DELLINK) and attributes (IFLA_IFNAME, IFLA_STATS64), from
/// linux/rtnetlink.h and linux/if_link.h.
const RTMGRP_LINK: u32 = 1;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;
const IFLA_STATS64: u16 = 23;
/// struct nlmsghdr, struct ifinfomsg and struct rtattr sizes.
const NLMSG_HDR: usize = 16;
const IFINFOMSG: usize = 16;
const RTA_HDR: usize = 4;
/// The first eight u64 of struct rtnl_link_stats64: rx/tx packets, bytes,
/// errors, dropped.
const STATS64_USED: usize = 8 * 8;

/// A netlink socket on the link group, read without blocking.
pub(crate) struct RemovedLinks {
    fd: OwnedFd,
}

impl RemovedLinks {
    /// Opens the socket in the calling thread's network namespace.
    pub(crate) fn open() -> io::Result<Self> {
        // SAFETY: plain socket(2); the fd is owned below.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
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
        sa.nl_groups = RTMGRP_LINK;
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
        Ok(RemovedLinks { fd })
    }

    /// The interfaces removed since the last call, by name, with their
    /// counters at removal, and whether notices were lost (the socket's
    /// buffer overflowed: ENOBUFS; the caller counts a failed read).
    pub(crate) fn drain(&self) -> (HashMap<String, LinkCounters>, bool) {
        let mut out = HashMap::new();
        let mut lost = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: recv(2) into a buffer of the length given.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::ENOBUFS) => {
                        lost = true;
                        continue;
                    }
                    Some(libc::EINTR) => continue,
                    _ => break, // EAGAIN: nothing more
                }
            }
            if n == 0 {
                break;
            }
            parse(&buf[..n as usize], &mut out);
        }
        (out, lost)
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Netlink lengths are padded to 4 bytes.
fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The RTM_DELLINK messages of one datagram into `out` (name -> counters);
/// other messages, and anything cut short, are skipped.
fn parse(buf: &[u8], out: &mut HashMap<String, LinkCounters>) {
    let mut at = 0;
    while let (Some(len), Some(kind)) = (u32_at(buf, at), u16_at(buf, at + 4)) {
        let len = len as usize;
        if len < NLMSG_HDR || at + len > buf.len() {
            return;
        }
        if kind == RTM_DELLINK {
            if let Some((name, counters)) = dellink(&buf[at + NLMSG_HDR..at + len]) {
                out.insert(name, counters);
            }
        }
        at += align4(len);
    }
}

/// One RTM_DELLINK payload: the link's name and statistics.
fn dellink(msg: &[u8]) -> Option<(String, LinkCounters)> {
    let mut at = IFINFOMSG;
    let (mut name, mut stats) = (None, None);
    while let (Some(len), Some(kind)) = (u16_at(msg, at), u16_at(msg, at + 2)) {
        let len = len as usize;
        if len < RTA_HDR || at + len > msg.len() {
            break;
        }
        let data = &msg[at + RTA_HDR..at + len];
        match kind {
            IFLA_IFNAME => {
                let end = data.iter().position(|&c| c == 0).unwrap_or(data.len());
                name = Some(String::from_utf8_lossy(&data[..end]).into_owned());
            }
            IFLA_STATS64 if data.len() >= STATS64_USED => {
                let v = |i: usize| u64_at(data, i * 8).unwrap_or(0);
                stats = Some(LinkCounters {
                    rx_packets: v(0),
                    tx_packets: v(1),
                    rx_bytes: v(2),
                    tx_bytes: v(3),
                    rx_errors: v(4),
                    tx_errors: v(5),
                    rx_dropped: v(6),
                    tx_dropped: v(7),
                });
            }
            _ => {}
        }
        at += align4(len);
    }
    Some((name?, stats?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(((RTA_HDR + data.len()) as u16).to_ne_bytes());
        a.extend(kind.to_ne_bytes());
        a.extend(data);
        a.resize(align4(a.len()), 0);
        a
    }

    fn message(kind: u16, attrs: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = std::iter::repeat_n(0u8, IFINFOMSG)
            .chain(attrs.iter().flatten().copied())
            .collect();
        let mut m = Vec::new();
        m.extend(((NLMSG_HDR + body.len()) as u32).to_ne_bytes());
        m.extend(kind.to_ne_bytes());
        m.extend([0u8; 10]);
        m.extend(body);
        m
    }

    /// A datagram as the kernel lays it out: a NEWLINK (ignored) then a
    /// DELLINK with its name (padded) and a full rtnl_link_stats64.
    #[test]
    fn dellink_gives_the_name_and_counters_at_removal() {
        let stats: Vec<u8> = (1..=24u64).flat_map(|v| (v * 100).to_ne_bytes()).collect();
        let mut buf = message(16, &[attr(IFLA_IFNAME, b"other\0")]);
        buf.extend(message(
            RTM_DELLINK,
            &[attr(IFLA_IFNAME, b"va0\0"), attr(IFLA_STATS64, &stats)],
        ));
        let mut out = HashMap::new();
        parse(&buf, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        let c = out["va0"];
        assert_eq!((c.rx_packets, c.tx_packets), (100, 200));
        assert_eq!((c.rx_bytes, c.tx_bytes), (300, 400));
        assert_eq!(
            (c.rx_errors, c.tx_errors, c.rx_dropped, c.tx_dropped),
            (500, 600, 700, 800)
        );
    }

    /// Cut short anywhere, nothing is made up.
    #[test]
    fn truncated_messages_are_skipped() {
        let stats: Vec<u8> = (1..=24u64).flat_map(|v| v.to_ne_bytes()).collect();
        let buf = message(
            RTM_DELLINK,
            &[attr(IFLA_IFNAME, b"va0\0"), attr(IFLA_STATS64, &stats)],
        );
        for cut in 0..buf.len() {
            let mut out = HashMap::new();
            parse(&buf[..cut], &mut out);
            assert!(out.is_empty(), "cut at {cut}: {out:?}");
        }
    }
}
