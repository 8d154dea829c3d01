//! Turns raw kernel flow records into [`FlowSample`]s with per-interval
//! deltas for the flows that moved, counts the others as idle (carrying
//! those the kernel did not re-read; docs/architecture.md, "Work
//! proportional to what moved"), and forgets closed flows after reporting
//! them once.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::collect::held::{HeldFlows, HolderKey};
use crate::collect::probes::flows_skel::types::ts_flow_record;
use crate::model::fold::{choose_listed, Folded};
use crate::model::snapshot::{FlowCounters, FlowPath, FlowSample, Owner, PerCaState};

const AF_INET6: u16 = 10;

/// What we remember of a flow between intervals: its last record, from
/// which its totals are worked out again when it is next read (plain data,
/// no strings: 10,000 idle flows cost 10,000 records and nothing else).
#[derive(Debug, Clone)]
struct Known {
    last: ts_flow_record,
    /// The call to `update` (its count) that read this record.
    read_in: u64,
    /// bpf_ktime of the latest record that found it moving (opened, or
    /// `moved_lately`); for a flow that has not moved since the observer
    /// started, the start: how long it has held its place idle, at least.
    moved_ns: u64,
    /// Whom it is counted for in the table's holders.
    holder: HolderKey,
}

impl Known {
    fn totals(&self) -> FlowCounters {
        counters_of(&self.last).0
    }
}

/// What the last [`FlowTable::update`] did with the flows it tracks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct UpdateCounts {
    /// Built from a kernel record of this interval.
    pub read: u64,
    /// Not read (they did not move): carried from their last record.
    pub carried: u64,
    /// Tracked and open but not listed in the samples: they did not move
    /// lately (carried, or read in a full dump and found idle).
    pub idle: u64,
}

/// Flow state across intervals.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    /// Boxed: the table's slots stay 16 bytes, so its spare capacity (up to
    /// half of them after it grows past a power of two) costs no records.
    /// At 30,000 flows that was 24 MB of slots against 12 MB now.
    known: HashMap<u64, Box<Known>>,
    /// bpf_ktime when the observer started: a flow opened after this counts
    /// from zero in its first interval; an older one starts as a baseline.
    start_ns: u64,
    /// Calls to `update` so far, and the `now_ns` of the last one: a flow
    /// not read by the last call was carried to that time.
    updates: u64,
    last_now_ns: u64,
    /// tcp_probe runs on tracked flows since start, closed ones included:
    /// kept as records come in, so that no call walks every known flow.
    probe_events: u64,
    /// The open flows by holder, kept the same way (src/collect/held.rs).
    held: HeldFlows,
}

impl FlowTable {
    pub(crate) fn new(start_ns: u64) -> Self {
        FlowTable {
            start_ns,
            ..FlowTable::default()
        }
    }

    /// Builds this interval's samples from the iterator's records and the
    /// records of flows that closed since the last call (which win over an
    /// iterator record of the same socket: they are final).
    ///
    /// A sample is made only for a flow that moved: one the kernel marked
    /// `moved_lately` (it had events in the last dumps, or is busy), one
    /// that opened, one that closed. Every other tracked flow is counted in
    /// [`UpdateCounts::idle`] and costs no sample, no owner or interface
    /// lookup and no encoding: the work of a call follows the records it
    /// gets, not the flows it knows (docs/architecture.md, "Work
    /// proportional to what moved").
    ///
    /// With `all`, `live` holds every tracked socket: a known flow missing
    /// from it vanished (its close event was lost) and is forgotten.
    /// Without, `live` holds the flows that moved lately, and every other
    /// known flow is carried: nothing of it grows but the time in its
    /// congestion state, which runs to `now_ns` (bpf_ktime, i.e.
    /// CLOCK_MONOTONIC, taken when `live` was read); its growth when it is
    /// next read covers the one interval since the call before.
    pub(crate) fn update(
        &mut self,
        live: &[ts_flow_record],
        closed: &[ts_flow_record],
        all: bool,
        now_ns: u64,
        resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
        resolve_iface: &mut dyn FnMut(&ts_flow_record) -> FlowPath,
    ) -> (Vec<FlowSample>, UpdateCounts) {
        let closed: Vec<&ts_flow_record> = closed.iter().collect();
        self.update_listing(
            live,
            &closed,
            all,
            now_ns,
            resolve_owner,
            resolve_iface,
            usize::MAX,
            &mut Folded::default(),
        )
    }

