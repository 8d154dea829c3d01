//! The interval loop's one step: kernel probes + interface counters ->
//! one [`Snapshot`]. All I/O of observation happens here or below.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use crate::collect::allowance::{AllowanceReader, CounterSource};
use crate::collect::cgroups::WorkloadResolver;
use crate::collect::egress::{Egress, ForeignFlow, NodeEgress};
use crate::collect::flowtable::{ca_state_name, ip_of, tcp_state_name, FlowTable};
use crate::collect::fragments;
use crate::collect::ifindex::IfIndexNames;
use crate::collect::ifstats;
use crate::collect::netns::NetnsNames;
use crate::collect::owners::OwnerIndex;
use crate::collect::per_packet::{PerPacketMode, PerPacketPolicy};
use crate::collect::probes::flows::{FlowProbes, NetnsFilter, RawEvent};
use crate::collect::probes::flows_skel::types::{ts_event_kind, ts_flow_record, ts_health_counter};
use crate::collect::probes::hostq::{self, HostQueueProbes};
use crate::collect::probes::linklocal as ll;
use crate::collect::probes::load::{NotLoaded, ProgramSpec};
use crate::collect::qdisc_roots::QdiscRoots;
use crate::collect::removed_links::RemovedLinks;
use crate::model::fold::{fold, Folded, DEFAULT_LISTED_FLOWS, MAX_LISTED_EVENTS};
use crate::model::snapshot::{
    AllowanceStatus, FlowEvent, FlowEventKind, FlowPath, Health, HostQueueSample, InterfaceSample,
    LinkCounters, Snapshot,
};
use crate::model::udpopen::SocketOpenSample;
use crate::model::workload::WorkloadFilter;
use crate::shared::clock::monotonic_ns;

/// Every this many intervals the flow dump reads every tracked socket, not
/// only those that moved: a flow whose close event was lost (and any figure
/// a missed mark left stale) is then set right within a minute at 1 s.
/// Between, idle flows cost the kernel a compare each and are carried.
const FULL_DUMP_EVERY: u64 = 60;

