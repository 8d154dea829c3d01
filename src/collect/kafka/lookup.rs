//! One lookup of the cluster: Metadata from the broker asked (the brokers
//! and their endpoints), then from every broker the groups it coordinates
//! (ListGroups) and their members (DescribeGroups for classic groups,
//! ConsumerGroupDescribe for groups of the consumer protocol, KIP-848),
//! as `kafka-consumer-groups.sh --describe --members` asks them. Bounded:
//! one deadline for the whole lookup, at most [`MAX_BROKERS`] brokers,
//! [`MAX_GROUPS`] groups and [`MAX_MEMBERS`] members (the rest counted
//! as not described), responses of at most 16 MiB.

use std::collections::BTreeSet;
use std::net::{IpAddr, ToSocketAddrs};
use std::time::Instant;

use anyhow::Result;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, GroupId, ListGroupsRequest, ListGroupsResponse, MetadataRequest,
    MetadataResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};

use super::wire::{Conn, Cost};
use crate::model::kafka::{KafkaBroker, KafkaDirectory, KafkaMember};

pub(crate) const MAX_BROKERS: usize = 256;
pub(crate) const MAX_GROUPS: usize = 20_000;
pub(crate) const MAX_MEMBERS: usize = 200_000;
/// Groups per DescribeGroups request, as Kafka's admin client batches them
/// per coordinator (it sends them all at once; a bound keeps each response
/// under the size limit).
const DESCRIBE_BATCH: usize = 100;

fn range<M: Message>() -> (i16, i16) {
    (M::VERSIONS.min, M::VERSIONS.max)
}

/// What the lookup knows of the local broker before asking: its id and
/// endpoints from its configuration, when it was found on this host.
#[derive(Debug, Clone, Default)]
pub(crate) struct LocalHints {
    pub node_id: Option<i32>,
    pub listener_ports: Vec<u16>,
    pub controller_ports: Vec<u16>,
    pub controllers: Vec<std::net::SocketAddr>,
    pub pid: Option<u32>,
}

/// Whether `ip` is an address of this host (in the observer's network
/// namespace): only a local address can be bound. Nothing is sent.
pub(crate) fn is_own_address(ip: std::net::IpAddr) -> bool {
    ip.is_loopback() || std::net::UdpSocket::bind(std::net::SocketAddr::new(ip, 0)).is_ok()
}

/// Notes of a lookup that worked in part (a broker that did not answer):
/// said with the result, counted in the directory.
pub(crate) struct Looked {
    pub dir: KafkaDirectory,
    pub partial: Vec<String>,
}

