//! Raw interval deltas turned into rates that compare across instance types,
//! loads and interval lengths.
//!
//! The allowance counters count wire packets (what the shaper sees), so every
//! rate divides by wire packets, never by the driver's skb count: with TSO/GSO
//! one skb can carry dozens of wire packets (see [`wire_packets`]).
//!
//! Flow-derived signals (segments, retransmits, RTT inflation, failed
//! retransmits) of an interface come from the flows that use it: those whose
//! `iface` names it (the egress device of the socket's cached route; for a
//! flow of another namespace, the interface the node routes it out of; see
//! `FlowSample::counts_for`). A loopback flow so counts for `lo` only, and
//! retransmits on one ENI do not make another look lossy. A flow whose
//! interface is not known (`iface: None`: before the kernel knew, in
//! recordings older than format 1.2) is shared by every interface of the
//! snapshot, as all flows were before, so an old recording is judged the
//! same again; one of another namespace found to pass through none
//! (`unrouted`) counts for none.

use serde::{Deserialize, Serialize};

use crate::model::snapshot::{
    is_qdisc_drop_reason, AllowanceCounters, FlowCounters, FlowSample, InterfaceSample, Snapshot,
};

/// Ethernet header bytes the interface byte counters include per frame.
const ETH_HEADER: u64 = 14;
/// Header bytes a TCP/IPv4 segment with timestamps carries once per skb
/// (Ethernet 14 + IPv4 20 + TCP 20 + timestamp option 12): a GSO skb counts
/// them once in the byte counters, the wire carries them per packet.
const SEGMENT_HEADERS: u64 = ETH_HEADER + 20 + 20 + 12;