/// What to observe.
#[derive(Debug, Clone)]
pub struct CollectorConfig {
    pub all_netns: bool,
    /// Interfaces to report; empty means every interface but `lo`.
    pub interfaces: Vec<String>,
    /// Send flow events (open, retransmit, congestion state) from the kernel.
    pub events: bool,
    /// Interfaces whose allowance counters come from a file in `ethtool -S`
    /// format instead of the SIOCETHTOOL ioctl.
    pub counter_files: Vec<(String, PathBuf)>,
    /// Attach the host-queue probes (qdisc and kfree_skb).
    pub host_queue: bool,
    /// When the host queue's per-packet programs run (`--per-packet`):
    /// always, or while they can explain something (src/collect/per_packet.rs).
    pub per_packet: PerPacketMode,
    /// Count the UDP sent to the link-local services, by sending socket
    /// (`--no-linklocal` off): a part of the host-queue object's transmit
    /// program, loaded for it even without the host queue.
    pub linklocal: bool,
    /// Count the UDP and ICMP sockets made, by owner (`--no-udp-openers`
    /// off): the new UDP and ICMP flows a `conntrack_limit` names beside
    /// the TCP ones (bpf/udpopen.bpf.h, optional).
    pub udp_openers: bool,
    /// Flows kept, by owner (`--pod`, `--cgroup`, `--service`).
    pub workloads: WorkloadFilter,
    /// The kubelet's pod log directory (pod names).
    pub pod_logs: PathBuf,
    /// tcp_probe's per-segment figures (mean and max srtt, min cwnd, cwnd
    /// cuts, segments with data waiting) from one incoming segment in this
    /// many, a power of two; 1: every segment. Counters and current values
    /// come from the socket at each dump and stay exact.
    pub probe_sampling: u32,
    /// Flows listed one by one per interval; the rest are folded
    /// (src/model/fold.rs).
    pub listed_flows: usize,
    /// At most this many sockets tracked at once (`--max-flows`); the
    /// others are counted as untracked, with the bytes they move. 0: no cap.
    pub max_flows: u32,
    /// The window of the peak rates (`--peak-window`, microseconds; 0:
    /// none): per interface by the kernel's clock (hostq.h), per flow by the
    /// socket's microsecond clock.
    pub peak_window_us: u32,
    /// The Kafka broker whose cluster names the flows (`--kafka`), and how
    /// often it is asked (src/collect/kafka/).
    pub kafka: crate::collect::kafka::KafkaTarget,
    pub kafka_period: std::time::Duration,
    /// Where the lookup's lines go: stderr, unless the full-screen view
    /// owns the terminal (its health line has the counts then).
    pub kafka_say: fn(std::fmt::Arguments<'_>),
}

fn say_on_stderr(line: std::fmt::Arguments<'_>) {
    crate::stderr_line!("{line}");
}

/// The default of `CollectorConfig::peak_window_us`: 10 ms, short enough
/// to see a burst that fills a shaper's bucket, long enough for a few
/// ticks of the kernel's clock (docs/verdicts.md "Microbursts").
pub(crate) const DEFAULT_PEAK_WINDOW_US: u32 = 10_000;

/// The default of `CollectorConfig::probe_sampling` (`--probe-sampling`):
/// one segment in 16 keeps `on_tcp_probe` within 1.5 times an empty program
/// on the same tracepoint at a broker's many small flows, where a sampled
/// run's storage lookup mostly misses the cache (1 in 8 was 1.6 to 1.7
/// times there; docs/performance.md, "Nearer the floor").
pub(crate) const DEFAULT_PROBE_SAMPLING: u32 = 16;

impl Default for CollectorConfig {
    fn default() -> Self {
        CollectorConfig {
            all_netns: false,
            interfaces: Vec::new(),
            events: true,
            counter_files: Vec::new(),
            host_queue: true,
            per_packet: PerPacketMode::default(),
            linklocal: true,
            udp_openers: true,
            workloads: WorkloadFilter::default(),
            pod_logs: PathBuf::from("/var/log/pods"),
            probe_sampling: DEFAULT_PROBE_SAMPLING,
            listed_flows: DEFAULT_LISTED_FLOWS,
            max_flows: 0,
            peak_window_us: DEFAULT_PEAK_WINDOW_US,
            kafka: crate::collect::kafka::KafkaTarget::Off,
            kafka_period: crate::collect::kafka::DEFAULT_PERIOD,
            kafka_say: say_on_stderr,
        }
    }
}

/// Produces snapshots from the live kernel.
pub struct Collector {
    probes: FlowProbes,
    /// The host-queue object: loaded for the host queue, the link-local
    /// senders (its transmit program counts them) or both.
    host_queue: Option<HostQueueProbes>,
    /// Under `--per-packet auto` with the host queue observed: when its
    /// per-packet programs run, and the root qdiscs it watches.
    per_packet: Option<(PerPacketPolicy, QdiscRoots)>,
    /// Why the object, loaded for the link-local senders alone
    /// (`--no-host-queue`), could not be loaded.
    linklocal_error: Option<String>,
    allowance: HashMap<String, AllowanceReader>,
    drivers: HashMap<String, Option<String>>,
    flows: FlowTable,
    owners: OwnerIndex,
    workloads: WorkloadResolver,
    netns_names: NetnsNames,
    /// The observer's own netns inode: only its flows' ifindexes name one
    /// of its interfaces (`if_names` answers for this namespace).
    own_netns: u32,
    if_names: IfIndexNames,
    /// The interface a flow of another namespace leaves this one by
    /// (`--all-netns` only).
    egress: Option<NodeEgress>,
    config: CollectorConfig,
    prev_links: HashMap<String, LinkCounters>,
    /// Each watched interface's MTU as last read: a removed interface's
    /// last interval needs it (wire packets) and has no /sys left.
    mtus: HashMap<String, u32>,
    /// The watched interfaces' counter files, kept open.
    counter_files: ifstats::OpenCounters,
    /// Notices of interfaces removed from the namespace, with their
    /// counters at removal (None: the socket could not be opened, and a
    /// removed interface's last interval is lost as before).
    removed_links: Option<RemovedLinks>,
    prev_mono_ns: u64,
    seq: u64,
    counter_read_failures: u64,
    /// Allowance reads that failed, and that worked but were not trusted,
    /// over every interface (`Health::allowance_read_failures`,
    /// `Health::allowance_untrusted_reads`): kept here, not in the readers,
    /// which are dropped when their interface goes missing.
    allowance_read_failures: u64,
    allowance_untrusted_reads: u64,
    /// Intervals that ended late: see `Health::late_intervals`.
    late_intervals: u64,
    /// When the interval being collected should end at the latest
    /// (monotonic ns), set by the caller's loop before each collect.
    due_ns: Option<u64>,
    /// FragCreates at the end of the last interval; None after a failed read.
    prev_frag_creates: Option<u64>,
    /// Ring-buffer events lost (or undecodable) as of the last interval: when
    /// it grows a close event may be among them, so the next dump is full.
    prev_full_dump_losses: u64,
    /// A full dump failed: the next interval dumps in full again.
    full_dump_due: bool,
    /// A failed flow dump was said on stderr (once per run: the count is in
    /// health).
    flow_dump_error_said: bool,
    /// The name each other namespace's flows were last given, by netns
    /// inode: both sources can be gone when a flow's close record comes
    /// (`ip netns del` removes the /run/netns file while sockets keep the
    /// namespace alive; a pod's cgroup goes when its processes do, and a
    /// closing socket has no inode to find its owner by), and a close
    /// record may be the first record of a flow. Kept while a flow of the
    /// namespace is tracked (pruned at full dumps).
    netns_seen: HashMap<u32, String>,
    /// Bytes sent and received by untracked sockets as of the last
    /// interval (the kernel's totals): the snapshot carries the growth.
    untracked_bytes: (Growth, Growth),
    /// The Kafka lookup's thread, when `--kafka` is not off.
    kafka: Option<crate::collect::kafka::KafkaLookup>,
}

/// A kernel total read every interval, reported as its growth since the
/// last read.
#[derive(Debug, Default)]
struct Growth(u64);

impl Growth {
    fn delta(&mut self, now: u64) -> u64 {
        let d = now.saturating_sub(self.0);
        self.0 = now;
        d
    }
}

impl Collector {
    /// How each interval's flows are read on this kernel (doctor says it).
    pub(crate) fn flow_dump_path(&self) -> String {
        self.probes.dump_path()
    }

    /// Optional programs this kernel lacks or rejected (flow and host-queue
    /// probes), with why: their figures are missing or degraded.
    pub(crate) fn not_loaded(&self) -> Vec<(&'static ProgramSpec, &NotLoaded)> {
        let mut out = self.probes.not_loaded();
        if let Some(hq) = &self.host_queue {
            out.extend(hq.not_loaded());
        }
        out
    }