pub(crate) fn lookup(
    bootstrap: &str,
    hints: &LocalHints,
    deadline: Instant,
    cost: &mut Cost,
) -> Result<Looked> {
    let mut conn = Conn::open(bootstrap, deadline, cost)?;
    let (md, _): (MetadataResponse, i16) = conn.call(
        ApiKey::Metadata,
        range::<MetadataRequest>(),
        |v| {
            MetadataRequest::default()
                // No topics (v1+: an empty list; null would be every topic).
                .with_topics(if v >= 1 { Some(Vec::new()) } else { None })
                .with_allow_auto_topic_creation(false)
        },
        cost,
    )?;
    let boot = super::wire::resolve(bootstrap)?;
    let mut brokers: Vec<KafkaBroker> = md
        .brokers
        .iter()
        .take(MAX_BROKERS)
        .map(|b| {
            let host = b.host.as_str().to_string();
            let addrs = resolve_host(&host);
            KafkaBroker {
                id: b.node_id.0,
                port: b.port as u16,
                rack: b.rack.as_ref().map(|r| r.as_str().to_string()),
                host,
                addrs,
            }
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    // A broker runs here when one was found here, or when the one asked is
    // at an address of this host; else this is a client's host, and the
    // broker asked is no local broker.
    let here = hints.pid.is_some() || hints.node_id.is_some() || is_own_address(boot.ip());
    let local_broker = hints.node_id.or_else(|| {
        brokers
            .iter()
            .find(|b| here && b.port == boot.port() && b.addrs.contains(&boot.ip()))
            .map(|b| b.id)
    });
    let mut listener_ports: BTreeSet<u16> = hints.listener_ports.iter().copied().collect();
    if here {
        listener_ports.insert(boot.port());
    }
    if let Some(b) = brokers.iter().find(|b| Some(b.id) == local_broker) {
        listener_ports.insert(b.port);
    }
    let mut dir = KafkaDirectory {
        bootstrap: bootstrap.to_string(),
        local_broker,
        listener_ports: listener_ports.into_iter().collect(),
        controllers: hints.controllers.clone(),
        controller_ports: hints.controller_ports.clone(),
        broker_pid: hints.pid,
        client_host: !here,
        ..Default::default()
    };
    let mut partial = Vec::new();
    let mut members = BTreeSet::new();
    // Each broker coordinates its own groups: asked on its own connection,
    // the bootstrap's reused for the broker it is.
    let mut boot_conn = Some(conn);
    for b in &brokers {
        let endpoint = format!("{}:{}", b.host, b.port);
        let is_boot = b.port == boot.port() && b.addrs.contains(&boot.ip());
        let conn = match (is_boot, boot_conn.take()) {
            (true, Some(c)) => Ok(c),
            (_, c) => {
                boot_conn = c;
                Conn::open(&endpoint, deadline, cost)
            }
        };
        let res = conn.and_then(|mut c| groups_of(&mut c, &mut dir, &mut members, cost));
        if let Err(e) = res {
            dir.brokers_not_asked += 1;
            partial.push(format!("broker {} ({endpoint}): {e:#}", b.id));
        }
    }
    dir.brokers = brokers;
    dir.members = members.into_iter().collect();
    Ok(Looked { dir, partial })
}

/// The [`Described`] groups of either describing response (their fields
/// have the same names in both).
macro_rules! described {
    ($r:expr) => {
        $r.groups
            .into_iter()
            .map(|g| Described {
                group: g.group_id,
                error_code: g.error_code,
                members: g
                    .members
                    .into_iter()
                    .map(|m| (m.client_id, m.client_host))
                    .collect(),
            })
            .collect()
    };
}

/// The groups `conn`'s broker coordinates, and their members.
fn groups_of(
    conn: &mut Conn,
    dir: &mut KafkaDirectory,
    members: &mut BTreeSet<KafkaMember>,
    cost: &mut Cost,
) -> Result<()> {
    let (lg, _): (ListGroupsResponse, i16) = conn.call(
        ApiKey::ListGroups,
        range::<ListGroupsRequest>(),
        |_| ListGroupsRequest::default(),
        cost,
    )?;
    if lg.error_code != 0 {
        anyhow::bail!("ListGroups error {}", lg.error_code);
    }
    let mut classic = Vec::new();
    let mut consumer = Vec::new();
    for g in &lg.groups {
        dir.groups += 1;
        if dir.groups as usize > MAX_GROUPS {
            dir.groups_not_described += 1;
            continue;
        }
        // Consumer groups only: Connect's and share groups place no
        // consumer flows. `group_type` (ListGroups v5+) tells the
        // consumer protocol's groups from classic ones.
        match (g.protocol_type.as_str(), g.group_type.as_str()) {
            (_, "consumer") => consumer.push(g.group_id.clone()),
            ("consumer", _) | ("", "classic") => classic.push(g.group_id.clone()),
            _ => {}
        }
    }
    describe(
        conn,
        dir,
        members,
        cost,
        &classic,
        ApiKey::DescribeGroups,
        |batch| DescribeGroupsRequest::default().with_groups(batch),
        |r: DescribeGroupsResponse| described!(r),
    )?;
    describe(
        conn,
        dir,
        members,
        cost,
        &consumer,
        ApiKey::ConsumerGroupDescribe,
        |batch| ConsumerGroupDescribeRequest::default().with_group_ids(batch),
        |r: ConsumerGroupDescribeResponse| described!(r),
    )
}

/// One group as either describing response gives it: its id, error code
/// and members' (client id, client host).
struct Described {
    group: GroupId,
    error_code: i16,
    members: Vec<(StrBytes, StrBytes)>,
}

/// Describes `groups` with `key`'s request `Q` (DescribeGroups for
/// classic groups, ConsumerGroupDescribe for the consumer protocol's),
/// [`DESCRIBE_BATCH`] a request, and adds their members; a broker that
/// knows no version of it leaves them counted as not described.
#[allow(clippy::too_many_arguments)]
fn describe<Q: Message + Encodable, R: Decodable>(
    conn: &mut Conn,
    dir: &mut KafkaDirectory,
    members: &mut BTreeSet<KafkaMember>,
    cost: &mut Cost,
    groups: &[GroupId],
    key: ApiKey,
    request: impl Fn(Vec<GroupId>) -> Q,
    described: impl Fn(R) -> Vec<Described>,
) -> Result<()> {
    if groups.is_empty() {
        return Ok(());
    }
    let ours = range::<Q>();
    if conn.version(key, ours).is_none() {
        dir.groups_not_described += groups.len() as u64;
        return Ok(());
    }
    for batch in groups.chunks(DESCRIBE_BATCH) {
        let (r, _): (R, i16) = conn.call(key, ours, |_| request(batch.to_vec()), cost)?;
        for g in described(r) {
            if g.error_code != 0 {
                dir.groups_not_described += 1;
                continue;
            }
            for (client_id, client_host) in &g.members {
                add(members, dir, &g.group, client_id, client_host);
            }
        }
    }
    Ok(())
}

fn add(
    members: &mut BTreeSet<KafkaMember>,
    dir: &mut KafkaDirectory,
    group: &GroupId,
    client_id: &StrBytes,
    client_host: &StrBytes,
) {
    dir.members_listed += 1;
    let Some(host) = client_host_ip(client_host.as_str()) else {
        dir.members_unplaced += 1;
        return;
    };
    if members.len() >= MAX_MEMBERS {
        dir.members_unplaced += 1;
        return;
    }
    members.insert(KafkaMember {
        group: group.0.as_str().to_string(),
        client_id: client_id.as_str().to_string(),
        host,
    });
}

/// A member's host as the coordinator gives it: Java's
/// `InetAddress.toString()`, `name/address` or `/address`.
pub(crate) fn client_host_ip(s: &str) -> Option<IpAddr> {
    let addr = s.rsplit('/').next()?.trim();
    addr.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// A broker's advertised host to addresses: an address as is, a name
/// through the resolver (in the lookup's thread, never an interval's).
fn resolve_host(host: &str) -> Vec<IpAddr> {
    if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse() {
        return vec![ip];
    }
    let mut out: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map(|it| it.map(|a| a.ip()).collect())
        .unwrap_or_default();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::{client_host_ip, is_own_address};

    #[test]
    fn only_this_hosts_addresses_are_its_own() {
        assert!(is_own_address([127, 0, 0, 1].into()));
        assert!(is_own_address(std::net::Ipv6Addr::LOCALHOST.into()));
        // TEST-NET-1 (RFC 5737): never an address of a host.
        assert!(!is_own_address([192, 0, 2, 77].into()));
    }

    #[test]
    fn member_hosts_as_java_prints_them() {
        assert_eq!(client_host_ip("/10.0.0.3"), Some([10, 0, 0, 3].into()));
        assert_eq!(
            client_host_ip("client-7.lab/10.0.0.3"),
            Some([10, 0, 0, 3].into())
        );
        assert_eq!(
            client_host_ip("/0:0:0:0:0:0:0:1"),
            Some("::1".parse().unwrap())
        );
        assert_eq!(client_host_ip(""), None);
    }
}
