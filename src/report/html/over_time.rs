//! The "Over time" section: the report's interval points and flow series
//! turned into the five charts (throughput, allowance, retransmits, RTT
//! inflation, local backlog), all on one time axis with the verdict
//! episodes as bands.

use std::fmt::Write;

use super::chart::{self, Band, Chart, Series, Unit};
use super::downsample::Sample;
use super::{is_banded, MAX_POINTS};
use crate::analysis::signal::Signal;
use crate::report::model::{InterfacePoint, IntervalPoint, Report};
use crate::shared::clock::format_offset;
use crate::shared::units;

/// Interface names in a stable order: the summary's, then any other that
/// appears in the series.
fn interface_names(report: &Report) -> Vec<String> {
    let mut names: Vec<String> = report.interfaces.iter().map(|i| i.name.clone()).collect();
    for point in &report.series {
        for iface in &point.interfaces {
            if !names.contains(&iface.iface) {
                names.push(iface.iface.clone());
            }
        }
    }
    names
}

/// The recording's interval in seconds, or `None` when unknown (then no
/// gaps are inferred from time jumps).
fn interval_secs(report: &Report) -> Option<f64> {
    let secs = report.recording.interval_ns as f64 / 1e9;
    (secs > 0.0).then_some(secs)
}

/// More than one and a half intervals between two points means intervals
/// are missing there: the line must break.
fn is_time_gap(previous: f64, next: f64, interval: Option<f64>) -> bool {
    interval.is_some_and(|i| next - previous > 1.5 * i)
}

/// One series per interface, from `value` of each interval point; a point
/// without the interface, a `None` value or missing intervals are gaps.
fn per_interface(
    report: &Report,
    names: &[String],
    suffix: &str,
    value: impl Fn(&InterfacePoint) -> Option<f64>,
) -> Vec<Series> {
    let interval = interval_secs(report);
    names
        .iter()
        .map(|name| {
            let mut samples = Vec::with_capacity(report.series.len());
            let mut previous: Option<&IntervalPoint> = None;
            for point in &report.series {
                if previous.is_some_and(|p| is_time_gap(p.t_secs, point.t_secs, interval)) {
                    samples.push(None);
                }
                let v = point
                    .interfaces
                    .iter()
                    .find(|i| &i.iface == name)
                    .and_then(&value);
                samples.push(v.map(|v| (point.t_secs, v)));
                previous = Some(point);
            }
            Series {
                label: if suffix.is_empty() {
                    name.clone()
                } else {
                    format!("{name} {suffix}")
                },
                samples,
            }
        })
        .collect()
}

/// With a baseline and several interfaces summed for the instance: their
/// sum out and in, the rate the baseline bounds (each interface's line
/// alone would sit below it while the instance is above). An interval
/// missing one of them is a gap: a partial sum would understate it.
fn instance_series(report: &Report) -> Vec<Series> {
    let sizing = &report.right_sizing;
    if sizing.baseline.is_none() || sizing.interfaces.len() < 2 {
        return Vec::new();
    }
    let interval = interval_secs(report);
    let summed = sizing.interfaces.join(" + ");
    [("tx", false), ("rx", true)]
        .into_iter()
        .map(|(dir, rx)| {
            let mut samples = Vec::with_capacity(report.series.len());
            let mut previous: Option<&IntervalPoint> = None;
            for point in &report.series {
                if previous.is_some_and(|p| is_time_gap(p.t_secs, point.t_secs, interval)) {
                    samples.push(None);
                }
                let sum: Option<f64> = sizing
                    .interfaces
                    .iter()
                    .map(|name| {
                        point.interfaces.iter().find(|i| &i.iface == name).map(|i| {
                            if rx {
                                i.rx_bps
                            } else {
                                i.tx_bps
                            }
                        })
                    })
                    .sum();
                samples.push(sum.map(|v| (point.t_secs, v)));
                previous = Some(point);
            }
            Series {
                label: format!("instance {dir} ({summed})"),
                samples,
            }
        })
        .collect()
}

fn flow_series(report: &Report) -> Vec<Series> {
    let interval = interval_secs(report);
    report
        .flow_series
        .iter()
        .map(|flow| {
            let mut samples: Vec<Sample> = Vec::with_capacity(flow.points.len());
            let mut previous: Option<f64> = None;
            for &(t, v) in &flow.points {
                if previous.is_some_and(|p| is_time_gap(p, t, interval)) {
                    samples.push(None);
                }
                samples.push(Some((t, v)));
                previous = Some(t);
            }
            Series {
                label: flow.label.clone(),
                samples,
            }
        })
        .collect()
}

/// The time axis: every point and every band fits.
fn x_range(report: &Report, bands: &[Band]) -> (f64, f64) {
    let times = report
        .series
        .iter()
        .map(|p| p.t_secs)
        .chain(
            report
                .flow_series
                .iter()
                .flat_map(|f| f.points.iter().map(|p| p.0)),
        )
        .chain(bands.iter().flat_map(|b| [b.start, b.end]))
        .filter(|t| t.is_finite());
    let (lo, hi) = times.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
        (lo.min(t), hi.max(t))
    });
    if lo.is_finite() {
        (lo, hi)
    } else {
        (0.0, report.span.seconds.max(1.0))
    }
}

