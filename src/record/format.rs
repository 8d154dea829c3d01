//! What a trace file holds: the header line and the record lines, and the
//! version rule that decides whether this build can read a file.

use serde::{Deserialize, Serialize};

use crate::model::snapshot::Snapshot;
use crate::shared::build_info;

/// The `format` value of every trace header.
pub const FORMAT_NAME: &str = "throttlescope-trace";

/// The version this build writes. Readable: every `1.x`. 1.1 added the
/// header's `thresholds` and `segment`; 1.2 the flows' `iface`; 1.3 the
/// owners' `cgroup` and `workload`, and the health programs' `attached`,
/// `not_attached` and `lost`; 1.4 the flows' `busy_us`, `rwnd_limited_us`,
/// `sndbuf_limited_us`, `waiting_events`, `notsent_bytes` and `cwnd_limited`,
/// the allowance's `admin_cmd_failures`, health's `missing_interfaces` and
/// the snapshot's `fragments_created`; 1.5 health's `flows_dumped` and
/// `flows_carried`; 1.6 the snapshot's `idle_flows` (`flows` lists only the
/// flows that moved; before, every tracked flow), health's `late_intervals`
/// and the header's `tool_commit` and `bpf_objects`; 1.7 health's
/// `probe_sampling`; 1.8 health's `allowance_read_failures` and
/// `allowance_untrusted_reads`, the flows' D-SACKed retransmits; 1.9
/// health's `untracked_open`, `untracked_bytes_sent`,
/// `untracked_bytes_received` and `max_flows`, and `untracked_flows`
/// counting sockets (before: failed attempts), the interfaces' `removed`
/// and their rates' `tx_passed_bps`; a snapshot's `folded` (flows and
/// events past the listing limits), health's `closes_deferred` and
/// `closes_lost`; the interfaces' `tx_peak_bps`, `rx_peak_bps`,
/// `tx_peak_pps`, `rx_peak_pps` and `peak_window_us`, and the flows'
/// `peak_bps` (microbursts); 1.10 the header's `instance_type` and
/// `baseline`; 1.11 health's `moved_set_full` and `moved_set_gone`; 1.12
/// health's `otlp` (the OTLP exporter's delivery) and a flow's
/// `retrans_dsack`, `retrans_undone`, `retrans_probes`, `rto_undone` and
/// `recovery_undone` (and `retrans_spurious` counts undone retransmits);
/// 1.13 a flow's `kafka` (its Kafka role, group and client id) and
/// health's `kafka` (the Kafka lookup's own counters); 1.14 the header's
/// `host_id` (which host, for a cluster report over several); 1.15 a
/// flow's `segs_in` and an interface's `linklocal`; 1.16 a snapshot's
/// `udp_openers` (UDP sockets made, by owner); 1.17 health's
/// `kafka.local_broker` (the broker this host runs); 1.18 a snapshot's
/// `icmp_openers` (ICMP sockets made, by owner); 1.19 an interface's
/// host queue's `qdisc_drops`, `qdisc_sent` and `unseen_drops` (the
/// qdisc's own counters, and the drops it counted that no drop event was
/// seen for); 1.20 a link-local sender's `forwarded` and `from_netns` (a
/// pod's datagrams forwarded through the node's interface), and an
/// interface's `tcp_holders` (the TCP flows open, idle ones too, by owner);
/// 1.21 a flow of another namespace's `iface` (the interface here its
/// packets are routed out of) and `unrouted` (none found), on flows and
/// folded flows; 1.22 an interface's host queue's `paused` and health's
/// `per_packet` (the per-packet programs paused while quiet); 1.23
/// `tcp_cong_state_set`'s `missed` also counts the state changes it found
/// made while the kernel skipped it uncounted.
pub const CURRENT_VERSION: FormatVersion = FormatVersion {
    major: 1,
    minor: 23,
};

/// `major.minor`: a new minor only adds (optional fields, record types that
/// older readers may skip); a new major may change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FormatVersion {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for FormatVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// One observed interface, as it was when the segment started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceInfo {
    pub name: String,
    #[serde(default)]
    pub driver: Option<String>,
    /// The driver's version as `ethtool -i` gives it, where known: some ENA
    /// releases report failed counter reads in ways docs/verdicts.md
    /// describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
}