/// The signals of one interface over one interval, normalised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NormalisedRates {
    pub interval_secs: f64,
    pub tx_bps: f64,
    pub rx_bps: f64,
    /// `tx_bps` less the bytes this interface's flows resent because they
    /// were lost (their retransmitted bytes, in the share of their
    /// retransmits not reported spurious): what got past every drop on the
    /// way, the shaper's included. The driver counts a packet before the
    /// hypervisor shapes it, so under a dropping shaper `tx_bps` counts
    /// each dropped packet and then its retransmit; this counts it once.
    /// What an enforcement episode's baseline and burst ceiling are
    /// measured in (episodes.rs). Payload bytes are taken out, not their
    /// headers: a few % of the retransmitted bytes stay in. None in
    /// analyses written before it (read as `tx_bps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_passed_bps: Option<f64>,
    /// Driver packet counts (skbs) as read.
    pub tx_skb_packets: u64,
    pub rx_skb_packets: u64,
    /// Wire packets: the skb count, or the estimate from bytes and MTU when
    /// that is larger (segmentation offload).
    pub tx_wire_packets: u64,
    pub rx_wire_packets: u64,
    /// Wire packets per second, tx + rx.
    pub wire_pps: f64,
    /// True when a wire count came from the byte estimate, not the counter.
    pub wire_estimated: bool,
    /// Whether allowance counters were read for this interface.
    pub allowance_available: bool,
    /// Allowance counter deltas (None: not reported by the device).
    pub bw_out_exceeded: Option<u64>,
    pub bw_in_exceeded: Option<u64>,
    pub pps_exceeded: Option<u64>,
    pub conntrack_exceeded: Option<u64>,
    pub linklocal_exceeded: Option<u64>,
    /// The `conntrack_allowance_available` gauge at the end of the interval.
    pub conntrack_available: Option<u64>,
    /// Allowance exceeded as % of wire packets: bw_out of tx, bw_in of rx,
    /// pps, conntrack and linklocal of tx + rx. None without counters or
    /// without packets.
    pub bw_out_pct: Option<f64>,
    pub bw_in_pct: Option<f64>,
    pub pps_pct: Option<f64>,
    pub conntrack_pct: Option<f64>,
    pub linklocal_pct: Option<f64>,
    /// Segments sent and retransmitted by the flows in the interval.
    pub segs_out: u64,
    pub retrans_segs: u64,
    /// Of `retrans_segs`, those the receivers reported as duplicates
    /// (D-SACK): spurious, nothing was lost. Absent (0) before format 1.8.
    #[serde(default)]
    pub retrans_spurious: u64,
    /// The retransmits not reported spurious, / segs_out x 100: what loss
    /// is judged on. None when nothing was sent.
    pub retransmit_pct: Option<f64>,
    /// Flows that sent in the interval, and their srtt/min_rtt: weighted by
    /// bytes sent for the percentiles, plain for the max.
    pub active_flows: usize,
    pub rtt_inflation_p50: Option<f64>,
    pub rtt_inflation_p90: Option<f64>,
    /// The same flows' added delay (srtt over the base RTT of their peer,
    /// [`super::attribution::BaseRtts`]: what the flows' ranking takes) in
    /// microseconds, byte-weighted median: what the ratio means in time (a
    /// ratio of 1000 on a 10 us path is 10 ms). Absent in recordings before
    /// format 1.8.
    #[serde(default)]
    pub added_delay_p50_us: Option<f64>,
    pub rtt_inflation_max: Option<f64>,
    /// Of the incoming segments of the flows that sent, the % that found
    /// data written and not yet sent: the application wanted to send more
    /// than the path took. None below `MIN_WAITING_SAMPLES` segments, and
    /// for recordings without the figure (before format 1.4).
    #[serde(default)]
    pub data_waiting_pct: Option<f64>,
    /// Of the sending flows' busy time, the % stalled by the receivers'
    /// windows (the receiver, not the path, was the limit). None without
    /// busy time.
    #[serde(default)]
    pub rwnd_limited_pct: Option<f64>,
    /// IPv4 fragments the host's namespace created per second (not per
    /// interface: /proc/net/snmp counts the namespace); None when unknown.
    #[serde(default)]
    pub fragments_per_s: Option<f64>,
    /// Whether host queue probes reported for this interface.
    pub host_queue_available: bool,
    /// The per-packet programs were paused for some of the interval: the
    /// host queue's drops are measured, its backlog, sojourn and the peak
    /// rates are not (`HostQueueSample::paused`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub host_queue_paused: bool,
    /// Peak host qdisc backlog in the interval, and mean sojourn.
    pub local_backlog_packets: u64,
    pub local_backlog_bytes: u64,
    pub local_sojourn_mean_us: Option<u64>,
    /// Host drops on the egress path (qdisc, tc, full ring...), and the rest.
    pub local_drops: u64,
    pub other_drops: u64,
    /// Retransmits that failed because the original was still queued in
    /// the host.
    pub failed_retransmits: u64,
    /// The interval's peak rates (the interface's busiest `peak_window_us`,
    /// measured in the kernel): None when not measured and in recordings
    /// before format 1.9.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_peak_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_peak_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_peak_pps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_peak_pps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_window_us: Option<u64>,
    /// The flows of this interface with the highest peak rates in the
    /// interval, busiest first (at most `BURSTING_FLOWS_NAMED`): who
    /// bursts, named in a microburst's evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bursting_flows: Vec<BurstingFlow>,
    /// The flows of this interface that carried the most packets in the
    /// interval (segments out and in), most first (at most
    /// `PACKET_FLOWS_NAMED`): who a `pps_limit` names. Empty when no flow
    /// carried any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packet_flows: Vec<PacketFlow>,
    /// The owners (process, and pod, container or service) of this
    /// interface's flows by the packets their flows carried, most first (at
    /// most `PACKET_FLOWS_NAMED`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packet_owners: Vec<PacketOwner>,
    /// Packets (segments out and in) of all this interface's flows, the
    /// listed and the folded ones: what the shares above are of.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flow_packets: u64,
    /// Of `flow_packets`, those of listed flows whose mean payload was
    /// small (under `SMALL_PACKET_FRACTION` of a full segment's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub small_flow_packets: u64,
    /// Packets per second sent to the instance's link-local services
    /// through this interface (UDP datagrams from the link-local probes,
    /// TCP segments of the flows whose peer is a service), against
    /// `LINKLOCAL_PPS_LIMIT`. None when the UDP side was not measured here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linklocal_pps: Option<f64>,
    /// Who sent them, most first (at most `PACKET_FLOWS_NAMED`), by owner,
    /// service, protocol and family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linklocal_senders: Vec<LinkLocalRate>,
    /// Datagrams to the services no sender was kept for (the kernel's
    /// sender map full): in `linklocal_pps`, in no sender.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub linklocal_unattributed: u64,
    /// Who opened and holds this interface's TCP flows
    /// (src/analysis/conntrack.rs).
    #[serde(
        default,
        skip_serializing_if = "super::conntrack::ConnOpeners::is_empty"
    )]
    pub conntrack_openers: super::conntrack::ConnOpeners,
    /// `conntrack_allowance_available` over the recent intervals; None
    /// without a reading (and for a read that is no data).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conntrack_trend: Option<super::conntrack::ConntrackTrend>,
    /// Sockets the probes do not track (storage refused, or `--max-flows`
    /// reached) still open at the end of the interval, and the cap (0:
    /// none). Per snapshot, not per interface: an untracked socket has no
    /// known interface. Absent (0) before format 1.9.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub untracked_flows: u64,
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub max_flows: u32,
    /// Of the TCP bytes every observed socket sent (received) in the
    /// interval, the % the untracked ones did: what the flow signals and
    /// the ranking could not see. Over the snapshot's flows, not this
    /// interface's alone (see `untracked_flows`). Both None when untracked
    /// sockets moved nothing (or before format 1.9); one None when no
    /// socket moved a byte that way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untracked_sent_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untracked_received_pct: Option<f64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// `part` as % of `part + rest`; None when both are 0.