    /// As [`FlowTable::update`], with at most `max_listed` samples: the
    /// flows past it (ranked as `model::fold` ranks them) are summed into
    /// `folded` without a sample ever being built, so a storm of 50,000
    /// flows costs 50,000 counter sums, not 50,000 samples (about 1.1 KB
    /// each with their names) held at once.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn update_listing(
        &mut self,
        live: &[ts_flow_record],
        closed: &[&ts_flow_record],
        all: bool,
        now_ns: u64,
        resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
        resolve_iface: &mut dyn FnMut(&ts_flow_record) -> FlowPath,
        max_listed: usize,
        folded: &mut Folded,
    ) -> (Vec<FlowSample>, UpdateCounts) {
        let closed_ids: HashSet<u64> = closed.iter().map(|r| r.cookie).collect();
        let known_before = self.known.len() as u64;
        let mut known_seen = 0u64;
        let mut moved: Vec<Measured> = Vec::with_capacity(closed.len() + live.len().min(1024));
        let mut counts = UpdateCounts::default();
        for rec in live.iter().filter(|r| !closed_ids.contains(&r.cookie)) {
            counts.read += 1;
            let (m, was_known) = self.measure(rec, false, resolve_owner);
            known_seen += was_known as u64;
            moved.extend(m);
        }
        let listed_open = moved.len() as u64;
        for &rec in closed {
            let (m, was_known) = self.measure(rec, true, resolve_owner);
            known_seen += was_known as u64;
            moved.extend(m);
        }
        if all {
            // Sockets that vanished without a close record (e.g. the close
            // event was dropped): forget them too; the drop is in health.
            let present: HashSet<u64> = live.iter().map(|r| r.cookie).collect();
            let held = &mut self.held;
            self.known.retain(|id, k| {
                let keep = present.contains(id);
                if !keep {
                    held.remove(k.holder);
                }
                keep
            });
            // Every open flow was just read: which are idle, counted again.
            self.held
                .count_idle(self.known.values().map(|k| (k.holder, k.moved_ns)), now_ns);
        } else {
            counts.carried = known_before.saturating_sub(known_seen);
        }
        counts.idle = (self.known.len() as u64).saturating_sub(listed_open);
        self.updates += 1;
        self.last_now_ns = now_ns;

        let listed = choose_listed(moved.len(), max_listed, |i| {
            (moved[i].rec.cookie, &moved[i].delta)
        });
        let mut out = Vec::with_capacity(moved.len().min(max_listed));
        for (m, list) in moved.into_iter().zip(listed) {
            if list {
                out.push(build(&m, resolve_owner, resolve_iface));
            } else {
                let (iface, unrouted) = resolve_iface(m.rec).fields();
                folded.add_counters(iface, unrouted, m.opened, m.closed, &m.delta);
            }
        }
        (out, counts)
    }

    /// The open flows by holder: what holds entries in the connection
    /// table, and how many idle (as of the last full dump).
    pub(crate) fn held(&self) -> &HeldFlows {
        &self.held
    }

    /// The network namespaces of the flows tracked now.
    pub(crate) fn netns_in_use(&self) -> HashSet<u32> {
        self.known.values().map(|k| k.last.netns).collect()
    }

    /// Flows tracked now (open, listed or idle).
    pub(crate) fn len(&self) -> usize {
        self.known.len()
    }

    /// tcp_probe runs on tracked flows since start: the flows' own counts,
    /// including those of flows already closed or forgotten.
    pub(crate) fn probe_events(&self) -> u64 {
        self.probe_events
    }

    /// A flow's growth from its new record, kept (or, closed, forgotten);
    /// what its sample is built from when it moved, opened or closed (None
    /// when idle), and whether it was known before.
    fn measure<'r>(
        &mut self,
        rec: &'r ts_flow_record,
        closed: bool,
        resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
    ) -> (Option<Measured<'r>>, bool) {
        let (totals, _) = counters_of(rec);
        let prev = self.known.get(&rec.cookie);
        let opened = prev.is_none() && rec.st.opened_ns >= self.start_ns && rec.st.opened_ns != 0;
        self.probe_events += totals
            .probe_events
            .saturating_sub(prev.map_or(0, |k| k.last.st.probe_events));
        let (delta, prev_srtt_sum) = match prev {
            Some(k) if k.read_in + 1 < self.updates => {
                // Carried by the last call: its growth counts from then.
                let carried = carried_to(k, self.last_now_ns);
                (diff(&totals, &carried), k.last.st.srtt_sum_us)
            }
            Some(k) => (diff(&totals, &k.totals()), k.last.st.srtt_sum_us),
            // Born while we watched: everything it did is new.
            None if opened => (totals, 0),
            // Already there when we started: this interval is its baseline.
            None => (FlowCounters::default(), rec.st.srtt_sum_us),
        };
        let probe_delta = delta.probe_events;
        let srtt_mean_us = (probe_delta > 0)
            .then(|| (rec.st.srtt_sum_us.saturating_sub(prev_srtt_sum) / probe_delta) as u32);
        let was_known = prev.is_some();
        // The socket's process, when looked up for its holder: its sample
        // takes it from here rather than looking again.
        let mut looked_up: Option<Option<Owner>> = None;
        if closed {
            // Reported this once, then forgotten.
            if let Some(k) = self.known.remove(&rec.cookie) {
                self.held.remove(k.holder);
            }
        } else {
            // Its holder: the kernel's sender, else (looked up only while
            // unknown) its socket's process.
            let holder = match prev {
                Some(k) if rec.st.owner_tgid == 0 && k.holder.pid != 0 => k.holder,
                _ => HolderKey::of(rec, || {
                    let o = resolve_owner(rec);
                    let pid = o.as_ref().map(|o| o.pid);
                    looked_up = Some(o);
                    pid
                }),
            };
            match prev.map(|k| k.holder) {
                Some(old) if old == holder => {}
                Some(old) => {
                    self.held.remove(old);
                    self.held.add(holder, rec);
                }
                None => self.held.add(holder, rec),
            }
            let moved_ns = if opened || rec.moved_lately != 0 {
                rec.now_ns
            } else {
                prev.map_or(self.start_ns, |k| k.moved_ns)
            };
            let kept = Known {
                last: *rec,
                read_in: self.updates,
                moved_ns,
                holder,
            };
            match self.known.get_mut(&rec.cookie) {
                Some(k) => **k = kept,
                None => {
                    self.known.insert(rec.cookie, Box::new(kept));
                }
            }
        }
        let listed = closed || opened || rec.moved_lately != 0;
        let m = listed.then_some(Measured {
            rec,
            totals,
            delta,
            srtt_mean_us,
            opened,
            closed,
            looked_up,
        });
        (m, was_known)
    }
}