    /// Attaches the probes and reads the starting values. The first
    /// [`Collector::collect`] covers the time from here.
    pub fn start(config: CollectorConfig) -> Result<Self> {
        check_counter_files(&config)?;
        let netns =
            crate::collect::netns::own().context("reading this thread's network namespace")?;
        let filter = if config.all_netns {
            NetnsFilter::All
        } else {
            NetnsFilter::Only(netns)
        };
        let start_ns = monotonic_ns();
        let probes = FlowProbes::attach(
            filter,
            config.events,
            config.probe_sampling,
            config.max_flows,
            config.peak_window_us,
            config.udp_openers,
        )?;
        let parts = hostq::Parts {
            host_queue: config.host_queue,
            linklocal: config.linklocal,
            vpc_dns: std::fs::read_to_string("/etc/resolv.conf")
                .ok()
                .and_then(|t| ll::vpc_resolver(&t)),
            // on_dev_xmit counts the dequeue side where the kernel allows
            // (Parts::dequeue_at_xmit).
            dequeue_at_xmit: true,
            // With --all-netns, pods' datagrams are followed to this
            // namespace's interfaces, forwarded (bpf/linklocal.bpf.h).
            linklocal_node_netns: config.all_netns.then_some(netns),
        };
        let attach_hostq =
            || HostQueueProbes::attach_parts(filter, u64::from(config.peak_window_us), parts);
        let (host_queue, linklocal_error) = if config.host_queue {
            (Some(attach_hostq()?), None)
        } else if config.linklocal {
            // For the link-local senders alone: optional, the rest is
            // observed without them (shown not attached).
            match attach_hostq() {
                Ok(h) => (Some(h), None),
                Err(e) => (None, Some(format!("{e:#}"))),
            }
        } else {
            (None, None)
        };
        let mut c = Collector {
            probes,
            per_packet: (config.per_packet == PerPacketMode::Auto && config.host_queue)
                .then(|| (PerPacketPolicy::default(), QdiscRoots::new())),
            host_queue,
            linklocal_error,
            allowance: HashMap::new(),
            drivers: HashMap::new(),
            flows: FlowTable::new(start_ns),
            owners: OwnerIndex::default(),
            workloads: WorkloadResolver::for_host(config.pod_logs.clone()),
            netns_names: NetnsNames::for_host(),
            own_netns: netns,
            if_names: IfIndexNames::new().context("making a socket to look up interface names")?,
            egress: config.all_netns.then(NodeEgress::new),
            config,
            prev_links: HashMap::new(),
            mtus: HashMap::new(),
            counter_files: ifstats::OpenCounters::default(),
            // Opened before the baselines are read, so that a removal
            // between them and the first interval is seen.
            removed_links: RemovedLinks::open().ok(),
            prev_mono_ns: start_ns,
            seq: 0,
            counter_read_failures: 0,
            allowance_read_failures: 0,
            allowance_untrusted_reads: 0,
            late_intervals: 0,
            due_ns: None,
            prev_frag_creates: fragments::read_frag_creates().ok(),
            prev_full_dump_losses: 0,
            full_dump_due: false,
            flow_dump_error_said: false,
            untracked_bytes: Default::default(),
            netns_seen: HashMap::new(),
            kafka: None,
        };
        // Baselines: the first snapshot reports growth from now on.
        c.prev_full_dump_losses = c.full_dump_losses()?;
        // The first dump is a full one: room for every socket seeding found.
        let seeded = c.probes.counters()?.get(ts_health_counter::TS_H_SEEDED);
        let live = c.probes.read_flows(true, seeded as usize + 1024)?;
        let now_ns = monotonic_ns();
        // The first interval runs from this baseline, not from before the
        // programs were loaded (which takes a second on a loaded machine):
        // its rates are growth over the time it really covers.
        c.prev_mono_ns = now_ns;
        let seq = c.seq;
        let owners = &mut c.owners;
        c.flows.update(
            &live,
            &[],
            true,
            now_ns,
            &mut |r| owners.lookup(r.sock_ino, seq),
            &mut |_| FlowPath::Unknown,
        );
        c.probes.drain_events()?;
        if let Some(hq) = c.host_queue.as_mut() {
            hq.read(&mut c.if_names, seq)?;
            // The link-local senders and the sockets made, too: read first
            // here, their first interval counts from the baseline, not from
            // the programs' attach (over a second before it on a loaded
            // machine: a UDP storm then read 867 sockets/s for 600).
            if let Some(read) = hq.read_linklocal() {
                read?;
            }
        }
        c.socket_openers(seq)?;
        for name in ifstats::interfaces(&c.config.interfaces)? {
            if let Ok(now) = ifstats::read_counters(&name) {
                c.prev_links.insert(name.clone(), now);
            }
            c.read_allowance(&name);
        }
        c.kafka = crate::collect::kafka::KafkaLookup::start(
            c.config.kafka.clone(),
            c.config.kafka_period,
            c.config.kafka_say,
        );
        Ok(c)
    }