fn share_pct(part: u64, rest: u64) -> Option<f64> {
    (part + rest > 0).then(|| part as f64 * 100.0 / (part + rest) as f64)
}

/// A flow named in a microburst: who it is and its peak rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstingFlow {
    /// The flow as views name it (peer, local port, process).
    pub flow: String,
    pub peak_bps: f64,
}

/// Flows named in a microburst's evidence.
const BURSTING_FLOWS_NAMED: usize = 3;

/// A flow named for the packets it carried: who it is, its packets both
/// ways and their mean size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketFlow {
    /// The flow as views name it (peer, local port, process).
    pub flow: String,
    /// Segments sent and received in the interval (`ss -i` `segs_out`,
    /// `segs_in`).
    pub segs_out: u64,
    pub segs_in: u64,
    /// Payload bytes sent and received over those segments: the mean
    /// payload per packet, pure ACKs counting as 0.
    pub mean_payload_bytes: f64,
    /// Of the packets of the interface's flows (`flow_packets`), in %.
    pub share_pct: f64,
}

/// An owner named for the packets its flows carried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacketOwner {
    /// `comm/pid`, and the pod, container or service where known.
    pub owner: String,
    pub packets: u64,
    pub mean_payload_bytes: f64,
    pub share_pct: f64,
}

/// A sender to a link-local service, as a `linklocal_limit` names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLocalRate {
    /// `comm/pid`, and the pod, container or service where known.
    pub sender: String,
    pub service: crate::model::linklocal::LinkLocalService,
    pub proto: String,
    pub family: u8,
    pub pps: f64,
    /// Of the interface's packets to the services, in %.
    pub share_pct: f64,
}

/// Flows and owners named for the packets they carried.
pub(crate) const PACKET_FLOWS_NAMED: usize = 3;

/// A packet is small when its mean payload is under this fraction of the
/// MSS the MTU allows: a flow (or an interface) of such packets reaches a
/// packet-rate allowance at a fraction of the bandwidth full packets would.
pub(crate) const SMALL_PACKET_FRACTION: f64 = 0.25;

/// The payload a full TCP segment carries over `mtu` (with timestamps).
pub(crate) fn full_payload(mtu: u32) -> f64 {
    let mtu = if mtu == 0 { 1500 } else { mtu };
    (u64::from(mtu) + ETH_HEADER).saturating_sub(SEGMENT_HEADERS) as f64
}

/// An owner as the pps verdict names it: `comm/pid`, then the pod,
/// container or service.
pub(crate) fn owner_name(o: &crate::model::snapshot::Owner) -> String {
    match o.workload.as_ref().and_then(|w| w.label()) {
        Some(w) => format!("{} ({w})", o.label()),
        None => o.label(),
    }
}

