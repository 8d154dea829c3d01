//! Kafka identity for flows (issue 44): what the local broker's cluster
//! told the lookup (src/collect/kafka/), and the pure rules that place a
//! flow of the broker's host in it: replication to a follower or from a
//! leader, a consumer group's fetches, a producer, the controller quorum.
//!
//! The lookup fills a [`KafkaDirectory`] in the background; the collector
//! calls [`classify`] on each listed flow and stores the answer in
//! `FlowSample::kafka`. Nothing here does I/O, so a directory kept beside a
//! recording re-classifies its flows offline with the same rules.
//!
//! What Kafka's admin protocol tells and what it does not: the brokers
//! (id, advertised host and port, rack) and every classic consumer group's
//! members (client id, client host). Producers are not listed anywhere a
//! client can ask, so a flow at the listener from a host with no consumer
//! member is a client of unknown kind until its bytes show it: one that
//! mostly sends records to the broker is a producer (the broker receives
//! at least [`PRODUCE_RATIO`] times what it sends, past
//! [`PRODUCE_MIN_BYTES`]). Two groups (or two clients of a group) on one
//! host cannot be told apart from the broker's side: such a flow says so,
//! naming the candidates, and is given to no one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::model::snapshot::FlowSample;

/// A flow at the listener is a producer's when the broker received at
/// least this many times what it sent on it...
pub(crate) const PRODUCE_RATIO: u64 = 4;
/// ... and at least this many bytes: a consumer's fetch requests and a
/// producer's first metadata requests are both small, and a new flow
/// cannot be told by direction until it carried some data.
pub(crate) const PRODUCE_MIN_BYTES: u64 = 64 * 1024;
/// At most this many candidates are named on an ambiguous flow.
const MAX_CANDIDATES: usize = 4;

/// One broker of the cluster, as Metadata lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaBroker {
    pub id: i32,
    /// The advertised host, as the broker gave it.
    pub host: String,
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// `host` resolved (an address as is; a name through the resolver,
    /// by the lookup, never here).
    #[serde(default)]
    pub addrs: Vec<IpAddr>,
}

/// One member of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct KafkaMember {
    pub group: String,
    pub client_id: String,
    /// The member's host as the coordinator saw its connection.
    pub host: IpAddr,
}

/// What the lookup learned of the local broker's cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KafkaDirectory {
    /// The broker asked (`--kafka`, or the one found on this host).
    pub bootstrap: String,
    pub brokers: Vec<KafkaBroker>,
    /// The local broker's id: the one whose endpoint is the one asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_broker: Option<i32>,
    /// Ports the local broker's clients and followers connect to: its
    /// advertised port and, when its configuration was read, every
    /// non-controller listener's port.
    pub listener_ports: Vec<u16>,
    /// The controller quorum's endpoints (`controller.quorum.voters` or
    /// `controller.quorum.bootstrap.servers` of the broker's configuration,
    /// when it was read); a flow to one of them is the quorum's.
    #[serde(default)]
    pub controllers: Vec<SocketAddr>,
    /// Ports of this host's controller listeners (combined mode): flows to
    /// them are the quorum's too.
    #[serde(default)]
    pub controller_ports: Vec<u16>,
    /// The broker's process, when it was found on this host: a flow of
    /// another process to a broker is a client's, not replication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker_pid: Option<u32>,
    /// No broker of the cluster runs on this host: none was found here and
    /// the broker asked is at another host's address. Every flow of this
    /// host to a broker is then a client's (`other_client`), never
    /// replication, and no broker is taken for the local one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_host: bool,
    /// Members of every consumer group described, one per (group, client
    /// id, host), sorted.
    pub members: Vec<KafkaMember>,
    /// Groups listed, and of them those that could not be described (an
    /// error, the coordinator unreachable, past the lookup's bounds).
    pub groups: u64,
    pub groups_not_described: u64,
    /// Brokers whose groups could not be listed (unreachable, refused):
    /// the groups they coordinate are missing.
    #[serde(default)]
    pub brokers_not_asked: u64,
    /// Members Kafka listed, each counted (`members` keeps one per
    /// group, client id and host).
    #[serde(default)]
    pub members_listed: u64,
    /// Members whose host could not be read, or past the lookup's bound.
    #[serde(default)]
    pub members_unplaced: u64,
}

