//! Turns the owner map of the UDP and ICMP socket count (bpf/udpopen.bpf.h,
//! a part of flows.bpf.c, loaded with it: src/collect/probes/flows.rs) into
//! the interval's sockets made, by owner and protocol. The collector names
//! each owner's cgroup and workload (src/model/udpopen.rs).

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use super::flows_skel::types::{uo_key, uo_proto, uo_value};
use super::growth::{CounterGrowth, GrowthByKey};
use super::records::read_record;

/// Reads after which an owner whose count did not move is deleted from the
/// kernel's map: one, a whole interval without a socket made (its last
/// growth already reported). Owners come and go with processes (a shell
/// loop of `dig` is a new process per query); kept longer they would fill
/// the map (bpf/udpopen.h).
const IDLE_READS: u64 = 1;

/// One owner's sockets made in the interval, as the kernel keyed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UdpOpenCount {
    pub netns: u32,
    pub tgid: u32,
    pub cgroup_id: u64,
    pub family: u8,
    /// ICMP sockets (ping, raw ICMP), not UDP.
    pub icmp: bool,
    /// Its group leader's name when the kernel first saw it.
    pub comm: String,
    pub sockets: u64,
}

/// The reader's state: each owner's count at the previous read (and the
/// UDP map-full counter's), and the ICMP map-full counter's.
pub(crate) struct UdpOpenReader {
    growth: GrowthByKey<u64>,
    icmp_map_full: CounterGrowth,
}

impl Default for UdpOpenReader {
    fn default() -> Self {
        UdpOpenReader {
            growth: GrowthByKey::new(IDLE_READS),
            icmp_map_full: CounterGrowth::default(),
        }
    }
}

/// The interval's sockets, as read from the kernel: growth since the
/// previous read.
pub(crate) struct UdpOpenRead {
    pub counts: Vec<UdpOpenCount>,
    /// UDP sockets made in the interval by owners the map had no room for.
    pub unattributed: u64,
    /// The same for ICMP sockets.
    pub icmp_unattributed: u64,
}

impl UdpOpenReader {
    /// The owners' growth since the previous read (the first read: since
    /// attach), from `map` (`uo_owners`); `map_full`: the kernel's
    /// UO_H_MAP_FULL and UO_H_ICMP_MAP_FULL, cumulative. Owners idle for
    /// `IDLE_READS` reads are deleted from the map.
    pub(crate) fn read(&mut self, map: &impl MapCore, map_full: [u64; 2]) -> Result<UdpOpenRead> {
        self.growth.start_read();
        let mut counts = Vec::new();
        let mut idle = Vec::new();
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for key_bytes in keys {
            let Some(key) = read_record::<uo_key>(&key_bytes) else {
                continue;
            };
            let Some(value) = map
                .lookup(&key_bytes, MapFlags::ANY)
                .context("reading a UDP socket owner")?
            else {
                continue; // deleted since the keys were read
            };
            let Some(v) = read_record::<uo_value>(&value) else {
                continue;
            };
            let (grew, is_idle) = self.growth.note(key_bytes.clone(), v.ports);
            if is_idle {
                idle.push((key_bytes, key, v));
            }
            if grew > 0 {
                counts.push(count_of(&key, &v, grew));
            }
        }
        for (key_bytes, key, seen) in idle {
            self.growth.forget(&key_bytes);
            // Deleted with what it holds: a socket counted since the read
            // above is reported now, not lost with the entry (one made
            // after the delete makes a new entry, from 0).
            let last = map
                .lookup_and_delete(&key_bytes)
                .context("deleting an idle UDP socket owner")?
                .and_then(|b| read_record::<uo_value>(&b));
            if let Some(last) = last {
                let grew = last.ports.saturating_sub(seen.ports);
                if grew > 0 {
                    counts.push(count_of(&key, &last, grew));
                }
            }
        }
        let unattributed = self.growth.unattributed(map_full[0]);
        let icmp_unattributed = self.icmp_map_full.since_last(map_full[1]);
        Ok(UdpOpenRead {
            counts,
            unattributed,
            icmp_unattributed,
        })
    }
}

fn count_of(key: &uo_key, v: &uo_value, ports: u64) -> UdpOpenCount {
    let comm: Vec<u8> = v
        .comm
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    UdpOpenCount {
        netns: key.netns,
        tgid: key.tgid,
        cgroup_id: key.cgroup_id,
        family: key.family,
        icmp: key.proto == uo_proto::UO_PROTO_ICMP.0 as u8,
        comm: String::from_utf8_lossy(&comm).into_owned(),
        sockets: ports,
    }
}
