//! `throttlescope replay` shows what `watch` showed: lab traffic recorded
//! by `watch --json --record` while it printed its live analysis, then
//! replayed through the CLI. The replayed lines equal the live ones
//! interval by interval; `--speed` paces the intervals (a lower bound
//! only); `--threshold` re-judges; a rotated recording plays every interval
//! in order across its segments.
//!
//! The tests here need root; those that need none are in
//! tests/offline/replay.rs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::lab_support::Lab;
use crate::support::replay::json_lines;
use crate::support::run;
use crate::support::TempDir;
use serde_json::Value;
use throttlescope::record::{self, RotateOptions, TraceWriter};

/// `throttlescope replay ARGS` that must succeed: its JSON lines.
fn replay_json(args: &[&str]) -> Vec<Value> {
    let out = run(Command::new(crate::support::binary())
        .arg("replay")
        .args(args)
        .arg("--json"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("warning"), "replay warned: {stderr}");
    json_lines(&out.stdout)
}

fn seqs(lines: &[Value]) -> Vec<u64> {
    lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect()
}

/// (seq, iface, verdict) of every judged interface.
fn verdicts(lines: &[Value]) -> Vec<(u64, String, String)> {
    lines
        .iter()
        .flat_map(|l| {
            let a = &l["analysis"];
            a["interfaces"].as_array().unwrap().iter().map(|i| {
                (
                    a["seq"].as_u64().unwrap(),
                    i["iface"].as_str().unwrap().to_string(),
                    i["verdict"].as_str().unwrap().to_string(),
                )
            })
        })
        .collect()
}

fn is_enforcement(verdict: &str) -> bool {
    matches!(
        verdict,
        "hypervisor_queuing" | "hypervisor_drop" | "pps_limit"
    )
}

/// The replayed lines equal the live ones: same intervals in the same
/// order, and per interval the same snapshot and the same analysis (seq,
/// verdicts, confidence, evidence, rates, flow ranking).
///
/// Exact equality, not a float tolerance: a snapshot holds only integers
/// (counters, microseconds, nanoseconds), so the recording gives the
/// analysis the very inputs it had live, and the analysis is a pure
/// function of them; its floats are computed again bit for bit and
/// serde_json prints equal f64s identically.
fn assert_replay_equals_live(live: &[Value], replayed: &[Value]) {
    assert_eq!(seqs(replayed), seqs(live), "intervals replayed");
    for (l, r) in live.iter().zip(replayed) {
        let seq = &l["seq"];
        assert_eq!(
            r["analysis"], l["analysis"],
            "analysis of interval {seq} differs"
        );
        assert_eq!(r, l, "line of interval {seq} differs");
    }
}

/// Writes the first `n` intervals of `from` to a new plain trace at `to`,
/// with `from`'s header; returns their monotonic times.
fn first_intervals(from: &Path, to: &Path, n: usize) -> Vec<u64> {
    let mut reader = record::open(from).unwrap();
    let header = reader.header().clone();
    let snaps: Vec<_> = reader.by_ref().take(n).map(|s| s.unwrap()).collect();
    assert_eq!(
        snaps.len(),
        n,
        "{} has fewer than {n} intervals",
        from.display()
    );
    let mut w = TraceWriter::create(to, header, RotateOptions::default()).unwrap();
    for s in &snaps {
        w.write(s).unwrap();
    }
    w.finish().unwrap();
    snaps.iter().map(|s| s.mono_ns).collect()
}

#[test]
fn replay_of_a_lab_recording_shows_what_watch_showed() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("rp");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "10"]);
    let dir = TempDir::new("replay");
    let path = dir.join("lab.jsonl.zst");
    let name = path.display().to_string();
    let live = json_lines(&lab.watch_json_in_broker("9s", &["--record", &name]));
    drop(lab);
    assert!(live.len() >= 6, "only {} intervals", live.len());
    let live_verdicts = verdicts(&live);
    eprintln!("live verdicts: {live_verdicts:?}");
    assert!(
        live_verdicts.iter().any(|(_, _, v)| is_enforcement(v)),
        "hv_queuing run without enforcement"
    );

    let replayed = replay_json(&[&name, "--as-fast-as-possible"]);
    assert_replay_equals_live(&live, &replayed);

    // Allowance thresholds no rate reaches: the same intervals, judged
    // again, without enforcement.
    let rejudged = replay_json(&[
        &name,
        "--as-fast-as-possible",
        "--threshold",
        "bw_allowance_pct=1000",
        "--threshold",
        "pps_allowance_pct=1000",
    ]);
    assert_eq!(seqs(&rejudged), seqs(&live));
    let rejudged_verdicts = verdicts(&rejudged);
    eprintln!("re-judged verdicts: {rejudged_verdicts:?}");
    assert!(
        !rejudged_verdicts.iter().any(|(_, _, v)| is_enforcement(v)),
        "{rejudged_verdicts:?}"
    );
    assert_ne!(rejudged_verdicts, live_verdicts);
    // Only the judgement changed, not the data.
    for (l, r) in live.iter().zip(&rejudged) {
        assert_eq!(l["interfaces"], r["interfaces"]);
        assert_eq!(l["flows"], r["flows"]);
    }

    // --speed 4 on four intervals waits out a quarter of each recorded
    // gap: at least a quarter of the time from the first to the last.
    // A lower bound only: a busy machine may take longer.
    let short = dir.join("four.jsonl");
    let mono = first_intervals(&path, &short, 4);
    let recorded_ns = mono[3] - mono[0];
    let started = Instant::now();
    let paced = replay_json(&[&short.display().to_string(), "--speed", "4"]);
    let elapsed = started.elapsed();
    assert_eq!(seqs(&paced), seqs(&live[..4]));
    assert_replay_equals_live(&live[..4], &paced);
    // Each gap is cut to whole nanoseconds before the wait: allow 1 ns each.
    let lower_ns = recorded_ns / 4 - 3;
    eprintln!(
        "--speed 4: {} ms recorded between the first and last of 4 intervals, replayed in {} ms",
        recorded_ns / 1_000_000,
        elapsed.as_millis()
    );
    assert!(
        elapsed.as_nanos() >= u128::from(lower_ns),
        "replayed in {elapsed:?}, under a quarter of {recorded_ns} ns"
    );
}