/// What a flow is to the local broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KafkaRole {
    /// A follower (`broker`) fetching from this broker, the leader.
    ReplicationToFollower,
    /// This broker fetching as a follower from the leader `broker`.
    ReplicationFromLeader,
    /// A consumer group's member fetching (or its coordinator traffic).
    Consume,
    /// A client sending records to this broker (told by direction: the
    /// admin protocol lists no producers).
    Produce,
    /// A client at the listener that is no consumer group's member and has
    /// not (yet) sent records: a producer before its first batches, an
    /// admin tool, a consumer outside groups.
    Client,
    /// The KRaft controller quorum (a broker's heartbeats and metadata
    /// fetches, or a controller's own traffic).
    Controller,
    /// A process of this host other than the broker talking to a broker of
    /// the cluster.
    OtherClient,
}

impl KafkaRole {
    pub fn as_str(self) -> &'static str {
        match self {
            KafkaRole::ReplicationToFollower => "replication_to_follower",
            KafkaRole::ReplicationFromLeader => "replication_from_leader",
            KafkaRole::Consume => "consume",
            KafkaRole::Produce => "produce",
            KafkaRole::Client => "client",
            KafkaRole::Controller => "controller",
            KafkaRole::OtherClient => "other_client",
        }
    }

    /// Every role, in the order the views list them.
    pub const ALL: [KafkaRole; 7] = [
        KafkaRole::ReplicationToFollower,
        KafkaRole::ReplicationFromLeader,
        KafkaRole::Consume,
        KafkaRole::Produce,
        KafkaRole::Client,
        KafkaRole::Controller,
        KafkaRole::OtherClient,
    ];

    pub fn parse(s: &str) -> Option<KafkaRole> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        let short = match s.as_str() {
            "replication" => return None,
            "follower" | "to_follower" => "replication_to_follower",
            "leader" | "from_leader" => "replication_from_leader",
            "quorum" => "controller",
            other => other,
        };
        KafkaRole::ALL.into_iter().find(|r| r.as_str() == short)
    }

    /// Replication either way.
    pub fn is_replication(self) -> bool {
        matches!(
            self,
            KafkaRole::ReplicationToFollower | KafkaRole::ReplicationFromLeader
        )
    }
}

/// Who a flow is to the local broker: its role and, where known, the other
/// broker, the consumer group and the client id. A flow's
/// ([`KafkaFlow`]) and a sum's (`KafkaRoleSum`, src/analysis/kafka_roles.rs),
/// flattened into both in JSON.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KafkaIdentity {
    pub role: KafkaRole,
    /// The other broker (replication, or the broker another process of
    /// this host talks to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broker: Option<i32>,
    /// The consumer group, when one group's members are on the peer host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The client id, when one member (or several with one id) of that
    /// group is on the peer host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

impl KafkaIdentity {
    pub fn role(role: KafkaRole) -> Self {
        KafkaIdentity {
            role,
            broker: None,
            group: None,
            client_id: None,
        }
    }

    /// One line for the views, made inert for a terminal (group and
    /// client ids are chosen by clients).
    pub(crate) fn label(&self) -> String {
        let inert = |s: &str| crate::shared::terminal_text::inert(s).into_owned();
        let mut out = match (self.role, self.broker) {
            (KafkaRole::ReplicationToFollower, Some(b)) => format!("replication to follower {b}"),
            (KafkaRole::ReplicationFromLeader, Some(b)) => format!("replication from leader {b}"),
            (KafkaRole::OtherClient, Some(b)) => format!("other client of broker {b}"),
            (r, _) => r.as_str().replace('_', " "),
        };
        match (&self.group, &self.client_id) {
            (Some(g), Some(c)) => out.push_str(&format!(" {}/{}", inert(g), inert(c))),
            (Some(g), None) => out.push_str(&format!(" {}", inert(g))),
            (None, Some(c)) => out.push_str(&format!(" {}", inert(c))),
            (None, None) => {}
        }
        out
    }
}

/// A flow's Kafka identity (`FlowSample::kafka`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaFlow {
    #[serde(flatten)]
    pub who: KafkaIdentity,
    /// Set when the broker's side cannot tell which of several groups or
    /// clients on the peer host the flow belongs to: the candidates,
    /// `group/client_id`, at most four, then `+N`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ambiguous: Vec<String>,
}

