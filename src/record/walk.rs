//! One walk over the files of one or more recordings, for every reader of
//! them (`report`, `replay`): the files put in recording order, opened one
//! at a time, and what they hold yielded as [`WalkItem`]s: where a new
//! recording starts (its judging starts again there), each interval, and
//! each problem (an unreadable file, a skipped line, a cut tail, a missing
//! segment), so that both commands read, skip, warn and restart alike.

use std::path::PathBuf;

use anyhow::Result;

use super::continuity::Continuity;
use super::format::TraceHeader;
use super::reader::TraceReader;
use super::recording::{headers_in_order, SegmentFile};
use crate::model::snapshot::Snapshot;

/// What the walk finds next.
#[derive(Debug)]
pub(crate) enum WalkItem {
    /// The first file of a recording (not a later segment of the one
    /// before): judging starts again here.
    NewRecording(Box<TraceHeader>),
    /// A file of the same recording follows (its header).
    NextFile { header: Box<TraceHeader> },
    /// One interval of the current file.
    Interval {
        snapshot: Box<Snapshot>,
        file: String,
    },
    /// Something skipped or missing, in words (file and line where known).
    Warning(String),
}

/// Where a recording starts, the one rule for every reader: a file whose
/// header is not of the same recording as the file before it (`last`)
/// starts a new one; the first file does.
pub(crate) fn file_item(last: Option<&TraceHeader>, header: TraceHeader) -> WalkItem {
    if last.is_some_and(|h| h.same_recording(&header)) {
        WalkItem::NextFile {
            header: Box::new(header),
        }
    } else {
        WalkItem::NewRecording(Box::new(header))
    }
}

/// Everything in `paths` at once, through the walk every reader uses
/// (src/record/walk.rs): the headers, the intervals in recording order
/// (files sorted by recording start, then segment), and warnings for
/// whatever was skipped or missing. A path that cannot be opened or is not
/// a trace is an error. Memory grows with the recording: for tests and
/// small files; `report` and `replay` stream the walk instead.
pub fn read_all(paths: &[PathBuf]) -> Result<(Vec<TraceHeader>, Vec<Snapshot>, Vec<String>)> {
    let mut headers = Vec::new();
    let mut snaps = Vec::new();
    let mut warnings = Vec::new();
    for item in walk_strict(paths)? {
        match item {
            WalkItem::NewRecording(h) | WalkItem::NextFile { header: h } => headers.push(*h),
            WalkItem::Interval { snapshot, .. } => snaps.push(*snapshot),
            WalkItem::Warning(w) => warnings.push(w),
        }
    }
    Ok((headers, snaps, warnings))
}

/// The walk: see the module's text. Built by [`walk`].
pub(crate) struct RecordingWalk {
    files: std::vec::IntoIter<SegmentFile>,
    pending: std::collections::VecDeque<WalkItem>,
    current: Option<(TraceReader, String)>,
    continuity: Continuity,
    last_header: Option<TraceHeader>,
    finished: bool,
    /// The files in recording order, as found at the start.
    ordered: Vec<SegmentFile>,
}

/// Orders `paths` as recordings (by start, then segment); a file that
/// cannot be opened is a warning at the start of the walk, not an error.
pub(crate) fn walk(paths: &[PathBuf]) -> RecordingWalk {
    let (files, errors) = headers_in_order(paths);
    let pending = errors
        .into_iter()
        .map(|e| WalkItem::Warning(format!("{e:#}: skipped this file")))
        .collect();
    walk_files(files, pending)
}

/// The same walk, but a path that cannot be opened or is not a trace is
/// an error (the first, in the order given) instead of a warning.
pub(crate) fn walk_strict(paths: &[PathBuf]) -> Result<RecordingWalk> {
    let (files, errors) = headers_in_order(paths);
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    Ok(walk_files(files, Default::default()))
}

fn walk_files(
    files: Vec<SegmentFile>,
    pending: std::collections::VecDeque<WalkItem>,
) -> RecordingWalk {
    RecordingWalk {
        ordered: files.clone(),
        files: files.into_iter(),
        pending,
        current: None,
        continuity: Continuity::new(),
        last_header: None,
        finished: false,
    }
}

impl RecordingWalk {
    /// The readable files in recording order (their headers were read when
    /// the walk was made); empty when none could be opened.
    pub(crate) fn files(&self) -> &[SegmentFile] {
        &self.ordered
    }

    /// Every warning left in the walk, the rest dropped: why nothing could
    /// be read when [`Self::files`] is empty.
    pub(crate) fn into_warnings(self) -> Vec<String> {
        self.filter_map(|item| match item {
            WalkItem::Warning(w) => Some(w),
            _ => None,
        })
        .collect()
    }

    /// Opens the next file, queueing what it starts with; false at the end.
    fn open_next(&mut self) -> bool {
        let Some(file) = self.files.next() else {
            return false;
        };
        let name = file.name();
        match file.open() {
            Ok(reader) => {
                let header = reader.header().clone();
                let item = file_item(self.last_header.as_ref(), header.clone());
                self.continuity.start_file(
                    &header,
                    &name,
                    matches!(item, WalkItem::NewRecording(_)),
                );
                self.pending.push_back(item);
                self.last_header = Some(header);
                self.current = Some((reader, name));
            }
            Err(e) => self
                .pending
                .push_back(WalkItem::Warning(format!("{e:#}: skipped this file"))),
        }
        true
    }
}

impl Iterator for RecordingWalk {
    type Item = WalkItem;

    fn next(&mut self) -> Option<WalkItem> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            if let Some((reader, name)) = &mut self.current {
                match reader.next() {
                    Some(Ok(snapshot)) => {
                        self.continuity.interval(snapshot.seq);
                        return Some(WalkItem::Interval {
                            snapshot: Box::new(snapshot),
                            file: name.clone(),
                        });
                    }
                    Some(Err(problem)) => return Some(WalkItem::Warning(problem.to_string())),
                    None => {
                        let closing = reader.closing_warnings();
                        self.pending
                            .extend(closing.into_iter().map(WalkItem::Warning));
                        self.current = None;
                        continue;
                    }
                }
            }
            if self.open_next() {
                continue;
            }
            if !self.finished {
                self.finished = true;
                let rest = std::mem::take(&mut self.continuity).finish();
                self.pending.extend(rest.into_iter().map(WalkItem::Warning));
                continue;
            }
            return None;
        }
    }
}
