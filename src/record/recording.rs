//! One recording from the files given: their order, and the thresholds it
//! was judged with live. Shared by `report` and `replay`.

use std::path::PathBuf;

use anyhow::Result;

use super::format::TraceHeader;
use super::reader::{open, TraceReader};
use crate::analysis::Thresholds;

/// One file of a recording, with its header.
#[derive(Debug, Clone)]
pub(crate) struct SegmentFile {
    pub path: PathBuf,
    pub header: TraceHeader,
}

impl SegmentFile {
    pub(crate) fn name(&self) -> String {
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
pub(crate) fn headers_in_order(paths: &[PathBuf]) -> (Vec<SegmentFile>, Vec<anyhow::Error>) {
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
pub(crate) fn recorded_thresholds(
    header: &TraceHeader,
    name: &str,
) -> (Thresholds, Option<String>) {
    if header.thresholds.is_null() {
        return (
            Thresholds::default(),
            Some(format!(
                "{name}: no thresholds recorded (format 1.0); judging with the defaults"
            )),
        );
    }
    match serde_json::from_value::<Thresholds>(header.thresholds.clone()) {
        // Written by an older or another build, or edited: out of range, it
        // would silently judge nothing held. Defaults, said, not an error:
        // the snapshots are still worth reading.
        Ok(th) => match th.validate() {
            Ok(()) => (th, None),
            Err(e) => (
                Thresholds::default(),
                Some(format!(
                    "{name}: recorded thresholds invalid ({e}); judging with the defaults"
                )),
            ),
        },
        Err(e) => (
            Thresholds::default(),
            Some(format!(
                "{name}: recorded thresholds unreadable ({e}); judging with the defaults"
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(thresholds: serde_json::Value) -> TraceHeader {
        TraceHeader::for_this_host(Vec::new(), 1_000_000_000, thresholds)
    }

    #[test]
    fn recorded_thresholds_out_of_range_fall_back_to_the_defaults_with_a_warning() {
        let (th, warning) = recorded_thresholds(
            &header(serde_json::json!({"hold_window": 0, "bw_allowance_pct": 60})),
            "a.jsonl",
        );
        assert_eq!(th, Thresholds::default());
        let w = warning.expect("a warning");
        assert!(
            w.starts_with("a.jsonl: recorded thresholds invalid (threshold hold_window = 0"),
            "{w}"
        );
        assert!(w.ends_with("judging with the defaults"), "{w}");

        let (th, warning) = recorded_thresholds(
            &header(serde_json::json!({"hold_onset_intervals": 9})),
            "b.jsonl",
        );
        assert_eq!(th, Thresholds::default());
        assert!(warning.unwrap().contains("at most hold_window (5)"));

        // Valid ones are kept, silently.
        let (th, warning) =
            recorded_thresholds(&header(serde_json::json!({"hold_window": 7})), "c.jsonl");
        assert_eq!((th.hold_window, warning), (7.0, None));
    }
}
