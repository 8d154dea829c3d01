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
//! The tests here need root; those that need none are in
//! tests/offline/report_html.rs.

use std::collections::BTreeMap;
use std::fs::{self};
use std::process::Command;

use crate::lab_support::Lab;
use crate::support::report_html::{
    bands, chromium, element, measure_screenshot, path_points, screenshot, series_paths,
    verdict_colour, CHARTS,
};
use crate::support::TempDir;

/// `report --html` of a real recording: burst then enforcement in the lab,
/// recorded by `watch --record`, reported through the CLI (`--json` for
/// what the page must show, `--html` for the page), opened by Chromium.
/// Every chart has series with a point per interval or so, and one band
/// per episode the JSON lists as holding the network back, enforcement
/// among them; the screenshot shows the enforcement band's colour.
#[test]
fn chromium_renders_the_report_of_a_lab_recording() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("rh");
    lab.tool(&["shape", "burst_then_enforce"]);
    lab.tool(&["emulator", "start"]);
    // As in tests/lab/scenarios.rs: enforcement at the baseline ~15 s in.
    lab.tool(&["traffic", "--time", "24", "--bitrate", "300M"]);
    let dir = TempDir::new("report-html");
    let trace = dir.0.join("burst.jsonl.zst");
    lab.watch_json_in_broker("23s", &["--record", &trace.display().to_string()]);
    drop(lab);

    let page = dir.0.join("lab-report.html");
    let out = crate::support::run(
        Command::new(crate::support::binary())
            .args(["report", "--json", "--html"])
            .arg(&page)
            .arg(&trace),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    let intervals = report["span"]["intervals"].as_u64().unwrap() as usize;
    // (verdict, count) of the episodes drawn as bands.
    let mut banded: BTreeMap<String, usize> = BTreeMap::new();
    for e in report["episodes"].as_array().unwrap() {
        let v = e["verdict"].as_str().unwrap();
        if v != "idle" && v != "free_flow" {
            *banded.entry(v.to_string()).or_default() += 1;
        }
    }
    eprintln!("{intervals} intervals; banded episodes {banded:?}");
    assert!(intervals >= 15, "only {intervals} intervals");
    let enforcement: Vec<&String> = banded
        .keys()
        .filter(|v| {
            matches!(
                v.as_str(),
                "hypervisor_queuing" | "hypervisor_drop" | "pps_limit"
            )
        })
        .collect();
    assert!(
        !enforcement.is_empty(),
        "no enforcement episode: {banded:?}"
    );

    let dom =
        fs::read_to_string(chromium(&dir.0, "lab-dom", &page, &["--dump-dom".into()])).unwrap();
    for id in CHARTS {
        let svg = element(&dom, id);
        let points: Vec<usize> = series_paths(svg).iter().map(|d| path_points(d)).collect();
        eprintln!("{id}: series of {points:?} points");
        let longest = points.iter().copied().max().unwrap_or(0);
        assert!(
            longest * 2 >= intervals,
            "{id}: longest series {longest} points for {intervals} intervals"
        );
        for (verdict, n) in &banded {
            assert_eq!(bands(svg, verdict), *n, "{id}: bands of {verdict}");
        }
        assert!(!svg.contains("band verdict-idle"), "{id}: idle drawn");
        assert!(
            !svg.contains("band verdict-free_flow"),
            "{id}: free flow drawn"
        );
    }

    let png_path = screenshot(&dir.0, &page, "lab-report");
    let px = measure_screenshot(&png_path, (1400, 3000), verdict_colour(enforcement[0]));
    assert!(px.non_white > 0.03, "screenshot nearly blank");
    assert!(
        px.first_series > 100,
        "series line not drawn: {} pixels",
        px.first_series
    );
    // Five bands at least a few intervals wide, each the plot's height.
    assert!(
        px.band > 5 * 1_000,
        "enforcement band not drawn: {} pixels",
        px.band
    );
}
