//! One recording from the files given: their order, and the thresholds it
//! was judged with live. Shared by `report` and `replay`.

use std::path::PathBuf;

use anyhow::Result;

use super::format::TraceHeader;
use super::reader::{open, TraceReader};
use crate::analysis::Thresholds;

/// One file of a recording, with its header.
#[derive(Debug, Clone)]
pub struct SegmentFile {
    pub path: PathBuf,
    pub header: TraceHeader,
}

impl SegmentFile {
    pub fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// Opens the file again, for its intervals.
    pub fn open(&self) -> Result<TraceReader> {
        open(&self.path)
    }
}

fn order_key(h: &TraceHeader) -> (u64, u64, u32) {
    (h.start_unix_ms, h.start_mono_ns, h.segment)
}

/// Reads each file's header only (no reader stays open, so many rotated
/// segments cost no more memory than one), and orders the files as one
/// recording: by start, then segment. Files that cannot be opened or are
/// not traces come back as errors, each naming its file, in the order given.
pub fn headers_in_order(paths: &[PathBuf]) -> (Vec<SegmentFile>, Vec<anyhow::Error>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match open(path) {
            Ok(r) => files.push(SegmentFile {
                path: path.clone(),
                header: r.header().clone(),
            }),
            Err(e) => errors.push(e),
        }
    }
    files.sort_by_key(|f| order_key(&f.header));
    (files, errors)
}

/// The thresholds a recording was judged with live (its header), or the
/// defaults with a warning when the header holds none it can use.
pub fn recorded_thresholds(header: &TraceHeader, name: &str) -> (Thresholds, Option<String>) {
    if header.thresholds.is_null() {
        return (
            Thresholds::default(),
            Some(format!(
                "{name}: no thresholds recorded (format 1.0); judging with the defaults"
            )),
        );
    }
    match serde_json::from_value(header.thresholds.clone()) {
        Ok(th) => (th, None),
        Err(e) => (
            Thresholds::default(),
            Some(format!(
                "{name}: recorded thresholds unreadable ({e}); judging with the defaults"
            )),
        ),
    }
}
