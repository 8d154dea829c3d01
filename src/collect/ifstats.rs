//! Interface counters from `/sys/class/net/<if>/statistics`, and the one
//! listing of the namespace's interfaces.
//!
//! The list comes from /proc/thread-self/net/dev, which answers for the
//! calling thread's network namespace, also after a bare `setns`; /sys
//! answers for the namespace it was mounted in (`ip netns exec NS` remounts
//! it, so there the counters are that namespace's).

use std::collections::HashMap;
use std::fs::{self, File};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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

/// The counter files of `statistics/`, in the order of [`LinkCounters`].
const COUNTERS: [&str; 8] = [
    "tx_packets",
    "rx_packets",
    "tx_bytes",
    "rx_bytes",
    "tx_dropped",
    "rx_dropped",
    "tx_errors",
    "rx_errors",
];

fn counters_from(v: [u64; 8]) -> LinkCounters {
    let [tx_packets, rx_packets, tx_bytes, rx_bytes, tx_dropped, rx_dropped, tx_errors, rx_errors] =
        v;
    LinkCounters {
        tx_packets,
        rx_packets,
        tx_bytes,
        rx_bytes,
        tx_dropped,
        rx_dropped,
        tx_errors,
        rx_errors,
    }
}

/// The counters of one interface, now.
pub(crate) fn read_counters(iface: &str) -> Result<LinkCounters> {
    Ok(CounterFiles::open(iface)?.read()?.0)
}

/// An interface's counter files and `mtu`, kept open from one interval to
/// the next: each is read again from offset 0, which makes sysfs show it
/// anew. Opening nine files per interface every interval (a path walk
/// each) was about 5% of the observer's process at a broker's scale.
///
/// Files stay with their device: once it is removed they fail (ENODEV,
/// also after a new device takes the name), and a rename takes them along.
/// So the name's ifindex is checked at each read: another device under the
/// name is read through files of its own.
pub(crate) struct CounterFiles {
    dir: PathBuf,
    name: std::ffi::CString,
    ifindex: u32,
    counters: Vec<File>,
    mtu: File,
}

/// The ifindex of `name` in this thread's namespace; 0 for none.
fn ifindex_of(name: &std::ffi::CStr) -> u32 {
    // SAFETY: a NUL-terminated name; the call only reads it.
    unsafe { libc::if_nametoindex(name.as_ptr()) }
}

impl CounterFiles {
    pub(crate) fn open(iface: &str) -> Result<Self> {
        let name = std::ffi::CString::new(iface)
            .with_context(|| format!("{iface:?}: not an interface name"))?;
        let ifindex = ifindex_of(&name);
        let dir = Path::new(SYS_NET).join(iface);
        let open = |p: PathBuf| File::open(&p).with_context(|| format!("reading {}", p.display()));
        let stats = dir.join("statistics");
        Ok(CounterFiles {
            counters: COUNTERS
                .iter()
                .map(|n| open(stats.join(n)))
                .collect::<Result<_>>()?,
            mtu: open(dir.join("mtu"))?,
            dir,
            name,
            ifindex,
        })
    }

    /// The counters and the MTU, now. An error (the interface went away:
    /// sysfs answers ENODEV through files of a removed device) names the
    /// file; the caller opens the files again.
    pub(crate) fn read(&self) -> Result<(LinkCounters, u32)> {
        if ifindex_of(&self.name) != self.ifindex {
            anyhow::bail!("{}: another device has the name now", self.dir.display());
        }
        let mut buf = [0u8; 32];
        // `sub` and `name` make the file's path for an error only.
        let mut number = |f: &File, sub: &str, name: &str| -> Result<u64> {
            let path = || format!("{}/{sub}{name}", self.dir.display());
            let n = f
                .read_at(&mut buf, 0)
                .with_context(|| format!("reading {}", path()))?;
            let text = String::from_utf8_lossy(&buf[..n]);
            text.trim()
                .parse()
                .with_context(|| format!("{}: not a number: {:?}", path(), text.trim()))
        };
        let mut v = [0u64; 8];
        for ((slot, f), name) in v.iter_mut().zip(&self.counters).zip(COUNTERS) {
            *slot = number(f, "statistics/", name)?;
        }
        let mtu = number(&self.mtu, "", "mtu")?;
        Ok((counters_from(v), u32::try_from(mtu).unwrap_or(0)))
    }
}

/// [`CounterFiles`] of the interfaces being watched.
#[derive(Default)]
pub(crate) struct OpenCounters {
    open: HashMap<String, CounterFiles>,
}

impl OpenCounters {
    /// `iface`'s counters and MTU through its open files; files that fail
    /// (a device removed, or removed and made again under the same name)
    /// are opened again once.
    pub(crate) fn read(&mut self, iface: &str) -> Result<(LinkCounters, u32)> {
        if let Some(files) = self.open.get(iface) {
            if let Ok(read) = files.read() {
                return Ok(read);
            }
        }
        self.open.remove(iface);
        let files = CounterFiles::open(iface)?;
        let read = files.read()?;
        self.open.insert(iface.to_string(), files);
        Ok(read)
    }

    /// Closes the files of interfaces not in `present`.
    pub(crate) fn retain(&mut self, present: impl Fn(&String) -> bool) {
        self.open.retain(|n, _| present(n));
    }
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
    fn open_files_read_anew_each_time_and_agree_with_a_fresh_read() {
        // Traffic on lo between two reads through the same open files.
        let mut open = OpenCounters::default();
        let (first, mtu) = open.read("lo").unwrap();
        assert!(mtu > 0);
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..5 {
            sock.send_to(b"x", sock.local_addr().unwrap()).unwrap();
        }
        let (second, _) = open.read("lo").unwrap();
        assert!(
            second.tx_packets >= first.tx_packets + 5,
            "{first:?} then {second:?}"
        );
        let fresh = read_counters("lo").unwrap();
        assert!(fresh.tx_packets >= second.tx_packets);
        assert!(fresh.tx_packets - second.tx_packets < 1000);
        assert!(open.read("no-such-if0").is_err());
        open.retain(|n| n != "lo");
        assert!(open.open.is_empty());
    }

    #[test]
    fn missing_interface_is_a_clear_error() {
        let e = read_counters("no-such-if0").unwrap_err();
        assert!(format!("{e:#}").contains("no-such-if0"));
    }
}
