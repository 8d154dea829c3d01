//! `throttlescope report` end to end: recordings of real lab traffic
//! reported through the CLI, compared with what the live view judged and
//! with a report built in memory; and the CLI on files that are not whole,
//! current traces.
//!
//! The tests here need root; those that need none are in
//! tests/offline/report.rs.

use crate::lab_support::Lab;
use crate::support::report::{report, report_json};
use crate::support::TempDir;
use serde_json::Value;
use throttlescope::analysis::{EpisodeTracker, IntervalAnalysis, Thresholds};
use throttlescope::model::snapshot::Snapshot;
use throttlescope::record::{self, RotateOptions, TraceHeader, TraceWriter};
use throttlescope::report::{ReportBuilder, ReportFilters};

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
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("rr");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    lab.tool(&["traffic", "--time", "10"]);
    let rows = crate::lab_support::watch_lines(&lab.watch_json_in_broker("9s", &[]));
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
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("rb");
    lab.tool(&["shape", "burst_then_enforce"]);
    lab.tool(&["emulator", "start"]);
    // As in tests/lab/scenarios.rs: enforcement at the baseline ~15 s in.
    lab.tool(&["traffic", "--time", "24", "--bitrate", "300M"]);
    let dir = TempDir::new("report-rb");
    let path = dir.join("burst.jsonl");
    let name = path.display().to_string();
    let rows =
        crate::lab_support::watch_lines(&lab.watch_json_in_broker("23s", &["--record", &name]));
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
