//! Who fills the connection table (issue 45, item 2): the flows each owner
//! opened in the interval and holds open, and the trend of
//! `conntrack_allowance_available` with, where it falls, when it would
//! reach zero. A `conntrack_limit`'s first line says both
//! (docs/verdicts.md, "Who fills the connection table").
//!
//! TCP flows are the flow probes' sockets, on the interface; UDP 5-tuples
//! and ICMP echo flows, which the hypervisor tracks too, are the UDP and
//! ICMP sockets made in the observed namespace (`udp_openers`,
//! `icmp_openers`, bpf/udpopen.bpf.h): a socket is made before any route is
//! chosen, so they are the namespace's, on every one of its interfaces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rates::owner_name;
use crate::model::snapshot::Snapshot;
use crate::model::udpopen::SocketOpenSample;

/// Owners named.
const OPENERS_NAMED: usize = 3;
/// Intervals of history the trend is fitted over, at most.
const TREND_INTERVALS: usize = 30;
/// Points needed before a slope is fitted.
const TREND_MIN_POINTS: usize = 3;
/// A gauge unchanged for this many intervals while flows open is said to
/// be possibly stale (it updates rarely on some interfaces).
const STALE_INTERVALS: usize = 10;

/// An owner by the flows it opened in the interval and holds open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnOpener {
    /// `comm/pid`, and the pod, container or service where known.
    pub owner: String,
    /// `tcp`, `udp` or `icmp` (an owner opening several is listed once for
    /// each). Absent (tcp) before UDP was counted.
    #[serde(default = "tcp")]
    pub proto: String,
    /// Flows it opened in the interval, per second.
    pub opened_per_s: f64,
    /// Of the flows opened on the interface in the interval, in %.
    pub share_pct: f64,
    /// Its listed flows open at the interval's end (TCP; 0 for UDP and
    /// ICMP, whose tracked flows outlive their sockets by the table's
    /// timeout).
    pub open: u64,
}

fn tcp() -> String {
    "tcp".to_string()
}

/// The interface's flows by owner: who opens flows, and who holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnOpeners {
    /// Flows opened on the interface in the interval, per second: TCP
    /// (listed and folded), UDP and ICMP.
    pub opened_per_s: f64,
    /// Of them, UDP sockets made in the namespace, per second; None when
    /// not measured (the program not attached, recordings before 1.16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_per_s: Option<f64>,
    /// Of them, ICMP sockets made in the namespace, per second; None when
    /// not measured (recordings before 1.18, or the program not attached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_per_s: Option<f64>,
    /// Most flows opened first, then most held open.
    pub owners: Vec<ConnOpener>,
    /// TCP flows open through the interface at the interval's end, idle
    /// ones included; None when not measured (recordings before 1.20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<u64>,
    /// Of them, idle for `HOLDER_IDLE_SECS` (60 s) or more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<u64>,
    /// The owners holding the most of them open, most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<ConnHolder>,
}

/// An owner by the TCP flows it holds open through the interface, idle
/// ones included: entries in the connection table, whether they move or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnHolder {
    /// `comm/pid`, and the pod, container or service where known.
    pub owner: String,
    pub open: u64,
    /// Of them, idle for `HOLDER_IDLE_SECS` (60 s) or more.
    pub idle: u64,
    /// The longest idle of them, in seconds (from the observer's start at
    /// most).
    pub longest_idle_s: u64,
}

impl ConnOpeners {
    /// No flow opened or held: left out of the JSON.
    pub(crate) fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.opened_per_s == 0.0
    }
}

