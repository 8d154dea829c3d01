//! Command-line definitions.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::collect::allowance::parse_counters_arg;
use crate::collect::collector::DEFAULT_PROBE_SAMPLING;
use crate::collect::per_packet::PerPacketMode;
use crate::model::fold::{DEFAULT_LISTED_FLOWS, MAX_LISTED_FLOWS};
use crate::model::instance::parse_baseline;
use crate::shared::units::{parse_duration, parse_interval, parse_size};

#[derive(Debug, Parser)]
#[command(
    name = "throttlescope",
    // `-V`: the version and commit; `--version` adds the BPF object hashes
    // (set at run time by [`command`], which every entry point uses).
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("THROTTLESCOPE_GIT_COMMIT"), ")"),
    about = "Is the hypervisor shaping this host's network, is the host queuing, or is the network losing packets? Per flow, from the kernel.",
    long_about = "throttlescope attaches eBPF programs to the kernel's TCP tracepoints and, every \
interval, reports each TCP flow's RTT inflation (srtt against min_rtt), cwnd, retransmits and \
congestion-state time, with the interfaces' counters.\n\n\
It only observes: nothing is changed on the host. It needs root (or CAP_BPF and \
CAP_PERFMON) and a kernel with BTF. Run `throttlescope doctor` to see what will work here.\n\n\
Examples:\n  \
throttlescope watch                          # full-screen live view (q quits)\n  \
throttlescope watch --json --duration 30s    # one JSON snapshot per line for 30 s\n  \
ip netns exec broker throttlescope watch     # observe another network namespace\n  \
throttlescope record -o incident.jsonl.zst   # record for later review\n  \
throttlescope report incident.jsonl.zst --html incident.html\n  \
throttlescope replay incident.jsonl.zst      # see it again as it was live\n  \
throttlescope watch --metrics 127.0.0.1:9979 # serve Prometheus metrics\n\n\
Exit status: 0 when the command ended as asked (q, --duration, the end of a replay, SIGINT \
or SIGTERM) and for `doctor` when observing is possible; 1 on an error, said on stderr; 2 for \
a command line that does not parse or that names what is not there (a --counters file, an \
--instance-type the table lacks, an --instance-specs file that does not read); 129 when the terminal went away (SIGHUP, or end of file \
or an error on it, as when an SSH session drops), after the same clean stop: probes \
detached, a recording closed with an end record whose reason is `hangup`, the metrics \
listener closed; 128+N when the clean stop after signal N did not finish within a second \
(a write blocked on a stopped pipe or terminal) or a second SIGINT or SIGTERM came: the \
terminal is given back and the process exits at once, leaving a recording without its end \
record (the intervals written are intact). SIGHUP and SIGINT that the parent ignores \
(nohup) stay ignored. Ctrl-Z or SIGTSTP gives the terminal back and stops the full-screen \
view; `fg` takes it again."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Observe live: a full-screen view on a terminal, plain tables or JSON
    /// lines otherwise; optionally record and serve Prometheus metrics.
    ///
    /// Keys in the full-screen view: q/Esc/Ctrl-C quit, p/space pause, s sort,
    /// / filter by peer, :port or process (Enter applies, Esc clears), ? help.
    Watch(WatchArgs),
    /// Observe and write every interval to a trace file (no live view).
    Record(RecordArgs),
    /// Summarise recordings: episodes with evidence, enforcement, the flows
    /// that backed off, rates and health; as text, `--json` or `--html`.
    Report(ReportArgs),
    /// Play a recording through the same view as `watch`.
    Replay(ReplayArgs),
    /// Network capacity for Kafka's rebalancers (Cruise Control, Strimzi):
    /// each broker's instance baseline less a margin, in KiB/s.
    #[command(long_about = CAPACITY_LONG_ABOUT)]
    Capacity(CapacityArgs),
    /// Check kernel, BTF, tracepoints, privileges and interfaces; say what works.
    Doctor(DoctorArgs),
    /// List the verdict thresholds with their defaults, why, and allowed ranges.
    Thresholds,
    /// Print a shell completion script for SHELL to stdout.
    ///
    /// Debian's package installs them; by hand, e.g.
    /// `throttlescope completions bash > /etc/bash_completion.d/throttlescope`
    /// or `throttlescope completions fish > ~/.config/fish/completions/throttlescope.fish`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) to stdout, or with `--dir` write one
    /// page per command there (throttlescope.1, throttlescope-watch.1, ...).
    ///
    /// `throttlescope man | man -l -` reads it without installing.
    Man(ManArgs),
}

