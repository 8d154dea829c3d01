//! The cluster report as text (src/report/cluster.rs): the hosts, a lane
//! per host on one time axis, then every notable episode with the roles
//! that carried its traffic and what the other hosts saw.

use std::fmt::Write;

use super::cluster::{ClusterHost, ClusterReport};
use crate::analysis::cluster::{PeerFigures, PeerView};
use crate::analysis::Verdict;
use crate::shared::clock::{format_offset, format_utc};
use crate::shared::units::{pct, rate_bits, ratio, secs};

/// Columns of a lane.
const LANE: usize = 60;
/// Episodes listed at most (all are in `--json`).
const EPISODES_LISTED: usize = 50;
/// Roles listed per episode and per other host.
const ROLES_LISTED: usize = 4;

/// One character per verdict in the lanes.
pub(crate) fn verdict_char(v: Verdict) -> char {
    match v {
        Verdict::Idle => '.',
        Verdict::FreeFlow => '-',
        Verdict::HypervisorQueuing => 'Q',
        Verdict::HypervisorDrop => 'D',
        Verdict::HypervisorCap => 'C',
        Verdict::LocalQueuing => 'q',
        Verdict::LocalDrop => 'd',
        Verdict::NetworkLoss => 'L',
        Verdict::PpsLimit => 'P',
        Verdict::ConntrackLimit => 'T',
        Verdict::LinklocalLimit => 'K',
    }
}

pub(crate) fn render(r: &ClusterReport) -> String {
    let mut out = String::new();
    let span = r.end_unix_ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0;
    let _ = writeln!(
        out,
        "cluster report: {} hosts on one time axis, {} to {} ({})",
        r.hosts.len(),
        format_utc(r.start_unix_ms),
        format_utc(r.end_unix_ms),
        secs(span)
    );
    let _ = writeln!(
        out,
        "  times are +HH:MM:SS from {}",
        format_utc(r.start_unix_ms)
    );
    hosts(&mut out, r);
    lanes(&mut out, r);
    episodes(&mut out, r);
    let _ = writeln!(
        out,
        "\none host's whole report: throttlescope report FILE... with that host's files (or --json: hosts[].report)"
    );
    out
}

fn offset(r: &ClusterReport, ms: u64) -> String {
    format_offset(ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0)
}

fn hosts(out: &mut String, r: &ClusterReport) {
    let _ = writeln!(out, "\nhosts");
    for h in &r.hosts {
        let addrs: Vec<String> = h.addrs.iter().take(3).map(|a| a.to_string()).collect();
        let _ = writeln!(
            out,
            "  {}: {} to {}, {} file{} ({}), {} interval{}; addresses {}",
            h.name,
            offset(r, h.start_unix_ms),
            offset(r, h.end_unix_ms),
            h.files.len(),
            if h.files.len() == 1 { "" } else { "s" },
            h.files.join(", "),
            h.report.span.intervals,
            if h.report.span.intervals == 1 {
                ""
            } else {
                "s"
            },
            if addrs.is_empty() {
                "unknown (no flows)".to_string()
            } else {
                addrs.join(", ")
            }
        );
        if h.broker.is_none() {
            let _ = writeln!(
                out,
                "    broker id unknown: no other host's Kafka lookup placed its addresses"
            );
        }
    }
    for w in r.hosts.iter().flat_map(|h| {
        h.report
            .health
            .read_warnings
            .iter()
            .map(move |w| (h, w.as_str()))
    }) {
        let _ = writeln!(out, "  warning ({}): {}", w.0.name, w.1);
    }
}

/// A lane per host: one character per 1/LANE of the axis, the most
/// notable verdict of its interfaces there.
fn lanes(out: &mut String, r: &ClusterReport) {
    let total = r.end_unix_ms.saturating_sub(r.start_unix_ms).max(1);
    let _ = writeln!(
        out,
        "\ntime axis ({} a column; Q hypervisor_queuing, D hypervisor_drop, C hypervisor_cap, P pps_limit, \
         q local_queuing, d local_drop, L network_loss, T conntrack_limit, K linklocal_limit, - free flow, . idle, blank not recorded)",
        secs(total as f64 / 1000.0 / LANE as f64)
    );
    let width = r.hosts.iter().map(|h| h.name.len()).max().unwrap_or(0);
    for h in &r.hosts {
        let _ = writeln!(out, "  {:<width$} |{}|", h.name, lane(r, h, total));
    }
}

fn lane(r: &ClusterReport, h: &ClusterHost, total: u64) -> String {
    (0..LANE)
        .map(|c| {
            let from = r.start_unix_ms + total * c as u64 / LANE as u64;
            let to = r.start_unix_ms + total * (c as u64 + 1) / LANE as u64;
            if to <= h.start_unix_ms || from >= h.end_unix_ms {
                return ' ';
            }
            let mut best: Option<Verdict> = None;
            for e in &h.lane {
                if e.start_ms < to && from < e.end_ms {
                    let rank = |v: Verdict| match v {
                        Verdict::Idle => 0,
                        Verdict::FreeFlow => 1,
                        _ => 2,
                    };
                    if best.is_none_or(|b| rank(e.verdict) > rank(b)) {
                        best = Some(e.verdict);
                    }
                }
            }
            best.map_or('.', verdict_char)
        })
        .collect()
}