impl KafkaFlow {
    fn role(role: KafkaRole) -> Self {
        KafkaFlow {
            who: KafkaIdentity::role(role),
            ambiguous: Vec::new(),
        }
    }

    /// One line for the views, made inert for a terminal (group and
    /// client ids are chosen by clients).
    pub(crate) fn label(&self) -> String {
        let mut out = self.who.label();
        if !self.ambiguous.is_empty() {
            let names = self.ambiguous.join(", ");
            out.push_str(&format!(
                " (ambiguous: {})",
                crate::shared::terminal_text::inert(&names)
            ));
        }
        out
    }
}

/// `--kafka-role` and `--kafka-group` (watch, replay, report): flows kept
/// by their Kafka identity. Any role given and any group given (a flow of
/// no group passes no `--kafka-group`); empty keeps every flow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KafkaFilter {
    pub roles: Vec<KafkaRole>,
    pub groups: Vec<String>,
}

/// What `--kafka-role` takes, for its help and its errors.
pub const ROLE_WORDS: &str = "replication_to_follower (or follower), replication_from_leader \
     (or leader), replication (both), consume, produce, client, controller (or quorum), \
     other_client";

impl KafkaFilter {
    /// Checks each value; the errors name the option and what it takes.
    pub fn new(roles: &[String], groups: &[String]) -> Result<Self, String> {
        let mut f = KafkaFilter::default();
        for r in roles {
            let t = r.trim().to_ascii_lowercase().replace('-', "_");
            if t == "replication" {
                f.roles.push(KafkaRole::ReplicationToFollower);
                f.roles.push(KafkaRole::ReplicationFromLeader);
                continue;
            }
            match KafkaRole::parse(r) {
                Some(role) => f.roles.push(role),
                None => {
                    return Err(format!(
                        "--kafka-role {r:?}: not a Kafka role: give {ROLE_WORDS}"
                    ))
                }
            }
        }
        for g in groups {
            if g.is_empty() || g.chars().any(char::is_control) {
                return Err(format!(
                    "--kafka-group {g:?}: empty, or holds control characters: give a consumer \
                     group id as kafka-consumer-groups.sh --list prints it"
                ));
            }
            f.groups.push(g.clone());
        }
        Ok(f)
    }

    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.groups.is_empty()
    }

    /// Whether a flow (its Kafka identity, None without one) is kept.
    pub fn keeps(&self, k: Option<&KafkaFlow>) -> bool {
        if self.is_empty() {
            return true;
        }
        k.is_some_and(|k| self.keeps_identity(&k.who))
    }

    /// Whether flows (or a sum of them) of this identity are kept.
    pub fn keeps_identity(&self, who: &KafkaIdentity) -> bool {
        (self.roles.is_empty() || self.roles.contains(&who.role))
            && (self.groups.is_empty()
                || who.group.as_ref().is_some_and(|g| self.groups.contains(g)))
    }
}

/// The directory with its lookups built: made once per lookup result, used
/// for every flow of every interval until the next.
#[derive(Debug, Clone, Default)]
pub struct KafkaIndex {
    pub dir: KafkaDirectory,
    broker_by_ip: BTreeMap<IpAddr, Vec<(i32, u16)>>,
    /// Per host, its members' (group, client id), sorted and unique.
    members_by_ip: BTreeMap<IpAddr, Vec<(String, String)>>,
}

impl KafkaIndex {
    pub fn new(dir: KafkaDirectory) -> Self {
        let mut broker_by_ip: BTreeMap<IpAddr, Vec<(i32, u16)>> = BTreeMap::new();
        for b in &dir.brokers {
            for a in &b.addrs {
                broker_by_ip.entry(*a).or_default().push((b.id, b.port));
            }
        }
        let mut members: BTreeMap<IpAddr, BTreeSet<(String, String)>> = BTreeMap::new();
        for m in &dir.members {
            members
                .entry(m.host)
                .or_default()
                .insert((m.group.clone(), m.client_id.clone()));
        }
        KafkaIndex {
            dir,
            broker_by_ip,
            members_by_ip: members
                .into_iter()
                .map(|(ip, s)| (ip, s.into_iter().collect()))
                .collect(),
        }
    }

