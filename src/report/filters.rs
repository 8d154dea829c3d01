//! The report's filters, parsed and checked before any file is read:
//! `--flow`, `--iface`, `--since`, `--until`.

use std::net::{IpAddr, SocketAddr};

use anyhow::{bail, Result};

use crate::model::kafka::KafkaFilter;
use crate::model::snapshot::FlowSample;
use crate::model::workload::WorkloadFilter;
use crate::shared::clock::{parse_time, TimeSpec};

/// Longest process name the kernel keeps (`TASK_COMM_LEN` - 1).
const COMM_MAX: usize = 15;

/// One `--flow` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowPattern {
    /// Any flow to this peer address.
    Peer(IpAddr),
    /// The flow to this peer address and port.
    PeerPort(SocketAddr),
    /// Flows on this local port (`:9092`).
    LocalPort(u16),
    /// Flows owned by a process of this name (its `comm`).
    Comm(String),
}

/// IPv4 peers of dual-stack sockets show as `::ffff:a.b.c.d`.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

impl FlowPattern {
    pub(crate) fn parse(s: &str) -> Result<FlowPattern, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("--flow \"\": empty pattern: give a peer address, addr:port, :localport or a process name".into());
        }
        if let Some(port) = t.strip_prefix(':') {
            return match port.parse::<u16>() {
                Ok(p) if p > 0 => Ok(FlowPattern::LocalPort(p)),
                _ => Err(format!("--flow {s:?}: {port:?} is not a port (1-65535)")),
            };
        }
        if let Ok(ip) = t
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return Ok(FlowPattern::Peer(ip));
        }
        if let Ok(sa) = t.parse::<SocketAddr>() {
            return Ok(FlowPattern::PeerPort(sa));
        }
        // Looks like an address but is not one: say so rather than look
        // for a process of that name.
        let addressy = t.contains(':')
            || (t.contains('.') && t.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
        if addressy {
            return Err(format!(
                "--flow {s:?}: not an address: give 10.0.0.2, 10.0.0.2:5201, [fd00::2]:5201 or :9092"
            ));
        }
        if t.len() > COMM_MAX {
            return Err(format!(
                "--flow {s:?}: process names are at most {COMM_MAX} characters (the kernel's comm)"
            ));
        }
        Ok(FlowPattern::Comm(t.to_string()))
    }

    pub(crate) fn matches(&self, f: &FlowSample) -> bool {
        match self {
            FlowPattern::Peer(ip) => same_ip(f.peer.ip(), *ip),
            FlowPattern::PeerPort(sa) => {
                same_ip(f.peer.ip(), sa.ip()) && f.peer.port() == sa.port()
            }
            FlowPattern::LocalPort(p) => f.local.port() == *p,
            FlowPattern::Comm(c) => f.owner.as_ref().is_some_and(|o| &o.comm == c),
        }
    }
}

/// Every filter of one report, before it is tied to a recording.
#[derive(Debug, Clone, Default)]
pub struct ReportFilters {
    /// The `--flow` values as given, and parsed.
    pub flow_texts: Vec<String>,
    pub flows: Vec<FlowPattern>,
    pub interfaces: Vec<String>,
    /// `--pod`, `--cgroup`, `--service`.
    pub workloads: WorkloadFilter,
    /// `--kafka-role`, `--kafka-group`.
    pub kafka: KafkaFilter,
    pub since: Option<TimeSpec>,
    pub until: Option<TimeSpec>,
}

