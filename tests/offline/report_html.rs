//! `report --html` in a real browser: a realistic hand-built report (300
//! one-second intervals, two ENA interfaces, a bandwidth enforcement
//! episode, three flows) is rendered to a file and opened by Debian's
//! headless Chromium, which dumps the DOM it parsed and takes a screenshot.
//! The DOM must hold every chart with its series and bands (and no element
//! made from recording text); the screenshot must be a real picture with
//! the band and series colours in it. A second test does the same with the
//! report of a real lab recording (burst then enforcement), made by the CLI,
//! and holds the page to what the report's JSON says.
//!
//! Chromium is installed by tools/setup: when it is missing the test fails.
//! `KEEP_REPORT_HTML=DIR` keeps the page and the screenshot in DIR.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/report_html.rs.

use std::collections::BTreeMap;
use std::fs::{self};
use std::path::Path;

use crate::support::report_html::{
    bands, chromium, element, measure_screenshot, path_points, screenshot, series_paths,
    verdict_colour, CHARTS,
};
use crate::support::TempDir;
use throttlescope::analysis::{Episode, Evidence, Thresholds, Verdict};
use throttlescope::model::snapshot::Owner;
use throttlescope::record::InterfaceInfo;
use throttlescope::report::html;
use throttlescope::report::model::*;

const HOSTILE: &str = "<script>alert(1)</script>";
const INTERVALS: usize = 300;

#[test]
fn chromium_renders_the_report() {
    let dir = TempDir::new("report-html");
    let page = dir.0.join("report.html");
    fs::write(&page, html::render(&enforcement_report())).unwrap();

    // The DOM as Chromium parsed it.
    let dom_path = chromium(&dir.0, "dom", &page, &["--dump-dom".to_string()]);
    let dom = fs::read_to_string(&dom_path).unwrap();
    check_dom(&dom);

    let png_path = screenshot(&dir.0, &page, "report");
    check_screenshot(&png_path);
}

fn check_dom(dom: &str) {
    // The recording's text is text: the browser made no element of it.
    assert!(!dom.contains("<script"), "a script element in the DOM");
    assert!(
        dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "the hostile comm is not shown as text"
    );
    for id in CHARTS {
        let svg = element(dom, id);
        assert!(
            svg.starts_with("<svg class=\"chart\""),
            "{id}: {}",
            &svg[..80]
        );
        let paths = series_paths(svg);
        assert!(!paths.is_empty(), "{id}: no series path");
        for d in &paths {
            let points = path_points(d);
            assert!(points >= 100, "{id}: a series of only {points} points");
        }
        let bands = bands(svg, "hypervisor_queuing");
        assert_eq!(bands, 1, "{id}: {bands} enforcement bands");
        assert!(!svg.contains("band verdict-idle"), "{id}: idle drawn");
        assert!(svg.contains("class=\"tick\""), "{id}: no ticks");
    }
    // The legend names the verdict; the tables hold the episode and flows.
    assert!(dom.contains("<i class=\"swatch verdict-hypervisor_queuing\"></i>hypervisor_queuing"));
    assert!(dom.contains("4.80Gb/s (out)"), "burst ceiling missing");
    assert_eq!(dom.matches("<tr class=\"flow\">").count(), 3);
}

fn check_screenshot(path: &Path) {
    let px = measure_screenshot(path, (1400, 3000), verdict_colour("hypervisor_queuing"));
    assert!(
        px.non_white > 0.03,
        "screenshot nearly blank: {:.2}% non-white",
        px.non_white * 100.0
    );
    assert!(
        px.distinct_colours > 50,
        "only {} colours",
        px.distinct_colours
    );
    // Five charts, each with a band 140 s wide of a 299 s axis.
    assert!(
        px.band > 5 * 50_000,
        "enforcement band not drawn: {} pixels",
        px.band
    );
    assert!(
        px.first_series > 500,
        "series line not drawn: {} pixels",
        px.first_series
    );
}

