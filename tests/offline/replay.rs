//! `throttlescope replay` shows what `watch` showed: lab traffic recorded
//! by `watch --json --record` while it printed its live analysis, then
//! replayed through the CLI. The replayed lines equal the live ones
//! interval by interval; `--speed` paces the intervals (a lower bound
//! only); `--threshold` re-judges; a rotated recording plays every interval
//! in order across its segments.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/replay.rs.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::replay::json_lines;
use crate::support::run;
use crate::support::TempDir;
use serde_json::Value;
use throttlescope::model::snapshot::{AllowanceCounters, AllowanceStatus, LinkCounters, Snapshot};
use throttlescope::record::{RotateOptions, TraceWriter};

/// One second of eth0 (an ENA device) sending 10,000 wire packets, of which
/// `queued_pct`% were counted in bw_out_allowance_exceeded.
fn shaped(seq: u64, queued_pct: u64, start_mono_ns: u64, start_unix_ms: u64) -> Snapshot {
    let mut s = crate::support::record::snapshot(seq, 0);
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
    let mut header = crate::support::record::header();
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
        let out = run(Command::new(crate::support::binary())
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
        let report = run(Command::new(crate::support::binary())
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

/// The time label of each interval replay's plain view shows
/// (`[replay FILE +HH:MM:SS seq N]`), in order.
fn replay_labels(stdout: &[u8]) -> Vec<(u64, String)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("[replay ")?.strip_suffix(']'))
        .map(|l| {
            let words: Vec<&str> = l.split(' ').collect();
            let n = words.len();
            assert!(n >= 4 && words[n - 2] == "seq", "label {l:?}");
            (words[n - 1].parse().unwrap(), words[n - 3].to_string())
        })
        .collect()
}

/// A rotated set that spans a restart (a recorder named
/// `{host}-{start}.jsonl`, restarted after a reboot: the second recording's
/// monotonic clock starts again near zero). `replay` labels each interval
/// with its time since the start as `report` dates it (`series[].t_secs`):
/// each recording measured on its own clock from its own start, placed
/// after the first by the wall clock. Replay measured every recording on the
/// first file's clock, so after the reboot every label read +00:00:00.
#[test]
fn replay_labels_time_across_a_restart_as_report_does() {
    let dir = TempDir::new("replay-restart");
    let a = dir.join("host-a.jsonl");
    let b = dir.join("host-b.jsonl");
    // a: 6 s on a clock 900 s after boot; b, 200 s later by the wall clock,
    // after a reboot: its clock 20 s after boot.
    write_recording(&a, (1_763_000_000_000, 900_000_000_000), &[0; 6], Some(1));
    write_recording(&b, (1_763_000_200_000, 20_000_000_000), &[0; 6], Some(1));
    let files: Vec<PathBuf> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(files.len() > 10, "rotated into {} files", files.len());
    let args: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();

    let out = run(Command::new(crate::support::binary())
        .args(["replay", "--as-fast-as-possible", "--plain"])
        .args(&args));
    let replayed = replay_labels(&out.stdout);
    let report = run(Command::new(crate::support::binary())
        .arg("report")
        .args(&args)
        .arg("--json"));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    // As replay shows an offset: whole seconds, `+HH:MM:SS`.
    let from_report: Vec<(u64, String)> = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = p["t_secs"].as_f64().unwrap().floor() as u64;
            (
                p["seq"].as_u64().unwrap(),
                format!("+{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60),
            )
        })
        .collect();
    eprintln!("replay {replayed:?}\nreport {from_report:?}");
    assert_eq!(replayed.len(), 12, "{replayed:?}");
    assert_eq!(replayed, from_report);
    // b's first interval ends 201 s after a's start.
    assert_eq!(replayed[6], (0, "+00:03:21".to_string()));
}

