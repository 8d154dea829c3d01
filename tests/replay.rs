//! `throttlescope replay` shows what `watch` showed: lab traffic recorded
//! by `watch --json --record` while it printed its live analysis, then
//! replayed through the CLI. The replayed lines equal the live ones
//! interval by interval; `--speed` paces the intervals (a lower bound
//! only); `--threshold` re-judges; a rotated recording plays every interval
//! in order across its segments.

mod common;
mod record_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::{run, Lab};
use record_support::TempDir;
use serde_json::Value;
use throttlescope::model::snapshot::{AllowanceCounters, AllowanceStatus, LinkCounters, Snapshot};
use throttlescope::record::{self, RotateOptions, TraceWriter};

/// Parses JSON lines (`watch --json`, `replay --json`).
fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("JSON line {l:?}: {e}")))
        .collect()
}

/// `throttlescope replay ARGS` that must succeed: its JSON lines.
fn replay_json(args: &[&str]) -> Vec<Value> {
    let out = run(Command::new(common::binary())
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

/// One second of eth0 (an ENA device) sending 10,000 wire packets, of which
/// `queued_pct`% were counted in bw_out_allowance_exceeded.
fn shaped(seq: u64, queued_pct: u64, start_mono_ns: u64, start_unix_ms: u64) -> Snapshot {
    let mut s = record_support::snapshot(seq, 0);
    s.interfaces.truncate(1);
    s.interval_ns = 1_000_000_000;
    s.mono_ns = start_mono_ns + (seq + 1) * s.interval_ns;
    s.unix_ms = start_unix_ms + (seq + 1) * 1000;
    let i = &mut s.interfaces[0];
    i.delta = LinkCounters {
        tx_packets: 10_000,
        rx_packets: 5_000,
        tx_bytes: 10_000 * 1_500,
        rx_bytes: 5_000 * 66,
        ..Default::default()
    };
    i.totals = LinkCounters {
        tx_packets: (seq + 1) * 10_000,
        rx_packets: (seq + 1) * 5_000,
        tx_bytes: (seq + 1) * 10_000 * 1_500,
        rx_bytes: (seq + 1) * 5_000 * 66,
        ..Default::default()
    };
    i.mtu = 1500;
    i.offloads = None;
    i.host_queue = None;
    if let AllowanceStatus::Read(a) = &mut i.allowance {
        let queued = queued_pct * 100;
        let zero = AllowanceCounters {
            bw_in_allowance_exceeded: Some(0),
            bw_out_allowance_exceeded: Some(0),
            pps_allowance_exceeded: Some(0),
            conntrack_allowance_exceeded: Some(0),
            linklocal_allowance_exceeded: Some(0),
            conntrack_allowance_available: Some(100_000),
            ..Default::default()
        };
        a.delta = AllowanceCounters {
            bw_out_allowance_exceeded: Some(queued),
            ..zero
        };
        a.totals = AllowanceCounters {
            bw_out_allowance_exceeded: Some(1_000_000 + seq * queued),
            ..zero
        };
        a.zeroed_reads = 0;
        a.admin_cmd_failures = Some(0);
        a.last_error = None;
    }
    s
}

/// A recording of `n` intervals, `queued_pct` each, starting at the given
/// clocks; rotated every `rotate_every` intervals when given.
fn write_recording(path: &Path, start: (u64, u64), pcts: &[u64], rotate_every: Option<u64>) {
    let mut header = record_support::header();
    header.interfaces.truncate(1);
    header.thresholds =
        serde_json::to_value(throttlescope::analysis::Thresholds::default()).unwrap();
    (header.start_unix_ms, header.start_mono_ns) = start;
    let rotate = RotateOptions {
        max_bytes: rotate_every.map(|_| 1),
        max_age: None,
        keep: 100,
    };
    let mut w = TraceWriter::create(path, header, rotate).unwrap();
    for (seq, pct) in pcts.iter().enumerate() {
        w.write(&shaped(seq as u64, *pct, start.1, start.0))
            .unwrap();
    }
    w.finish().unwrap();
}

/// (verdict, start seq, end seq, intervals) of eth0's episodes, from a
/// report's JSON or the last replayed line's `analysis.episodes`.
fn episodes(list: &Value) -> Vec<(String, u64, u64, u64)> {
    list.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["iface"] == "eth0")
        .map(|e| {
            (
                e["verdict"].as_str().unwrap().to_string(),
                e["start_seq"].as_u64().unwrap(),
                e["end_seq"].as_u64().unwrap(),
                e["intervals"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `replay` and `report` walk recordings alike (src/record/walk.rs): files
/// in recording order, one that is no recording skipped with a warning,
/// judging started again at each new recording (a's held verdict and
/// look-back do not carry into b) and going on across the segments of one
/// rotated recording. Their episodes agree.
#[test]
fn replay_and_report_hold_the_same_verdicts_across_recordings() {
    let dir = TempDir::new("replay-report");
    // a: queued 90% for 8 s; b, a separate recording: free for 8 s.
    let a = dir.join("a.jsonl");
    let b = dir.join("b.jsonl");
    write_recording(&a, (1_763_000_000_000, 5_000_000_000), &[90; 8], None);
    write_recording(&b, (1_763_000_100_000, 200_000_000_000), &[0; 8], None);
    // c: one recording, rotated every interval: queued, then free.
    let c = dir.join("c.jsonl");
    let pcts: Vec<u64> = [90; 6].into_iter().chain([0; 8]).collect();
    write_recording(&c, (1_763_000_200_000, 400_000_000_000), &pcts, Some(1));
    let c_files: Vec<PathBuf> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("c.jsonl")
        })
        .collect();
    assert!(c_files.len() > 10, "rotated into {} files", c_files.len());

    // And a file that is no recording at all: both skip it, saying so.
    let junk = dir.join("junk.jsonl");
    std::fs::write(&junk, "not a trace\n").unwrap();
    let cases: Vec<(&str, Vec<PathBuf>)> = vec![
        ("two recordings", vec![b.clone(), junk, a.clone()]),
        ("one rotated recording", c_files),
    ];
    for (what, files) in cases {
        let args: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();
        let mut replay_args = vec!["--as-fast-as-possible"];
        replay_args.extend(&args);
        let out = run(Command::new(common::binary())
            .arg("replay")
            .args(&replay_args)
            .arg("--json"));
        let replayed = json_lines(&out.stdout);
        let warned = String::from_utf8_lossy(&out.stderr).into_owned();
        if what == "two recordings" {
            // As report says it: two recordings, one after the other, and
            // the file that is none skipped (replay used to fail on it).
            assert!(warned.contains("2 different recordings"), "{warned}");
            assert!(
                warned.contains("junk.jsonl") && warned.contains("skipped"),
                "{warned}"
            );
        } else {
            assert!(!warned.contains("warning"), "{warned}");
        }
        let report = run(Command::new(common::binary())
            .arg("report")
            .args(&args)
            .arg("--json"));
        let report: Value = serde_json::from_slice(&report.stdout).unwrap();
        let from_report = episodes(&report["episodes"]);
        let from_replay = episodes(&replayed.last().unwrap()["analysis"]["episodes"]);
        let held: Vec<(u64, String)> = replayed
            .iter()
            .map(|l| {
                let i = &l["analysis"]["interfaces"][0];
                (
                    l["seq"].as_u64().unwrap(),
                    i["held"]["verdict"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        eprintln!(
            "{what}: replay held {held:?}\n  report {from_report:?}\n  replay {from_replay:?}"
        );
        assert_eq!(from_replay, from_report, "{what}: episodes differ");
        assert!(
            from_report.iter().any(|e| e.0 == "hypervisor_queuing"),
            "{what}: the queued part was not held: {from_report:?}"
        );
        if what == "two recordings" {
            // b's intervals are its own: none held as a's queuing.
            let b_held: Vec<&str> = held[8..].iter().map(|(_, h)| h.as_str()).collect();
            assert!(
                b_held.iter().all(|h| *h == "free_flow" || *h == "idle"),
                "b carried a's held verdict: {b_held:?}"
            );
        }
    }
}
