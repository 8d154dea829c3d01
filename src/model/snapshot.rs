//! The interval snapshot: plain data, the same type live and in a recording.
//!
//! Everything the analysis needs is in here, so a recording can be re-judged
//! without the machine it came from. Counters come twice: `totals` as read at
//! the end of the interval and `delta` over the interval. Deltas are computed
//! once, at collection, by the reader of each source (the flow table for
//! flows, the allowance tracker for the ENA counters, src/collect/ifstats.rs
//! for link counters, the host-queue probes for theirs), never by a consumer,
//! so every consumer agrees on them.
//!
//! The dependency on src/model/workload.rs runs one way, from here: a flow's
//! owner holds a `Workload`, and `FlowSample::passes` applies a
//! `WorkloadFilter` to it. workload.rs is text about cgroup paths and never
//! names a snapshot type.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::model::fold::Folded;
use crate::model::workload::{Workload, WorkloadFilter};

/// One interval of observation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// 0 for the first interval after start, then +1.
    pub seq: u64,
    /// CLOCK_MONOTONIC at the end of the interval, in ns (the BPF clock).
    pub mono_ns: u64,
    /// Wall clock at the end of the interval, in ms since the Unix epoch.
    pub unix_ms: u64,
    /// Length of this interval in ns, as measured (not as asked).
    pub interval_ns: u64,
    pub interfaces: Vec<InterfaceSample>,
    /// The flows that moved lately: had events in the last intervals, are
    /// busy (data in flight or unsent, not in the Open congestion state, not
    /// established), opened or closed. Idle flows are counted in
    /// `idle_flows` instead (docs/architecture.md, "Work proportional to
    /// what moved"): they have no growth to show.
    #[serde(serialize_with = "crate::model::flow_json::serialize_flows")]
    pub flows: Vec<FlowSample>,
    /// Open flows tracked but not listed in `flows` because they did not
    /// move lately, whatever their workload (`--workload` filters `flows`
    /// only). 0 in recordings before format 1.6, which listed every flow.
    #[serde(default)]
    pub idle_flows: u64,
    /// Flow events of the interval, in kernel order.
    #[serde(default)]
    pub events: Vec<FlowEvent>,
    pub health: Health,
    /// IPv4 fragments the observer's network namespace created in the
    /// interval (`nstat IpFragCreates`); None when /proc/net/snmp could not
    /// be read (counted in `health.counter_read_failures`), in the first
    /// interval's baseline, and in recordings before format 1.4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fragments_created: Option<u64>,
    /// Flows and events past the interval's listing limits, summed and
    /// counted (src/model/fold.rs). Absent when nothing was folded.
    #[serde(default, skip_serializing_if = "Folded::is_empty")]
    pub folded: Folded,
    /// UDP sockets of the observed namespace that took a local port in the
    /// interval, by owner (src/model/udpopen.rs): the new UDP flows the
    /// connection tracking allowance counts. Absent when not measured (the
    /// program not attached, recordings before format 1.16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_openers: Option<super::udpopen::SocketOpenSample>,
    /// ICMP sockets (ping's datagram or raw sockets) made in the observed
    /// namespace in the interval, by owner: the new ICMP echo flows the
    /// allowance counts. Absent when not measured (the program not
    /// attached, recordings before format 1.18).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_openers: Option<super::udpopen::SocketOpenSample>,
}

impl Snapshot {
    pub fn interval_secs(&self) -> f64 {
        self.interval_ns as f64 / 1e9
    }

    /// An interval with nothing in it, for unit tests to fill.
    #[cfg(test)]
    pub(crate) fn example(seq: u64) -> Self {
        Snapshot {
            seq,
            mono_ns: (seq + 1) * 1_000_000_000,
            unix_ms: 0,
            interval_ns: 1_000_000_000,
            interfaces: Vec::new(),
            flows: Vec::new(),
            idle_flows: 0,
            events: Vec::new(),
            health: Health::default(),
            fragments_created: None,
            folded: Folded::default(),
            udp_openers: None,
            icmp_openers: None,
        }
    }
}

/// `/sys/class/net/<if>/statistics` counters we use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkCounters {
    pub tx_packets: u64,
    pub rx_packets: u64,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub tx_dropped: u64,
    pub rx_dropped: u64,
    pub tx_errors: u64,
    pub rx_errors: u64,
}

/// One network interface of the observed namespace over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSample {
    pub name: String,
    /// Kernel driver (`/sys/class/net/<if>/device/driver`, or the link kind
    /// for virtual devices such as `veth`); `None` when unknown.
    pub driver: Option<String>,
    pub totals: LinkCounters,
    pub delta: LinkCounters,
    /// The interface's TSO/GSO state when it was read: the packet counters
    /// above count skbs, not wire packets, when segmentation offload is on.
    #[serde(default)]
    pub offloads: Option<Offloads>,
    /// The interface MTU: with `delta.tx_bytes` it estimates wire packets
    /// when segmentation offload makes `tx_packets` count large skbs.
    #[serde(default)]
    pub mtu: u32,
    /// NIC allowance counters; `Unavailable` (with the reason) on a device
    /// that has none, never faked.
    #[serde(default)]
    pub allowance: AllowanceStatus,
    /// The host's own queues and drops on this interface (qdisc hooks and
    /// kfree_skb), when the host-queue probes are attached.
    #[serde(default)]
    pub host_queue: Option<HostQueueSample>,
    /// The interface was removed from the namespace (deleted, or moved to
    /// another) during this interval: its deltas run to its removal, from
    /// the counters the kernel gave with the notice, and it is absent from
    /// the next snapshot. Absent (false) before format 1.9.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// The interval's peak rates (issue 24, microbursts): the busiest
    /// window of `peak_window_us` inside the interval, in bits and in wire
    /// packets per second, measured in the kernel (tx: the packets leaving
    /// the interface's qdiscs, docs/architecture.md "Peak rates"). `None`:
    /// not measured (no qdisc on the interface, the host-queue probes not
    /// attached, or a recording older than format 1.9). A mean far below
    /// its peak is a microburst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_peak_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_peak_bps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_peak_pps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_peak_pps: Option<u64>,
    /// The window of the peaks, in microseconds: `--peak-window`. Builds
    /// before 2026-11-26 rounded it to whole ticks of the kernel's clock
    /// (jiffies: 4 ms at HZ=250, so 10 ms asked read 12 ms); the field says
    /// which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_window_us: Option<u64>,
    /// UDP sent to the instance's link-local services through this
    /// interface, by sender (src/model/linklocal.rs); absent when not
    /// measured (the probes not attached, another interface carries the
    /// route, recordings before format 1.15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linklocal: Option<super::linklocal::LinkLocalSample>,
    /// The TCP flows open through this interface at the interval's end,
    /// idle ones included, by owner (src/model/holders.rs): who holds
    /// entries in its connection table. Absent before format 1.20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_holders: Option<super::holders::FlowHolderSample>,
}