    /// The UDP sent to the link-local services since the last read, on the
    /// interface it was handed to; every watched interface gets a sample,
    /// empty when none went through it. The kernel keys each datagram by its
    /// socket (at the driver's transmit the current task may be another's:
    /// bpf/linklocal.bpf.h): the socket's cgroup comes from the kernel, its
    /// process from its inode as a flow's (src/collect/owners.rs), and the
    /// sockets of one owner are summed into one sender. A socket no process
    /// holds any more (closed before the read: a resolver that opens one per
    /// query) keeps its cgroup, with pid 0. Datagrams no socket was kept
    /// for (the kernel's map full) go on every interface's sample as
    /// unattributed, being of no known one. Interfaces of other namespaces
    /// (--all-netns: a pod's veth) are not reported, as for the host queue;
    /// a pod's datagrams are reported where they leave through this
    /// namespace's interface, forwarded, for the socket that sent them in
    /// the pod (a sender of its own, with the pod's namespace), or for no
    /// sender where that socket was not seen.
    fn linklocal_into(&mut self, interfaces: &mut [InterfaceSample], seq: u64) -> Result<()> {
        use crate::model::linklocal::{LinkLocalSample, LinkLocalSender, LinkLocalService};
        use crate::model::snapshot::Owner;
        let Some(read) = self.host_queue.as_mut().and_then(|h| h.read_linklocal()) else {
            return Ok(());
        };
        let read = read?;
        // Paused for part of the interval (--per-packet auto detaches
        // on_dev_xmit, which counts them): read, so the next interval
        // starts from here, but not reported as the interval's count.
        if self.host_queue.as_ref().is_some_and(|hq| !hq.measured()) {
            return Ok(());
        }
        // (interface, pid, cgroup, service, family, forwarded from) -> sender
        type Key = (String, u32, u64, LinkLocalService, u8, Option<u32>);
        let mut senders: BTreeMap<Key, LinkLocalSender> = BTreeMap::new();
        for c in read.counts {
            if c.netns != self.own_netns {
                continue;
            }
            let Some(name) = self.if_names.name(c.ifindex, seq) else {
                continue;
            };
            let seen = !c.forwarded || c.origin_netns != 0;
            let mut owner = seen
                .then(|| self.owners.lookup_retry(c.sock_ino, seq))
                .flatten()
                .unwrap_or_else(|| Owner {
                    pid: 0,
                    comm: String::new(),
                    thread: None,
                    cgroup_id: 0,
                    cgroup: None,
                    workload: None,
                });
            owner.cgroup_id = c.cgroup_id;
            let from = (c.forwarded && seen).then_some(c.origin_netns);
            let from_netns = from.map(|ino| {
                self.netns_names
                    .name(ino, seq)
                    .unwrap_or_else(|| ino.to_string())
            });
            let key = (name, owner.pid, c.cgroup_id, c.service, c.family, from);
            let s = senders.entry(key).or_insert_with(|| LinkLocalSender {
                owner,
                service: c.service,
                proto: "udp".into(),
                family: c.family,
                packets: 0,
                bytes: 0,
                forwarded: c.forwarded,
                from_netns,
            });
            s.packets += c.packets;
            s.bytes += c.bytes;
        }
        let mut by_iface: HashMap<String, Vec<LinkLocalSender>> = HashMap::new();
        for ((name, ..), mut s) in senders {
            self.workloads.resolve_owner(&mut s.owner, seq);
            by_iface.entry(name).or_default().push(s);
        }
        for i in interfaces.iter_mut() {
            let senders = by_iface.remove(&i.name).unwrap_or_default();
            i.linklocal = Some(LinkLocalSample::of(senders, read.unattributed));
        }
        Ok(())
    }

    /// Every tracked TCP flow open now, the idle ones too, by owner, on the
    /// interface it uses (src/model/holders.rs): who holds entries in each
    /// interface's connection table, and how long idle. The flow table
    /// keeps the counts as flows come and go (src/collect/held.rs); this
    /// names the holders, one per process (a process's flows the kernel saw
    /// it send on and those found through /proc are one). A flow of another
    /// namespace (--all-netns) is held by namespace, not by route: it counts
    /// on the interfaces whose allowance counters were read (a node's ENIs,
    /// whose tables it fills), or on every one where none were, when a veth
    /// here leads into its namespace (src/collect/egress.rs), and on none
    /// when none does.
    fn tcp_holders_into(&mut self, interfaces: &mut [InterfaceSample], seq: u64) {
        use crate::model::holders::{FlowHolder, FlowHolderSample};
        use crate::model::snapshot::Owner;
        // (interface here, pid; for no pid known, the cgroup) -> holder
        let mut by: HashMap<(Option<u32>, u32, u64), FlowHolder> = HashMap::new();
        for (k, h) in self.flows.held().iter() {
            let own = k.netns == self.own_netns;
            if !counts_here(self.own_netns, &mut self.egress, k.netns, seq) {
                continue;
            }
            let ifindex = own.then_some(k.ifindex);
            let cgroup = if k.pid == 0 { k.cgroup_id } else { 0 };
            let e = by
                .entry((ifindex, k.pid, cgroup))
                .or_insert_with(|| FlowHolder {
                    owner: Owner {
                        pid: k.pid,
                        comm: String::new(),
                        thread: None,
                        cgroup_id: 0,
                        cgroup: None,
                        workload: None,
                    },
                    open: 0,
                    idle: 0,
                    longest_idle_s: 0,
                });
            e.open += h.open;
            e.idle += h.idle.min(h.open);
            e.longest_idle_s = e.longest_idle_s.max(h.longest_idle_ns / 1_000_000_000);
            if e.owner.comm.is_empty() && h.comm[0] != 0 {
                e.owner.comm = crate::collect::flowtable::c_string(&h.comm);
                e.owner.cgroup_id = k.cgroup_id;
            } else if e.owner.comm.is_empty() {
                if let Some(o) = self.owners.lookup(h.sock_ino, seq) {
                    e.owner.comm = o.comm;
                }
            }
        }
        let mut per_iface: HashMap<Option<String>, Vec<FlowHolder>> = HashMap::new();
        for ((ifindex, ..), h) in by {
            let iface = match ifindex {
                Some(i) => match self.if_names.name(i, seq) {
                    Some(name) => Some(name),
                    None => continue, // an interface gone: none reported
                },
                None => None,
            };
            per_iface.entry(iface).or_default().push(h);
        }
        // Another namespace's flows go on the interfaces with a connection
        // allowance (ENA counters), where a table fills; on every one only
        // where none has counters (not EC2). A pod's veth is not given every
        // pod's flows.
        let everywhere = per_iface.remove(&None).unwrap_or_default();
        let counted = |i: &InterfaceSample| i.allowance.sample().is_some();
        let any_counted = interfaces.iter().any(counted);
        for i in interfaces.iter_mut() {
            let mut holders = per_iface.remove(&Some(i.name.clone())).unwrap_or_default();
            if !any_counted || counted(i) {
                holders.extend(everywhere.iter().cloned());
            }
            let mut sample = FlowHolderSample::of(holders);
            for h in &mut sample.holders {
                self.workloads.resolve_owner(&mut h.owner, seq);
            }
            i.tcp_holders = Some(sample);
        }
    }

