//! The signals the verdict engine judges, by name, and the list of them an
//! interval collects.
//!
//! The engine looks signals up through [`Signal`], so a misspelt name is a
//! compile error instead of a signal that silently never fires. Evidence
//! keeps the name as a string (`Evidence::signal`): it is what JSON lines,
//! recordings, reports and metric labels carry, and recordings from before
//! any signal was added must still read back.

use super::outcome::Evidence;

/// Every signal that can appear in an interval's evidence. `as_str` is the
/// name in the evidence, exactly as it has always been written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Signal {
    WirePps,
    AllowanceUntrusted,
    AllowanceUnavailable,
    BwOutAllowancePct,
    BwInAllowancePct,
    PpsAllowancePct,
    ConntrackExceededPerS,
    ConntrackAvailable,
    LinklocalExceededPerS,
    RetransmitPct,
    RttInflationP50,
    DataWaitingPct,
    RwndLimitedPct,
    LocalBacklogPackets,
    LocalSojournUs,
    LocalDropPct,
    HostQueueUnavailable,
    /// The per-packet programs were paused for some of the interval
    /// (`--per-packet auto`): a note that its backlog, sojourn and peak
    /// rates were not measured.
    HostQueuePaused,
    FailedRetransmits,
    TxPlateauCv,
    RxPlateauCv,
    /// The hard cap's own line, put first by `hypervisor_cap`.
    BwOutCapPct,
    /// Untracked sockets carried part of the traffic: a note (value: the
    /// larger of their shares of bytes sent and received, %).
    UntrackedFlows,
    /// The interval's peak rate over its mean, on a hypervisor verdict
    /// whose interval microbursts (verdict.rs).
    MicroburstRatio,
    /// The interval's peak rate over its mean, when allowance counters rose
    /// under their line while it microbursted: an explanation beside any
    /// verdict (free flow above all), never a cause (verdict.rs).
    CountersInMicrobursts,
    /// The share of the deciding direction's bytes the main Kafka role
    /// carried, on a hypervisor verdict: a note, never a cause
    /// (kafka_roles.rs).
    KafkaRolePct,
}