/// A flow's owner: the task the kernel saw sending on it (with its thread),
/// else `resolve_owner`'s (the socket's process found through /proc).
pub(crate) fn owner_of(
    rec: &ts_flow_record,
    resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
) -> Option<Owner> {
    if rec.st.owner_tgid == 0 {
        return resolve_owner(rec);
    }
    Some(Owner {
        pid: rec.st.owner_tgid,
        comm: c_string(&rec.st.owner_comm.map(|c| c as u8)),
        thread: Some(c_string(&rec.st.owner_thread.map(|c| c as u8))).filter(|t| !t.is_empty()),
        cgroup_id: rec.st.owner_cgroup_id,
        cgroup: None,
        workload: None,
    })
}

/// A flow that moved, before its sample is built.
struct Measured<'r> {
    rec: &'r ts_flow_record,
    totals: FlowCounters,
    delta: FlowCounters,
    srtt_mean_us: Option<u32>,
    opened: bool,
    closed: bool,
    /// The owner already looked up through /proc for it, if it was.
    looked_up: Option<Option<Owner>>,
}

/// A flow's sample from its record and what was worked out from it.
fn build(
    m: &Measured<'_>,
    resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
    resolve_iface: &mut dyn FnMut(&ts_flow_record) -> FlowPath,
) -> FlowSample {
    let Measured {
        rec,
        totals,
        delta,
        srtt_mean_us,
        opened,
        closed,
        ref looked_up,
    } = *m;
    let probe_delta = delta.probe_events;
    let owner = match looked_up {
        Some(o) => o.clone(),
        None => owner_of(rec, resolve_owner),
    };
    let (iface, unrouted) = resolve_iface(rec).fields();
    FlowSample {
        id: rec.cookie,
        netns: rec.netns,
        local: SocketAddr::new(ip_of(rec.family, &rec.saddr), rec.lport),
        peer: SocketAddr::new(ip_of(rec.family, &rec.daddr), rec.rport),
        state: tcp_state_name(rec.tcp_state).to_string(),
        ca_state: ca_state_name(rec.ca_state as u32).to_string(),
        owner,
        srtt_us: rec.srtt_us,
        min_rtt_us: if rec.min_rtt_us == u32::MAX {
            0
        } else {
            rec.min_rtt_us
        },
        rttvar_us: rec.mdev_us,
        cwnd: rec.snd_cwnd,
        ssthresh: rec.snd_ssthresh,
        mss: rec.mss_cache,
        packets_out: rec.packets_out,
        retrans_out: rec.retrans_out,
        lost_out: rec.lost_out,
        sacked_out: rec.sacked_out,
        srtt_mean_us,
        srtt_max_us: (probe_delta > 0 && rec.st.srtt_max_us > 0).then_some(rec.st.srtt_max_us),
        cwnd_min: (probe_delta > 0 && rec.st.cwnd_min > 0).then_some(rec.st.cwnd_min),
        notsent_bytes: rec.notsent_bytes,
        cwnd_limited: rec.cwnd_limited != 0,
        totals,
        delta,
        opened,
        closed,
        iface,
        unrouted,
        netns_name: None,
        // Reset by each dump: a window ended since the last one.
        peak_bps: (rec.st.peak_bps > 0).then_some(rec.st.peak_bps),
        kafka: None,
    }
}

