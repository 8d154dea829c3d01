//! Each interface's root qdisc as `tc -s qdisc` shows it: its queue length,
//! backlog and drops, from one RTM_GETQDISC dump over rtnetlink per
//! interval, at no per-packet cost. What `--per-packet auto` watches so
//! that a host queue that stands without dropping runs the host-queue
//! programs (src/collect/per_packet.rs); a read of kernel state only.
//!
//! The root alone: a classful qdisc's children are counted in it (mq sums
//! its queues' qdiscs, htb its leaves), so summing every qdisc would count
//! packets twice. The ingress qdisc is not a transmit queue and is left out.

use std::collections::HashMap;
use std::io;

use crate::collect::rtnetlink::{attributes, u32_at, NetlinkSocket};

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
/// struct tcmsg: family, two pad bytes and a u16, ifindex, handle, parent,
/// info.
const TCMSG: usize = 20;
/// `tcm_parent` of a root qdisc (TC_H_ROOT).
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// Attributes of a qdisc message, and of its TCA_STATS2 nest.
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;

/// A root qdisc's queue as the kernel counts it (struct gnet_stats_queue;
/// per-CPU qdiscs such as pfifo_fast summed over CPUs by the kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootQueue {
    /// Packets and bytes queued at the dump.
    pub qlen: u32,
    pub backlog_bytes: u32,
    /// Drops since the qdisc was made, cumulative.
    pub drops: u32,
}

/// The root qdiscs of one dump: by interface index.
fn parse(kind: u16, payload: &[u8], out: &mut HashMap<u32, RootQueue>) {
    if kind != RTM_NEWQDISC {
        return;
    }
    let (Some(ifindex), Some(parent)) = (u32_at(payload, 4), u32_at(payload, 12)) else {
        return;
    };
    if parent != TC_H_ROOT {
        return;
    }
    let Some(payload_attrs) = payload.get(TCMSG..) else {
        return;
    };
    let queue = attributes(payload_attrs, 0)
        .find(|(a, _)| *a == TCA_STATS2)
        .and_then(|(_, nest)| attributes(nest, 0).find(|(a, _)| *a == TCA_STATS_QUEUE))
        .and_then(|(_, q)| {
            Some(RootQueue {
                qlen: u32_at(q, 0)?,
                backlog_bytes: u32_at(q, 4)?,
                drops: u32_at(q, 8)?,
            })
        });
    if let Some(q) = queue {
        out.insert(ifindex, q);
    }
}

/// Reads the root qdiscs of the observer's namespace each interval.
pub struct QdiscRoots {
    socket: Option<NetlinkSocket>,
}

impl QdiscRoots {
    /// None socket: rtnetlink could not be opened; every read then fails.
    pub fn new() -> Self {
        QdiscRoots {
            socket: NetlinkSocket::route(0, 0).ok(),
        }
    }

    /// Every root qdisc of the namespace, by interface index.
    pub fn read(&mut self) -> io::Result<HashMap<u32, RootQueue>> {
        let socket = self
            .socket
            .as_mut()
            .ok_or_else(|| io::Error::other("no rtnetlink socket"))?;
        let mut out = HashMap::new();
        // AF_UNSPEC, every interface.
        socket.request(RTM_GETQDISC, true, &[0u8; TCMSG], |kind, payload| {
            parse(kind, payload, &mut out)
        })?;
        Ok(out)
    }
}

impl Default for QdiscRoots {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::rtnetlink::attribute;

    fn tcmsg(ifindex: u32, parent: u32) -> Vec<u8> {
        let mut m = vec![0u8; 4];
        m.extend(ifindex.to_ne_bytes());
        m.extend(0x8001_0000u32.to_ne_bytes()); // handle
        m.extend(parent.to_ne_bytes());
        m.extend(0u32.to_ne_bytes());
        m
    }

    fn qdisc(ifindex: u32, parent: u32, q: [u32; 5]) -> Vec<u8> {
        let queue: Vec<u8> = q.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let basic = attribute(1, &[0u8; 16]);
        let nest: Vec<u8> = basic
            .into_iter()
            .chain(attribute(TCA_STATS_QUEUE, &queue))
            .collect();
        let mut m = tcmsg(ifindex, parent);
        m.extend(attribute(1, b"tbf\0"));
        m.extend(attribute(TCA_STATS2, &nest));
        m
    }

    #[test]
    fn roots_are_read_and_children_and_ingress_left_out() {
        let mut out = HashMap::new();
        // qlen, backlog, drops, requeues, overlimits.
        parse(
            RTM_NEWQDISC,
            &qdisc(3, TC_H_ROOT, [12, 18_000, 4, 0, 9]),
            &mut out,
        );
        parse(
            RTM_NEWQDISC,
            &qdisc(3, 0x8001_0001, [99, 1, 1, 0, 0]),
            &mut out,
        );
        parse(
            RTM_NEWQDISC,
            &qdisc(5, 0xFFFF_FFF1, [1, 1, 1, 0, 0]),
            &mut out,
        );
        parse(24, &qdisc(6, TC_H_ROOT, [1, 1, 1, 0, 0]), &mut out);
        assert_eq!(
            out,
            HashMap::from([(
                3,
                RootQueue {
                    qlen: 12,
                    backlog_bytes: 18_000,
                    drops: 4
                }
            )])
        );
        // Cut anywhere: nothing made up.
        let m = qdisc(7, TC_H_ROOT, [1, 2, 3, 0, 0]);
        for cut in 0..m.len() - 1 {
            let mut out = HashMap::new();
            parse(RTM_NEWQDISC, &m[..cut], &mut out);
            assert!(out.is_empty(), "cut at {cut}: {out:?}");
        }
    }

    /// A real dump of this machine's namespace: lo's root qdisc (noqueue)
    /// is there, with nothing queued.
    #[test]
    fn a_dump_of_this_namespace_has_los_root() {
        let roots = QdiscRoots::new().read().unwrap();
        let lo = roots.get(&1).expect("lo (ifindex 1) has a root qdisc");
        assert_eq!(lo.qlen, 0, "{lo:?}");
    }
}
