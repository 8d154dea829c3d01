//! What tests/offline/report_html.rs and tests/lab/report_html.rs share: they were one
//! file before its tests were split by whether they need root.

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

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throttlescope::report::html;

pub const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);
pub const CHARTS: [&str; 5] = [
    "chart-throughput",
    "chart-allowance",
    "chart-retransmits",
    "chart-rtt-inflation",
    "chart-backlog",
];

/// Run headless Chromium on `page` with `extra` arguments and a profile
/// of its own in `dir`; returns the file holding its stdout. Fails clearly
/// when Chromium is missing, fails or takes too long.
pub fn chromium(dir: &Path, name: &str, page: &Path, extra: &[String]) -> PathBuf {
    let profile = dir.join(format!("profile-{name}"));
    let stdout = dir.join(format!("{name}.stdout"));
    let stderr_path = dir.join(format!("{name}.stderr"));
    let mut command = Command::new("chromium");
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&stdout).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        // Its own process group: on timeout the renderer and the other
        // helpers go with it.
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("chromium is not installed (run tools/setup as root): {e}")
        }
        Err(e) => panic!("cannot start chromium: {e}"),
    };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHROMIUM_TIMEOUT {
            // SAFETY: kill(2) on the process group we created above.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let _ = child.wait();
            panic!(
                "chromium {extra:?} did not finish within {CHROMIUM_TIMEOUT:?}; stderr:\n{}",
                fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "chromium {extra:?} failed ({status}); stderr:\n{}",
        fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    stdout
}

/// A 1400x3000 screenshot of `page` as `<stem>.png` in `dir`. To look at
/// the page and the picture afterwards: KEEP_REPORT_HTML=DIR.
pub fn screenshot(dir: &Path, page: &Path, stem: &str) -> PathBuf {
    let png_path = dir.join(format!("{stem}.png"));
    chromium(
        dir,
        &format!("{stem}-screenshot"),
        page,
        &[
            format!("--screenshot={}", png_path.display()),
            "--window-size=1400,3000".to_string(),
        ],
    );
    if let Some(keep) = std::env::var_os("KEEP_REPORT_HTML") {
        let keep = PathBuf::from(keep);
        fs::create_dir_all(&keep).unwrap();
        fs::copy(page, keep.join(format!("{stem}.html"))).unwrap();
        fs::copy(&png_path, keep.join(format!("{stem}.png"))).unwrap();
    }
    png_path
}

/// The svg element with `id` in the DOM dump, up to its end.
pub fn element<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("{id} is not in the DOM Chromium built"));
    let start = dom[..start].rfind('<').unwrap();
    let end = start + dom[start..].find("</svg>").expect("svg not closed");
    &dom[start..end]
}

/// The `d` of every series path in a chart's svg.
pub fn series_paths(svg: &str) -> Vec<&str> {
    svg.split("<path class=\"series")
        .skip(1)
        .map(|p| {
            let d = &p[p.find(" d=\"").expect("series path without d") + 4..];
            &d[..d.find('"').unwrap()]
        })
        .collect()
}

/// Points of a path: each starts with a move or a line command.
pub fn path_points(d: &str) -> usize {
    d.matches(['M', 'L']).count()
}

/// Bands of `verdict` in a chart's svg.
pub fn bands(svg: &str, verdict: &str) -> usize {
    svg.matches(&format!("<rect class=\"band verdict-{verdict}\""))
        .count()
}

/// What a screenshot holds, counted over its pixels.
pub struct Pixels {
    /// Fraction of pixels that are not white.
    pub non_white: f64,
    pub distinct_colours: usize,
    /// Pixels of a band's colour (drawn at 28% over white).
    pub band: usize,
    /// Pixels of the first series' colour, #1f5fa8, at full strength.
    pub first_series: usize,
}

/// Decodes the PNG at `path`, checks it is `size`, and counts its pixels;
/// `band_colour` is the band's verdict colour.
pub fn measure_screenshot(path: &Path, size: (u32, u32), band_colour: [u8; 3]) -> Pixels {
    let file = File::open(path).unwrap_or_else(|e| panic!("no screenshot {path:?}: {e}"));
    let mut decoder = png::Decoder::new(BufReader::new(file));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder
        .read_info()
        .unwrap_or_else(|e| panic!("{path:?} is not a PNG: {e}"));
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), size, "screenshot size");
    let channels = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let pixels: Vec<[u8; 3]> = buf[..info.buffer_size()]
        .chunks_exact(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    let near = |p: &[u8; 3], c: [u8; 3], tolerance: i32| {
        p.iter()
            .zip(c)
            .all(|(a, b)| (i32::from(*a) - i32::from(b)).abs() <= tolerance)
    };
    // fill-opacity .28 over white.
    let band_on_white = band_colour.map(|c| (f64::from(c) * 0.28 + 255.0 * 0.72).round() as u8);
    let stats = Pixels {
        non_white: pixels.iter().filter(|p| !near(p, [255; 3], 3)).count() as f64
            / pixels.len() as f64,
        distinct_colours: pixels.iter().copied().collect::<HashSet<_>>().len(),
        band: pixels.iter().filter(|p| near(p, band_on_white, 6)).count(),
        first_series: pixels
            .iter()
            .filter(|p| near(p, [0x1f, 0x5f, 0xa8], 12))
            .count(),
    };
    eprintln!(
        "screenshot: {:.1}% not white, {} colours, {} band pixels, {} series pixels",
        stats.non_white * 100.0,
        stats.distinct_colours,
        stats.band,
        stats.first_series
    );
    stats
}

/// The colour of `verdict`'s bands, as the page styles them.
pub fn verdict_colour(verdict: &str) -> [u8; 3] {
    let (_, hex) = html::VERDICT_COLOURS
        .iter()
        .find(|(v, _)| v.as_str() == verdict)
        .unwrap_or_else(|| panic!("no colour for verdict {verdict}"));
    let byte = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    [byte(1), byte(3), byte(5)]
}
