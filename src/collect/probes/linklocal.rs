//! Loads and attaches linklocal.bpf.c and turns its per-CPU sender map into
//! the interval's UDP senders to the link-local services
//! (src/model/linklocal.rs).

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};

use super::linklocal_skel::types::{ll_health_counter, ll_key, ll_value};
use super::linklocal_skel::{LinklocalSkel, LinklocalSkelBuilder};
use super::load::{self, health_of, not_loaded, NetnsFilter, NotLoaded, ProgramSpec};
use super::percpu;
use super::records::read_record;
use crate::model::linklocal::{LinkLocalSender, LinkLocalService};
use crate::model::snapshot::{Owner, ProgramHealth};

/// (program name, the health counter of its events).
const PROGRAM_EVENTS: &[(&str, ll_health_counter)] =
    &[("on_dev_queue", ll_health_counter::LL_H_UDP4_EVENTS)];

/// Optional: without it the link-local senders are not named, and nothing
/// else is lost.
pub(crate) const LINKLOCAL_PROGRAMS: &[ProgramSpec] = &[ProgramSpec {
    name: "on_dev_queue",
    tracepoint: Some("net_dev_queue"),
    required: false,
    args: (1, 1),
    gives: "UDP to the link-local services (DNS, metadata, time), by interface and sender",
    lost: "link-local senders over UDP: a linklocal_limit names no UDP sender",
}];

/// Reads after which a sender whose counters did not move is deleted from
/// the kernel's map (its last growth already reported): a minute at 1 s.
const IDLE_READS: u64 = 60;

/// One sender's counters summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    packets: u64,
    bytes: u64,
}

/// The attached link-local probes. Dropping it detaches them.
pub(crate) struct LinkLocalProbes {
    skel: LinklocalSkel<'static>,
    /// Per sender (the key's bytes): its counters at the previous read and
    /// the read they last moved at.
    prev: HashMap<Vec<u8>, (Counts, u64)>,
    prev_unattributed: u64,
    reads: u64,
    dropped: load::Dropped,
}

/// The interval's senders, as read from the kernel: growth since the
/// previous read.
pub(crate) struct LinkLocalRead {
    /// Each sender with its (netns inode, ifindex).
    pub senders: Vec<((u32, u32), LinkLocalSender)>,
    /// Sends not attributed in the interval (the sender map full).
    pub unattributed: u64,
}

impl LinkLocalProbes {
    /// `vpc_dns`: the VPC resolver (base + 2), counted as DNS.
    pub(crate) fn attach(filter: NetnsFilter, vpc_dns: Option<Ipv4Addr>) -> Result<Self> {
        let fail = load::test_fail_programs();
        let counters: Vec<(&str, u32)> = PROGRAM_EVENTS.iter().map(|(n, c)| (*n, c.0)).collect();
        let btf = Btf::from_vmlinux().ok();
        let (mut skel, dropped) =
            load::load_with_fallback("link-local", LINKLOCAL_PROGRAMS, btf.as_ref(), |plan| {
                let storage: &'static mut MaybeUninit<OpenObject> =
                    Box::leak(Box::new(MaybeUninit::uninit()));
                let mut open = LinklocalSkelBuilder::default()
                    .open(storage)
                    .context("opening the link-local BPF object")?;
                let rodata = open
                    .maps
                    .rodata_data
                    .as_deref_mut()
                    .context("link-local BPF object has no .rodata")?;
                match filter {
                    NetnsFilter::Only(ino) => rodata.target_netns = ino,
                    NetnsFilter::All => rodata.all_netns = true,
                }
                rodata.vpc_dns_v4 = vpc_dns.map_or(0, |a| u32::from_ne_bytes(a.octets()));
                rodata.test_reject = load::test_reject_mask(&fail, &counters);
                plan.apply(open.open_object_mut());
                Ok(open.load()?)
            })?;
        skel.attach()
            .context("attaching the link-local program to the net_dev_queue tracepoint")?;
        Ok(LinkLocalProbes {
            skel,
            prev: HashMap::new(),
            prev_unattributed: 0,
            reads: 0,
            dropped,
        })
    }

