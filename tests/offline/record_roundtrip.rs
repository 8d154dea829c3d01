//! Snapshots written and read back are equal, plain and zstd.

use std::path::Path;

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::record::{self, RotateOptions, TraceRecord, TraceWriter};

fn round_trip(file_name: &str) -> std::path::PathBuf {
    let dir = TempDir::new("roundtrip");
    let path = dir.join(file_name);
    let written: Vec<_> = (0..40).map(|s| snapshot(s, (s % 5) as usize * 3)).collect();
    let mut w = TraceWriter::create(&path, header(), RotateOptions::default()).unwrap();
    for s in &written {
        w.write(s).unwrap();
    }
    assert_eq!(w.intervals(), 40);
    w.finish().unwrap();

    let mut r = record::open(&path).unwrap();
    assert_eq!(r.header(), &header());
    let read: Vec<_> = r.by_ref().map(|x| x.unwrap()).collect();
    assert_eq!(read, written);
    let summary = r.summary();
    assert_eq!(summary.intervals, 40);
    assert_eq!(summary.last_seq, Some(39));
    assert_eq!(summary.end.as_ref().unwrap().reason, "stopped");
    assert_eq!(summary.end.unwrap().intervals, 40);
    assert!(!summary.tail_cut);
    assert!(
        r.closing_warnings().is_empty(),
        "{:?}",
        r.closing_warnings()
    );

    let (headers, snaps, warnings) = record::read_all(std::slice::from_ref(&path)).unwrap();
    assert_eq!(headers, vec![header()]);
    assert_eq!(snaps, written);
    assert!(warnings.is_empty(), "{warnings:?}");

    let keep = std::env::temp_dir().join(format!("ts-rt-{}-{file_name}", std::process::id()));
    std::fs::copy(&path, &keep).unwrap();
    keep
}

#[test]
fn plain_round_trip() {
    let copy = round_trip("trace.jsonl");
    let text = decoded_text(&copy);
    let bytes = std::fs::read(&copy).unwrap();
    let _ = std::fs::remove_file(&copy);
    assert!(bytes.starts_with(b"{\"format\":\"throttlescope-trace\""));
    // One header, 40 snapshot lines, one end line; each line is JSON.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 42);
    assert!(lines[1].starts_with("{\"type\":\"snapshot\",\"seq\":0,"));
    assert!(lines[41].starts_with("{\"type\":\"end\","));
    let rec: TraceRecord = serde_json::from_str(lines[5]).unwrap();
    assert_eq!(rec, TraceRecord::Snapshot(Box::new(snapshot(4, 12))));
}

#[test]
fn zstd_round_trip_and_detection_by_content() {
    let copy = round_trip("trace.jsonl.zst");
    let bytes = std::fs::read(&copy).unwrap();
    assert_eq!(&bytes[..4], &[0x28, 0xb5, 0x2f, 0xfd], "zstd magic");
    let plain_len = decoded_text(&copy).len();
    assert!(
        bytes.len() * 4 < plain_len,
        "compressed {} of {plain_len} bytes",
        bytes.len()
    );
    // Renamed without the suffix, it is still read as zstd.
    let renamed = copy.with_extension("renamed");
    std::fs::rename(&copy, &renamed).unwrap();
    let r = record::open(&renamed).unwrap();
    let n = r.filter(|x| x.is_ok()).count();
    let _ = std::fs::remove_file(&renamed);
    assert_eq!(n, 40);
}

#[test]
fn an_existing_file_is_never_overwritten() {
    let dir = TempDir::new("exists");
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, b"precious\n").unwrap();
    let err = TraceWriter::create(&path, header(), RotateOptions::default())
        .err()
        .expect("create must refuse");
    let msg = format!("{err:#}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("already exists"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious\n");
}

#[test]
fn an_unwritable_path_is_a_clear_error() {
    let dir = TempDir::new("unwritable");
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let path = not_a_dir.join("trace.jsonl");
    let err = TraceWriter::create(&path, header(), RotateOptions::default())
        .err()
        .expect("create must fail");
    let msg = format!("{err:#}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("cannot create"), "{msg}");
}

#[test]
fn a_dropped_writer_still_closes_its_segment() {
    let dir = TempDir::new("drop");
    let path = dir.join("t.jsonl.zst");
    {
        let mut w = TraceWriter::create(&path, header(), RotateOptions::default()).unwrap();
        w.write(&snapshot(0, 2)).unwrap();
    }
    let mut r = record::open(&path).unwrap();
    assert_eq!(r.by_ref().count(), 1);
    assert_eq!(r.summary().end.unwrap().reason, "stopped");
}

/// All lines of a trace's decoded text (for checks on the raw format).
fn decoded_text(path: &Path) -> String {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        String::from_utf8(zstd::decode_all(&raw[..]).unwrap()).unwrap()
    } else {
        String::from_utf8(raw).unwrap()
    }
}
