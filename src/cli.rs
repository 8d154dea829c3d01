//! Command-line definitions.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use std::path::PathBuf;

use crate::allowance::parse_counters_arg;
use crate::duration::parse_duration;

#[derive(Debug, Parser)]
#[command(
    name = "throttlescope",
    version,
    about = "Is the hypervisor shaping this host's network, is the host queuing, or is the network losing packets? Per flow, from the kernel.",
    long_about = "throttlescope attaches eBPF programs to the kernel's TCP tracepoints and, every \
interval, reports each TCP flow's RTT inflation (srtt against min_rtt), cwnd, retransmits and \
congestion-state time, with the interfaces' counters.\n\n\
It only observes: nothing is changed on the host. It needs root (or CAP_BPF, CAP_PERFMON and \
CAP_NET_ADMIN) and a kernel with BTF. Run `throttlescope doctor` to see what will work here.\n\n\
Examples:\n  \
throttlescope watch                      # table of the busiest flows, every second\n  \
throttlescope watch --json --duration 30s  # one JSON snapshot per line for 30 s\n  \
ip netns exec broker throttlescope watch   # observe another network namespace"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Observe live: one snapshot per interval, as a table or JSON lines.
    Watch(WatchArgs),
    /// Check kernel, BTF, tracepoints, privileges and interfaces; say what works.
    Doctor(DoctorArgs),
    /// List the verdict thresholds with their defaults and why.
    Thresholds,
    /// Attach an empty program to tp_btf/tcp_probe (tools/bench's yardstick).
    #[command(hide = true)]
    BaselineProbe(BaselineProbeArgs),
}

#[derive(Debug, Args, Clone)]
pub struct WatchArgs {
    /// Length of one interval (e.g. 500ms, 1s, 5s).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,

    /// Stop after this long (e.g. 30s, 10m); runs until Ctrl-C when absent.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Print one JSON object per interval (the snapshot) instead of a table.
    #[arg(long)]
    pub json: bool,

    /// Observe sockets of every network namespace, not only this one.
    #[arg(long)]
    pub all_netns: bool,

    /// Interfaces to report (repeatable); default: all but `lo`.
    #[arg(long = "iface", value_name = "IFACE")]
    pub interfaces: Vec<String>,

    /// Flows shown in the table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,

    /// Do not stream per-event records (retransmits, congestion-state
    /// changes, opens) from the kernel; flow totals are still counted.
    #[arg(long)]
    pub no_events: bool,

    /// Read IFACE's allowance counters from PATH, a file in the format
    /// `ethtool -S IFACE` prints, re-read every interval (repeatable). For
    /// hosts without an ENA device, e.g. the lab's emulated counters.
    #[arg(long = "counters", value_name = "IFACE=PATH", value_parser = parse_counters_arg)]
    pub counters: Vec<(String, PathBuf)>,

    /// Override a verdict threshold, e.g. `--threshold bw_pct=60`
    /// (repeatable; `throttlescope thresholds` lists them with defaults).
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub thresholds: Vec<String>,

    /// Do not attach the host-queue probes (qdisc and kfree_skb).
    #[arg(long)]
    pub no_host_queue: bool,
}

#[derive(Debug, Args, Clone)]
pub struct DoctorArgs {
    /// Skip the trial load of the BPF programs.
    #[arg(long)]
    pub no_load: bool,
}

#[derive(Debug, Args, Clone)]
pub struct BaselineProbeArgs {
    /// Stop after this long; runs until Ctrl-C when absent.
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
}
