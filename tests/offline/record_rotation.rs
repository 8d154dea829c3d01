//! Rotation by size and by age: FILE is live, FILE.1 the newest closed
//! segment, FILE.<keep> the oldest; each segment is a whole trace.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::record::{self, segments::segment_path, RotateOptions, TraceWriter};

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn size_rotation(name: &str) {
    let dir = TempDir::new("rotate");
    let path = dir.join(name);
    let max_bytes = if name.ends_with(".zst") {
        2_000
    } else {
        20_000
    };
    let opts = RotateOptions {
        max_bytes: Some(max_bytes),
        max_age: None,
        keep: 2,
    };
    let mut w = TraceWriter::create(&path, header(), opts).unwrap();
    let written: Vec<_> = (0..120).map(|s| snapshot(s, 3)).collect();
    for s in &written {
        w.write(s).unwrap();
    }
    let last_segment = w.segment_index();
    assert!(last_segment >= 3, "only {last_segment} rotations");
    w.finish().unwrap();
    assert_eq!(
        files_in(&dir.0),
        vec![name.to_string(), format!("{name}.1"), format!("{name}.2")]
    );

    // Each file is a whole trace; FILE.2 is the oldest kept.
    let paths: Vec<PathBuf> = (0..3).map(|n| segment_path(&path, n)).collect();
    let mut segments = Vec::new();
    for (n, p) in paths.iter().enumerate() {
        let mut r = record::open(p).unwrap();
        assert_eq!(r.header().segment, last_segment - n as u32);
        assert_eq!(r.header().start_unix_ms, header().start_unix_ms);
        let snaps: Vec<_> = r.by_ref().map(|x| x.unwrap()).collect();
        let end = r.summary().end.expect("every segment is closed");
        assert_eq!(end.reason, if n == 0 { "stopped" } else { "rotated" });
        assert_eq!(end.intervals, snaps.len() as u64);
        if n > 0 {
            // Closed when it reached max_bytes, not long after.
            let len = std::fs::metadata(p).unwrap().len();
            assert!(
                len >= max_bytes && len < max_bytes * 2,
                "{p:?}: {len} bytes"
            );
        }
        segments.push(snaps);
    }

    // read_all puts the segments in order, whatever order they are given.
    let (headers, snaps, warnings) = record::read_all(&paths).unwrap();
    let segs: Vec<u32> = headers.iter().map(|h| h.segment).collect();
    assert_eq!(segs, vec![last_segment - 2, last_segment - 1, last_segment]);
    let first = snaps[0].seq as usize;
    assert!(first > 0);
    assert_eq!(snaps, written[first..]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!(
            "segments 0 to {} are not among the files given",
            last_segment - 3
        )),
        "{warnings:?}"
    );

    // A segment left out in the middle is named.
    let (_, _, warnings) = record::read_all(&[paths[0].clone(), paths[2].clone()]).unwrap();
    assert!(
        warnings.iter().any(|w| w.contains(&format!(
            "segments {} to {} of the recording are missing",
            last_segment - 1,
            last_segment - 1
        ))),
        "{warnings:?}"
    );
}

#[test]
fn plain_segments_rotate_by_size() {
    size_rotation("trace.jsonl");
}

#[test]
fn zstd_segments_rotate_by_size() {
    size_rotation("trace.jsonl.zst");
}

#[test]
fn segments_rotate_by_age() {
    let dir = TempDir::new("age");
    let path = dir.join("t.jsonl");
    let opts = RotateOptions {
        max_bytes: None,
        max_age: Some(Duration::from_millis(150)),
        keep: 10,
    };
    let mut w = TraceWriter::create(&path, header(), opts).unwrap();
    for s in 0..8 {
        w.write(&snapshot(s, 1)).unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }
    w.finish().unwrap();
    // 8 writes at least 60 ms apart, 150 ms segments: at most 3 intervals
    // per segment (fewer on a loaded machine), never all in one.
    let names = files_in(&dir.0);
    assert!((3..=8).contains(&names.len()), "{names:?}");
    let paths: Vec<PathBuf> = (0..names.len()).map(|n| segment_path(&path, n)).collect();
    for p in &paths {
        let n = record::open(p).unwrap().count();
        assert!((1..=3).contains(&n), "{p:?} holds {n}");
    }
    let (_, snaps, warnings) = record::read_all(&paths).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        snaps.iter().map(|s| s.seq).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
}

#[test]
fn keep_zero_keeps_only_the_live_segment() {
    let dir = TempDir::new("keep0");
    let path = dir.join("t.jsonl");
    let opts = RotateOptions {
        max_bytes: Some(1),
        max_age: None,
        keep: 0,
    };
    let mut w = TraceWriter::create(&path, header(), opts).unwrap();
    for s in 0..5 {
        w.write(&snapshot(s, 1)).unwrap();
    }
    w.finish().unwrap();
    assert_eq!(files_in(&dir.0), vec!["t.jsonl"]);
    let mut r = record::open(&path).unwrap();
    assert_eq!(r.header().segment, 4);
    let seqs: Vec<u64> = r.by_ref().map(|s| s.unwrap().seq).collect();
    assert_eq!(seqs, vec![4]);
}

/// A segment an earlier recording left as `FILE.1`: rotating into the same
/// name would rename it into this recording or delete it. Refused before
/// anything is written, and the old segment is untouched; without rotation
/// it is no concern.
#[test]
fn rotation_never_touches_an_earlier_recordings_segments() {
    let dir = TempDir::new("foreign");
    let path = dir.join("t.jsonl");
    let old = segment_path(&path, 1);
    std::fs::write(&old, "an earlier recording's segment\n").unwrap();
    let opts = RotateOptions {
        max_bytes: Some(1),
        max_age: None,
        keep: 3,
    };
    let err = TraceWriter::create(&path, header(), opts)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("a segment of an earlier recording"), "{err}");
    assert_eq!(files_in(&dir.0), vec!["t.jsonl.1"]);
    assert_eq!(
        std::fs::read_to_string(&old).unwrap(),
        "an earlier recording's segment\n"
    );
    // Without rotation FILE.1 is never renamed: recording is allowed.
    let mut w = TraceWriter::create(&path, header(), RotateOptions::default()).unwrap();
    w.write(&snapshot(0, 1)).unwrap();
    w.finish().unwrap();
    assert_eq!(files_in(&dir.0), vec!["t.jsonl", "t.jsonl.1"]);
    // Created 0640 whatever the umask allows.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
}
