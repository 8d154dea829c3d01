//! The cluster view (issue 44, item 4): the recordings of several hosts
//! (the brokers of a Kafka cluster) on one time axis. Per host its
//! episodes; per episode which Kafka role and group carried the host's
//! traffic, and what every other host saw at the same time: its own
//! verdicts, and its flows whose peer is the episode's host, by Kafka role,
//! during the episode against the rest of the time (a follower's fetches
//! from a shaped leader slow: their RTT inflates, their rate falls).
//!
//! Pure, in two steps as the report reads the files twice: a
//! [`HostScan`] per host learns its addresses (the local addresses of its
//! flows: what the other hosts see as its peer address) and which broker
//! id the others' Kafka lookups gave it; then a [`ClusterTracker`], told
//! every host's episodes, is pushed every host's snapshots again and sums
//! what is said above. No I/O, no clock: times are the snapshots' own wall
//! clock (`unix_ms`), one axis for all hosts.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::Verdict;
use crate::model::kafka::KafkaRole;
use crate::model::snapshot::{FlowSample, Snapshot};

/// An IPv4-mapped IPv6 address as IPv4 (a dual-stack socket's view).
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An interval's middle on the wall clock (`unix_ms` is its end).
fn middle_ms(snap: &Snapshot) -> u64 {
    snap.unix_ms.saturating_sub(snap.interval_ns / 2_000_000)
}

/// What one pass over a host's snapshots learns for the second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostScan {
    /// Local addresses of the host's own flows (not loopback, not of other
    /// network namespaces), with the flow-intervals that used each.
    pub addrs: BTreeMap<IpAddr, u64>,
    /// (peer address, broker id) as this host's Kafka lookup placed its
    /// peers: the other brokers' addresses, by id.
    pub peer_brokers: BTreeMap<(IpAddr, i32), u64>,
    /// The first interval's start and the last one's end (wall clock, ms).
    pub first_ms: Option<u64>,
    pub last_ms: Option<u64>,
    pub intervals: u64,
}

impl HostScan {
    pub fn push(&mut self, snap: &Snapshot) {
        let start = snap.unix_ms.saturating_sub(snap.interval_ns / 1_000_000);
        self.first_ms = Some(self.first_ms.map_or(start, |f| f.min(start)));
        self.last_ms = Some(self.last_ms.map_or(snap.unix_ms, |l| l.max(snap.unix_ms)));
        self.intervals += 1;
        for f in &snap.flows {
            if f.netns_name.is_some() {
                continue;
            }
            let local = unmapped(f.local.ip());
            if !local.is_loopback() && !local.is_unspecified() {
                *self.addrs.entry(local).or_default() += 1;
            }
            if let Some(b) = f.kafka.as_ref().and_then(|k| k.who.broker) {
                *self
                    .peer_brokers
                    .entry((unmapped(f.peer.ip()), b))
                    .or_default() += 1;
            }
        }
    }
}

/// Each host's broker id, as the other hosts' Kafka lookups placed its
/// addresses (the id most flow-intervals gave it; None when no other host
/// named it, or two ids tie).
pub fn broker_ids(scans: &[HostScan]) -> Vec<Option<i32>> {
    scans
        .iter()
        .enumerate()
        .map(|(i, me)| {
            let mut votes: BTreeMap<i32, u64> = BTreeMap::new();
            for (j, other) in scans.iter().enumerate() {
                if i == j {
                    continue;
                }
                for (&(ip, id), &n) in &other.peer_brokers {
                    if me.addrs.contains_key(&ip) {
                        *votes.entry(id).or_default() += n;
                    }
                }
            }
            let best = votes.values().copied().max()?;
            let mut top = votes.iter().filter(|(_, &n)| n == best);
            let (&id, _) = top.next()?;
            top.next().is_none().then_some(id)
        })
        .collect()
}

/// Whether a verdict is worth a look on the other hosts (not idle, not
/// free flow).
pub fn notable(v: Verdict) -> bool {
    !matches!(v, Verdict::Idle | Verdict::FreeFlow)
}