    /// The UDP and ICMP sockets made in the observer's namespace since the
    /// last read, by owner (bpf/udpopen.bpf.h), one sample per protocol:
    /// the task that made the socket is the owner, its name as the kernel
    /// read it then (it may have exited since: a `dig` or a `ping` per
    /// query), its cgroup from the kernel, resolved to a workload as a
    /// flow's. Other namespaces' count only with --all-netns, and only those
    /// a veth here leads into (a node's pods: their flows leave through this
    /// namespace's interfaces, into the same connection table). None when
    /// the program is not attached.
    fn socket_openers(&mut self, seq: u64) -> Result<Option<[SocketOpenSample; 2]>> {
        use crate::model::snapshot::Owner;
        use crate::model::udpopen::SocketOpener;
        let Some(read) = self.probes.read_udp_openers() else {
            return Ok(None);
        };
        let read = read?;
        // (icmp, pid, cgroup, family) -> opener
        let mut by: BTreeMap<(bool, u32, u64, u8), SocketOpener> = BTreeMap::new();
        // The observer's own: its ioctl sockets (SIOCETHTOOL and the like),
        // made and closed every interval without a datagram sent.
        let me = std::process::id();
        for c in read.counts {
            if c.tgid == me {
                continue;
            }
            // Another namespace's count only where its packets can pass
            // through this one (a pod's, not another host's in a lab).
            if !counts_here(self.own_netns, &mut self.egress, c.netns, seq) {
                continue;
            }
            let o = by
                .entry((c.icmp, c.tgid, c.cgroup_id, c.family))
                .or_insert_with(|| SocketOpener {
                    owner: Owner {
                        pid: c.tgid,
                        comm: c.comm.clone(),
                        thread: None,
                        cgroup_id: c.cgroup_id,
                        cgroup: None,
                        workload: None,
                    },
                    family: c.family,
                    sockets: 0,
                });
            o.sockets += c.sockets;
        }
        let (mut udp, mut icmp) = (Vec::new(), Vec::new());
        for ((is_icmp, ..), mut o) in by {
            self.workloads.resolve_owner(&mut o.owner, seq);
            if is_icmp {
                icmp.push(o);
            } else {
                udp.push(o);
            }
        }
        Ok(Some([
            SocketOpenSample::of(udp, read.unattributed),
            SocketOpenSample::of(icmp, read.icmp_unattributed),
        ]))
    }

    /// What only a full dump makes up for, counted since start: close
    /// records lost (the ring buffer and the overflow map both full: their
    /// flows vanish without a final record) and flows that moved when the
    /// moved set was full (the sweep does not read them).
    fn full_dump_losses(&self) -> Result<u64> {
        Ok(self.probes.counter(ts_health_counter::TS_H_CLOSES_LOST)?
            + self.probes.counter(ts_health_counter::TS_H_MOVED_FULL)?)
    }

    /// The interval the next `collect` ends should end by `due` (the
    /// asked end plus a tolerance); if its end, the moment its flows are
    /// read, is later, it counts as late (`Health::late_intervals`): the
    /// caller's loop could not keep up. Judged at that moment, so a stall
    /// anywhere before it (waiting, draining, dumping) lengthens and marks
    /// the same interval, and one after it the next.
    pub(crate) fn due_by(&mut self, due: Instant) {
        let left = due.saturating_duration_since(Instant::now());
        self.due_ns = Some(monotonic_ns() + left.as_nanos() as u64);
    }

