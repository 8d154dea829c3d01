//! `--per-packet auto` (issue #47), end to end: the host queue's per-packet
//! programs are detached while nothing moves an allowance counter, and run
//! again from the interval after one moves, with the real BPF programs and
//! the lab's microburst shaper.
//!
//! - Smooth traffic under the shaper (no counter moves): the programs are
//!   paused but for the periodic sample, their links gone from the kernel
//!   (`bpftool link`; on_dev_xmit's too, which counts the link-local
//!   senders) while on_kfree_skb's stays, and every paused interval says
//!   its queue figures and peaks are not measured, and has no link-local
//!   sample.
//! - Then bursts (8 MB at once every second): the first interval whose
//!   counter rose runs them from the next; an interval that was paused says
//!   so in its evidence, and after the onset the bursts are held as the
//!   hypervisor in microbursts wherever three intervals running were
//!   judged so, as with `--per-packet always` (tests/lab/microburst.rs).
//! - The report of the recording counts the paused intervals.

use std::io::BufRead;
use std::process::Command;

use crate::lab_support::Lab;
use crate::support::{binary, run};
use serde_json::Value;
use throttlescope::analysis::Thresholds;

fn b0<'a>(snap: &'a Value, what: &str) -> &'a Value {
    let (list, key) = match what {
        "sample" => (&snap["interfaces"], "name"),
        _ => (&snap["analysis"]["interfaces"], "iface"),
    };
    list.as_array()
        .unwrap()
        .iter()
        .find(|i| i[key] == "b0")
        .expect("the broker interface")
}

/// The names of the programs linked in the kernel now, as `bpftool`
/// lists them (the kernel keeps 15 characters; bpftool may give the
/// whole name from BTF).
fn linked_programs() -> Vec<String> {
    let out = run(Command::new("bpftool").args(["link", "show", "--json"]));
    let links: Vec<Value> = serde_json::from_slice(&out.stdout).expect("bpftool's JSON");
    let ids: Vec<u64> = links.iter().filter_map(|l| l["prog_id"].as_u64()).collect();
    let out = run(Command::new("bpftool").args(["prog", "show", "--json"]));
    let progs: Vec<Value> = serde_json::from_slice(&out.stdout).expect("bpftool's JSON");
    progs
        .iter()
        .filter(|p| p["id"].as_u64().is_some_and(|id| ids.contains(&id)))
        .filter_map(|p| p["name"].as_str().map(str::to_string))
        .collect()
}

/// The next interval `watch --json` gives; None when it has ended.
fn next_interval(out: &mut impl BufRead) -> Option<Value> {
    let mut line = String::new();
    let n = out.read_line(&mut line).expect("reading watch");
    (n > 0).then(|| serde_json::from_str(&line).expect("a JSON line"))
}

