//! What a report holds: plain data with serde, built from snapshots by
//! [`super::build`] and rendered by the text, JSON and HTML sinks. `--json`
//! prints exactly this structure.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::analysis::{Episode, Evidence, Thresholds, Verdict};
use crate::model::instance::{Arch, Baseline};
use crate::model::snapshot::Owner;
use crate::record::InterfaceInfo;

pub(crate) use super::workloads::WorkloadSummary;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The files read, as given.
    pub files: Vec<String>,
    pub recording: RecordingInfo,
    /// The thresholds judged with, and the names that differ from what the
    /// recording was judged with live (`--threshold`).
    pub thresholds: Thresholds,
    pub thresholds_changed: Vec<String>,
    pub filters: Filters,
    pub span: Span,
    /// Every episode (consecutive intervals with one verdict on one
    /// interface), in start order, idle ones included.
    pub episodes: Vec<EpisodeReport>,
    pub interfaces: Vec<InterfaceSummary>,
    /// Flows ranked by total backoff (the top `--top`).
    pub flows: Vec<FlowSummary>,
    /// Every flow's backoff added up by its pod, container or service
    /// (none where no owner's workload is known, and in older recordings).
    #[serde(default)]
    pub workloads: Vec<WorkloadSummary>,
    pub health: HealthSummary,
    /// One point per interval, for charts.
    pub series: Vec<IntervalPoint>,
    /// RTT inflation over time for the top flows (up to 5).
    pub flow_series: Vec<FlowSeries>,
    /// The instance's rates against its baseline, and the instance types
    /// whose baseline covers them (absent in reports before #25).
    #[serde(default)]
    pub right_sizing: RightSizing,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingInfo {
    pub host: String,
    pub kernel: String,
    pub tool_version: String,
    /// Trace format version of the first file (`1.1`).
    pub format_version: String,
    pub interfaces: Vec<InterfaceInfo>,
    pub interval_ns: u64,
    pub start_unix_ms: u64,
    /// Segment files read (rotation).
    pub segments: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Filters {
    pub flows: Vec<String>,
    pub interfaces: Vec<String>,
    /// Resolved bounds, wall clock ms since the epoch.
    pub since_unix_ms: Option<u64>,
    pub until_unix_ms: Option<u64>,
}

/// The intervals the report covers (after filters).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub intervals: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    pub start_unix_ms: Option<u64>,
    pub end_unix_ms: Option<u64>,
    pub seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeReport {
    #[serde(flatten)]
    pub episode: Episode,
    /// Seconds from the recording's start to the episode's start and end.
    pub start_offset_secs: f64,
    pub end_offset_secs: f64,
    /// The evidence of the episode's peak interval.
    pub evidence: Vec<Evidence>,
    /// Why the verdict was held, at the peak (the window's signal), or for
    /// idle and free flow the interval's own words.
    #[serde(default)]
    pub held_note: String,
    /// Calm episodes (idle, free flow): intervals judged otherwise on their
    /// own, by verdict, that never held (readings past a threshold that did
    /// not last). Nothing is hidden: a re-analysis with other hold settings
    /// can make them an episode.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub judged_alone: BTreeMap<Verdict, u64>,
    /// Episodes other than the hypervisor's (free flow above all): the
    /// intervals whose allowance counters rose under their line while
    /// they microbursted, and the latest one's line (the interval's
    /// `counters_in_microbursts` evidence, docs/verdicts.md
    /// "Microbursts"); absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters_in_microbursts: Option<CountersInMicrobursts>,
    /// Enforcement episodes only: the burst before it.
    pub enforcement: Option<EnforcementSummary>,
    /// Which Kafka roles and groups carried the episode's traffic, from its
    /// first interval held (report/kafka.rs); absent without Kafka
    /// identities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kafka: Vec<super::kafka::KafkaUse>,
    /// The packets sent to the link-local services through the interface
    /// over the episode, and by whom (report/linklocal.rs); absent when
    /// none were (or the interface was not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linklocal: Option<super::linklocal::LinkLocalUse>,
}

/// Why the allowance counters of a calm episode rose: in microbursts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountersInMicrobursts {
    /// Intervals of the episode that said so.
    pub intervals: u64,
    /// The latest of them: "allowance counters rose in microbursts:
    /// bw_out_allowance_exceeded at 24.8% of tx wire packets (under the
    /// 50.0% line); the busiest 10 ms ran at ...; flows bursting: ...".
    pub line: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnforcementSummary {
    /// Mean throughput just before enforcement (the burst ceiling) and
    /// during it (the baseline), in the enforced direction, bits/s. The
    /// ceiling is given only when throughput stepped down into the episode
    /// (`stepped_down`), so it is above the baseline by construction;
    /// otherwise the hypervisor queued at a steady rate, `baseline_bps`.
    pub burst_ceiling_bps: Option<f64>,
    pub baseline_bps: Option<f64>,
    #[serde(default)]
    pub stepped_down: bool,
    /// How long the non-idle run before the episode lasted: the burst.
    pub burst_secs: f64,
    /// `out` (bw_out, tx) or `in` (bw_in, rx) or `both` (pps, conntrack).
    pub direction: String,
    /// The measured figures set against the baseline planned on, when one
    /// was known (the recording's or `--instance-type`/`--baseline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against_plan: Option<PlanComparison>,
}

/// An enforcement set against the plan: the line
/// [`Episode::against_plan`] says, and its numbers (the episode's own
/// `planned`, flattened beside the line in the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanComparison {
    /// "baseline 1.58Gb/s measured, 1.25Gb/s published (m5.xlarge); ..."
    pub line: String,
    #[serde(flatten)]
    pub plan: crate::analysis::episodes::PlannedBaseline,
}