/// Whether allowance counters could be read for an interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AllowanceStatus {
    /// No allowance counters: the reason says why (not ENA, read failed...).
    Unavailable {
        reason: String,
    },
    Read(Box<AllowanceSample>),
}

impl Default for AllowanceStatus {
    fn default() -> Self {
        AllowanceStatus::Unavailable {
            reason: "not read".into(),
        }
    }
}

impl AllowanceStatus {
    pub(crate) fn sample(&self) -> Option<&AllowanceSample> {
        match self {
            AllowanceStatus::Read(s) => Some(s),
            AllowanceStatus::Unavailable { .. } => None,
        }
    }
}

/// The ENA allowance counters of one interface over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllowanceSample {
    /// Where they came from: `ioctl` (SIOCETHTOOL) or `file:<path>`.
    pub source: String,
    /// As read at the end of the interval. A field is `None` when the device
    /// does not report that statistic.
    pub totals: AllowanceCounters,
    /// Growth over the interval, after reset handling: never negative, never
    /// a bogus jump (see `resets` and `zeroed_reads`).
    pub delta: AllowanceCounters,
    /// Counter resets seen since start: reads in which a counter went down
    /// to near zero (docs/allowance.md, "Decreases").
    pub resets: u64,
    /// Reads where every counter came back 0 at once (ENA fills a zeroed
    /// struct when its admin command fails): treated as no data.
    pub zeroed_reads: u64,
    /// Failed reads since start (ioctl error, unreadable or malformed file).
    pub read_failures: u64,
    /// The ENA driver's own count of admin commands that failed
    /// (`ena_admin_q_aborted_cmd` + `ena_admin_q_no_completion`), as read
    /// with the counters; None when the device does not report them. The
    /// allowance stats are fetched by an admin command: when this grew, the
    /// read's allowance values are stale (before ENA 2.13.2 the previous
    /// values repeat), garbage or zeros, never data. Absent before format 1.4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin_cmd_failures: Option<u64>,
    /// The last read error, if the latest read failed.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Why this read's counters are not data although the read worked: a
    /// counter went down without a reset to near zero, or the source went
    /// down repeatedly and has not been consistent since (docs/allowance.md,
    /// "Decreases"). None when trusted. Absent before format 1.8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<String>,
    /// Reads since start whose counters were not trusted (`untrusted`). Absent
    /// (0) before format 1.8.
    #[serde(default)]
    pub untrusted_reads: u64,
    /// Lines of a counter file skipped since start because they were not
    /// `name: value`; the rest of each file was read. Absent (0) before 1.8.
    #[serde(default)]
    pub skipped_lines: u64,
    /// The first line skipped in this read and why (`path:line: message`),
    /// with how many were. None when none was. Absent before format 1.8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// ENA allowance statistics by name (`ethtool -S`). Cumulative counters
/// except `conntrack_allowance_available` and the `ena_srd_mode` and
/// `ena_srd_resource_utilization` gauges, which are copied, not subtracted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllowanceCounters {
    pub bw_in_allowance_exceeded: Option<u64>,
    pub bw_out_allowance_exceeded: Option<u64>,
    pub pps_allowance_exceeded: Option<u64>,
    pub conntrack_allowance_exceeded: Option<u64>,
    pub linklocal_allowance_exceeded: Option<u64>,
    pub conntrack_allowance_available: Option<u64>,
    pub ena_srd_mode: Option<u64>,
    pub ena_srd_tx_pkts: Option<u64>,
    pub ena_srd_eligible_tx_pkts: Option<u64>,
    pub ena_srd_rx_pkts: Option<u64>,
    pub ena_srd_resource_utilization: Option<u64>,
}