#[derive(Debug, Args, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args, Clone)]
pub struct ManArgs {
    /// Write throttlescope.1 and one page per subcommand into DIR
    /// (created if missing) instead of printing the main page.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command line as clap sees it, with the long `--version` text
/// (commit and BPF object hashes) that only exists at run time. Parsing,
/// the man page and the completions all start from here, so they agree.
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    // Leaked once per process: clap keeps `&'static str`s, and this runs
    // once (at parse, or once per generated page set).
    let long: &'static str = Box::leak(crate::shared::build_info::long_version().into_boxed_str());
    Cli::command().long_version(long)
}

/// Parses the process's arguments with [`command`] (exits on `--help`,
/// `--version` and errors, as clap does).
pub fn parse() -> Cli {
    use clap::FromArgMatches;
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// What to observe and how often: shared by `watch` and `record`.
#[derive(Debug, Args, Clone)]
pub struct ObserveArgs {
    /// Length of one interval (e.g. 500ms, 1s, 5s; from 10ms to 1h).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Stop after this long (e.g. 30s, 10m); runs until Ctrl-C when absent.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Observe sockets of every network namespace, not only this one (a
    /// node's pods). A pod's flow counts for the interface this namespace
    /// routes it out of (a flow to a service address: where conntrack
    /// sends it, its backend's route, or `lo` when the pod's sidecar
    /// redirects it to itself; `doctor` says whether it can); a
    /// flow of a namespace no veth here leads into counts for none (its
    /// interface column reads `none`).
    #[arg(long)]
    pub all_netns: bool,

    /// Interfaces to report (repeatable); default: all but `lo`.
    #[arg(long = "iface", value_name = "IFACE")]
    pub interfaces: Vec<String>,

    /// Do not stream per-event records (retransmits, congestion-state
    /// changes, opens) from the kernel; flow totals are still counted.
    #[arg(long)]
    pub no_events: bool,

    /// Read IFACE's allowance counters from PATH, a file in the format
    /// `ethtool -S IFACE` prints, re-read every interval (repeatable). For
    /// hosts without an ENA device, e.g. the lab's emulated counters. PATH
    /// must exist and be a regular file at start (else exit 2).
    #[arg(long = "counters", value_name = "IFACE=PATH", value_parser = parse_counters_arg)]
    pub counters: Vec<(String, PathBuf)>,

    /// Override a verdict threshold, e.g. `--threshold bw_allowance_pct=60`
    /// (repeatable; `throttlescope thresholds` lists them with defaults and
    /// allowed ranges; out of range is an error).
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub thresholds: Vec<String>,

    /// Do not attach the host-queue probes (qdisc and kfree_skb), nor the
    /// peak-rate programs that catch microbursts; the transmit program stays
    /// for the link-local count unless --no-linklocal.
    #[arg(long)]
    pub no_host_queue: bool,

    /// When the per-packet programs (qdisc backlog and sojourn, peak rates,
    /// link-local senders) run. `auto` (the default): while an allowance
    /// counter moves or a root qdisc holds 64 KiB or more or drops (as `tc
    /// -s qdisc` reads it), for 10 intervals after, and one interval in 10
    /// while quiet; paused otherwise, when a packet passes none of them
    /// (host drops are counted either way). A paused interval's queue
    /// figures, peak rates and link-local senders are shown as not
    /// measured, and health says why they run or not
    /// (docs/architecture.md, "Per-packet programs while needed").
    /// `always`: every interval, every figure measured from the first
    /// packet (a burst that begins on a quiet host is then timed from its
    /// first interval, not its second).
    #[arg(long, value_name = "WHEN", value_enum, default_value_t = PerPacketMode::default())]
    pub per_packet: PerPacketMode,

    /// Do not count the UDP sent to the link-local services (DNS,
    /// metadata, time) by sender: a linklocal_limit then names TCP senders
    /// only.
    #[arg(long)]
    pub no_linklocal: bool,

    /// Do not count the UDP and ICMP (ping) sockets made, by owner: a
    /// conntrack_limit then names the owners of new TCP flows only.
    #[arg(long)]
    pub no_udp_openers: bool,

    /// Take each flow's per-segment figures (mean and max srtt, min cwnd,
    /// cwnd cuts, data waiting) from one incoming segment in N, drawn per
    /// segment (a power of two, 1 to 64). 1 reads every segment, at about
    /// twice the kernel cost per segment. Counters, current srtt and cwnd,
    /// and which flows moved stay exact at any N.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PROBE_SAMPLING,
          value_parser = parse_probe_sampling)]
    pub probe_sampling: u32,

    /// List at most N flows one by one per interval: those that lost or
    /// backed off first, then the busiest. In a storm of connections the
    /// others are not dropped: they are summed per interface (`folded` in
    /// the JSON and recordings) and still count in every verdict. 100 to
    /// 25000; bounds an interval's size (about 1.5 KB a flow).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LISTED_FLOWS,
          value_parser = parse_list_flows)]
    pub list_flows: usize,
    /// Track at most N sockets at once (0: no limit). Sockets met past the
    /// limit are left untracked: counted once each in health's
    /// `untracked_flows`, with the bytes they send and receive, and the
    /// verdict's evidence says what share of the traffic they carried. Bounds
    /// the kernel memory (about 300 bytes a socket) and the per-interval work
    /// on hosts with very many connections.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_flows: u32,
    /// The window of the peak rates (microbursts): per interface and
    /// interval, the busiest window this long (1ms to 1s; 0 turns peaks
    /// off). The kernel slides it by an eighth of itself; a packet is
    /// placed in time within 8 KiB or 64 packets of traffic, or a tick.
    #[arg(long, value_name = "DURATION", default_value = "10ms",
          value_parser = parse_peak_window)]
    pub peak_window: u32,

    /// Name flows by their Kafka role (replication to a follower or from a
    /// leader, a consumer group and client id, a producer, the controller
    /// quorum), asking the local broker's cluster over Kafka's admin
    /// protocol every --kafka-period: `auto` finds the broker of this
    /// network namespace (a kafka.Kafka process, its PLAINTEXT listener;
    /// said on stderr), HOST:PORT names a PLAINTEXT listener, `off` asks
    /// nothing. TLS and SASL listeners are not supported yet.
    #[arg(long, value_name = "auto|off|HOST:PORT", default_value = "auto",
          value_parser = parse_kafka)]
    pub kafka: crate::collect::kafka::KafkaTarget,

    /// How often the Kafka lookup asks the cluster (1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_kafka_period)]
    pub kafka_period: Duration,

    /// Serve Prometheus metrics at this address (e.g. 127.0.0.1:9979).
    /// Give a non-loopback address only on purpose: there is no auth.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,

    /// Flows exported as per-flow metric series (the top N by backoff);
    /// bounds the series count. 0 exports none.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub metrics_flows: usize,

    /// Push metrics (every --otlp-period) and verdict changes (as log
    /// records) to an OpenTelemetry collector over OTLP/HTTP, e.g.
    /// http://127.0.0.1:4318 (http only; names: docs/metrics.md).
    #[arg(long, value_name = "URL", value_parser = parse_otlp_url)]
    pub otlp: Option<String>,

    /// How often metrics are pushed with --otlp (default: every interval).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "otlp")]
    pub otlp_period: Option<Duration>,

    #[command(flatten)]
    pub workloads: WorkloadArgs,

    #[command(flatten)]
    pub instance: InstanceArgs,

    /// Where the kubelet keeps one directory per pod, named
    /// `<namespace>_<name>_<uid>`: pod names come from there.
    #[arg(long, value_name = "DIR", default_value = "/var/log/pods")]
    pub pod_logs: PathBuf,
}

