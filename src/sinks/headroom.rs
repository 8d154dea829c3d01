//! Headroom to the instance's baseline in words, for every view that shows
//! it: the plain table and the full-screen view say the same things the
//! same way. Nothing here when no baseline is known: the callers get None or
//! nothing to show, never an empty row.

use crate::analysis::headroom::{DirectionHeadroom, Headroom, InterfaceHeadroom};
use crate::analysis::IntervalAnalysis;
use crate::shared::units;

/// Who the baseline belongs to and whether it is AWS's figure:
/// "m5.xlarge", "m5.xlarge, --baseline", or "--baseline".
fn whose(h: &Headroom) -> String {
    match (&h.instance_type, h.published) {
        (Some(t), true) => t.clone(),
        (Some(t), false) => format!("{t}, --baseline"),
        (None, _) => "--baseline".to_string(),
    }
}

/// The instance's line: "headroom m5.xlarge: out 312% of 1.25Gb/s, above
/// for 14.0min (38.0GB beyond); in 4.00% of 1.25Gb/s".
pub(crate) fn line(h: &Headroom) -> String {
    format!("headroom {}: {}", whose(h), h.summary())
}

/// The same in fewer columns, for a narrow screen: both directions'
/// shares and the run above the baseline, without the baseline's figure:
/// "headroom m5.xlarge: out 312%, above 14.0min (38.0GB); in 4.00%".
pub(crate) fn short_line(h: &Headroom) -> String {
    let one = |name: &str, d: &DirectionHeadroom| {
        let mut s = format!("{name} {}", units::pct(d.pct));
        if d.above() {
            s.push_str(&format!(
                ", above {} ({})",
                units::secs(d.above_secs),
                units::bytes(d.above_bytes as u64)
            ));
        }
        s
    };
    format!(
        "headroom {}: {}; {}",
        whose(h),
        one("out", &h.tx),
        one("in", &h.rx)
    )
}

/// The interval's headroom line, when a baseline is known.
pub(crate) fn of(a: &IntervalAnalysis) -> Option<String> {
    a.headroom.as_ref().map(line)
}

/// An interface's share of the instance's baseline: "out 80.0% in 3.00% of
/// the baseline". An interface not summed into the instance (a veth beside
/// the ENA ones) says so, so its share is not read as more of the baseline
/// spent (its traffic mostly crosses an ENA interface as well).
pub(crate) fn share_text(i: &InterfaceHeadroom) -> String {
    let unsummed = if i.summed {
        ""
    } else {
        " (not summed: only the ENA interfaces count)"
    };
    format!(
        "out {} in {} of the baseline{unsummed}",
        units::pct(i.tx_pct),
        units::pct(i.rx_pct)
    )
}

/// The same in the columns a full-screen rates line has left at 80:
/// "194%/4.22% of baseline" (out/in, as the line gives tx then rx).
pub(crate) fn short_share_text(i: &InterfaceHeadroom) -> String {
    let unsummed = if i.summed { "" } else { " (not summed)" };
    format!(
        "{}/{} of baseline{unsummed}",
        units::pct(i.tx_pct),
        units::pct(i.rx_pct)
    )
}

/// `iface`'s share of the baseline this interval, when a baseline is known.
pub(crate) fn interface<'a>(a: &'a IntervalAnalysis, iface: &str) -> Option<&'a InterfaceHeadroom> {
    a.headroom
        .as_ref()?
        .interfaces
        .iter()
        .find(|i| i.iface == iface)
}

/// [`share_text`] of `iface`, when a baseline is known.
pub(crate) fn share(a: &IntervalAnalysis, iface: &str) -> Option<String> {
    interface(a, iface).map(share_text)
}