/// The first line of every segment file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceHeader {
    /// Always [`FORMAT_NAME`]: tells a trace from any other JSON lines.
    pub format: String,
    pub version: FormatVersion,
    /// The throttlescope that wrote the file.
    pub tool_version: String,
    /// Its git commit (`-dirty`, `unknown`), as `--version` prints it.
    /// Absent (empty) in files written before it was added.
    #[serde(default)]
    pub tool_commit: String,
    /// The BPF objects it loaded: name to the first 12 hex digits of the
    /// object's SHA-256, as `--version` prints them. Absent (empty) in files
    /// written before it was added.
    #[serde(default)]
    pub bpf_objects: std::collections::BTreeMap<String, String>,
    pub host: String,
    /// `uname -r` of the observed machine.
    pub kernel: String,
    pub interfaces: Vec<InterfaceInfo>,
    /// The interval asked for, in ns (each snapshot carries the measured one).
    pub interval_ns: u64,
    /// The analysis thresholds in force while recording, opaque here, so a
    /// report can say what the live view judged with. Added in 1.1.
    #[serde(default)]
    pub thresholds: serde_json::Value,
    /// When the recording (not this segment) started: every segment of one
    /// recording has the same pair, which is how segments are grouped.
    pub start_unix_ms: u64,
    pub start_mono_ns: u64,
    /// Rotation index: 0 for the first segment of a recording, then +1.
    #[serde(default)]
    pub segment: u32,
    /// The EC2 instance type DMI named, whether or not the specs table had
    /// it (a report can look it up in another table). Added in 1.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The baseline headroom was measured against live; absent when none
    /// was known. Added in 1.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<crate::model::instance::Baseline>,
    /// Which host this is, beyond its name: `/etc/machine-id` and the
    /// observer's network namespace (`machine-id/net:INODE`), so that a
    /// cluster report tells apart hosts of one name (brokers in network
    /// namespaces of one machine, cloned host names). Added in 1.14;
    /// absent in older files, which are told apart by `host` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
}

impl TraceHeader {
    /// A header for a recording starting now on this machine.
    pub fn for_this_host(
        interfaces: Vec<InterfaceInfo>,
        interval_ns: u64,
        thresholds: serde_json::Value,
    ) -> Self {
        TraceHeader {
            format: FORMAT_NAME.to_string(),
            version: CURRENT_VERSION,
            tool_version: build_info::VERSION.to_string(),
            tool_commit: build_info::GIT_COMMIT.to_string(),
            bpf_objects: build_info::bpf_objects().into_iter().collect(),
            host: hostname(),
            kernel: read_proc_line("/proc/sys/kernel/osrelease"),
            interfaces,
            interval_ns,
            thresholds,
            start_unix_ms: crate::shared::clock::now_unix_ms(),
            start_mono_ns: crate::shared::clock::monotonic_ns(),
            segment: 0,
            instance_type: None,
            baseline: None,
            host_id: host_id(),
        }
    }

    /// Where the recording started: (unix ms, monotonic ns).
    pub(crate) fn start(&self) -> (u64, u64) {
        (self.start_unix_ms, self.start_mono_ns)
    }

    /// True when both headers belong to the same recording. Asked by the
    /// walk only (src/record/walk.rs, `file_item`): every reader learns
    /// where a recording starts from its `NewRecording`.
    pub(crate) fn same_recording(&self, other: &TraceHeader) -> bool {
        self.host == other.host
            && self.start_unix_ms == other.start_unix_ms
            && self.start_mono_ns == other.start_mono_ns
    }
}

/// This host's identity beyond its name (the header's `host_id`): the
/// machine id and the observer's network namespace, `ID/net:INODE`; None
/// when neither can be read.
pub(crate) fn host_id() -> Option<String> {
    let machine = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    // `net:[4026531840]`
    let netns = std::fs::read_link("/proc/self/ns/net").ok().and_then(|l| {
        let l = l.to_string_lossy().into_owned();
        let inode = l.strip_prefix("net:[")?.strip_suffix(']')?.to_string();
        Some(inode)
    });
    match (machine, netns) {
        (None, None) => None,
        (m, n) => Some(format!(
            "{}/net:{}",
            m.as_deref().unwrap_or("unknown"),
            n.as_deref().unwrap_or("unknown")
        )),
    }
}

