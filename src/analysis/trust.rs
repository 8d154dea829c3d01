//! Is this interval's allowance read data at all? A read that failed, one
//! the collector did not trust (a counter that went down without a reset,
//! a source that keeps going down), a zeroed struct (ENA driver 2.16.0 and later when the admin command
//! fails), growth that spans a failed read, or counts no shaper could have
//! produced (ENA 2.13.2 to 2.15.x copy uninitialised memory on the same
//! failure), and a read taken while the driver's admin queue counted a
//! failed command (before 2.13.2 the previous values then repeat, which no
//! value-based check can tell from a quiet allowance) are flagged with the
//! reason and not judged: judging them would turn enforcement into free
//! flow, or invent enforcement.

use super::rates::NormalisedRates;
use super::signal::Signal;
use super::thresholds::Thresholds;
use crate::model::snapshot::{AllowanceSample, InterfaceSample, Snapshot};

/// Evidence signal of an interval whose allowance read was no data.
pub(crate) const UNTRUSTED_SIGNAL: &str = Signal::AllowanceUntrusted.as_str();

/// A cumulative allowance counter at or above this cannot be real: 2^48
/// packets is nine years at a million packets per second. Uninitialised
/// driver memory reads as such values.
const IMPOSSIBLE_TOTAL: u64 = 1 << 48;

fn sample_of<'a>(snap: &'a Snapshot, iface: &str) -> Option<&'a AllowanceSample> {
    snap.interfaces
        .iter()
        .find(|i| i.name == iface)?
        .allowance
        .sample()
}

/// Why `now`, read after `before`, is no data in itself: a failed read, a
/// zeroed struct, or a failed admin command in between.
fn own_gap(now: &AllowanceSample, before: Option<&AllowanceSample>) -> Option<String> {
    if let Some(e) = &now.last_error {
        return Some(format!("allowance read failed this interval: {e}"));
    }
    if let Some(why) = &now.untrusted {
        return Some(format!(
            "allowance counters not trusted this interval: {why}"
        ));
    }
    let before = before?;
    if now.zeroed_reads > before.zeroed_reads {
        return Some(
            "the driver returned all-zero allowance counters this interval (failed admin \
             command): no data"
                .to_string(),
        );
    }
    if let (Some(n), Some(b)) = (now.admin_cmd_failures, before.admin_cmd_failures) {
        if n > b {
            return Some(format!(
                "the driver's admin queue failed {} command(s) since the last read \
                 (ena_admin_q_aborted_cmd + ena_admin_q_no_completion): the allowance values \
                 of this read are stale (before ENA 2.13.2 the previous values repeat), \
                 garbage or zeros, not data",
                n - b
            ));
        }
    }
    if now.read_failures > before.read_failures {
        return Some("a read failed since the last interval: no data".to_string());
    }
    None
}

/// Why the read behind `iface` in this interval is no data, judged from
/// the read itself and the two snapshots before it (`prev`, oldest first),
/// before any rate is computed: its own failure, or one of the read before,
/// whose missed growth this interval's delta then holds.
pub(crate) fn read_gap(prev: &[Snapshot], iface: &InterfaceSample) -> Option<String> {
    let now = iface.allowance.sample()?;
    let before = prev.last().and_then(|s| sample_of(s, &iface.name));
    if let Some(why) = own_gap(now, before) {
        return Some(why);
    }
    let before = before?;
    let earlier = prev
        .len()
        .checked_sub(2)
        .and_then(|i| sample_of(&prev[i], &iface.name));
    own_gap(before, earlier).map(|_| {
        "the read before this one was no data (failed, zeroed or stale): this interval's \
         growth spans the gap, so it is not judged"
            .to_string()
    })
}

/// Why the deltas in `r` cannot be real, if they cannot: an exceeded count
/// far above the packets it is a share of, or a total no counter reaches.
pub(crate) fn implausible(
    iface: &InterfaceSample,
    r: &NormalisedRates,
    th: &Thresholds,
) -> Option<String> {
    let sample = iface.allowance.sample()?;
    if let Some((name, v)) = sample
        .totals
        .exceeded()
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
