//! Is this interval's allowance read data at all? A read that failed, a
//! zeroed struct (ENA driver 2.16.0 and later when the admin command
//! fails), growth that spans a failed read, or counts no shaper could have
//! produced (ENA 2.13.2 to 2.15.x copy uninitialised memory on the same
//! failure), and a read that repeats the last one exactly while traffic
//! flows and the counters had been live (ENA before 2.13.2 keeps the
//! previous values on that failure) are flagged with the reason and not
//! judged: judging them would turn enforcement into free flow, or invent
//! enforcement.

use super::rates::NormalisedRates;
use super::thresholds::Thresholds;
use crate::snapshot::{AllowanceCounters, InterfaceSample, Snapshot};

/// Evidence signal of an interval whose allowance read was no data.
pub const UNTRUSTED_SIGNAL: &str = "allowance_untrusted";

/// A cumulative allowance counter at or above this cannot be real: 2^48
/// packets is nine years at a million packets per second. Uninitialised
/// driver memory reads as such values.
const IMPOSSIBLE_TOTAL: u64 = 1 << 48;

/// Why the read behind `iface` in this interval is no data, judged from
/// the read itself and the previous snapshot (`prev`), before any rate is
/// computed.
pub fn read_gap(prev: Option<&Snapshot>, iface: &InterfaceSample) -> Option<String> {
    let now = iface.allowance.sample()?;
    if let Some(e) = &now.last_error {
        return Some(format!("allowance read failed this interval: {e}"));
    }
    let before = prev?
        .interfaces
        .iter()
        .find(|i| i.name == iface.name)?
        .allowance
        .sample()?;
    if now.zeroed_reads > before.zeroed_reads {
        return Some(
            "the driver returned all-zero allowance counters this interval (failed admin \
             command): no data"
                .to_string(),
        );
    }
    if now.read_failures > before.read_failures || before.last_error.is_some() {
        return Some(
            "the read before this one failed: this interval's growth spans the gap, so it \
             is not judged"
                .to_string(),
        );
    }
    None
}

/// Intervals in the look-back in which `conntrack_allowance_available`
/// must have moved before an exact repeat is called stale: a gauge that
/// moves with every connection opened or closed shows the reads are live.
const LIVE_GAUGE_MOVES: usize = 2;

/// Why this interval's read is a stale copy of the last one, if it is:
/// every allowance field, the `conntrack_allowance_available` gauge
/// included, repeats the previous read exactly while the interface carries
/// traffic, and that gauge had been moving in the look-back (`prev`,
/// oldest first). Exceeded counters that stand still are normal (nothing is
/// shaped); a live gauge that freezes together with them is not. Where the
/// gauge never moved (an idle table, a lab) nothing can be told: no flag.
pub fn frozen(
    prev: &[Snapshot],
    iface: &InterfaceSample,
    r: &NormalisedRates,
    th: &Thresholds,
) -> Option<String> {
    let now = iface.allowance.sample()?;
    let reads: Vec<&AllowanceCounters> = prev
        .iter()
        .filter_map(|s| s.interfaces.iter().find(|i| i.name == iface.name))
        .filter_map(|i| i.allowance.sample())
        .map(|a| &a.totals)
        .collect();
    let last = *reads.last()?;
    if now.totals != *last || now.totals.conntrack_allowance_available.is_none() {
        return None;
    }
    if r.wire_pps < th.idle_pps {
        return None;
    }
    let moves = reads
        .windows(2)
        .filter(|w| w[0].conntrack_allowance_available != w[1].conntrack_allowance_available)
        .count();
    (moves >= LIVE_GAUGE_MOVES).then(|| {
        format!(
            "every allowance counter, conntrack_allowance_available included, repeats the last \
             read exactly while {:.0} packets/s flow, and that gauge had moved in {moves} recent \
             intervals: a stale read (ENA before 2.13.2 keeps the previous values when the \
             admin command fails), not judged",
            r.wire_pps
        )
    })
}

fn totals(c: &AllowanceCounters) -> [(&'static str, Option<u64>); 5] {
    [
        ("bw_in_allowance_exceeded", c.bw_in_allowance_exceeded),
        ("bw_out_allowance_exceeded", c.bw_out_allowance_exceeded),
        ("pps_allowance_exceeded", c.pps_allowance_exceeded),
        (
            "conntrack_allowance_exceeded",
            c.conntrack_allowance_exceeded,
        ),
        (
            "linklocal_allowance_exceeded",
            c.linklocal_allowance_exceeded,
        ),
    ]
}

/// Why the deltas in `r` cannot be real, if they cannot: an exceeded count
/// far above the packets it is a share of, or a total no counter reaches.
pub fn implausible(
    iface: &InterfaceSample,
    r: &NormalisedRates,
    th: &Thresholds,
) -> Option<String> {
    let sample = iface.allowance.sample()?;
    if let Some((name, v)) = totals(&sample.totals)
        .into_iter()
        .find_map(|(n, v)| v.filter(|v| *v >= IMPOSSIBLE_TOTAL).map(|v| (n, v)))
    {
        return Some(format!(
            "{name} reads {v}, a total no counter reaches (uninitialised driver memory, as \
             ENA 2.13.2 to 2.15.x return when the admin command fails): not judged"
        ));
    }
    let limit = |packets: u64| th.untrusted_ratio * packets as f64 + th.untrusted_slack_packets;
    let checks = [
        (
            "bw_out_allowance_exceeded",
            r.bw_out_exceeded,
            r.tx_wire_packets,
            "tx",
        ),
        (
            "bw_in_allowance_exceeded",
            r.bw_in_exceeded,
            r.rx_wire_packets,
            "rx",
        ),
        (
            "pps_allowance_exceeded",
            r.pps_exceeded,
            r.tx_wire_packets + r.rx_wire_packets,
            "tx+rx",
        ),
    ];
    checks.into_iter().find_map(|(name, delta, packets, dir)| {
        let d = delta?;
        (d as f64 > limit(packets)).then(|| {
            format!(
                "{name} grew by {d} while only {packets} {dir} wire packets passed: more than \
                 the shaper could have counted, so the read is not judged"
            )
        })
    })
}
