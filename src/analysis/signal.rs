//! The signals the verdict engine judges, by name.
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
pub enum Signal {
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
    FailedRetransmits,
    TxPlateauCv,
    RxPlateauCv,
    /// Free flow's own line (throughput), put first when nothing fired.
    TxBps,
    /// The hard cap's own line, put first by `hypervisor_cap`.
    BwOutCapPct,
}

impl Signal {
    pub const fn as_str(self) -> &'static str {
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
            Signal::FailedRetransmits => "failed_retransmits",
            Signal::TxPlateauCv => "tx_plateau_cv",
            Signal::RxPlateauCv => "rx_plateau_cv",
            Signal::TxBps => "tx_bps",
            Signal::BwOutCapPct => "bw_out_cap_pct",
        }
    }

    /// Whether `e` is this signal's evidence.
    pub fn is(self, e: &Evidence) -> bool {
        e.signal == self.as_str()
    }

    /// A plateau: corroboration only, never a cause of its own.
    pub fn is_plateau(self) -> bool {
        matches!(self, Signal::TxPlateauCv | Signal::RxPlateauCv)
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