/// What the instance needed over the span against what it can count on
/// (docs/report.md, "Right-sizing").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RightSizing {
    /// The baseline planned against; None: `note` says why.
    pub baseline: Option<Baseline>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The recording's interval: the rates are over intervals this long.
    pub interval_secs: f64,
    /// Intervals in the span the rates come from.
    pub intervals: u64,
    /// The interfaces summed as the instance's rate (the ENA ones, else
    /// all; within `--iface`).
    pub interfaces: Vec<String>,
    /// Outbound (tx) and inbound (rx).
    pub tx: DirectionSizing,
    pub rx: DirectionSizing,
    /// The architecture the types are offered in first, and how it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch_from: Option<String>,
    /// Types whose baseline covers the p99 of both directions: some of the
    /// same architecture, then some others, each by baseline.
    pub covering: Vec<CoveringType>,
    /// How many types of the table cover it in all.
    pub covering_total: usize,
    /// The capacity for Kafka's rebalancers from the baseline planned
    /// against (docs/capacity.md); None without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::model::capacity::BrokerCapacity>,
    /// The baseline enforcement held in this recording, where episodes
    /// measured one against a published baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<crate::model::capacity::MeasuredBaseline>,
    /// The specs table: where it came from and when.
    pub table_origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_retrieved: Option<String>,
    #[serde(default)]
    pub table_sources: Vec<String>,
}

/// Why the types are sized on the baseline alone, said with the section.
pub(crate) const WHY_BASELINE: &str =
    "Sized on the baseline alone: burst is best effort and how long \
it lasts cannot be predicted (the same instance under the same load was enforced after about \
16 minutes in one run and never in another), so only the baseline can be planned against.";

/// How to give a baseline when none is known.
pub(crate) const GIVE_A_BASELINE: &str =
    "give --instance-type TYPE (its published baseline) or --baseline RATE[/RATE] \
     to size against one";

impl RightSizing {
    /// What the rates are: "1-second rates", "5-second rates" (the
    /// recording's interval).
    pub(crate) fn rates_of(&self) -> String {
        use crate::shared::units::significant;
        format!("{}-second rates", significant(self.interval_secs, 3))
    }

    /// How the covering types are ordered: "x86_64 first (that of
    /// m5.large)", or by baseline when the architecture is unknown.
    pub fn order(&self) -> String {
        match (&self.arch, &self.arch_from) {
            (Some(a), Some(from)) => format!("{} first ({from})", a.as_str()),
            (Some(a), None) => format!("{} first", a.as_str()),
            _ => "architecture unknown, by baseline".to_string(),
        }
    }

    /// The specs table's origin and date.
    pub(crate) fn table_provenance(&self) -> String {
        match &self.table_retrieved {
            Some(d) => format!("{}, retrieved {d}", self.table_origin),
            None => self.table_origin.clone(),
        }
    }
}

