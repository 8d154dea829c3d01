//! The tests that need no root: recordings written and read back, reports
//! and replays of recordings, the metrics endpoint, the fleet kit's files,
//! and command lines refused before anything is attached. One program (not
//! one per file) so that a change to the library links one test binary
//! here, not one per file. The tests that need root are in tests/lab.
//!
//! Each module is a former tests/*.rs file; a file whose tests were mixed
//! has its root-free half here and the rest in tests/lab under the same
//! name.

#[path = "../support/mod.rs"]
mod support;

mod alone;
mod capacity;
mod cli_limits;
mod fleet_kit;
mod lab_gate;
mod metrics;
mod record_bad_inputs;
mod record_crash;
mod record_robustness;
mod record_rotation;
mod record_roundtrip;
mod replay;
mod report;
mod report_cluster;
mod report_html;
mod report_memory;
mod workloads;
