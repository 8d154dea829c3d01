//! The plain-text view: interfaces, the busiest flows, and health.

use std::fmt::Write;

use crate::analysis::IntervalAnalysis;
use crate::snapshot::{AllowanceStatus, FlowSample, Snapshot};

/// Renders one snapshot (and its analysis, when given) as text; `top`
/// flows at most.
pub fn render(snap: &Snapshot, analysis: Option<&IntervalAnalysis>, top: usize) -> String {
    let secs = snap.interval_secs().max(1e-9);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- interval {} ({:.2} s) --",
        snap.seq,
        snap.interval_secs()
    );
    for i in &snap.interfaces {
        let _ = writeln!(
            out,
            "{:<12} {:<8} tx {:>10} {:>9} pps   rx {:>10} {:>9} pps   drops tx {} rx {}",
            i.name,
            i.driver.as_deref().unwrap_or("-"),
            rate_bits(i.delta.tx_bytes as f64 * 8.0 / secs),
            format!("{:.0}", i.delta.tx_packets as f64 / secs),
            rate_bits(i.delta.rx_bytes as f64 * 8.0 / secs),
            format!("{:.0}", i.delta.rx_packets as f64 / secs),
            i.delta.tx_dropped,
            i.delta.rx_dropped,
        );
        if let AllowanceStatus::Unavailable { reason } = &i.allowance {
            let _ = writeln!(out, "{:<12} allowance counters unavailable: {reason}", "");
        }
        if let Some(v) = analysis.and_then(|a| a.interfaces.iter().find(|v| v.iface == i.name)) {
            let r = &v.rates;
            let pct = |x: Option<f64>| x.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:<12} bw_out {} bw_in {} pps {} retrans {}  => {} ({:.0}%): {}",
                "",
                pct(r.bw_out_pct),
                pct(r.bw_in_pct),
                pct(r.pps_pct),
                pct(r.retransmit_pct),
                v.verdict,
                v.confidence * 100.0,
                v.evidence
                    .iter()
                    .take(2)
                    .map(|e| e.note.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    let _ = writeln!(
        out,
        "{:<40} {:>6} {:<16} {:>10} {:>9} {:>9} {:>6} {:>6} {:>8} {:<6}",
        "peer", "lport", "owner", "tx", "srtt", "min_rtt", "infl", "cwnd", "retrans", "state"
    );
    for f in busiest(&snap.flows).into_iter().take(top) {
        let _ = writeln!(
            out,
            "{:<40} {:>6} {:<16} {:>10} {:>9} {:>9} {:>6} {:>6} {:>8} {:<6}",
            f.peer.to_string(),
            f.local.port(),
            owner_label(f),
            rate_bits(f.delta.bytes_sent as f64 * 8.0 / secs),
            micros(f.srtt_us),
            micros(f.min_rtt_us),
            f.rtt_inflation()
                .map(|x| format!("{x:.2}x"))
                .unwrap_or_else(|| "-".into()),
            f.cwnd,
            f.delta.retrans_segs,
            if f.closed { "closed" } else { f.state.as_str() },
        );
    }
    if snap.flows.len() > top {
        let _ = writeln!(out, "... and {} more flows", snap.flows.len() - top);
    }
    let h = &snap.health;
    let _ = writeln!(
        out,
        "health: missed runs {}  ringbuf drops {}  untracked flows {}  counter read failures {}",
        h.missed_total(),
        h.ringbuf_drops,
        h.untracked_flows,
        h.counter_read_failures
    );
    out
}

/// Flows by bytes sent in the interval, then by id for a stable order.
pub fn busiest(flows: &[FlowSample]) -> Vec<&FlowSample> {
    let mut v: Vec<&FlowSample> = flows.iter().collect();
    v.sort_by(|a, b| {
        (b.delta.bytes_sent + b.delta.bytes_received)
            .cmp(&(a.delta.bytes_sent + a.delta.bytes_received))
            .then(a.id.cmp(&b.id))
    });
    v
}

fn owner_label(f: &FlowSample) -> String {
    match &f.owner {
        Some(o) => format!("{}/{}", o.comm, o.pid),
        None => "-".into(),
    }
}

/// Bits per second with a unit.
pub fn rate_bits(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2}Gb/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1}Mb/s", bps / 1e6)
    } else if bps >= 1e3 {
        format!("{:.1}kb/s", bps / 1e3)
    } else {
        format!("{bps:.0}b/s")
    }
}

fn micros(us: u32) -> String {
    if us == 0 {
        "-".into()
    } else if us >= 10_000 {
        format!("{:.1}ms", us as f64 / 1000.0)
    } else {
        format!("{us}us")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_have_units() {
        assert_eq!(rate_bits(196e6), "196.0Mb/s");
        assert_eq!(rate_bits(16e9), "16.00Gb/s");
        assert_eq!(micros(250), "250us");
        assert_eq!(micros(25_000), "25.0ms");
    }
}