/// What the instance can count on: the baseline that headroom (the
/// instance's rate as a share of it, the runs above it) is measured
/// against. Without these, `watch` and `record` read the instance type
/// from DMI on EC2; `report` and `replay` use what the recording says.
#[derive(Debug, Args, Clone, Default)]
pub struct InstanceArgs {
    /// Plan against this EC2 instance type's published baseline, e.g.
    /// m6i.xlarge (a type not in the specs table is an error).
    #[arg(long, value_name = "TYPE")]
    pub instance_type: Option<String>,

    /// Plan against this baseline, bits/s: one rate for both directions or
    /// OUT/IN (e.g. 1.25G, 800Mb/s, 1G/2G). Overrides the table's figure.
    #[arg(long, value_name = "RATE[/RATE]", value_parser = parse_baseline)]
    pub baseline: Option<(f64, f64)>,

    /// Read instance network specs from FILE instead of the built-in table
    /// (AWS's published figures, dated; format in docs/headroom.md).
    #[arg(long, value_name = "FILE")]
    pub instance_specs: Option<PathBuf>,
}

/// Flows kept by owner: `--pod`, `--cgroup`, `--service` (any match keeps
/// a flow). Interface counters and allowance rates stay the interface's.
#[derive(Debug, Args, Clone, Default)]
pub struct WorkloadArgs {
    /// Only flows of this pod: its name, `namespace/name` or UID (repeatable).
    #[arg(long = "pod", value_name = "POD")]
    pub pods: Vec<String>,

