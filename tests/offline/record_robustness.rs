//! The recording commands under abuse, through the real binary: a 1 GiB
//! trace read in bounded memory, `record` killed with SIGKILL while real
//! traffic flows, `record` refused or stopped by its output (existing file,
//! read-only directory, full disk), `watch --record` recording what it
//! shows, and a rotated recording replayed from shuffled file names.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/record_robustness.rs.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::binary;
use crate::support::record::{header, snapshot};
use crate::support::record_robustness::{replay_json, report_json, run_measured, warnings};
use crate::support::TempDir;
use throttlescope::record::{self, EndRecord, RotateOptions, TraceRecord, TraceWriter};

/// Ceiling on the peak RSS of a command reading a trace of any size.
const READ_RSS_LIMIT_KB: i64 = 300 * 1024;

// ---------------------------------------------------------------- (a) 1 GiB

#[test]
fn a_1_gib_trace_is_read_in_bounded_memory() {
    // The readers' peak RSS would include this program's other tests.
    if !crate::alone::in_fresh_process("record_robustness::a_1_gib_trace_is_read_in_bounded_memory")
    {
        return;
    }
    const TARGET_BYTES: u64 = 1 << 30;
    const GARBAGE_EVERY: u64 = 300;
    let dir = TempDir::new("1gib");
    let path = dir.join("big.jsonl");

    // A real snapshot line (200 flows, ~260 KB); each copy gets its own
    // seq and times (the fields before `interval_ns`).
    let line = serde_json::to_string(&TraceRecord::Snapshot(Box::new(snapshot(0, 200)))).unwrap();
    let (_, rest) = line
        .split_once(",\"interval_ns\":")
        .expect("a snapshot line holds interval_ns");
    let rest = format!(",\"interval_ns\":{rest}");
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    writeln!(f, "{}", serde_json::to_string(&header()).unwrap()).unwrap();
    let mut written = 0u64;
    let mut line_no = 1u64;
    let mut intervals = 0u64;
    let mut bad_lines = Vec::new();
    let mut long_line = None;
    while written < TARGET_BYTES {
        line_no += 1;
        let bytes = if line_no % GARBAGE_EVERY == 0 {
            bad_lines.push(line_no);
            let g = format!("garbage {line_no}: {{\"type\": \"snapshot\", \"seq\": oops\n");
            f.write_all(g.as_bytes()).unwrap();
            g.len() as u64
        } else if line_no == 1000 {
            // One line over the reader's 64 MiB ceiling: skipped, never held.
            long_line = Some(line_no);
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..65 {
                f.write_all(&chunk).unwrap();
            }
            f.write_all(b"\n").unwrap();
            (65 << 20) + 1
        } else {
            let (mono, unix) = (
                10_000_000_000 + intervals * 1_000_000_000,
                1_763_000_000_000 + intervals * 1000,
            );
            let l = format!(
                "{{\"type\":\"snapshot\",\"seq\":{intervals},\"mono_ns\":{mono},\"unix_ms\":{unix}{rest}\n"
            );
            f.write_all(l.as_bytes()).unwrap();
            intervals += 1;
            l.len() as u64
        };
        written += bytes;
    }
    let end = EndRecord {
        unix_ms: 1_763_000_000_000,
        intervals,
        reason: "stopped".into(),
    };
    writeln!(
        f,
        "{}",
        serde_json::to_string(&TraceRecord::End(end)).unwrap()
    )
    .unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= TARGET_BYTES);
    let long_line = long_line.unwrap();

    let r = replay_json(std::slice::from_ref(&path), Duration::from_secs(900));
    eprintln!(
        "replay of {size} bytes ({intervals} intervals, {} bad lines): exit {:?}, peak RSS {} MiB",
        bad_lines.len() + 1,
        r.code,
        r.max_rss_kb / 1024
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout_lines, intervals);
    assert_eq!(r.seqs, (0..intervals).collect::<Vec<_>>());
    let w = warnings(&r.stderr);
    let p = path.display().to_string();
    let mut expected: Vec<String> = bad_lines
        .iter()
        .map(|n| format!("{p}:{n}: skipped a line that is not a record"))
        .collect();
    expected.insert(
        bad_lines.partition_point(|&n| n < long_line),
        format!("{p}:{long_line}: skipped a line longer than 64 MiB"),
    );
    assert_eq!(w.len(), expected.len(), "{w:?}");
    for (got, want) in w.iter().zip(&expected) {
        assert!(got.starts_with(want.as_str()), "{got} / {want}");
    }
    assert!(
        r.max_rss_kb < READ_RSS_LIMIT_KB,
        "replay peak RSS {} KiB over {} KiB",
        r.max_rss_kb,
        READ_RSS_LIMIT_KB
    );

    let r = report_json(&path, Duration::from_secs(900));
    eprintln!(
        "report --json: exit {:?}, peak RSS {} MiB",
        r.finished.code,
        r.finished.max_rss_kb / 1024
    );
    assert_eq!(r.finished.code, Some(0), "{}", r.finished.stderr);
    assert_eq!(r.intervals, intervals);
    assert_eq!(r.warnings.len(), expected.len(), "{:?}", r.warnings);
    for (got, want) in r.warnings.iter().zip(&expected) {
        assert!(got.starts_with(want.as_str()), "{got} / {want}");
    }
    assert_eq!(
        warnings(&r.finished.stderr),
        r.warnings,
        "{}",
        r.finished.stderr
    );
    assert!(
        r.finished.max_rss_kb < READ_RSS_LIMIT_KB,
        "report peak RSS {} KiB over {} KiB",
        r.finished.max_rss_kb,
        READ_RSS_LIMIT_KB
    );
}

// ------------------------------------------------- (c) output errors

#[test]
fn record_refuses_an_existing_file() {
    let dir = TempDir::new("exists");
    let path = dir.join("precious.jsonl");
    std::fs::write(&path, b"not yours to overwrite\n").unwrap();
    let r = run_measured(
        Command::new(binary())
            .args(["record", "-o"])
            .arg(&path)
            .args(["--duration", "2s"]),
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{}: already exists", path.display())),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"not yours to overwrite\n".to_vec()
    );
}

// --------------------------------------- (e) rotated, shuffled replay

#[test]
fn replay_puts_shuffled_rotated_segments_in_order() {
    let dir = TempDir::new("rotshuf");
    let base = dir.join("rot.jsonl");
    let opts = RotateOptions {
        max_bytes: Some(40_000),
        max_age: None,
        keep: 20,
    };
    let mut w = TraceWriter::create(&base, header(), opts).unwrap();
    for seq in 0..60 {
        w.write(&snapshot(seq, 6)).unwrap();
    }
    let segments = w.segment_index() as usize + 1;
    w.finish().unwrap();
    assert!(segments >= 4, "only {segments} segments");
    let mut files: Vec<PathBuf> = (0..segments)
        .map(|n| record::segments::segment_path(&base, n))
        .collect();
    // Newest first as a listing gives them, then swapped around.
    files.rotate_left(segments / 2);
    files.swap(0, segments - 1);
    eprintln!("{files:?}");
    let r = replay_json(&files, Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.seqs, (0..60).collect::<Vec<_>>());
    assert!(warnings(&r.stderr).is_empty(), "{}", r.stderr);
}
