//! Recordings ("traces"): snapshots written to JSON-lines files, optionally
//! zstd-compressed and rotated, and read back for a later report. The file
//! format and its compatibility rule are in docs/trace-format.md.

pub(crate) mod continuity;
pub(crate) mod format;
mod lines;
pub(crate) mod reader;
pub(crate) mod recording;
pub mod segments;
pub(crate) mod walk;
pub(crate) mod writer;

pub(crate) use format::EndReason;
pub use format::{
    EndRecord, InterfaceInfo, TraceHeader, TraceRecord, CURRENT_VERSION, FORMAT_NAME,
};
pub(crate) use lines::MAX_LINE_BYTES;
pub use reader::{open, ProblemKind, TraceReader};
pub(crate) use recording::recorded_thresholds;
pub use walk::read_all;
pub(crate) use walk::{walk, WalkItem};
pub use writer::{RotateOptions, TraceWriter};