    /// Only flows whose owner is in this cgroup v2 path or below it, e.g.
    /// `/system.slice/kafka.service` (repeatable).
    #[arg(long = "cgroup", value_name = "PATH")]
    pub cgroups: Vec<String>,

    /// Only flows of this systemd service, e.g. `kafka` or `kafka.service`
    /// (repeatable).
    #[arg(long = "service", value_name = "UNIT")]
    pub services: Vec<String>,
}

impl WorkloadArgs {
    pub(crate) fn filter(&self) -> anyhow::Result<crate::model::workload::WorkloadFilter> {
        crate::model::workload::WorkloadFilter::new(&self.pods, &self.cgroups, &self.services)
            .map_err(anyhow::Error::msg)
    }
}

/// Flows kept by their Kafka role and consumer group (`--kafka-role`,
/// `--kafka-group`): what is listed, not what is judged.
#[derive(Debug, Args, Clone, Default)]
pub struct KafkaFilterArgs {
    /// Only flows of this Kafka role (repeatable; docs/kafka.md):
    /// replication_to_follower (or follower: followers fetching from this
    /// broker), replication_from_leader (or leader: this broker fetching
    /// from leaders), replication (both), consume, produce, client (at the
    /// listener, in no consumer group), controller (or quorum),
    /// other_client (another process of this host to a broker). Verdicts,
    /// their evidence, recordings and the exporters still count every flow.
    #[arg(long = "kafka-role", value_name = "ROLE")]
    pub roles: Vec<String>,

    /// Only flows of this consumer group (repeatable), its id as
    /// `kafka-consumer-groups.sh --list` prints it: consumers whose group
    /// the lookup named (a flow of an ambiguous host names none).
    #[arg(long = "kafka-group", value_name = "GROUP")]
    pub groups: Vec<String>,
}

impl KafkaFilterArgs {
    pub(crate) fn filter(&self) -> anyhow::Result<crate::model::kafka::KafkaFilter> {
        crate::model::kafka::KafkaFilter::new(&self.roles, &self.groups).map_err(anyhow::Error::msg)
    }
}

/// Where and how to rotate a recording.
#[derive(Debug, Args, Clone)]
pub struct RotateArgs {
    /// Start a new file once this one holds SIZE bytes (e.g. 100M, 1G;
    /// compressed size for .zst).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub rotate_size: Option<u64>,

    /// Start a new file once this one is this old (e.g. 10m, 1h).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub rotate_time: Option<Duration>,

    /// Rotated files kept as FILE.1 .. FILE.N (older ones are deleted).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub keep: usize,
}

/// How an interval is shown (`watch` and `replay`).
#[derive(Debug, Args, Clone)]
pub struct ViewArgs {
    /// Print one JSON object per interval (snapshot and analysis).
    #[arg(long, conflicts_with = "plain")]
    pub json: bool,

    /// Print plain tables even on a terminal (the default when stdout is
    /// not a terminal).
    #[arg(long)]
    pub plain: bool,

    /// Flows shown per interval in plain tables.
    #[arg(long, default_value_t = 10)]
    pub top: usize,

    #[command(flatten)]
    pub kafka: KafkaFilterArgs,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
throttlescope watch                               # full-screen view (q quits)\n  \
throttlescope watch --json --duration 30s         # one JSON line per interval\n  \
throttlescope watch --record incident.jsonl.zst   # watch and record\n  \
throttlescope watch --metrics 127.0.0.1:9979      # and serve /metrics")]
pub struct WatchArgs {
    #[command(flatten)]
    pub observe: ObserveArgs,

    #[command(flatten)]
    pub view: ViewArgs,