/// Wire packets for a direction: the driver's packet count, or, when the
/// MTU is known and the bytes need more packets than were counted, the
/// number of full-size frames those bytes make.
///
/// With TSO/GSO a driver counts one skb of up to 64 KiB as one packet, and
/// the byte counters hold that skb's headers once. Taking the headers back
/// out per skb and dividing the payload by the full frame's payload gives
/// the wire count exactly when every segment is full-size (bulk transfer),
/// with or without offload; otherwise it is a lower bound, never below the
/// skb count. Without an MTU the skb count is used as is.
pub(crate) fn wire_packets(skbs: u64, bytes: u64, mtu: u32) -> u64 {
    if mtu == 0 {
        return skbs;
    }
    let frame = u64::from(mtu) + ETH_HEADER;
    let payload_per_frame = frame.saturating_sub(SEGMENT_HEADERS).max(1);
    let payload = bytes.saturating_sub(skbs.saturating_mul(SEGMENT_HEADERS));
    skbs.max(payload.div_ceil(payload_per_frame))
}

fn pct(part: Option<u64>, whole: u64) -> Option<f64> {
    let part = part?;
    (whole > 0).then(|| part as f64 / whole as f64 * 100.0)
}

/// Weighted percentile: the smallest value whose cumulative weight reaches
/// `q` of the total.
fn weighted_percentile(sorted: &[(f64, f64)], q: f64) -> Option<f64> {
    let total: f64 = sorted.iter().map(|(_, w)| w).sum();
    if sorted.is_empty() || total <= 0.0 {
        return None;
    }
    let mut acc = 0.0;
    for (v, w) in sorted {
        acc += w;
        if acc >= q * total {
            return Some(*v);
        }
    }
    sorted.last().map(|(v, _)| *v)
}

/// Bytes resent for loss: the retransmitted bytes in the share of the
/// retransmitted segments not D-SACKed (bytes are not split by spurious and
/// lossy; segments are).
fn lossy_bytes(d: &FlowCounters) -> u64 {
    if d.retrans_segs == 0 {
        return 0;
    }
    (d.bytes_retrans as u128 * d.lossy_retransmits() as u128 / d.retrans_segs as u128) as u64
}

/// Did the flow send anything in the interval?
pub(crate) fn flow_sent(f: &FlowSample) -> bool {
    f.delta.bytes_sent > 0 || f.delta.segs_out > 0
}

/// srtt over the interval: the mean of the probe samples when there were
/// any, else srtt at its end.
pub(crate) fn flow_srtt_us(f: &FlowSample) -> u32 {
    f.srtt_mean_us.unwrap_or(f.srtt_us)
}

/// [`flow_srtt_us`] divided by min_rtt.
pub(crate) fn flow_rtt_inflation(f: &FlowSample) -> Option<f64> {
    let srtt = flow_srtt_us(f);
    (f.min_rtt_us > 0 && srtt > 0).then(|| srtt as f64 / f.min_rtt_us as f64)
}

/// Drop reasons that mean the host's own egress path threw a packet away:
/// a qdisc's (the same set whose unseen drops count as local), tc's, or
/// the device's queue.
fn is_local_egress_drop(reason: &str) -> bool {
    is_qdisc_drop_reason(reason)
        || reason.starts_with("TC_")
        || matches!(
            reason,
            "FULL_RING" | "DEV_READY" | "TXQ_FULL" | "NEIGH_QUEUEFULL"
        )
}

fn allowance_deltas(rates: &mut NormalisedRates, d: &AllowanceCounters, t: &AllowanceCounters) {
    rates.bw_out_exceeded = d.bw_out_allowance_exceeded;
    rates.bw_in_exceeded = d.bw_in_allowance_exceeded;
    rates.pps_exceeded = d.pps_allowance_exceeded;
    rates.conntrack_exceeded = d.conntrack_allowance_exceeded;
    rates.linklocal_exceeded = d.linklocal_allowance_exceeded;
    rates.conntrack_available = t.conntrack_allowance_available;
}

impl NormalisedRates {
    /// Outbound throughput that got past the drops on the way
    /// (`tx_passed_bps`), or `tx_bps` for an analysis written before it.
    pub fn tx_passed_or_sent_bps(&self) -> f64 {
        self.tx_passed_bps.unwrap_or(self.tx_bps)
    }

    /// The retransmits not reported spurious: what loss is judged on.
    pub(crate) fn lossy_retransmits(&self) -> u64 {
        self.retrans_segs.saturating_sub(self.retrans_spurious)
    }