impl AllowanceCounters {
    /// The five counts of packets the shaper queued or dropped, by their
    /// `ethtool -S` names (the gauge and the SRD figures left out).
    pub(crate) fn exceeded(&self) -> [(&'static str, Option<u64>); 5] {
        [
            ("bw_in_allowance_exceeded", self.bw_in_allowance_exceeded),
            ("bw_out_allowance_exceeded", self.bw_out_allowance_exceeded),
            ("pps_allowance_exceeded", self.pps_allowance_exceeded),
            (
                "conntrack_allowance_exceeded",
                self.conntrack_allowance_exceeded,
            ),
            (
                "linklocal_allowance_exceeded",
                self.linklocal_allowance_exceeded,
            ),
        ]
    }
}

/// The host's own queuing and drops on one interface over one interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostQueueSample {
    /// Packets enqueued to and dequeued from the interface's qdiscs.
    pub enqueued: u64,
    pub dequeued: u64,
    /// Qdisc backlog at the end of the interval, summed over the
    /// interface's transmit queues (as `tc -s qdisc` gives it for mq): per
    /// queue, as left by the latest qdisc event before the read (events are
    /// stamped in jiffies; of CPUs tied within one, the smallest backlog:
    /// docs/architecture.md "Host queue").
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// The largest backlog seen at an enqueue during the interval, summed
    /// over the transmit queues: with several queues an upper bound, since
    /// each queue's peak may come at another moment.
    pub peak_backlog_packets: u64,
    pub peak_backlog_bytes: u64,
    /// Time from enqueue to dequeue, mean and max over the packets sampled
    /// in the interval (at most 1 enqueue in 64 per CPU, docs/architecture.md
    /// "Host queue"); `None` when no sample completed.
    pub sojourn_mean_us: Option<u64>,
    pub sojourn_max_us: Option<u64>,
    /// Packets the host dropped on this interface in the interval, by kernel
    /// drop reason name (`QDISC_DROP`, `TC_EGRESS`, ...).
    pub drops: BTreeMap<String, u64>,
    /// The drops the interface's qdiscs counted themselves in the interval
    /// (their `qstats.drops`, what `tc -s qdisc` shows as dropped), read at
    /// their latest event; None where no qdisc keeps them (pfifo_fast's are
    /// per CPU) or none had an event. Absent before format 1.19.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_drops: Option<u64>,
    /// The packets (gso segments) the interface's qdiscs handed on in the
    /// interval by their own counter (`bstats.packets`, `tc -s qdisc`'s
    /// "Sent ... pkt"), read as `qdisc_drops` is: exact where `dequeued`,
    /// an event count, may fall short. Absent before format 1.19.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_sent: Option<u64>,
    /// Of those, the drops found with no drop event counted in `drops`: the
    /// kernel ran no program for them (docs/architecture.md, "Host queue").
    /// Counted as local drops all the same. Absent (0) before format 1.19.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub unseen_drops: u64,
    /// The per-packet programs were paused for some or all of the interval
    /// (`--per-packet auto`, docs/architecture.md "Per-packet programs
    /// while needed"): its packets, backlog, sojourn and the qdisc's own
    /// counts were not measured (0 or none above); its drops were. Absent
    /// (false) before format 1.22.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// Whether a drop reason (a key of [`HostQueueSample::drops`]) is a
/// qdisc's: the drops `qstats.drops` also counts (QDISC_DROP,
/// QDISC_OVERLIMIT, QDISC_CONGESTED, and the fq, cake and dualpi2 reasons
/// of 6.16 and later). Collection matches these against the qdisc's own
/// count to find the unseen drops; the analysis counts them as local drops.
pub fn is_qdisc_drop_reason(reason: &str) -> bool {
    ["QDISC_", "FQ_", "CAKE_", "DUALPI2_"]
        .iter()
        .any(|p| reason.starts_with(p))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

/// Who owns a socket, as seen in `tcp_sendmsg_locked` (process context), or
/// from /proc when the socket has not sent since the observer started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// The process name (the thread group leader's, as `ps` and `ss -p`
    /// show it). Recordings before format 1.8 made on kernels with the
    /// `tcp_sendmsg_locked` tracepoint hold the sending thread's name here.
    pub comm: String,
    /// The name of the thread seen sending, where the kernel said (it is
    /// unknown for owners found through /proc); absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// cgroup v2 id; 0 when found through /proc.
    pub cgroup_id: u64,
    /// The cgroup v2 path (from the id, or /proc/<pid>/cgroup), where known.
    /// Absent in recordings older than format 1.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// The pod, container or service that path names (docs/workloads.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
}

impl Owner {
    /// `comm/pid` as the views show it, the name made inert for a
    /// terminal: any process can name itself with escape sequences.
    pub(crate) fn label(&self) -> String {
        format!(
            "{}/{}",
            crate::shared::terminal_text::inert(&self.comm),
            self.pid
        )
    }

    /// `comm[thread]/pid`: the process and, where the kernel named it and
    /// it is not the process's own name, the thread seen sending (a JVM's
    /// `java[data-plane-kafk]/4242`), as the plain view and the text report
    /// show them; [`Owner::label`] when no other thread is known. Both
    /// names made inert for a terminal.
    pub(crate) fn label_with_thread(&self) -> String {
        match self.other_thread() {
            Some(t) => self.label_naming(&crate::shared::terminal_text::inert(t)),
            None => self.label(),
        }
    }

    /// The thread worth naming beside the process: named by the kernel, and
    /// not the process's own name.
    pub(crate) fn other_thread(&self) -> Option<&str> {
        self.thread
            .as_deref()
            .filter(|t| !t.is_empty() && *t != self.comm)
    }

    /// `comm[thread]/pid` with `thread` as given (already inert, perhaps cut).
    pub(crate) fn label_naming(&self, thread: &str) -> String {
        format!(
            "{}[{thread}]/{}",
            crate::shared::terminal_text::inert(&self.comm),
            self.pid
        )
    }
}

/// A value per TCP congestion-control state (`icsk_ca_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerCaState<T> {
    pub open: T,
    pub disorder: T,
    pub cwr: T,
    pub recovery: T,
    pub loss: T,
}

impl<T: Copy> PerCaState<T> {
    pub fn from_array(a: [T; 5]) -> Self {
        PerCaState {
            open: a[0],
            disorder: a[1],
            cwr: a[2],
            recovery: a[3],
            loss: a[4],
        }
    }
    pub fn to_array(&self) -> [T; 5] {
        [self.open, self.disorder, self.cwr, self.recovery, self.loss]
    }
}