    /// Also record every interval to FILE (.jsonl, or .jsonl.zst for zstd;
    /// `{start}` and `{host}` in the name are filled in, as for `record -o`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,

    #[command(flatten)]
    pub rotate: RotateArgs,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
throttlescope record -o broker.jsonl.zst --duration 10m\n  \
throttlescope record -o broker.jsonl --rotate-size 100M --keep 10\n  \
throttlescope report broker.jsonl.zst --html broker.html")]
pub struct RecordArgs {
    #[command(flatten)]
    pub observe: ObserveArgs,

    /// The trace file to write (.jsonl, or .jsonl.zst for zstd). Never
    /// overwritten: an existing FILE is an error. `{start}` in the name
    /// becomes the UTC start time (20261121T030405Z) and `{host}` the host
    /// name, e.g. `/var/lib/throttlescope/{host}-{start}.jsonl.zst`.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,

    #[command(flatten)]
    pub rotate: RotateArgs,

    /// Print nothing while recording (errors still go to stderr).
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
throttlescope report broker.jsonl.zst\n  \
throttlescope report broker.jsonl broker.jsonl.1 --html out.html\n  \
throttlescope report broker.jsonl --threshold bw_allowance_pct=60 --since 2m --until 5m --iface eth0\n\n\
Times for --since/--until: an offset from the recording's start (90s, 5m) or a wall-clock \
time in UTC (2026-11-21T03:04:05Z, or 03:04:05 on the recording's first day).")]
pub struct ReportArgs {
    /// Trace files, in any order (rotated segments of one recording are
    /// put back in order).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Also write a self-contained HTML report with charts to OUT.
    #[arg(long, value_name = "OUT")]
    pub html: Option<PathBuf>,

    /// Print the report as one JSON document instead of text.
    #[arg(long)]
    pub json: bool,

    /// Re-judge with this threshold (repeatable); the default is what the
    /// recording was judged with live.
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub thresholds: Vec<String>,

    /// Only flows matching: a peer address, `addr:port`, a local port
    /// (`:9092`) or a process name (repeatable; any match).
    #[arg(long = "flow", value_name = "PATTERN")]
    pub flows: Vec<String>,

    /// Only intervals from this time on.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,

    /// Only intervals up to this time.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,

    /// Only these interfaces (repeatable).
    #[arg(long = "iface", value_name = "IFACE")]
    pub interfaces: Vec<String>,

    #[command(flatten)]
    pub kafka: KafkaFilterArgs,

    #[command(flatten)]
    pub workloads: WorkloadArgs,

    #[command(flatten)]
    pub instance: InstanceArgs,

    /// Flows listed in the backoff table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
throttlescope replay broker.jsonl.zst               # at recorded pace\n  \
throttlescope replay broker.jsonl --speed 10        # ten times faster\n  \
throttlescope replay broker.jsonl --as-fast-as-possible --plain | less")]
pub struct ReplayArgs {
    /// Trace files (rotated segments of one recording are put in order).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Pace relative to the recording (2 = twice as fast).
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,

    /// Do not wait between intervals.
    #[arg(long, conflicts_with = "speed")]
    pub as_fast_as_possible: bool,

    /// Judge with this threshold (repeatable); default: the recording's.
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub thresholds: Vec<String>,

    #[command(flatten)]
    pub instance: InstanceArgs,