/// An opener: its owner's name and the protocol (`tcp`, `udp`, `icmp`); mapped to
/// the flows it opened and holds open.
type OpenerKey = (String, &'static str);

/// Who opened and holds the interface's flows in `snap`: its TCP flows,
/// and the UDP and ICMP sockets made in the namespace.
pub(crate) fn openers(snap: &Snapshot, iface: &str) -> ConnOpeners {
    let secs = snap.interval_secs();
    if secs <= 0.0 {
        return ConnOpeners::default();
    }
    let mut by: BTreeMap<OpenerKey, (u64, u64)> = BTreeMap::new();
    let mut opened = 0u64;
    for f in snap.flows.iter().filter(|f| f.counts_for(iface)) {
        let name = f
            .owner
            .as_ref()
            .map_or_else(|| "owner unknown".to_string(), owner_name);
        let e = by.entry((name, "tcp")).or_default();
        if f.opened {
            e.0 += 1;
            opened += 1;
        }
        if !f.closed {
            e.1 += 1;
        }
    }
    opened += snap
        .folded
        .flows
        .iter()
        .filter(|g| g.counts_for(iface))
        .map(|g| g.opened)
        .sum::<u64>();
    let mut made = |sample: Option<&SocketOpenSample>, proto: &'static str| {
        sample.map(|u| {
            for o in &u.openers {
                by.entry((super::linklocal::sender_name(&o.owner), proto))
                    .or_default()
                    .0 += o.sockets;
            }
            u.sockets()
        })
    };
    let udp = made(snap.udp_openers.as_ref(), "udp");
    let icmp = made(snap.icmp_openers.as_ref(), "icmp");
    let held = snap
        .interfaces
        .iter()
        .find(|i| i.name == iface)
        .and_then(|i| i.tcp_holders.as_ref());
    opened += udp.unwrap_or(0) + icmp.unwrap_or(0);
    let mut owners: Vec<(OpenerKey, (u64, u64))> = by.into_iter().collect();
    owners.sort_by(|a, b| {
        (b.1 .0, b.1 .1)
            .cmp(&(a.1 .0, a.1 .1))
            .then_with(|| a.0.cmp(&b.0))
    });
    ConnOpeners {
        opened_per_s: opened as f64 / secs,
        udp_per_s: udp.map(|u| u as f64 / secs),
        icmp_per_s: icmp.map(|u| u as f64 / secs),
        owners: owners
            .into_iter()
            .take(OPENERS_NAMED)
            .map(|((owner, proto), (o, open))| ConnOpener {
                owner,
                proto: proto.to_string(),
                opened_per_s: o as f64 / secs,
                share_pct: if opened > 0 {
                    o as f64 * 100.0 / opened as f64
                } else {
                    0.0
                },
                open,
            })
            .collect(),
        open: held.map(|h| h.open()),
        idle: held.map(|h| h.idle()),
        holders: held
            .map(|h| {
                h.holders
                    .iter()
                    .take(OPENERS_NAMED)
                    .map(|x| ConnHolder {
                        owner: super::linklocal::sender_name(&x.owner),
                        open: x.open,
                        idle: x.idle,
                        longest_idle_s: x.longest_idle_s,
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// `conntrack_allowance_available` over the recent intervals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConntrackTrend {
    /// The gauge at the interval's end.
    pub available: u64,
    /// Its least-squares slope over `intervals`, entries per second
    /// (negative: the table fills).
    pub per_s: f64,
    /// Intervals the slope is fitted over (this one included): the last
    /// (up to 30) that read the gauge, less those at their start where it
    /// stood still but for the last of them.
    pub intervals: usize,
    /// Intervals, ending with this one, over which the gauge did not move.
    pub unchanged_intervals: usize,
    /// Seconds until it reaches zero at `per_s`, when it falls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zero_in_s: Option<f64>,
}

/// The gauge's trend on `iface` over the contiguous run of intervals that
/// read it, ending with `snap`; None when `snap` has no reading.
pub(crate) fn trend(prev: &[Snapshot], snap: &Snapshot, iface: &str) -> Option<ConntrackTrend> {
    let gauge = |s: &Snapshot| -> Option<(f64, u64)> {
        let i = s.interfaces.iter().find(|i| i.name == iface)?;
        let a = i.allowance.sample()?.totals.conntrack_allowance_available?;
        Some((s.mono_ns as f64 / 1e9, a))
    };
    let mut points: Vec<(f64, u64)> = std::iter::once(snap)
        .chain(prev.iter().rev())
        .map_while(gauge)
        .take(TREND_INTERVALS)
        .collect();
    let available = points.first()?.1;
    let unchanged_intervals = points.iter().take_while(|p| p.1 == available).count();
    points.reverse();
    // A gauge that stood still and then moved at every reading since is
    // fitted from the last of those still readings: a line fitted across
    // the plateau has a fraction of the fall's slope (3 intervals falling
    // after 27 still: under 4% of it) and forecasts the table full ~27
    // times later than it will be. A gauge that moved once and stood still
    // again is one that updates rarely: its step says nothing of the rate,
    // and fitted from the step alone it would forecast the table full far
    // too soon; it keeps the whole window.
    let still = points.iter().take_while(|p| p.1 == points[0].1).count();
    if still < points.len() && points[still - 1..].windows(2).all(|w| w[0].1 != w[1].1) {
        points.drain(..still - 1);
    }
    let n = points.len();
    let mut t = ConntrackTrend {
        available,
        per_s: 0.0,
        intervals: n,
        unchanged_intervals,
        zero_in_s: None,
    };
    if n < TREND_MIN_POINTS {
        return Some(t);
    }
    let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let mean_v = points.iter().map(|p| p.1 as f64).sum::<f64>() / n as f64;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in &points {
        num += (x - mean_t) * (*y as f64 - mean_v);
        den += (x - mean_t) * (x - mean_t);
    }
    if den > 0.0 {
        t.per_s = num / den;
    }
    if t.per_s < 0.0 {
        t.zero_in_s = Some(available as f64 / -t.per_s);
    }
    Some(t)
}

/// What a `conntrack_limit`'s first line adds: who opens the flows, and the
/// gauge's trend (or that it is missing or may be stale).
pub(crate) fn note(openers: &ConnOpeners, trend: Option<&ConntrackTrend>) -> String {
    use crate::shared::units;
    // With UDP measured each owner says which it opens; without, the list
    // is TCP's alone, worded as before UDP was counted.
    let udp_measured = openers.udp_per_s.is_some();
    let who = if openers.owners.is_empty() {
        if udp_measured {
            "no TCP flow or UDP or ICMP socket seen".to_string()
        } else {
            "no TCP flow seen".to_string()
        }
    } else {
        openers
            .owners
            .iter()
            .map(|o| {
                let proto = if udp_measured {
                    format!(" {}", o.proto)
                } else {
                    String::new()
                };
                if o.proto != "tcp" {
                    format!(
                        "{}{proto} {} ({}/s opened)",
                        o.owner,
                        units::pct(o.share_pct),
                        units::significant(o.opened_per_s, 3),
                    )
                } else {
                    format!(
                        "{}{proto} {} ({}/s opened, {} open)",
                        o.owner,
                        units::pct(o.share_pct),
                        units::significant(o.opened_per_s, 3),
                        o.open
                    )
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let gauge = match trend {
        None => "conntrack_allowance_available not reported by this interface".to_string(),
        Some(t) if t.unchanged_intervals >= STALE_INTERVALS && openers.opened_per_s > 0.0 => {
            format!(
                "conntrack_allowance_available {} unchanged for {} intervals while flows \
                 opened: it may be stale (some interfaces update it rarely)",
                t.available, t.unchanged_intervals
            )
        }
        Some(t) => match t.zero_in_s {
            Some(z) => format!(
                "conntrack_allowance_available {} falling {}/s over {} intervals: zero in \
                 ~{}",
                t.available,
                units::significant(-t.per_s, 3),
                t.intervals,
                units::secs(z)
            ),
            None if t.intervals < TREND_MIN_POINTS => format!(
                "conntrack_allowance_available {} (trend after {TREND_MIN_POINTS} intervals)",
                t.available
            ),
            None => format!(
                "conntrack_allowance_available {} not falling over {} intervals",
                t.available, t.intervals
            ),
        },
    };
    let total = match openers.udp_per_s {
        Some(udp) => {
            let icmp = openers.icmp_per_s.unwrap_or(0.0);
            format!(
                "new flows {}/s (TCP {}/s, UDP {}/s{})",
                units::significant(openers.opened_per_s, 3),
                units::significant((openers.opened_per_s - udp - icmp).max(0.0), 3),
                units::significant(udp, 3),
                match openers.icmp_per_s {
                    Some(icmp) => format!(", ICMP {}/s", units::significant(icmp, 3)),
                    None => ", ICMP not measured".to_string(),
                }
            )
        }
        None => format!(
            "new TCP flows {}/s (UDP not measured)",
            units::significant(openers.opened_per_s, 3)
        ),
    };
    format!("; {total}, by owner: {who}{}; {gauge}", holding(openers))
}

/// "; TCP flows open N, held by: OWNER N (M idle >= 60 s, the longest
/// for T), ...", when the open flows were counted.
fn holding(openers: &ConnOpeners) -> String {
    use crate::model::holders::HOLDER_IDLE_SECS;
    use crate::shared::units;
    let Some(open) = openers.open else {
        return String::new();
    };
    let who: Vec<String> = openers
        .holders
        .iter()
        .map(|h| {
            if h.idle == 0 {
                format!("{} {}", h.owner, h.open)
            } else {
                format!(
                    "{} {} ({} idle >= {HOLDER_IDLE_SECS} s, the longest for {})",
                    h.owner,
                    h.open,
                    h.idle,
                    units::secs(h.longest_idle_s as f64)
                )
            }
        })
        .collect();
    if who.is_empty() {
        format!("; TCP flows open {open}")
    } else {
        format!("; TCP flows open {open}, held by: {}", who.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{AllowanceSample, AllowanceStatus, InterfaceSample};

    /// One 1 s interval whose `eth0` read `available`.
    fn gauge(seq: u64, available: u64) -> Snapshot {
        let mut s = Snapshot::example(seq);
        let mut a = AllowanceSample::default();
        a.totals.conntrack_allowance_available = Some(available);
        s.interfaces = vec![InterfaceSample {
            name: "eth0".into(),
            allowance: AllowanceStatus::Read(Box::new(a)),
            ..Default::default()
        }];
        s
    }

    /// The lab's forecast run (docs/verdicts.md, "Who fills the connection
    /// table"): the gauge stood at 1,000 for the whole window, then fell 50
    /// a second. Fitted across the plateau, the slope read 1.8/s and the
    /// table full in ~460 s, where it is full 17 s later.
    #[test]
    fn a_fall_after_a_plateau_is_fitted_from_where_it_began() {
        let snaps: Vec<Snapshot> = (0..27)
            .map(|i| gauge(i, 1_000))
            .chain((27..30).map(|i| gauge(i, 1_000 - 50 * (i - 26))))
            .collect();
        let t = trend(&snaps[..29], &snaps[29], "eth0").unwrap();
        assert_eq!((t.available, t.intervals), (850, 4), "{t:?}");
        assert!((t.per_s + 50.0).abs() < 1e-6, "{t:?}");
        assert!((t.zero_in_s.unwrap() - 17.0).abs() < 1e-6, "{t:?}");
        // The first interval that moved: two readings, no slope yet.
        let t = trend(&snaps[..27], &snaps[27], "eth0").unwrap();
        assert_eq!((t.intervals, t.zero_in_s), (2, None), "{t:?}");
        // A gauge that never moved keeps its whole window: not falling
        // over 30 intervals.
        let t = trend(&snaps[..26], &snaps[26], "eth0").unwrap();
        assert_eq!((t.intervals, t.unchanged_intervals, t.per_s), (27, 27, 0.0));
        // A gauge that updates rarely: one step after the plateau, then
        // still again. Fitted from the step, 3 readings would say -50/s and
        // the table full in 18 s; over the window it falls 3.4/s.
        let snaps: Vec<Snapshot> = (0..27)
            .map(|i| gauge(i, 1_000))
            .chain((27..30).map(|i| gauge(i, 900)))
            .collect();
        let t = trend(&snaps[..29], &snaps[29], "eth0").unwrap();
        assert_eq!(t.intervals, 30, "{t:?}");
        assert!(t.per_s > -5.0 && t.per_s < 0.0, "{t:?}");
        // A fall from the window's start is fitted over all of it.
        let snaps: Vec<Snapshot> = (0..10).map(|i| gauge(i, 1_000 - 50 * i)).collect();
        let t = trend(&snaps[..9], &snaps[9], "eth0").unwrap();
        assert_eq!(t.intervals, 10);
        assert!((t.zero_in_s.unwrap() - 11.0).abs() < 1e-6, "{t:?}");
    }
}