/// A flow's totals carried to `now_ns` without a new record: it did not
/// move, so nothing of it grew but the time in its current congestion
/// state, counted to `now_ns` as a new record would have.
fn carried_to(k: &Known, now_ns: u64) -> FlowCounters {
    let (totals, mut ca_time_ns) = counters_of(&k.last);
    if let Some(t) = ca_time_ns.get_mut(k.last.st.ca_state as usize) {
        *t += now_ns.saturating_sub(k.last.now_ns);
    }
    FlowCounters {
        ca_time_us: PerCaState::from_array(ca_time_ns.map(|ns| ns / 1000)),
        ..totals
    }
}

/// The cumulative counters of a record, with the time in the current
/// congestion state counted up to the record's own timestamp; and that time
/// per state in ns.
fn counters_of(rec: &ts_flow_record) -> (FlowCounters, [u64; 5]) {
    let st = &rec.st;
    let hz = kernel_hz(rec.now_ns, rec.now_jiffies);
    let mut ca_time_ns = st.ca_time_ns;
    if (st.ca_state as usize) < ca_time_ns.len() && rec.now_ns > st.ca_since_ns {
        ca_time_ns[st.ca_state as usize] += rec.now_ns - st.ca_since_ns;
    }
    let counters = FlowCounters {
        bytes_sent: rec.bytes_sent,
        bytes_acked: rec.bytes_acked,
        bytes_retrans: rec.bytes_retrans,
        bytes_received: rec.bytes_received,
        segs_out: rec.segs_out as u64,
        data_segs_out: rec.data_segs_out as u64,
        segs_in: rec.segs_in as u64,
        retrans_segs: rec.total_retrans as u64,
        // Known spurious by either sign, counted once (docs/verdicts.md).
        retrans_spurious: rec.dsack_dups.max(st.retrans_undone) as u64,
        retrans_skbs_traced: st.retrans_skbs,
        retrans_segs_traced: st.retrans_segs,
        retrans_failed: st.retrans_failed,
        delivered: rec.delivered as u64,
        probe_events: st.probe_events,
        cwnd_reductions: st.cwnd_reductions as u64,
        waiting_events: st.waiting_events,
        ca_time_us: PerCaState::from_array(ca_time_ns.map(|ns| ns / 1000)),
        ca_entries: PerCaState::from_array(st.ca_entries.map(u64::from)),
        busy_us: jiffies_us(rec.busy_jiffies, hz),
        rwnd_limited_us: jiffies_us(rec.rwnd_limited_jiffies, hz),
        sndbuf_limited_us: jiffies_us(rec.sndbuf_limited_jiffies, hz),
        retrans_dsack: rec.dsack_dups as u64,
        retrans_undone: st.retrans_undone as u64,
        retrans_probes: st.retrans_probes as u64,
        rto_undone: st.rto_undone as u64,
        recovery_undone: st.recovery_undone as u64,
    };
    (counters, ca_time_ns)
}

/// Tick rates a kernel can be built with (CONFIG_HZ).
const HZ_CHOICES: [f64; 4] = [100.0, 250.0, 300.0, 1000.0];

/// The kernel's tick rate, told from one record's two clocks: jiffies start
/// at 2^32 - 300 * HZ at boot (INITIAL_JIFFIES, so that they wrap 5 minutes
/// in) while bpf_ktime counts from boot, so jiffies - 2^32 = HZ * (t - 300 s).
/// None near t = 300 s (too little to divide by), and when the result is not
/// within 5% of a rate a kernel can have.
fn kernel_hz(now_ns: u64, now_jiffies: u64) -> Option<f64> {
    let since_wrap_s = now_ns as f64 / 1e9 - 300.0;
    if since_wrap_s.abs() < 20.0 {
        return None;
    }
    let hz = (now_jiffies as f64 - 4_294_967_296.0) / since_wrap_s;
    HZ_CHOICES
        .into_iter()
        .find(|c| ((hz - c) / c).abs() <= 0.05)
}