/// The enforcement episodes on `iface` the interval carries (the one under
/// way and the last few), oldest first, each set against the baseline the
/// instance was planned on: "hypervisor_queuing 16.1min (under way):
/// baseline 1.58Gb/s measured, 1.25Gb/s published (m5.xlarge); ...".
/// Empty without a baseline (no episode then carries a plan).
pub(crate) fn against_plan(a: &IntervalAnalysis, iface: &str) -> Vec<String> {
    a.episodes
        .iter()
        .filter(|e| e.iface == iface)
        .filter_map(|e| {
            let plan = e.against_plan()?;
            let secs = e.end_mono_ns.saturating_sub(e.start_mono_ns) as f64 / 1e9;
            let open = if e.open { " (under way)" } else { "" };
            Some(format!("{} {}{open}: {plan}", e.verdict, units::secs(secs)))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::episodes::{Episode, PlannedBaseline};
    use crate::analysis::Verdict;

    /// m5.xlarge's 1.25 Gb/s: out at 312% for 14 minutes, 38 GB beyond; in
    /// at 4%. ens5 (ENA) carries it all, veth0 half of it again.
    pub(crate) fn example() -> Headroom {
        let dir = |pct: f64, secs: f64, bytes: f64| DirectionHeadroom {
            baseline_bps: 1.25e9,
            bps: 1.25e9 * pct / 100.0,
            pct,
            above_secs: secs,
            above_bytes: bytes,
            above_secs_total: secs,
            above_bytes_total: bytes,
        };
        Headroom {
            instance_type: Some("m5.xlarge".into()),
            published: true,
            burst_bps: Some(10e9),
            tx: dir(312.0, 840.0, 38e9),
            rx: dir(4.0, 0.0, 0.0),
            interfaces: vec![
                InterfaceHeadroom {
                    iface: "ens5".into(),
                    tx_pct: 312.0,
                    rx_pct: 4.0,
                    summed: true,
                },
                InterfaceHeadroom {
                    iface: "veth0".into(),
                    tx_pct: 156.0,
                    rx_pct: 0.0,
                    summed: false,
                },
            ],
        }
    }

    /// An enforcement episode on `iface` that followed a 16-minute burst.
    pub(crate) fn planned_episode(iface: &str, open: bool) -> Episode {
        Episode {
            iface: iface.into(),
            verdict: Verdict::HypervisorQueuing,
            start_seq: 10,
            end_seq: 70,
            start_mono_ns: 10_000_000_000,
            end_mono_ns: 70_000_000_000,
            intervals: 60,
            peak: 100.0,
            peak_signal: "bw_out_allowance".into(),
            throughput_before_bps: Some(9.95e9),
            throughput_during_bps: Some(1.58e9),
            mean_confidence: 0.9,
            stepped_down: true,
            open,
            peak_rate_bps: None,
            microburst: None,
            planned: Some(PlannedBaseline {
                instance_type: Some("m5.xlarge".into()),
                published: true,
                baseline_bps: 1.25e9,
                burst_bps: Some(10e9),
                burst_above_secs: 966.0,
                burst_above_bytes: 1.71e12,
            }),
        }
    }

    #[test]
    fn the_line_names_the_type_and_whose_figure_it_is() {
        let mut h = example();
        assert_eq!(
            line(&h),
            format!("headroom m5.xlarge: {}", h.summary()),
            "{}",
            line(&h)
        );
        assert!(line(&h).contains("out 312% of 1.25Gb/s"), "{}", line(&h));
        h.published = false;
        assert!(line(&h).starts_with("headroom m5.xlarge, --baseline: "));
        h.instance_type = None;
        assert!(line(&h).starts_with("headroom --baseline: "));
    }

    #[test]
    fn the_short_line_keeps_both_directions_and_the_run() {
        let h = example();
        let short = short_line(&h);
        assert_eq!(
            short,
            "headroom m5.xlarge: out 312%, above 14.0min (38.0GB); in 4.00%"
        );
        assert!(short.len() < line(&h).len());
    }

    #[test]
    fn shares_say_which_interfaces_the_instance_sums() {
        let h = example();
        assert_eq!(
            share_text(&h.interfaces[0]),
            "out 312% in 4.00% of the baseline"
        );
        assert!(share_text(&h.interfaces[1]).contains("(not summed"));
        assert_eq!(short_share_text(&h.interfaces[0]), "312%/4.00% of baseline");
        assert_eq!(
            short_share_text(&h.interfaces[1]),
            "156%/0% of baseline (not summed)"
        );
    }

    #[test]
    fn only_episodes_with_a_plan_are_set_against_it() {
        let mut a = IntervalAnalysis {
            seq: 70,
            mono_ns: 0,
            interfaces: Vec::new(),
            flows: Vec::new(),
            episodes: vec![
                planned_episode("ens5", true),
                planned_episode("ens6", false),
            ],
            headroom: Some(example()),
            kafka: Vec::new(),
        };
        let mut unplanned = planned_episode("ens5", false);
        unplanned.planned = None;
        a.episodes.insert(0, unplanned);
        let lines = against_plan(&a, "ens5");
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("hypervisor_queuing 60.0s (under way): baseline 1.58Gb/s measured, 1.25Gb/s published (m5.xlarge)"),
            "{lines:?}"
        );
        assert!(against_plan(&a, "ens7").is_empty());
        a.headroom = None;
        assert_eq!(of(&a), None);
        assert_eq!(share(&a, "ens5"), None);
    }
}