    /// Whether any of the programs runs: else nothing is measured.
    pub(crate) fn attached(&self) -> bool {
        LINKLOCAL_PROGRAMS
            .iter()
            .any(|p| !self.dropped.contains_key(p.name))
    }

    /// The senders' growth since the previous read (the first read: since
    /// attach). Senders idle for `IDLE_READS` reads are deleted from the
    /// kernel's map, so that it holds the senders of the last minute.
    pub(crate) fn read(&mut self) -> Result<LinkLocalRead> {
        self.reads += 1;
        let map = &self.skel.maps.ll_senders;
        let mut senders = Vec::new();
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
            let mut comm = String::new();
            for v in per_cpu.iter().filter_map(|b| read_record::<ll_value>(b)) {
                now.packets += v.packets;
                now.bytes += v.bytes;
                if comm.is_empty() && v.comm[0] != 0 {
                    let bytes: Vec<u8> = v
                        .comm
                        .iter()
                        .take_while(|c| **c != 0)
                        .map(|c| *c as u8)
                        .collect();
                    comm = String::from_utf8_lossy(&bytes).into_owned();
                }
            }
            let (before, moved_at) = self.prev.get(&key_bytes).copied().unwrap_or_default();
            let grew = Counts {
                packets: now.packets.saturating_sub(before.packets),
                bytes: now.bytes.saturating_sub(before.bytes),
            };
            let moved_at = if grew.packets > 0 {
                self.reads
            } else {
                moved_at
            };
            if self.reads.saturating_sub(moved_at) >= IDLE_READS {
                idle.push(key_bytes.clone());
            }
            self.prev.insert(key_bytes, (now, moved_at));
            if grew.packets == 0 {
                continue;
            }
            let service = match key.service {
                1 => LinkLocalService::Dns,
                2 => LinkLocalService::Metadata,
                3 => LinkLocalService::Time,
                _ => LinkLocalService::Other,
            };
            senders.push((
                (key.netns, key.ifindex),
                LinkLocalSender {
                    owner: Owner {
                        pid: key.tgid,
                        comm,
                        thread: None,
                        cgroup_id: key.cgroup_id,
                        cgroup: None,
                        workload: None,
                    },
                    service,
                    proto: "udp".into(),
                    family: key.family,
                    packets: grew.packets,
                    bytes: grew.bytes,
                },
            ));
        }
        for key in idle {
            // Gone already is fine: nothing to delete.
            let _ = map.delete(&key);
            self.prev.remove(&key);
        }
        let full = self.counter(ll_health_counter::LL_H_MAP_FULL);
        let unattributed = full.saturating_sub(self.prev_unattributed);
        self.prev_unattributed = full;
        Ok(LinkLocalRead {
            senders,
            unattributed,
        })
    }

    fn counter(&self, c: ll_health_counter) -> u64 {
        let key = c.0.to_ne_bytes();
        let per_cpu = self
            .skel
            .maps
            .ll_health
            .lookup_percpu(&key, MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default();
        percpu::sum_u64(per_cpu.iter().map(Vec::as_slice))
    }

    pub(crate) fn program_health(&self) -> Vec<ProgramHealth> {
        PROGRAM_EVENTS
            .iter()
            .map(|(name, c)| {
                health_of(
                    self.skel.object(),
                    LINKLOCAL_PROGRAMS,
                    &self.dropped,
                    name,
                    self.counter(*c) + self.counter(ll_health_counter::LL_H_UDP6_EVENTS),
                )
            })
            .collect()
    }

    pub(crate) fn not_loaded(&self) -> Vec<(&'static ProgramSpec, &NotLoaded)> {
        not_loaded(LINKLOCAL_PROGRAMS, &self.dropped)
    }
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
