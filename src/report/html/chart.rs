//! One time chart as inline SVG: bands for verdict episodes behind, a grid,
//! axes with ticks and units, an optional threshold line, and one path per
//! series in which a missing value breaks the line (a gap, never a zero).
//!
//! Drawn in Rust rather than by script in the page: the file then shows the
//! same in any browser, with scripts off, and tests can read the SVG.

use std::fmt::Write;

use super::downsample::{self, Sample};
use super::format;
use super::Esc;
use crate::analysis::Verdict;
use crate::shared::units;

pub(crate) const WIDTH: f64 = 1200.0;
pub(crate) const HEIGHT: f64 = 280.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 44.0;

/// What the y values are: decides tick labels and the axis title.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Unit {
    BitsPerSec,
    Percent,
    /// srtt / min_rtt.
    Ratio,
    Bytes,
}

impl Unit {
    /// The finest step the axis may take: whole bytes; the others are
    /// continuous.
    fn smallest_step(self) -> f64 {
        match self {
            Unit::Bytes => 1.0,
            Unit::BitsPerSec | Unit::Percent | Unit::Ratio => 0.0,
        }
    }

    fn tick(self, value: f64) -> String {
        match self {
            Unit::BitsPerSec => units::rate_bits(value),
            Unit::Percent => units::pct(value),
            Unit::Ratio => format::ratio(value),
            // Backlog means and axis ticks are fractional; a byte count is
            // shown whole.
            Unit::Bytes if value.is_finite() => units::bytes(value.round() as u64),
            Unit::Bytes => units::UNKNOWN.to_string(),
        }
    }
}

pub(crate) struct Series {
    pub label: String,
    pub samples: Vec<Sample>,
}

/// A verdict episode drawn as a background band from `start` to `end`
/// (seconds since the recording's start).
pub(crate) struct Band {
    pub verdict: Verdict,
    pub start: f64,
    pub end: f64,
    /// Tooltip: verdict, interface and times.
    pub title: String,
}

pub(crate) struct Chart<'a> {
    /// Stable id suffix: the svg is `chart-{id}`.
    pub id: &'static str,
    pub title: &'static str,
    pub unit: Unit,
    /// The y axis title: what the unit is of.
    pub y_title: &'static str,
    pub series: Vec<Series>,
    pub bands: &'a [Band],
    /// Time axis range, shared by all charts so they line up.
    pub x_range: (f64, f64),
    /// A dashed line at a threshold of the verdict engine, with its name.
    pub threshold: Option<(f64, String)>,
    /// Labelled dashed lines at the instance's baseline (throughput: out
    /// and in, or one line when they are the same), value and label.
    pub baselines: Vec<(f64, String)>,
    /// Why a chart may be empty or what to read into it.
    pub note: Option<String>,
}

/// A series ready to draw: its samples cleaned and downsampled, and how
/// many points it had before.
struct Prepared {
    label: String,
    samples: Vec<Sample>,
    before: usize,
}

fn prepare(chart: &Chart, max_points: usize) -> Vec<Prepared> {
    chart
        .series
        .iter()
        .map(|s| {
            let clean = clean(&s.samples);
            let before = downsample::points(&clean);
            Prepared {
                label: s.label.clone(),
                samples: downsample::min_max(&clean, max_points),
                before,
            }
        })
        .collect()
}

/// Where data lands in the svg: the ranges of both axes and the plot area.
struct Frame {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
    y_ticks: Vec<f64>,
    plot_w: f64,
    plot_h: f64,
    /// Some series has a value.
    has_data: bool,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x0) / (self.x1 - self.x0) * self.plot_w
    }

    fn py(&self, y: f64) -> f64 {
        TOP + self.plot_h - (y - self.y0) / (self.y1 - self.y0) * self.plot_h
    }

    /// The bottom of the plot, where the x axis runs.
    fn baseline(&self) -> f64 {
        TOP + self.plot_h
    }
}

/// The threshold line is shown when it is within this many times the
/// data's maximum; a line far above would squash the data into the floor.
const THRESHOLD_NEAR_DATA: f64 = 4.0;
/// Room above a shown threshold line, as a share of it.
const THRESHOLD_HEADROOM: f64 = 1.1;