/// The verdict lines of one rotated set that spans a restart (a, then b
/// after a reboot, each rotated every interval), replayed and reported:
/// the held verdict of every interval and the episodes are the same, as
/// both hold one judging unit (src/analysis/judging.rs) that only the
/// walk's new recording restarts. The report dates a held verdict back to
/// its onset (docs/report.md), within its recording; replay shows each
/// interval as it was held then, with the onset (`held.since_seq`): dated
/// back the same way, the two agree. a ends queued; b starts queued for
/// less than an onset takes, then is free, then queues: its first held
/// verdict is free, since b's seq 0, and dated back over a's intervals (as
/// the report did, its seqs running over the same numbers) it would erase
/// a's queuing from the report's chart and counts.
#[test]
fn replay_and_report_give_the_same_verdict_lines_over_a_restart() {
    let dir = TempDir::new("replay-report-restart");
    let a = dir.join("host-a.jsonl");
    let b = dir.join("host-b.jsonl");
    let a_pcts: Vec<u64> = [0; 2].into_iter().chain([90; 6]).collect();
    let b_pcts: Vec<u64> = [90; 2].into_iter().chain([0; 4]).chain([90; 5]).collect();
    write_recording(&a, (1_763_000_000_000, 900_000_000_000), &a_pcts, Some(1));
    write_recording(&b, (1_763_000_200_000, 20_000_000_000), &b_pcts, Some(1));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // In no particular order: the walk puts them in recording order.
    files.sort();
    files.reverse();
    assert!(files.len() > 16, "rotated into {} files", files.len());
    let args: Vec<&str> = files.iter().map(|p| p.to_str().unwrap()).collect();

    let out = run(Command::new(crate::support::binary())
        .args(["replay", "--as-fast-as-possible", "--json"])
        .args(&args));
    let replayed = json_lines(&out.stdout);
    assert_eq!(replayed.len(), a_pcts.len() + b_pcts.len());
    // (seq, held verdict) per interval, each dated back to its onset within
    // its recording (a's intervals, then b's).
    let mut held_replayed: Vec<(u64, String)> = Vec::new();
    for (i, l) in replayed.iter().enumerate() {
        let recording_start = if i < a_pcts.len() { 0 } else { a_pcts.len() };
        let held = &l["analysis"]["interfaces"][0]["held"];
        let verdict = held["verdict"].as_str().unwrap().to_string();
        if i == a_pcts.len() {
            // b's first interval, held as b's own.
            assert_eq!(verdict, "free_flow", "b's first held verdict");
        }
        let since = held["since_seq"].as_u64().unwrap();
        for p in held_replayed[recording_start..].iter_mut() {
            if p.0 >= since {
                p.1.clone_from(&verdict);
            }
        }
        held_replayed.push((l["seq"].as_u64().unwrap(), verdict));
    }
    let report = run(Command::new(crate::support::binary())
        .arg("report")
        .args(&args)
        .arg("--json"));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let held_reported: Vec<(u64, String)> = report["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["seq"].as_u64().unwrap(),
                p["interfaces"][0]["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let episodes_replayed = episodes(&replayed.last().unwrap()["analysis"]["episodes"]);
    let episodes_reported = episodes(&report["episodes"]);
    eprintln!(
        "replay held {held_replayed:?}\nreport held {held_reported:?}\nreplay episodes {episodes_replayed:?}\nreport episodes {episodes_reported:?}"
    );
    assert_eq!(held_replayed, held_reported, "held verdicts differ");
    assert_eq!(episodes_replayed, episodes_reported, "episodes differ");
    // Both recordings held queuing, each in an episode of its own.
    for part in [
        &held_reported[..a_pcts.len()],
        &held_reported[a_pcts.len()..],
    ] {
        assert!(
            part.iter().any(|(_, v)| v == "hypervisor_queuing"),
            "{held_reported:?}"
        );
    }
    let queuing = episodes_reported
        .iter()
        .filter(|e| e.0 == "hypervisor_queuing")
        .count();
    assert_eq!(queuing, 2, "{episodes_reported:?}");
}
