//! Microbursts (issue 24), end to end: the lab's `microburst` scenario (an
//! application writing 8 MB at once every second, a mean of 67 Mbit/s,
//! through a 200 Mbit/s shaper with a 32 kB bucket) and its control (the
//! same bytes written smoothly), with the real BPF programs and `watch
//! --json` in the broker namespace, against a packet capture of the same
//! interface.
//!
//! - Per interval, the kernel's `tx_peak_bps` is within 20% of the busiest
//!   window of the same length in the capture (tcpdump, outbound), in the
//!   bursts and in the control; the control's capture reads its busiest
//!   window within twice the interval's mean in at least 6 intervals.
//! - The bursts are held as hypervisor queuing after onset, the evidence
//!   naming the microburst and the bursting flow (the application's port),
//!   and so does the report of the recording; the control is free flow.
//!
//! Every interval's peak is compared with the capture, the control's quiet
//! ones too, so the per-packet programs run throughout (`--per-packet
//! always`): the default pauses them while no counter moves, and the bursts
//! are then caught from the interval after the first counted one
//! (tests/lab/per_packet.rs).

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::lab_support::Lab;
use crate::support::{binary, repo_root, run};
use serde_json::Value;

/// The port the lab's burst application listens on (tools/lab BURST_PORT).
const BURST_PORT: &str = ":5303";
/// Seconds of traffic, and of watching (one less: the traffic outlasts it).
const SECS: u32 = 12;

/// tcpdump of the broker interface's outbound frames into `pcap`; stopped
/// with SIGINT so it flushes and reports its drops.
fn capture(lab: &Lab, pcap: &Path) -> Child {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.broker(),
            "tcpdump",
            "-i",
            &lab.broker_if,
        ])
        // -Z root: writes where the test can (tcpdump drops to its own
        // user by default).
        .args([
            "-Q", "out", "-n", "-s", "96", "-B", "16384", "-Z", "root", "-w",
        ])
        .arg(pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning tcpdump (Debian package tcpdump; tools/setup installs it)")
}

fn stop_capture(child: Child) -> String {
    run(Command::new("kill").args(["-INT", &child.id().to_string()]));
    let out = child.wait_with_output().expect("tcpdump");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.lines()
            .any(|l| l.trim() == "0 packets dropped by kernel"),
        "the capture lost packets: its figures are no ground truth\n{err}"
    );
    err
}