impl Signal {
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Signal::WirePps => "wire_pps",
            Signal::AllowanceUntrusted => "allowance_untrusted",
            Signal::AllowanceUnavailable => "allowance_unavailable",
            Signal::BwOutAllowancePct => "bw_out_allowance_pct",
            Signal::BwInAllowancePct => "bw_in_allowance_pct",
            Signal::PpsAllowancePct => "pps_allowance_pct",
            Signal::ConntrackExceededPerS => "conntrack_allowance_exceeded_per_s",
            Signal::ConntrackAvailable => "conntrack_allowance_available",
            Signal::LinklocalExceededPerS => "linklocal_allowance_exceeded_per_s",
            Signal::RetransmitPct => "retransmit_pct",
            Signal::RttInflationP50 => "rtt_inflation_p50",
            Signal::DataWaitingPct => "data_waiting_pct",
            Signal::RwndLimitedPct => "rwnd_limited_pct",
            Signal::LocalBacklogPackets => "local_backlog_packets",
            Signal::LocalSojournUs => "local_sojourn_us",
            Signal::LocalDropPct => "local_drop_pct",
            Signal::HostQueueUnavailable => "host_queue_unavailable",
            Signal::HostQueuePaused => "host_queue_paused",
            Signal::FailedRetransmits => "failed_retransmits",
            Signal::TxPlateauCv => "tx_plateau_cv",
            Signal::RxPlateauCv => "rx_plateau_cv",
            Signal::BwOutCapPct => "bw_out_cap_pct",
            Signal::UntrackedFlows => "untracked_flows",
            Signal::MicroburstRatio => "microburst_ratio",
            Signal::CountersInMicrobursts => "counters_in_microbursts",
            Signal::KafkaRolePct => "kafka_role_pct",
        }
    }

    /// `value` of the signal named `name`, with its unit, as every other
    /// figure is printed (src/shared/units.rs): `302Mb/s`, `98.4%`,
    /// `1.53x`, `4.00ms`. Names from older recordings that this build does
    /// not know print as a plain number.
    pub fn display(name: &str, value: f64) -> String {
        use crate::shared::units;
        if name.ends_with("_pct") {
            units::pct(value)
        } else if name.ends_with("_bps") {
            units::rate_bits(value)
        } else if name.ends_with("_pps") {
            units::rate_pps(value)
        } else if name.ends_with("_per_s") {
            format!("{}/s", units::significant(value, 3))
        } else if name.ends_with("_us") {
            units::secs(value / 1e6)
        } else if name == Signal::RttInflationP50.as_str()
            || name == Signal::MicroburstRatio.as_str()
            || name == Signal::CountersInMicrobursts.as_str()
        {
            units::ratio(value)
        } else {
            units::significant(value, 3)
        }
    }

    /// Whether `e` is this signal's evidence.
    pub(crate) fn is(self, e: &Evidence) -> bool {
        e.signal == self.as_str()
    }

    /// A plateau: corroboration only, never a cause of its own.
    pub(crate) fn is_plateau(self) -> bool {
        matches!(self, Signal::TxPlateauCv | Signal::RxPlateauCv)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every judged signal of an interval, in the order judged.
pub(super) struct Signals {
    list: Vec<(Signal, Evidence)>,
}

impl Signals {
    pub(super) fn new() -> Self {
        Signals { list: Vec::new() }
    }

    /// Compare `value` with `threshold` (`>=` exceeds) and keep the line.
    /// `what` starts with the value's unit and says what it counts.
    pub(super) fn add(&mut self, signal: Signal, value: f64, threshold: f64, what: &str) -> bool {
        let exceeded = value >= threshold;
        let cmp = if exceeded { ">=" } else { "<" };
        let note = format!(
            "{signal} {}{what} {cmp} {}{}",
            fmt_num(value),
            fmt_num(threshold),
            unit_of(what)
        );
        self.push(signal, value, threshold, note, exceeded);
        exceeded
    }

    /// A note that is not a comparison: value and threshold 0, not
    /// exceeded.
    pub(super) fn note(&mut self, signal: Signal, note: String) {
        self.push(signal, 0.0, 0.0, note, false);
    }

    /// A line with its own wording and its own sense of "exceeded" (a low
    /// count, a flat throughput).
    pub(super) fn push(
        &mut self,
        signal: Signal,
        value: f64,
        threshold: f64,
        note: String,
        exceeded: bool,
    ) {
        self.list.push((
            signal,
            Evidence {
                signal: signal.as_str().into(),
                value,
                threshold,
                note,
                exceeded,
            },
        ));
    }

    /// Take back the "exceeded" of the line just added: a guard beside the
    /// threshold (a minimum count) was not met.
    pub(super) fn unexceed_last(&mut self) {
        self.list.last_mut().expect("just added").1.exceeded = false;
    }

    pub(super) fn get(&self, signal: Signal) -> Option<&Evidence> {
        self.list.iter().find(|(s, _)| *s == signal).map(|(_, e)| e)
    }

    pub(super) fn value(&self, signal: Signal) -> Option<f64> {
        self.get(signal).map(|e| e.value)
    }

    /// The signal's value, 0 when it was not judged.
    pub(super) fn value_or_zero(&self, signal: Signal) -> f64 {
        self.value(signal).unwrap_or(0.0)
    }

    pub(super) fn hit(&self, signal: Signal) -> bool {
        self.get(signal).is_some_and(|e| e.exceeded)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (Signal, &Evidence)> {
        self.list.iter().map(|(s, e)| (*s, e))
    }

    /// The evidence list with `primary` first.
    pub(super) fn ordered(mut self, primary: Signal) -> Vec<Evidence> {
        if let Some(i) = self.list.iter().position(|(s, _)| *s == primary) {
            let p = self.list.remove(i);
            self.list.insert(0, p);
        }
        self.list.into_iter().map(|(_, e)| e).collect()
    }
}

pub(super) fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        // 26949.8 -> 26900: no more digits than the figure holds.
        crate::shared::units::significant(v, 3)
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// The unit a `what` text starts with, repeated after the threshold.
fn unit_of(what: &str) -> &'static str {
    if what.starts_with('%') {
        "%"
    } else if what.starts_with("us") {
        "us"
    } else if what.starts_with('x') {
        "x"
    } else {
        ""
    }
}

#[cfg(test)]
mod display_tests {
    use super::Signal;

    #[test]
    fn every_signal_prints_with_its_unit() {
        assert_eq!(Signal::display("tx_bps", 302_435_191.0), "302Mb/s");
        assert_eq!(Signal::display("bw_out_allowance_pct", 98.37), "98.4%");
        assert_eq!(Signal::display("wire_pps", 16_400.0), "16.4kpps");
        assert_eq!(Signal::display("local_sojourn_us", 4000.0), "4.00ms");
        assert_eq!(Signal::display("rtt_inflation_p50", 1.534), "1.53x");
        assert_eq!(Signal::display("microburst_ratio", 12.2), "12.2x");
        assert_eq!(
            Signal::display("conntrack_allowance_exceeded_per_s", 12.0),
            "12/s"
        );
        assert_eq!(Signal::display("tx_plateau_cv", 0.0123), "0.0123");
        assert_eq!(Signal::display("local_backlog_packets", 250.0), "250");
    }
}
