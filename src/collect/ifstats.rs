//! Interface counters from `/sys/class/net/<if>/statistics`, and the one
//! listing of the namespace's interfaces.
//!
//! The list comes from /proc/thread-self/net/dev, which answers for the
//! calling thread's network namespace, also after a bare `setns`; /sys
//! answers for the namespace it was mounted in (`ip netns exec NS` remounts
//! it, so there the counters are that namespace's).

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::model::snapshot::LinkCounters;

const SYS_NET: &str = "/sys/class/net";

/// Interface names of this namespace, sorted; `lo` is left out unless
/// `wanted` names it. A non-empty `wanted` keeps only those names.
pub(crate) fn interfaces(wanted: &[String]) -> Result<Vec<String>> {
    let (names, missing) = present(wanted)?;
    // An asked-for interface that does not exist is a typo or the wrong
    // namespace: say so rather than report nothing.
    if !missing.is_empty() {
        let all = present(&[])?.0;
        anyhow::bail!(
            "--iface {}: no such interface in this network namespace (it has: {})",
            missing.join(", "),
            if all.is_empty() {
                "none but lo".to_string()
            } else {
                all.join(", ")
            }
        );
    }
    Ok(names)
}

/// The interfaces to watch that exist now (all but `lo` when `wanted` is
/// empty), sorted, and the wanted ones that do not: an interface deleted
/// while watching is reported missing while the others go on.
pub(crate) fn present(wanted: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let names: Vec<String> = listed()?
        .into_iter()
        .filter(|n| {
            if wanted.is_empty() {
                n != "lo"
            } else {
                wanted.iter().any(|w| w == n)
            }
        })
        .collect();
    let missing = wanted
        .iter()
        .filter(|w| !names.contains(w))
        .cloned()
        .collect();
    Ok((names, missing))
}

/// Every interface of the calling thread's network namespace, `lo` too,
/// sorted (from /proc/thread-self/net/dev: see the module comment).
fn listed() -> Result<Vec<String>> {
    let path = "/proc/thread-self/net/dev";
    let text = fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // Two header lines, then `name: counters...` per interface.
    let mut names: Vec<String> = text
        .lines()
        .skip(2)
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .collect();
    names.sort();
    Ok(names)
}

/// The counters of one interface, now.
pub(crate) fn read_counters(iface: &str) -> Result<LinkCounters> {
    let dir = Path::new(SYS_NET).join(iface).join("statistics");
    let read = |name: &str| -> Result<u64> {
        let p = dir.join(name);
        let s = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        s.trim()
            .parse()
            .with_context(|| format!("{}: not a number: {:?}", p.display(), s.trim()))
    };
    Ok(LinkCounters {
        tx_packets: read("tx_packets")?,
        rx_packets: read("rx_packets")?,
        tx_bytes: read("tx_bytes")?,
        rx_bytes: read("rx_bytes")?,
        tx_dropped: read("tx_dropped")?,
        rx_dropped: read("rx_dropped")?,
        tx_errors: read("tx_errors")?,
        rx_errors: read("rx_errors")?,
    })
}

/// The interface MTU.
pub(crate) fn mtu(iface: &str) -> Option<u32> {
    fs::read_to_string(Path::new(SYS_NET).join(iface).join("mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The interface's driver: ETHTOOL_GDRVINFO (veth, ena, virtio_net...),
/// else the sysfs `device/driver` link.
pub(crate) fn driver(iface: &str) -> Option<String> {
    crate::collect::allowance::ethtool::driver_name(iface)
        .ok()
        .or_else(|| sysfs_driver(iface))
}

/// The driver bound to a physical device (`device/driver` link), if any.
pub(crate) fn sysfs_driver(iface: &str) -> Option<String> {
    let link = fs::read_link(Path::new(SYS_NET).join(iface).join("device/driver")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// Growth of each counter; a counter that went backwards (device reset)
/// counts as zero growth for this interval.
pub(crate) fn counter_delta(now: &LinkCounters, prev: &LinkCounters) -> LinkCounters {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    LinkCounters {
        tx_packets: d(now.tx_packets, prev.tx_packets),
        rx_packets: d(now.rx_packets, prev.rx_packets),
        tx_bytes: d(now.tx_bytes, prev.tx_bytes),
        rx_bytes: d(now.rx_bytes, prev.rx_bytes),
        tx_dropped: d(now.tx_dropped, prev.tx_dropped),
        rx_dropped: d(now.rx_dropped, prev.rx_dropped),
        tx_errors: d(now.tx_errors, prev.tx_errors),
        rx_errors: d(now.rx_errors, prev.rx_errors),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_counters_read_and_delta_never_negative() {
        let c = read_counters("lo").expect("lo exists in every namespace");
        let mut earlier = c;
        earlier.tx_packets += 10;
        assert_eq!(counter_delta(&c, &earlier).tx_packets, 0);
        assert_eq!(counter_delta(&c, &c), LinkCounters::default());
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        let e = read_counters("no-such-if0").unwrap_err();
        assert!(format!("{e:#}").contains("no-such-if0"));
    }
}
