//! Recordings ("traces"): snapshots written to JSON-lines files, optionally
//! zstd-compressed and rotated, and read back for a later report. The file
//! format and its compatibility rule are in docs/trace-format.md.

pub mod continuity;
pub mod format;
mod lines;
pub mod reader;
pub mod recording;
pub mod segments;
pub mod walk;
pub mod writer;

pub use continuity::Continuity;
pub use format::{
    EndReason, EndRecord, FormatVersion, InterfaceInfo, TraceHeader, TraceRecord, CURRENT_VERSION,
    FORMAT_NAME,
};
pub use lines::MAX_LINE_BYTES;
pub use reader::{open, read_all, ProblemKind, ReadProblem, ReadSummary, TraceReader};
pub use recording::{headers_in_order, recorded_thresholds, SegmentFile};
pub use walk::{walk, RecordingWalk, WalkItem};
pub use writer::{RotateOptions, TraceWriter};