impl FlowCounters {
    /// Of the retransmits, those reported spurious (never more than the
    /// retransmits: in a delta, a D-SACK can come an interval late).
    pub(crate) fn spurious_retransmits(&self) -> u64 {
        self.retrans_spurious.min(self.retrans_segs)
    }

    /// The retransmits not reported spurious: those that may have
    /// repaired a loss. Loss verdicts and backoff count these.
    pub(crate) fn lossy_retransmits(&self) -> u64 {
        self.retrans_segs - self.spurious_retransmits()
    }
}

/// Cumulative per-flow counters. In `FlowSample::totals` they are as read at
/// the end of the interval; in `FlowSample::delta`, the growth over it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowCounters {
    pub bytes_sent: u64,
    pub bytes_acked: u64,
    pub bytes_retrans: u64,
    pub bytes_received: u64,
    pub segs_out: u64,
    pub data_segs_out: u64,
    /// Segments received (`tcp_sock.segs_in`, `ss -i` `segs_in`), data and
    /// pure ACKs alike: with `segs_out`, the packets the flow carried both
    /// ways. 0 in recordings before format 1.15.
    #[serde(default)]
    pub segs_in: u64,
    /// `tcp_sock.total_retrans`: retransmitted segments (what `ss` shows as
    /// `retrans:X/total` and nstat counts in TcpRetransSegs).
    pub retrans_segs: u64,
    /// Of `retrans_segs`, those known spurious (nothing was lost): the
    /// larger of `retrans_dsack` (the receiver reported them as duplicates)
    /// and `retrans_undone` (the kernel undid their loss episode), per flow
    /// and cumulative, so one retransmit known both ways counts once. The
    /// report of one can come an interval after its retransmit. Before
    /// format 1.12 the D-SACK count alone; 0 before 1.8.
    #[serde(default)]
    pub retrans_spurious: u64,
    /// Retransmissions seen by the tcp_retransmit_skb probe that reached the
    /// wire (err == 0), in skbs and in segments.
    pub retrans_skbs_traced: u64,
    pub retrans_segs_traced: u64,
    /// tcp_retransmit_skb with err != 0: the retransmit could not be sent,
    /// typically because the original still sat in a host queue.
    pub retrans_failed: u64,
    pub delivered: u64,
    /// Sampled tcp_probe runs (incoming segments on the established path;
    /// one in `Health::probe_sampling` is sampled).
    pub probe_events: u64,
    /// Sampled tcp_probe runs where cwnd was lower than at the sampled run
    /// before.
    pub cwnd_reductions: u64,
    /// Sampled tcp_probe runs that found data written and not yet sent:
    /// over `probe_events`, the share of the time the flow had data waiting.
    #[serde(default)]
    pub waiting_events: u64,
    /// Time in each congestion state, in microseconds.
    pub ca_time_us: PerCaState<u64>,
    /// Entries into each congestion state.
    pub ca_entries: PerCaState<u64>,
    /// Time with data unsent or unacknowledged, as `ss -i` shows `busy`
    /// (tcp_info's tcpi_busy_time), in microseconds; 0 in recordings older
    /// than format 1.4 and when the kernel's tick rate could not be told.
    #[serde(default)]
    pub busy_us: u64,
    /// The part of `busy_us` stalled by the receiver's window (`ss -i`
    /// `rwnd_limited`).
    #[serde(default)]
    pub rwnd_limited_us: u64,
    /// The part of `busy_us` in which the application had more to write than
    /// the send buffer took (`ss -i` `sndbuf_limited`): data waiting that
    /// the path did not take.
    #[serde(default)]
    pub sndbuf_limited_us: u64,
    /// Retransmitted segments the receiver reported as duplicates with a
    /// D-SACK (`tcp_sock.dsack_dups`, `ss -i` `dsack_dups`). 0 in recordings
    /// before format 1.12 (their `retrans_spurious` is this figure).
    #[serde(default)]
    pub retrans_dsack: u64,
    /// Segments retransmitted in loss episodes the kernel undid as spurious
    /// (F-RTO, timestamps, D-SACKs: it put cwnd back), with a tail loss
    /// probe that led to the episode. 0 without the `tcp_cong_state_set`
    /// program and in recordings before format 1.12.
    #[serde(default)]
    pub retrans_undone: u64,
    /// Tail loss probes that retransmitted (one segment each, in
    /// `retrans_segs`): sent on a timer, not on evidence of loss. Spurious
    /// when D-SACKed or undone with an episode; one that is neither
    /// repaired a tail loss or went to a receiver without D-SACK.
    #[serde(default)]
    pub retrans_probes: u64,
    /// Loss (RTO) episodes the kernel undid: spurious timeouts (nstat
    /// `TcpExtTCPLossUndo`; F-RTO's are `TcpExtTCPSpuriousRTOs`).
    #[serde(default)]
    pub rto_undone: u64,
    /// Fast-recovery episodes the kernel undid (nstat `TcpExtTCPFullUndo`,
    /// `TCPPartialUndo`, `TCPDSACKUndo` while in Recovery).
    #[serde(default)]
    pub recovery_undone: u64,
}