    /// These rates with the allowance part left out, as `normalise` gives
    /// them for an interface without counters: for a read that is no data.
    pub(crate) fn without_allowance(self) -> Self {
        NormalisedRates {
            allowance_available: false,
            bw_out_exceeded: None,
            bw_in_exceeded: None,
            pps_exceeded: None,
            conntrack_exceeded: None,
            linklocal_exceeded: None,
            conntrack_available: None,
            conntrack_trend: None,
            bw_out_pct: None,
            bw_in_pct: None,
            pps_pct: None,
            conntrack_pct: None,
            linklocal_pct: None,
            ..self
        }
    }
}

/// Incoming segments below which the share with data waiting is not
/// judged: a handful of ACKs in an interval say little about the time.
pub(crate) const MIN_WAITING_SAMPLES: u64 = 50;

/// The rates of one interface of `snap`.
pub(crate) fn normalise(
    iface: &InterfaceSample,
    snap: &Snapshot,
    bases: &super::attribution::BaseRtts,
) -> NormalisedRates {
    let secs = snap.interval_secs();
    let per_s = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
    let d = &iface.delta;
    let tx_wire = wire_packets(d.tx_packets, d.tx_bytes, iface.mtu);
    let rx_wire = wire_packets(d.rx_packets, d.rx_bytes, iface.mtu);
    let mut r = NormalisedRates {
        interval_secs: secs,
        tx_bps: per_s(d.tx_bytes as f64 * 8.0),
        rx_bps: per_s(d.rx_bytes as f64 * 8.0),
        tx_skb_packets: d.tx_packets,
        rx_skb_packets: d.rx_packets,
        tx_wire_packets: tx_wire,
        rx_wire_packets: rx_wire,
        wire_pps: per_s((tx_wire + rx_wire) as f64),
        wire_estimated: tx_wire > d.tx_packets || rx_wire > d.rx_packets,
        fragments_per_s: snap.fragments_created.map(|n| per_s(n as f64)),
        ..Default::default()
    };

    if let Some(a) = iface.allowance.sample() {
        r.allowance_available = true;
        allowance_deltas(&mut r, &a.delta, &a.totals);
        let both = tx_wire + rx_wire;
        r.bw_out_pct = pct(r.bw_out_exceeded, tx_wire);
        r.bw_in_pct = pct(r.bw_in_exceeded, rx_wire);
        r.pps_pct = pct(r.pps_exceeded, both);
        r.conntrack_pct = pct(r.conntrack_exceeded, both);
        r.linklocal_pct = pct(r.linklocal_exceeded, both);
    }

    let mut inflations: Vec<(f64, f64)> = Vec::new();
    let mut delays: Vec<(f64, f64)> = Vec::new();
    let (mut probes, mut waiting, mut busy, mut rwnd) = (0u64, 0u64, 0u64, 0u64);
    // A recording before format 1.4 has no send-limit figures at all:
    // unknown, not "never waiting". Any sending flow of 1.4 has busy time.
    let mut known = false;
    let mut lost_bytes = 0u64;
    for f in snap.flows.iter().filter(|f| f.counts_for(&iface.name)) {
        lost_bytes += lossy_bytes(&f.delta);
        r.segs_out += f.delta.segs_out;
        r.retrans_segs += f.delta.retrans_segs;
        r.retrans_spurious += f.delta.spurious_retransmits();
        r.failed_retransmits += f.delta.retrans_failed;
        if flow_sent(f) {
            r.active_flows += 1;
            if let Some(i) = flow_rtt_inflation(f) {
                let weight = f.delta.bytes_sent.max(1) as f64;
                inflations.push((i, weight));
            }
            if let Some(added) = bases.added_delay_us(f) {
                delays.push((added as f64, f.delta.bytes_sent.max(1) as f64));
            }
            probes += f.delta.probe_events;
            waiting += f.delta.waiting_events;
            busy += f.delta.busy_us;
            rwnd += f.delta.rwnd_limited_us;
            known |= f.totals.busy_us > 0;
        }
    }
    // Flows past the interval's listing limit, summed (src/model/fold.rs):
    // their segments and retransmits count like the listed ones'. They have
    // no RTT or send-limit figures of their own to weigh in.
    for g in snap
        .folded
        .flows
        .iter()
        .filter(|g| g.counts_for(&iface.name))
    {
        lost_bytes += lossy_bytes(&g.delta);
        r.segs_out += g.delta.segs_out;
        r.retrans_segs += g.delta.retrans_segs;
        r.retrans_spurious += g.delta.spurious_retransmits();
        r.failed_retransmits += g.delta.retrans_failed;
        r.active_flows += g.sending as usize;
    }
    r.tx_passed_bps = Some(per_s(d.tx_bytes.saturating_sub(lost_bytes) as f64 * 8.0));
    r.retransmit_pct = pct(Some(r.lossy_retransmits()), r.segs_out);
    r.data_waiting_pct =
        pct(Some(waiting), probes).filter(|_| known && probes >= MIN_WAITING_SAMPLES);
    r.rwnd_limited_pct = pct(Some(rwnd), busy);
    inflations.sort_by(|a, b| a.0.total_cmp(&b.0));
    r.rtt_inflation_p50 = weighted_percentile(&inflations, 0.5);
    r.rtt_inflation_p90 = weighted_percentile(&inflations, 0.9);
    delays.sort_by(|a, b| a.0.total_cmp(&b.0));
    r.added_delay_p50_us = weighted_percentile(&delays, 0.5);
    r.rtt_inflation_max = inflations.last().map(|(v, _)| *v);

    // Untracked sockets have no interface: their bytes are compared with
    // every listed flow's, whatever its interface.
    let h = &snap.health;
    r.untracked_flows = h.untracked_open;
    r.max_flows = h.max_flows;
    let (sent, received) = snap.flows.iter().fold((0u64, 0u64), |(s, rx), f| {
        (s + f.delta.bytes_sent, rx + f.delta.bytes_received)
    });
    // Both shares once untracked sockets moved anything (a direction
    // with no bytes at all stays None), so that "every byte was
    // untracked" can be told from "untracked sockets only received".
    if h.untracked_bytes_sent + h.untracked_bytes_received > 0 {
        r.untracked_sent_pct = share_pct(h.untracked_bytes_sent, sent);
        r.untracked_received_pct = share_pct(h.untracked_bytes_received, received);
    }

    if let Some(h) = &iface.host_queue {
        r.host_queue_available = true;
        r.host_queue_paused = h.paused;
        r.local_backlog_packets = h.peak_backlog_packets.max(h.backlog_packets);
        r.local_backlog_bytes = h.peak_backlog_bytes.max(h.backlog_bytes);
        r.local_sojourn_mean_us = h.sojourn_mean_us;
        for (reason, n) in &h.drops {
            if is_local_egress_drop(reason) {
                r.local_drops += n;
            } else {
                r.other_drops += n;
            }
        }
        // Dropped by a qdisc all the same, its drop event unseen.
        r.local_drops += h.unseen_drops;
    }
    r.tx_peak_bps = iface.tx_peak_bps.map(|v| v as f64);
    r.rx_peak_bps = iface.rx_peak_bps.map(|v| v as f64);
    r.tx_peak_pps = iface.tx_peak_pps.map(|v| v as f64);
    r.rx_peak_pps = iface.rx_peak_pps.map(|v| v as f64);
    r.peak_window_us = iface.peak_window_us;
    r.bursting_flows = bursting_flows(snap, &iface.name);
    packet_flows(&mut r, snap, &iface.name, iface.mtu);
    linklocal(&mut r, snap, iface);
    r
}