    /// One snapshot covering the time since the previous call.
    pub fn collect(&mut self) -> Result<Snapshot> {
        // Losses are read before the events are drained: a close record lost
        // after this is seen next interval, and its flow forgotten then.
        let lost = self.full_dump_losses()?;
        let all = lost != self.prev_full_dump_losses
            || (self.seq + 1) % FULL_DUMP_EVERY == 0
            || std::mem::take(&mut self.full_dump_due);
        self.prev_full_dump_losses = lost;
        let events = self.probes.drain_events()?;
        // A full dump reads every tracked flow: room for them all at once,
        // not a buffer doubled up to it (at 30,000 flows, 16 MB copied into
        // 32 while both are alive).
        let expected = if all { self.flows.len() + 1024 } else { 0 };
        let (live, all) = match self.probes.read_flows(all, expected) {
            Ok(live) => (live, all),
            // A dump that cannot be made (out of descriptors: the iterator
            // is a file) is a failed read, counted, not the end of
            // observing: flow counters are cumulative in the kernel, so the
            // next dump's deltas cover this interval too. A full dump is
            // tried again next interval (an empty read forgets no flow).
            Err(e) => {
                self.counter_read_failures += 1;
                if !self.flow_dump_error_said {
                    crate::stderr_line!(
                        "throttlescope: the flow dump failed ({e:#}); counted in health's \
                         counter read failures, flows read again next interval"
                    );
                }
                self.flow_dump_error_said = true;
                self.full_dump_due |= all;
                (Vec::new(), false)
            }
        };
        let mono_ns = monotonic_ns();
        if self.due_ns.take().is_some_and(|due| mono_ns > due) {
            self.late_intervals += 1;
        }

        // A storm's close records are read where they are (boxed as the
        // ring delivered them), not copied: 50,000 are 21 MB.
        let closed: Vec<&ts_flow_record> = events
            .iter()
            .filter_map(|ev| match ev {
                RawEvent::Close(c) => Some(&c.rec),
                RawEvent::Plain(_) => None,
            })
            .collect();
        let mut flow_events = Vec::with_capacity(events.len().min(MAX_LISTED_EVENTS));
        for ev in &events {
            flow_events.push(match ev {
                RawEvent::Close(c) => FlowEvent {
                    mono_ns: c.hdr.ts_ns,
                    flow_id: c.hdr.cookie,
                    netns: c.hdr.netns,
                    kind: FlowEventKind::Close,
                },
                RawEvent::Plain(e) => FlowEvent {
                    mono_ns: e.ts_ns,
                    flow_id: e.cookie,
                    netns: e.netns,
                    kind: event_kind(e.kind, e.arg0, e.arg1),
                },
            });
        }

        let seq = self.seq;
        let owners = &mut self.owners;
        let if_names = &mut self.if_names;
        let own_netns = self.own_netns;
        let egress = &mut self.egress;
        // A flow of another namespace (--all-netns) records one of that
        // namespace's devices (a pod's eth0); the interface here is the one
        // the node routes its packets out of (src/collect/egress.rs), and
        // none (unrouted) when no path is found.
        // Without an owner filter, the flows past the listing limit are
        // folded before their samples are built (FlowTable::update_listing);
        // with one, every flow needs its workload to be kept or not first.
        let filtered = !self.config.workloads.is_empty();
        let mut folded = Folded::default();
        let (mut flows, counts) = self.flows.update_listing(
            &live,
            &closed,
            all,
            mono_ns,
            &mut |r| owners.lookup(r.sock_ino, seq),
            &mut |r| {
                let name = |n: Option<String>| n.map_or(FlowPath::Unknown, FlowPath::Iface);
                if r.netns == own_netns {
                    return name(if_names.name(r.st.ifindex, seq));
                }
                let Some(egress) = egress.as_mut() else {
                    return FlowPath::Unknown;
                };
                let flow = ForeignFlow {
                    netns: r.netns,
                    ifindex: r.st.ifindex,
                    local: SocketAddr::new(ip_of(r.family, &r.saddr), r.lport),
                    peer: SocketAddr::new(ip_of(r.family, &r.daddr), r.rport),
                };
                match egress.of(flow, seq) {
                    Egress::Ifindex(i) => name(if_names.name(i, seq)),
                    Egress::Loopback => FlowPath::Iface("lo".to_string()),
                    Egress::Unknown => FlowPath::Unrouted,
                }
            },
            if filtered {
                usize::MAX
            } else {
                self.config.listed_flows
            },
            &mut folded,
        );
        // The interval's records are done with: freed before the samples
        // are named and encoded.
        drop(closed);
        drop((live, events));
        self.workloads.resolve(&mut flows, seq);
        if filtered {
            let keep = &self.config.workloads;
            flows.retain(|f| f.passes(keep));
        }
        flows.sort_by(|a, b| {
            b.delta
                .bytes_sent
                .cmp(&a.delta.bytes_sent)
                .then(a.id.cmp(&b.id))
        });
        fold(
            &mut flows,
            &mut flow_events,
            &mut folded,
            self.config.listed_flows,
            MAX_LISTED_EVENTS,
        );
        for f in flows.iter_mut().filter(|f| f.netns != own_netns) {
            let now = self.netns_names.name(f.netns, seq).or_else(|| {
                let w = f.owner.as_ref()?.workload.as_ref()?;
                w.pod_uid.as_ref()?;
                Some(format!("pod {}", w.label()?))
            });
            f.netns_name = match now {
                Some(name) => {
                    if self.netns_seen.get(&f.netns) != Some(&name) {
                        self.netns_seen.insert(f.netns, name.clone());
                    }
                    Some(name)
                }
                None => self.netns_seen.get(&f.netns).cloned(),
            };
        }
        if all {
            // A namespace none of whose flows is tracked any more has no
            // close record to come; its inode may be given to a new one.
            let in_use = self.flows.netns_in_use();
            self.netns_seen.retain(|ino, _| in_use.contains(ino));
        }

        // Kafka identities from the latest lookup, whatever its age: the
        // interval never waits for one.
        let kafka_health = self.kafka.as_ref().map(|k| {
            let (idx, health) = k.current();
            if let Some(idx) = idx {
                for f in &mut flows {
                    f.kafka = crate::model::kafka::classify(&idx, f);
                }
            }
            health
        });

        let mut host_queue = match self.host_queue.as_mut() {
            Some(hq) => hq.read(&mut self.if_names, seq)?,
            None => HashMap::new(),
        };
        let (mut interfaces, missing_interfaces) = self.read_interfaces();
        // Paused for part of the interval: every interface's host queue says
        // so, those without a drop or a qdisc event too (not "no probes").
        let paused = self
            .host_queue
            .as_ref()
            .is_some_and(|hq| self.config.host_queue && !hq.measured());
        for i in &mut interfaces {
            i.host_queue = host_queue.remove(&i.name);
            if paused && i.host_queue.is_none() {
                i.host_queue = Some(HostQueueSample {
                    paused: true,
                    ..HostQueueSample::default()
                });
            }
            if let Some((tx, rx)) = self
                .host_queue
                .as_ref()
                .and_then(|hq| hq.peaks().get(&i.name))
            {
                i.tx_peak_bps = tx.map(|p| p.bps);
                i.tx_peak_pps = tx.map(|p| p.pps);
                i.rx_peak_bps = rx.map(|p| p.bps);
                i.rx_peak_pps = rx.map(|p| p.pps);
                i.peak_window_us = tx.or(*rx).map(|p| p.window_us);
            }
        }
        self.linklocal_into(&mut interfaces, seq)?;
        self.tcp_holders_into(&mut interfaces, seq);
        let [udp_openers, icmp_openers] = match self.socket_openers(seq)? {
            Some([udp, icmp]) => [Some(udp), Some(icmp)],
            None => [None, None],
        };
        let fragments_created = self.fragments_created();
        let counters = self.probes.counters()?;
        let mut programs = self
            .probes
            .program_health(&counters, self.flows.probe_events());
        let mut host_queue_untracked = 0;
        if let Some(hq) = &self.host_queue {
            programs.extend(hq.program_health());
            let h = hq.health();
            host_queue_untracked = h.untracked_interfaces + h.untracked_drops + h.unseen_drops;
        }
        if let Some(why) = &self.linklocal_error {
            // Loaded for the link-local senders alone, and refused whole.
            programs.extend(
                hostq::HOSTQ_PROGRAMS
                    .iter()
                    .filter(|p| p.name == "on_dev_xmit")
                    .map(|p| crate::model::snapshot::ProgramHealth {
                        name: p.name.trim_start_matches("on_").to_string(),
                        attached: false,
                        not_attached: Some(why.clone()),
                        lost: Some(p.lost.to_string()),
                        ..Default::default()
                    }),
            );
        }
        let health = Health {
            programs,
            host_queue_untracked,
            untracked_flows: counters.get(ts_health_counter::TS_H_UNTRACKED),
            untracked_open: counters
                .get(ts_health_counter::TS_H_UNTRACKED)
                .saturating_sub(counters.get(ts_health_counter::TS_H_UNTRACKED_CLOSED)),
            untracked_bytes_sent: self
                .untracked_bytes
                .0
                .delta(counters.get(ts_health_counter::TS_H_UNTRACKED_SENT)),
            untracked_bytes_received: self
                .untracked_bytes
                .1
                .delta(counters.get(ts_health_counter::TS_H_UNTRACKED_RECEIVED)),
            max_flows: self.probes.max_flows(),
            ringbuf_drops: counters.get(ts_health_counter::TS_H_RINGBUF_DROPS)
                + self.probes.lost_in_reader(),
            closes_deferred: counters.get(ts_health_counter::TS_H_CLOSES_DEFERRED),
            closes_lost: counters.get(ts_health_counter::TS_H_CLOSES_LOST),
            moved_set_full: counters.get(ts_health_counter::TS_H_MOVED_FULL),
            moved_set_gone: counters.get(ts_health_counter::TS_H_SWEEP_GONE),
            iter_records: counters.get(ts_health_counter::TS_H_ITER_RECORDS),
            seeded_flows: counters.get(ts_health_counter::TS_H_SEEDED),
            counter_read_failures: self.counter_read_failures,
            allowance_read_failures: self.allowance_read_failures,
            allowance_untrusted_reads: self.allowance_untrusted_reads,
            late_intervals: self.late_intervals,
            missing_interfaces,
            flows_dumped: counts.read,
            flows_carried: counts.carried,
            probe_sampling: self.probes.probe_sampling(),
            // The pipeline's: the exporter is a sink, not the collector's.
            otlp: None,
            kafka: kafka_health,
            per_packet: None,
        };

        let mut snap = Snapshot {
            folded,
            seq: self.seq,
            mono_ns,
            unix_ms: crate::shared::clock::now_unix_ms(),
            interval_ns: mono_ns.saturating_sub(self.prev_mono_ns),
            interfaces,
            flows,
            idle_flows: counts.idle,
            events: flow_events,
            health,
            fragments_created,
            udp_openers,
            icmp_openers,
        };
        self.per_packet_next(&mut snap);
        self.prev_mono_ns = mono_ns;
        self.seq += 1;
        Ok(snap)
    }

