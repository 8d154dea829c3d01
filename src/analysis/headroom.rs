//! Headroom to the instance's baseline: how far the instance runs above
//! what it can count on, and for how long (docs/headroom.md).
//!
//! The baseline belongs to the instance, not to one interface: every ENI of
//! an instance draws on the same allowance. So the instance's figures sum
//! the interfaces that carry its traffic: the ENA ones when there are any
//! (on EC2 every ENI is one; container veths, bridges and tunnels carry the
//! same bytes a second time), else every reported interface (the lab, or a
//! host whose driver is not ENA). Each interface's share of the baseline is
//! shown too.
//!
//! Stateful over intervals (a run above the baseline spans many), but a
//! pure function of the snapshots pushed: the live pipeline and the report
//! push the same intervals and get the same figures.

use serde::{Deserialize, Serialize};

use crate::model::instance::Baseline;
use crate::model::snapshot::{InterfaceSample, Snapshot};

/// The ENA driver's name, as the interface reports it.
const ENA_DRIVER: &str = "ena";

/// One direction of the instance against its baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionHeadroom {
    pub baseline_bps: f64,
    /// The instance's rate this interval (summed interfaces), bits/s.
    pub bps: f64,
    /// `bps` as a percentage of the baseline.
    pub pct: f64,
    /// The run above the baseline this interval belongs to: seconds and
    /// bytes beyond the baseline since the last interval at or below it
    /// (0 when this interval is at or below). The burst the instance is
    /// spending credits on.
    pub above_secs: f64,
    pub above_bytes: f64,
    /// Since observing started: every interval above the baseline, and the
    /// bytes beyond it (the exporter's counters).
    pub above_secs_total: f64,
    pub above_bytes_total: f64,
}

impl DirectionHeadroom {
    pub(crate) fn above(&self) -> bool {
        self.above_secs > 0.0
    }
}

/// One interface's share of the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceHeadroom {
    pub iface: String,
    pub tx_pct: f64,
    pub rx_pct: f64,
    /// Summed into the instance's figures (see the module's comment).
    pub summed: bool,
}

/// The interval's headroom.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// The instance type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The baseline is AWS's published figure for the type (false: given
    /// with `--baseline`).
    pub published: bool,
    /// The published burst ("up to") figure, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bps: Option<f64>,
    /// Outbound (tx) and inbound (rx), the summed interfaces.
    pub tx: DirectionHeadroom,
    pub rx: DirectionHeadroom,
    pub interfaces: Vec<InterfaceHeadroom>,
}

