//! A recorder killed with SIGKILL, and a disk that fills up: every whole
//! interval stays readable and the reader says where the data stops.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/record_crash.rs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::record::{self, RotateOptions, TraceWriter};

/// Set in the child process: where `writer_child` records.
const CHILD_PATH_ENV: &str = "THROTTLESCOPE_TEST_RECORD_CHILD_PATH";
const CHILD_FLOWS: usize = 40;

/// Not a test on its own: the recorder process that the kill tests start
/// (this same test binary, with the env var set) and kill. It reports each
/// interval on stdout once `write` has returned.
#[test]
#[ignore = "helper process of the kill -9 tests"]
fn writer_child() {
    let Ok(path) = std::env::var(CHILD_PATH_ENV) else {
        return;
    };
    let mut w = TraceWriter::create(Path::new(&path), header(), RotateOptions::default()).unwrap();
    // Bounded: stops by itself if nobody kills it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0;
    while Instant::now() < deadline {
        w.write(&snapshot(seq, CHILD_FLOWS)).unwrap();
        println!("{seq}");
        seq += 1;
    }
}

fn kill_during_recording(name: &str) {
    let dir = TempDir::new("kill9");
    let path = dir.join(name);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            // Its name in this program: the module (the former file) and the fn.
            "record_crash::writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PATH_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut reported: Option<u64> = None;
    let started = Instant::now();
    // Let it write a few hundred intervals, then kill it mid-stride.
    while reported.is_none_or(|s| s < 300) {
        assert!(
            started.elapsed() < Duration::from_secs(50),
            "child too slow"
        );
        match lines.next() {
            Some(Ok(l)) => {
                if let Ok(s) = l.trim().parse() {
                    reported = Some(s);
                }
            }
            _ => panic!("the writer child ended early"),
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    for l in lines.map_while(Result::ok) {
        if let Ok(s) = l.trim().parse() {
            reported = Some(s);
        }
    }
    let reported = reported.unwrap();

    let (_, snaps, warnings) = record::read_all(std::slice::from_ref(&path)).unwrap();
    let n = snaps.len() as u64;
    // Every interval the writer finished is there; at most one more (written,
    // not yet reported when the kill came).
    assert!(
        n > reported && n <= reported + 2,
        "read {n}, child reported {reported}"
    );
    for (i, s) in snaps.iter().enumerate() {
        assert_eq!(s, &snapshot(i as u64, CHILD_FLOWS), "interval {i}");
    }
    // And the reader says the recording was not closed.
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    let cut = format!(
        "{}: the tail was cut after line {} (last complete interval seq {})",
        path.display(),
        n + 1,
        n - 1
    );
    let unclosed = format!(
        "{}: no end record after line {} (last interval seq {})",
        path.display(),
        n + 1,
        n - 1
    );
    assert!(w.starts_with(&cut) || w.starts_with(&unclosed), "{w}");
    eprintln!("{name}: killed after {reported} reported, read {n}: {w}");
}

#[test]
fn kill_9_while_recording_plain() {
    kill_during_recording("trace.jsonl");
}

#[test]
fn kill_9_while_recording_zstd() {
    kill_during_recording("trace.jsonl.zst");
}
