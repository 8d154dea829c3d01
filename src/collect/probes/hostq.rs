//! Loads and attaches hostq.bpf.c and turns its per-CPU maps into one
//! [`HostQueueSample`] per interface and interval: packets through the tx
//! qdisc, its backlog and peak, sojourn samples, and the stack's drops by
//! kernel drop reason.

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;
use std::net::Ipv4Addr;

use crate::collect::ifindex::IfIndexNames;
use anyhow::{Context, Result};
use libbpf_rs::btf::types::Enum;
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};

use super::hostq_skel::types::ll_health_counter;
use super::hostq_skel::types::{
    hq_dir, hq_drop_key, hq_health_counter, hq_if_stats, hq_rate, hq_rate_pack,
};
use super::hostq_skel::{HostqSkel, HostqSkelBuilder};
use super::linklocal::{LinkLocalRead, LinkLocalReader};
use super::load::{self, health_of, not_loaded, NetnsFilter, NotLoaded, ProgramSpec};
use super::percpu;
use super::qdisc_counts::{Counts, QdiscCounts, UnseenDrops};
use super::records::read_record;
use crate::model::snapshot::{is_qdisc_drop_reason, HostQueueSample, ProgramHealth};

/// (program name, the health counter of its observed events).
const PROGRAM_EVENTS: &[(&str, hq_health_counter)] = &[
    ("on_qdisc_enqueue", hq_health_counter::HQ_H_ENQUEUE_EVENTS),
    ("on_qdisc_dequeue", hq_health_counter::HQ_H_DEQUEUE_EVENTS),
    ("on_kfree_skb", hq_health_counter::HQ_H_DROP_EVENTS),
    ("on_dev_xmit", hq_health_counter::HQ_H_XMIT_EVENTS),
    ("on_netif_receive", hq_health_counter::HQ_H_RECV_EVENTS),
];

/// Every program of hostq.bpf.c. All optional: the host queue adds to the
/// verdicts (host queuing is not blamed on the hypervisor) but observing
/// flows and allowance counters works without it; each one missing is shown.
pub(crate) const HOSTQ_PROGRAMS: &[ProgramSpec] = &[
    ProgramSpec {
        name: "on_qdisc_enqueue",
        tracepoint: Some("qdisc_enqueue"),
        required: false,
        args: (3, 3),
        gives: "packets into each tx qdisc, queue peaks, sojourn samples",
        lost: "host queue: enqueued packets and sojourn time; the peak backlog \
               comes from dequeues instead (as left after each dequeue: a little lower)",
    },
    ProgramSpec {
        name: "on_qdisc_dequeue",
        tracepoint: Some("qdisc_dequeue"),
        required: false,
        args: (4, 4),
        gives: "packets out of each tx qdisc, backlog, sojourn samples",
        lost: "host queue: dequeued packets and sojourn time",
    },
    ProgramSpec {
        name: "on_kfree_skb",
        tracepoint: Some("kfree_skb"),
        required: false,
        args: (2, 4),
        gives: "the stack's drops by interface and drop reason",
        lost: "host drops by reason (qdisc drops still show in tc -s qdisc)",
    },
    ProgramSpec {
        name: "on_dev_xmit",
        tracepoint: Some("net_dev_start_xmit"),
        required: false,
        args: (2, 2),
        gives: "each interface's peak transmit rate (microbursts); the UDP to the link-local \
                services (DNS, metadata, time), by interface and sending socket",
        lost: "tx peak rates: microbursts on transmit are not seen; link-local senders over \
               UDP: a linklocal_limit names no UDP sender",
    },
    ProgramSpec {
        name: "on_netif_receive",
        tracepoint: Some("netif_receive_skb"),
        required: false,
        args: (1, 1),
        gives: "each interface's peak receive rate (microbursts)",
        lost: "rx peak rates: microbursts on receive are not seen",
    },
];

/// Key under which drops with no device (attributed by socket) are reported.
pub(crate) const NO_DEVICE: &str = "(no device)";

/// What the host-queue programs could not do, cumulative since attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostQueueHealth {
    /// qdisc events not counted because their transmit queue's slot held
    /// another queue, active on that CPU (hostq.h).
    pub untracked_interfaces: u64,
    /// Drops not counted because their (interface, reason) entry could not
    /// be created (map full).
    pub untracked_drops: u64,
    /// Sojourn samples abandoned (their packet was not seen leaving).
    pub sojourn_samples_lost: u64,
    /// Bulk dequeues too long to walk; their extra skbs counted as 1 packet.
    pub bulk_dequeues_truncated: u64,
    /// Drops a qdisc counted itself with no drop event counted for them:
    /// the kernel ran no program for those hits (qdisc_counts.rs).
    pub unseen_drops: u64,
}

/// One transmit queue's cumulative counters (in one CPU's slot), or their
/// growth summed over CPUs and queues.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct IfTotals {
    enqueued: u64,
    dequeued: u64,
    sojourn_sum_ns: u64,
    sojourn_samples: u64,
    enqueue_events: u64,
    dequeue_events: u64,
}

impl IfTotals {
    fn of(c: &hq_if_stats) -> IfTotals {
        IfTotals {
            enqueued: c.enqueued,
            dequeued: c.dequeued,
            sojourn_sum_ns: c.sojourn_sum_ns,
            sojourn_samples: c.sojourn_samples,
            enqueue_events: c.enqueued_skbs,
            dequeue_events: c.dequeue_runs,
        }
    }

    /// Growth since `prev`, the same slot's previous read (zero when the
    /// slot changed hands since: the newcomer's counters started at 0).
    fn since(&self, prev: &IfTotals) -> IfTotals {
        IfTotals {
            enqueued: self.enqueued.saturating_sub(prev.enqueued),
            dequeued: self.dequeued.saturating_sub(prev.dequeued),
            sojourn_sum_ns: self.sojourn_sum_ns.saturating_sub(prev.sojourn_sum_ns),
            sojourn_samples: self.sojourn_samples.saturating_sub(prev.sojourn_samples),
            enqueue_events: self.enqueue_events.saturating_sub(prev.enqueue_events),
            dequeue_events: self.dequeue_events.saturating_sub(prev.dequeue_events),
        }
    }

    fn add(&mut self, o: &IfTotals) {
        self.enqueued += o.enqueued;
        self.dequeued += o.dequeued;
        self.sojourn_sum_ns += o.sojourn_sum_ns;
        self.sojourn_samples += o.sojourn_samples;
        self.enqueue_events += o.enqueue_events;
        self.dequeue_events += o.dequeue_events;
    }
}

/// A transmit queue: (netns, ifindex, queue index), as `hq_if_key` has it.
type QueueKey = (u32, u32, u32);