/// eth0 idles, bursts at 4.8 Gbit/s for 100 s, is shaped to 1.2 Gbit/s for
/// 140 s (bw_out_allowance_exceeded 80..110% of tx packets, RTT inflated),
/// then idles again; eth1 carries a steady 40 Mbit/s.
fn enforcement_report() -> Report {
    let phase = |i: usize| match i {
        0..20 => "idle",
        20..120 => "burst",
        120..260 => "enforced",
        _ => "idle",
    };
    let wobble = |i: usize, k: f64| 1.0 + 0.05 * ((i as f64) * k).sin();
    let series: Vec<IntervalPoint> = (0..INTERVALS)
        .map(|i| {
            let (tx, bw_out, retrans, backlog) = match phase(i) {
                "burst" => (
                    4.8e9 * wobble(i, 0.7),
                    20.0 * wobble(i, 1.3),
                    Some(0.004),
                    0,
                ),
                "enforced" => (
                    1.2e9 * wobble(i, 0.9),
                    95.0 * wobble(i, 2.1),
                    // The retransmit rate is not judged for a few intervals.
                    (i % 37 != 0).then_some(0.02 * wobble(i, 0.5)),
                    (i % 13) as u64 * 1500,
                ),
                _ => (8e4, 0.0, None, 0),
            };
            let eth0 = InterfacePoint {
                iface: "eth0".to_string(),
                verdict: match phase(i) {
                    "burst" => Verdict::FreeFlow,
                    "enforced" => Verdict::HypervisorQueuing,
                    _ => Verdict::Idle,
                },
                tx_bps: tx,
                rx_bps: tx / 40.0,
                bw_out_pct: Some(bw_out),
                bw_in_pct: Some(0.5 * wobble(i, 0.3)),
                pps_pct: Some(0.0),
                conntrack_pct: Some(0.0),
                retrans_pct: retrans,
                backlog_bytes: Some(backlog),
                tx_peak_bps: None,
            };
            let eth1 = InterfacePoint {
                iface: "eth1".to_string(),
                verdict: Verdict::FreeFlow,
                tx_bps: 4e7 * wobble(i, 0.2),
                rx_bps: 3.5e7 * wobble(i, 0.25),
                bw_out_pct: Some(1.0 * wobble(i, 0.4)),
                bw_in_pct: Some(0.8 * wobble(i, 0.45)),
                pps_pct: Some(0.0),
                conntrack_pct: Some(0.0),
                retrans_pct: Some(0.001 * wobble(i, 0.6)),
                backlog_bytes: Some(0),
                tx_peak_bps: None,
            };
            IntervalPoint {
                seq: 1000 + i as u64,
                t_secs: i as f64 + 1.0,
                interfaces: vec![eth0, eth1],
            }
        })
        .collect();

    let peers = ["10.1.0.20:5201", "10.1.0.21:5201", "10.1.0.22:443"];
    let flow_series = (0..3)
        .map(|f| FlowSeries {
            flow_id: f as u64 + 1,
            label: format!("{} iperf3", peers[f]),
            points: (20..260)
                .map(|i| {
                    let inflation = if phase(i) == "enforced" {
                        3.0 + f as f64
                    } else {
                        1.1
                    };
                    (i as f64 + 1.0, inflation * wobble(i + f, 0.8))
                })
                .collect(),
        })
        .collect();

    let episode = |iface: &str, verdict: Verdict, from: usize, to: usize| {
        let enforcement = verdict.is_enforcement().then(|| EnforcementSummary {
            burst_ceiling_bps: Some(4.8e9),
            stepped_down: true,
            baseline_bps: Some(1.2e9),
            burst_secs: 100.0,
            direction: "out".to_string(),
            against_plan: None,
        });
        EpisodeReport {
            episode: Episode {
                iface: iface.to_string(),
                verdict,
                start_seq: 1000 + from as u64,
                end_seq: 1000 + to as u64 - 1,
                start_mono_ns: from as u64 * 1_000_000_000,
                end_mono_ns: to as u64 * 1_000_000_000,
                intervals: (to - from) as u64,
                peak: if verdict.is_enforcement() { 104.2 } else { 0.0 },
                peak_signal: "bw_out_pct".to_string(),
                throughput_before_bps: enforcement.as_ref().and(Some(4.8e9)),
                throughput_during_bps: enforcement.as_ref().and(Some(1.2e9)),
                mean_confidence: 0.9,
                stepped_down: enforcement.is_some(),
                open: false,
                peak_rate_bps: None,
                microburst: None,
                planned: None,
            },
            start_offset_secs: from as f64,
            judged_alone: Default::default(),
            counters_in_microbursts: None,
            end_offset_secs: to as f64,
            evidence: vec![Evidence {
                signal: "bw_out_pct".to_string(),
                value: 104.2,
                threshold: 50.0,
                note: "bw_out_allowance_exceeded 104.2% of tx packets >= 50%".to_string(),
                exceeded: verdict.is_enforcement(),
            }],
            held_note: String::new(),
            enforcement,
            kafka: Vec::new(),
            linklocal: None,
        }
    };

    let summary = |name: &str, verdicts: BTreeMap<Verdict, u64>, mean_tx: f64, peak_tx: f64| {
        InterfaceSummary {
            name: name.to_string(),
            driver: Some("ena".to_string()),
            verdicts,
            tx_bytes: (mean_tx * INTERVALS as f64 / 8.0) as u64,
            rx_bytes: (mean_tx * INTERVALS as f64 / 320.0) as u64,
            mean_tx_bps: mean_tx,
            peak_tx_bps: peak_tx,
            mean_rx_bps: mean_tx / 40.0,
            peak_rx_bps: peak_tx / 40.0,
            tx_wire_packets: 90_000_000,
            rx_wire_packets: 4_000_000,
            allowance_available: true,
            allowance: BTreeMap::from([(
                "bw_out_allowance_exceeded".to_string(),
                AllowanceSummary {
                    exceeded: 17_000_000,
                    pct: Some(41.0),
                    peak_pct: Some(104.2),
                },
            )]),
            retrans_segs: 2_100,
            segs_out: 60_000_000,
            retrans_pct: Some(0.0035),
            peak_retrans_pct: Some(0.021),
            peak_backlog_bytes: 18_000,
            host_drops: BTreeMap::new(),
            kafka: Vec::new(),
            linklocal: None,
        }
    };

    let flows = (0..3)
        .map(|f| FlowSummary {
            rank: f + 1,
            flow_id: f as u64 + 1,
            local: format!("10.1.0.10:{}", 41000 + f).parse().unwrap(),
            peer: peers[f].parse().unwrap(),
            owner: Some(Owner {
                pid: 3100 + f as u32,
                comm: if f == 2 { HOSTILE } else { "iperf3" }.to_string(),
                thread: None,
                cgroup_id: 7,
                cgroup: None,
                workload: None,
            }),
            intervals: 240,
            bytes_sent: 40_000_000_000 / (f as u64 + 1),
            bytes_received: 2_000_000,
            retransmits: 700 - 200 * f as u64,
            failed_retransmits: 0,
            spurious_retransmits: 3,
            peak_added_delay_us: 2500,
            backoff_parts_total: Default::default(),
            cwnd_reductions: 90,
            recovery_loss_ms: 850.0,
            mean_rtt_inflation: Some(2.4 + f as f64),
            peak_rtt_inflation: Some(3.3 + f as f64),
            min_rtt_us: 120,
            backoff_total: 4000.0 / (f as f64 + 1.0),
            peak_backoff: 60.0,
            backoff_intervals: 140,
            closed: false,
            iface: Some("ens5".to_string()),
            peak_bps: None,
            kafka: None,
        })
        .collect();

    let start_ms = 1_717_000_000_000;
    Report {
        files: vec!["/var/tmp/enforcement.jsonl.zst".to_string()],
        recording: RecordingInfo {
            host: "ip-10-1-0-10".to_string(),
            kernel: "6.1.0-18-cloud-amd64".to_string(),
            tool_version: "0.1.0".to_string(),
            format_version: "1.1".to_string(),
            interfaces: vec![
                InterfaceInfo {
                    name: "eth0".to_string(),
                    driver: Some("ena".to_string()),
                    driver_version: None,
                },
                InterfaceInfo {
                    name: "eth1".to_string(),
                    driver: Some("ena".to_string()),
                    driver_version: None,
                },
            ],
            interval_ns: 1_000_000_000,
            start_unix_ms: start_ms,
            segments: 1,
        },
        thresholds: Thresholds::default(),
        thresholds_changed: Vec::new(),
        filters: Filters::default(),
        span: Span {
            intervals: INTERVALS as u64,
            first_seq: Some(1000),
            last_seq: Some(1000 + INTERVALS as u64 - 1),
            start_unix_ms: Some(start_ms),
            end_unix_ms: Some(start_ms + INTERVALS as u64 * 1000),
            seconds: INTERVALS as f64,
        },
        episodes: vec![
            episode("eth0", Verdict::Idle, 0, 20),
            episode("eth1", Verdict::FreeFlow, 0, 300),
            episode("eth0", Verdict::FreeFlow, 20, 120),
            episode("eth0", Verdict::HypervisorQueuing, 120, 260),
            episode("eth0", Verdict::Idle, 260, 300),
        ],
        interfaces: vec![
            summary(
                "eth0",
                BTreeMap::from([
                    (Verdict::Idle, 60),
                    (Verdict::FreeFlow, 100),
                    (Verdict::HypervisorQueuing, 140),
                ]),
                2.2e9,
                5.0e9,
            ),
            summary(
                "eth1",
                BTreeMap::from([(Verdict::FreeFlow, 300)]),
                4e7,
                4.2e7,
            ),
        ],
        flows,
        workloads: Vec::new(),
        health: HealthSummary {
            read_warnings: vec![format!("segment 2: cut tail, 1 line skipped {HOSTILE}")],
            ..HealthSummary::default()
        },
        series,
        flow_series,
        right_sizing: RightSizing::default(),
    }
}