impl Headroom {
    /// Both directions' line: "out 312% of 1.25Gb/s, above for 14.0min
    /// (38.0GB beyond); in 4% of 1.25Gb/s".
    pub(crate) fn summary(&self) -> String {
        use crate::shared::units::{bytes, pct, rate_bits, secs};
        let one = |name: &str, d: &DirectionHeadroom| {
            let mut s = format!("{name} {} of {}", pct(d.pct), rate_bits(d.baseline_bps));
            if d.above() {
                s.push_str(&format!(
                    ", above for {} ({} beyond)",
                    secs(d.above_secs),
                    bytes(d.above_bytes as u64)
                ));
            }
            s
        };
        format!("{}; {}", one("out", &self.tx), one("in", &self.rx))
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Run {
    secs: f64,
    bytes: f64,
    secs_total: f64,
    bytes_total: f64,
}

impl Run {
    /// Accounts an interval that moved `bits` in `secs` against
    /// `baseline_bps`; returns the direction's figures.
    fn push(&mut self, bits: f64, secs: f64, baseline_bps: f64) -> DirectionHeadroom {
        let bps = if secs > 0.0 { bits / secs } else { 0.0 };
        let beyond_bits = bits - baseline_bps * secs;
        if secs > 0.0 && beyond_bits > 0.0 {
            self.secs += secs;
            self.bytes += beyond_bits / 8.0;
            self.secs_total += secs;
            self.bytes_total += beyond_bits / 8.0;
        } else if secs > 0.0 {
            self.secs = 0.0;
            self.bytes = 0.0;
        }
        DirectionHeadroom {
            baseline_bps,
            bps,
            pct: bps / baseline_bps * 100.0,
            above_secs: self.secs,
            above_bytes: self.bytes,
            above_secs_total: self.secs_total,
            above_bytes_total: self.bytes_total,
        }
    }
}

/// Follows the runs above the baseline, interval by interval.
#[derive(Debug, Clone)]
pub struct HeadroomTracker {
    baseline: Option<Baseline>,
    tx: Run,
    rx: Run,
}

impl HeadroomTracker {
    /// Without a baseline, [`push`](Self::push) returns None: headroom is
    /// simply absent.
    pub fn new(baseline: Option<Baseline>) -> Self {
        HeadroomTracker {
            baseline,
            tx: Run::default(),
            rx: Run::default(),
        }
    }

    pub(crate) fn baseline(&self) -> Option<&Baseline> {
        self.baseline.as_ref()
    }

    /// Another recording starts: runs do not continue across the gap (the
    /// totals do, as a counter would).
    pub(crate) fn restart(&mut self) {
        for r in [&mut self.tx, &mut self.rx] {
            r.secs = 0.0;
            r.bytes = 0.0;
        }
    }

    /// The headroom of `snap`, the next interval.
    pub fn push(&mut self, snap: &Snapshot) -> Option<Headroom> {
        let baseline = self.baseline.as_ref()?;
        let secs = snap.interval_secs();
        let summed = |i: &InterfaceSample| counts_for_instance(i, &snap.interfaces);
        let bits = |rx: bool| -> f64 {
            snap.interfaces
                .iter()
                .filter(|i| summed(i))
                .map(|i| if rx { i.delta.rx_bytes } else { i.delta.tx_bytes } as f64 * 8.0)
                .sum()
        };
        let pct = |b: u64, base: f64| {
            if secs > 0.0 {
                b as f64 * 8.0 / secs / base * 100.0
            } else {
                0.0
            }
        };
        let interfaces = snap
            .interfaces
            .iter()
            .map(|i| InterfaceHeadroom {
                iface: i.name.clone(),
                tx_pct: pct(i.delta.tx_bytes, baseline.tx_bps),
                rx_pct: pct(i.delta.rx_bytes, baseline.rx_bps),
                summed: summed(i),
            })
            .collect();
        Some(Headroom {
            instance_type: baseline.instance_type.clone(),
            published: baseline.published(),
            burst_bps: baseline.burst_bps,
            tx: self.tx.push(bits(false), secs, baseline.tx_bps),
            rx: self.rx.push(bits(true), secs, baseline.rx_bps),
            interfaces,
        })
    }
}

/// Whether `iface` counts towards the instance's allowance: the ENA
/// interfaces when `all` has any, else every interface.
pub(crate) fn counts_for_instance(iface: &InterfaceSample, all: &[InterfaceSample]) -> bool {
    is_ena(iface) || !all.iter().any(is_ena)
}

/// Whether `iface` is an ENA interface (an ENI of the instance).
pub(crate) fn is_ena(iface: &InterfaceSample) -> bool {
    iface.driver.as_deref() == Some(ENA_DRIVER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::instance::BaselineFrom;
    use crate::model::snapshot::LinkCounters;

    fn baseline(bps: f64) -> Baseline {
        Baseline {
            instance_type: Some("m5.xlarge".into()),
            from: BaselineFrom::Dmi,
            tx_bps: bps,
            rx_bps: bps,
            burst_bps: Some(10e9),
            arch: None,
            source: "test".into(),
        }
    }

    fn snap(seq: u64, secs: f64, ifaces: &[(&str, &str, u64, u64)]) -> Snapshot {
        let mut s = Snapshot::example(seq);
        s.interval_ns = (secs * 1e9) as u64;
        s.interfaces = ifaces
            .iter()
            .map(|(name, driver, tx, rx)| InterfaceSample {
                name: name.to_string(),
                driver: Some(driver.to_string()),
                delta: LinkCounters {
                    tx_bytes: *tx,
                    rx_bytes: *rx,
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        s
    }

    #[test]
    fn no_baseline_no_headroom() {
        let mut t = HeadroomTracker::new(None);
        assert!(t.push(&snap(0, 1.0, &[("eth0", "ena", 1, 1)])).is_none());
    }

    /// Bytes above the baseline equal the integral of the excess rate over
    /// the run, whatever the intervals' lengths.
    #[test]
    fn bytes_above_baseline_are_the_integral_of_the_excess() {
        let base = 1.25e9;
        let mut t = HeadroomTracker::new(Some(baseline(base)));
        // A rate that swings between 0.5 and 3.5 Gb/s, over intervals of
        // uneven length (0.5 s to 1.5 s): runs above the baseline and
        // below it.
        let rate = |x: f64| 2e9 + 1.5e9 * (std::f64::consts::PI * x / 30.0).sin();
        let mut at = 0.0;
        let mut expected = 0.0;
        let mut last = None;
        let mut exact = 0.0;
        for seq in 0..80 {
            let secs = 0.5 + (seq % 3) as f64 * 0.5;
            // The interval's mean rate, by a fine sum.
            let steps = 1000;
            let mean = (0..steps)
                .map(|k| rate(at + secs * (k as f64 + 0.5) / steps as f64))
                .sum::<f64>()
                / steps as f64;
            let bytes = (mean * secs / 8.0) as u64;
            let h = t
                .push(&snap(seq, secs, &[("eth0", "ena", bytes, 0)]))
                .unwrap();
            let excess = (mean - base).max(0.0) * secs / 8.0;
            // The integral of the excess at a fine grain, over the run.
            let fine: f64 = (0..steps)
                .map(|k| (rate(at + secs * (k as f64 + 0.5) / steps as f64) - base).max(0.0))
                .sum::<f64>()
                * secs
                / steps as f64
                / 8.0;
            if mean > base {
                expected += excess;
                exact += fine;
            } else {
                expected = 0.0;
                exact = 0.0;
            }
            if h.tx.above() {
                last = Some((h.tx.above_bytes, expected, exact, h.tx.above_secs));
            }
            at += secs;
            assert!(
                (h.tx.pct - mean / base * 100.0).abs() < 0.01,
                "{}",
                h.tx.pct
            );
        }
        let (got, want, exact, secs) = last.expect("a run above the baseline");
        assert!((got - want).abs() <= want * 1e-6, "{got} vs {want}");
        // Against the continuous integral: within 1% (the interval means
        // hide only the edges of the run).
        assert!((got - exact).abs() <= exact * 0.01, "{got} vs {exact}");
        assert!(secs > 10.0, "{secs}");
    }

    #[test]
    fn a_run_ends_at_an_interval_at_or_below_the_baseline_and_totals_go_on() {
        let mut t = HeadroomTracker::new(Some(baseline(1e9)));
        let gb = |gbps: f64| (gbps * 1e9 / 8.0) as u64;
        let h = t
            .push(&snap(0, 1.0, &[("eth0", "ena", gb(3.0), gb(0.5))]))
            .unwrap();
        assert_eq!((h.tx.above_secs, h.tx.above_bytes), (1.0, gb(2.0) as f64));
        assert!(!h.rx.above());
        let h = t
            .push(&snap(1, 1.0, &[("eth0", "ena", gb(2.0), 0)]))
            .unwrap();
        assert_eq!((h.tx.above_secs, h.tx.above_bytes), (2.0, gb(3.0) as f64));
        // Exactly at the baseline: the run ends.
        let h = t
            .push(&snap(2, 1.0, &[("eth0", "ena", gb(1.0), 0)]))
            .unwrap();
        assert!(!h.tx.above());
        assert_eq!(
            (h.tx.above_secs_total, h.tx.above_bytes_total),
            (2.0, gb(3.0) as f64)
        );
        let h = t
            .push(&snap(3, 2.0, &[("eth0", "ena", gb(4.0), 0)]))
            .unwrap();
        assert_eq!((h.tx.above_secs, h.tx.above_bytes), (2.0, gb(2.0) as f64));
        assert_eq!(h.tx.above_secs_total, 4.0);
        assert!(
            h.summary()
                .contains("out 200% of 1.00Gb/s, above for 2.00s"),
            "{}",
            h.summary()
        );
    }

    #[test]
    fn the_instance_sums_its_ena_interfaces_and_leaves_container_links_out() {
        let mut t = HeadroomTracker::new(Some(baseline(1e9)));
        let h = t
            .push(&snap(
                0,
                1.0,
                &[
                    ("ens5", "ena", 100_000_000, 0),
                    ("ens6", "ena", 50_000_000, 0),
                    ("veth1", "veth", 150_000_000, 0),
                ],
            ))
            .unwrap();
        assert_eq!(h.tx.bps, 1.2e9);
        let shares: Vec<(&str, f64, bool)> = h
            .interfaces
            .iter()
            .map(|i| (i.iface.as_str(), i.tx_pct, i.summed))
            .collect();
        assert_eq!(
            shares,
            [
                ("ens5", 80.0, true),
                ("ens6", 40.0, true),
                ("veth1", 120.0, false)
            ]
        );
        // No ENA interface (the lab): every reported interface counts.
        let h = t
            .push(&snap(
                1,
                1.0,
                &[
                    ("veth0", "veth", 100_000_000, 0),
                    ("br0", "bridge", 25_000_000, 0),
                ],
            ))
            .unwrap();
        assert_eq!(h.tx.bps, 1e9);
    }
}
