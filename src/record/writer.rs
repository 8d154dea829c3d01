//! Writes a recording: one header line, then one line per interval, each
//! interval in a single write so a kill leaves whole intervals behind.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::shared::clock::now_unix_ms;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use super::format::{EndReason, EndRecord, TraceHeader};
use super::lines::MAX_LINE_BYTES;
use super::segments;
use crate::model::flow_json;
use crate::model::fold::encode_within;
use crate::model::snapshot::Snapshot;

/// zstd level: 3 is zstd's default, fast enough to run every interval.
const ZSTD_LEVEL: i32 = 3;

/// When to start a new segment file, and how many closed ones to keep.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RotateOptions {
    /// Start a new segment once the current one holds this many bytes (as
    /// stored, so compressed for `.zst`). Checked before each interval, so a
    /// segment can exceed it by one interval.
    pub max_bytes: Option<u64>,
    /// Start a new segment once the current one is this old.
    pub max_age: Option<Duration>,
    /// Closed segments kept as `FILE.1` .. `FILE.<keep>`; older ones are
    /// deleted. 0 keeps only the live `FILE`.
    pub keep: usize,
}

/// A recording is never overwritten by accident: an existing `path` is an
/// error. (`record` checks before it starts observing, the writer again
/// when it creates the file.)
pub(crate) fn refuse_existing(path: &Path, opts: &RotateOptions) -> Result<()> {
    if path.exists() {
        bail!(
            "{}: already exists; refusing to overwrite a recording (remove it, choose another \
             name, or put {{start}} in the name)",
            path.display()
        );
    }
    // Rotation renames FILE.1 .. FILE.<keep> and deletes the last: segments
    // an earlier recording left under those names would be renamed into
    // this one or deleted without a word.
    if opts.rotates() {
        if let Some(old) = (1..=opts.keep)
            .map(|n| segments::segment_path(path, n))
            .find(|p| p.exists())
        {
            bail!(
                "{}: a segment of an earlier recording; rotating {} would rename or delete \
                 it (move it away, choose another name, or put {{start}} in the name)",
                old.display(),
                path.display()
            );
        }
    }
    Ok(())
}

impl RotateOptions {
    /// Segments are closed and renamed at all.
    pub(crate) fn rotates(&self) -> bool {
        self.max_bytes.is_some() || self.max_age.is_some()
    }
}

/// Records snapshots to `FILE` (`.zst` suffix: zstd-compressed).
pub struct TraceWriter {
    base: PathBuf,
    header: TraceHeader,
    opts: RotateOptions,
    compress: bool,
    segment: Option<Segment>,
    total_intervals: u64,
    last_seq: Option<u64>,
    /// After a failed write nothing more is written: the file keeps what
    /// was whole, and every later call repeats why.
    failed: Option<String>,
    line: Vec<u8>,
}

/// The open live segment.
struct Segment {
    file: File,
    /// One zstd frame per segment; flushed at the end of every interval so
    /// everything up to the last whole interval decodes after a kill.
    encoder: Option<zstd::stream::write::Encoder<'static, Vec<u8>>>,
    /// Bytes known to be in the file whole: where to cut a failed write.
    bytes: u64,
    intervals: u64,
    opened: Instant,
}