fn episodes(out: &mut String, r: &ClusterReport) {
    let _ = writeln!(
        out,
        "\nepisodes ({}; not idle, not free flow), by start",
        r.episodes.len()
    );
    if r.episodes.is_empty() {
        let _ = writeln!(out, "  none: no host was held back");
    }
    for v in r.episodes.iter().take(EPISODES_LISTED) {
        let h = &r.hosts[v.host];
        let e = &v.span;
        let own = h.report.episodes.get(v.episode);
        let _ = writeln!(
            out,
            "  {} to {} ({})  {}  {}  {}{}",
            offset(r, e.start_ms),
            offset(r, e.end_ms),
            secs(e.end_ms.saturating_sub(e.start_ms) as f64 / 1000.0),
            h.name,
            e.iface,
            e.verdict,
            own.map_or(String::new(), |o| format!(
                " (confidence {:.0}%)",
                o.episode.mean_confidence * 100.0
            ))
        );
        if let Some(o) = own {
            let notes: Vec<&str> = o
                .evidence
                .iter()
                .filter(|ev| ev.exceeded && ev.signal != "wire_pps")
                .map(|ev| ev.note.as_str())
                .take(2)
                .collect();
            if !notes.is_empty() {
                let _ = writeln!(out, "    at its peak: {}", notes.join("; "));
            }
        }
        if v.carriers.is_empty() {
            let _ = writeln!(
                out,
                "    {} by Kafka role: none known (no Kafka lookup in this recording)",
                v.direction
            );
        } else {
            let list: Vec<String> = v
                .carriers
                .iter()
                .take(ROLES_LISTED)
                .map(|c| format!("{} {}", c.label, pct(c.pct)))
                .collect();
            let _ = writeln!(
                out,
                "    {} carried by: {}{}",
                v.direction,
                list.join(", "),
                more(v.carriers.len())
            );
        }
        for o in &v.others {
            if o.secs == 0.0 {
                let _ = writeln!(out, "    {}: not recorded then", o.name);
                continue;
            }
            let verdicts: Vec<String> = o
                .verdicts
                .iter()
                .take(3)
                .map(|x| format!("{} {} {}", x.iface, x.verdict, secs(x.secs)))
                .collect();
            let _ = writeln!(
                out,
                "    {} saw: {}",
                o.name,
                if verdicts.is_empty() {
                    "idle".to_string()
                } else {
                    verdicts.join(", ")
                }
            );
            if o.peers.is_empty() {
                let _ = writeln!(out, "      no flows to {}", h.name);
            }
            for p in o.peers.iter().take(ROLES_LISTED) {
                let _ = writeln!(out, "      {}", peer_line(p));
            }
            if o.peers.len() > ROLES_LISTED {
                let _ = writeln!(
                    out,
                    "      ... and {} more roles (all are in --json)",
                    o.peers.len() - ROLES_LISTED
                );
            }
        }
    }
    if r.episodes.len() > EPISODES_LISTED {
        let _ = writeln!(
            out,
            "  ... and {} more (all are in --json)",
            r.episodes.len() - EPISODES_LISTED
        );
    }
}

fn more(n: usize) -> String {
    if n > ROLES_LISTED {
        format!(" (+{} more)", n - ROLES_LISTED)
    } else {
        String::new()
    }
}

/// `replication from leader 1, 1 flow: RTT inflation 5.00x (usual 1.20x),
/// rx 16.0Mb/s (usual 160Mb/s), tx 480kb/s (usual 480kb/s), retransmitted
/// 0% (usual 0%)`.
pub(crate) fn peer_line(p: &PeerView) -> String {
    let d = &p.during;
    let u = p.usual.as_ref();
    let usual = |f: &dyn Fn(&PeerFigures) -> Option<String>| match u.and_then(f) {
        Some(s) => format!(" (usual {s})"),
        None => String::new(),
    };
    let mut parts = Vec::new();
    if let Some(x) = d.rtt_inflation {
        parts.push(format!(
            "RTT inflation {}{}",
            ratio(x),
            usual(&|f| f.rtt_inflation.map(ratio))
        ));
    }
    if let Some(x) = d.added_delay_us {
        let ms = |us: f64| format!("+{}", secs(us / 1e6));
        parts.push(format!(
            "delay {}{}",
            ms(x),
            usual(&|f| f.added_delay_us.map(ms))
        ));
    }
    parts.push(format!(
        "rx {}{}",
        rate_bits(d.rx_bps().unwrap_or(0.0)),
        usual(&|f| f.rx_bps().map(rate_bits))
    ));
    parts.push(format!(
        "tx {}{}",
        rate_bits(d.tx_bps().unwrap_or(0.0)),
        usual(&|f| f.tx_bps().map(rate_bits))
    ));
    parts.push(format!(
        "retransmitted {}{}",
        d.retrans_pct().map_or("-".to_string(), pct),
        usual(&|f| f.retrans_pct().map(pct))
    ));
    format!(
        "{}, {} flow{}: {}{}",
        p.label,
        d.flows,
        if d.flows == 1 { "" } else { "s" },
        parts.join(", "),
        if u.is_none() {
            "; never seen outside its episodes"
        } else {
            ""
        }
    )
}