/// One TCP flow over one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSample {
    /// The socket cookie: unique for the socket's life on this boot.
    pub id: u64,
    pub netns: u32,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// TCP state name, as `ss` prints it (`ESTAB`, `FIN-WAIT-1`, ...).
    pub state: String,
    /// Congestion state name: `open`, `disorder`, `cwr`, `recovery`, `loss`.
    pub ca_state: String,
    pub owner: Option<Owner>,
    /// Current values from `struct tcp_sock` at the end of the interval.
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub rttvar_us: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub mss: u32,
    pub packets_out: u32,
    pub retrans_out: u32,
    pub lost_out: u32,
    pub sacked_out: u32,
    /// Mean and max srtt over the interval's sampled tcp_probe runs, and the
    /// smallest cwnd seen at them; `None` when none was sampled in the
    /// interval (`srtt_us` and `cwnd`, read at the dump, are always there).
    pub srtt_mean_us: Option<u32>,
    pub srtt_max_us: Option<u32>,
    pub cwnd_min: Option<u32>,
    /// Bytes written by the application and not yet sent (`ss -i`
    /// `notsent`), at the end of the interval.
    #[serde(default)]
    pub notsent_bytes: u32,
    /// The kernel's own view at the end of the interval: sending was limited
    /// by the congestion window (tcp_sock.is_cwnd_limited).
    #[serde(default)]
    pub cwnd_limited: bool,
    pub totals: FlowCounters,
    pub delta: FlowCounters,
    /// Opened during this interval (its deltas count from zero).
    pub opened: bool,
    /// Closed during this interval: reported this once, then forgotten.
    pub closed: bool,
    /// The interface the flow uses: for a flow of the observer's own
    /// network namespace its cached route's egress device, else the one its
    /// segments arrive on; for a flow of another namespace (`--all-netns`,
    /// format 1.21 on) the interface here its packets are routed out of
    /// (src/collect/egress.rs), `lo` for one that stays in its namespace.
    /// None when unknown: before the kernel knew, when no path was found
    /// (then `unrouted`), and in recordings older than format 1.2. The
    /// analysis counts a flow without one for every interface, unless it
    /// is `unrouted` ([`FlowSample::counts_for`]).
    #[serde(default)]
    pub iface: Option<String>,
    /// A flow of another namespace whose packets were not found to pass
    /// through this namespace (no veth end here leads into its namespace:
    /// the lab's other namespaces, an isolated one, an ipvlan pod; or the
    /// route lookup failed). It counts for no interface: judging every
    /// interface by it would give them another host's losses. Absent
    /// (false) before format 1.21.
    #[serde(default, skip_serializing_if = "crate::model::is_false")]
    pub unrouted: bool,
    /// For a flow of another network namespace (`--all-netns`): that
    /// namespace's `ip netns` name, else `pod NAMESPACE/NAME` of the pod
    /// that owns the flow; None for the observer's own namespace, when
    /// neither is known, and in recordings older than format 1.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_name: Option<String>,
    /// The flow's busiest window of the interval (about the interfaces'
    /// `peak_window_us`, timed by the socket's own microsecond clock), in
    /// bits per second sent and received; `None` when no window ended in
    /// the interval or in recordings older than format 1.9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bps: Option<u64>,
    /// What the flow is to the local Kafka broker (src/model/kafka.rs):
    /// replication to a follower or from a leader, a consumer group's,
    /// a producer's, the controller quorum's. Absent when no Kafka lookup
    /// ran (`--kafka off`, no broker found), when the flow is none of the
    /// cluster's, and in recordings before format 1.13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<crate::model::kafka::KafkaFlow>,
}

/// [`FlowSample::counts_for`], for a flow or a folded group of flows.
pub(crate) fn counts_for(uses: Option<&str>, unrouted: bool, iface: &str) -> bool {
    !unrouted && uses.is_none_or(|u| u == iface)
}

/// Where the collector found a flow's packets go: an interface here, not
/// known, or nowhere here (the `iface` and `unrouted` of [`FlowSample`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowPath {
    Iface(String),
    Unknown,
    Unrouted,
}

impl FlowPath {
    /// `FlowSample::iface` and `FlowSample::unrouted`.
    pub fn fields(self) -> (Option<String>, bool) {
        match self {
            FlowPath::Iface(name) => (Some(name), false),
            FlowPath::Unknown => (None, false),
            FlowPath::Unrouted => (None, true),
        }
    }
}

impl FlowSample {
    /// Whether `filter` (`--pod`, `--cgroup`, `--service`) keeps this flow,
    /// judged by its owner's cgroup path and workload.
    pub(crate) fn passes(&self, filter: &WorkloadFilter) -> bool {
        let owner = self.owner.as_ref();
        filter.matches(
            owner.and_then(|o| o.cgroup.as_deref()),
            owner.and_then(|o| o.workload.as_ref()),
        )
    }

    /// A quiet established flow (10.0.0.1:9092 to 10.0.0.2:40000+id, no
    /// counters, owner unknown) for unit tests to change what they need
    /// with `FlowSample { field, ..FlowSample::example(id) }`.
    #[cfg(test)]
    pub(crate) fn example(id: u64) -> Self {
        FlowSample {
            id,
            netns: 1,
            local: "10.0.0.1:9092".parse().unwrap(),
            peer: SocketAddr::new([10, 0, 0, 2].into(), 40000 + id as u16),
            state: "ESTAB".into(),
            ca_state: "open".into(),
            owner: None,
            srtt_us: 0,
            min_rtt_us: 0,
            rttvar_us: 0,
            cwnd: 10,
            ssthresh: 0,
            mss: 1448,
            packets_out: 0,
            retrans_out: 0,
            lost_out: 0,
            sacked_out: 0,
            srtt_mean_us: None,
            srtt_max_us: None,
            cwnd_min: None,
            notsent_bytes: 0,
            cwnd_limited: false,
            totals: FlowCounters::default(),
            delta: FlowCounters::default(),
            opened: false,
            closed: false,
            iface: None,
            unrouted: false,
            netns_name: None,
            peak_bps: None,
            kafka: None,
        }
    }