/// A record line borrowing its payload (writing never copies a snapshot);
/// the same JSON as [`super::format::TraceRecord`].
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RecordRef<'a> {
    Snapshot(&'a Snapshot),
    End(&'a EndRecord),
}

impl TraceWriter {
    /// Creates `path` and writes its header. Refuses to replace an existing
    /// file: a recording is never overwritten by accident.
    pub fn create(path: &Path, header: TraceHeader, opts: RotateOptions) -> Result<Self> {
        refuse_existing(path, &opts)?;
        let compress = path.extension().is_some_and(|e| e == "zst");
        let mut w = TraceWriter {
            base: path.to_path_buf(),
            header,
            opts,
            compress,
            segment: None,
            total_intervals: 0,
            last_seq: None,
            failed: None,
            line: Vec::with_capacity(64 * 1024),
        };
        w.segment = Some(w.open_segment()?);
        Ok(w)
    }

    /// The live segment's path (what the user asked for).
    pub(crate) fn path(&self) -> &Path {
        &self.base
    }

    /// Snapshots written since `create`, over all segments.
    pub fn intervals(&self) -> u64 {
        self.total_intervals
    }

    /// Rotation index of the live segment.
    pub fn segment_index(&self) -> u32 {
        self.header.segment
    }

    /// Appends one interval (rotating first when the segment is full or old).
    /// On error the files hold every interval written before, whole.
    pub fn write(&mut self, snap: &Snapshot) -> Result<()> {
        if let Some(why) = &self.failed {
            bail!("{}: recording stopped earlier: {why}", self.base.display());
        }
        if self.rotation_due() {
            if let Err(e) = self.rotate() {
                self.failed = Some(format!("{e:#}"));
                return Err(e);
            }
        }
        // One byte under the readers' limit is left for the newline.
        let capacity = self.line.capacity();
        let (line, _) = encode_within(snap, MAX_LINE_BYTES - 1, |s| {
            flow_json::to_json_vec(&RecordRef::Snapshot(s), s, capacity)
        })?;
        self.line = line;
        self.line.push(b'\n');
        let seq = snap.seq;
        let seg = self
            .segment
            .as_mut()
            .expect("a live segment while not failed");
        match append(seg, &self.line) {
            Ok(()) => {
                seg.intervals += 1;
                self.total_intervals += 1;
                self.last_seq = Some(seq);
                Ok(())
            }
            Err(e) => {
                let intact = match self.last_seq {
                    Some(s) => format!(
                        "the {} intervals up to seq {s} are intact",
                        self.total_intervals
                    ),
                    None => "no interval had been written".to_string(),
                };
                let msg = format!("writing interval seq {seq} failed: {e}; {intact}");
                self.failed = Some(msg.clone());
                Err(anyhow!("{}: {msg}", self.base.display()))
            }
        }
    }

    /// Closes the live segment with an end record and syncs it to disk.
    pub fn finish(self) -> Result<()> {
        self.finish_with(EndReason::Stopped)
    }

    /// [`Self::finish`], saying why the recording stopped.
    pub(crate) fn finish_with(mut self, reason: EndReason) -> Result<()> {
        self.close_segment(reason)
    }

    fn rotation_due(&self) -> bool {
        let Some(seg) = &self.segment else {
            return false;
        };
        seg.intervals > 0
            && (self.opts.max_bytes.is_some_and(|m| seg.bytes >= m)
                || self.opts.max_age.is_some_and(|a| seg.opened.elapsed() >= a))
    }

    fn rotate(&mut self) -> Result<()> {
        self.close_segment(EndReason::Rotated)?;
        segments::shift(&self.base, self.opts.keep)
            .map_err(|e| anyhow!("{}: rotating: {e}", self.base.display()))?;
        self.header.segment += 1;
        self.segment = Some(self.open_segment()?);
        Ok(())
    }

    /// Writes the end record (and the zstd frame's end), then syncs.
    fn close_segment(&mut self, reason: EndReason) -> Result<()> {
        let Some(mut seg) = self.segment.take() else {
            return Ok(());
        };
        if self.failed.is_some() {
            return Ok(());
        }
        let end = EndRecord {
            unix_ms: now_unix_ms(),
            intervals: seg.intervals,
            reason: reason.as_str().to_string(),
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &RecordRef::End(&end))?;
        self.line.push(b'\n');
        let closed = append(&mut seg, &self.line)
            .and_then(|()| finish_frame(&mut seg))
            .and_then(|()| seg.file.sync_all());
        closed.map_err(|e| {
            let msg = format!("closing the segment failed: {e}");
            self.failed = Some(msg.clone());
            anyhow!("{}: {msg}", self.base.display())
        })
    }

    /// Creates the live file and writes the header; a file whose header
    /// could not be written whole is removed (it holds nothing).
    fn open_segment(&mut self) -> Result<Segment> {
        let path = &self.base;
        // 0640: a recording names every peer and process of the host; the
        // umask may take more away, never add.
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o640)
            .open(path)
            .map_err(|e| anyhow!("{}: cannot create: {e}", path.display()))?;
        let encoder = if self.compress {
            Some(zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)?)
        } else {
            None
        };
        let mut seg = Segment {
            file,
            encoder,
            bytes: 0,
            intervals: 0,
            opened: Instant::now(),
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &self.header)?;
        self.line.push(b'\n');
        if let Err(e) = append(&mut seg, &self.line) {
            drop(seg);
            let _ = std::fs::remove_file(path);
            return Err(anyhow!(
                "{}: writing the header failed: {e}",
                path.display()
            ));
        }
        Ok(seg)
    }
}

impl Drop for TraceWriter {
    /// A writer dropped without `finish` (an error path of the caller)
    /// still closes its segment properly when it can.
    fn drop(&mut self) {
        let _ = self.close_segment(EndReason::Stopped);
    }
}

/// Encodes `line` and stores it with one write. On failure the file is cut
/// back to its last whole record, so a reader never meets a partial one.
fn append(seg: &mut Segment, line: &[u8]) -> std::io::Result<()> {
    let stored: Vec<u8>;
    let bytes: &[u8] = match &mut seg.encoder {
        None => line,
        Some(enc) => {
            enc.write_all(line)?;
            enc.flush()?;
            stored = std::mem::take(enc.get_mut());
            &stored
        }
    };
    store(seg, bytes)
}

fn finish_frame(seg: &mut Segment) -> std::io::Result<()> {
    let Some(enc) = &mut seg.encoder else {
        return Ok(());
    };
    enc.do_finish()?;
    let tail = std::mem::take(enc.get_mut());
    store(seg, &tail)
}

fn store(seg: &mut Segment, bytes: &[u8]) -> std::io::Result<()> {
    match seg.file.write_all(bytes).and_then(|()| seg.file.flush()) {
        Ok(()) => {
            seg.bytes += bytes.len() as u64;
            Ok(())
        }
        Err(e) => {
            let _ = seg.file.set_len(seg.bytes);
            Err(e)
        }
    }
}