/// A recording rotated into several segments, given in scrambled order,
/// replays every interval once, in seq order, judged as live (the
/// analysis' history runs on across segments).
#[test]
fn replay_of_a_rotated_recording_plays_every_interval_in_order() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("rq");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "10"]);
    let dir = TempDir::new("replay-rotated");
    let path = dir.join("rot.jsonl");
    let name = path.display().to_string();
    // A few intervals per segment; keep them all.
    let live = json_lines(&lab.watch_json_in_broker(
        "9s",
        &["--record", &name, "--rotate-size", "24K", "--keep", "100"],
    ));
    drop(lab);
    assert!(live.len() >= 6, "only {} intervals", live.len());

    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segments.sort();
    let per_segment: Vec<usize> = segments
        .iter()
        .map(|p| record::open(p).unwrap().count())
        .collect();
    eprintln!(
        "{} intervals in {} segments of {per_segment:?} intervals",
        live.len(),
        segments.len()
    );
    assert!(segments.len() >= 3, "only {} segments", segments.len());
    // Newest first (rot.jsonl, rot.jsonl.1, ...) then swapped around: the
    // order given must not matter.
    segments.swap(0, 1);
    let args: Vec<String> = segments.iter().map(|p| p.display().to_string()).collect();
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.push("--as-fast-as-possible");
    let replayed = replay_json(&all);
    let first = live[0]["seq"].as_u64().unwrap();
    let expected: Vec<u64> = (first..first + live.len() as u64).collect();
    assert_eq!(seqs(&live), expected, "live intervals not consecutive");
    assert_replay_equals_live(&live, &replayed);
}