    /// The interface column of the views: its name, `none` for a flow
    /// that passes through none here (`unrouted`), `-` when not known.
    pub fn iface_label(&self) -> &str {
        match (&self.iface, self.unrouted) {
            (Some(name), _) => name,
            (None, true) => "none",
            (None, false) => "-",
        }
    }

    /// Whether the analysis counts the flow for interface `iface`: the
    /// one it uses, or every one when that is unknown (not when it is
    /// known to pass through none).
    pub fn counts_for(&self, iface: &str) -> bool {
        counts_for(self.iface.as_deref(), self.unrouted, iface)
    }

    /// What the views show of who the flow belongs to on a container host:
    /// the owner's pod, container or service, else (a flow of another
    /// namespace) `netns NAME`.
    /// Made inert for a terminal: pod, cgroup and namespace names come
    /// from other users.
    pub(crate) fn workload_label(&self) -> Option<String> {
        self.owner
            .as_ref()
            .and_then(|o| o.workload.as_ref())
            .and_then(|w| w.label())
            .or_else(|| self.netns_name.as_ref().map(|n| format!("netns {n}")))
            .map(|l| crate::shared::terminal_text::inert(&l).into_owned())
    }

    /// srtt / min_rtt: 1.0 means no queueing delay on the path.
    pub(crate) fn rtt_inflation(&self) -> Option<f64> {
        (self.min_rtt_us > 0 && self.srtt_us > 0)
            .then(|| self.srtt_us as f64 / self.min_rtt_us as f64)
    }
}

/// A notable flow event from the ring buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowEvent {
    pub mono_ns: u64,
    pub flow_id: u64,
    pub netns: u32,
    #[serde(flatten)]
    pub kind: FlowEventKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum FlowEventKind {
    Open,
    State { from: String, to: String },
    Retransmit { segs: u32 },
    RetransmitFailed { err: i32 },
    CongestionState { from: String, to: String },
    Close,
}

/// What the observer itself missed or could not do, cumulative since start.
/// Never hidden: every sink shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub programs: Vec<ProgramHealth>,
    /// Sockets not tracked since start: their storage could not be created,
    /// or `--max-flows` was reached. Each socket is counted once (before
    /// format 1.9: every failed attempt, so one socket could count
    /// hundreds of times).
    pub untracked_flows: u64,
    /// Of those, the ones not closed yet. Absent (0) before format 1.9.
    #[serde(default)]
    pub untracked_open: u64,
    /// Bytes the untracked sockets sent and received in this interval (not
    /// cumulative): what the listed flows miss, so the analysis can say
    /// what share of the traffic it could not see per flow. Absent (0)
    /// before format 1.9.
    #[serde(default)]
    pub untracked_bytes_sent: u64,
    #[serde(default)]
    pub untracked_bytes_received: u64,
    /// The `--max-flows` cap in force (0: none). Absent (0) before format
    /// 1.9.
    #[serde(default)]
    pub max_flows: u32,
    /// Events lost because the ring buffer was full, or because user space
    /// had too many waiting (a storm of opens and state changes). Close
    /// records are counted apart (`closes_deferred`, `closes_lost`).
    pub ringbuf_drops: u64,
    /// Close records that found the ring buffer full and waited in the
    /// kernel for the next interval: late, not lost. Absent (0) before
    /// format 1.9.
    #[serde(default)]
    pub closes_deferred: u64,
    /// Close records lost (ring buffer and overflow both full): those flows'
    /// last counters since their previous reading are missing, and they are
    /// forgotten at the next full dump. Absent (0) before format 1.9, when
    /// lost closes were counted in `ringbuf_drops`.
    #[serde(default)]
    pub closes_lost: u64,
    /// Flows that moved and found the moved set full (docs/architecture.md,
    /// "The moved set"): the dump after each read every flow, so nothing is
    /// missing, but the interval cost what a full dump costs. Absent (0)
    /// before format 1.11.
    #[serde(default)]
    pub moved_set_full: u64,
    /// Members of the moved set whose socket was gone when the sweep came
    /// (its close event was missed): dropped, their flows forgotten at the
    /// next full dump. Absent (0) before format 1.11.
    #[serde(default)]
    pub moved_set_gone: u64,
    /// Flow records the snapshot iterator wrote.
    pub iter_records: u64,
    /// Sockets found already open when the observer started.
    pub seeded_flows: u64,
    /// Interface counter reads that failed (link statistics, the interface
    /// list, /proc/net/snmp) and flow dumps that could not be made or read
    /// (out of descriptors); allowance counter reads are counted apart.
    pub counter_read_failures: u64,
    /// Allowance counter reads that failed (ioctl error; counter file
    /// missing, unreadable or malformed), over every interface since start.
    /// Absent (0) before format 1.8.
    #[serde(default)]
    pub allowance_read_failures: u64,
    /// Allowance counter reads that worked but were not trusted (a counter
    /// went down without a reset to near zero, or the source has not been
    /// consistent since it did repeatedly), over every interface since
    /// start. Absent (0) before format 1.8.
    #[serde(default)]
    pub allowance_untrusted_reads: u64,
    /// Host-queue events not counted: qdisc events whose interface slot
    /// was held by another active interface, drops whose (interface,
    /// reason) entry could not be created (map full), and drops a qdisc
    /// counted that no drop event was seen for (`unseen_drops`).
    #[serde(default)]
    pub host_queue_untracked: u64,
    /// Interfaces asked for with `--iface` that were missing this interval
    /// (deleted, renamed, moved): reported, not silently dropped; the
    /// others go on. Absent in recordings before format 1.4.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_interfaces: Vec<String>,
    /// Flows of this interval read from the kernel (those that moved
    /// lately, or every one in a full dump), and flows carried from their
    /// last reading because they did not move (docs/architecture.md, "Work
    /// proportional to what moved"). Per interval, not cumulative. Absent
    /// (0) in recordings before format 1.5.
    #[serde(default)]
    pub flows_dumped: u64,
    #[serde(default)]
    pub flows_carried: u64,
    /// Intervals since start that ended later than asked (by more than a
    /// tenth of the interval) because collecting and showing the one before
    /// took longer than the interval: the observer could not keep up. The
    /// late interval's own `interval_ns` says how long it really was; the
    /// next one is asked for a whole interval later, never squeezed to
    /// catch up. Absent (0) in recordings before format 1.6.
    #[serde(default)]
    pub late_intervals: u64,
    /// tcp_probe's per-segment figures (a flow's `srtt_mean_us`,
    /// `srtt_max_us`, `cwnd_min`, and its `probe_events`, `waiting_events`
    /// and `cwnd_reductions`) came from one incoming segment in this many,
    /// drawn per tcp_probe run (`--probe-sampling`); 1 (or 0): every segment. The program's
    /// event count in `programs` is the sampled count times this, an
    /// estimate. Absent (1) in recordings before format 1.7.
    #[serde(default = "every_segment")]
    pub probe_sampling: u32,
    /// The OTLP exporter's delivery (`--otlp`), as of the interval's end
    /// (before its own batches were queued). Absent without `--otlp`, and
    /// in recordings before format 1.12.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<OtlpHealth>,
    /// The Kafka lookup's own counters (`--kafka`, src/collect/kafka/):
    /// absent when none ran, and in recordings before format 1.13.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaHealth>,
    /// The per-packet programs under `--per-packet auto`: whether they ran
    /// through this interval and run in the next, and why. Absent with
    /// `--per-packet always` (they always run), and in recordings before
    /// format 1.22.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_packet: Option<PerPacketState>,
}