/// One direction's interval rates over the span against the baseline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSizing {
    /// Nearest-rank percentiles of the interval rates, and the largest,
    /// bits/s.
    pub p50_bps: f64,
    pub p99_bps: f64,
    pub max_bps: f64,
    /// The baseline in this direction and the figures above as % of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pct: Option<f64>,
    /// Seconds of intervals above the baseline, and the bytes beyond it.
    pub above_secs: f64,
    pub above_bytes: f64,
}

/// An instance type whose baseline covers what was observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoveringType {
    pub instance_type: String,
    pub arch: Arch,
    /// None where the table does not know it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    pub baseline_bps: f64,
    /// None where the table gives the baseline only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bps: Option<f64>,
    /// Of the architecture offered first.
    pub same_arch: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfaceSummary {
    pub name: String,
    pub driver: Option<String>,
    /// Intervals per verdict.
    pub verdicts: BTreeMap<Verdict, u64>,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
    pub mean_tx_bps: f64,
    pub peak_tx_bps: f64,
    pub mean_rx_bps: f64,
    pub peak_rx_bps: f64,
    pub tx_wire_packets: u64,
    pub rx_wire_packets: u64,
    /// Whether allowance counters were available in any interval.
    pub allowance_available: bool,
    /// Allowance exceeded, summed over the span, and as % of the wire
    /// packets of the span (overall) and the worst interval (peak).
    pub allowance: BTreeMap<String, AllowanceSummary>,
    /// Retransmitted segments as % of segments sent, overall and peak.
    pub retrans_segs: u64,
    pub segs_out: u64,
    pub retrans_pct: Option<f64>,
    pub peak_retrans_pct: Option<f64>,
    /// Local queuing: the largest qdisc backlog seen, and host drops.
    pub peak_backlog_bytes: u64,
    pub host_drops: BTreeMap<String, u64>,
    /// Which Kafka roles and groups carried the interface's traffic over
    /// the span (report/kafka.rs); absent without Kafka identities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kafka: Vec<super::kafka::KafkaUse>,
    /// The packets sent to the link-local services through the interface
    /// over the span, and by whom (report/linklocal.rs); absent when none
    /// were (or the interface was not measured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linklocal: Option<super::linklocal::LinkLocalUse>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AllowanceSummary {
    pub exceeded: u64,
    pub pct: Option<f64>,
    pub peak_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSummary {
    pub rank: usize,
    pub flow_id: u64,
    pub local: SocketAddr,
    pub peer: SocketAddr,
    pub owner: Option<Owner>,
    pub intervals: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub retransmits: u64,
    /// Of them, reported spurious by the receiver (D-SACK).
    #[serde(default)]
    pub spurious_retransmits: u64,
    pub failed_retransmits: u64,
    /// The largest queuing delay over its peer's base RTT in an interval it
    /// sent data (docs/verdicts.md, "Which flows paid").
    #[serde(default)]
    pub peak_added_delay_us: u32,
    /// Each part of the backoff score summed over the intervals: which of
    /// recovery time, retransmits, delay and cwnd cuts made `backoff_total`.
    #[serde(default)]
    pub backoff_parts_total: crate::analysis::BackoffParts,
    pub cwnd_reductions: u64,
    pub recovery_loss_ms: f64,
    pub mean_rtt_inflation: Option<f64>,
    pub peak_rtt_inflation: Option<f64>,
    pub min_rtt_us: u32,
    /// Sum over the intervals of the per-interval backoff score (0..100):
    /// what ranks the flows.
    pub backoff_total: f64,
    pub peak_backoff: f64,
    /// Intervals whose backoff score was above 0.
    pub backoff_intervals: u64,
    pub closed: bool,
    /// The interface the flow used, as last known; None when the recording
    /// does not say (other namespaces, files older than format 1.2).
    #[serde(default)]
    pub iface: Option<String>,
    /// The flow's highest peak rate (its busiest `--peak-window`, bits/s)
    /// over the recording; None when never measured (recordings before
    /// format 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_bps: Option<f64>,
    /// What the flow is to the local Kafka broker (its role, the other
    /// broker, the group and client; src/model/kafka.rs), as last known;
    /// absent when the recording gave it none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<crate::model::kafka::KafkaFlow>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HealthSummary {
    /// Per BPF program: events and runs the kernel skipped, over the span.
    pub programs: BTreeMap<String, ProgramSummary>,
    pub ringbuf_drops: u64,
    /// Close records lost, and late (waited in the kernel), over the span.
    #[serde(default)]
    pub closes_lost: u64,
    #[serde(default)]
    pub closes_deferred: u64,
    /// Flows closed without their close record (the kernel did not run
    /// the close program: their last counters are missing), found gone by
    /// the moved set's sweep (`moved_set_gone`), over the span.
    #[serde(default)]
    pub closes_missed: u64,
    /// Flows past the listing limit (summed per interface, not listed),
    /// over the span, and the intervals that had any.
    #[serde(default)]
    pub folded_flows: u64,
    #[serde(default)]
    pub folded_intervals: u64,
    pub untracked_flows: u64,
    pub counter_read_failures: u64,
    pub host_queue_untracked: u64,
    /// Intervals that ended late: the observer could not keep up.
    #[serde(default)]
    pub late_intervals: u64,
    /// The largest `Health::probe_sampling` in the span: tcp_probe's
    /// per-segment figures came from one segment in this many (0 or 1:
    /// every one).
    #[serde(default)]
    pub probe_sampling: u32,
    /// Under `--per-packet auto`: [intervals whose per-packet programs were
    /// paused (queue figures, peak rates and link-local senders not measured), intervals].
    /// Absent with `always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_packet_paused: Option<[u64; 2]>,
    /// Allowance counter resets, zeroed reads and failed reads, per interface.
    pub allowance_resets: BTreeMap<String, u64>,
    pub allowance_zeroed_reads: BTreeMap<String, u64>,
    pub allowance_read_failures: BTreeMap<String, u64>,
    /// Intervals whose allowance read was not judged (failed, zeroed,
    /// after a failed read, or counts no shaper produces), per interface.
    #[serde(default)]
    pub allowance_untrusted_intervals: BTreeMap<String, u64>,
    /// The OTLP exporter's delivery over the span, when the recorder also
    /// pushed to a collector (`--otlp`, trace format 1.12); absent else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otlp: Option<OtlpSummary>,
    /// The Kafka lookup over the span (`--kafka`, trace format 1.13);
    /// absent when no interval of the span carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaLookupSummary>,
    /// Episodes the tracker forgot (more than it keeps).
    pub episodes_forgotten: u64,
    /// Reader warnings: skipped lines, cut tails, missing segments/intervals.
    pub read_warnings: Vec<String>,
}

/// The OTLP exporter's counters (`health.otlp`) over the span: their
/// growth, as the other health counters, and the deepest queue seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtlpSummary {
    /// Batches the collector took.
    pub sent: u64,
    /// Batches given up (full queue, refused for good).
    pub dropped: u64,
    /// Failed requests, each attempt.
    pub failures: u64,
    /// The most batches waiting at an interval's end.
    pub max_queued: u64,
}

