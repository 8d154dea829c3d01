//! Gaps in a recording, found while it streams by: segments missing from
//! the files given, two files claiming one segment, intervals missing
//! inside a recording, and files that hold different recordings. One pass,
//! constant memory: only the previous file's header and last seq are kept.

use super::format::TraceHeader;

/// Fed by the walk (src/record/walk.rs): the files in recording order
/// (`start_file`) and each file's interval seqs (`interval`); `finish`
/// returns the warnings.
#[derive(Default)]
pub(crate) struct Continuity {
    warnings: Vec<String>,
    recordings: usize,
    /// The previous file: header, name, and the last seq of its recording
    /// so far.
    prev: Option<(TraceHeader, String)>,
    last_seq: Option<u64>,
    name: String,
}

impl Continuity {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The next file, in recording order; `new_recording`: it starts a
    /// recording (the walk's `NewRecording`, src/record/walk.rs).
    pub(crate) fn start_file(&mut self, header: &TraceHeader, name: &str, new_recording: bool) {
        if new_recording {
            self.recordings += 1;
            self.last_seq = None;
            if header.segment > 0 {
                self.warnings.push(format!(
                    "{name}: is segment {} of its recording: segments 0 to {} are not among the files given (rotated away?)",
                    header.segment,
                    header.segment - 1
                ));
            }
        } else if let Some((ph, pname)) = &self.prev {
            if header.segment == ph.segment {
                self.warnings.push(format!(
                    "{pname} and {name}: both are segment {} of the same recording",
                    header.segment
                ));
            } else if header.segment > ph.segment + 1 {
                self.warnings.push(format!(
                    "{name}: segments {} to {} of the recording are missing before it",
                    ph.segment + 1,
                    header.segment - 1
                ));
            }
        }
        self.prev = Some((header.clone(), name.to_string()));
        self.name = name.to_string();
    }

    /// The next interval of the current file.
    pub(crate) fn interval(&mut self, seq: u64) {
        if let Some(l) = self.last_seq {
            if seq > l + 1 {
                self.warnings.push(format!(
                    "{}: intervals seq {} to {} are missing",
                    self.name,
                    l + 1,
                    seq - 1
                ));
            }
        }
        self.last_seq = Some(seq);
    }

    /// Every warning, with one about mixed recordings when there were.
    pub(crate) fn finish(mut self) -> Vec<String> {
        if self.recordings > 1 {
            self.warnings.push(format!(
                "the files hold {} different recordings: their intervals follow one another in start order",
                self.recordings
            ));
        }
        self.warnings
    }
}
