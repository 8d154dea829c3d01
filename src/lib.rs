//! throttlescope: per-flow TCP observation from the kernel, to tell
//! hypervisor shaping apart from host queuing and network loss.
//!
//! Data flows one way: [`probes`] (kernel) -> [`collector`] (one
//! [`snapshot::Snapshot`] per interval) -> analysis -> [`sinks`].

pub mod allowance;
pub mod analysis;
pub mod baseline_probe;
pub mod cli;
pub mod clock;
pub mod collector;
pub mod doctor;
pub mod duration;
pub mod flowtable;
pub mod fragments;
pub mod ifindex;
pub mod ifstats;
pub mod netns;
pub mod owners;
pub mod pipeline;
pub mod probes;
pub mod record;
pub mod replay;
pub mod report;
pub mod signals;
pub mod sinks;
pub mod snapshot;
pub mod terminal_text;
pub mod watch;
pub mod workload;
