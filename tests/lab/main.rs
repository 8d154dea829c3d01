//! The tests that need root: they load the BPF programs (`watch`,
//! `record`, the collector), make network namespaces and veths with
//! `tools/lab`, or mount a filesystem. One program (not one per file) so
//! that a change to the library links one test binary here, not one per
//! file. The tests that need no root are in tests/offline.
//!
//! Each module is a former tests/*.rs file; a file whose tests were mixed
//! has its root-free half in tests/offline under the same name.

#[path = "../support/mod.rs"]
mod support;
// The lab's helpers, in the shared tests/support/ beside the rest but
// included by this program only: the offline one starts no lab.
#[path = "../support/lab/mod.rs"]
mod lab_support;

mod allowance_ioctl;
mod attribution;
mod cli_limits;
mod counter_gap;
mod counter_glitch;
mod dump_paths;
mod first_interval;
mod flow_iface;
mod flows_vs_ss;
mod hangup;
mod headroom;
mod holders;
mod hostq;
mod interval_extremes;
mod kafka;
mod kafka_cluster;
mod kafka_roles;
mod linklocal;
mod metrics;
mod microburst;
mod netns_names;
mod optional_programs;
mod otlp;
mod per_packet;
mod record_crash;
mod record_robustness;
mod removed_interface;
mod replay;
mod report;
mod report_cluster;
mod report_html;
mod scenarios;
mod scenarios_limits;
mod spurious;
mod storm;
mod terminal_text;
mod tui_tmux;
mod untracked;
mod workloads;
