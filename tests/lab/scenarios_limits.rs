//! Scenario tests for the hypervisor's non-bandwidth allowances: real TCP
//! traffic through the lab (tools/lab), the limit enforced in the hv
//! namespace, ENA counters from the emulator's `ethtool -S` file, and
//! `throttlescope watch --json` in the broker namespace.
//!
//! - `pps_limit`: one tbf on an ifb in hv, fed by both directions, charges
//!   every packet a full frame (20,000 packets/s); the broker sends the
//!   smallest TCP segments Linux makes.
//! - `conntrack_limit`: nftables `ct count over 1000` in hv drops new
//!   connections; a churner in the client opens 400 connections a second to
//!   a listener in the broker, each held 3 s (~1,200 wanted at once). The
//!   same churn at 200 a second held 1 s (~200 at once) stays under the
//!   allowance and must not be judged a conntrack limit.
//!
//! As in tests/lab/scenarios.rs: over the limited phase (intervals after the
//! first) the verdict is the right one in at least 60% of intervals and never
//! of the queuing or drop family. The emulated counter is checked against the
//! limiter's own counter (tc for the shaper, nft for the rule).

use std::time::{Duration, Instant};

use crate::lab_support::{check_verdicts, interface_analyses, verdict_family, Lab};
use serde_json::Value;
use throttlescope::analysis::VerdictFamily;

/// What `watch --json` said about the broker interface `b0` in one interval.
#[derive(Debug)]
struct B0Interval {
    verdict: String,
    pps_pct: Option<f64>,
    pps_exceeded: Option<u64>,
    bw_out_exceeded: Option<u64>,
    conntrack_exceeded: Option<u64>,
    conntrack_available: Option<u64>,
    /// The deciding evidence's note.
    note: String,
    /// Why the interval's allowance read was not judged, when it was not
    /// (the `allowance_untrusted` evidence).
    untrusted: Option<String>,
}

fn b0_intervals(lines: &str) -> Vec<B0Interval> {
    interface_analyses(lines, "b0")
        .iter()
        .filter_map(|i| {
            let r = &i["rates"];
            Some(B0Interval {
                verdict: i["verdict"].as_str()?.to_string(),
                pps_pct: r["pps_pct"].as_f64(),
                pps_exceeded: r["pps_exceeded"].as_u64(),
                bw_out_exceeded: r["bw_out_exceeded"].as_u64(),
                conntrack_exceeded: r["conntrack_exceeded"].as_u64(),
                conntrack_available: r["conntrack_available"].as_u64(),
                note: i["evidence"][0]["note"].as_str().unwrap_or("").to_string(),
                untrusted: i["evidence"]
                    .as_array()
                    .and_then(|ev| ev.iter().find(|e| e["signal"] == "allowance_untrusted"))
                    .and_then(|e| e["note"].as_str())
                    .map(str::to_string),
            })
        })
        .collect()
}

/// The limited phase: never judged queuing or drop.
fn check(scenario: &str, intervals: &[B0Interval], expected: &str) {
    let names: Vec<&str> = intervals.iter().map(|i| i.verdict.as_str()).collect();
    check_verdicts(scenario, &names, expected, |v| {
        matches!(
            verdict_family(v),
            VerdictFamily::Queuing | VerdictFamily::Drop
        )
    });
}

/// One stat of the emulated `ethtool -S b0` file.
fn counter(lab: &Lab, name: &str) -> u64 {
    let path = lab.counters.display();
    let text = std::fs::read_to_string(&lab.counters).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .find_map(|l| {
            let (k, v) = l.trim().split_once(": ")?;
            (k == name).then(|| v.parse().expect("u64 value"))
        })
        .unwrap_or_else(|| panic!("{name} missing from {path}"))
}

/// The pps shaper's own count: packets its tbf (root of ifb `pp` in hv)
/// sent plus dropped.
fn pps_shaper_packets(lab: &Lab) -> u64 {
    let out = lab.exec(&lab.hv(), "tc", &["-s", "-j", "qdisc", "show", "dev", "pp"]);
    let qs: Value = serde_json::from_str(&out).expect("tc -j output");
    let q = qs
        .as_array()
        .and_then(|a| a.iter().find(|q| q["root"] == true))
        .unwrap_or_else(|| panic!("no root qdisc on hv pp: {out}"));
    q["packets"].as_u64().unwrap() + q["drops"].as_u64().unwrap()
}