/// One episode of a host, on the wall clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanEpisode {
    pub iface: String,
    pub verdict: Verdict,
    pub start_ms: u64,
    pub end_ms: u64,
    /// The deciding direction is inbound (bw_in): shares are of bytes
    /// received, else of bytes sent.
    #[serde(default)]
    pub inbound: bool,
}

impl SpanEpisode {
    fn covers(&self, ms: u64) -> bool {
        self.start_ms <= ms && ms <= self.end_ms
    }
}

/// What the tracker is told of one host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostPlan {
    pub name: String,
    pub addrs: BTreeSet<IpAddr>,
    /// Every episode of the host (calm ones too: the other hosts' verdicts
    /// are listed from them).
    pub episodes: Vec<SpanEpisode>,
}

/// A role, by whom: the key flows to a peer host are summed under.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RoleKey {
    /// None: the flow has no Kafka identity (no lookup, or none of the
    /// cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<KafkaRole>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl RoleKey {
    fn of(f: &FlowSample) -> RoleKey {
        match &f.kafka {
            None => RoleKey {
                role: None,
                broker: None,
                group: None,
            },
            Some(k) => RoleKey {
                role: Some(k.who.role),
                broker: k.who.broker,
                group: k.who.group.clone(),
            },
        }
    }

    /// In words: `replication from leader 1`, `consume orders`, `no Kafka
    /// role`.
    pub fn label(&self) -> String {
        let inert = |s: &str| crate::shared::terminal_text::inert(s).into_owned();
        let mut out = match (self.role, self.broker) {
            (None, _) => "no Kafka role".to_string(),
            (Some(KafkaRole::ReplicationToFollower), Some(b)) => {
                format!("replication to follower {b}")
            }
            (Some(KafkaRole::ReplicationFromLeader), Some(b)) => {
                format!("replication from leader {b}")
            }
            (Some(KafkaRole::OtherClient), Some(b)) => format!("other client of broker {b}"),
            (Some(r), _) => r.as_str().replace('_', " "),
        };
        if let Some(g) = &self.group {
            out.push_str(&format!(" {}", inert(g)));
        }
        out
    }
}

/// Figures of the flows of one host to another, summed over a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerFigures {
    /// Seconds of the observing host's intervals summed in.
    pub secs: f64,
    /// The most flows seen in one interval.
    pub flows: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub data_segs_out: u64,
    /// Retransmits that may have repaired a loss.
    pub retrans_segs: u64,
    /// srtt over min RTT, the mean and the largest over the flow-intervals
    /// that had both; None when none had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_inflation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_inflation_peak: Option<f64>,
    /// srtt less min RTT, the mean over the same flow-intervals, in
    /// microseconds: the queuing delay in time, the same at any base RTT
    /// (a ratio over a base of microseconds runs to hundreds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_delay_us: Option<f64>,
    #[serde(skip)]
    delay_sum_us: f64,
    #[serde(skip)]
    inflation_sum: f64,
    #[serde(skip)]
    inflation_n: u64,
}

impl PeerFigures {
    pub fn tx_bps(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.bytes_sent as f64 * 8.0 / self.secs)
    }

    pub fn rx_bps(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.bytes_received as f64 * 8.0 / self.secs)
    }

    /// Retransmits as % of data segments sent.
    pub fn retrans_pct(&self) -> Option<f64> {
        (self.data_segs_out > 0)
            .then(|| self.retrans_segs as f64 * 100.0 / self.data_segs_out as f64)
    }

    fn add_flow(&mut self, f: &FlowSample) {
        self.bytes_sent += f.delta.bytes_sent;
        self.bytes_received += f.delta.bytes_received;
        self.data_segs_out += f.delta.data_segs_out;
        self.retrans_segs += f.delta.lossy_retransmits();
        if f.min_rtt_us > 0 {
            let srtt = f.srtt_mean_us.unwrap_or(f.srtt_us);
            if srtt > 0 {
                let x = srtt as f64 / f.min_rtt_us as f64;
                self.inflation_sum += x;
                self.delay_sum_us += srtt.saturating_sub(f.min_rtt_us) as f64;
                self.inflation_n += 1;
                self.added_delay_us = Some(self.delay_sum_us / self.inflation_n as f64);
                self.rtt_inflation = Some(self.inflation_sum / self.inflation_n as f64);
                self.rtt_inflation_peak = Some(self.rtt_inflation_peak.map_or(x, |p| p.max(x)));
            }
        }
    }
}

