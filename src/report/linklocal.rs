//! Who sent to the instance's link-local services (issue 45, item 4), as
//! the report tells it: the analysis's counts per interval
//! (src/analysis/linklocal.rs) added up per episode and per interface, and
//! the one line the text and HTML reports print of them. Bounded: at most
//! so many senders are kept apart per episode or interface, the packets of
//! the ones past that are summed as not named.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::analysis::linklocal::{LinkLocalCounts, SenderKey};
use crate::model::linklocal::{LinkLocalService, LINKLOCAL_PPS_LIMIT};
use crate::shared::units;

/// Senders shown per episode or interface, most packets first.
pub(crate) const LINKLOCAL_SENDERS_SHOWN: usize = 3;
/// Senders kept apart over an interface's span, and over an episode; the
/// packets of any more are summed in `unnamed_packets`.
pub(crate) const IFACE_SENDERS_KEPT: usize = 256;
pub(crate) const EPISODE_SENDERS_KEPT: usize = 32;

/// The packets sent to the link-local services through one interface over
/// an episode or the report's span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLocalUse {
    /// Intervals the link-local probes measured the interface in, and
    /// their seconds: what the rates are over.
    pub intervals: u64,
    pub secs: f64,
    /// Packets sent to the services over them: UDP datagrams (those no
    /// sender was kept for included) and segments of TCP flows to them.
    pub packets: u64,
    pub mean_pps: f64,
    /// The busiest interval's packets per second.
    pub peak_pps: f64,
    /// The services' limit per interface (1,024 pps).
    pub limit_pps: f64,
    /// The senders with the most packets (at most
    /// [`LINKLOCAL_SENDERS_SHOWN`]).
    pub senders: Vec<LinkLocalSenderUse>,
    /// The other senders named, and their packets.
    #[serde(default)]
    pub other_senders: u64,
    #[serde(default)]
    pub other_packets: u64,
    /// Packets of senders not named: past the recorder's list of an
    /// interval, or past the senders the report keeps apart.
    #[serde(default)]
    pub unnamed_packets: u64,
    /// Datagrams no sender was kept for (the kernel's sender map was full).
    #[serde(default)]
    pub unattributed: u64,
}

/// One sender (owner, service, protocol, family) over the episode or span.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLocalSenderUse {
    /// `comm/pid`, and the pod, container or service where known.
    pub sender: String,
    pub service: LinkLocalService,
    pub proto: String,
    pub family: u8,
    pub packets: u64,
    /// Over the measured seconds.
    pub pps: f64,
    /// Of all the packets to the services, in %.
    pub share_pct: f64,
}

/// Sums of one episode or interface, bounded.
#[derive(Debug, Clone)]
pub(crate) struct LinkLocalAcc {
    kept: usize,
    intervals: u64,
    secs: f64,
    packets: u64,
    peak_pps: f64,
    by: BTreeMap<SenderKey, u64>,
    unnamed_packets: u64,
    unattributed: u64,
}

impl LinkLocalAcc {
    /// Keeps at most `kept` senders apart.
    pub(crate) fn new(kept: usize) -> Self {
        LinkLocalAcc {
            kept,
            intervals: 0,
            secs: 0.0,
            packets: 0,
            peak_pps: 0.0,
            by: BTreeMap::new(),
            unnamed_packets: 0,
            unattributed: 0,
        }
    }

    /// One interval of `secs` seconds.
    pub(crate) fn add(&mut self, c: &LinkLocalCounts, secs: f64) {
        if secs <= 0.0 {
            return;
        }
        self.intervals += 1;
        self.secs += secs;
        self.packets += c.packets;
        self.peak_pps = self.peak_pps.max(c.packets as f64 / secs);
        self.unattributed += c.unattributed;
        self.unnamed_packets += c.folded_packets;
        for (key, n) in &c.senders {
            if let Some(x) = self.by.get_mut(key) {
                *x += n;
            } else if self.by.len() < self.kept {
                self.by.insert(key.clone(), *n);
            } else {
                self.unnamed_packets += n;
            }
        }
    }

    /// The sums; None when nothing was sent to the services (or the
    /// interface was never measured).
    pub(crate) fn finish(&self) -> Option<LinkLocalUse> {
        if self.packets == 0 || self.secs <= 0.0 {
            return None;
        }
        let mut ranked: Vec<(&SenderKey, u64)> = self.by.iter().map(|(k, n)| (k, *n)).collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let share = |n: u64| n as f64 * 100.0 / self.packets as f64;
        let senders = ranked
            .iter()
            .take(LINKLOCAL_SENDERS_SHOWN)
            .map(|(k, n)| LinkLocalSenderUse {
                sender: k.sender.clone(),
                service: k.service,
                proto: k.proto.clone(),
                family: k.family,
                packets: *n,
                pps: *n as f64 / self.secs,
                share_pct: share(*n),
            })
            .collect();
        let rest = ranked.iter().skip(LINKLOCAL_SENDERS_SHOWN);
        Some(LinkLocalUse {
            intervals: self.intervals,
            secs: self.secs,
            packets: self.packets,
            mean_pps: self.packets as f64 / self.secs,
            peak_pps: self.peak_pps,
            limit_pps: LINKLOCAL_PPS_LIMIT,
            senders,
            other_senders: rest.clone().count() as u64,
            other_packets: rest.map(|(_, n)| n).sum(),
            unnamed_packets: self.unnamed_packets,
            unattributed: self.unattributed,
        })
    }
}