/// The lab's burst traffic with `traffic` options, and `watch --json` in
/// the broker with `extra` options, stopped after `intervals` JSON lines;
/// returns its lines, the traffic running through all of them: the watch
/// starts once the traffic has flowed for 2 s (a first interval that holds
/// the client's connect and first burst read 28.8% where the others read
/// 85%, and the held verdict is asked from the fifth interval on), and the
/// traffic runs until the watch is stopped. Timed instead (traffic for a
/// fixed time, a watch of one second less), a watch slow to attach (its
/// duration counts from its attach) would end past the traffic, with idle
/// intervals judged.
fn watch_bursts(lab: &Lab, traffic: &[&str], extra: &[&str], intervals: u32) -> Vec<Value> {
    // A bound: the traffic is stopped once the intervals are read.
    let time = (intervals + 90).to_string();
    let mut args = vec!["traffic", "--time", &time];
    args.extend_from_slice(traffic);
    lab.tool(&args);
    // Every traffic here sends 8 MB a second or more; 1 MB is flowing.
    lab.until_sending(2, 1 << 20);
    let mut watch = lab.stream_watch_json_in_broker(extra);
    watch.attached();
    for _ in 1..intervals {
        watch.next(
            "with the bursts running",
            std::time::Duration::from_secs(10),
        );
    }
    // Every line it wrote (one more may have come before the stop), as
    // its recording holds them.
    let out = watch.stop();
    lab.tool(&["traffic", "--stop"]);
    out.lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Shapes the scenario, starts the emulator, a capture, and the traffic
/// (`traffic` options) under `watch --json --record` in the broker
/// (`watch_bursts`); returns the JSON lines.
fn observe(lab: &Lab, traffic: &[&str], pcap: &Path, recording: &Path) -> Vec<Value> {
    lab.tool(&["shape", "microburst"]);
    lab.tool(&["emulator", "start"]);
    let tcpdump = capture(lab, pcap);
    let rec = recording.display().to_string();
    let mut bursts = vec!["--bursts", "8M/1s"];
    bursts.extend_from_slice(traffic);
    let snaps = watch_bursts(
        lab,
        &bursts,
        &[
            "--interval",
            "1s",
            "--per-packet",
            "always",
            "--record",
            &rec,
        ],
        SECS - 1,
    );
    stop_capture(tcpdump);
    snaps
}

/// Per snapshot, the capture's busiest window of the snapshot's own peak
/// window (tools/lab.d/capture_peaks.py) and mean: (peak, mean) bits/s.
fn capture_peaks(pcap: &Path, snaps: &[Value], window_us: u64) -> Vec<(f64, f64)> {
    let intervals: Vec<[u64; 2]> = snaps
        .iter()
        .map(|s| {
            let end = s["unix_ms"].as_u64().unwrap() * 1_000_000;
            [end - s["interval_ns"].as_u64().unwrap(), end]
        })
        .collect();
    let mut child = Command::new("python3")
        .arg(repo_root().join("tools/lab.d/capture_peaks.py"))
        .arg(pcap)
        .arg(window_us.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    serde_json::to_writer(child.stdin.take().unwrap(), &intervals).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "capture_peaks.py failed");
    let v: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    v.iter()
        .map(|p| {
            (
                p["peak_bps"].as_f64().unwrap(),
                p["mean_bps"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn b0<'a>(lab: &Lab, snap: &'a Value) -> &'a Value {
    snap["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == lab.broker_if.as_str())
        .expect("the broker interface")
}

fn b0_verdict<'a>(lab: &Lab, snap: &'a Value) -> &'a Value {
    snap["analysis"]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["iface"] == lab.broker_if.as_str())
        .expect("the broker interface's verdict")
}

/// The intervals the comparison can use: the capture ran through all of
/// them (the first starts before tcpdump is up, the last may outlive the
/// traffic), and traffic flowed (the capture's mean within 5% of ours).
fn comparable(lab: &Lab, snaps: &[Value], cap: &[(f64, f64)]) -> Vec<(u64, f64, f64, f64)> {
    let mut rows = Vec::new();
    for (s, (cap_peak, cap_mean)) in snaps.iter().zip(cap).skip(1) {
        let i = b0(lab, s);
        let secs = s["interval_ns"].as_f64().unwrap() / 1e9;
        let mean = i["delta"]["tx_bytes"].as_f64().unwrap() * 8.0 / secs;
        if mean < 10e6 || (cap_mean - mean).abs() > 0.05 * mean {
            continue;
        }
        let peak = i["tx_peak_bps"].as_f64().expect("tx_peak_bps measured");
        rows.push((s["seq"].as_u64().unwrap(), peak, *cap_peak, mean));
    }
    rows
}

#[test]
fn microbursts_are_measured_in_the_kernel_and_held_as_the_hypervisor() {
    let _gate = crate::lab_support::gate::alone(
        "it judges bursts of milliseconds that a second lab's CPU would move",
    );
    let lab = Lab::up("mbu");
    // In the lab's own directory: removed with the lab, on failure too.
    let tmp = lab.dir.clone();

    // ---- the bursts: 8 MB at once every second
    let pcap = tmp.join("bursts.pcap");
    let rec = tmp.join("bursts.jsonl.zst");
    let snaps = observe(&lab, &[], &pcap, &rec);
    let window = b0(&lab, &snaps[1])["peak_window_us"]
        .as_u64()
        .expect("peak_window_us");
    let cap = capture_peaks(&pcap, &snaps, window);
    let rows = comparable(&lab, &snaps, &cap);
    eprintln!("bursts (seq, kernel peak, capture peak, mean): {rows:?}");
    assert!(rows.len() >= 6, "too few intervals to compare: {rows:?}");
    for (seq, peak, cap_peak, mean) in &rows {
        assert!(
            (peak - cap_peak).abs() <= 0.2 * cap_peak,
            "interval {seq}: tx_peak_bps {peak} not within 20% of the capture's {cap_peak}"
        );
        // A microburst indeed: the busiest window far above the mean.
        assert!(
            *peak >= 3.0 * mean,
            "interval {seq}: peak {peak}, mean {mean}"
        );
    }
    // What the emulator counted, per interval: a burst's queue drains in
    // ~340 ms, so 2 or 3 of its 100 ms sampling periods stand queued at both
    // ends whatever their phase (4 MB bursts, ~170 ms, held 0 or 1 by the
    // phase alone, which a loaded machine's start-up latency set to 0 for a
    // whole run once).
    let counted: Vec<Option<f64>> = snaps
        .iter()
        .map(|s| b0_verdict(&lab, s)["rates"]["bw_out_pct"].as_f64())
        .collect();
    eprintln!("bw_out_allowance_exceeded, % of wire packets per interval: {counted:?}");
    // Held as the hypervisor after onset (3 intervals of the window of 5),
    // naming the microburst and the application's flow.
    let held: Vec<(String, String)> = snaps
        .iter()
        .map(|s| {
            let h = &b0_verdict(&lab, s)["held"];
            (
                h["verdict"].as_str().unwrap().to_string(),
                h["note"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (v, note) in &held[4..] {
        assert_eq!(v, "hypervisor_queuing", "{held:?}");
        assert!(
            note.contains("in microbursts: the busiest") && note.contains(BURST_PORT),
            "{note}"
        );
    }
    // The report of the recording: the episode in microbursts, with its
    // peak and the bursting flow, and no enforcement.
    let report = run(Command::new(binary()).arg("report").arg(&rec));
    let text = String::from_utf8_lossy(&report.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("hypervisor_queuing") && l.contains("in microbursts (peak "))
        .unwrap_or_else(|| panic!("no microburst episode in the report:\n{text}"));
    assert!(
        text.contains("flows bursting: ") && text.contains(BURST_PORT),
        "{line}\n{text}"
    );
    assert!(!text.contains("enforcement ("), "{text}");

    // ---- the control: the same bytes written smoothly
    let pcap = tmp.join("smooth.pcap");
    let rec = tmp.join("smooth.jsonl.zst");
    let snaps = observe(&lab, &["--smooth"], &pcap, &rec);
    let cap = capture_peaks(&pcap, &snaps, window);
    let rows = comparable(&lab, &snaps, &cap);
    eprintln!("smooth (seq, kernel peak, capture peak, mean): {rows:?}");
    assert!(rows.len() >= 6, "too few intervals to compare: {rows:?}");
    // The kernel's peak is the capture's, as in the bursts. The sender is
    // smooth at the window's scale only as far as the machine lets it: a
    // run on this 2-core machine had the capture's busiest 10 ms at 2.2x the
    // mean in one interval of ten (148 Mbit/s against 67, the kernel's
    // 148 too: what waited sent at once). So the smoothness is asked of
    // the capture (the lab's traffic, the control's premise) in most
    // intervals, and of the kernel through its agreement with the capture.
    for (seq, peak, cap_peak, _) in &rows {
        assert!(
            (peak - cap_peak).abs() <= 0.2 * cap_peak,
            "interval {seq}: tx_peak_bps {peak} not within 20% of the capture's {cap_peak}"
        );
    }
    let smooth = rows
        .iter()
        .filter(|(_, _, cap_peak, mean)| *cap_peak <= 2.0 * mean)
        .count();
    assert!(
        smooth >= 6,
        "the control's traffic was smooth (the capture's busiest window within twice the mean) in only {smooth} intervals: {rows:?}"
    );
    for s in &snaps {
        let v = b0_verdict(&lab, s);
        assert_eq!(v["held"]["verdict"], "free_flow", "{v}");
        assert!(!v.to_string().contains("microburst"), "{v}");
    }
}

/// "Why does my counter rise at a low average?" (issue 42): 3 MB at once
/// every 330 ms through the same shaper, every seventh burst 9 MB, a mean
/// of 75-130 Mbit/s a second (under the shaper's rate); the counter rises
/// at about 25% of the wire packets, and at 60-76% in the second of a 9 MB
/// burst, single seconds between ordinary ones (up to three in five).
/// Free flow is held in every interval; every interval whose counter rose
/// under the line while it microbursted says so, with the busiest window
/// against the mean and the application's flow, in `--json`, in the plain
/// view (the recording replayed through it) and in the report.
#[test]
fn counters_rising_under_the_line_in_bursts_stay_free_flow_and_say_why() {
    let _gate = crate::lab_support::gate::alone(
        "it judges bursts of milliseconds that a second lab's CPU would move",
    );
    let lab = Lab::up("mbl");
    let rec = lab.dir.join("low.jsonl.zst");
    lab.tool(&["shape", "microburst"]);
    lab.tool(&["emulator", "start"]);
    // One 9 MB burst in ten: the seconds it lands in read 55-75% (single
    // seconds at the line), the others 23-26%. One in seven put it in
    // about half the seconds of a loaded run, and only 7 of 15 read
    // 10-40% (a CI rehearsal).
    let bursts = "3M,3M,3M,3M,3M,3M,3M,3M,3M,9M/330ms";
    let snaps = watch_bursts(
        &lab,
        &["--bursts", bursts],
        &[
            "--interval",
            "1s",
            "--per-packet",
            "always",
            "--record",
            &rec.display().to_string(),
        ],
        SECS + 3,
    );

    let mut rows = Vec::new();
    let mut explained = 0;
    for s in &snaps {
        let v = b0_verdict(&lab, s);
        let r = &v["rates"];
        let pct = r["bw_out_pct"].as_f64().unwrap_or(0.0);
        let mean = r["tx_bps"].as_f64().unwrap();
        let times = r["tx_peak_bps"].as_f64().map(|p| p / mean);
        rows.push((s["seq"].as_u64().unwrap(), pct, mean, times));
        assert_eq!(v["held"]["verdict"], "free_flow", "{rows:?}\n{v}");
        let line = v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["signal"] == "counters_in_microbursts");
        // Every interval whose counter rose under the line while it
        // microbursted (3x its mean) says so, and no other.
        let due = pct > 0.0 && pct < 50.0 && times.is_some_and(|t| t >= 3.0) && mean > 10e6;
        assert_eq!(line.is_some(), due, "{rows:?}\n{v}");
        if let Some(e) = line {
            explained += 1;
            let note = e["note"].as_str().unwrap();
            assert!(
                note.starts_with(
                    "allowance counters rose in microbursts: bw_out_allowance_exceeded at "
                ) && note.contains("the busiest ")
                    && note.contains("the interval's mean of ")
                    && note.contains(BURST_PORT),
                "{note}"
            );
            // The held free flow says it too.
            let held = v["held"]["note"].as_str().unwrap();
            assert!(held.contains(note), "{held}");
        }
    }
    eprintln!("low mean in bursts (seq, bw_out %, mean bits/s, peak/mean): {rows:?}");
    // The counter rose at 10-40% in a third of the intervals or more (9 of
    // 15 in two runs, 7 in a loaded one), and single seconds reached the
    // line, judged hypervisor queuing alone: the cases at hand.
    let low = rows.iter().filter(|r| (10.0..=40.0).contains(&r.1)).count();
    assert!(low * 3 >= rows.len(), "{rows:?}");
    let alone = snaps
        .iter()
        .filter(|s| b0_verdict(&lab, s)["verdict"] == "hypervisor_queuing")
        .count();
    assert!(alone >= 1, "no second at the line: {rows:?}");
    assert!(
        explained * 3 >= rows.len(),
        "{explained} explained: {rows:?}"
    );

    // The plain view, as `watch` draws it: the recording replayed.
    let plain = run(Command::new(binary())
        .args(["replay", "--plain", "--as-fast-as-possible"])
        .arg(&rec));
    let plain = String::from_utf8_lossy(&plain.stdout);
    let said = plain
        .lines()
        .filter(|l| {
            l.contains("=> free_flow")
                && l.contains(
                    "allowance counters rose in microbursts: bw_out_allowance_exceeded at ",
                )
        })
        .count();
    assert_eq!(said, explained, "{plain}");
    assert!(!plain.contains("=> hypervisor"), "{plain}");

    // The report: one free-flow episode whose intervals said so.
    let report = run(Command::new(binary()).arg("report").arg(&rec));
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains(&format!(
            "in {explained} of {} intervals, allowance counters rose in microbursts: ",
            snaps.len()
        )) && text.contains(BURST_PORT),
        "{text}"
    );
    assert!(!text.contains("hypervisor_queuing (confidence"), "{text}");
    let json = run(Command::new(binary()).args(["report", "--json"]).arg(&rec));
    let r: Value = serde_json::from_slice(&json.stdout).unwrap();
    let ep = r["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["iface"] == lab.broker_if.as_str() && e["verdict"] == "free_flow")
        .unwrap_or_else(|| panic!("{r}"));
    assert_eq!(
        ep["counters_in_microbursts"]["intervals"], explained,
        "{ep}"
    );
}
