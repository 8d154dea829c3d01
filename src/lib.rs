//! throttlescope: per-flow TCP observation from the kernel, to tell
//! hypervisor shaping apart from host queuing and network loss.
//!
//! Data flows one way: [`collect`] (the kernel; one
//! [`model::snapshot::Snapshot`] per interval) -> [`analysis`] -> [`sinks`]
//! ([`record`]ings are read back into the same snapshots and turned into a
//! [`report`]). [`pipeline`] is the loop between them and [`commands`] the
//! entry points. The model, the analysis, recordings, reports and sinks do
//! not depend on collection: they build without the BPF side
//! (`cargo build --no-default-features`).

pub mod analysis;
#[cfg(feature = "collect")]
pub mod collect;
#[cfg(feature = "collect")]
pub mod commands;
pub mod model;
pub mod pipeline;
pub mod record;
pub mod report;
pub mod shared;
pub mod sinks;