    /// Under `--per-packet auto`: whether the per-packet programs run in
    /// the next interval, decided from `snap` and said in its health. An
    /// attach that fails leaves them paused, and says so.
    fn per_packet_next(&mut self, snap: &mut Snapshot) {
        let (Some((policy, qdisc_roots)), Some(hq)) =
            (self.per_packet.as_mut(), self.host_queue.as_mut())
        else {
            return;
        };
        // The observed interfaces' root qdiscs: a queue standing now.
        let mut unread = None;
        let roots: Vec<_> = match qdisc_roots.read() {
            Ok(by_index) => by_index
                .into_iter()
                .filter_map(|(ifindex, q)| {
                    let name = self.if_names.name(ifindex, snap.seq)?;
                    snap.interfaces
                        .iter()
                        .any(|i| i.name == name)
                        .then_some((name, q))
                })
                .collect(),
            Err(e) => {
                // Counted, and said: the decision is made without them.
                self.counter_read_failures += 1;
                unread = Some(format!("the root qdiscs could not be read ({e})"));
                Vec::new()
            }
        };
        let mut state = policy.after(snap, hq.measured(), &roots);
        if let Some(unread) = unread {
            state.why = format!("{}; {unread}", state.why);
        }
        if let Err(e) = hq.pause_per_packet(!state.attached) {
            state.attached = false;
            state.why = format!("{}; but {e:#}: paused", state.why);
        }
        snap.health.per_packet = Some(state);
    }

    /// Fragments created since the last interval. A failed read is counted
    /// and leaves this interval and the next unknown (no baseline).
    fn fragments_created(&mut self) -> Option<u64> {
        let now = match fragments::read_frag_creates() {
            Ok(n) => Some(n),
            Err(_) => {
                self.counter_read_failures += 1;
                None
            }
        };
        let delta = match (self.prev_frag_creates, now) {
            (Some(p), Some(n)) => Some(n.saturating_sub(p)),
            _ => None,
        };
        self.prev_frag_creates = now;
        delta
    }

