//! What an interval does not list one by one.
//!
//! A storm of 50,000 sockets opened and closed in one interval made a
//! snapshot of 70 MB, longer than any reader takes (a recording's line
//! limit, `MAX_LINE_BYTES`), so the intervals an incident review needs most
//! were the ones skipped. An interval therefore lists at most so many flows
//! and events; the others are not dropped but folded: flows summed per
//! interface ([`FoldedFlows`]), events counted. The analysis adds the folded
//! sums to each interface's figures, so a folded interval is judged on all
//! of its traffic, and every sink says how much was folded.

use super::is_zero;
use serde::{Deserialize, Serialize};

use super::snapshot::{FlowCounters, FlowEvent, FlowSample, PerCaState, Snapshot};

/// Flows listed one by one per interval by default (`--list-flows`): about
/// 1.5 KB each once encoded, so an interval stays near 15 MB.
pub const DEFAULT_LISTED_FLOWS: usize = 10_000;
/// The most `--list-flows` allows: at a generous 2.5 KB per encoded flow
/// (long cgroup paths and pod names) an interval stays under 64 MiB.
pub(crate) const MAX_LISTED_FLOWS: usize = 25_000;
/// Events listed per interval; the rest are counted in `Folded::events`.
/// About 100 bytes each once encoded.
pub(crate) const MAX_LISTED_EVENTS: usize = 100_000;

/// Flows of one interface summed, for an interval that had more to list
/// than the limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoldedFlows {
    /// The interface the flows used, as `FlowSample::iface` (None: not
    /// known, counted on every interface as such flows are).
    pub iface: Option<String>,
    /// As `FlowSample::unrouted`: flows found to pass through none.
    #[serde(default, skip_serializing_if = "crate::model::is_false")]
    pub unrouted: bool,
    /// How many flows were folded, and of them how many opened, closed and
    /// sent data in the interval.
    pub flows: u64,
    pub opened: u64,
    pub closed: u64,
    pub sending: u64,
    /// Their growth over the interval, summed.
    pub delta: FlowCounters,
}

/// What the interval did not list. Empty (and absent from a recording) in
/// most intervals; absent in recordings before format 1.9.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folded {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FoldedFlows>,
    /// Events not listed in `Snapshot::events`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub events: u64,
}

impl Folded {
    pub(crate) fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.events == 0
    }

    /// Flows folded, over every interface.
    pub(crate) fn flow_count(&self) -> u64 {
        self.flows.iter().map(|f| f.flows).sum()
    }
}

impl FlowCounters {
    /// Adds `other` to these counters, field by field.
    pub(crate) fn add(&mut self, other: &FlowCounters) {
        self.bytes_sent += other.bytes_sent;
        self.bytes_acked += other.bytes_acked;
        self.bytes_retrans += other.bytes_retrans;
        self.bytes_received += other.bytes_received;
        self.segs_out += other.segs_out;
        self.data_segs_out += other.data_segs_out;
        self.segs_in += other.segs_in;
        self.retrans_segs += other.retrans_segs;
        self.retrans_spurious += other.retrans_spurious;
        self.retrans_skbs_traced += other.retrans_skbs_traced;
        self.retrans_segs_traced += other.retrans_segs_traced;
        self.retrans_failed += other.retrans_failed;
        self.delivered += other.delivered;
        self.probe_events += other.probe_events;
        self.cwnd_reductions += other.cwnd_reductions;
        self.waiting_events += other.waiting_events;
        self.ca_time_us = add_ca(&self.ca_time_us, &other.ca_time_us);
        self.ca_entries = add_ca(&self.ca_entries, &other.ca_entries);
        self.busy_us += other.busy_us;
        self.rwnd_limited_us += other.rwnd_limited_us;
        self.sndbuf_limited_us += other.sndbuf_limited_us;
        self.retrans_dsack += other.retrans_dsack;
        self.retrans_undone += other.retrans_undone;
        self.retrans_probes += other.retrans_probes;
        self.rto_undone += other.rto_undone;
        self.recovery_undone += other.recovery_undone;
    }
}

fn add_ca(a: &PerCaState<u64>, b: &PerCaState<u64>) -> PerCaState<u64> {
    let (a, b) = (a.to_array(), b.to_array());
    PerCaState::from_array(std::array::from_fn(|i| a[i] + b[i]))
}

/// Whether a flow's growth shows a sign of loss or backoff: such flows are
/// listed before any busier flow that showed none, since they are what a
/// verdict's evidence and the backoff ranking name.
fn showed_trouble(d: &FlowCounters) -> bool {
    d.lossy_retransmits() > 0
        || d.retrans_failed > 0
        || d.cwnd_reductions > 0
        || d.ca_time_us.recovery + d.ca_time_us.loss > 0
}

/// Bytes moved either way.
fn traffic(d: &FlowCounters) -> u64 {
    d.bytes_sent + d.bytes_received
}