/// One role's flows from an observing host to the episode's host: during
/// the episode, and at the other times both were recorded (no notable
/// episode of the episode's host under way).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerView {
    #[serde(flatten)]
    pub key: RoleKey,
    pub label: String,
    pub during: PeerFigures,
    /// None when the observing host never saw the role's flows to that
    /// host outside the episodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usual: Option<PeerFigures>,
}

/// Another host's episode overlapping the span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverlapVerdict {
    pub iface: String,
    pub verdict: Verdict,
    /// Seconds of it within the span.
    pub secs: f64,
}

/// What another host saw during an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OtherHostView {
    /// Its index in the hosts given.
    pub host: usize,
    pub name: String,
    /// Seconds of its intervals within the span (0: not recorded then).
    pub secs: f64,
    /// Its episodes overlapping the span, longest first.
    pub verdicts: Vec<OverlapVerdict>,
    /// Its flows whose peer is the episode's host, by role, most bytes
    /// first.
    pub peers: Vec<PeerView>,
}

/// One role's (or group's) share of an episode's traffic on its interface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carrier {
    #[serde(flatten)]
    pub key: RoleKey,
    pub label: String,
    pub bytes: u64,
    /// Of every flow's bytes on the interface in the deciding direction.
    pub pct: f64,
}

/// One notable episode with what the cluster saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeView {
    pub host: usize,
    /// Its index in the host's plan.
    pub episode: usize,
    #[serde(flatten)]
    pub span: SpanEpisode,
    /// `tx` or `rx`: what the shares are of.
    pub direction: String,
    /// Roles by bytes on the episode's interface, largest first (empty
    /// when no flow had a Kafka identity).
    pub carriers: Vec<Carrier>,
    pub others: Vec<OtherHostView>,
}

#[derive(Default)]
struct Bucket {
    secs: f64,
    by: BTreeMap<RoleKey, PeerFigures>,
}

impl Bucket {
    /// Adds one interval's flows to `peer` (flow counts: the most in one
    /// interval).
    fn add(&mut self, snap: &Snapshot, peer: &BTreeSet<IpAddr>) {
        self.secs += snap.interval_secs();
        let mut counts: BTreeMap<RoleKey, u64> = BTreeMap::new();
        for f in snap.flows.iter().filter(|f| f.netns_name.is_none()) {
            if !peer.contains(&unmapped(f.peer.ip())) {
                continue;
            }
            let key = RoleKey::of(f);
            self.by.entry(key.clone()).or_default().add_flow(f);
            *counts.entry(key).or_default() += 1;
        }
        for (k, n) in counts {
            let fig = self.by.entry(k).or_default();
            fig.flows = fig.flows.max(n);
        }
    }
}

#[derive(Default)]
struct CarrierSums {
    by: BTreeMap<RoleKey, u64>,
    total: u64,
}

/// The second pass: see the module's text.
pub struct ClusterTracker {
    plans: Vec<HostPlan>,
    /// (host, episode) of notable episodes.
    notable: Vec<(usize, usize)>,
    carriers: BTreeMap<(usize, usize), CarrierSums>,
    /// (episode's host, episode, observing host).
    during: BTreeMap<(usize, usize, usize), Bucket>,
    /// (episode's host, observing host): outside every notable episode
    /// of the episode's host.
    usual: BTreeMap<(usize, usize), Bucket>,
}