#[test]
fn auto_pauses_the_per_packet_programs_while_quiet_and_runs_them_when_a_counter_moves() {
    let _gate = crate::lab_support::gate::alone(
        "it judges bursts of milliseconds, and lists every BPF link of the machine",
    );
    let lab = Lab::up("ppa");
    let rec = lab.dir.join("auto.jsonl.zst");
    lab.tool(&["shape", "microburst"]);
    lab.tool(&["emulator", "start"]);
    let mut watch = lab.spawn_watch_json_in_broker(
        "19s",
        &[
            "--interval",
            "1s",
            "--per-packet",
            "auto",
            "--record",
            &rec.display().to_string(),
        ],
    );
    let mut out = std::io::BufReader::new(watch.stdout.take().unwrap());
    // The same mean as the bursts, spread evenly: no counter moves.
    lab.tool(&["traffic", "--time", "30", "--bursts", "8M/1s", "--smooth"]);
    let mut snaps = Vec::new();
    let mut links_paused = None;
    for _ in 0..7 {
        let s = next_interval(&mut out).expect("watch ended early");
        // Decided after seq 2 and before seq 9's sample: detached now.
        if s["seq"] == 4 {
            links_paused = Some(linked_programs());
        }
        snaps.push(s);
    }
    lab.tool(&["traffic", "--time", "30", "--bursts", "8M/1s"]);
    while let Some(s) = next_interval(&mut out) {
        snaps.push(s);
    }
    assert!(watch.wait().expect("watch").success(), "watch failed");
    lab.tool(&["traffic", "--stop"]);

    let rows: Vec<(u64, bool, bool, u64, Option<u64>, String)> = snaps
        .iter()
        .map(|s| {
            let p = &s["health"]["per_packet"];
            let i = b0(s, "sample");
            (
                s["seq"].as_u64().unwrap(),
                p["measured"].as_bool().unwrap(),
                p["attached"].as_bool().unwrap(),
                i["allowance"]["delta"]["bw_out_allowance_exceeded"]
                    .as_u64()
                    .unwrap_or(0),
                i["tx_peak_bps"].as_u64(),
                b0(s, "analysis")["held"]["verdict"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    eprintln!("(seq, measured, running next, bw_out counted, tx peak, held): {rows:#?}");
    // Each interval's own verdict and its share counted: a burst's queue
    // stands in 2 or 3 of the emulator's 100 ms periods by their phase
    // (tests/lab/microburst.rs), ~38% or ~57% of the packets.
    let own: Vec<(u64, String, Option<f64>)> = snaps
        .iter()
        .map(|s| {
            let v = b0(s, "analysis");
            (
                s["seq"].as_u64().unwrap(),
                v["verdict"].as_str().unwrap().to_string(),
                v["rates"]["bw_out_pct"].as_f64(),
            )
        })
        .collect();
    eprintln!("(seq, own verdict, bw_out % of wire packets): {own:?}");

    // Quiet: paused from the first decision on, the links gone, every
    // paused interval saying so.
    let quiet = &rows[1..6];
    for r in quiet {
        assert_eq!(r.3, 0, "a counter moved under smooth traffic: {rows:?}");
        assert!(!r.2, "running while quiet: {r:?}");
    }
    let linked = links_paused.expect("listed at seq 4");
    eprintln!("linked while paused: {linked:?}");
    assert!(linked.iter().any(|n| n == "on_kfree_skb"), "{linked:?}");
    // on_dev_xmit too, though it counts the link-local senders (on by
    // default): their intervals are paused as well.
    for gone in [
        "on_qdisc_enqueue",
        "on_qdisc_dequeue",
        "on_netif_receive",
        "on_dev_xmit",
    ] {
        let name = &gone[..gone.len().min(15)];
        assert!(
            !linked.iter().any(|n| n.starts_with(name)),
            "{gone}: {linked:?}"
        );
    }
    for s in &snaps[2..6] {
        let i = b0(s, "sample");
        assert_eq!(i["host_queue"]["paused"], true, "{i}");
        assert!(i["tx_peak_bps"].is_null(), "{i}");
        assert!(i["linklocal"].is_null(), "{i}");
        let v = b0(s, "analysis");
        assert!(
            v["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["signal"] == "host_queue_paused"),
            "{v}"
        );
        assert_eq!(v["held"]["verdict"], "free_flow", "{v}");
    }

    // The bursts: the first interval counted runs them from the next.
    let onset = rows
        .iter()
        .position(|r| r.3 > 0)
        .unwrap_or_else(|| panic!("no counter moved in the bursts: {rows:?}"));
    let why = snaps[onset]["health"]["per_packet"]["why"]
        .as_str()
        .unwrap();
    assert!(rows[onset].2, "{rows:?}");
    assert_eq!(why, "bw_out_allowance_exceeded rose on b0");
    let after: Vec<_> = rows[onset + 1..rows.len() - 1].to_vec();
    assert!(
        after.len() >= 6,
        "too few intervals after the onset: {rows:?}"
    );
    for r in &after {
        assert!(r.1 && r.2, "not measured after the onset: {r:?}");
        assert!(r.4.is_some(), "no peak after the onset: {r:?}");
    }
    if !rows[onset].1 {
        let v = b0(&snaps[onset], "analysis");
        assert!(v.to_string().contains("host_queue_paused"), "{v}");
    }
    // Held as the hypervisor, in microbursts, as the hold rule promises
    // (src/analysis/hold.rs): wherever the whole window (`hold_window`
    // intervals) was judged so, its last `hold_onset_intervals` measured
    // (their peaks taken: the window microbursts, so its onset level is the
    // line itself). Not from a fixed interval: once in a group run the first
    // bursts stood queued in 2 of the emulator's 100 ms periods, not 3 (~38%
    // counted, under the 50% line: free flow in microbursts), and 57% only
    // from the fifth. Nor from three intervals running: the interval before
    // the onset is in the window then, and free flow there (0%) kept the
    // window's level under the steady onset (1.5 times the line) while the
    // onset interval, paused, had no peak to call the window a microburst.
    let th = Thresholds::default();
    let window = th.hold_window as usize;
    let measured = th.hold_onset_intervals as usize;
    let judged_hv = |i: usize| own[i].1 == "hypervisor_queuing";
    let ran = |i: usize| rows[i].1;
    let mut held = 0;
    for (i, snap) in snaps
        .iter()
        .enumerate()
        .take(snaps.len() - 1)
        .skip(window - 1)
    {
        if !((i + 1 - window..=i).all(judged_hv) && (i + 1 - measured..=i).all(ran)) {
            continue;
        }
        let h = &b0(snap, "analysis")["held"];
        assert_eq!(h["verdict"], "hypervisor_queuing", "seq {i}: {own:?}");
        assert!(
            h["note"]
                .as_str()
                .unwrap()
                .contains("in microbursts: the busiest"),
            "{h}"
        );
        held += 1;
    }
    assert!(
        held >= 3,
        "the bursts were judged hypervisor_queuing a whole window running too few times: {own:?}"
    );

    let report = run(Command::new(binary()).arg("report").arg(&rec));
    let text = String::from_utf8_lossy(&report.stdout);
    let paused = rows.iter().filter(|r| !r.1).count();
    let line = format!("paused in {paused} of {} intervals", rows.len());
    assert!(text.contains(&line), "{line}\n{text}");
}

/// The host's own queue (the lab's `local_queuing`: a tbf on b0 itself, no
/// hypervisor shaping, so no allowance counter moves): paused while idle,
/// the programs run once b0's root qdisc holds packets, as `tc -s qdisc`
/// reads it, and the intervals after are measured and judged local queuing
/// on the backlog they saw, as with `--per-packet always`
/// (tests/lab/scenarios.rs, `local_queuing_is_judged_local`).
#[test]
fn auto_runs_them_while_the_hosts_own_queue_stands() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ppl");
    lab.tool(&["shape", "local_queuing"]);
    lab.tool(&["emulator", "start"]);
    let mut watch =
        lab.spawn_watch_json_in_broker("12s", &["--interval", "1s", "--per-packet", "auto"]);
    let mut out = std::io::BufReader::new(watch.stdout.take().unwrap());
    // Three idle intervals (paused after the first), then the traffic.
    let mut snaps: Vec<Value> = (0..3)
        .map(|_| next_interval(&mut out).expect("watch ended early"))
        .collect();
    lab.tool(&["traffic", "--time", "12"]);
    while let Some(s) = next_interval(&mut out) {
        snaps.push(s);
    }
    assert!(watch.wait().expect("watch").success(), "watch failed");
    lab.tool(&["traffic", "--stop"]);

    let rows: Vec<(u64, bool, bool, String, u64, String)> = snaps
        .iter()
        .map(|s| {
            let p = &s["health"]["per_packet"];
            let v = b0(s, "analysis");
            (
                s["seq"].as_u64().unwrap(),
                p["measured"].as_bool().unwrap(),
                p["attached"].as_bool().unwrap(),
                p["why"].as_str().unwrap().to_string(),
                v["rates"]["local_backlog_packets"].as_u64().unwrap_or(0),
                v["held"]["verdict"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    eprintln!("(seq, measured, running next, why, backlog, held): {rows:#?}");
    assert!(!rows[1].2 && !rows[2].2, "running while idle: {rows:?}");
    let onset = rows
        .iter()
        .position(|r| r.2 && r.3.starts_with("b0's qdisc held "))
        .unwrap_or_else(|| panic!("b0's standing queue never ran them: {rows:?}"));
    let after = &rows[onset + 1..];
    assert!(
        after.len() >= 5,
        "too few intervals after the queue stood: {rows:?}"
    );
    for r in after {
        assert!(r.1, "not measured while the queue stood: {r:?}");
    }
    assert!(
        after.iter().filter(|r| r.4 > 0).count() * 2 > after.len(),
        "backlog seen in too few intervals: {rows:?}"
    );
    // Judged as with --per-packet always: local queuing held from a window
    // after the onset, never the hypervisor.
    let judged = &rows[onset + 4..rows.len() - 1];
    let local = judged.iter().filter(|r| r.5 == "local_queuing").count();
    assert!(local * 5 >= judged.len() * 4, "{rows:?}");
    assert!(
        !rows.iter().any(|r| r.5.starts_with("hypervisor")),
        "{rows:?}"
    );
}