fn jiffies_us(jiffies: u32, hz: Option<f64>) -> u64 {
    hz.map_or(0, |hz| (jiffies as f64 * 1e6 / hz).round() as u64)
}

/// Growth from `prev` to `now`. The kernel's 32-bit counters (segs_out,
/// total_retrans, delivered) wrap; a wrapped u32 is corrected, anything else
/// that went backwards counts as zero growth, never as a huge bogus delta.
pub(crate) fn diff(now: &FlowCounters, prev: &FlowCounters) -> FlowCounters {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    let d32 = |a: u64, b: u64| {
        if a >= b {
            a - b
        } else if b <= u32::MAX as u64 && a <= u32::MAX as u64 {
            (a + (1u64 << 32)) - b
        } else {
            0
        }
    };
    let ca = |a: PerCaState<u64>, b: PerCaState<u64>| {
        let (a, b) = (a.to_array(), b.to_array());
        PerCaState::from_array([0, 1, 2, 3, 4].map(|i| d(a[i], b[i])))
    };
    FlowCounters {
        bytes_sent: d(now.bytes_sent, prev.bytes_sent),
        bytes_acked: d(now.bytes_acked, prev.bytes_acked),
        bytes_retrans: d(now.bytes_retrans, prev.bytes_retrans),
        bytes_received: d(now.bytes_received, prev.bytes_received),
        segs_out: d32(now.segs_out, prev.segs_out),
        data_segs_out: d32(now.data_segs_out, prev.data_segs_out),
        segs_in: d32(now.segs_in, prev.segs_in),
        retrans_segs: d32(now.retrans_segs, prev.retrans_segs),
        retrans_spurious: d32(now.retrans_spurious, prev.retrans_spurious),
        retrans_skbs_traced: d(now.retrans_skbs_traced, prev.retrans_skbs_traced),
        retrans_segs_traced: d(now.retrans_segs_traced, prev.retrans_segs_traced),
        retrans_failed: d(now.retrans_failed, prev.retrans_failed),
        delivered: d32(now.delivered, prev.delivered),
        probe_events: d(now.probe_events, prev.probe_events),
        cwnd_reductions: d(now.cwnd_reductions, prev.cwnd_reductions),
        waiting_events: d(now.waiting_events, prev.waiting_events),
        ca_time_us: ca(now.ca_time_us, prev.ca_time_us),
        ca_entries: ca(now.ca_entries, prev.ca_entries),
        busy_us: d(now.busy_us, prev.busy_us),
        rwnd_limited_us: d(now.rwnd_limited_us, prev.rwnd_limited_us),
        sndbuf_limited_us: d(now.sndbuf_limited_us, prev.sndbuf_limited_us),
        retrans_dsack: d32(now.retrans_dsack, prev.retrans_dsack),
        retrans_undone: d32(now.retrans_undone, prev.retrans_undone),
        retrans_probes: d32(now.retrans_probes, prev.retrans_probes),
        rto_undone: d32(now.rto_undone, prev.rto_undone),
        recovery_undone: d32(now.recovery_undone, prev.recovery_undone),
    }
}

/// An address from the record; IPv4-mapped IPv6 is shown as IPv4.
pub(crate) fn ip_of(family: u16, bytes: &[u8; 16]) -> IpAddr {
    if family == AF_INET6 {
        let v6 = Ipv6Addr::from(*bytes);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    } else {
        IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]))
    }
}

pub(crate) fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// TCP state names as `ss` prints them.
pub(crate) fn tcp_state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "UNKNOWN",
    }
}