/// This machine's host name, as a header records it.
pub(crate) fn hostname() -> String {
    read_proc_line("/proc/sys/kernel/hostname")
}

fn read_proc_line(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({path}: {e})"))
}

/// Written when a segment is closed on purpose (stop or rotation): a
/// segment without it was cut short (killed, crash, disk full).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndRecord {
    pub unix_ms: u64,
    /// Snapshots in this segment.
    pub intervals: u64,
    /// Why: [`EndReason::as_str`] (kept a string, so a reason added later
    /// reads in an older reader).
    pub reason: String,
}

/// Why a segment was closed on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// The duration ended, the person quit, or SIGINT/SIGTERM (since 1.0).
    Stopped,
    /// The next segment took over (since 1.0).
    Rotated,
    /// The terminal went away: SIGHUP, or end of file or EIO on it (since 1.8).
    Hangup,
}

impl EndReason {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EndReason::Stopped => "stopped",
            EndReason::Rotated => "rotated",
            EndReason::Hangup => "hangup",
        }
    }
}

/// One line after the header, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TraceRecord {
    Snapshot(Box<Snapshot>),
    End(EndRecord),
    /// A record type from a newer minor version: skipped (and counted).
    #[serde(other)]
    Unknown,
}

/// Why a first line is not a header this build can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderProblem {
    NotATrace(String),
    NewerMajor(FormatVersion),
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderProblem::NotATrace(why) => {
                write!(f, "not a throttlescope trace (first line: {why})")
            }
            HeaderProblem::NewerMajor(v) => write!(
                f,
                "format version {v} is newer than this throttlescope understands ({}.x)",
                CURRENT_VERSION.major
            ),
        }
    }
}

/// Parses a header line: the format name and the major version are checked
/// before the rest, so a newer major gets the version message, not a field
/// error from a layout this build does not know.
pub(crate) fn parse_header(line: &[u8]) -> Result<TraceHeader, HeaderProblem> {
    let value: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| HeaderProblem::NotATrace(format!("not JSON: {e}")))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT_NAME) {
        return Err(HeaderProblem::NotATrace(format!(
            "no \"format\": \"{FORMAT_NAME}\""
        )));
    }
    let version: FormatVersion = value
        .get("version")
        .cloned()
        .ok_or_else(|| HeaderProblem::NotATrace("no version".into()))
        .and_then(|v| {
            serde_json::from_value(v)
                .map_err(|e| HeaderProblem::NotATrace(format!("bad version: {e}")))
        })?;
    if version.major > CURRENT_VERSION.major {
        return Err(HeaderProblem::NewerMajor(version));
    }
    if version.major < CURRENT_VERSION.major {
        return Err(HeaderProblem::NotATrace(format!(
            "version {version} predates 1.0"
        )));
    }
    serde_json::from_value(value).map_err(|e| HeaderProblem::NotATrace(format!("bad header: {e}")))
}

#[cfg(test)]
mod build_fields_tests {
    use super::*;

    /// The commit and BPF object hashes were added without a format bump:
    /// a header written before them still reads, with empty values.
    #[test]
    fn a_header_without_commit_or_bpf_objects_still_reads() {
        let line = br#"{"format":"throttlescope-trace","version":{"major":1,"minor":5},"tool_version":"0.1.0","host":"h","kernel":"k","interfaces":[],"interval_ns":1000000000,"start_unix_ms":1,"start_mono_ns":2}"#;
        let h = parse_header(line).expect("old header");
        assert_eq!(h.tool_commit, "");
        assert!(h.bpf_objects.is_empty());
    }

    /// A new header records what `--version` prints, and reads back.
    #[test]
    fn a_new_header_records_the_build() {
        let h = TraceHeader::for_this_host(Vec::new(), 1_000_000_000, serde_json::Value::Null);
        assert_eq!(h.tool_commit, build_info::GIT_COMMIT);
        assert_eq!(
            h.bpf_objects,
            build_info::bpf_objects().into_iter().collect()
        );
        let line = serde_json::to_vec(&h).unwrap();
        let text = String::from_utf8_lossy(&line);
        assert!(text.contains("\"tool_commit\"") && text.contains("\"bpf_objects\""));
        assert_eq!(parse_header(&line).unwrap(), h);
    }
}