    /// The other broker (not the local one) at `ip`, if any.
    fn remote_broker_at(&self, ip: IpAddr, port: Option<u16>) -> Option<i32> {
        self.broker_by_ip
            .get(&unmapped(ip))?
            .iter()
            .find_map(|&(id, p)| {
                (Some(id) != self.dir.local_broker && port.is_none_or(|want| want == p))
                    .then_some(id)
            })
    }
}

/// An IPv4-mapped IPv6 address as IPv4 (a dual-stack listener's peers).
fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The Kafka identity of `flow`, or None when it is no flow of the
/// cluster's (neither at the broker's listeners nor to a broker or the
/// quorum).
pub fn classify(idx: &KafkaIndex, flow: &FlowSample) -> Option<KafkaFlow> {
    let dir = &idx.dir;
    let local_port = flow.local.port();
    let peer = SocketAddr::new(unmapped(flow.peer.ip()), flow.peer.port());
    let owner_pid = flow.owner.as_ref().map(|o| o.pid);
    let not_broker_process =
        dir.client_host || matches!((dir.broker_pid, owner_pid), (Some(b), Some(o)) if b != o);

    // The quorum: our controller listener, or a controller's endpoint.
    if dir.controller_ports.contains(&local_port)
        || dir
            .controllers
            .iter()
            .any(|c| c.port() == peer.port() && (c.ip() == peer.ip() || loopback_pair(c, &peer)))
    {
        return Some(KafkaFlow::role(KafkaRole::Controller));
    }
    if dir.listener_ports.contains(&local_port) && !not_broker_process {
        // Served by this broker: who is asking?
        let t = &flow.totals;
        if t.bytes_received >= PRODUCE_MIN_BYTES
            && t.bytes_received >= PRODUCE_RATIO.saturating_mul(t.bytes_sent)
        {
            return Some(KafkaFlow::role(KafkaRole::Produce));
        }
        if let Some(id) = idx.remote_broker_at(peer.ip(), None) {
            let mut f = KafkaFlow::role(KafkaRole::ReplicationToFollower);
            f.who.broker = Some(id);
            return Some(f);
        }
        return Some(match idx.members_by_ip.get(&peer.ip()) {
            None => KafkaFlow::role(KafkaRole::Client),
            Some(ms) => consume(ms),
        });
    }
    // From this host to a broker's listener.
    let id = idx.remote_broker_at(peer.ip(), Some(peer.port()))?;
    let mut f = KafkaFlow::role(if not_broker_process {
        KafkaRole::OtherClient
    } else {
        KafkaRole::ReplicationFromLeader
    });
    f.who.broker = Some(id);
    Some(f)
}

/// A controller endpoint named by loopback reached at another loopback
/// address (127.0.0.1 against ::1), or the same endpoint seen from the
/// controller's side.
fn loopback_pair(c: &SocketAddr, peer: &SocketAddr) -> bool {
    c.ip().is_loopback() && peer.ip().is_loopback()
}

