//! throttlescope: per-flow TCP observation from the kernel, to tell
//! hypervisor shaping apart from host queuing and network loss.
//!
//! Data flows one way: [`collect`] (the kernel; one
//! [`model::snapshot::Snapshot`] per interval) -> [`analysis`] -> [`sinks`]
//! ([`record`]ings are read back into the same snapshots and turned into a
//! [`report`]). `pipeline` is the loop between them and [`commands`] the
//! entry points. The model, the analysis, recordings, reports and sinks do
//! not depend on collection: they build without the BPF side
//! (`cargo build --no-default-features`).

// Without `collect` the commands, the pipeline and the live sinks are not
// built, so much of the crate-private surface they use has no caller there:
// dead code is judged in the full build, where `cargo clippy -D warnings`
// runs too.
#![cfg_attr(not(feature = "collect"), allow(dead_code))]

pub mod analysis;
#[cfg(feature = "collect")]
pub mod collect;
/// `eprintln!` that never panics: once the terminal has gone away (a
/// dropped SSH session), stderr fails with EIO, and a message then is lost
/// rather than turning a clean stop into a crash.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

#[cfg(feature = "collect")]
pub mod commands;
pub mod model;
pub(crate) mod pipeline;
pub mod record;
pub mod report;
pub mod shared;
pub mod sinks;