impl ClusterTracker {
    pub fn new(plans: Vec<HostPlan>) -> Self {
        let notable = plans
            .iter()
            .enumerate()
            .flat_map(|(h, p)| {
                p.episodes
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| notable(e.verdict))
                    .map(move |(i, _)| (h, i))
            })
            .collect();
        ClusterTracker {
            plans,
            notable,
            carriers: BTreeMap::new(),
            during: BTreeMap::new(),
            usual: BTreeMap::new(),
        }
    }

    /// One interval of host `host`.
    pub fn push(&mut self, host: usize, snap: &Snapshot) {
        let mid = middle_ms(snap);
        for &(h, e) in &self.notable {
            let ep = &self.plans[h].episodes[e];
            if !ep.covers(mid) {
                continue;
            }
            if h == host {
                // Who carried the host's own traffic on the interface
                // (a flow without one counts for every interface, as the
                // rates count it).
                let pick = |s: u64, r: u64| if ep.inbound { r } else { s };
                let c = self.carriers.entry((h, e)).or_default();
                for f in snap.flows.iter().filter(|f| f.counts_for(&ep.iface)) {
                    let b = pick(f.delta.bytes_sent, f.delta.bytes_received);
                    c.total += b;
                    if f.kafka.is_some() {
                        *c.by.entry(RoleKey::of(f)).or_default() += b;
                    }
                }
            } else {
                self.during
                    .entry((h, e, host))
                    .or_default()
                    .add(snap, &self.plans[h].addrs);
            }
        }
        for (h, plan) in self.plans.iter().enumerate() {
            if h == host {
                continue;
            }
            let busy = plan
                .episodes
                .iter()
                .any(|ep| notable(ep.verdict) && ep.covers(mid));
            if !busy {
                self.usual
                    .entry((h, host))
                    .or_default()
                    .add(snap, &plan.addrs);
            }
        }
    }

    /// Every notable episode of every host, by start time.
    pub fn finish(mut self) -> Vec<EpisodeView> {
        let mut out = Vec::new();
        for &(h, e) in &self.notable {
            let ep = self.plans[h].episodes[e].clone();
            let carriers = self
                .carriers
                .remove(&(h, e))
                .map(|c| {
                    let mut v: Vec<Carrier> =
                        c.by.into_iter()
                            .filter(|(_, b)| *b > 0)
                            .map(|(key, bytes)| Carrier {
                                label: key.label(),
                                pct: if c.total > 0 {
                                    bytes as f64 * 100.0 / c.total as f64
                                } else {
                                    0.0
                                },
                                key,
                                bytes,
                            })
                            .collect();
                    v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.label.cmp(&b.label)));
                    v
                })
                .unwrap_or_default();
            let mut others = Vec::new();
            for (o, plan) in self.plans.iter().enumerate() {
                if o == h {
                    continue;
                }
                let during = self.during.remove(&(h, e, o)).unwrap_or_default();
                let usual = self.usual.get(&(h, o));
                let mut peers: Vec<PeerView> = during
                    .by
                    .into_iter()
                    .map(|(key, mut fig)| {
                        fig.secs = during.secs;
                        let usual = usual.and_then(|u| {
                            u.by.get(&key).map(|f| PeerFigures {
                                secs: u.secs,
                                ..f.clone()
                            })
                        });
                        PeerView {
                            label: key.label(),
                            key,
                            during: fig,
                            usual,
                        }
                    })
                    .collect();
                peers.sort_by(|a, b| {
                    let t = |p: &PeerView| p.during.bytes_sent + p.during.bytes_received;
                    t(b).cmp(&t(a)).then(a.label.cmp(&b.label))
                });
                let mut verdicts: Vec<OverlapVerdict> = plan
                    .episodes
                    .iter()
                    .filter_map(|oe| {
                        let from = oe.start_ms.max(ep.start_ms);
                        let to = oe.end_ms.min(ep.end_ms);
                        (to > from && oe.verdict != Verdict::Idle).then(|| OverlapVerdict {
                            iface: oe.iface.clone(),
                            verdict: oe.verdict,
                            secs: (to - from) as f64 / 1000.0,
                        })
                    })
                    .collect();
                verdicts.sort_by(|a, b| b.secs.total_cmp(&a.secs));
                others.push(OtherHostView {
                    host: o,
                    name: plan.name.clone(),
                    secs: during.secs,
                    verdicts,
                    peers,
                });
            }
            out.push(EpisodeView {
                host: h,
                episode: e,
                direction: if ep.inbound { "rx" } else { "tx" }.into(),
                span: ep,
                carriers,
                others,
            });
        }
        out.sort_by(|a, b| {
            (a.span.start_ms, a.host, &a.span.iface).cmp(&(b.span.start_ms, b.host, &b.span.iface))
        });
        out
    }
}

#[cfg(test)]
mod tests;
