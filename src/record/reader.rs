//! Reads recordings back, one interval at a time (memory bounded by the
//! longest line, never by the file), plain or zstd, telling what it skipped.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Cursor, Read};
use std::path::Path;

use anyhow::{anyhow, bail, Result};

use super::format::{parse_header, EndRecord, TraceHeader, TraceRecord};
use super::lines::{read_line, Line, MAX_LINE_BYTES};
use crate::model::snapshot::Snapshot;

/// The four bytes every zstd frame starts with (little-endian 0xFD2FB528).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Compressed bytes handed to the decoder per call.
const ZSTD_INPUT_CHUNK: usize = 512;

/// Something the reader stepped over; reading goes on after it unless it
/// is a cut tail (which is always last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadProblem {
    pub file: String,
    /// 1-based line of the decoded text.
    pub line: u64,
    pub kind: ProblemKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// Not a record: skipped.
    BadLine(String),
    /// Longer than [`MAX_LINE_BYTES`]: skipped.
    LineTooLong,
    /// The data stops inside a record (killed writer, disk full, a copy
    /// cut short) or the compressed stream breaks: nothing after `line`.
    TailCut {
        last_seq: Option<u64>,
        cause: String,
    },
}

impl fmt::Display for ReadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ProblemKind::BadLine(why) => {
                write!(
                    f,
                    "{}:{}: skipped a line that is not a record: {why}",
                    self.file, self.line
                )
            }
            ProblemKind::LineTooLong => write!(
                f,
                "{}:{}: skipped a line longer than {} MiB",
                self.file,
                self.line,
                MAX_LINE_BYTES >> 20
            ),
            ProblemKind::TailCut { last_seq, cause } => {
                write!(
                    f,
                    "{}: the tail was cut after line {} (",
                    self.file, self.line
                )?;
                match last_seq {
                    Some(s) => write!(f, "last complete interval seq {s}")?,
                    None => write!(f, "no complete interval")?,
                }
                write!(f, "): {cause}")
            }
        }
    }
}

impl std::error::Error for ReadProblem {}

/// A streaming reader of one trace file (one segment).
pub struct TraceReader {
    name: String,
    input: Box<dyn BufRead>,
    header: TraceHeader,
    buf: Vec<u8>,
    /// Lines consumed so far (the header is line 1).
    line_no: u64,
    /// Line of the last whole record: where a cut tail starts.
    last_good_line: u64,
    last_seq: Option<u64>,
    intervals: u64,
    skipped_lines: u64,
    unknown_records: u64,
    /// Headers met after line 1 (segments concatenated with `cat`).
    extra_headers: u64,
    end: Option<EndRecord>,
    tail_cut: bool,
    done: bool,
}

/// What a finished read found besides the intervals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadSummary {
    pub intervals: u64,
    pub last_seq: Option<u64>,
    pub skipped_lines: u64,
    pub unknown_records: u64,
    pub end: Option<EndRecord>,
    pub tail_cut: bool,
}

/// Opens a trace file, plain or zstd (told by its first bytes, whatever
/// its name), and reads its header.
pub fn open(path: &Path) -> Result<TraceReader> {
    let file = File::open(path).map_err(|e| anyhow!("{}: cannot open: {e}", path.display()))?;
    TraceReader::from_reader(path.display().to_string(), file)
}

impl TraceReader {
    /// Reads a trace from any byte source; `name` is used in messages.
    pub fn from_reader(name: impl Into<String>, mut source: impl Read + 'static) -> Result<Self> {
        let name = name.into();
        let mut magic = [0u8; 4];
        let got = read_prefix(&mut source, &mut magic)
            .map_err(|e| anyhow!("{name}: cannot read: {e}"))?;
        if got == 0 {
            bail!("{name}: empty file, not a throttlescope trace");
        }
        let replayed = Cursor::new(magic[..got].to_vec()).chain(source);
        let input: Box<dyn BufRead> = if magic[..got] == ZSTD_MAGIC {
            // Small input chunks: a corrupt block loses only the output of
            // its own chunk (zstd drops what one call decoded when it fails).
            let chunks = BufReader::with_capacity(
                ZSTD_INPUT_CHUNK,
                BufReader::with_capacity(64 * 1024, replayed),
            );
            let decoder = zstd::stream::read::Decoder::with_buffer(chunks)
                .map_err(|e| anyhow!("{name}: cannot start zstd decoding: {e}"))?;
            Box::new(BufReader::with_capacity(64 * 1024, decoder))
        } else {
            Box::new(BufReader::with_capacity(64 * 1024, replayed))
        };
        Self::with_header(name, input)
    }