/// One interface over one read: its growth summed over CPUs and transmit
/// queues, each queue's latest backlog and closed-epoch peaks folded over
/// CPUs, and the interval's longest sojourn.
#[derive(Debug, Default)]
struct IfFold {
    delta: IfTotals,
    queues: BTreeMap<u32, QueueFold>,
    sojourn_max_ns: u64,
}

/// One transmit queue's qdisc over one read, folded over CPUs.
#[derive(Debug, Default)]
struct QueueFold {
    /// The stamp (jiffies) of `backlog`; None before any CPU.
    latest: Option<u64>,
    /// (packets, bytes) after the latest event.
    backlog: (u64, u64),
    /// (packets, bytes): the closed epoch's peaks.
    peak: (u64, u64),
    /// The qdisc's own drop and sent counters (qdisc_counts.rs); None
    /// where the qdisc keeps per-CPU stats.
    counts: Option<QdiscCounts>,
}

/// One interface's peak rate in one direction over one interval (issue
/// 24): the busiest window of `window_us`, summed over its queues (with
/// several an upper bound, as the backlog peak: each may peak at another
/// moment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peak {
    pub bps: u64,
    pub pps: u64,
    pub window_us: u64,
}

/// An interface's peak rates: (tx, rx), each when measured.
pub type Peaks = (Option<Peak>, Option<Peak>);

/// Buckets a window is cut in at most (HQ_RATE_BUCKETS, hostq.h).
const RATE_BUCKETS: u64 = 16;

/// A bucket's (bytes, packets), packed in one word so that the kernel
/// counts both with one add (hq_rate's `frames`, hostq.h).
fn bucket_frames(word: u64) -> (u64, u64) {
    let shift = hq_rate_pack::HQ_RATE_PKTS_SHIFT.0;
    (word & ((1u64 << shift) - 1), word >> shift)
}

/// The peak-rate window (struct hq_rate, hostq.h): windows of
/// `WINDOW_BUCKETS` buckets of `bucket_ns`, so a window slides by an eighth
/// of itself; the kernel clocks packets in nanoseconds, so the window is
/// the one asked.
#[derive(Debug, Clone, Copy)]
struct PeakWindow {
    /// What was asked (`--peak-window`), in microseconds; 0: off.
    asked_us: u64,
}

/// Buckets a window is cut in (at most RATE_BUCKETS): the step by which the
/// windows slide. Half the ring, so the window in progress at a read never
/// needs a bucket the kernel already emptied.
const WINDOW_BUCKETS: u64 = RATE_BUCKETS / 2;

impl PeakWindow {
    /// A bucket's length, written to the programs (`peak_bucket_ns`); 0: off.
    fn bucket_ns(&self) -> u64 {
        self.asked_us * 1000 / WINDOW_BUCKETS
    }

    /// Bits and packets per second of a window of `bytes` and `pkts`.
    fn rate(&self, bytes: u64, pkts: u64) -> Option<Peak> {
        if self.asked_us == 0 {
            return None;
        }
        let secs = self.asked_us as f64 / 1e6;
        Some(Peak {
            bps: (bytes as f64 * 8.0 / secs).round() as u64,
            pps: (pkts as f64 / secs).round() as u64,
            window_us: self.asked_us,
        })
    }
}

/// One queue's busiest window of the closed `epoch`, (bytes, packets): the
/// peak the kernel folded, and the window in progress when it belongs to
/// `epoch`: user space's half of the epoch rule (hostq.bpf.c, rate_roll).
fn queue_peak(r: &hq_rate, epoch: u64) -> (u64, u64) {
    let slot = (epoch & 1) as usize;
    let mut peak = (0, 0);
    if r.peak_epoch[slot] == epoch {
        peak = (r.peak_bytes[slot], r.peak_pkts[slot]);
    }
    if r.cur != 0 && r.last_epoch == epoch {
        let n = RATE_BUCKETS as usize;
        let last = (0..WINDOW_BUCKETS).map(|i| (r.cur.wrapping_sub(i) as usize) % n);
        let (b, p) = last.fold((0, 0), |(b, p), i| {
            let (bytes, pkts) = bucket_frames(r.frames[i]);
            (b + bytes, p + pkts)
        });
        peak = (peak.0.max(b), peak.1.max(p));
    }
    peak
}

/// The attached host-queue probes. Dropping it detaches every program.
pub struct HostQueueProbes {
    skel: HostqSkel<'static>,
    /// Per (slot, CPU): whose it was at the previous read and its counters.
    prev_if: HashMap<(u32, usize), (QueueKey, IfTotals)>,
    /// Per health counter (`hq_health_counter`), the program's events the
    /// kernel counted elsewhere as of the last read: a program's events are
    /// its health counter plus these ([`Self::events`]). The qdisc
    /// programs count theirs in the slots only (hostq.h: their counters are
    /// unused), summed here from the slots' growth since attach; the peak
    /// programs keep runs in the rate slots until the next clock read
    /// (hostq.h, `unclocked_runs`), set here at each read.
    elsewhere: [u64; HQ_COUNTERS],
    prev_drops: HashMap<(u32, u32, u32), u64>,
    /// Per transmit queue, its qdisc's own counters at the previous read
    /// (qdisc_counts.rs).
    prev_qdisc_counts: HashMap<QueueKey, Counts>,
    /// The qdisc drops no drop event was counted for (qdisc_counts.rs).
    unseen_drops: UnseenDrops,
    reason_names: HashMap<u32, String>,
    /// Programs this kernel lacks or rejected.
    dropped: load::Dropped,
    /// The namespace the probes were loaded in: its interfaces are named.
    own_netns: u32,
    peak_window: PeakWindow,
    /// Per interface name, the last read's peak rates.
    peaks: HashMap<String, Peaks>,
    /// on_qdisc_dequeue is not attached: on_dev_xmit does its work
    /// (hostq.bpf.c, `dequeue_at_xmit`; [`dequeue_at_xmit`]).
    dequeue_at_xmit: bool,
    /// The host queue is observed ([`Parts::host_queue`]): else only
    /// on_dev_xmit runs, for the link-local senders, and no host-queue
    /// figure is reported.
    host_queue: bool,
    /// The link-local senders were asked for ([`Parts::linklocal`]).
    linklocal_asked: bool,
    /// The link-local senders' reader, when they are counted (asked for,
    /// and on_dev_xmit attached).
    linklocal: Option<LinkLocalReader>,
    /// The per-packet programs are paused ([`Self::pause_per_packet`]), and
    /// whether they were at any moment since the previous read: that
    /// interval's queue figures, peak rates and link-local senders are
    /// then not measured.
    paused: bool,
    paused_since_read: bool,
    /// The last read's interval was paused at some moment (not measured).
    last_unmeasured: bool,
    /// The queues with no event since a pause ([`StaleQueues`]).
    stale: StaleQueues,
}