    /// This interval's interfaces, and the asked-for ones that are missing.
    /// An interface removed since the last interval gets its last sample
    /// (`removed`), from the counters the kernel gave with the notice.
    fn read_interfaces(&mut self) -> (Vec<InterfaceSample>, Vec<String>) {
        let gone = self.removed_links_now();
        let (names, missing) = match ifstats::present(&self.config.interfaces) {
            Ok(n) => n,
            Err(_) => {
                self.counter_read_failures += 1;
                return (Vec::new(), Vec::new());
            }
        };
        let mut out = Vec::with_capacity(names.len());
        for (name, at_removal) in gone {
            // Watched until now (it has a baseline) and not back under the
            // same name: back, it is a new device whose counters start
            // over, and the old one's last deltas cannot share its line.
            let Some(prev) = self.prev_links.remove(&name) else {
                continue;
            };
            if names.contains(&name) {
                continue;
            }
            out.push(InterfaceSample {
                driver: self.driver(&name),
                delta: ifstats::counter_delta(&at_removal, &prev),
                totals: at_removal,
                offloads: None,
                mtu: self.mtus.get(&name).copied().unwrap_or(0),
                allowance: AllowanceStatus::Unavailable {
                    reason: "interface removed during the interval: its allowance counters \
                             could not be read"
                        .into(),
                },
                host_queue: None,
                linklocal: None,
                tcp_holders: None,
                removed: true,
                // Peaks are filled in for the interfaces still there.
                tx_peak_bps: None,
                rx_peak_bps: None,
                tx_peak_pps: None,
                rx_peak_pps: None,
                peak_window_us: None,
                name,
            });
        }
        // Interfaces no longer there (a removal whose notice was lost
        // included) are forgotten: one that comes back under the same name
        // is a new device and starts over from a baseline.
        let present = |n: &String| names.contains(n);
        self.prev_links.retain(|n, _| present(n));
        self.mtus.retain(|n, _| present(n));
        self.allowance.retain(|n, _| present(n));
        self.drivers.retain(|n, _| present(n));
        self.counter_files.retain(present);
        for name in names {
            let (totals, mtu) = match self.counter_files.read(&name) {
                Ok(read) => read,
                Err(_) => {
                    self.counter_read_failures += 1;
                    continue;
                }
            };
            // A new interface starts as a baseline: zero growth.
            let prev = self.prev_links.get(&name).copied().unwrap_or(totals);
            let allowance = self.read_allowance(&name);
            self.mtus.insert(name.clone(), mtu);
            out.push(InterfaceSample {
                driver: self.driver(&name),
                delta: ifstats::counter_delta(&totals, &prev),
                totals,
                offloads: crate::collect::allowance::ethtool::offloads(&name).ok(),
                mtu,
                allowance,
                host_queue: None,
                linklocal: None,
                tcp_holders: None,
                removed: false,
                name: name.clone(),
                tx_peak_bps: None,
                rx_peak_bps: None,
                tx_peak_pps: None,
                rx_peak_pps: None,
                peak_window_us: None,
            });
            self.prev_links.insert(name, totals);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        (out, missing)
    }

    /// Interfaces removed from the namespace since the last call, with
    /// their counters at removal; lost notices are a failed counter read.
    fn removed_links_now(&mut self) -> HashMap<String, LinkCounters> {
        let Some(links) = &self.removed_links else {
            return HashMap::new();
        };
        let (gone, lost) = links.drain();
        if lost {
            self.counter_read_failures += 1;
        }
        gone
    }

    fn read_allowance(&mut self, iface: &str) -> AllowanceStatus {
        let allowance = self.allowance_reader(iface).read();
        if let Some(a) = allowance.sample() {
            self.allowance_read_failures += u64::from(a.last_error.is_some());
            self.allowance_untrusted_reads += u64::from(a.untrusted.is_some());
        }
        allowance
    }

    /// The interface's allowance reader: from `--counters` if given, else
    /// the ioctl. Made once, so deltas and reset counts carry over.
    fn allowance_reader(&mut self, iface: &str) -> &mut AllowanceReader {
        let files = &self.config.counter_files;
        self.allowance.entry(iface.to_string()).or_insert_with(|| {
            let source = files
                .iter()
                .find(|(i, _)| i == iface)
                .map(|(_, p)| CounterSource::File(p.clone()))
                .unwrap_or(CounterSource::Ioctl);
            AllowanceReader::new(iface, source)
        })
    }

    /// The interface's driver, looked up once per interface.
    fn driver(&mut self, iface: &str) -> Option<String> {
        self.drivers
            .entry(iface.to_string())
            .or_insert_with(|| ifstats::driver(iface))
            .clone()
    }
}

/// `--counters IFACE=PATH` must name an interface that is watched, once:
/// a typo or a second file for one interface would otherwise be ignored
/// and the ioctl (or nothing) read instead without a word.
fn check_counter_files(config: &CollectorConfig) -> Result<()> {
    let watched: Vec<String> = ifstats::present(&[])?
        .0
        .into_iter()
        .filter(|n| config.interfaces.is_empty() || config.interfaces.contains(n))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for (iface, path) in &config.counter_files {
        if !seen.insert(iface.as_str()) {
            anyhow::bail!(
                "--counters {iface}: given more than once (one counter file per interface)"
            );
        }
        if !watched.contains(iface) {
            anyhow::bail!(
                "--counters {iface}={}: {iface} is not among the interfaces watched here ({})",
                path.display(),
                if watched.is_empty() {
                    "none".to_string()
                } else {
                    watched.join(", ")
                }
            );
        }
    }
    Ok(())
}

fn event_kind(kind: u32, arg0: i32, arg1: i32) -> FlowEventKind {
    match ts_event_kind(kind) {
        ts_event_kind::TS_EV_OPEN => FlowEventKind::Open,
        ts_event_kind::TS_EV_RETRANS if arg0 != 0 => FlowEventKind::RetransmitFailed { err: arg0 },
        ts_event_kind::TS_EV_RETRANS => FlowEventKind::Retransmit { segs: arg1 as u32 },
        ts_event_kind::TS_EV_CONG => FlowEventKind::CongestionState {
            from: ca_state_name(arg0 as u32).to_string(),
            to: ca_state_name(arg1 as u32).to_string(),
        },
        ts_event_kind::TS_EV_CLOSE => FlowEventKind::Close,
        _ => FlowEventKind::State {
            from: tcp_state_name(arg0 as u8).to_string(),
            to: tcp_state_name(arg1 as u8).to_string(),
        },
    }
}

/// Whether what namespace `netns` holds or makes, counted by namespace
/// and not by flow, counts here: the observer's own, and with --all-netns
/// those a veth here leads into (src/collect/egress.rs). Takes the fields
/// it needs, for callers holding others borrowed.
fn counts_here(own_netns: u32, egress: &mut Option<NodeEgress>, netns: u32, seq: u64) -> bool {
    netns == own_netns || egress.as_mut().is_some_and(|e| e.reaches(netns, seq))
}