    #[command(flatten)]
    pub view: ViewArgs,
}

/// `capacity --help`: the units, the margin and why the baseline.
const CAPACITY_LONG_ABOUT: &str =
    "Network capacity for Kafka's rebalancers: each broker's EC2 instance \
baseline, less a margin, for Cruise Control's capacity file, Strimzi's brokerCapacity or a \
plain table.\n\n\
The figure is the BASELINE, never the \"up to\" burst: an instance of an \"up to 10 Gbps\" \
type sends above its baseline only while its network I/O credits last (minutes), and is then \
enforced down to the baseline. A rebalancer planned on the burst moves partitions onto brokers \
that cannot carry them for long (Cruise Control's NetworkInboundCapacityGoal then fails, or \
holds a plan the instance enforces against).\n\n\
The MARGIN (--margin, default 20%) is taken off the baseline because Kafka's byte rates count \
payload while the instance's allowance counts every byte on the wire: TCP/IP headers, TLS, \
acknowledgements, and whatever else the host sends (metrics, logs, the controller). Cruise \
Control keeps its own headroom on top (network.inbound.capacity.threshold and \
network.outbound.capacity.threshold, 0.8 by default).\n\n\
UNITS: Cruise Control's NW_IN and NW_OUT are KiB/s (its docs say KB/s; its metrics divide \
bytes by 1024); Strimzi's inboundNetwork and outboundNetwork are written with the unit, \
e.g. 244140KiB/s. A baseline of 2.5 Gb/s less 20% is 2 Gb/s = 250,000,000 bytes/s = \
244140 KiB/s.\n\n\
Cruise Control's resolver also requires DISK (MB) and CPU for every broker: --disk-mb gives \
the disk (required with --format cruise-control); CPU is written as 100 (percent, the \
resolver's default unit), or with --num-cores as the type's vCPUs.\n\n\
The broker's type: this host's (from DMI, as `watch` finds it), --instance-type, or \
--brokers for a cluster. The figures come from the instance specs table (AWS's published \
baselines, dated; --instance-specs FILE for another). With --recording, the recorded host: \
where its enforcement episodes held a baseline that differs from the published one by more \
than 5%, that is said and --measured uses it.";

/// What `capacity` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CapacityFormat {
    /// A plain table, with where the figures came from.
    Table,
    /// Cruise Control's capacity file (capacity.json), as JSON.
    CruiseControl,
    /// Strimzi's Kafka resource: spec.cruiseControl.brokerCapacity, as YAML.
    Strimzi,
}

#[derive(Debug, Args, Clone)]
#[command(after_help = "Examples:\n  \
throttlescope capacity                                   # this host (DMI), a table\n  \
throttlescope capacity --instance-type m6i.2xlarge\n  \
throttlescope capacity --brokers 1=m5.2xlarge,2=r6i.xlarge,3=im4gn.xlarge \\\n      \
--format cruise-control --disk-mb 500000 > capacity.json\n  \
throttlescope capacity --brokers-file brokers.txt --format strimzi --margin 25\n  \
throttlescope capacity --recording broker.jsonl.zst --measured")]
pub struct CapacityArgs {
    /// The broker's instance type (every broker: Cruise Control's default
    /// entry, broker -1), e.g. m6i.2xlarge.
    #[arg(long, value_name = "TYPE", conflicts_with_all = ["brokers", "brokers_file", "recording"])]
    pub instance_type: Option<String>,

    /// Brokers and their types: ID=TYPE,... (Kafka's broker.id / node.id),
    /// e.g. 1=m5.2xlarge,2=r6i.xlarge.
    #[arg(long, value_name = "ID=TYPE,...", conflicts_with_all = ["brokers_file", "recording"])]
    pub brokers: Option<String>,

    /// The same as --brokers, from FILE: ID=TYPE one a line (# comments).
    #[arg(long, value_name = "FILE", conflicts_with = "recording")]
    pub brokers_file: Option<PathBuf>,

    /// The host a recording was made on: its instance type, and its
    /// measured baseline where enforcement showed one (rotated segments:
    /// give them all).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub recording: Vec<PathBuf>,

    /// With --recording: take the baseline the recording measured (where it
    /// differs from the published one) instead of the published one.
    #[arg(long, requires = "recording")]
    pub measured: bool,

    /// Take the baseline as this rate, bits/s, instead of the table's: one
    /// rate or OUT/IN (e.g. 1.6G); for one type.
    #[arg(long, value_name = "RATE[/RATE]", value_parser = parse_baseline,
          conflicts_with_all = ["brokers", "brokers_file"])]
    pub baseline: Option<(f64, f64)>,

    /// Percent taken off the baseline (0 to 90).
    #[arg(long, value_name = "PCT", default_value_t = crate::model::capacity::DEFAULT_MARGIN_PCT,
          value_parser = parse_margin)]
    pub margin: f64,

    /// What to write.
    #[arg(long, value_enum, default_value_t = CapacityFormat::Table)]
    pub format: CapacityFormat,

    /// Cruise Control: each broker's disk capacity, MB (its resolver
    /// requires one).
    #[arg(long, value_name = "MB")]
    pub disk_mb: Option<u64>,

    /// Cruise Control: CPU as {"num.cores": vCPUs of the type} instead of 100 (percent).
    #[arg(long)]
    pub num_cores: bool,

    /// Read instance network specs from FILE instead of the built-in table.
    #[arg(long, value_name = "FILE")]
    pub instance_specs: Option<PathBuf>,
}