/// The transmit queues that had no event since the per-packet programs were
/// paused: a queue's backlog reading is the one its latest event left, and
/// its qdisc's counters are read at its events, so until its first event
/// after the pause both are from before it.
#[derive(Debug, Default)]
struct StaleQueues {
    /// Per queue, the stamp of its latest event as of the last read.
    latest: HashMap<QueueKey, u64>,
    /// From a pause on, that stamp of each queue not heard from since.
    since_pause: HashMap<QueueKey, u64>,
}

/// A queue at a read, against the pause ([`StaleQueues::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QueueSince {
    /// Events since, or no pause: its figures stand.
    Current,
    /// No event since the pause: its backlog is taken as 0 (a queue holding
    /// packets has events, so this one drained unseen or was empty), and
    /// its counters grew by nothing seen.
    Silent,
    /// Its first events since the pause came in this read: its counters'
    /// growth spans the pause, a new baseline and not this interval's.
    Resumed,
}

impl StaleQueues {
    /// The programs are paused now: every queue known is stale until its
    /// next event.
    fn pause(&mut self) {
        self.since_pause = self.latest.clone();
    }

    /// A read's queue `key` whose latest event is stamped `latest`.
    fn settle(
        &mut self,
        key: QueueKey,
        latest: u64,
        seen: &mut HashMap<QueueKey, u64>,
    ) -> QueueSince {
        seen.insert(key, latest);
        match self.since_pause.get(&key) {
            None => QueueSince::Current,
            Some(&at) if at == latest => QueueSince::Silent,
            Some(_) => {
                self.since_pause.remove(&key);
                QueueSince::Resumed
            }
        }
    }

    /// The read is over: its queues' stamps, `seen`, are the latest (a
    /// queue whose slot went to another is forgotten).
    fn end_read(&mut self, seen: HashMap<QueueKey, u64>) {
        self.latest = seen;
    }
}

/// What the host-queue object is loaded for. Its transmit program,
/// on_dev_xmit, also counts the UDP sent to the link-local services
/// (bpf/linklocal.bpf.h), so that a packet passes no program of its own for
/// that (issue #47): the object is loaded when either part is asked for, and
/// each part is set in the programs before load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// The host queue: qdiscs, the stack's drops, peak rates.
    pub host_queue: bool,
    /// The UDP sent to the link-local services, by sending socket.
    pub linklocal: bool,
    /// The VPC resolver (base + 2), counted as DNS.
    pub vpc_dns: Option<Ipv4Addr>,
    /// The dequeue side counted at the driver's transmit, on_qdisc_dequeue
    /// not attached, where the kernel allows ([`dequeue_at_xmit`]): a packet
    /// through a qdisc passes two programs on transmit, not three (issue
    /// #47). The default. Both ways fall short of tc's count by the runs
    /// the kernel skips, for the same packets (docs/architecture.md, "Host
    /// queue"). false: on_qdisc_dequeue counts it, as on kernels before 6.2.
    pub dequeue_at_xmit: bool,
    /// The observer's namespace when every namespace is watched
    /// (--all-netns): the UDP a pod sends to the link-local services is then
    /// counted where it leaves through this namespace's interfaces,
    /// forwarded, for the socket that sent it in the pod
    /// (bpf/linklocal.bpf.h). None: counted where a socket hands it to a
    /// device only.
    pub linklocal_node_netns: Option<u32>,
}

impl Default for Parts {
    /// Nothing asked for, and the dequeue side at the driver's transmit
    /// wherever the host queue is.
    fn default() -> Self {
        Parts {
            host_queue: false,
            linklocal: false,
            vpc_dns: None,
            dequeue_at_xmit: true,
            linklocal_node_netns: None,
        }
    }
}

/// Entries of the `hq_health` array.
const HQ_COUNTERS: usize = hq_health_counter::HQ_H_MAX.0 as usize;

/// The per-packet programs that measure peak rates (`--peak-window`).
const PEAK_PROGRAMS: [&str; 2] = ["on_dev_xmit", "on_netif_receive"];

impl HostQueueProbes {
    /// Open, load and attach the qdisc and kfree_skb programs; peak rates
    /// over windows of `peak_window_us` (0: none). The host queue only.
    pub fn attach(filter: NetnsFilter, peak_window_us: u64) -> Result<Self> {
        let parts = Parts {
            host_queue: true,
            ..Parts::default()
        };
        Self::attach_parts(filter, peak_window_us, parts)
    }