    fn with_header(name: String, mut input: Box<dyn BufRead>) -> Result<Self> {
        let mut buf = Vec::new();
        match read_line(&mut *input, &mut buf, MAX_LINE_BYTES) {
            Err(e) if buf.is_empty() => bail!("{name}: cannot read the header: {e}"),
            Err(e) => bail!("{name}:1: the header line is cut short: {e}"),
            Ok(Line::Eof) => bail!("{name}: empty file, not a throttlescope trace"),
            Ok(Line::TooLong { .. }) => {
                bail!(
                    "{name}:1: not a throttlescope trace (first line longer than {} MiB)",
                    MAX_LINE_BYTES >> 20
                )
            }
            Ok(Line::Text { .. }) => {}
        }
        let header = parse_header(&buf).map_err(|p| anyhow!("{name}:1: {p}"))?;
        Ok(TraceReader {
            name,
            input,
            header,
            buf,
            line_no: 1,
            last_good_line: 1,
            last_seq: None,
            intervals: 0,
            skipped_lines: 0,
            unknown_records: 0,
            extra_headers: 0,
            end: None,
            tail_cut: false,
            done: false,
        })
    }

    pub fn header(&self) -> &TraceHeader {
        &self.header
    }

    /// Counts so far; complete once the iterator has returned `None`.
    pub fn summary(&self) -> ReadSummary {
        ReadSummary {
            intervals: self.intervals,
            last_seq: self.last_seq,
            skipped_lines: self.skipped_lines,
            unknown_records: self.unknown_records,
            end: self.end.clone(),
            tail_cut: self.tail_cut,
        }
    }

    /// Warnings about the file as a whole, after the iteration: records of
    /// unknown type skipped, and a missing end record.
    pub fn closing_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.unknown_records > 0 {
            out.push(format!(
                "{}: skipped {} records of a type this throttlescope does not know (written by a newer {}.x)",
                self.name, self.unknown_records, self.header.version.major
            ));
        }
        if self.extra_headers > 0 {
            out.push(format!(
                "{}: holds {} more segment headers after line 1 (concatenated segments?)",
                self.name, self.extra_headers
            ));
        }
        if self.end.is_none() && !self.tail_cut {
            let last = match self.last_seq {
                Some(s) => format!("last interval seq {s}"),
                None => "no interval".to_string(),
            };
            out.push(format!(
                "{}: no end record after line {} ({last}): the recorder did not close this segment (killed, crashed, out of space, or still recording)",
                self.name, self.last_good_line
            ));
        }
        out
    }

    fn cut(&mut self, cause: String) -> ReadProblem {
        self.done = true;
        self.tail_cut = true;
        ReadProblem {
            file: self.name.clone(),
            line: self.last_good_line,
            kind: ProblemKind::TailCut {
                last_seq: self.last_seq,
                cause,
            },
        }
    }

    fn problem(&mut self, kind: ProblemKind) -> ReadProblem {
        self.skipped_lines += 1;
        ReadProblem {
            file: self.name.clone(),
            line: self.line_no,
            kind,
        }
    }
}

impl Iterator for TraceReader {
    type Item = std::result::Result<Snapshot, ReadProblem>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let terminated = match read_line(&mut *self.input, &mut self.buf, MAX_LINE_BYTES) {
                Ok(Line::Eof) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    let cause = if self.buf.is_empty() {
                        format!("the data ends in a broken or incomplete block ({e})")
                    } else {
                        format!("the last line stops mid-record ({e})")
                    };
                    return Some(Err(self.cut(cause)));
                }
                Ok(Line::TooLong { terminated }) => {
                    self.line_no += 1;
                    if !terminated {
                        return Some(Err(self.cut("the last line stops mid-record".into())));
                    }
                    return Some(Err(self.problem(ProblemKind::LineTooLong)));
                }
                Ok(Line::Text { terminated }) => terminated,
            };
            self.line_no += 1;
            match serde_json::from_slice::<TraceRecord>(&self.buf) {
                Ok(record) => {
                    self.last_good_line = self.line_no;
                    match record {
                        TraceRecord::Snapshot(snap) => {
                            self.intervals += 1;
                            self.last_seq = Some(snap.seq);
                            return Some(Ok(*snap));
                        }
                        TraceRecord::End(end) => self.end = Some(end),
                        TraceRecord::Unknown => self.unknown_records += 1,
                    }
                }
                // A line that stops without a newline was cut while written.
                Err(_) if !terminated => {
                    return Some(Err(self.cut("the last line stops mid-record".into())))
                }
                Err(e) => {
                    if parse_header(&self.buf).is_ok() {
                        self.extra_headers += 1;
                        self.last_good_line = self.line_no;
                        continue;
                    }
                    return Some(Err(self.problem(ProblemKind::BadLine(e.to_string()))));
                }
            }
        }
        None
    }
}

/// Reads up to `buf.len()` bytes, fewer only at the end of the data.
fn read_prefix(source: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match source.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