pub(crate) fn ca_state_name(state: u32) -> &'static str {
    match state {
        0 => "open",
        1 => "disorder",
        2 => "cwr",
        3 => "recovery",
        4 => "loss",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl FlowTable {
        /// `update` with every tracked socket's record (a full dump).
        fn update_all(
            &mut self,
            live: &[ts_flow_record],
            closed: &[ts_flow_record],
            resolve_owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>,
            resolve_iface: &mut dyn FnMut(&ts_flow_record) -> Option<String>,
        ) -> Vec<FlowSample> {
            let mut path =
                |r: &ts_flow_record| resolve_iface(r).map_or(FlowPath::Unknown, FlowPath::Iface);
            self.update(live, closed, true, 0, resolve_owner, &mut path)
                .0
        }
    }

    fn record(cookie: u64, opened_ns: u64, bytes: u64, retrans: u32) -> ts_flow_record {
        let mut r = ts_flow_record {
            cookie,
            family: 2,
            saddr: [10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            daddr: [10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            lport: 5201,
            rport: 40000,
            tcp_state: 1,
            bytes_sent: bytes,
            total_retrans: retrans,
            moved_lately: 1,
            ..Default::default()
        };
        r.st.opened_ns = opened_ns;
        r
    }

    /// Retransmits of a loss episode the kernel undid are spurious even
    /// without a D-SACK; one known both ways (undone, then D-SACKed a
    /// little later, perhaps an interval later) counts once.
    #[test]
    fn undone_retransmits_are_spurious_and_counted_once_with_their_dsacks() {
        let mut t = FlowTable::new(1_000);
        let rec = |retrans: u32, dsack: u32, undone: u32, probes: u32| {
            let mut r = record(9, 1, 1_000, retrans);
            r.dsack_dups = dsack;
            r.st.retrans_undone = undone;
            r.st.retrans_probes = probes;
            r.st.rto_undone = (undone > 0) as u32;
            r
        };
        let none = &mut |_: &ts_flow_record| None;
        let s = t.update_all(&[rec(0, 0, 0, 0)], &[], none, &mut |_| None);
        assert_eq!(s[0].delta.retrans_spurious, 0);
        // A probe, then the timeout it led to, undone (F-RTO): 2 spurious,
        // no D-SACK (the receiver does not send them).
        let s = t.update_all(&[rec(2, 0, 2, 1)], &[], none, &mut |_| None);
        let d = s[0].delta;
        assert_eq!((d.retrans_segs, d.retrans_spurious), (2, 2));
        assert_eq!(
            (d.retrans_undone, d.retrans_dsack, d.retrans_probes),
            (2, 0, 1)
        );
        assert_eq!(d.rto_undone, 1);
        assert_eq!(d.lossy_retransmits(), 0);
        // Their D-SACKs an interval later: not counted again.
        let s = t.update_all(&[rec(2, 2, 2, 1)], &[], none, &mut |_| None);
        assert_eq!(s[0].delta.retrans_spurious, 0);
        assert_eq!(s[0].delta.retrans_dsack, 2);
        // Reordering: 3 fast retransmits, all D-SACKed, none undone.
        let s = t.update_all(&[rec(5, 5, 2, 1)], &[], none, &mut |_| None);
        assert_eq!(
            (s[0].delta.retrans_segs, s[0].delta.retrans_spurious),
            (3, 3)
        );
    }

    /// The open flows by holder follow flows as they open, change owner
    /// and close; which are idle (not moved for 60 s) is counted at full
    /// dumps, from the latest record that found each moving, or from the
    /// observer's start for one that has not moved since.
    #[test]
    fn holders_count_open_flows_and_the_idle_at_full_dumps() {
        let s = 1_000_000_000u64;
        let mut t = FlowTable::new(s);
        let at = |cookie: u64, now: u64, moved: bool, tgid: u32| {
            let mut r = record(cookie, 1, 10, 0);
            r.now_ns = now * s;
            r.moved_lately = moved as u8;
            r.st.owner_tgid = tgid;
            r.sock_ino = cookie;
            r
        };
        // The socket's process through /proc: 41 for every socket.
        let owner = &mut |r: &ts_flow_record| {
            Some(Owner {
                pid: 41,
                comm: "pool".into(),
                thread: None,
                cgroup_id: 0,
                cgroup: None,
                workload: None,
            })
            .filter(|_| r.sock_ino != 0)
        };
        let held = |t: &FlowTable| {
            let mut v: Vec<(u32, u64, u64, u64)> = t
                .held()
                .iter()
                .map(|(k, h)| (k.pid, h.open, h.idle, h.longest_idle_ns / s))
                .collect();
            v.sort();
            v
        };
        // Seeded at 2 s: two idle (older than the observer) and one the
        // kernel saw process 7 send on.
        let full = |t: &mut FlowTable,
                    recs: &[ts_flow_record],
                    now: u64,
                    owner: &mut dyn FnMut(&ts_flow_record) -> Option<Owner>| {
            t.update(recs, &[], true, now * s, owner, &mut |_| FlowPath::Unknown);
        };
        full(
            &mut t,
            &[at(1, 2, false, 0), at(2, 2, false, 0), at(3, 2, true, 7)],
            2,
            owner,
        );
        assert_eq!(held(&t), [(7, 1, 0, 0), (41, 2, 0, 0)]);
        // A minute later, a full dump: the two still idle since the start
        // (1 s), process 7's moving. The second is now sent on by 41.
        full(
            &mut t,
            &[at(1, 62, false, 0), at(2, 62, true, 41), at(3, 62, true, 7)],
            62,
            owner,
        );
        assert_eq!(held(&t), [(7, 1, 0, 0), (41, 2, 1, 61)]);
        // Closed, and vanished from the next full dump: gone.
        t.update(
            &[],
            &[at(3, 70, false, 7)],
            false,
            70 * s,
            owner,
            &mut |_| FlowPath::Unknown,
        );
        assert_eq!(held(&t), [(41, 2, 1, 61)]);
        full(&mut t, &[at(2, 130, false, 41)], 130, owner);
        assert_eq!(held(&t), [(41, 1, 1, 68)]);
    }

    #[test]
    fn preexisting_flow_starts_as_baseline_then_counts_growth() {
        let mut t = FlowTable::new(1_000);
        let s = t.update_all(&[record(7, 0, 5_000, 3)], &[], &mut |_| None, &mut |_| None);
        assert_eq!(s[0].delta.bytes_sent, 0);
        assert!(!s[0].opened);
        let s = t.update_all(&[record(7, 0, 8_000, 5)], &[], &mut |_| None, &mut |_| None);
        assert_eq!(s[0].delta.bytes_sent, 3_000);
        assert_eq!(s[0].delta.retrans_segs, 2);
        assert_eq!(s[0].local.to_string(), "10.0.0.1:5201");
    }

    #[test]
    fn flow_opened_while_watching_counts_from_zero() {
        let mut t = FlowTable::new(1_000);
        let s = t.update_all(
            &[record(9, 2_000, 4_000, 1)],
            &[],
            &mut |_| None,
            &mut |_| None,
        );
        assert!(s[0].opened);
        assert_eq!(s[0].delta.bytes_sent, 4_000);
    }

    #[test]
    fn closed_flow_is_reported_once_then_forgotten() {
        let mut t = FlowTable::new(0);
        t.update_all(&[record(3, 0, 100, 0)], &[], &mut |_| None, &mut |_| None);
        let mut last = record(3, 0, 200, 0);
        last.st.ifindex = 2;
        let s = t.update_all(&[record(3, 0, 150, 0)], &[last], &mut |_| None, &mut |r| {
            (r.st.ifindex == 2).then(|| "eth0".to_string())
        });
        assert_eq!(s.len(), 1, "the close record replaces the live one");
        assert!(s[0].closed);
        assert_eq!(s[0].iface.as_deref(), Some("eth0"), "from the close record");
        assert_eq!(s[0].delta.bytes_sent, 100);
        let s = t.update_all(&[], &[], &mut |_| None, &mut |_| None);
        assert!(s.is_empty());
    }

    #[test]
    fn probe_events_count_live_and_closed_flows() {
        let mut t = FlowTable::new(0);
        let mut a = record(1, 0, 0, 0);
        a.st.probe_events = 10;
        let mut b = record(2, 0, 0, 0);
        b.st.probe_events = 5;
        t.update_all(&[a, b], &[], &mut |_| None, &mut |_| None);
        assert_eq!(t.probe_events(), 15);
        b.st.probe_events = 7;
        t.update_all(&[a], &[b], &mut |_| None, &mut |_| None);
        assert_eq!(t.probe_events(), 17, "a closed flow keeps its final count");
        t.update_all(&[], &[], &mut |_| None, &mut |_| None);
        assert_eq!(t.probe_events(), 17, "a vanished flow keeps its last count");
    }

    #[test]
    fn a_flow_not_read_is_idle_and_carried_with_no_growth_but_its_state_time() {
        let mut t = FlowTable::new(0);
        let mut a = record(1, 0, 5_000, 2);
        a.now_ns = 10_000_000;
        a.st.ca_since_ns = 4_000_000; // open for 6 ms at the read
        a.st.probe_events = 3;
        let b = record(2, 0, 100, 0);
        t.update_all(&[a, b], &[], &mut |_| None, &mut |_| None);
        // b moved, a did not: a is carried (not listed), 1 ms after its read.
        let mut b2 = record(2, 0, 300, 0);
        b2.now_ns = 11_000_000;
        let mut owner_lookups = 0;
        let (s, counts) = t.update(
            &[b2],
            &[],
            false,
            11_000_000,
            &mut |_| {
                owner_lookups += 1;
                None
            },
            &mut |_| FlowPath::Unknown,
        );
        assert_eq!(
            counts,
            UpdateCounts {
                read: 1,
                carried: 1,
                idle: 1
            }
        );
        assert_eq!(s.iter().map(|f| f.id).collect::<Vec<_>>(), [2]);
        assert_eq!(owner_lookups, 1, "only the listed flow is looked up");
        assert_eq!(s[0].delta.bytes_sent, 200);
        // Read again 1 ms later: its growth is one interval's, its state's
        // time having run on while it was carried.
        let mut a2 = record(1, 0, 6_000, 2);
        a2.now_ns = 12_000_000;
        a2.st.ca_since_ns = 4_000_000;
        a2.st.probe_events = 3;
        let (s, counts) = t.update(&[a2], &[], false, 12_000_000, &mut |_| None, &mut |_| {
            FlowPath::Unknown
        });
        assert_eq!(
            counts,
            UpdateCounts {
                read: 1,
                carried: 1,
                idle: 1
            }
        );
        let a3 = s.iter().find(|f| f.id == 1).unwrap();
        assert_eq!(a3.delta.bytes_sent, 1_000);
        assert_eq!(a3.totals.ca_time_us.open, 8_000);
        assert_eq!(
            a3.delta.ca_time_us.open, 1_000,
            "not the 2 ms since its last read"
        );
        assert_eq!(t.probe_events(), 3);
    }

    #[test]
    fn a_flow_read_but_not_moved_lately_is_idle_unless_it_opened() {
        let mut t = FlowTable::new(1_000);
        let mut quiet = record(1, 0, 10, 0);
        quiet.moved_lately = 0;
        let mut new = record(2, 2_000, 10, 0);
        new.moved_lately = 0;
        let (s, counts) = t.update(&[quiet, new], &[], true, 0, &mut |_| None, &mut |_| {
            FlowPath::Unknown
        });
        assert_eq!(s.iter().map(|f| f.id).collect::<Vec<_>>(), [2]);
        assert!(s[0].opened);
        assert_eq!(
            counts,
            UpdateCounts {
                read: 2,
                carried: 0,
                idle: 1
            }
        );
        // Still counted, and its growth is counted once it moves.
        let mut moved = record(1, 0, 50, 0);
        moved.moved_lately = 1;
        let (s, _) = t.update(&[moved], &[], false, 0, &mut |_| None, &mut |_| {
            FlowPath::Unknown
        });
        assert_eq!(s.iter().find(|f| f.id == 1).unwrap().delta.bytes_sent, 40);
    }

    #[test]
    fn a_carried_flow_is_forgotten_by_its_close_or_by_a_full_dump_without_it() {
        let mut t = FlowTable::new(0);
        t.update_all(
            &[record(1, 0, 10, 0), record(2, 0, 10, 0)],
            &[],
            &mut |_| None,
            &mut |_| None,
        );
        let (s, counts) = t.update(
            &[],
            &[record(1, 0, 20, 0)],
            false,
            0,
            &mut |_| None,
            &mut |_| FlowPath::Unknown,
        );
        assert_eq!(s.len(), 1);
        assert!(s[0].id == 1 && s[0].closed && s[0].delta.bytes_sent == 10);
        assert_eq!((counts.carried, counts.idle), (1, 1), "2 is idle");
        // 2's close event was lost: a partial dump carries it, a full one
        // forgets it.
        let (_, counts) = t.update(&[], &[], false, 0, &mut |_| None, &mut |_| {
            FlowPath::Unknown
        });
        assert_eq!((counts.carried, counts.idle), (1, 1));
        let (s, counts) = t.update(&[], &[], true, 0, &mut |_| None, &mut |_| FlowPath::Unknown);
        assert!(s.is_empty());
        assert_eq!(counts, UpdateCounts::default());
        let (_, counts) = t.update(&[], &[], false, 0, &mut |_| None, &mut |_| {
            FlowPath::Unknown
        });
        assert_eq!(counts, UpdateCounts::default());
    }

    #[test]
    fn u32_counter_wrap_is_corrected_and_backwards_is_zero() {
        let prev = FlowCounters {
            segs_out: u32::MAX as u64 - 1,
            bytes_sent: 10,
            ..Default::default()
        };
        let now = FlowCounters {
            segs_out: 3,
            bytes_sent: 5,
            ..Default::default()
        };
        let d = diff(&now, &prev);
        assert_eq!(d.segs_out, 5);
        assert_eq!(d.bytes_sent, 0);
    }

    #[test]
    fn ipv4_mapped_addresses_show_as_ipv4() {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[192, 0, 2, 7]);
        assert_eq!(ip_of(AF_INET6, &b).to_string(), "192.0.2.7");
    }
}
