//! `throttlescope report` end to end: recordings of real lab traffic
//! reported through the CLI, compared with what the live view judged and
//! with a report built in memory; and the CLI on files that are not whole,
//! current traces.

mod common;
mod record_support;

use std::path::Path;
use std::process::{Command, Output};

use common::Lab;
use record_support::{header, snapshot, TempDir};
use serde_json::Value;
use throttlescope::analysis::{EpisodeTracker, IntervalAnalysis, Thresholds};
use throttlescope::model::snapshot::Snapshot;
use throttlescope::record::{self, RotateOptions, TraceHeader, TraceWriter};
use throttlescope::report::{ReportBuilder, ReportFilters};

/// `throttlescope report ARGS`: exit code, stdout, stderr.
fn report(args: &[&str]) -> (i32, String, String) {
    let out: Output = Command::new(common::binary())
        .arg("report")
        .args(args)
        .output()
        .expect("running throttlescope report");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `report --json ARGS` that must succeed: the parsed report.
fn report_json(args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = report(&all);
    assert_eq!(code, 0, "report {args:?} failed: {stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("report JSON: {e}\n{stdout}"))
}

/// (iface, verdict, start_seq, end_seq) of every episode, sorted.
fn episode_keys(episodes: &[Value]) -> Vec<(String, String, u64, u64)> {
    let mut v: Vec<_> = episodes
        .iter()
        .map(|e| {
            (
                e["iface"].as_str().unwrap().to_string(),
                e["verdict"].as_str().unwrap().to_string(),
                e["start_seq"].as_u64().unwrap(),
                e["end_seq"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| (&a.0, a.2).cmp(&(&b.0, b.2)));
    v
}

/// (seq, iface) -> verdict from the report's series.
fn series_verdicts(r: &Value) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for p in r["series"].as_array().unwrap() {
        for i in p["interfaces"].as_array().unwrap() {
            out.push((
                p["seq"].as_u64().unwrap(),
                i["iface"].as_str().unwrap().to_string(),
                i["verdict"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

/// The held verdicts the live view showed, each dated back to its onset
/// as the episodes (and so the report's chart points) are.
fn live_verdicts(rows: &[(Snapshot, IntervalAnalysis)]) -> Vec<(u64, String, String)> {
    let mut out: Vec<(u64, String, String)> = Vec::new();
    for (_, a) in rows {
        for v in &a.interfaces {
            let held = v.held.verdict.to_string();
            for earlier in out.iter_mut().rev() {
                if earlier.0 < v.held.since_seq {
                    break;
                }
                if earlier.1 == v.iface {
                    earlier.2.clone_from(&held);
                }
            }
            out.push((a.seq, v.iface.clone(), held));
        }
    }
    out
}

fn enforcement(r: &Value) -> Vec<&Value> {
    r["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                e["verdict"].as_str(),
                Some("hypervisor_queuing" | "hypervisor_drop" | "pps_limit")
            )
        })
        .collect()
}

/// Snapshots of a real hv_queuing run, written with the TraceWriter and
/// read back, are equal; `report --json` of the file equals a report built
/// in memory from the same snapshots, its verdicts are the live ones, and
/// `--threshold` that puts enforcement out of reach re-judges it away.
#[test]
fn report_of_a_lab_recording_equals_the_in_memory_report() {
    let lab = Lab::up("rr");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "10"]);
    let rows = common::watch_lines(&lab.watch_json_in_broker("9s", &[]));
    assert!(rows.len() >= 6, "only {} intervals", rows.len());
    drop(lab);

    let dir = TempDir::new("report-rr");
    let path = dir.join("lab.jsonl.zst");
    let th = Thresholds::default();
    let h = TraceHeader::for_this_host(
        Vec::new(),
        1_000_000_000,
        serde_json::to_value(&th).unwrap(),
    );
    let mut w = TraceWriter::create(&path, h.clone(), RotateOptions::default()).unwrap();
    for (s, _) in &rows {
        w.write(s).unwrap();
    }
    w.finish().unwrap();
    let mut reader = record::open(&path).unwrap();
    let back: Vec<Snapshot> = reader.by_ref().map(|x| x.unwrap()).collect();
    let written: Vec<Snapshot> = rows.iter().map(|(s, _)| s.clone()).collect();
    assert_eq!(back, written);
    assert!(reader.closing_warnings().is_empty());

    let name = path.display().to_string();
    let from_cli = report_json(&[&name]);
    let mut b = ReportBuilder::new(
        vec![name.clone()],
        std::slice::from_ref(&h),
        &th,
        th.clone(),
        ReportFilters::default(),
        10,
    )
    .unwrap();
    // The plan `report` makes without flags: the recording's.
    let plan = throttlescope::report::plan::as_recorded(&h);
    b.set_plan(plan);
    for s in &written {
        b.push(s);
    }
    let in_memory = b.finish().unwrap();
    // Both sides through the same encoder and parser.
    let in_memory: Value =
        serde_json::from_str(&serde_json::to_string(&in_memory).unwrap()).unwrap();
    assert_eq!(from_cli, in_memory);

    // What the live view judged, interval by interval.
    assert_eq!(series_verdicts(&from_cli), live_verdicts(&rows));
    let enforced = enforcement(&from_cli);
    eprintln!(
        "episodes: {:?}",
        episode_keys(from_cli["episodes"].as_array().unwrap())
    );
    assert!(!enforced.is_empty(), "hv_queuing run without enforcement");
    assert_eq!(
        from_cli["span"]["intervals"].as_u64(),
        Some(rows.len() as u64)
    );
    assert!(!from_cli["flows"].as_array().unwrap().is_empty());
    assert!(from_cli["thresholds_changed"]
        .as_array()
        .unwrap()
        .is_empty());

    // Re-judged with allowance thresholds no rate reaches: no enforcement.
    let rejudged = report_json(&[
        &name,
        "--threshold",
        "bw_allowance_pct=1000",
        "--threshold",
        "pps_allowance_pct=1000",
    ]);
    assert!(
        enforcement(&rejudged).is_empty(),
        "{:?}",
        episode_keys(rejudged["episodes"].as_array().unwrap())
    );
    assert_ne!(rejudged["episodes"], from_cli["episodes"]);
    assert_eq!(
        rejudged["thresholds_changed"],
        serde_json::json!(["bw_allowance_pct", "pps_allowance_pct"])
    );
    assert_eq!(rejudged["thresholds"]["bw_allowance_pct"], 1000.0);
}

/// Burst then enforcement, recorded by `watch --record` while it printed
/// its live analysis: the report's episodes are the live ones.
#[test]
fn report_episodes_are_the_live_episodes_of_burst_then_enforcement() {
    let lab = Lab::up("rb");
    lab.tool(&["shape", "burst_then_enforce"]);
    lab.tool(&["emulator", "start"]);
    // As in tests/scenarios.rs: enforcement at the baseline ~15 s in.
    lab.tool(&["traffic", "--time", "24", "--bitrate", "300M"]);
    let dir = TempDir::new("report-rb");
    let path = dir.join("burst.jsonl");
    let name = path.display().to_string();
    let rows = common::watch_lines(&lab.watch_json_in_broker("23s", &["--record", &name]));
    drop(lab);

    let th = Thresholds::default();
    let mut tracker = EpisodeTracker::new(&th);
    for (snap, a) in &rows {
        tracker.push(a, snap);
    }
    let live: Vec<Value> = tracker
        .episodes()
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();

    let r = report_json(&[&name]);
    let reported = r["episodes"].as_array().unwrap();
    eprintln!("live episodes: {:?}", episode_keys(&live));
    assert_eq!(episode_keys(reported), episode_keys(&live));
    assert_eq!(series_verdicts(&r), live_verdicts(&rows));

    let enforced: Vec<&Value> = enforcement(&r)
        .into_iter()
        .filter(|e| e["iface"] == "b0" && e["intervals"].as_u64().unwrap() >= 3)
        .collect();
    let e = enforced.last().expect("an enforcement episode on b0");
    let live_e = live
        .iter()
        .find(|l| l["iface"] == "b0" && l["start_seq"] == e["start_seq"])
        .unwrap();
    let x = &e["enforcement"];
    // Equal but for the last bit: the live rates went through JSON.
    let same = |a: &Value, b: &Value| {
        let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
        (a - b).abs() <= a.abs() * 1e-12
    };
    assert!(
        same(&x["baseline_bps"], &live_e["throughput_during_bps"]),
        "{x} {live_e}"
    );
    assert!(
        same(&x["burst_ceiling_bps"], &live_e["throughput_before_bps"]),
        "{x} {live_e}"
    );
    assert_eq!(x["direction"], "out");
    // The burst ran from the start of traffic to enforcement: several
    // seconds, never longer than the episode's start offset.
    let burst = x["burst_secs"].as_f64().unwrap();
    let start = e["start_offset_secs"].as_f64().unwrap();
    eprintln!("burst {burst} s before enforcement at +{start} s: {x}");
    assert!(
        burst >= 3.0 && burst <= start + 0.01,
        "burst {burst}, start {start}"
    );
    assert!(!e["evidence"].as_array().unwrap().is_empty());

    // The text report says the same in words.
    let (code, text, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(text.contains("enforcement (out): burst ceiling "), "{text}");
    assert!(text.contains(", then baseline "), "{text}");
}

/// Writes a zstd or plain trace of `n` small intervals; returns the file
/// size after the header and after each interval.
fn write_trace(path: &Path, n: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut w = TraceWriter::create(path, header(), RotateOptions::default()).unwrap();
    sizes.push(std::fs::metadata(path).unwrap().len());
    for s in 0..n {
        w.write(&snapshot(s, 3)).unwrap();
        sizes.push(std::fs::metadata(path).unwrap().len());
    }
    w.finish().unwrap();
    sizes
}

#[test]
fn files_with_nothing_to_report_are_errors_naming_the_file() {
    let dir = TempDir::new("report-bad");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, b"{\"hello\":1}\n").unwrap();
    let future = dir.join("future.jsonl");
    let mut h = serde_json::to_value(header()).unwrap();
    h["version"] = serde_json::json!({"major": 2, "minor": 0});
    std::fs::write(&future, format!("{h}\n")).unwrap();
    let header_only = dir.join("header-only.jsonl");
    std::fs::write(
        &header_only,
        format!("{}\n", serde_json::to_value(header()).unwrap()),
    )
    .unwrap();
    let cut = dir.join("cut.jsonl");
    let sizes = write_trace(&cut, 2);
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..(sizes[0] + 20) as usize]).unwrap();

    for (path, want) in [
        (&empty, "empty file, not a throttlescope trace".to_string()),
        (&foreign, ":1: not a throttlescope trace".to_string()),
        (
            &future,
            ":1: format version 2.0 is newer than this throttlescope understands".to_string(),
        ),
        (&header_only, "no complete interval in".to_string()),
        (
            &cut,
            "the tail was cut after line 1 (no complete interval)".to_string(),
        ),
    ] {
        let name = path.display().to_string();
        let (code, stdout, stderr) = report(&[&name]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
        assert!(stderr.starts_with("throttlescope: "), "{stderr}");
        assert!(stderr.contains(&name), "{name}: {stderr}");
        assert!(stderr.contains(&want), "{name}: want {want:?} in {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // Every file bad: every one named.
    let (code, _, stderr) = report(&[&empty.display().to_string(), &foreign.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("empty.jsonl") && stderr.contains("foreign.jsonl"),
        "{stderr}"
    );
}

#[test]
fn damaged_files_report_what_is_whole_with_warnings() {
    let dir = TempDir::new("report-damaged");
    // Garbage lines: skipped, named by file and line.
    let garbage = dir.join("garbage.jsonl");
    write_trace(&garbage, 6);
    let text = std::fs::read_to_string(&garbage).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "\u{1}\u{2} not json at all");
    std::fs::write(&garbage, lines.join("\n") + "\n").unwrap();
    let name = garbage.display().to_string();
    let (code, stdout, stderr) = report(&["--json", &name]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 6);
    let want = format!("{name}:4: skipped a line that is not a record");
    assert!(stderr.contains(&format!("warning: {want}")), "{stderr}");
    assert!(
        r["health"]["read_warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(&want)),
        "{r}"
    );

    // A zstd file cut inside interval 5: intervals 0-4 are reported.
    let zst = dir.join("cut.jsonl.zst");
    let sizes = write_trace(&zst, 8);
    let bytes = std::fs::read(&zst).unwrap();
    std::fs::write(&zst, &bytes[..((sizes[5] + sizes[6]) / 2) as usize]).unwrap();
    let name = zst.display().to_string();
    let (code, stdout, stderr) = report(&["--json", &name]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 5);
    assert_eq!(r["span"]["last_seq"], 4);
    assert!(
        stderr.contains("the tail was cut after line 6 (last complete interval seq 4)"),
        "{stderr}"
    );

    // One good file and one that is not a trace: the good one is reported.
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, b"{\"hello\":1}\n").unwrap();
    let (code, stdout, stderr) = report(&[
        "--json",
        &garbage.display().to_string(),
        &foreign.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 6);
    assert!(
        stderr.contains(&format!(
            "{}:1: not a throttlescope trace",
            foreign.display()
        )) && stderr.contains("skipped this file"),
        "{stderr}"
    );
}

#[test]
fn bad_options_are_clear_errors() {
    let dir = TempDir::new("report-opts");
    let path = dir.join("t.jsonl");
    write_trace(&path, 4);
    let name = path.display().to_string();
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let html = not_a_dir.join("out.html").display().to_string();
    for (args, want) in [
        (
            vec!["--since", "yesterday"],
            "--since \"yesterday\": not a time",
        ),
        (
            vec!["--until", "2026-02-30T00:00:00Z"],
            "--until \"2026-02-30T00:00:00Z\": not a time",
        ),
        (
            vec!["--flow", ":http"],
            "--flow \":http\": \"http\" is not a port",
        ),
        (
            vec!["--iface", "eth9"],
            "--iface eth9: not in the recording (it has: eth0, veth0)",
        ),
        (vec!["--threshold", "nope=1"], "--threshold nope=1"),
        (vec!["--since", "1h"], "no interval between --since"),
        (vec!["--html", &html], "cannot write the report there"),
        (vec!["--html", &name], "is one of the trace files"),
    ] {
        let mut all = args.clone();
        all.push(&name);
        let (code, stdout, stderr) = report(&all);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }

    // A writable --html gets a page; stdout still has the text report.
    let out = dir.join("r.html");
    let (code, stdout, stderr) = report(&["--html", &out.display().to_string(), &name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("throttlescope report: "), "{stdout}");
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    // 0640 (the umask may take more away), and never written over.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
    let (code, _, stderr) = report(&["--html", &out.display().to_string(), &name]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("already exists; refusing to overwrite"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);
}

/// The baseline flags: a plan over the recording's (which has none), and
/// a bad table or an unknown type as clear errors, not "no baseline".
#[test]
fn instance_flags_plan_the_report_or_are_clear_errors() {
    let dir = TempDir::new("report-plan");
    let path = dir.join("t.jsonl");
    write_trace(&path, 4);
    let name = path.display().to_string();

    let (code, stdout, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("plan        no baseline: the recording has no baseline"),
        "{stdout}"
    );
    assert!(stdout.contains("\nright-sizing ("), "{stdout}");

    let r = report_json(&["--instance-type", "m5.xlarge", &name]);
    let b = &r["right_sizing"]["baseline"];
    assert_eq!(b["instance_type"], "m5.xlarge");
    assert_eq!(b["tx_bps"].as_f64(), Some(1.25e9));
    assert_eq!(r["right_sizing"]["arch"], "x86_64");
    let r = report_json(&["--baseline", "1G/2G", &name]);
    assert_eq!(r["right_sizing"]["tx"]["baseline_bps"].as_f64(), Some(1e9));
    assert_eq!(r["right_sizing"]["rx"]["baseline_bps"].as_f64(), Some(2e9));

    let bad = dir.join("specs.tsv");
    std::fs::write(&bad, "m5.xlarge x86_64 4 1.25\n").unwrap();
    let bad = bad.display().to_string();
    for (args, want) in [
        (
            vec!["--instance-type", "m9.nope"],
            "--instance-type m9.nope: not in the instance specs",
        ),
        (
            vec!["--instance-specs", &bad],
            "specs.tsv, line 1: 4 fields",
        ),
        (
            vec!["--instance-specs", "/nonexistent/specs.tsv"],
            "--instance-specs /nonexistent/specs.tsv",
        ),
    ] {
        let mut all = args.clone();
        all.push(&name);
        let (code, stdout, stderr) = report(&all);
        assert_eq!(code, 2, "{args:?}: a usage error: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }
}