/// The Kafka lookup (`health.kafka`) over the span: lookups that worked
/// and failed (their growth), and as the span's last interval left it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaLookupSummary {
    /// The broker asked.
    pub target: String,
    pub lookups_ok: u64,
    pub lookups_failed: u64,
    /// The latest failure, when the span's last lookup failed (or worked
    /// in part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Age of the directory the last interval's flows were named with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_age_ms: Option<u64>,
    /// The broker this host runs, by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_broker: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgramSummary {
    pub events: u64,
    pub missed: u64,
    /// Why the program was not attached (the latest interval that said so);
    /// its figures are missing from the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_attached: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalPoint {
    pub seq: u64,
    /// Seconds since the recording's start.
    pub t_secs: f64,
    pub interfaces: Vec<InterfacePoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterfacePoint {
    pub iface: String,
    pub verdict: Verdict,
    pub tx_bps: f64,
    pub rx_bps: f64,
    pub bw_out_pct: Option<f64>,
    pub bw_in_pct: Option<f64>,
    pub pps_pct: Option<f64>,
    pub conntrack_pct: Option<f64>,
    pub retrans_pct: Option<f64>,
    pub backlog_bytes: Option<u64>,
    /// The interval's busiest window outbound (bits/s), drawn over the
    /// mean; None when not measured (recordings before format 1.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_peak_bps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSeries {
    pub flow_id: u64,
    /// `peer` and owner, for the legend.
    pub label: String,
    /// (seconds since start, srtt/min_rtt) for intervals where it is known.
    pub points: Vec<(f64, f64)>,
}