    /// As [`Self::attach`], for `parts`: without the host queue only
    /// on_dev_xmit is loaded, for the link-local senders, with no peak
    /// rate (`peak_window_us` is then not used).
    pub fn attach_parts(filter: NetnsFilter, peak_window_us: u64, parts: Parts) -> Result<Self> {
        let peak_window_us = if parts.host_queue { peak_window_us } else { 0 };
        let peak_window = PeakWindow {
            asked_us: peak_window_us,
        };
        let btf = Btf::from_vmlinux().ok();
        let kernel_casts = btf.as_ref().is_some_and(has_rdonly_cast);
        let mut at_xmit = false;
        let fail = load::test_fail_programs();
        let counters: Vec<(&str, u32)> = PROGRAM_EVENTS.iter().map(|(n, c)| (*n, c.0)).collect();
        let (mut skel, dropped) =
            load::load_with_fallback("host-queue", HOSTQ_PROGRAMS, btf.as_ref(), |plan| {
                // As for the flow probes: the skeleton borrows its object
                // storage for its whole life, one observer per process.
                let storage: &'static mut MaybeUninit<OpenObject> =
                    Box::leak(Box::new(MaybeUninit::uninit()));
                let mut open = HostqSkelBuilder::default()
                    .open(storage)
                    .context("opening the host-queue BPF object")?;
                let rodata = open
                    .maps
                    .rodata_data
                    .as_deref_mut()
                    .context("host-queue BPF object has no .rodata")?;
                match filter {
                    NetnsFilter::Only(ino) => rodata.target_netns = ino,
                    NetnsFilter::All => rodata.all_netns = true,
                }
                rodata.test_reject = load::test_reject_mask(&fail, &counters);
                rodata.peaks_at_dequeue = plan.is_dropped("on_qdisc_enqueue");
                rodata.peak_bucket_ns = peak_window.bucket_ns();
                rodata.peak_subs = WINDOW_BUCKETS as u32;
                at_xmit = parts.host_queue
                    && parts.dequeue_at_xmit
                    && dequeue_at_xmit(kernel_casts, peak_window_us, |p| plan.is_dropped(p));
                rodata.dequeue_at_xmit = at_xmit;
                rodata.linklocal_on = parts.linklocal;
                rodata.vpc_dns_v4 = parts.vpc_dns.map_or(0, |a| u32::from_ne_bytes(a.octets()));
                if let Some(ino) = parts.linklocal_node_netns.filter(|_| parts.linklocal) {
                    rodata.linklocal_forwarded = true;
                    rodata.ll_node_netns = ino;
                }
                plan.apply(open.open_object_mut());
                if at_xmit {
                    // One program fewer a packet (issue #47): on_dev_xmit
                    // counts what leaves the qdisc. Not loaded by choice.
                    for mut prog in open.open_object_mut().progs_mut() {
                        if prog.name() == "on_qdisc_dequeue" {
                            prog.set_autoload(false);
                        }
                    }
                }
                for mut prog in open.open_object_mut().progs_mut() {
                    let name = prog.name().to_string_lossy().into_owned();
                    // Peaks off: the two per-packet programs would run on
                    // every packet for nothing (on_dev_xmit kept for the
                    // link-local senders when they are counted). Without
                    // the host queue, only on_dev_xmit. Not loaded by
                    // choice, so not reported lost either.
                    let wanted = if name == "on_dev_xmit" {
                        parts.linklocal || (parts.host_queue && peak_window_us != 0)
                    } else if PEAK_PROGRAMS.contains(&name.as_str()) {
                        parts.host_queue && peak_window_us != 0
                    } else {
                        parts.host_queue
                    };
                    if !wanted {
                        prog.set_autoload(false);
                    }
                }
                Ok(open.load()?)
            })?;
        skel.attach()
            .context("attaching the host-queue programs to qdisc and kfree_skb tracepoints")?;
        let linklocal = (parts.linklocal && !dropped.contains_key("on_dev_xmit"))
            .then(LinkLocalReader::default);
        Ok(HostQueueProbes {
            skel,
            prev_if: HashMap::new(),
            elsewhere: [0; HQ_COUNTERS],
            prev_drops: HashMap::new(),
            prev_qdisc_counts: HashMap::new(),
            unseen_drops: UnseenDrops::default(),
            reason_names: drop_reason_names().unwrap_or_default(),
            dropped,
            own_netns: crate::collect::netns::own().unwrap_or(0),
            peak_window,
            peaks: HashMap::new(),
            dequeue_at_xmit: at_xmit,
            host_queue: parts.host_queue,
            linklocal_asked: parts.linklocal,
            linklocal,
            paused: false,
            paused_since_read: false,
            last_unmeasured: false,
            stale: StaleQueues::default(),
        })
    }

    /// Pauses the per-packet programs (`paused`), or runs them again: a
    /// paused program is detached, so a packet passes no trampoline of
    /// ours (issue #47: near the floor, the hooks a packet passes are the
    /// cost); on_dev_xmit, kept for the link-local senders when they are
    /// counted, only skips its host-queue work (`hq_paused`). The maps
    /// stay: a queue's slot and peak ring carry on as after a quiet spell
    /// (hostq.bpf.c, rate_roll), and the intervals a pause touched report
    /// no queue figures and no peaks ([`Self::read`]).
    pub fn pause_per_packet(&mut self, paused: bool) -> Result<()> {
        if paused == self.paused || !self.host_queue {
            return Ok(());
        }
        if paused {
            self.paused_since_read = true;
            self.stale.pause();
            self.set_hq_paused(true)?;
        }
        let links = &mut self.skel.links;
        let progs = &self.skel.progs;
        // The programs that run per packet (on_kfree_skb runs per drop and
        // stays). on_dev_xmit goes too when it counts the link-local
        // senders: their interval is then not measured either (the
        // collector leaves its sample out), and a rise of
        // linklocal_allowance_exceeded runs them again.
        let per_packet = [
            (
                "on_qdisc_enqueue",
                &mut links.on_qdisc_enqueue,
                &progs.on_qdisc_enqueue,
            ),
            (
                "on_qdisc_dequeue",
                &mut links.on_qdisc_dequeue,
                &progs.on_qdisc_dequeue,
            ),
            ("on_dev_xmit", &mut links.on_dev_xmit, &progs.on_dev_xmit),
            (
                "on_netif_receive",
                &mut links.on_netif_receive,
                &progs.on_netif_receive,
            ),
        ];
        for (name, link, prog) in per_packet {
            if paused {
                // Dropping the link detaches the program.
                *link = None;
            } else if link.is_none() && prog.autoload() && !self.dropped.contains_key(name) {
                *link = Some(
                    prog.attach()
                        .with_context(|| format!("attaching {name} again after a pause"))?,
                );
            }
        }
        if !paused {
            self.set_hq_paused(false)?;
            // Run again right after the read that closed the paused
            // interval (the collector decides then): the next interval is
            // measured, but for the packets of the milliseconds between.
            self.paused_since_read = false;
        }
        self.paused = paused;
        Ok(())
    }

    /// The per-packet programs ran through the interval the last read
    /// closed: its queue figures, peak rates and link-local senders are
    /// measured.
    pub fn measured(&self) -> bool {
        !self.last_unmeasured
    }

    fn set_hq_paused(&mut self, paused: bool) -> Result<()> {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref_mut()
            .context("host-queue BPF object has no .bss")?;
        let slot: *mut u32 = &mut bss.hq_paused;
        // SAFETY: as in `close_epoch`: the mmapped .bss map, read by the
        // programs concurrently.
        unsafe { std::ptr::write_volatile(slot, u32::from(paused)) };
        Ok(())
    }