/// The lines of `lines` near enough to the data to be drawn (the same
/// rule as the threshold's: one far above would squash the data).
fn near(lines: &[(f64, String)], data_max: f64) -> Vec<&(f64, String)> {
    lines
        .iter()
        .filter(|(v, _)| {
            v.is_finite()
                && *v > 0.0
                && (!data_max.is_finite() || *v <= data_max.max(0.0) * THRESHOLD_NEAR_DATA)
        })
        .collect()
}

/// The frame for `series`, and the threshold when it is shown.
fn frame<'a>(chart: &'a Chart, series: &[Prepared]) -> (Frame, Option<&'a (f64, String)>) {
    let (x0, x1) = widen(chart.x_range);
    let values = || {
        series
            .iter()
            .flat_map(|s| s.samples.iter().flatten().map(|p| p.1))
    };
    let data_max = values().fold(f64::NEG_INFINITY, f64::max);
    let data_min = values().fold(f64::INFINITY, f64::min);
    let has_data = data_max.is_finite();
    let threshold = chart.threshold.as_ref().filter(|(t, _)| {
        t.is_finite() && (!has_data || *t <= data_max.max(0.0) * THRESHOLD_NEAR_DATA)
    });
    let mut y_hi = if has_data { data_max } else { 1.0 };
    if let Some((t, _)) = threshold {
        y_hi = y_hi.max(*t * THRESHOLD_HEADROOM);
    }
    for (b, _) in near(&chart.baselines, data_max) {
        y_hi = y_hi.max(*b * THRESHOLD_HEADROOM);
    }
    let y_lo = if has_data { data_min.min(0.0) } else { 0.0 };
    let (y_ticks, y0, y1) = y_axis(y_lo, y_hi, chart.unit.smallest_step());
    let frame = Frame {
        x0,
        x1,
        y0,
        y1,
        y_ticks,
        plot_w: WIDTH - LEFT - RIGHT,
        plot_h: HEIGHT - TOP - BOTTOM,
        has_data,
    };
    (frame, threshold)
}

/// The chart as a `<figure>`: heading, svg, legend and caption.
pub(crate) fn render(chart: &Chart, max_points: usize) -> String {
    let mut out = String::new();
    let series = prepare(chart, max_points);
    let (f, threshold) = frame(chart, &series);
    open_figure(&mut out, chart);
    // Bands first: they are the background.
    bands(&mut out, chart, &f);
    y_axis_svg(&mut out, chart, &f);
    x_axis_svg(&mut out, &f);
    if let Some((value, name)) = threshold {
        threshold_line(&mut out, chart, &f, *value, name);
    }
    let data_max = series
        .iter()
        .flat_map(|s| s.samples.iter().flatten().map(|p| p.1))
        .fold(f64::NEG_INFINITY, f64::max);
    let baselines = near(&chart.baselines, data_max);
    for (value, label) in &baselines {
        baseline_line(&mut out, &f, *value, label);
    }
    paths(&mut out, &series, &f);
    if !f.has_data {
        let _ = writeln!(
            out,
            "<text class=\"no-data\" x=\"{cx:.1}\" y=\"{cy:.1}\" text-anchor=\"middle\">no data</text>",
            cx = LEFT + f.plot_w / 2.0,
            cy = TOP + f.plot_h / 2.0
        );
    }
    out.push_str("</svg>\n");
    legend(
        &mut out,
        chart,
        &series,
        threshold.map(|(_, name)| name),
        &baselines,
    );
    let off_scale: Vec<&str> = chart
        .baselines
        .iter()
        .filter(|b| !baselines.contains(b))
        .map(|(_, label)| label.as_str())
        .collect();
    caption(&mut out, chart, &series, max_points, &off_scale);
    out.push_str("</figure>\n");
    out
}

fn open_figure(out: &mut String, chart: &Chart) {
    let _ = writeln!(
        out,
        "<figure class=\"chart-figure\" id=\"figure-{id}\">\n<h3>{title}</h3>",
        id = chart.id,
        title = Esc(chart.title)
    );
    let _ = writeln!(
        out,
        "<svg class=\"chart\" id=\"chart-{id}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{title}\">",
        id = chart.id,
        title = Esc(chart.title)
    );
}

