//! What an ENA driver release does with its allowance counters when the
//! device's admin command that fetches them fails (docs/verdicts.md,
//! "Allowance reads that are not data"): releases before 2.13.2 return the
//! previous values again, 2.13.2 to 2.15.x return uninitialised memory,
//! 2.16.0 and later return zeros. throttlescope flags the last two; the
//! first cannot be told from a quiet allowance.

/// A release's version as three numbers, from `ethtool -i`'s `version`
/// ("2.13.2g", "2.16.0"); None when it is not an out-of-tree ENA release
/// number (the in-tree driver reports the kernel's version or nothing).
pub(crate) fn ena_release(version: &str) -> Option<(u32, u32, u32)> {
    let digits: String = version
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = digits.split('.').map(|p| p.parse::<u32>().ok());
    let v = (
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    );
    // Out-of-tree ENA releases are 1.x and 2.x; a kernel version is 4.x+.
    (v.0 <= 2).then_some(v)
}

/// How far `version` of driver `driver` can be trusted when a counter read
/// fails: `(known_bad, text)`; None for drivers other than ENA.
pub(crate) fn ena_failed_read_behaviour(driver: &str, version: &str) -> Option<(bool, String)> {
    if driver != "ena" {
        return None;
    }
    Some(match ena_release(version) {
        Some(v) if v < (2, 13, 2) => (
            true,
            format!(
                "ENA {version} repeats the previous counter values when the device's admin \
                 command fails: such a read looks like no shaping at all. Upgrade to 2.16.0 \
                 or later"
            ),
        ),
        Some(v) if v < (2, 16, 0) => (
            true,
            format!(
                "ENA {version} fills the counters with uninitialised memory when the device's \
                 admin command fails: throttlescope flags such reads and does not judge them. \
                 Upgrade to 2.16.0 or later"
            ),
        ),
        Some(_) => (
            false,
            format!("ENA {version} returns zeros when a counter read fails: flagged, not judged"),
        ),
        None => (
            false,
            format!(
                "ENA driver version {version:?} is not an out-of-tree release number (in-tree \
                 driver?): its failed-read behaviour is not known"
            ),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_classified_by_their_failed_read_behaviour() {
        assert_eq!(ena_release("2.13.2g"), Some((2, 13, 2)));
        assert_eq!(ena_release("2.16.0"), Some((2, 16, 0)));
        assert_eq!(ena_release("2.8"), Some((2, 8, 0)));
        assert_eq!(ena_release("6.1.0-28-cloud-amd64"), None);
        assert_eq!(ena_release(""), None);
        let bad = |v: &str| ena_failed_read_behaviour("ena", v).unwrap();
        assert!(bad("2.12.0").0 && bad("2.12.0").1.contains("repeats"));
        assert!(bad("2.13.2g").0 && bad("2.13.2g").1.contains("uninitialised"));
        assert!(bad("2.15.9").0);
        assert!(!bad("2.16.0").0);
        assert!(!bad("6.12.5").0 && bad("6.12.5").1.contains("not known"));
        assert!(ena_failed_read_behaviour("virtio_net", "1.0.0").is_none());
    }
}