    /// The UDP sent to the link-local services since the previous read, by
    /// sending socket; None when it is not counted.
    pub(crate) fn read_linklocal(&mut self) -> Option<Result<LinkLocalRead>> {
        let key = ll_health_counter::LL_H_MAP_FULL.0.to_ne_bytes();
        let full = self
            .skel
            .maps
            .ll_health
            .lookup_percpu(&key, MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default();
        let full = percpu::sum_u64(full.iter().map(Vec::as_slice));
        let reader = self.linklocal.as_mut()?;
        Some(reader.read(&self.skel.maps.ll_senders, full))
    }

    /// Whether on_dev_xmit does on_qdisc_dequeue's work (which is then not
    /// attached): see [`dequeue_at_xmit`].
    pub fn dequeue_at_xmit(&self) -> bool {
        self.dequeue_at_xmit
    }

    /// Per interface name, the interval since the previous read (the first
    /// read: since attach). Names come from `names` (the collector's cache,
    /// looked up again each `interval`); interfaces of other namespaces
    /// (with `NetnsFilter::All`) are named `netns:<inode>:if<index>`.
    pub fn read(
        &mut self,
        names: &mut IfIndexNames,
        interval: u64,
    ) -> Result<HashMap<String, HostQueueSample>> {
        if !self.host_queue {
            return Ok(HashMap::new());
        }
        let epoch = self.close_epoch()?;
        // Paused at any moment since the previous read: the interval's
        // queue figures and peaks are not measured.
        let unmeasured = self.paused_since_read;
        self.paused_since_read = self.paused;
        self.last_unmeasured = unmeasured;
        let mut out: HashMap<String, HostQueueSample> = HashMap::new();

        // The per-CPU slot array (hostq.h): each CPU's copy of a slot names
        // its transmit queue; an interface's figures are folded over the
        // CPUs and queues whose copies name it.
        let map = &self.skel.maps.if_stats;
        let mut folds: HashMap<(u32, u32), IfFold> = HashMap::new();
        // Interfaces whose qdiscs count their own drops: (interface, name,
        // drops), checked against the drop events below.
        let mut counted_by_qdisc = Vec::new();
        // In one batch (256 lookups an interval before), else slot by slot.
        let prev_if = &mut self.prev_if;
        percpu::each_slot(map, "the host-queue interface slots", |slot, per_cpu| {
            for (cpu, bytes) in per_cpu.iter().enumerate() {
                let Some(c) = read_record::<hq_if_stats>(bytes) else {
                    continue;
                };
                if c.key.ifindex == 0 {
                    continue; // never used on this CPU
                }
                let key = (c.key.netns, c.key.ifindex, c.key.txq);
                let now = IfTotals::of(&c);
                let delta = growth(prev_if.insert((slot, cpu), (key, now)), key, &now);
                let interface = (c.key.netns, c.key.ifindex);
                fold_cpu(folds.entry(interface).or_default(), &c, &delta, epoch);
            }
            Ok(())
        })?;
        let peaks = self.read_peaks(epoch)?;
        self.peaks.clear();
        for ((netns, ifindex), peak) in peaks.into_iter().filter(|_| !unmeasured) {
            let name = if_name(names, self.own_netns, interval, netns, ifindex);
            self.peaks.insert(name, peak);
        }
        let mut seen = HashMap::new();
        for ((netns, ifindex), mut f) in folds {
            self.elsewhere[hq_health_counter::HQ_H_ENQUEUE_EVENTS.0 as usize] +=
                f.delta.enqueue_events;
            self.elsewhere[hq_health_counter::HQ_H_DEQUEUE_EVENTS.0 as usize] +=
                f.delta.dequeue_events;
            let name = if_name(names, self.own_netns, interval, netns, ifindex);
            let spanning = self.settle_stale(netns, ifindex, &mut f, &mut seen);
            let counts = self.qdisc_counts(netns, ifindex, &f, &spanning);
            if unmeasured {
                out.insert(name, HostQueueSample::default());
                continue;
            }
            let mut sample = finish(f);
            if let Some([drops, sent]) = counts {
                sample.qdisc_drops = Some(drops);
                sample.qdisc_sent = Some(sent);
                counted_by_qdisc.push(((netns, ifindex), name.clone(), drops));
            }
            out.insert(name, sample);
        }
        self.stale.end_read(seen);

        let map = &self.skel.maps.drops;
        for key_bytes in map.keys() {
            let Some(key) = read_record::<hq_drop_key>(&key_bytes) else {
                continue;
            };
            let per_cpu = map
                .lookup_percpu(&key_bytes, MapFlags::ANY)
                .context("reading the host-queue drop counters")?
                .unwrap_or_default();
            let total = percpu::sum_u64(per_cpu.iter().map(Vec::as_slice));
            let prev = self
                .prev_drops
                .insert((key.netns, key.ifindex, key.reason), total)
                .unwrap_or(0);
            let delta = total.saturating_sub(prev);
            let name = if key.ifindex == 0 {
                NO_DEVICE.to_string()
            } else {
                if_name(names, self.own_netns, interval, key.netns, key.ifindex)
            };
            let sample = out.entry(name).or_default();
            if delta > 0 {
                *sample
                    .drops
                    .entry(self.reason_name(key.reason))
                    .or_default() += delta;
            }
        }
        for (interface, name, qdisc) in counted_by_qdisc {
            let Some(sample) = out.get_mut(&name) else {
                continue;
            };
            let events = sample
                .drops
                .iter()
                .filter(|(reason, _)| is_qdisc_drop_reason(reason))
                .map(|(_, n)| n)
                .sum();
            sample.unseen_drops = self.unseen_drops.note(interface, qdisc, events);
        }
        if unmeasured {
            for sample in out.values_mut() {
                sample.paused = true;
            }
        }
        Ok(out)
    }

    /// The interface's queues that had no event since a pause of the
    /// per-packet programs (their backlog is taken as 0: a queue holding
    /// packets has events, so one without any since the pause drained
    /// unseen or was empty), and those whose first event since came in this
    /// read: the growth of their qdisc's counters spans the pause.
    fn settle_stale(
        &mut self,
        netns: u32,
        ifindex: u32,
        f: &mut IfFold,
        seen: &mut HashMap<QueueKey, u64>,
    ) -> Vec<u32> {
        let mut spanning = Vec::new();
        for (txq, q) in f.queues.iter_mut() {
            let Some(latest) = q.latest else {
                continue;
            };
            match self.stale.settle((netns, ifindex, *txq), latest, seen) {
                QueueSince::Current => continue,
                QueueSince::Silent => q.backlog = (0, 0),
                QueueSince::Resumed => {}
            }
            spanning.push(*txq);
        }
        spanning
    }

    /// The interface's drops and sent packets by its qdiscs' own counters
    /// this interval, summed over its transmit queues whose qdisc keeps
    /// them (None: none does, or no qdisc event came); the queues in
    /// `spanning` (see [`Self::settle_stale`]) give a new baseline only.
    fn qdisc_counts(
        &mut self,
        netns: u32,
        ifindex: u32,
        f: &IfFold,
        spanning: &[u32],
    ) -> Option<Counts> {
        let mut total: Option<Counts> = None;
        for (txq, q) in &f.queues {
            let Some(c) = q.counts else {
                continue;
            };
            let key = (netns, ifindex, *txq);
            let prev = self.prev_qdisc_counts.insert(key, c.last());
            if spanning.contains(txq) {
                continue;
            }
            let grew = c.since(prev);
            let t = total.get_or_insert([0, 0]);
            t[0] += grew[0];
            t[1] += grew[1];
        }
        total
    }

    /// The peak rates of the last read, by interface name: the busiest
    /// window of the interval that read closed (none for an interface
    /// without a qdisc, or before the window is known).
    pub fn peaks(&self) -> &HashMap<String, Peaks> {
        &self.peaks
    }

    /// Per interface, the closed `epoch`'s busiest window per direction
    /// summed over its queues.
    fn read_peaks(&mut self, epoch: u64) -> Result<HashMap<(u32, u32), Peaks>> {
        let mut sums: HashMap<(u32, u32, u32), (u64, u64)> = HashMap::new();
        let mut pending = (0, 0);
        // In one batch (512 lookups an interval before), else slot by slot.
        percpu::each_slot(
            &self.skel.maps.rates,
            "the host-queue peak rates",
            |_, values| {
                let Some(r) = values.first().and_then(|v| read_record::<hq_rate>(v)) else {
                    return Ok(());
                };
                if r.key.ifindex == 0 {
                    return Ok(());
                }
                if r.key.dir == hq_dir::HQ_DIR_RX.0 {
                    pending.1 += r.unclocked_runs;
                } else {
                    pending.0 += r.unclocked_runs;
                }
                let (b, p) = queue_peak(&r, epoch);
                let sum = sums
                    .entry((r.key.netns, r.key.ifindex, r.key.dir))
                    .or_default();
                sum.0 += b;
                sum.1 += p;
                Ok(())
            },
        )?;
        self.elsewhere[hq_health_counter::HQ_H_XMIT_EVENTS.0 as usize] = pending.0;
        self.elsewhere[hq_health_counter::HQ_H_RECV_EVENTS.0 as usize] = pending.1;
        let mut out: HashMap<(u32, u32), Peaks> = HashMap::new();
        for ((netns, ifindex, dir), (b, p)) in sums {
            let Some(rate) = self.peak_window.rate(b, p) else {
                continue;
            };
            let e = out.entry((netns, ifindex)).or_default();
            if dir == hq_dir::HQ_DIR_RX.0 {
                e.1 = Some(rate);
            } else {
                e.0 = Some(rate);
            }
        }
        Ok(out)
    }

    /// Bumps the peak epoch and returns the one just closed (see hostq.h).
    fn close_epoch(&mut self) -> Result<u64> {
        let data = self
            .skel
            .maps
            .data_data
            .as_deref_mut()
            .context("host-queue BPF object has no .data")?;
        let slot: *mut u64 = &mut data.hq_epoch;
        // SAFETY: `slot` points into the mmapped .data map, alive as long as
        // the skeleton; volatile because the BPF programs read it concurrently.
        unsafe {
            let epoch = std::ptr::read_volatile(slot);
            std::ptr::write_volatile(slot, epoch + 1);
            Ok(epoch)
        }
    }

    /// The kernel's name of a drop reason, `SKB_DROP_REASON_` stripped.
    fn reason_name(&self, reason: u32) -> String {
        match self.reason_names.get(&reason) {
            Some(n) => n.clone(),
            // Subsystem reasons (high 16 bits) and ones this kernel's BTF
            // does not name are still counted, by number.
            None => format!("reason_{reason:#x}"),
        }
    }

    /// The `hq_health` array summed over CPUs.
    fn counter(&self, c: hq_health_counter) -> u64 {
        percpu::counter(&self.skel.maps.hq_health, c.0).unwrap_or(0)
    }

    /// A program's events since attach: its health counter and what the
    /// kernel counted elsewhere (`elsewhere`).
    fn events(&self, c: hq_health_counter) -> u64 {
        self.counter(c) + self.elsewhere.get(c.0 as usize).copied().unwrap_or(0)
    }

    /// Failures of the programs themselves, cumulative since attach.
    pub fn health(&self) -> HostQueueHealth {
        HostQueueHealth {
            untracked_interfaces: self.counter(hq_health_counter::HQ_H_IF_UNTRACKED),
            untracked_drops: self.counter(hq_health_counter::HQ_H_DROP_UNTRACKED),
            sojourn_samples_lost: self.counter(hq_health_counter::HQ_H_SOJOURN_LOST),
            bulk_dequeues_truncated: self.counter(hq_health_counter::HQ_H_BULK_TRUNCATED),
            unseen_drops: self.unseen_drops.total(),
        }
    }

    /// Per-program health: observed events, recursion misses and, with
    /// `kernel.bpf_stats_enabled`, run count and time.
    pub fn program_health(&self) -> Vec<ProgramHealth> {
        PROGRAM_EVENTS
            .iter()
            // Without the host queue, on_dev_xmit alone was asked for.
            .filter(|(name, _)| self.host_queue || *name == "on_dev_xmit")
            .map(|(name, counter)| {
                let events = self.events(*counter);
                if self.dequeue_at_xmit && *name == "on_qdisc_dequeue" {
                    return ProgramHealth {
                        name: name.trim_start_matches("on_").to_string(),
                        attached: false,
                        not_attached: Some(
                            "not needed: dev_xmit counts what leaves each qdisc \
                             (one program fewer a packet)"
                                .to_string(),
                        ),
                        done_by: Some("dev_xmit".to_string()),
                        ..Default::default()
                    };
                }
                if self.peak_window.asked_us == 0
                    && PEAK_PROGRAMS.contains(name)
                    && !(*name == "on_dev_xmit" && self.linklocal_asked)
                {
                    return ProgramHealth {
                        name: name.trim_start_matches("on_").to_string(),
                        attached: false,
                        not_attached: Some("turned off (--peak-window 0)".to_string()),
                        lost: Some("peak rates (microbursts)".to_string()),
                        ..Default::default()
                    };
                }
                health_of(
                    self.skel.object(),
                    HOSTQ_PROGRAMS,
                    &self.dropped,
                    name,
                    events,
                )
            })
            .collect()
    }

    /// Programs this kernel lacks or rejected, with why (of those asked
    /// for).
    pub(crate) fn not_loaded(&self) -> Vec<(&'static ProgramSpec, &NotLoaded)> {
        let mut out = not_loaded(HOSTQ_PROGRAMS, &self.dropped);
        out.retain(|(spec, _)| self.host_queue || spec.name == "on_dev_xmit");
        out
    }
}

/// Whether on_dev_xmit takes over on_qdisc_dequeue's work (hostq.bpf.c,
/// `dequeue_at_xmit`, issue #47: a packet through a qdisc passes two of the
/// programs, not three, and a qdisc's run that finds it empty passes none):
/// the kernel lets a program read the packet's transmit queue plainly
/// (`kernel_casts`: bpf_rdonly_cast, 6.2), peak rates are on (else
/// on_dev_xmit is not loaded), and neither on_dev_xmit nor on_qdisc_dequeue
/// was dropped (`dropped`: the one left does what it can).
fn dequeue_at_xmit(
    kernel_casts: bool,
    peak_window_us: u64,
    dropped: impl Fn(&str) -> bool,
) -> bool {
    kernel_casts && peak_window_us != 0 && !dropped("on_dev_xmit") && !dropped("on_qdisc_dequeue")
}

/// Whether the kernel has the bpf_rdonly_cast kfunc (core_fixes.bpf.h,
/// has_rdonly_cast): what the programs' own test resolves at load.
fn has_rdonly_cast(btf: &Btf<'_>) -> bool {
    btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>("bpf_rdonly_cast")
        .is_some()
}

/// A CPU's slot's growth since its previous read, `prev` (holder, counters):
/// when the slot changed hands since (hostq.h: an idle holder is evicted),
/// the newcomer's counters started at 0 and all of them are growth.
fn growth(prev: Option<(QueueKey, IfTotals)>, key: QueueKey, now: &IfTotals) -> IfTotals {
    match prev {
        Some((k, t)) if k == key => now.since(&t),
        _ => *now,
    }
}

/// Adds one CPU's slot of a transmit queue to its interface's fold: the
/// growth `delta` since that slot's previous read adds up; per queue, the
/// closed epoch's peaks take the max over CPUs and the current backlog is
/// the one the most recent event saw. Events are stamped in jiffies
/// (hostq.h: no clock read per packet), so CPUs can tie; of those the
/// smallest backlog is taken: a queue that just drained reads 0, as `tc`
/// says, whichever CPU's enqueue came just before the dequeue that emptied
/// it.
fn fold_cpu(f: &mut IfFold, c: &hq_if_stats, delta: &IfTotals, epoch: u64) {
    let slot = (epoch & 1) as usize;
    f.delta.add(delta);
    let q = f.queues.entry(c.key.txq).or_default();
    let backlog = (u64::from(c.last_qlen), u64::from(c.last_backlog_bytes));
    let take = match q.latest {
        None => true,
        Some(t) => c.last_jiffies > t || (c.last_jiffies == t && backlog < q.backlog),
    };
    if take {
        q.latest = Some(c.last_jiffies);
        q.backlog = backlog;
    }
    q.counts = QdiscCounts::fold(q.counts, c);
    if c.peak_epoch[slot] == epoch {
        q.peak.0 = q.peak.0.max(c.peak_qlen[slot].into());
        q.peak.1 = q.peak.1.max(c.peak_backlog_bytes[slot].into());
        f.sojourn_max_ns = f.sojourn_max_ns.max(c.sojourn_max_ns[slot]);
    }
}

/// The interface's sample from its fold: counts, the backlog summed over its
/// transmit queues (as `tc -s qdisc` sums mq's children), and the sojourn of
/// the packets sampled in the interval (none sampled: no figure). The peak
/// is the sum of each queue's peak: with one queue the interface's peak,
/// with several an upper bound of it (each queue's peak may come at another
/// moment of the interval).
fn finish(f: IfFold) -> HostQueueSample {
    let mut sample = HostQueueSample::default();
    for q in f.queues.values() {
        sample.backlog_packets += q.backlog.0;
        sample.backlog_bytes += q.backlog.1;
        sample.peak_backlog_packets += q.peak.0;
        sample.peak_backlog_bytes += q.peak.1;
    }
    sample.enqueued = f.delta.enqueued;
    sample.dequeued = f.delta.dequeued;
    let d = &f.delta;
    sample.sojourn_mean_us = d
        .sojourn_sum_ns
        .checked_div(d.sojourn_samples)
        .map(|ns| ns / 1000);
    sample.sojourn_max_us = (d.sojourn_samples > 0).then_some(f.sojourn_max_ns / 1000);
    sample
}

/// The interface's name for the report, asked of the namespace the probes
/// were loaded in (src/collect/ifindex.rs says why not /sys) and looked up
/// again at each read; an interface of another namespace is named by
/// namespace and index.
fn if_name(
    names: &mut IfIndexNames,
    own_netns: u32,
    read: u64,
    netns: u32,
    ifindex: u32,
) -> String {
    if netns != own_netns {
        return format!("netns:{netns}:if{ifindex}");
    }
    names
        .name(ifindex, read)
        .unwrap_or_else(|| format!("if{ifindex}")) // gone since the event
}

/// `enum skb_drop_reason` of the running kernel: value -> name without the
/// `SKB_DROP_REASON_` (or `SKB_`) prefix. The numbers differ between kernels.
pub(crate) fn drop_reason_names() -> Result<HashMap<u32, String>> {
    let btf = Btf::from_vmlinux().context("reading the kernel BTF")?;
    let en: Enum<'_> = btf
        .type_by_name("skb_drop_reason")
        .context("the kernel BTF has no enum skb_drop_reason")?;
    let mut names = HashMap::new();
    for m in en.iter() {
        let Some(name) = m.name.and_then(|n| n.to_str()) else {
            continue;
        };
        let short = name
            .strip_prefix("SKB_DROP_REASON_")
            .or_else(|| name.strip_prefix("SKB_"))
            .unwrap_or(name);
        names.insert(m.value as u32, short.to_string());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_queue_silent_since_a_pause_reads_no_backlog_and_its_first_events_give_a_baseline() {
        use super::{QueueSince, StaleQueues};
        use std::collections::HashMap;
        let (a, b) = ((1, 2, 0), (1, 2, 1));
        let mut q = StaleQueues::default();
        let read = |q: &mut StaleQueues, stamps: &[((u32, u32, u32), u64)]| {
            let mut seen = HashMap::new();
            let out: Vec<QueueSince> = stamps
                .iter()
                .map(|(k, t)| q.settle(*k, *t, &mut seen))
                .collect();
            q.end_read(seen);
            out
        };
        // No pause: current.
        assert_eq!(read(&mut q, &[(a, 100), (b, 90)]), [QueueSince::Current; 2]);
        q.pause();
        // Paused: no event anywhere.
        assert_eq!(read(&mut q, &[(a, 100), (b, 90)]), [QueueSince::Silent; 2]);
        // Running again: a has events, b still none.
        assert_eq!(
            read(&mut q, &[(a, 150), (b, 90)]),
            [QueueSince::Resumed, QueueSince::Silent]
        );
        assert_eq!(
            read(&mut q, &[(a, 160), (b, 170)]),
            [QueueSince::Current, QueueSince::Resumed]
        );
        assert_eq!(
            read(&mut q, &[(a, 170), (b, 180)]),
            [QueueSince::Current; 2]
        );
        // A queue first seen after the pause is current.
        q.pause();
        assert_eq!(read(&mut q, &[((1, 3, 0), 5)]), [QueueSince::Current]);
    }

    use super::*;

    #[test]
    fn peaks_come_from_the_closed_epoch_only() {
        let mut a = hq_if_stats {
            enqueued: 10,
            dequeued: 8,
            last_jiffies: 5,
            last_qlen: 2,
            ..Default::default()
        };
        a.peak_epoch = [4, 3];
        a.peak_qlen = [7, 99];
        let mut b = hq_if_stats {
            enqueued: 1,
            dequeued: 3,
            last_jiffies: 9,
            last_qlen: 0,
            ..Default::default()
        };
        b.peak_epoch = [4, 0];
        b.peak_qlen = [9, 50];
        let mut f = IfFold::default();
        for c in [&a, &b] {
            fold_cpu(&mut f, c, &IfTotals::of(c), 4);
        }
        let s = finish(f);
        assert_eq!((s.enqueued, s.dequeued), (11, 11));
        assert_eq!(s.peak_backlog_packets, 9);
        assert_eq!(s.backlog_packets, 0, "latest event wins");
        assert_eq!(s.sojourn_max_us, None, "no sample, no sojourn");
    }

    #[test]
    fn cpus_tied_within_a_jiffy_give_the_smallest_backlog() {
        let at = |jiffies, qlen, bytes| hq_if_stats {
            last_jiffies: jiffies,
            last_qlen: qlen,
            last_backlog_bytes: bytes,
            ..Default::default()
        };
        // CPU 0 enqueued (3 queued), CPU 1 dequeued to empty, same jiffy:
        // the queue is empty, whichever CPU is read first.
        for order in [[at(7, 3, 300), at(7, 0, 0)], [at(7, 0, 0), at(7, 3, 300)]] {
            let mut f = IfFold::default();
            for c in &order {
                fold_cpu(&mut f, c, &IfTotals::default(), 1);
            }
            let s = finish(f);
            assert_eq!((s.backlog_packets, s.backlog_bytes), (0, 0));
        }
        // A later jiffy wins even with a larger backlog.
        let mut f = IfFold::default();
        for c in [at(7, 0, 0), at(8, 5, 500)] {
            fold_cpu(&mut f, &c, &IfTotals::default(), 1);
        }
        assert_eq!(finish(f).backlog_packets, 5);
    }

    #[test]
    fn the_backlog_and_peaks_of_several_transmit_queues_add_up() {
        let queue = |txq, jiffies, qlen, peak| {
            let mut c = hq_if_stats {
                last_jiffies: jiffies,
                last_qlen: qlen,
                last_backlog_bytes: qlen * 100,
                ..Default::default()
            };
            c.key.txq = txq;
            c.peak_epoch = [2, 0];
            c.peak_qlen = [peak, 0];
            c
        };
        // Queue 0 seen by two CPUs (the later one counts), queue 1 by one:
        // mq's backlog is its children's sum, and so is ours.
        let mut f = IfFold::default();
        for c in [
            queue(0, 5, 40, 60),
            queue(0, 6, 30, 50),
            queue(1, 3, 25, 70),
        ] {
            fold_cpu(&mut f, &c, &IfTotals::default(), 2);
        }
        let s = finish(f);
        assert_eq!((s.backlog_packets, s.backlog_bytes), (55, 5500));
        assert_eq!(s.peak_backlog_packets, 60 + 70);
    }

    #[test]
    fn a_queue_peak_is_the_closed_epochs_or_the_window_in_progress() {
        // Bucket 33 in progress, its latest packet in epoch 6.
        let mut r = hq_rate {
            cur: 33,
            last_epoch: 6,
            ..Default::default()
        };
        // Buckets 26 to 33 make the window in progress; 25 is older.
        let packed = |bytes: u64, pkts: u64| bytes | pkts << 40;
        r.frames[25 % 16] = packed(1_000, 10);
        r.frames[26 % 16] = packed(100, 0);
        r.frames[32 % 16] = packed(200, 0);
        r.frames[33 % 16] = packed(300, 40);
        r.peak_epoch = [6, 5];
        r.peak_bytes = [550, 900];
        r.peak_pkts = [9, 90];
        // Epoch 6 closed with packets in the bucket in progress: the window
        // of 8 buckets ending at it (600 bytes); each figure is its own
        // busiest window.
        assert_eq!(queue_peak(&r, 6), (600, 40));
        // Epoch 5: its folded peak; the window in progress is epoch 6's.
        assert_eq!(queue_peak(&r, 5), (900, 90));
        // The bucket's latest packet came in epoch 5 (a quiet queue since):
        // epoch 6 has its folded peak only.
        r.last_epoch = 5;
        assert_eq!(queue_peak(&r, 6), (550, 9));
        // Epoch 8 (slot 0 holds 6's): nothing.
        assert_eq!(queue_peak(&r, 8), (0, 0));
    }

    #[test]
    fn peak_windows_are_the_window_asked_cut_in_eight() {
        let w = PeakWindow { asked_us: 10_000 };
        assert_eq!(w.bucket_ns(), 1_250_000);
        let r = w.rate(12_500, 10).unwrap();
        assert_eq!((r.bps, r.pps, r.window_us), (10_000_000, 1000, 10_000));
        let w = PeakWindow { asked_us: 1_000 };
        assert_eq!(w.bucket_ns(), 125_000);
        let off = PeakWindow { asked_us: 0 };
        assert_eq!((off.bucket_ns(), off.rate(1, 1)), (0, None));
    }

    #[test]
    fn a_slot_taken_over_starts_from_zero() {
        let old = IfTotals {
            enqueued: 500,
            sojourn_samples: 3,
            ..Default::default()
        };
        let newcomer = IfTotals {
            enqueued: 7,
            sojourn_samples: 1,
            ..Default::default()
        };
        let more = IfTotals {
            enqueued: 510,
            ..old
        };
        // Same holder: growth. Another holder before: all the newcomer's
        // counters, not a difference saturated to 0. First read: all.
        assert_eq!(
            growth(Some(((1, 2, 0), old)), (1, 2, 0), &more).enqueued,
            10
        );
        assert_eq!(
            growth(Some(((1, 2, 0), old)), (1, 3, 0), &newcomer),
            newcomer
        );
        assert_eq!(
            growth(Some(((1, 2, 0), old)), (1, 2, 1), &newcomer),
            newcomer
        );
        assert_eq!(growth(None, (1, 3, 0), &newcomer), newcomer);
    }
}