pub(crate) fn render(out: &mut String, report: &Report) {
    let bands: Vec<Band> = report
        .episodes
        .iter()
        .filter(|e| is_banded(e.episode.verdict))
        .map(|e| Band {
            verdict: e.episode.verdict,
            start: e.start_offset_secs,
            end: e.end_offset_secs,
            title: format!(
                "{} on {}: {} to {} (peak {} = {})",
                e.episode.verdict,
                e.episode.iface,
                format_offset(e.start_offset_secs),
                format_offset(e.end_offset_secs),
                e.episode.peak_signal,
                Signal::display(&e.episode.peak_signal, e.episode.peak)
            ),
        })
        .collect();
    let x_range = x_range(report, &bands);
    let names = interface_names(report);
    let th = &report.thresholds;

    let mut throughput = Vec::new();
    for name in &names {
        let one = std::slice::from_ref(name);
        throughput.extend(per_interface(report, one, "tx", |p| Some(p.tx_bps)));
        throughput.extend(per_interface(report, one, "rx", |p| Some(p.rx_bps)));
        // The busiest window over the mean, where the kernel measured it:
        // a peak line far above the tx line is a microburst.
        let peak = per_interface(report, one, "tx peak", |p| p.tx_peak_bps);
        throughput.extend(
            peak.into_iter()
                .filter(|s| s.samples.iter().any(Option::is_some)),
        );
    }
    throughput.extend(instance_series(report));
    let mut allowance = Vec::new();
    for name in &names {
        let one = std::slice::from_ref(name);
        allowance.extend(per_interface(report, one, "bw_out", |p| p.bw_out_pct));
        allowance.extend(per_interface(report, one, "bw_in", |p| p.bw_in_pct));
        allowance.extend(per_interface(report, one, "pps", |p| p.pps_pct));
        allowance.extend(per_interface(report, one, "conntrack", |p| p.conntrack_pct));
    }
    let unavailable: Vec<&str> = report
        .interfaces
        .iter()
        .filter(|i| !i.allowance_available)
        .map(|i| i.name.as_str())
        .collect();
    let allowance_note = if unavailable.is_empty() {
        "Allowance exceeded as % of the wire packets of the interval \
         (bw_out of tx, bw_in of rx, pps of tx + rx)."
            .to_string()
    } else {
        format!(
            "Allowance exceeded as % of the wire packets of the interval. \
             No allowance counters on: {}.",
            unavailable.join(", ")
        )
    };

    let charts = [
        Chart {
            id: "throughput",
            title: "Throughput",
            unit: Unit::BitsPerSec,
            y_title: "bit/s",
            series: throughput,
            bands: &bands,
            x_range,
            threshold: None,
            baselines: baselines(report),
            note: None,
        },
        Chart {
            id: "allowance",
            title: "Allowance exceeded (normalised)",
            unit: Unit::Percent,
            y_title: "% of wire packets",
            series: allowance,
            bands: &bands,
            x_range,
            threshold: Some((th.bw_allowance_pct, "bw_allowance_pct".to_string())),
            baselines: Vec::new(),
            note: Some(allowance_note),
        },
        Chart {
            id: "retransmits",
            title: "Retransmit rate",
            unit: Unit::Percent,
            y_title: "% of segments sent",
            series: per_interface(report, &names, "", |p| p.retrans_pct),
            bands: &bands,
            x_range,
            threshold: Some((th.retrans_pct, "retrans_pct".to_string())),
            baselines: Vec::new(),
            note: Some("Retransmitted segments as % of segments sent.".to_string()),
        },
        Chart {
            id: "rtt-inflation",
            title: "RTT inflation of the top flows",
            unit: Unit::Ratio,
            y_title: "srtt / min_rtt",
            series: flow_series(report),
            bands: &bands,
            x_range,
            threshold: Some((th.rtt_inflation, "rtt_inflation".to_string())),
            baselines: Vec::new(),
            note: Some("Smoothed RTT over the flow's minimum RTT, per interval.".to_string()),
        },
        Chart {
            id: "backlog",
            title: "Local backlog",
            unit: Unit::Bytes,
            y_title: "bytes queued",
            series: per_interface(report, &names, "", |p| p.backlog_bytes.map(|b| b as f64)),
            bands: &bands,
            x_range,
            threshold: None,
            baselines: Vec::new(),
            note: Some("Largest host qdisc backlog in the interval.".to_string()),
        },
    ];
    out.push_str("<section id=\"charts\">\n<h2>Over time</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">Background bands are the verdict episodes of every interface \
         (idle and free flow not drawn; hover for details). A break in a line is a missing \
         value, not a zero. Long recordings are downsampled to at most {MAX_POINTS} points per \
         series, keeping each bucket's minimum and maximum, so no spike is lost; each chart \
         says when it was.</p>"
    );
    for chart in &charts {
        out.push_str(&chart::render(chart, MAX_POINTS));
    }
    out.push_str("</section>\n");
}

/// The instance's baseline on the throughput chart, out and in (one line
/// when they are the same). The chart draws each interface; the baseline
/// is the instance's, their sum's (the right-sizing section has it).
fn baselines(report: &Report) -> Vec<(f64, String)> {
    let Some(b) = &report.right_sizing.baseline else {
        return Vec::new();
    };
    if b.tx_bps == b.rx_bps {
        vec![(
            b.tx_bps,
            format!("baseline {} (out and in)", units::rate_bits(b.tx_bps)),
        )]
    } else {
        vec![
            (
                b.tx_bps,
                format!("baseline out {}", units::rate_bits(b.tx_bps)),
            ),
            (
                b.rx_bps,
                format!("baseline in {}", units::rate_bits(b.rx_bps)),
            ),
        ]
    }
}