/// The per-packet programs (host queue, peak rates) under `--per-packet
/// auto` (src/collect/per_packet.rs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerPacketState {
    /// They ran through the whole interval: its host-queue figures and
    /// peak rates are measured. False: the interfaces' host queues say
    /// `paused`, and no peak rate is given.
    pub measured: bool,
    /// They run in the next interval.
    pub attached: bool,
    /// Why, in a line: the counter that rose, the lingering after it, the
    /// periodic sample, or how long it has been quiet.
    pub why: String,
}

/// The Kafka lookup (src/collect/kafka/) since the observer started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaHealth {
    /// The broker asked (`HOST:PORT`), or what is looked for when none
    /// was found yet (`auto`).
    pub target: String,
    /// Lookups that worked, and that failed (refused, timed out, a TLS or
    /// SASL listener, an old broker, a response past the bounds).
    pub lookups_ok: u64,
    pub lookups_failed: u64,
    /// The latest failure, when the latest lookup failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Age of the directory the flows were classified with, in ms; None
    /// when no lookup has worked yet (flows then carry no Kafka identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_age_ms: Option<u64>,
    /// What that directory holds: brokers, groups listed, members listed
    /// (every member of every group described).
    #[serde(default)]
    pub brokers: u64,
    #[serde(default)]
    pub groups: u64,
    #[serde(default)]
    pub members: u64,
    /// Of the groups, those not described (an error, past the lookup's
    /// bounds); brokers whose groups could not be listed.
    #[serde(default)]
    pub groups_not_described: u64,
    #[serde(default)]
    pub brokers_not_asked: u64,
    /// Requests sent and bytes sent and received by every lookup since
    /// start: what the lookup cost the cluster.
    #[serde(default)]
    pub requests: u64,
    #[serde(default)]
    pub bytes_sent: u64,
    #[serde(default)]
    pub bytes_received: u64,
    /// The last lookup's duration, in ms.
    #[serde(default)]
    pub last_lookup_ms: u64,
    /// The broker this host runs, by id, as the last lookup that worked
    /// found it (src/model/kafka.rs, `local_broker`): None on a client's
    /// host, or before a lookup worked. Absent in recordings before 1.17.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_broker: Option<i32>,
}

fn every_segment() -> u32 {
    1
}

/// The OTLP exporter's own counters (src/sinks/otlp/sender.rs), since it
/// started: what reached the collector, what was given up, and what waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtlpHealth {
    /// Batches (metrics or logs requests) the collector took (2xx).
    #[serde(default)]
    pub sent: u64,
    /// Batches given up: the oldest at a full queue, those the collector
    /// refused for good, and those still undelivered when the run ended.
    #[serde(default)]
    pub dropped: u64,
    /// Failed requests (no connection, timeout, error status), each attempt
    /// counted: a batch tried 3 times and failing counts 3.
    #[serde(default)]
    pub failures: u64,
    /// Batches not delivered yet: waiting in the queue (at most 8), and the
    /// one being sent or retried. A gauge, not cumulative.
    #[serde(default)]
    pub queued: u64,
}

/// One BPF program's run statistics, or why it is not running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramHealth {
    pub name: String,
    /// False when the program is not running on this kernel (an optional
    /// program whose tracepoint is absent or that the kernel rejected): its
    /// counters are then 0 because nothing ran, not because nothing happened.
    /// Recordings before trace format 1.3 held attached programs only.
    #[serde(default = "yes")]
    pub attached: bool,
    /// Why it is not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_attached: Option<String>,
    /// The figures missing (or degraded, and how) because it is not attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// Not attached because another program does its work (named here):
    /// nothing is missing, and it is not counted among the programs not
    /// attached (issue #47: qdisc_dequeue's work done by dev_xmit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_by: Option<String>,
    /// Runs on observed sockets, counted by the program itself.
    pub events: u64,
    /// Runs the kernel skipped because the program was already running on
    /// that CPU (`recursion_misses` from the program's info). For
    /// `tcp_cong_state_set`, also the state changes made while it did not
    /// run and the kernel counted no miss, found at the socket's next change
    /// (docs/architecture.md, "Runs the kernel skips"; from trace format 1.23).
    pub missed: u64,
    /// Kernel run count and run time; only counted while
    /// `kernel.bpf_stats_enabled` is 1, else 0.
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