/// A consume flow from a host whose members are `ms`: one group and client
/// id named, else the candidates.
fn consume(ms: &[(String, String)]) -> KafkaFlow {
    let mut f = KafkaFlow::role(KafkaRole::Consume);
    let groups: BTreeSet<&str> = ms.iter().map(|(g, _)| g.as_str()).collect();
    let clients: BTreeSet<&str> = ms.iter().map(|(_, c)| c.as_str()).collect();
    if groups.len() == 1 {
        f.who.group = groups.first().map(|g| g.to_string());
        if clients.len() == 1 {
            f.who.client_id = clients.first().map(|c| c.to_string());
            return f;
        }
    }
    let mut names: Vec<String> = ms
        .iter()
        .take(MAX_CANDIDATES)
        .map(|(g, c)| format!("{g}/{c}"))
        .collect();
    if ms.len() > MAX_CANDIDATES {
        names.push(format!("+{}", ms.len() - MAX_CANDIDATES));
    }
    f.ambiguous = names;
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{FlowCounters, Owner};

    fn dir() -> KafkaIndex {
        KafkaIndex::new(KafkaDirectory {
            bootstrap: "10.0.0.1:9092".into(),
            brokers: [(1, "10.0.0.1"), (2, "10.0.0.2"), (3, "10.0.0.3")]
                .iter()
                .map(|&(id, h)| KafkaBroker {
                    id,
                    host: h.into(),
                    port: 9092,
                    rack: None,
                    addrs: vec![h.parse().unwrap()],
                })
                .collect(),
            local_broker: Some(1),
            listener_ports: vec![9092],
            controllers: vec!["10.0.0.2:9093".parse().unwrap()],
            controller_ports: vec![9093],
            broker_pid: Some(100),
            members: vec![
                member("orders", "orders-1", "10.0.1.5"),
                member("audit", "audit-1", "10.0.1.6"),
                member("billing", "billing-1", "10.0.1.6"),
            ],
            groups: 3,
            ..Default::default()
        })
    }

    fn member(g: &str, c: &str, h: &str) -> KafkaMember {
        KafkaMember {
            group: g.into(),
            client_id: c.into(),
            host: h.parse().unwrap(),
        }
    }

    fn flow(local: &str, peer: &str, pid: u32, sent: u64, received: u64) -> FlowSample {
        FlowSample {
            local: local.parse().unwrap(),
            peer: peer.parse().unwrap(),
            owner: Some(Owner {
                pid,
                comm: "java".into(),
                thread: None,
                cgroup_id: 0,
                cgroup: None,
                workload: None,
            }),
            totals: FlowCounters {
                bytes_sent: sent,
                bytes_received: received,
                ..Default::default()
            },
            ..FlowSample::example(1)
        }
    }

    #[test]
    fn followers_fetching_from_us_and_us_from_leaders() {
        let idx = dir();
        let f = classify(
            &idx,
            &flow("10.0.0.1:9092", "10.0.0.2:50000", 100, 9 << 20, 1000),
        );
        assert_eq!(
            f.as_ref().map(|f| f.who.role),
            Some(KafkaRole::ReplicationToFollower)
        );
        assert_eq!(f.unwrap().who.broker, Some(2));
        let f = classify(
            &idx,
            &flow("10.0.0.1:41000", "10.0.0.3:9092", 100, 1000, 9 << 20),
        )
        .unwrap();
        assert_eq!(
            (f.who.role, f.who.broker),
            (KafkaRole::ReplicationFromLeader, Some(3))
        );
        assert_eq!(f.label(), "replication from leader 3");
        // Another process of this host asking broker 3 is no replication.
        let f = classify(&idx, &flow("10.0.0.1:41001", "10.0.0.3:9092", 555, 10, 10)).unwrap();
        assert_eq!(
            (f.who.role, f.who.broker),
            (KafkaRole::OtherClient, Some(3))
        );
        // The same port on a host that is no broker is nothing of Kafka's.
        assert_eq!(
            classify(&idx, &flow("10.0.0.1:41002", "10.9.9.9:9092", 100, 10, 10)),
            None
        );
    }

    #[test]
    fn a_client_hosts_flows_to_the_brokers_are_no_replication() {
        // What the lookup learns on a host that runs no broker, given
        // `--kafka 10.0.0.1:9092`: no local broker, no broker process.
        let mut d = dir().dir;
        d.local_broker = None;
        d.broker_pid = None;
        d.listener_ports = Vec::new();
        d.client_host = true;
        let idx = KafkaIndex::new(d);
        for (peer, id) in [("10.0.0.1:9092", 1), ("10.0.0.3:9092", 3)] {
            let f = classify(&idx, &flow("10.0.1.5:41000", peer, 700, 1000, 9 << 20)).unwrap();
            assert_eq!(
                (f.who.role, f.who.broker),
                (KafkaRole::OtherClient, Some(id)),
                "{peer}"
            );
        }
        // Without knowing it is a client's host, the flow to broker 3 read as
        // this host's broker fetching from its leader.
        let mut d = idx.dir.clone();
        d.client_host = false;
        let f = classify(
            &KafkaIndex::new(d),
            &flow("10.0.1.5:41000", "10.0.0.3:9092", 700, 1000, 9 << 20),
        )
        .unwrap();
        assert_eq!(f.who.role, KafkaRole::ReplicationFromLeader);
    }

    #[test]
    fn a_consumer_is_named_and_two_groups_on_one_host_are_ambiguous() {
        let idx = dir();
        let f = classify(
            &idx,
            &flow("10.0.0.1:9092", "10.0.1.5:50000", 100, 5 << 20, 900),
        )
        .unwrap();
        assert_eq!(f.who.role, KafkaRole::Consume);
        assert_eq!(f.who.group.as_deref(), Some("orders"));
        assert_eq!(f.who.client_id.as_deref(), Some("orders-1"));
        assert_eq!(f.label(), "consume orders/orders-1");
        let f = classify(
            &idx,
            &flow("10.0.0.1:9092", "10.0.1.6:50000", 100, 5 << 20, 900),
        )
        .unwrap();
        assert_eq!(f.who.role, KafkaRole::Consume);
        assert_eq!(f.who.group, None);
        assert_eq!(f.ambiguous, vec!["audit/audit-1", "billing/billing-1"]);
        // A dual-stack listener's peer, IPv4-mapped, is the same host.
        let f = classify(
            &idx,
            &flow(
                "[::ffff:10.0.0.1]:9092",
                "[::ffff:10.0.1.5]:5",
                100,
                5 << 20,
                9,
            ),
        )
        .unwrap();
        assert_eq!(f.who.group.as_deref(), Some("orders"));
    }

    #[test]
    fn producers_are_told_by_direction_and_unknown_clients_say_so() {
        let idx = dir();
        // Mostly received by the broker: records coming in.
        let f = classify(
            &idx,
            &flow("10.0.0.1:9092", "10.0.1.9:5", 100, 3000, 8 << 20),
        )
        .unwrap();
        assert_eq!(f.who.role, KafkaRole::Produce);
        // Even from a consumer's host.
        let f = classify(
            &idx,
            &flow("10.0.0.1:9092", "10.0.1.5:5", 100, 3000, 8 << 20),
        )
        .unwrap();
        assert_eq!(f.who.role, KafkaRole::Produce);
        // Too little yet to tell.
        let f = classify(&idx, &flow("10.0.0.1:9092", "10.0.1.9:5", 100, 300, 9000)).unwrap();
        assert_eq!(f.who.role, KafkaRole::Client);
    }

    #[test]
    fn the_quorum_by_port_or_endpoint() {
        let idx = dir();
        let f = classify(&idx, &flow("10.0.0.1:40000", "10.0.0.2:9093", 100, 1, 1)).unwrap();
        assert_eq!(f.who.role, KafkaRole::Controller);
        let f = classify(&idx, &flow("10.0.0.1:9093", "10.0.0.3:40000", 100, 1, 1)).unwrap();
        assert_eq!(f.who.role, KafkaRole::Controller);
    }

    #[test]
    fn roles_parse_from_their_names_and_short_forms() {
        for r in KafkaRole::ALL {
            assert_eq!(KafkaRole::parse(r.as_str()), Some(r));
        }
        assert_eq!(
            KafkaRole::parse("follower"),
            Some(KafkaRole::ReplicationToFollower)
        );
        assert_eq!(KafkaRole::parse("quorum"), Some(KafkaRole::Controller));
        assert_eq!(KafkaRole::parse("nonsense"), None);
    }

    #[test]
    fn the_filter_takes_roles_groups_and_says_what_it_wants() {
        let f = KafkaFilter::new(&["replication".into()], &[]).unwrap();
        let flow = |role, group: Option<&str>| KafkaFlow {
            who: KafkaIdentity {
                group: group.map(String::from),
                ..KafkaIdentity::role(role)
            },
            ambiguous: Vec::new(),
        };
        assert!(f.keeps(Some(&flow(KafkaRole::ReplicationFromLeader, None))));
        assert!(f.keeps(Some(&flow(KafkaRole::ReplicationToFollower, None))));
        assert!(!f.keeps(Some(&flow(KafkaRole::Consume, Some("a")))));
        assert!(!f.keeps(None));
        assert!(KafkaFilter::default().keeps(None));
        let g = KafkaFilter::new(&["consume".into()], &["orders".into()]).unwrap();
        assert!(g.keeps(Some(&flow(KafkaRole::Consume, Some("orders")))));
        assert!(!g.keeps(Some(&flow(KafkaRole::Consume, Some("billing")))));
        assert!(!g.keeps(Some(&flow(KafkaRole::Produce, None))));
        let e = KafkaFilter::new(&["replicaton".into()], &[]).unwrap_err();
        assert!(
            e.starts_with(
                "--kafka-role \"replicaton\": not a Kafka role: give replication_to_follower"
            ),
            "{e}"
        );
        assert!(KafkaFilter::new(&[], &["".into()])
            .unwrap_err()
            .starts_with("--kafka-group"));
    }
}
