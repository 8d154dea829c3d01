//! Turns the per-CPU sender map of the link-local count (bpf/linklocal.bpf.h,
//! a part of hostq.bpf.c's transmit program, loaded with it:
//! src/collect/probes/hostq.rs) into the interval's UDP sent to the
//! link-local services, by sending socket. The collector names each socket's
//! process (src/model/linklocal.rs).

use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use libbpf_rs::{MapCore, MapFlags};

use super::growth::{Cumulative, GrowthByKey};
use super::hostq_skel::types::{ll_key, ll_value};
use super::records::read_record;
use crate::model::linklocal::LinkLocalService;

/// Reads after which a socket whose counters did not move is deleted from
/// the kernel's map: one, a whole interval without a datagram (its last
/// growth already reported). A resolver that opens a socket per query
/// (glibc's does, per lookup) leaves thousands a minute; kept a minute they
/// would fill the map (bpf/linklocal.h).
const IDLE_READS: u64 = 1;

/// One socket's counters summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    packets: u64,
    bytes: u64,
}

impl Cumulative for Counts {
    fn since(&self, before: &Self) -> Self {
        Counts {
            packets: self.packets.saturating_sub(before.packets),
            bytes: self.bytes.saturating_sub(before.bytes),
        }
    }
    /// A datagram sent: bytes alone never grow.
    fn moved(&self) -> bool {
        self.packets > 0
    }
}

/// One socket's datagrams to one service through one interface in the
/// interval, as the kernel keyed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkLocalCount {
    pub netns: u32,
    pub ifindex: u32,
    /// The socket's cgroup (the one it was made in).
    pub cgroup_id: u64,
    /// The socket's inode: its process is found from it (0: none known).
    pub sock_ino: u64,
    pub service: LinkLocalService,
    pub family: u8,
    /// Forwarded from another namespace (bpf/linklocal.bpf.h); with the
    /// sending socket's namespace when it was seen (0: not seen).
    pub forwarded: bool,
    pub origin_netns: u32,
    pub packets: u64,
    pub bytes: u64,
}

/// The reader's state: each socket's counters at the previous read.
pub(crate) struct LinkLocalReader(GrowthByKey<Counts>);

impl Default for LinkLocalReader {
    fn default() -> Self {
        LinkLocalReader(GrowthByKey::new(IDLE_READS))
    }
}

/// The interval's datagrams, as read from the kernel: growth since the
/// previous read.
pub(crate) struct LinkLocalRead {
    pub counts: Vec<LinkLocalCount>,
    /// Sends not attributed in the interval (the sender map full).
    pub unattributed: u64,
}

impl LinkLocalReader {
    /// The sockets' growth since the previous read (the first read: since
    /// attach), from `map` (`ll_senders`); `map_full`: the kernel's
    /// LL_H_MAP_FULL, cumulative. Sockets idle for `IDLE_READS` reads are
    /// deleted from the map.
    pub(crate) fn read(&mut self, map: &impl MapCore, map_full: u64) -> Result<LinkLocalRead> {
        self.0.start_read();
        let mut counts = Vec::new();
        let mut idle = Vec::new();
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for key_bytes in keys {
            let Some(key) = read_record::<ll_key>(&key_bytes) else {
                continue;
            };
            let Some(per_cpu) = map
                .lookup_percpu(&key_bytes, MapFlags::ANY)
                .context("reading a link-local sender")?
            else {
                continue; // deleted since the keys were read
            };
            let mut now = Counts::default();
            for v in per_cpu.iter().filter_map(|b| read_record::<ll_value>(b)) {
                now.packets += v.packets;
                now.bytes += v.bytes;
            }
            let (grew, is_idle) = self.0.note(key_bytes.clone(), now);
            if is_idle {
                idle.push((key_bytes, key, now));
            }
            if grew.moved() {
                counts.push(count_of(&key, grew));
            }
        }
        for (key_bytes, key, seen) in idle {
            self.0.forget(&key_bytes);
            // Deleted with what it holds: a datagram counted since it was
            // read above is reported now, not lost with the entry (one sent
            // after the delete makes a new entry, from 0).
            let grew = take_percpu(map, &key_bytes)?.since(&seen);
            if grew.moved() {
                counts.push(count_of(&key, grew));
            }
        }
        let unattributed = self.0.unattributed(map_full);
        Ok(LinkLocalRead {
            counts,
            unattributed,
        })
    }
}