/// The verdict episodes behind the data, cut to the time axis.
fn bands(out: &mut String, chart: &Chart, f: &Frame) {
    out.push_str("<g class=\"bands\">\n");
    for band in chart.bands {
        let (a, b) = (band.start.max(f.x0), band.end.min(f.x1));
        if !(a.is_finite() && b.is_finite()) || b < a {
            continue;
        }
        // At least a pixel wide: a one-interval episode must stay visible.
        let width = (f.px(b) - f.px(a)).max(1.0);
        let _ = writeln!(
            out,
            "<rect class=\"band verdict-{v}\" x=\"{x:.1}\" y=\"{TOP}\" width=\"{width:.1}\" \
             height=\"{plot_h}\"><title>{t}</title></rect>",
            v = band.verdict.as_str(),
            x = f.px(a),
            plot_h = f.plot_h,
            t = Esc(&band.title)
        );
    }
    out.push_str("</g>\n");
}

/// The grid, the y ticks in the chart's unit and the y title.
fn y_axis_svg(out: &mut String, chart: &Chart, f: &Frame) {
    out.push_str("<g class=\"axis y-axis\">\n");
    for tick in &f.y_ticks {
        let y = f.py(*tick);
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"tick\" x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{label}</text>",
            x2 = WIDTH - RIGHT,
            tx = LEFT - 6.0,
            ty = y + 4.0,
            label = Esc(&chart.unit.tick(*tick))
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" transform=\"translate(14 {cy:.1}) rotate(-90)\" \
         text-anchor=\"middle\">{t}</text>",
        cy = TOP + f.plot_h / 2.0,
        t = Esc(chart.y_title)
    );
    out.push_str("</g>\n");
}

/// Both axis lines, the time ticks and the time title.
fn x_axis_svg(out: &mut String, f: &Frame) {
    out.push_str("<g class=\"axis x-axis\">\n");
    let baseline = f.baseline();
    let _ = writeln!(
        out,
        "<line class=\"axis-line\" x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{baseline}\" y2=\"{baseline}\"/>\
         <line class=\"axis-line\" x1=\"{LEFT}\" x2=\"{LEFT}\" y1=\"{TOP}\" y2=\"{baseline}\"/>",
        x2 = WIDTH - RIGHT
    );
    for tick in x_ticks(f.x0, f.x1) {
        let x = f.px(tick);
        let _ = writeln!(
            out,
            "<line class=\"tick-mark\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{baseline}\" y2=\"{y2}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{ty}\" text-anchor=\"middle\">{label}</text>",
            y2 = baseline + 5.0,
            ty = baseline + 18.0,
            label = format::significant(tick, 6)
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" x=\"{cx:.1}\" y=\"{y}\" text-anchor=\"middle\">\
         seconds since the recording started (s)</text>\n</g>",
        cx = LEFT + f.plot_w / 2.0,
        y = HEIGHT - 6.0
    );
}

fn threshold_line(out: &mut String, chart: &Chart, f: &Frame, value: f64, name: &str) {
    let y = f.py(value);
    let _ = writeln!(
        out,
        "<line class=\"threshold\" x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{y:.1}\" y2=\"{y:.1}\">\
         <title>threshold {name} = {v}</title></line>",
        x2 = WIDTH - RIGHT,
        name = Esc(name),
        v = Esc(&chart.unit.tick(value))
    );
}

/// A baseline: dashed, across the plot, its label at the right end above
/// it.
fn baseline_line(out: &mut String, f: &Frame, value: f64, label: &str) {
    let y = f.py(value);
    let _ = writeln!(
        out,
        "<line class=\"baseline-line\" x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{y:.1}\" y2=\"{y:.1}\">\
         <title>{t}</title></line>\
         <text class=\"baseline-label\" x=\"{tx}\" y=\"{ty:.1}\" text-anchor=\"end\">{t}</text>",
        x2 = WIDTH - RIGHT,
        tx = WIDTH - RIGHT - 4.0,
        ty = y - 4.0,
        t = Esc(label)
    );
}

/// One path per series with values, coloured by its index.
fn paths(out: &mut String, series: &[Prepared], f: &Frame) {
    out.push_str("<g class=\"series-group\">\n");
    for (index, s) in series.iter().enumerate() {
        let d = path(&s.samples, &|x| f.px(x), &|y| f.py(y));
        if d.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "<path class=\"series series-{c}\" data-series=\"{index}\" d=\"{d}\">\
             <title>{label}</title></path>",
            c = index % PALETTE_SIZE,
            label = Esc(&s.label)
        );
    }
    out.push_str("</g>\n");
}