impl ReportFilters {
    /// Filters from the option texts (`--flow`, `--iface`, `--since`,
    /// `--until`); the error names the option that was refused.
    pub(crate) fn parse(
        flow_texts: &[String],
        interface_names: &[String],
        since: Option<&str>,
        until: Option<&str>,
        workloads: WorkloadFilter,
    ) -> Result<Self> {
        let mut flows = Vec::new();
        for f in flow_texts {
            match FlowPattern::parse(f) {
                Ok(p) => flows.push(p),
                Err(e) => bail!("{e}"),
            }
        }
        let mut interfaces = Vec::new();
        for i in interface_names {
            let i = i.trim();
            if i.is_empty() || i.len() > 15 || i.contains(['/', ' ']) {
                bail!("--iface {i:?}: not an interface name");
            }
            interfaces.push(i.to_string());
        }
        let since = since
            .map(|s| parse_time("--since", s))
            .transpose()
            .map_err(anyhow::Error::msg)?;
        let until = until
            .map(|s| parse_time("--until", s))
            .transpose()
            .map_err(anyhow::Error::msg)?;
        Ok(ReportFilters {
            flow_texts: flow_texts.to_vec(),
            flows,
            interfaces,
            workloads,
            kafka: KafkaFilter::default(),
            since,
            until,
        })
    }

    /// A flow passes when no `--flow` was given or any pattern matches,
    /// and, with `--iface`, when it uses one of those interfaces (a flow
    /// whose interface is unknown, as in recordings before format 1.2, is
    /// kept: it may be on any of them).
    /// With `--kafka-role`/`--kafka-group`: flows and the by-role sums kept
    /// by their Kafka identity.
    pub(crate) fn with_kafka(mut self, kafka: KafkaFilter) -> Self {
        self.kafka = kafka;
        self
    }

    pub(crate) fn flow_matches(&self, f: &FlowSample) -> bool {
        let by_pattern = self.flows.is_empty() || self.flows.iter().any(|p| p.matches(f));
        // A flow of unknown interface counts for every one; one found to
        // pass through none (`unrouted`) for none asked for.
        let by_iface = match f.iface.as_deref() {
            Some(i) => self.iface_matches(i),
            None => !f.unrouted || self.interfaces.is_empty(),
        };
        by_pattern && by_iface && f.passes(&self.workloads) && self.kafka.keeps(f.kafka.as_ref())
    }

    pub(crate) fn iface_matches(&self, name: &str) -> bool {
        self.interfaces.is_empty() || self.interfaces.iter().any(|i| i == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iface_filter_keeps_the_flows_of_those_interfaces_and_unknown_ones() {
        let f = ReportFilters {
            interfaces: vec!["eth0".into()],
            ..ReportFilters::default()
        };
        let on = |iface: Option<&str>| FlowSample {
            iface: iface.map(String::from),
            ..FlowSample::example(1)
        };
        assert!(f.flow_matches(&on(Some("eth0"))));
        assert!(!f.flow_matches(&on(Some("eth1"))));
        assert!(!f.flow_matches(&on(Some("lo"))));
        assert!(f.flow_matches(&on(None)));
        assert!(ReportFilters::default().flow_matches(&on(Some("lo"))));
    }

    #[test]
    fn flow_patterns_parse() {
        use FlowPattern::*;
        assert_eq!(
            FlowPattern::parse("10.0.0.2"),
            Ok(Peer("10.0.0.2".parse().unwrap()))
        );
        assert_eq!(
            FlowPattern::parse("[fd00::2]"),
            Ok(Peer("fd00::2".parse().unwrap()))
        );
        assert_eq!(
            FlowPattern::parse("fd00::2"),
            Ok(Peer("fd00::2".parse().unwrap()))
        );
        assert_eq!(
            FlowPattern::parse("10.0.0.2:5201"),
            Ok(PeerPort("10.0.0.2:5201".parse().unwrap()))
        );
        assert_eq!(
            FlowPattern::parse("[fd00::2]:5201"),
            Ok(PeerPort("[fd00::2]:5201".parse().unwrap()))
        );
        assert_eq!(FlowPattern::parse(":9092"), Ok(LocalPort(9092)));
        assert_eq!(FlowPattern::parse("iperf3"), Ok(Comm("iperf3".into())));
        for bad in [
            "",
            ":",
            ":0",
            ":http",
            ":70000",
            "10.0.0.300",
            "10.0.0.2:99999",
            "a-very-long-process-name",
        ] {
            let err = FlowPattern::parse(bad).unwrap_err();
            assert!(err.starts_with("--flow "), "{bad}: {err}");
        }
    }
}