fn count_of(key: &ll_key, grew: Counts) -> LinkLocalCount {
    LinkLocalCount {
        netns: key.netns,
        ifindex: key.ifindex,
        cgroup_id: key.cgroup_id,
        sock_ino: key.sock_ino,
        service: match key.service {
            1 => LinkLocalService::Dns,
            2 => LinkLocalService::Metadata,
            3 => LinkLocalService::Time,
            _ => LinkLocalService::Other,
        },
        family: key.family,
        forwarded: key.forwarded != 0,
        origin_netns: key.origin_netns,
        packets: grew.packets,
        bytes: grew.bytes,
    }
}

/// Deletes `key` from the per-CPU hash `map`, returning its counters summed
/// over CPUs as the delete found them (BPF_MAP_LOOKUP_AND_DELETE_ELEM on a
/// per-CPU hash: 5.14). libbpf-rs's `lookup_and_delete` sizes its buffer
/// for one CPU's value, so the call is made here. Where the kernel refuses
/// it (before 5.14), a plain delete, and what was counted between the read
/// and the delete is not seen: zero returned.
fn take_percpu(map: &impl MapCore, key: &[u8]) -> Result<Counts> {
    use std::os::fd::AsRawFd;
    let cpus = usize::try_from(unsafe { libbpf_sys::libbpf_num_possible_cpus() }).unwrap_or(0);
    let stride = (map.value_size() as usize).div_ceil(8) * 8;
    let mut buf = vec![0u8; cpus.max(1) * stride];
    // SAFETY: `key` is the map's key size (it came from the map's own
    // keys); `buf` holds a value for every possible CPU, 8-byte aligned
    // each, as the kernel writes a per-CPU value.
    let rc = unsafe {
        libbpf_sys::bpf_map_lookup_and_delete_elem(
            map.as_fd().as_raw_fd(),
            key.as_ptr().cast(),
            buf.as_mut_ptr().cast(),
        )
    };
    if rc != 0 || cpus == 0 {
        // Gone already is fine: nothing to delete.
        let _ = map.delete(key);
        return Ok(Counts::default());
    }
    let mut c = Counts::default();
    for v in buf.chunks(stride).filter_map(read_record::<ll_value>) {
        c.packets += v.packets;
        c.bytes += v.bytes;
    }
    Ok(c)
}

/// The VPC resolver among `resolv_conf`'s name servers: an IPv4 address
/// ending in .2 that is neither loopback nor link-local (the VPC's base +
/// 2, as EC2's DHCP options give it). None when there is none (a host
/// resolving through systemd-resolved at 127.0.0.53: its queries are then
/// systemd-resolved's, sent to whatever it was given).
pub(crate) fn vpc_resolver(resolv_conf: &str) -> Option<Ipv4Addr> {
    resolv_conf.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next()? == "nameserver")
            .then(|| w.next()?.parse::<Ipv4Addr>().ok())
            .flatten()
            .filter(|a| a.octets()[3] == 2 && !a.is_loopback() && !a.is_link_local())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vpc_resolver() {
        assert_eq!(vpc_resolver("search x\nnameserver 127.0.0.53\n"), None);
        assert_eq!(
            vpc_resolver("nameserver 169.254.169.253\nnameserver 172.31.0.2\n"),
            Some("172.31.0.2".parse().unwrap())
        );
    }
}