/// The series, then one swatch per verdict shown as a band, then the
/// threshold.
fn legend(
    out: &mut String,
    chart: &Chart,
    series: &[Prepared],
    threshold: Option<&String>,
    baselines: &[&(f64, String)],
) {
    out.push_str("<div class=\"legend\">\n");
    for (index, s) in series.iter().enumerate() {
        let empty = if downsample::points(&s.samples) == 0 {
            " (no values)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "<span class=\"legend-series\"><i class=\"swatch line series-{c}\"></i>{label}{empty}</span>",
            c = index % PALETTE_SIZE,
            label = Esc(&s.label)
        );
    }
    let mut verdicts: Vec<Verdict> = chart.bands.iter().map(|b| b.verdict).collect();
    verdicts.sort();
    verdicts.dedup();
    for verdict in verdicts {
        let _ = writeln!(
            out,
            "<span class=\"legend-band\"><i class=\"swatch verdict-{v}\"></i>{v}</span>",
            v = verdict.as_str()
        );
    }
    if let Some(name) = threshold {
        let _ = writeln!(
            out,
            "<span class=\"legend-threshold\"><i class=\"swatch dashed\"></i>threshold {}</span>",
            Esc(name)
        );
    }
    for (_, label) in baselines {
        let _ = writeln!(
            out,
            "<span class=\"legend-baseline\"><i class=\"swatch baseline\"></i>{}</span>",
            Esc(label)
        );
    }
    out.push_str("</div>\n");
}

/// The chart's note and which series were downsampled, if any.
fn caption(
    out: &mut String,
    chart: &Chart,
    series: &[Prepared],
    max_points: usize,
    off_scale: &[&str],
) {
    let mut caption = Vec::new();
    if let Some(note) = &chart.note {
        caption.push(Esc(note).to_string());
    }
    if !off_scale.is_empty() {
        caption.push(format!(
            "Not drawn, far above the data: {}.",
            Esc(&off_scale.join(", "))
        ));
    }
    let reduced: Vec<String> = series
        .iter()
        .filter(|s| downsample::points(&s.samples) < s.before)
        .map(|s| {
            format!(
                "{} ({} → {} points)",
                Esc(&s.label),
                s.before,
                downsample::points(&s.samples)
            )
        })
        .collect();
    if !reduced.is_empty() {
        caption.push(format!(
            "Downsampled to at most {max_points} points per series, keeping each bucket's \
             minimum and maximum: {}.",
            reduced.join(", ")
        ));
    }
    if !caption.is_empty() {
        let _ = writeln!(
            out,
            "<figcaption class=\"downsampled\">{}</figcaption>",
            caption.join(" ")
        );
    }
}

/// Series colours (CSS classes `series-0` .. `series-11`).
pub(crate) const PALETTE: [&str; 12] = [
    "#1f5fa8", "#c2410c", "#15803d", "#7c3aed", "#0e7490", "#b91c1c", "#4d7c0f", "#a21caf",
    "#334155", "#b45309", "#0369a1", "#9f1239",
];
const PALETTE_SIZE: usize = PALETTE.len();

/// Non-finite values are gaps too: a bad number must not bend the axis.
fn clean(samples: &[Sample]) -> Vec<Sample> {
    samples
        .iter()
        .map(|s| s.filter(|(x, y)| x.is_finite() && y.is_finite()))
        .collect()
}

/// An empty or one-point range would divide by zero.
fn widen((a, b): (f64, f64)) -> (f64, f64) {
    if !(a.is_finite() && b.is_finite()) {
        (0.0, 1.0)
    } else if b - a < 1e-9 {
        (a - 0.5, b + 0.5)
    } else {
        (a, b)
    }
}