/// `--margin`: a percentage from 0 to 90.
fn parse_margin(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if (0.0..=90.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{s}` is not a margin: a percentage from 0 to 90, e.g. 20"
        )),
    }
}

#[derive(Debug, Args, Clone)]
pub struct DoctorArgs {
    /// Skip the trial load of the BPF programs.
    #[arg(long)]
    pub no_load: bool,
}

/// `--kafka`: auto, off, or a HOST:PORT checked for its form.
fn parse_kafka(s: &str) -> Result<crate::collect::kafka::KafkaTarget, String> {
    use crate::collect::kafka::KafkaTarget;
    match s {
        "auto" => Ok(KafkaTarget::Auto),
        "off" => Ok(KafkaTarget::Off),
        addr => {
            crate::collect::kafka::check_target(addr)?;
            Ok(KafkaTarget::Addr(addr.to_string()))
        }
    }
}

fn parse_kafka_period(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) {
        return Err(format!("--kafka-period {s}: from 1s to 1h"));
    }
    Ok(d)
}

/// `--probe-sampling`: a power of two from 1 to 64 (the BPF side takes a
/// mask).
fn parse_probe_sampling(s: &str) -> Result<u32, String> {
    let n: u32 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number (1, 2, 4, ..., 64)"))?;
    if !(1..=64).contains(&n) || !n.is_power_of_two() {
        return Err(format!(
            "{n} is not a power of two from 1 to 64 (1 samples every segment)"
        ));
    }
    Ok(n)
}

/// `--list-flows`: 100 to MAX_LISTED_FLOWS (fewer would fold the flows a
/// small host has; more could make an interval's line too long to read back).
fn parse_list_flows(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number (100 to {MAX_LISTED_FLOWS})"))?;
    if !(100..=MAX_LISTED_FLOWS).contains(&n) {
        return Err(format!("{n} is not from 100 to {MAX_LISTED_FLOWS}"));
    }
    Ok(n)
}

/// `--peak-window`: 0 (off) or 1 ms to 1 s, in microseconds.
fn parse_peak_window(s: &str) -> Result<u32, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    let d = crate::shared::units::parse_duration(s)?;
    let us = d.as_micros();
    if !(1_000..=1_000_000).contains(&us) {
        return Err(format!("{s} is not from 1ms to 1s (0 turns peaks off)"));
    }
    Ok(us as u32)
}

/// `--speed`: a finite factor above zero.
fn parse_speed(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "`{s}` is not a speed: give a number above 0, e.g. 2 or 0.5"
        )),
    }
}

/// `--otlp`: refused at parse time (before any probe loads) unless it is
/// an http:// URL the exporter can use.
fn parse_otlp_url(s: &str) -> Result<String, String> {
    crate::sinks::otlp::Endpoint::parse(s).map(|_| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::{parse_probe_sampling, Cli};
    use crate::analysis::thresholds::Thresholds;
    use clap::CommandFactory;

    /// Every `--threshold NAME=VALUE` the help pages show, as a user would
    /// copy it, is one the program accepts.
    #[test]
    fn every_threshold_example_in_the_help_is_accepted() {
        let mut cli = Cli::command();
        let mut pages = vec![cli.render_long_help().to_string()];
        for sub in cli.get_subcommands_mut() {
            pages.push(sub.render_long_help().to_string());
        }
        let mut examples = Vec::new();
        for page in &pages {
            let mut rest = page.as_str();
            while let Some(at) = rest.find("--threshold ") {
                rest = &rest[at + "--threshold ".len()..];
                let word: String = rest
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '`')
                    .collect();
                if word.contains('=') && !word.starts_with('<') {
                    examples.push(word);
                }
            }
        }
        assert!(examples.len() >= 2, "examples found: {examples:?}");
        for example in examples {
            Thresholds::default()
                .set_assignment(&example)
                .unwrap_or_else(|e| panic!("--threshold {example}: {e}"));
        }
    }

    #[test]
    fn probe_sampling_takes_powers_of_two_from_1_to_64() {
        for n in [1, 2, 8, 64] {
            assert_eq!(parse_probe_sampling(&n.to_string()), Ok(n));
        }
        for bad in ["0", "3", "128", "-8", "eight", ""] {
            let err = parse_probe_sampling(bad).unwrap_err();
            assert!(err.contains("1") && err.contains("64"), "{bad}: {err}");
        }
    }
}