/// The packets sent to the link-local services through `iface`, and who
/// sent them (src/analysis/linklocal.rs): the rate and the top senders.
fn linklocal(r: &mut NormalisedRates, snap: &Snapshot, iface: &InterfaceSample) {
    let secs = snap.interval_secs();
    if secs <= 0.0 {
        return;
    }
    let Some(c) = super::linklocal::counts(snap, iface) else {
        return;
    };
    let total = c.packets;
    r.linklocal_pps = Some(total as f64 / secs);
    r.linklocal_unattributed = c.unattributed;
    r.linklocal_senders = c
        .senders
        .into_iter()
        .take(PACKET_FLOWS_NAMED)
        .map(|(k, n)| LinkLocalRate {
            sender: k.sender,
            service: k.service,
            proto: k.proto,
            family: k.family,
            pps: n as f64 / secs,
            share_pct: if total > 0 {
                n as f64 * 100.0 / total as f64
            } else {
                0.0
            },
        })
        .collect();
}

/// Packets a flow carried both ways in the interval, and their payload.
fn flow_packets(d: &FlowCounters) -> (u64, u64) {
    (d.segs_out + d.segs_in, d.bytes_sent + d.bytes_received)
}

fn mean(bytes: u64, packets: u64) -> f64 {
    if packets == 0 {
        0.0
    } else {
        bytes as f64 / packets as f64
    }
}