/// Packets the conntrack_limit rule (table inet lab_ct in hv) dropped.
fn ct_rule_dropped(lab: &Lab) -> u64 {
    let out = lab.exec(&lab.hv(), "nft", &["-j", "list", "table", "inet", "lab_ct"]);
    let v: Value = serde_json::from_str(&out).expect("nft -j output");
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["rule"]["expr"].as_array())
        .flatten()
        .filter_map(|e| e["counter"]["packets"].as_u64())
        .sum()
}

/// Waits (at most 20 s, else fails) until the lab's traffic client exited,
/// then until the emulator has written its last sample: the counters file
/// unchanged over two of its periods (100 ms each; a fixed 400 ms is short
/// of that when the emulator is starved on a loaded machine).
fn wait_traffic_done(lab: &Lab) {
    let pidfile = lab.dir.join("traffic-client.pid");
    let pid = std::fs::read_to_string(&pidfile).expect("traffic pid file");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::path::Path::new(&format!("/proc/{}", pid.trim())).exists() {
        assert!(
            Instant::now() < deadline,
            "traffic still running after 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The `*_exceeded` counters only: the available figures move on as
    // tracked connections expire.
    let exceeded = || -> String {
        std::fs::read_to_string(&lab.counters)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("_exceeded:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = exceeded();
    let mut unchanged = 0;
    while unchanged < 2 {
        std::thread::sleep(Duration::from_millis(250));
        let now = exceeded();
        unchanged = if now == last && !now.is_empty() {
            unchanged + 1
        } else {
            0
        };
        last = now;
        assert!(
            Instant::now() < deadline,
            "the emulated counters still moving 10 s after the traffic ended"
        );
    }
}

/// `watch --json` in the broker, 1 s intervals, stopped after its first
/// `n`: b0's intervals. The caller's traffic runs past them (a watch timed
/// to end with it, whose duration counts from its attach, would end past
/// it when slow to attach, with idle intervals judged).
fn watch_intervals(lab: &Lab, n: u32) -> Vec<B0Interval> {
    let mut watch = lab.stream_watch_json_in_broker(&["--interval", "1s"]);
    let mut lines = watch.attached();
    lines.push('\n');
    for _ in 1..n {
        lines += &watch.next("with the traffic running", Duration::from_secs(10));
        lines.push('\n');
    }
    watch.stop();
    b0_intervals(&lines)
}

/// `watch --json` in the broker, 1 s intervals: once it has attached (its
/// first interval, left out) `start` starts `secs` of traffic, and the
/// `secs - 1` intervals after are b0's. A watch timed to follow the
/// traffic (its duration counts from its attach) would end past it when
/// slow to attach, with idle intervals judged.
fn watch_from_attach(lab: &Lab, secs: u32, start: impl FnOnce()) -> Vec<B0Interval> {
    let mut watch = lab.stream_watch_json_in_broker(&["--interval", "1s"]);
    watch.attached();
    start();
    let mut lines = String::new();
    for _ in 1..secs {
        lines += &watch.next("with the traffic running", Duration::from_secs(10));
        lines.push('\n');
    }
    watch.stop();
    b0_intervals(&lines)
}

#[test]
fn pps_limit_is_judged_pps_limit() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("pp");
    lab.tool(&["shape", "pps_limit"]);
    lab.tool(&["emulator", "start"]);
    let (pps0, shaper0, bw0) = (
        counter(&lab, "pps_allowance_exceeded"),
        pps_shaper_packets(&lab),
        counter(&lab, "bw_out_allowance_exceeded"),
    );
    // The smallest segments Linux sends (MSS 88), one per write: unshaped
    // the broker sends ~150,000 of them a second here, far over 20,000.
    let secs = 10;
    let v = watch_from_attach(&lab, secs, || {
        lab.tool(&[
            "traffic",
            "--time",
            &secs.to_string(),
            "--mss",
            "88",
            "--len",
            "88",
            "--nodelay",
        ]);
    });
    wait_traffic_done(&lab);
    for i in &v {
        eprintln!(
            "pps_limit: {} pps_pct {:?} pps_exceeded {:?}",
            i.verdict, i.pps_pct, i.pps_exceeded
        );
    }
    check("pps_limit", &v, "pps_limit");
    // Small whole segments, not fragments (which have a limit of their
    // own): the evidence says so.
    for i in v.iter().filter(|i| i.verdict == "pps_limit") {
        assert!(i.note.contains("no IPv4 fragments sent"), "{}", i.note);
        // Who carries the packets (issue 45): iperf3's flows of 76-byte
        // segments, named by their segments both ways, small packets the
        // cause.
        assert!(
            i.note.contains("packets carried by: 10.77.1.1:")
                && i.note.contains("iperf3/")
                && i.note.contains(", small)")
                && i.note.contains("small packets are the cause"),
            "{}",
            i.note
        );
    }

    let emulated = counter(&lab, "pps_allowance_exceeded") - pps0;
    let shaper = pps_shaper_packets(&lab) - shaper0;
    eprintln!(
        "pps_limit: emulated pps_allowance_exceeded +{emulated}, shaper sent + dropped +{shaper}"
    );
    // Under enforcement every packet through the shaper waits in its queue
    // (or is dropped), so the emulated "queued or dropped" count is the
    // shaper's packet count, less the periods at the start and end where the
    // queue was not standing at both sampling instants: within 10%.
    assert!(shaper > 50_000, "the shaper saw only {shaper} packets");
    assert!(
        crate::lab_support::close_to(emulated as f64, shaper as f64, 0.10, 0.0),
        "emulated pps_allowance_exceeded +{emulated} vs shaper sent + dropped +{shaper}"
    );
    // The pps shaper is not a bandwidth shaper: nothing counted as bw_out.
    assert_eq!(counter(&lab, "bw_out_allowance_exceeded") - bw0, 0);
    assert!(v.iter().all(|i| i.bw_out_exceeded.unwrap_or(0) == 0));
}

/// Shapes conntrack_limit (allowance 1,000), churns `rate` connections a
/// second each held `hold` seconds, and watches the broker for `secs - 1`
/// intervals; the churn runs 6 s longer, so that it runs through all of
/// them, and ends by itself (its result is written at its end).
/// Returns the intervals, the emulated and the rule's drop counts over the
/// run, and the churner's result.
fn churn_under_conntrack_limit(
    lab: &Lab,
    rate: &str,
    hold: &str,
    secs: u32,
) -> (Vec<B0Interval>, u64, u64, Value) {
    lab.tool(&["shape", "conntrack_limit"]);
    lab.tool(&["emulator", "start"]);
    // Nothing tracked yet: the whole allowance is available.
    assert_eq!(counter(lab, "conntrack_allowance_available"), 1000);
    let (ct0, rule0) = (
        counter(lab, "conntrack_allowance_exceeded"),
        ct_rule_dropped(lab),
    );
    lab.tool(&[
        "traffic",
        "--time",
        &(secs + 6).to_string(),
        "--churn",
        rate,
        "--hold",
        hold,
    ]);
    let v = watch_intervals(lab, secs - 1);
    wait_traffic_done(lab);
    for i in &v {
        eprintln!(
            "churn {rate}/s held {hold} s: {} exceeded {:?} available {:?}{}",
            i.verdict,
            i.conntrack_exceeded,
            i.conntrack_available,
            i.untrusted
                .as_deref()
                .map(|u| format!(" (not judged: {u})"))
                .unwrap_or_default()
        );
    }
    let emulated = counter(lab, "conntrack_allowance_exceeded") - ct0;
    let rule = ct_rule_dropped(lab) - rule0;
    let path = lab.dir.join("churn-client.json");
    let churn: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .expect("churn JSON");
    eprintln!(
        "churn {rate}/s held {hold} s: emulated conntrack_allowance_exceeded +{emulated}, rule dropped +{rule}, churn {churn}"
    );
    (v, emulated, rule, churn)
}

#[test]
fn conntrack_limit_is_judged_conntrack_limit() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ct");
    // 400 connections a second held 3 s: ~1,200 wanted at once, 1,000
    // allowed.
    let (v, emulated, rule, churn) = churn_under_conntrack_limit(&lab, "400", "3", 10);
    check("conntrack_limit", &v, "conntrack_limit");
    // The gauge is read in every interval, and while connections are refused
    // it is near 0 (at most the default `conntrack_available_low`, 100).
    assert!(
        v.iter().all(|i| i.conntrack_available.is_some()),
        "conntrack_allowance_available missing: {v:?}"
    );
    let refused: Vec<_> = v
        .iter()
        .filter(|i| i.conntrack_exceeded.unwrap_or(0) > 0)
        .collect();
    assert!(
        refused.len() >= 5,
        "too few intervals refused connections: {v:?}"
    );
    for i in &refused {
        assert!(
            i.conntrack_available.unwrap() <= 100,
            "connections refused with {} entries available",
            i.conntrack_available.unwrap()
        );
    }
    // Who opens the flows (issue 45): the churn server in the broker
    // accepts every connection, so its process is named.
    for i in v.iter().filter(|i| i.verdict == "conntrack_limit") {
        assert!(
            i.note.contains(" tcp ") && i.note.contains("python3/"),
            "{}",
            i.note
        );
    }
    // The emulator reads the rule's counter: after the traffic they agree
    // exactly (hv's own conntrack table never overflowed).
    assert_eq!(emulated, rule);
    // Independent of both: every connect the churner gave up on had at least
    // its first SYN dropped by the rule...
    let timed_out = churn["timed_out"].as_u64().unwrap();
    assert!(timed_out > 0, "no connection was refused: {churn}");
    assert!(
        rule >= timed_out,
        "rule dropped {rule} packets but {timed_out} connects timed out"
    );
    // ...and the others got through: the limit refuses, it does not stop.
    assert!(churn["answered"].as_u64().unwrap() > 0);
}

#[test]
fn churn_under_the_conntrack_allowance_is_not_a_limit() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("cu");
    // 200 connections a second held 1 s: ~200 tracked of 1,000.
    let (v, emulated, rule, churn) = churn_under_conntrack_limit(&lab, "200", "1", 10);
    assert!(v.len() >= 6, "too few intervals: {v:?}");
    let judged: Vec<&str> = v.iter().skip(1).map(|i| i.verdict.as_str()).collect();
    assert!(
        judged.iter().all(|v| *v != "conntrack_limit"),
        "judged conntrack_limit under the allowance: {judged:?}"
    );
    // The gauge shows the headroom: ~800 of 1,000 while ~200 are open.
    let available: Vec<u64> = v
        .iter()
        .skip(1)
        .filter_map(|i| i.conntrack_available)
        .collect();
    assert!(
        available.len() == judged.len() && available.iter().all(|a| (600..1000).contains(a)),
        "conntrack_allowance_available outside 600..1000 while ~200 are open: {available:?}"
    );
    assert_eq!((emulated, rule), (0, 0));
    assert_eq!(churn["timed_out"].as_u64(), Some(0), "{churn}");
}

/// Intervals the gauge stands still before the churn starts: the trend's
/// whole window (30 intervals), as on a host watched for a while before its
/// table fills.
const FORECAST_PLATEAU_INTERVALS: usize = 30;
/// The churn of the forecast run: 50 connections a second, each held 40 s,
/// for 24 s: the 1,000 entries fill in ~20 s at a steady 50 a second.
const FORECAST_CHURN: (&str, &str, u32) = ("50", "40", 24);

/// The median of `v` (sorted here), 0 when empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The exhaustion forecast against the emulated table (issue 45, item 2):
/// the gauge stands at 1,000 for the trend's whole window, then a churn
/// fills the table at ~50 entries a second until none is available. Each
/// interval's forecast (`conntrack_trend.zero_in_s` from its end) is
/// compared with when the emulator's gauge first read 0 (the counters file
/// polled every 20 ms on the same clock). Prints the error per interval and
/// its median and worst, by how long before exhaustion the forecast was
/// made; asserts only that the run is one to measure: the gauge read in
/// every interval, reaching 0, and forecasts given before it did.
#[test]
fn the_conntrack_exhaustion_forecast_is_measured_against_the_table() {
    let _gate = crate::lab_support::gate::shared();
    use std::io::{BufRead, BufReader};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let lab = Lab::up("cf");
    lab.tool(&["shape", "conntrack_limit"]);
    lab.tool(&["emulator", "start"]);
    assert_eq!(counter(&lab, "conntrack_allowance_available"), 1000);
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (stop, path) = (stop.clone(), lab.counters.clone());
        std::thread::spawn(move || {
            let mut read = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let gauge = text.lines().find_map(|l| {
                    l.trim()
                        .strip_prefix("conntrack_allowance_available: ")?
                        .parse::<u64>()
                        .ok()
                });
                if let Some(g) = gauge {
                    read.push((throttlescope::shared::clock::monotonic_ns(), g));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            read
        })
    };
    let (rate, hold, churn_secs) = FORECAST_CHURN;
    // The table is full ~20 s into the churn; the watch goes on 6 s past
    // its end.
    let secs = FORECAST_PLATEAU_INTERVALS as u32 + churn_secs + 6;
    let mut watch = lab.spawn_watch_json_in_broker(&format!("{secs}s"), &["--interval", "1s"]);
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    let mut out = String::new();
    for _ in 0..FORECAST_PLATEAU_INTERVALS {
        out += &(lines.next().expect("an interval").unwrap() + "\n");
    }
    let churn_ns = throttlescope::shared::clock::monotonic_ns();
    lab.tool(&[
        "traffic",
        "--time",
        &churn_secs.to_string(),
        "--churn",
        rate,
        "--hold",
        hold,
    ]);
    for l in lines {
        out += &(l.unwrap() + "\n");
    }
    assert!(watch.wait().unwrap().success(), "watch exited well");
    stop.store(true, Ordering::Relaxed);
    let gauge = poller.join().unwrap();

    // When the table was full: the gauge's first 0 after the churn started.
    let zero_ns = gauge
        .iter()
        .find(|(t, g)| *t > churn_ns && *g == 0)
        .map(|(t, _)| *t)
        .unwrap_or_else(|| panic!("the gauge never read 0: {:?}", gauge.last()));
    let at = |ns: u64| (ns as f64 - churn_ns as f64) / 1e9;
    // The fall's own rate, from the polled gauge: 900 to 100.
    let first_under = |level: u64| {
        gauge
            .iter()
            .find(|(t, g)| *t > churn_ns && *g <= level)
            .unwrap()
    };
    let (t9, g9) = first_under(900);
    let (t1, g1) = first_under(100);
    eprintln!(
        "forecast: churn {rate}/s held {hold} s after {FORECAST_PLATEAU_INTERVALS} still \
         intervals; the gauge fell {:.1}/s (from {g9} at {:.2} s to {g1} at {:.2} s) and read 0 \
         at {:.2} s",
        (*g9 - *g1) as f64 / ((*t1 - *t9) as f64 / 1e9),
        at(*t9),
        at(*t1),
        at(zero_ns)
    );

    // (seconds before exhaustion, error in s) per interval forecast.
    let mut errors = Vec::new();
    let mut read_every = true;
    for l in out.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        let end_ns = v["mono_ns"].as_u64().unwrap();
        let Some(a) = v["analysis"]["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["iface"] == "b0")
        else {
            continue;
        };
        let t = &a["rates"]["conntrack_trend"];
        read_every &= !t.is_null();
        let Some(z) = t["zero_in_s"].as_f64() else {
            eprintln!(
                "forecast: {:7.2} s {} available {} no forecast ({} /s over {} intervals)",
                at(end_ns),
                a["verdict"],
                t["available"],
                t["per_s"],
                t["intervals"]
            );
            continue;
        };
        let lead = (zero_ns as f64 - end_ns as f64) / 1e9;
        let err = at(end_ns) + z - at(zero_ns);
        eprintln!(
            "forecast: {:7.2} s {} available {} falling {:.1}/s over {} intervals: zero in \
             {z:.1} s, at {:.2} s; {lead:.2} s before it did: error {err:+.2} s ({:+.0}%)",
            at(end_ns),
            a["verdict"],
            t["available"],
            -t["per_s"].as_f64().unwrap(),
            t["intervals"],
            at(end_ns) + z,
            err * 100.0 / lead
        );
        if lead > 0.0 && t["available"].as_u64().unwrap() > 0 {
            errors.push((lead, err));
        }
    }
    for (name, lo, hi) in [
        ("all", 0.0, f64::MAX),
        ("over 10 s before", 10.0, f64::MAX),
        ("5-10 s before", 5.0, 10.0),
        ("under 5 s before", 0.0, 5.0),
    ] {
        let these: Vec<_> = errors
            .iter()
            .filter(|(lead, _)| *lead > lo && *lead <= hi)
            .collect();
        let mut abs: Vec<f64> = these.iter().map(|(_, e)| e.abs()).collect();
        let mut rel: Vec<f64> = these.iter().map(|(l, e)| e.abs() * 100.0 / l).collect();
        let worst = abs.iter().copied().fold(0.0, f64::max);
        let worst_rel = rel.iter().copied().fold(0.0, f64::max);
        eprintln!(
            "forecast error, {name}: {} intervals, median {:.2} s ({:.0}%), worst {worst:.2} s \
             ({worst_rel:.0}%)",
            these.len(),
            median(&mut abs),
            median(&mut rel)
        );
    }
    assert!(
        read_every,
        "an interval without conntrack_allowance_available"
    );
    assert!(
        errors.len() >= 5,
        "too few forecasts before the table was full: {errors:?}"
    );
}

/// Issue 45, item 2, UDP: a DNS retry storm fills the table. A workload in
/// the broker sends 600 queries a second to the client, each from a new
/// socket (`dns_loop.py ... new`: a new source port, so a new tracked flow,
/// per query); hv's `ct count over 1000` rule refuses new flows once 1,000
/// are tracked (unanswered UDP stays tracked 30 s), in ~2 s. Every
/// `conntrack_limit` interval names the workload's process first, as a UDP
/// opener, and its sockets per second are within 5% of the rate the
/// workload itself reports (queries sent over its run: independent of the
/// probes). Without the UDP socket count the verdict names no UDP opener.
/// ICMP beside it: a loop pinging 200 times a second, each echo from a new
/// raw ICMP socket with a new identifier (`ping_loop.py`), is named second,
/// as an ICMP opener, within 5% of the echoes it sent, and so is the
/// interval's ICMP total.
#[test]
fn conntrack_limit_names_the_udp_retry_storm_first_and_the_ping_loop() {
    let _gate = crate::lab_support::gate::shared();
    udp_and_icmp_openers_named(false);
}

/// The same from a pod (`tools/lab pod`, forwarded and masqueraded out of
/// b0), watched from the broker with --all-netns: the pod's sockets fill
/// the table its node's interface leads to, and are named. Another lab's
/// DNS storm runs beside it: that namespace has no veth into the broker's,
/// its packets never pass through it, and its sockets must not be counted
/// (--all-netns sees them; they counted before namespaces were checked for
/// a path). Beside other tests: theirs are other labs' too.
#[test]
fn conntrack_limit_names_a_pods_udp_retry_storm_with_all_netns() {
    let _gate = crate::lab_support::gate::shared();
    let other = Lab::up("cpo");
    let decoy = std::process::Command::new("ip")
        .args(["netns", "exec", &other.broker(), "python3"])
        .arg(crate::support::repo_root().join("tools/lab.d/dns_loop.py"))
        .args([&other.client_ip, "300", "12", "new"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("another lab's DNS storm");
    let decoy_pid = decoy.id();
    let owners = udp_and_icmp_openers_named(true);
    let mut decoy = decoy;
    let _ = decoy.wait();
    let theirs = format!("python3/{decoy_pid}");
    assert!(
        !owners.contains(&theirs),
        "another lab's storm ({theirs}) counted among the pod's node's openers: {owners:?}"
    );
}

/// A DNS retry storm and a ping loop in the broker, or in a pod behind it
/// (`pod`, watched with --all-netns), under the conntrack limit. Returns
/// every opener the `conntrack_limit` intervals listed.
fn udp_and_icmp_openers_named(pod: bool) -> Vec<String> {
    let lab = Lab::up(if pod { "cp" } else { "cu" });
    if pod {
        lab.tool(&["pod"]);
    }
    let ns = if pod { lab.pod() } else { lab.broker() };
    lab.tool(&["shape", "conntrack_limit"]);
    lab.tool(&["emulator", "start"]);
    let (secs, send_secs, rate, ping_rate) = (10u32, 12u32, 600u32, 200u32);
    // Beside the DNS retry storm, a health checker pinging in a loop: a
    // raw ICMP socket and a new echo identifier (a new tracked flow) each.
    let workload = |script: &str, rate: u32, extra: &[&str]| {
        std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "python3"])
            .arg(crate::support::repo_root().join("tools/lab.d").join(script))
            .args([&lab.client_ip, &rate.to_string(), &send_secs.to_string()])
            .args(extra)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{script}: {e}"))
    };
    let dns = workload("dns_loop.py", rate, &["new"]);
    let ping = workload("ping_loop.py", ping_rate, &[]);
    let (pid, ping_pid) = (dns.id(), ping.id());
    let mut extra = vec!["--interval", "1s"];
    if pod {
        extra.push("--all-netns");
    }
    let v = lab.watch_json_in_broker(&format!("{}s", secs - 1), &extra);
    let per_s = |child: std::process::Child, what: &str| -> f64 {
        let out = child.wait_with_output().expect(what);
        let sent: f64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{what} prints what it sent"));
        sent / f64::from(send_secs)
    };
    let (measured, ping_measured) = (per_s(dns, "dns_loop.py"), per_s(ping, "ping_loop.py"));
    let lines = String::from_utf8_lossy(&v);
    let ifaces = interface_analyses(&lines, "b0");
    let mut judged = Vec::new();
    let mut listed = Vec::new();
    for i in &ifaces {
        let verdict = i["verdict"].as_str().unwrap_or("").to_string();
        let o = &i["rates"]["conntrack_openers"];
        if let Some(owners) = o["owners"].as_array() {
            listed.extend(
                owners
                    .iter()
                    .filter_map(|w| w["owner"].as_str().map(String::from)),
            );
        }
        let note = i["evidence"][0]["note"].as_str().unwrap_or("").to_string();
        eprintln!("udp and icmp storm: {verdict}: {note}");
        judged.push(verdict.clone());
        if verdict != "conntrack_limit" {
            continue;
        }
        let first = &o["owners"][0];
        assert_eq!(
            (first["owner"].as_str(), first["proto"].as_str()),
            (Some(format!("python3/{pid}").as_str()), Some("udp")),
            "{o}"
        );
        let ours = first["opened_per_s"].as_f64().unwrap();
        assert!(
            (ours - measured).abs() <= 0.05 * measured,
            "the workload's sockets {ours}/s, it sent {measured}/s: {o}"
        );
        assert!(note.contains(&format!("python3/{pid} udp ")), "{note}");
        // The ping loop second, as ICMP, at the rate it pinged.
        let second = &o["owners"][1];
        assert_eq!(
            (second["owner"].as_str(), second["proto"].as_str()),
            (Some(format!("python3/{ping_pid}").as_str()), Some("icmp")),
            "{o}"
        );
        let pings = second["opened_per_s"].as_f64().unwrap();
        assert!(
            (pings - ping_measured).abs() <= 0.05 * ping_measured,
            "the ping loop's sockets {pings}/s, it pinged {ping_measured}/s: {o}"
        );
        let icmp = o["icmp_per_s"].as_f64().expect("ICMP measured");
        assert!(
            (icmp - ping_measured).abs() <= 0.05 * ping_measured,
            "ICMP sockets {icmp}/s, the ping loop {ping_measured}/s: {o}"
        );
        assert!(
            note.contains(&format!("python3/{ping_pid} icmp ")),
            "{note}"
        );
    }
    let names: Vec<&str> = judged.iter().map(String::as_str).collect();
    check(
        "conntrack_limit (UDP and ICMP)",
        &b0_intervals(&lines),
        "conntrack_limit",
    );
    eprintln!(
        "udp and icmp storm: {names:?}; the workloads sent {measured}/s and pinged \
         {ping_measured}/s for {send_secs} s"
    );
    listed
}