/// Of `n` flows, which `max` to list (true) and which to fold: those that
/// showed trouble first, then the busiest, then the lowest id (a stable
/// order). `flow(i)`: flow i's id and growth over the interval.
pub(crate) fn choose_listed<'a>(
    n: usize,
    max: usize,
    flow: impl Fn(usize) -> (u64, &'a FlowCounters),
) -> Vec<bool> {
    if n <= max {
        return vec![true; n];
    }
    let mut rank: Vec<usize> = (0..n).collect();
    rank.sort_by(|&a, &b| {
        let ((ia, da), (ib, db)) = (flow(a), flow(b));
        showed_trouble(db)
            .cmp(&showed_trouble(da))
            .then(traffic(db).cmp(&traffic(da)))
            .then(ia.cmp(&ib))
    });
    let mut keep = vec![false; n];
    for &i in &rank[..max] {
        keep[i] = true;
    }
    keep
}

impl Snapshot {
    /// Lists at most `max_flows` flows and `max_events` events; folds the
    /// rest into `self.folded` (added to what is already folded there). See
    /// [`fold`].
    pub(crate) fn fold(&mut self, max_flows: usize, max_events: usize) -> usize {
        fold(
            &mut self.flows,
            &mut self.events,
            &mut self.folded,
            max_flows,
            max_events,
        )
    }
}

/// Keeps at most `max_flows` of `flows` and `max_events` of `events`, and
/// folds the rest into `folded`. The flows kept are those that showed
/// trouble, then the busiest (bytes sent and received); they keep their
/// order; the events kept are the first. Returns how many flows were
/// folded. A free function so that the collector can fold before it names
/// the flows' workloads and namespaces, work a folded flow does not need.
pub(crate) fn fold(
    flows: &mut Vec<FlowSample>,
    events: &mut Vec<FlowEvent>,
    folded: &mut Folded,
    max_flows: usize,
    max_events: usize,
) -> usize {
    if events.len() > max_events {
        folded.events += (events.len() - max_events) as u64;
        events.truncate(max_events);
    }
    if flows.len() <= max_flows {
        return 0;
    }
    let keep = choose_listed(flows.len(), max_flows, |i| (flows[i].id, &flows[i].delta));
    let all = std::mem::take(flows);
    let count = all.len() - max_flows;
    for (f, kept) in all.into_iter().zip(keep) {
        if kept {
            flows.push(f);
        } else {
            folded.add_counters(f.iface.clone(), f.unrouted, f.opened, f.closed, &f.delta);
        }
    }
    count
}

/// `snap` encoded by `encode` in at most `limit` bytes: as it is when it
/// fits (the listing limits make sure it does at any `--list-flows`), else
/// a copy with half as many flows and events listed, and so on, the rest
/// folded. The safety net under the limits, so that what a writer writes a
/// reader can read: owner and pod names longer than anyone measured must
/// not make an interval unreadable. Returns the bytes and the flows folded
/// here.
pub(crate) fn encode_within<E>(
    snap: &Snapshot,
    limit: usize,
    mut encode: impl FnMut(&Snapshot) -> Result<Vec<u8>, E>,
) -> Result<(Vec<u8>, usize), E> {
    let bytes = encode(snap)?;
    if bytes.len() <= limit {
        return Ok((bytes, 0));
    }
    let mut smaller = snap.clone();
    let mut folded = 0;
    loop {
        let (flows, events) = (smaller.flows.len() / 2, smaller.events.len() / 2);
        folded += smaller.fold(flows, events);
        let bytes = encode(&smaller)?;
        if bytes.len() <= limit || (smaller.flows.is_empty() && smaller.events.is_empty()) {
            return Ok((bytes, folded));
        }
    }
}