/// The flows and owners of `iface` that carried the most packets, and the
/// packets of all its flows (folded ones included).
fn packet_flows(r: &mut NormalisedRates, snap: &Snapshot, iface: &str, mtu: u32) {
    let flows: Vec<&FlowSample> = snap
        .flows
        .iter()
        .filter(|f| f.counts_for(iface) && flow_packets(&f.delta).0 > 0)
        .collect();
    let folded: u64 = snap
        .folded
        .flows
        .iter()
        .filter(|g| g.counts_for(iface))
        .map(|g| flow_packets(&g.delta).0)
        .sum();
    let total = flows.iter().map(|f| flow_packets(&f.delta).0).sum::<u64>() + folded;
    r.flow_packets = total;
    if total == 0 {
        return;
    }
    let share = |n: u64| n as f64 * 100.0 / total as f64;
    let small = full_payload(mtu) * SMALL_PACKET_FRACTION;
    r.small_flow_packets = flows
        .iter()
        .map(|f| flow_packets(&f.delta))
        .filter(|(p, b)| mean(*b, *p) < small)
        .map(|(p, _)| p)
        .sum();
    let mut ranked = flows.clone();
    ranked.sort_by_key(|f| (std::cmp::Reverse(flow_packets(&f.delta).0), f.id));
    r.packet_flows = ranked
        .iter()
        .take(PACKET_FLOWS_NAMED)
        .map(|f| {
            let (packets, bytes) = flow_packets(&f.delta);
            PacketFlow {
                flow: format!(
                    "{} :{}{}",
                    f.peer,
                    f.local.port(),
                    f.owner
                        .as_ref()
                        .map(|o| format!(" {}", o.label()))
                        .unwrap_or_default()
                ),
                segs_out: f.delta.segs_out,
                segs_in: f.delta.segs_in,
                mean_payload_bytes: mean(bytes, packets),
                share_pct: share(packets),
            }
        })
        .collect();
    let mut owners: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for f in &flows {
        let name = f
            .owner
            .as_ref()
            .map_or_else(|| "owner unknown".to_string(), owner_name);
        let (p, b) = flow_packets(&f.delta);
        let e = owners.entry(name).or_default();
        e.0 += p;
        e.1 += b;
    }
    let mut owners: Vec<(String, (u64, u64))> = owners.into_iter().collect();
    owners.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then_with(|| a.0.cmp(&b.0)));
    r.packet_owners = owners
        .into_iter()
        .take(PACKET_FLOWS_NAMED)
        .map(|(owner, (packets, bytes))| PacketOwner {
            owner,
            packets,
            mean_payload_bytes: mean(bytes, packets),
            share_pct: share(packets),
        })
        .collect();
}

/// The flows of `iface` with a peak rate, busiest first: `peer :port
/// comm/pid` and the peak.
fn bursting_flows(snap: &Snapshot, iface: &str) -> Vec<BurstingFlow> {
    let mut flows: Vec<&FlowSample> = snap
        .flows
        .iter()
        .filter(|f| f.counts_for(iface) && f.peak_bps.is_some())
        .collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.peak_bps));
    flows
        .into_iter()
        .take(BURSTING_FLOWS_NAMED)
        .map(|f| BurstingFlow {
            flow: format!(
                "{} :{}{}",
                f.peer,
                f.local.port(),
                f.owner
                    .as_ref()
                    .map(|o| format!(" {}", o.label()))
                    .unwrap_or_default()
            ),
            peak_bps: f.peak_bps.unwrap_or(0) as f64,
        })
        .collect()
}

