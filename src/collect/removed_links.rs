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

use crate::collect::rtnetlink::{attributes, messages, u64_at, NetlinkSocket, IFINFOMSG};
use crate::model::snapshot::LinkCounters;

/// rtnetlink's link multicast group (RTMGRP_LINK), message type
/// (RTM_DELLINK) and attributes (IFLA_IFNAME, IFLA_STATS64), from
/// linux/rtnetlink.h and linux/if_link.h.
const RTMGRP_LINK: u32 = 1;
const RTM_DELLINK: u16 = 17;
const IFLA_IFNAME: u16 = 3;
const IFLA_STATS64: u16 = 23;
/// The first eight u64 of struct rtnl_link_stats64: rx/tx packets, bytes,
/// errors, dropped.
const STATS64_USED: usize = 8 * 8;

/// A netlink socket on the link group, read without blocking.
pub(crate) struct RemovedLinks {
    socket: NetlinkSocket,
}

impl RemovedLinks {
    /// Opens the socket in the calling thread's network namespace.
    pub(crate) fn open() -> io::Result<Self> {
        Ok(RemovedLinks {
            socket: NetlinkSocket::route(RTMGRP_LINK, libc::SOCK_NONBLOCK)?,
        })
    }

    /// The interfaces removed since the last call, by name, with their
    /// counters at removal, and whether notices were lost (the socket's
    /// buffer overflowed: ENOBUFS; the caller counts a failed read).
    pub(crate) fn drain(&self) -> (HashMap<String, LinkCounters>, bool) {
        let mut out = HashMap::new();
        let mut lost = false;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match self.socket.recv(&mut buf, libc::MSG_DONTWAIT) {
                Ok(Some(n)) => parse(&buf[..n], &mut out),
                Ok(None) => break,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => lost = true,
                Err(_) => break,
            }
        }
        (out, lost)
    }
}

/// The RTM_DELLINK messages of one datagram into `out` (name -> counters);
/// other messages, and anything cut short, are skipped.
fn parse(buf: &[u8], out: &mut HashMap<String, LinkCounters>) {
    for (kind, payload) in messages(buf) {
        if kind == RTM_DELLINK {
            if let Some((name, counters)) = dellink(payload) {
                out.insert(name, counters);
            }
        }
    }
}

/// One RTM_DELLINK payload: the link's name and statistics.
fn dellink(msg: &[u8]) -> Option<(String, LinkCounters)> {
    let (mut name, mut stats) = (None, None);
    for (kind, data) in attributes(msg, IFINFOMSG) {
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
    }
    Some((name?, stats?))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::collect::rtnetlink::attribute as attr;
    use crate::collect::rtnetlink::tests::message as nl_message;

    fn message(kind: u16, attrs: &[Vec<u8>]) -> Vec<u8> {
        nl_message(kind, IFINFOMSG, attrs)
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