/// The line the text and HTML reports print:
/// `mean 1.81kpps (177% of the limit of 1024 pps per interface), peak
/// 2.05kpps (200%); top senders: dns_loop.py/4412 dns udp/ipv4 1.65kpps
/// (91.0%), ..., +2 more (3.00%)`, then the packets no sender is named for.
pub(crate) fn line(u: &LinkLocalUse) -> String {
    let of_limit = |pps: f64| units::pct(pps * 100.0 / u.limit_pps);
    let mut out = format!(
        "mean {} ({} of the limit of {} pps per interface), peak {} ({})",
        units::rate_pps(u.mean_pps),
        of_limit(u.mean_pps),
        units::significant(u.limit_pps, 4),
        units::rate_pps(u.peak_pps),
        of_limit(u.peak_pps)
    );
    if !u.senders.is_empty() {
        let mut words: Vec<String> = u
            .senders
            .iter()
            .map(|s| {
                format!(
                    "{} {} {}/{} {} ({})",
                    s.sender,
                    s.service.as_str(),
                    s.proto,
                    if s.family == 6 { "ipv6" } else { "ipv4" },
                    units::rate_pps(s.pps),
                    units::pct(s.share_pct)
                )
            })
            .collect();
        if u.other_senders > 0 {
            words.push(format!(
                "+{} more ({})",
                u.other_senders,
                units::pct(u.other_packets as f64 * 100.0 / u.packets as f64)
            ));
        }
        out.push_str(&format!("; top senders: {}", words.join(", ")));
    }
    if u.unnamed_packets > 0 {
        out.push_str(&format!(
            "; {} packets of senders not named (past the lists kept)",
            u.unnamed_packets
        ));
    }
    if u.unattributed > 0 {
        out.push_str(&format!(
            "; {} datagrams with no sender kept (the sender map was full)",
            u.unattributed
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sender: &str, service: LinkLocalService) -> SenderKey {
        SenderKey {
            sender: sender.into(),
            service,
            proto: "udp".into(),
            family: 4,
        }
    }

    fn counts(senders: &[(&str, u64)], unattributed: u64) -> LinkLocalCounts {
        let senders: Vec<(SenderKey, u64)> = senders
            .iter()
            .map(|(s, n)| (key(s, LinkLocalService::Dns), *n))
            .collect();
        LinkLocalCounts {
            packets: senders.iter().map(|(_, n)| n).sum::<u64>() + unattributed,
            senders,
            unattributed,
            ..Default::default()
        }
    }

    #[test]
    fn the_line_names_the_top_three_and_counts_the_rest() {
        let mut acc = LinkLocalAcc::new(IFACE_SENDERS_KEPT);
        acc.add(
            &counts(&[("heavy/1", 1_800), ("b/2", 100), ("c/3", 50)], 0),
            1.0,
        );
        acc.add(
            &counts(
                &[("heavy/1", 1_700), ("d/4", 30), ("e/5", 20), ("b/2", 100)],
                4,
            ),
            1.0,
        );
        let u = acc.finish().unwrap();
        assert_eq!(u.packets, 3_804);
        assert_eq!(u.intervals, 2);
        assert_eq!(u.mean_pps, 1_902.0);
        assert_eq!(u.peak_pps, 1_950.0);
        assert_eq!(u.senders.len(), 3);
        assert_eq!((u.other_senders, u.other_packets), (2, 50));
        assert_eq!(
            line(&u),
            "mean 1.90kpps (186% of the limit of 1024 pps per interface), peak 1.95kpps (190%); \
             top senders: heavy/1 dns udp/ipv4 1.75kpps (92.0%), b/2 dns udp/ipv4 100pps \
             (5.26%), c/3 dns udp/ipv4 25.0pps (1.31%), +2 more (1.31%); \
             4 datagrams with no sender kept (the sender map was full)"
        );
    }

    #[test]
    fn nothing_sent_is_no_line_and_senders_past_the_bound_are_counted() {
        let mut acc = LinkLocalAcc::new(2);
        assert_eq!(acc.finish(), None);
        acc.add(&counts(&[], 0), 1.0);
        assert_eq!(acc.finish(), None);
        acc.add(&counts(&[("a/1", 5), ("b/2", 4), ("c/3", 3)], 0), 1.0);
        let u = acc.finish().unwrap();
        assert_eq!(u.senders.len(), 2);
        assert_eq!(u.unnamed_packets, 3);
        assert_eq!(u.other_senders, 0);
        assert!(line(&u).ends_with("; 3 packets of senders not named (past the lists kept)"));
    }
}
