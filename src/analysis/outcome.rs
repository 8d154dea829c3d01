//! What the engine says about an interface in an interval: the verdict,
//! its evidence, and the verdict held over a window. Both the judgement of
//! one interval (verdict.rs) and the hold (hold.rs) speak these types; they
//! live apart from both so neither module needs the other.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::rates::NormalisedRates;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Idle,
    FreeFlow,
    HypervisorQueuing,
    HypervisorDrop,
    /// Outbound throughput flat at a ceiling the senders push against, the
    /// allowance counter climbing but under the bandwidth line.
    HypervisorCap,
    LocalQueuing,
    LocalDrop,
    NetworkLoss,
    PpsLimit,
    ConntrackLimit,
    LinklocalLimit,
}

/// Coarse class of a verdict: a test or an alert that must never confuse
/// queuing with loss compares families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictFamily {
    Idle,
    Free,
    /// Packets wait (RTT rises), none lost.
    Queuing,
    /// Packets lost (retransmits, drops).
    Drop,
    /// A hypervisor allowance other than bandwidth (pps, conntrack,
    /// link-local), or the bandwidth's hard cap.
    Limit,
}

/// Where the bottleneck is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Location {
    None,
    Hypervisor,
    Host,
    Network,
}

impl Verdict {
    pub(crate) const ALL: [Verdict; 11] = [
        Verdict::Idle,
        Verdict::FreeFlow,
        Verdict::HypervisorQueuing,
        Verdict::HypervisorDrop,
        Verdict::HypervisorCap,
        Verdict::LocalQueuing,
        Verdict::LocalDrop,
        Verdict::NetworkLoss,
        Verdict::PpsLimit,
        Verdict::ConntrackLimit,
        Verdict::LinklocalLimit,
    ];

    pub fn family(&self) -> VerdictFamily {
        match self {
            Verdict::Idle => VerdictFamily::Idle,
            Verdict::FreeFlow => VerdictFamily::Free,
            Verdict::HypervisorQueuing | Verdict::LocalQueuing => VerdictFamily::Queuing,
            Verdict::HypervisorDrop | Verdict::LocalDrop | Verdict::NetworkLoss => {
                VerdictFamily::Drop
            }
            // A cap holds the flows at a rate whether its packets wait or,
            // at a policer, are dropped: a limit, neither queuing nor loss.
            Verdict::HypervisorCap
            | Verdict::PpsLimit
            | Verdict::ConntrackLimit
            | Verdict::LinklocalLimit => VerdictFamily::Limit,
        }
    }

    pub fn location(&self) -> Location {
        match self {
            Verdict::Idle | Verdict::FreeFlow => Location::None,
            Verdict::HypervisorQueuing
            | Verdict::HypervisorDrop
            | Verdict::HypervisorCap
            | Verdict::PpsLimit
            | Verdict::ConntrackLimit
            | Verdict::LinklocalLimit => Location::Hypervisor,
            Verdict::LocalQueuing | Verdict::LocalDrop => Location::Host,
            Verdict::NetworkLoss => Location::Network,
        }
    }

    /// Nothing holds the network back: idle or free flow.
    pub(crate) fn is_calm(&self) -> bool {
        self.location() == Location::None
    }

    /// The hypervisor is holding throughput down (bandwidth or packet rate):
    /// episodes of these report the burst ceiling before and the baseline
    /// during.
    pub fn is_enforcement(&self) -> bool {
        matches!(
            self,
            Verdict::HypervisorQueuing
                | Verdict::HypervisorDrop
                | Verdict::HypervisorCap
                | Verdict::PpsLimit
        )
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Idle => "idle",
            Verdict::FreeFlow => "free_flow",
            Verdict::HypervisorQueuing => "hypervisor_queuing",
            Verdict::HypervisorDrop => "hypervisor_drop",
            Verdict::HypervisorCap => "hypervisor_cap",
            Verdict::LocalQueuing => "local_queuing",
            Verdict::LocalDrop => "local_drop",
            Verdict::NetworkLoss => "network_loss",
            Verdict::PpsLimit => "pps_limit",
            Verdict::ConntrackLimit => "conntrack_limit",
            Verdict::LinklocalLimit => "linklocal_limit",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One signal compared with its threshold, with a line a human can read.
/// Notes that are not comparisons (e.g. "allowance counters unavailable")
/// carry value and threshold 0 and `exceeded` false.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    pub value: f64,
    pub threshold: f64,
    pub note: String,
    #[serde(default)]
    pub exceeded: bool,
}

/// The verdict for one interface in one interval. `evidence[0]` is the
/// signal that decided it (its value is the episode's peak signal).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceVerdict {
    pub iface: String,
    pub verdict: Verdict,
    pub confidence: f64,
    pub evidence: Vec<Evidence>,
    pub rates: NormalisedRates,
    /// The verdict held over the last intervals (src/analysis/hold.rs):
    /// what views, metrics and reports show. `verdict` above is this
    /// interval's own judgement, kept so nothing is hidden.
    #[serde(default)]
    pub held: HeldVerdict,
}

/// The verdict shown for an interface: held over the window, with the
/// interval it is dated to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldVerdict {
    pub verdict: Verdict,
    pub confidence: f64,
    /// The first interval of the verdict (onset), its start (CLOCK_MONOTONIC
    /// ns), and how many intervals it has lasted, this one included.
    pub since_seq: u64,
    pub since_mono_ns: u64,
    pub intervals: u64,
    /// The signal the verdict rests on and its value over the window (for
    /// idle and free flow, the interval's own deciding signal).
    pub signal: String,
    pub value: f64,
    /// Intervals in a row without support: the verdict ends when this
    /// reaches `hold_exit_intervals`.
    pub quiet: u64,
    /// Why, in a line: the window that holds it, or the interval's own
    /// evidence, or the verdict that was seen but not (yet) held.
    pub note: String,
}

impl HeldVerdict {
    /// An interval's own verdict, held by that interval alone (`seq`, which
    /// started at `start_ns`).
    pub(crate) fn alone(v: &InterfaceVerdict, seq: u64, start_ns: u64) -> Self {
        let first = v.evidence.first();
        HeldVerdict {
            verdict: v.verdict,
            confidence: v.confidence,
            since_seq: seq,
            since_mono_ns: start_ns,
            intervals: 1,
            signal: first.map(|e| e.signal.clone()).unwrap_or_default(),
            value: first.map_or(0.0, |e| e.value),
            quiet: 0,
            note: first.map(|e| e.note.clone()).unwrap_or_default(),
        }
    }
}

impl Default for HeldVerdict {
    fn default() -> Self {
        HeldVerdict {
            verdict: Verdict::Idle,
            confidence: 0.0,
            since_seq: 0,
            since_mono_ns: 0,
            intervals: 0,
            signal: String::new(),
            value: 0.0,
            quiet: 0,
            note: String::new(),
        }
    }
}