fn yes() -> bool {
    true
}

impl Default for ProgramHealth {
    fn default() -> Self {
        ProgramHealth {
            name: String::new(),
            attached: true,
            not_attached: None,
            lost: None,
            done_by: None,
            events: 0,
            missed: 0,
            run_cnt: 0,
            run_time_ns: 0,
        }
    }
}

impl Health {
    /// Programs that are not running, so some figures are missing (not
    /// those whose work another program does: `done_by`).
    pub(crate) fn not_attached(&self) -> impl Iterator<Item = &ProgramHealth> {
        self.programs
            .iter()
            .filter(|p| !p.attached && p.done_by.is_none())
    }

    /// The names of the programs not attached, comma-separated; empty when
    /// every program is attached.
    /// "1 in N" when tcp_probe's per-segment figures were sampled, for the
    /// views; None when every segment was read.
    pub(crate) fn probe_sampling_text(&self) -> Option<String> {
        (self.probe_sampling > 1).then(|| format!("1 in {}", self.probe_sampling))
    }

    /// The per-packet programs under `--per-packet auto`, for the views:
    /// "paused this interval; running next: bw_out_allowance_exceeded rose
    /// on eth0"; None with `always`.
    pub(crate) fn per_packet_text(&self) -> Option<String> {
        let p = self.per_packet.as_ref()?;
        let this = if p.measured {
            "ran this interval"
        } else {
            "paused in this interval (its queue figures, peak rates and link-local senders not measured)"
        };
        let next = if p.attached {
            "running next"
        } else {
            "paused next"
        };
        Some(format!("{this}; {next}: {}", p.why))
    }

    pub(crate) fn not_attached_text(&self) -> String {
        self.not_attached()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(crate) fn missed_total(&self) -> u64 {
        self.programs.iter().map(|p| p.missed).sum()
    }

    /// The Kafka lookup for the views (`--kafka`); None without one.
    pub(crate) fn kafka_text(&self) -> Option<String> {
        let k = self.kafka.as_ref()?;
        let mut s = format!(
            "Kafka lookups of {} ok {}, failed {}",
            crate::shared::terminal_text::inert(&k.target),
            k.lookups_ok,
            k.lookups_failed
        );
        if k.lookups_ok > 0 {
            s.push_str(&format!(
                "; {} brokers, {} groups ({} not described), {} members",
                k.brokers, k.groups, k.groups_not_described, k.members
            ));
        }
        if let Some(e) = &k.last_error {
            s.push_str(&format!(
                "; last: {}",
                crate::shared::terminal_text::inert(e)
            ));
        }
        Some(s)
    }

    /// The OTLP exporter's delivery for the views (`--otlp`); None without
    /// it.
    pub(crate) fn otlp_text(&self) -> Option<String> {
        self.otlp.map(|o| {
            format!(
                "OTLP batches sent {}, dropped {}, failed requests {}, queued {}",
                o.sent, o.dropped, o.failures, o.queued
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qdisc_drop_reasons() {
        for r in [
            "QDISC_DROP",
            "QDISC_OVERLIMIT",
            "FQ_FLOW_LIMIT",
            "CAKE_FLOOD",
            "DUALPI2_STEP_DROP",
        ] {
            assert!(is_qdisc_drop_reason(r), "{r}");
        }
        for r in ["TC_EGRESS", "NO_SOCKET", "NEIGH_QUEUEFULL", "FULL_RING"] {
            assert!(!is_qdisc_drop_reason(r), "{r}");
        }
    }

    #[test]
    fn programs_of_files_before_1_3_read_as_attached() {
        let p: ProgramHealth = serde_json::from_str(
            r#"{"name":"tcp_probe","events":3,"missed":0,"run_cnt":0,"run_time_ns":0}"#,
        )
        .unwrap();
        assert!(p.attached);
        assert_eq!(p.not_attached, None);
    }

    #[test]
    fn a_program_not_attached_says_why_and_what_is_lost() {
        let p = ProgramHealth {
            name: "tcp_sendmsg_locked".into(),
            attached: false,
            not_attached: Some("tracepoint tcp_sendmsg_locked does not exist".into()),
            lost: Some("owners from the kernel".into()),
            ..Default::default()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""attached":false"#), "{json}");
        let back: ProgramHealth = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        let h = Health {
            programs: vec![p, ProgramHealth::default()],
            ..Default::default()
        };
        assert_eq!(h.not_attached_text(), "tcp_sendmsg_locked");
    }

    #[test]
    fn a_program_whose_work_another_does_is_not_missing() {
        let p = ProgramHealth {
            name: "qdisc_dequeue".into(),
            attached: false,
            not_attached: Some("not needed: dev_xmit counts what leaves each qdisc".into()),
            done_by: Some("dev_xmit".into()),
            ..Default::default()
        };
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""done_by":"dev_xmit""#), "{json}");
        let back: ProgramHealth = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        let h = Health {
            programs: vec![p, ProgramHealth::default()],
            ..Default::default()
        };
        assert_eq!(h.not_attached().count(), 0);
        assert_eq!(h.not_attached_text(), "");
    }
}