/// A step of 1, 2 or 5 times a power of ten giving about `count` ticks.
fn nice_step(span: f64, count: f64) -> f64 {
    let raw = span / count;
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// Y ticks and the rounded range they cover; no step under `smallest`
/// (a backlog of whole bytes has no tick at 0.2 B, which printed as
/// "0B 0B 1B 1B" on an all-zero chart).
fn y_axis(lo: f64, hi: f64, smallest: f64) -> (Vec<f64>, f64, f64) {
    // A flat series (all zero backlog, say) gets a range above it, not one
    // centred on it: no negative bytes on the axis.
    let (lo, hi) = if lo.is_finite() && hi.is_finite() && hi - lo < 1e-12 {
        (lo, lo + lo.abs().max(1.0))
    } else {
        widen((lo, hi))
    };
    let step = nice_step(hi - lo, 5.0).max(smallest);
    let y0 = (lo / step).floor() * step;
    let y1 = (hi / step).ceil() * step;
    let count = ((y1 - y0) / step).round() as usize;
    let ticks = (0..=count).map(|i| y0 + i as f64 * step).collect();
    (ticks, y0, y1)
}

fn x_ticks(x0: f64, x1: f64) -> Vec<f64> {
    let step = nice_step(x1 - x0, 10.0);
    let first = (x0 / step).ceil() as i64;
    let last = (x1 / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// SVG path data: `M` starts each run after a gap. A run of one point is a
/// zero-length segment, drawn as a dot by the round line cap.
fn path(samples: &[Sample], px: &impl Fn(f64) -> f64, py: &impl Fn(f64) -> f64) -> String {
    let mut d = String::new();
    let mut pen_down = false;
    let mut run_len = 0;
    for sample in samples {
        match sample {
            None => {
                if pen_down && run_len == 1 {
                    d.push_str("l0 0");
                }
                pen_down = false;
                run_len = 0;
            }
            Some((x, y)) => {
                let op = if pen_down { 'L' } else { 'M' };
                let _ = write!(d, "{op}{:.1} {:.1}", px(*x), py(*y));
                pen_down = true;
                run_len += 1;
            }
        }
    }
    if pen_down && run_len == 1 {
        d.push_str("l0 0");
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_breaks_at_gaps() {
        let id = |v: f64| v;
        let samples = vec![
            Some((0.0, 1.0)),
            Some((1.0, 2.0)),
            None,
            Some((3.0, 3.0)),
            None,
            Some((5.0, 4.0)),
            Some((6.0, 5.0)),
        ];
        assert_eq!(
            path(&samples, &id, &id),
            "M0.0 1.0L1.0 2.0M3.0 3.0l0 0M5.0 4.0L6.0 5.0"
        );
    }

    #[test]
    fn ticks_are_round() {
        let (ticks, y0, y1) = y_axis(0.0, 9.3e8, 0.0);
        assert_eq!(y0, 0.0);
        assert_eq!(y1, 1e9);
        assert_eq!(ticks.len(), 6);
        let (_, y0, y1) = y_axis(0.0, 0.0, 0.0);
        assert_eq!((y0, y1), (0.0, 1.0), "flat zero series");
        assert_eq!(x_ticks(0.0, 300.0).first(), Some(&0.0));
        assert_eq!(x_ticks(0.0, 300.0).last(), Some(&300.0));
        assert_eq!(x_ticks(0.0, 300.0).len(), 7, "steps of 50 s");
    }

    /// An all-zero backlog chart: whole-byte ticks, each printed once.
    #[test]
    fn a_flat_byte_axis_has_whole_distinct_ticks() {
        let (ticks, y0, y1) = y_axis(0.0, 0.0, Unit::Bytes.smallest_step());
        assert_eq!((y0, y1), (0.0, 1.0));
        let labels: Vec<String> = ticks.iter().map(|t| Unit::Bytes.tick(*t)).collect();
        assert_eq!(labels, ["0B", "1B"]);
        let (ticks, _, _) = y_axis(0.0, 3.0, Unit::Bytes.smallest_step());
        let labels: Vec<String> = ticks.iter().map(|t| Unit::Bytes.tick(*t)).collect();
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(labels, unique, "{labels:?}");
    }
}