impl Snapshot {
    /// "N flows folded (past --list-flows: summed per interface), M events
    /// not listed", or None when the interval listed everything.
    pub(crate) fn folded_text(&self) -> Option<String> {
        let flows = self.folded.flow_count();
        let parts: Vec<String> = [
            (flows > 0).then(|| {
                format!("{flows} flows folded (past --list-flows: summed per interface, in every verdict)")
            }),
            (self.folded.events > 0).then(|| format!("{} events not listed", self.folded.events)),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

impl FoldedFlows {
    /// As [`crate::model::snapshot::FlowSample::counts_for`].
    pub fn counts_for(&self, iface: &str) -> bool {
        crate::model::snapshot::counts_for(self.iface.as_deref(), self.unrouted, iface)
    }
}

impl Folded {
    /// Adds one flow (its interface or none, whether it opened or closed,
    /// its growth) to its interface's sums.
    pub(crate) fn add_counters(
        &mut self,
        iface: Option<String>,
        unrouted: bool,
        opened: bool,
        closed: bool,
        delta: &FlowCounters,
    ) {
        let at = self
            .flows
            .iter()
            .position(|g| g.iface == iface && g.unrouted == unrouted);
        let slot = match at {
            Some(i) => &mut self.flows[i],
            None => {
                self.flows.push(FoldedFlows {
                    iface,
                    unrouted,
                    ..FoldedFlows::default()
                });
                self.flows.last_mut().expect("just pushed")
            }
        };
        slot.flows += 1;
        slot.opened += opened as u64;
        slot.closed += closed as u64;
        slot.sending += (delta.bytes_sent > 0 || delta.segs_out > 0) as u64;
        slot.delta.add(delta);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(id: u64, sent: u64, retrans: u64, iface: Option<&str>) -> FlowSample {
        let mut f = FlowSample::example(id);
        f.iface = iface.map(str::to_string);
        f.delta.bytes_sent = sent;
        f.delta.segs_out = sent / 1000;
        f.delta.retrans_segs = retrans;
        f.closed = id % 2 == 0;
        f
    }

    fn snap(flows: Vec<FlowSample>) -> Snapshot {
        let mut s = Snapshot::example(0);
        s.flows = flows;
        s
    }

    #[test]
    fn under_the_limit_nothing_moves() {
        let mut s = snap((0..5).map(|i| flow(i, 1000 * i, 0, Some("eth0"))).collect());
        assert_eq!(s.fold(5, 10), 0);
        assert_eq!(s.flows.len(), 5);
        assert!(s.folded.is_empty());
    }

    #[test]
    fn troubled_flows_first_then_the_busiest_and_the_rest_summed_per_interface() {
        let mut flows: Vec<FlowSample> = (1..=6)
            .map(|i| {
                flow(
                    i,
                    10_000 * i,
                    0,
                    Some(if i % 2 == 0 { "eth0" } else { "eth1" }),
                )
            })
            .collect();
        // The least busy flow retransmitted: it is listed all the same.
        flows[0].delta.retrans_segs = 3;
        let before: FlowCounters = flows.iter().fold(FlowCounters::default(), |mut a, f| {
            a.add(&f.delta);
            a
        });
        let mut s = snap(flows);
        assert_eq!(s.fold(3, 10), 3);
        let ids: Vec<u64> = s.flows.iter().map(|f| f.id).collect();
        assert_eq!(ids, vec![1, 5, 6], "kept in their order");
        // Folded: 2 and 4 on eth0, 3 on eth1.
        let eth0 = s
            .folded
            .flows
            .iter()
            .find(|g| g.iface.as_deref() == Some("eth0"))
            .unwrap();
        assert_eq!((eth0.flows, eth0.closed, eth0.sending), (2, 2, 2));
        assert_eq!(eth0.delta.bytes_sent, 60_000);
        assert_eq!(s.folded.flow_count(), 3);
        // Nothing lost: listed plus folded is what there was.
        let mut after = FlowCounters::default();
        s.flows.iter().for_each(|f| after.add(&f.delta));
        s.folded.flows.iter().for_each(|g| after.add(&g.delta));
        assert_eq!(after, before);
    }

    #[test]
    fn an_interval_too_long_for_the_limit_is_folded_until_it_fits() {
        let mut s = snap(
            (0..64)
                .map(|i| {
                    let mut f = flow(i, 1000 + i, 0, Some("eth0"));
                    // Names far longer than any measured.
                    f.netns_name = Some("n".repeat(2000));
                    f
                })
                .collect(),
        );
        s.seq = 9;
        let encode = |s: &Snapshot| serde_json::to_vec(s);
        let whole = encode(&s).unwrap().len();
        let (bytes, folded) = encode_within(&s, whole / 5, encode).unwrap();
        assert!(bytes.len() <= whole / 5, "{} > {}", bytes.len(), whole / 5);
        let back: Snapshot = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back.flows.len() + folded, 64);
        assert_eq!(back.folded.flow_count() as usize, folded);
        let sent: u64 = back.flows.iter().map(|f| f.delta.bytes_sent).sum::<u64>()
            + back.folded.flows[0].delta.bytes_sent;
        assert_eq!(sent, (0..64).map(|i| 1000 + i).sum::<u64>());
        // What fits is written as it is.
        assert_eq!(
            encode_within(&s, whole, encode).unwrap(),
            (encode(&s).unwrap(), 0)
        );
    }

    #[test]
    fn events_past_the_limit_are_counted() {
        let mut s = snap(Vec::new());
        s.events = (0..7)
            .map(|i| crate::model::snapshot::FlowEvent {
                mono_ns: i,
                flow_id: i,
                netns: 1,
                kind: crate::model::snapshot::FlowEventKind::Close,
            })
            .collect();
        s.fold(10, 4);
        assert_eq!((s.events.len(), s.folded.events), (4, 3));
        assert_eq!(
            s.events.last().unwrap().mono_ns,
            3,
            "the first ones are kept"
        );
    }
}