/// An interval's microburst in one direction: its peak, mean and their
/// ratio, when the peak is at least `ratio` times the mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Microburst {
    pub peak: f64,
    pub mean: f64,
    pub times: f64,
    pub window_us: u64,
}

impl NormalisedRates {
    /// The interval microbursts in the direction of `signal` (bw_in: rx
    /// bits; pps: tx + rx packets, taken from the busier direction; else
    /// tx bits): its peak is at least `ratio` times its mean. None without
    /// a peak (not measured, recordings before format 1.9) or a mean.
    pub(crate) fn microburst(
        &self,
        inbound: bool,
        packets: bool,
        ratio: f64,
    ) -> Option<Microburst> {
        let secs = self.interval_secs;
        let window_us = self.peak_window_us?;
        let (peak, mean) = if packets {
            let tx = (self.tx_peak_pps?, self.tx_wire_packets as f64 / secs);
            let rx = (
                self.rx_peak_pps.unwrap_or(0.0),
                self.rx_wire_packets as f64 / secs,
            );
            if rx.0 > tx.0 {
                rx
            } else {
                tx
            }
        } else if inbound {
            (self.rx_peak_bps?, self.rx_bps)
        } else {
            (self.tx_peak_bps?, self.tx_bps)
        };
        if !(secs > 0.0 && mean > 0.0 && peak >= ratio * mean) {
            return None;
        }
        Some(Microburst {
            peak,
            mean,
            times: peak / mean,
            window_us,
        })
    }

    /// What a microbursting hypervisor verdict says (issue 24): "in
    /// microbursts: the busiest 12 ms ran at X, Nx the interval's mean of
    /// Y; flows bursting: ...".
    pub(crate) fn microburst_note(&self, m: &Microburst, packets: bool) -> String {
        format!("in microbursts: {}", self.burst_detail(m, packets))
    }

    /// The busiest window against the mean, and the flows that burst: "the
    /// busiest 12 ms ran at X, Nx the interval's mean of Y; flows bursting:
    /// ...".
    pub(crate) fn burst_detail(&self, m: &Microburst, packets: bool) -> String {
        let rate = |v: f64| {
            if packets {
                crate::shared::units::rate_pps(v)
            } else {
                crate::shared::units::rate_bits(v)
            }
        };
        let flows = if self.bursting_flows.is_empty() {
            "none named (no flow's peak measured)".to_string()
        } else {
            self.bursting_flows
                .iter()
                .map(|f| {
                    format!(
                        "{} at {}",
                        f.flow,
                        crate::shared::units::rate_bits(f.peak_bps)
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "the busiest {} ms ran at {}, {} the interval's mean of {}; flows bursting: {flows}",
            crate::shared::units::significant(m.window_us as f64 / 1000.0, 3),
            rate(m.peak),
            crate::shared::units::ratio(m.times),
            rate(m.mean)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same wire traffic (N full-size segments of a 1500-MTU TCP flow
    /// with timestamps) as the driver counts it with offload on and off.
    #[test]
    fn wire_packets_same_with_and_without_offload() {
        let mtu = 1500u32;
        let frame = 1514u64;
        let n = 49_900u64;
        // Offload off: one skb per wire packet, each a full frame.
        assert_eq!(wire_packets(n, n * frame, mtu), n);
        // Offload on: 3,715 skbs carry the same segments, headers once each.
        let skbs = 3_715u64;
        let payload = n * (frame - SEGMENT_HEADERS);
        let bytes = payload + skbs * SEGMENT_HEADERS;
        assert_eq!(wire_packets(skbs, bytes, mtu), n);
        // Small packets (pure ACKs) are one each.
        assert_eq!(wire_packets(1000, 1000 * 66, mtu), 1000);
        assert_eq!(wire_packets(1000, 1000 * 54, mtu), 1000);
        // Unknown MTU: the counter as is.
        assert_eq!(wire_packets(skbs, bytes, 0), skbs);
    }

    #[test]
    fn weighted_percentiles() {
        let v = vec![(1.0, 1.0), (2.0, 1.0), (10.0, 8.0)];
        assert_eq!(weighted_percentile(&v, 0.5), Some(10.0));
        assert_eq!(weighted_percentile(&v, 0.1), Some(1.0));
        assert_eq!(weighted_percentile(&[], 0.5), None);
    }
}
