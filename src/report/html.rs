//! `throttlescope report --html OUT`: the report as one self-contained HTML
//! file. Charts are inline SVG drawn here, styles are inline, and there is
//! no script and no reference to anything outside the file: it opens the
//! same offline, from a mail attachment or a ticket, years later. A
//! Content-Security-Policy that forbids every fetch and every script backs
//! that up, and all text from the recording (hostnames, process names,
//! warnings) is escaped, so a recording cannot inject markup.

mod chart;
mod downsample;
mod format;

use std::fmt::{self, Write};

use chart::{Band, Chart, Series, Unit};
use downsample::Sample;

use super::model::{EpisodeReport, InterfacePoint, IntervalPoint, Report};
use crate::analysis::{Thresholds, Verdict};

/// Points per series and chart at most; more are reduced min/max-preserving.
pub const MAX_POINTS: usize = 1500;

/// One colour per verdict, for bands, legends and table cells.
pub const VERDICT_COLOURS: [(Verdict, &str); 10] = [
    (Verdict::Idle, "#cbd5e1"),
    (Verdict::FreeFlow, "#86efac"),
    (Verdict::HypervisorQueuing, "#f59e0b"),
    (Verdict::HypervisorDrop, "#dc2626"),
    (Verdict::LocalQueuing, "#3b82f6"),
    (Verdict::LocalDrop, "#1e3a8a"),
    (Verdict::NetworkLoss, "#8b5cf6"),
    (Verdict::PpsLimit, "#ec4899"),
    (Verdict::ConntrackLimit, "#14b8a6"),
    (Verdict::LinklocalLimit, "#84cc16"),
];

/// Text made safe for HTML element content and quoted attribute values.
pub(crate) struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// The whole page.
pub fn render(report: &Report) -> String {
    let mut out = String::with_capacity(256 * 1024);
    let host = &report.recording.host;
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>throttlescope report: {}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
        Esc(host),
        css()
    );
    let _ = writeln!(out, "<h1>throttlescope report: {}</h1>", Esc(host));
    summary(&mut out, report);
    charts(&mut out, report);
    episodes(&mut out, report);
    interfaces(&mut out, report);
    flows(&mut out, report);
    health(&mut out, report);
    recording(&mut out, report);
    thresholds(&mut out, report);
    out.push_str("</body>\n</html>\n");
    out
}

fn css() -> String {
    let mut css = String::from(
        "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111827;background:#fff}\n\
         h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #e5e7eb}\n\
         h3{font-size:15px;margin:4px 0}\n\
         table{border-collapse:collapse;margin:8px 0}\n\
         th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top}\n\
         td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n\
         table.interfaces td{text-align:left;white-space:normal}\n\
         th{background:#f3f4f6}\n\
         .chart-figure{margin:16px 0}\n\
         svg.chart{display:block;background:#fff}\n\
         svg.chart text{font-size:11px;fill:#374151}\n\
         svg.chart .axis-title{font-size:12px;fill:#111827}\n\
         svg.chart .grid{stroke:#e5e7eb;stroke-width:1}\n\
         svg.chart .axis-line,svg.chart .tick-mark{stroke:#6b7280;stroke-width:1}\n\
         svg.chart .threshold{stroke:#111827;stroke-width:1;stroke-dasharray:6 4}\n\
         svg.chart .series{fill:none;stroke-width:1.6;stroke-linejoin:round;stroke-linecap:round}\n\
         svg.chart .band{fill-opacity:.28}\n\
         svg.chart .no-data{font-size:16px;fill:#9ca3af}\n\
         .legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:4px 0 0 80px}\n\
         .swatch{display:inline-block;width:14px;height:10px;margin-right:4px;\
         vertical-align:middle;opacity:.8}\n\
         .swatch.line{height:3px}\n\
         .swatch.dashed{height:0;border-top:2px dashed #111827}\n\
         figcaption{color:#4b5563;font-size:12px;margin:4px 0 0 80px}\n\
         .note{color:#4b5563}\n\
         .exceeded{font-weight:600}\n\
         ul.evidence{margin:0;padding-left:16px}\n\
         .warning{color:#b45309}\n",
    );
    for (verdict, colour) in VERDICT_COLOURS {
        let v = verdict.as_str();
        let _ = writeln!(
            css,
            ".band.verdict-{v}{{fill:{colour}}}.swatch.verdict-{v}{{background:{colour}}}\
             td.verdict-{v}{{border-left:6px solid {colour}}}"
        );
    }
    for (index, colour) in chart::PALETTE.iter().enumerate() {
        let _ = writeln!(
            css,
            "svg.chart .series-{index}{{stroke:{colour}}}.swatch.series-{index}{{background:{colour}}}"
        );
    }
    css
}

/// Episodes drawn as bands: the ones that say something is holding the
/// network back (not idle, not free flow).
fn is_banded(verdict: Verdict) -> bool {
    !matches!(verdict, Verdict::Idle | Verdict::FreeFlow)
}

fn summary(out: &mut String, report: &Report) {
    let banded: Vec<&EpisodeReport> = report
        .episodes
        .iter()
        .filter(|e| is_banded(e.episode.verdict))
        .collect();
    let _ = writeln!(
        out,
        "<p class=\"summary\">{} intervals over {} from {}, {} interface(s): {} episode(s) \
         where something held the network back; {} flow(s) ranked.</p>",
        report.span.intervals,
        format::secs(report.span.seconds),
        report
            .span
            .start_unix_ms
            .map(format::utc)
            .unwrap_or_else(|| "an unknown start".to_string()),
        report.interfaces.len(),
        banded.len(),
        report.flows.len()
    );
}

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

fn charts(out: &mut String, report: &Report) {
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
                format::secs(e.start_offset_secs),
                format::secs(e.end_offset_secs),
                e.episode.peak_signal,
                format::significant(e.episode.peak, 4)
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
    }
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

fn episodes(out: &mut String, report: &Report) {
    let shown: Vec<&EpisodeReport> = report
        .episodes
        .iter()
        .filter(|e| e.episode.verdict != Verdict::Idle)
        .collect();
    let idle = report.episodes.len() - shown.len();
    out.push_str("<section id=\"episodes\">\n<h2>Episodes</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">{} episode(s); {idle} idle episode(s) not listed.</p>",
        shown.len()
    );
    if shown.is_empty() {
        out.push_str("</section>\n");
        return;
    }
    out.push_str(
        "<table class=\"episodes\" id=\"table-episodes\">\n<tr><th>verdict</th><th>interface</th>\
         <th>start</th><th>end</th><th>duration</th><th>intervals</th><th>peak</th>\
         <th>confidence</th><th>evidence (peak interval)</th><th>burst ceiling</th>\
         <th>baseline</th><th>burst length</th></tr>\n",
    );
    for e in shown {
        let ep = &e.episode;
        let v = ep.verdict.as_str();
        let open = if ep.open { " (still open)" } else { "" };
        let _ = write!(
            out,
            "<tr class=\"episode\"><td class=\"verdict-{v}\">{v}</td><td>{iface}</td>\
             <td class=\"num\">{start}</td><td class=\"num\">{end}{open}</td>\
             <td class=\"num\">{duration}</td><td class=\"num\">{intervals}</td>\
             <td>{signal} = {peak}</td><td class=\"num\">{confidence:.2}</td><td>",
            iface = Esc(&ep.iface),
            start = format::secs(e.start_offset_secs),
            end = format::secs(e.end_offset_secs),
            duration = format::secs(e.end_offset_secs - e.start_offset_secs),
            intervals = ep.intervals,
            signal = Esc(&ep.peak_signal),
            peak = format::significant(ep.peak, 4),
            confidence = ep.mean_confidence,
        );
        if !e.evidence.is_empty() {
            out.push_str("<ul class=\"evidence\">");
            for ev in &e.evidence {
                let class = if ev.exceeded {
                    " class=\"exceeded\""
                } else {
                    ""
                };
                let _ = write!(out, "<li{class}>{}</li>", Esc(&ev.note));
            }
            out.push_str("</ul>");
        }
        out.push_str("</td>");
        match &e.enforcement {
            Some(enf) => {
                let _ = write!(
                    out,
                    "<td class=\"num\">{} ({})</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                    format::opt_bps(enf.burst_ceiling_bps),
                    Esc(&enf.direction),
                    format::opt_bps(enf.baseline_bps),
                    format::secs(enf.burst_secs)
                );
            }
            None => out.push_str("<td>–</td><td>–</td><td>–</td>"),
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</section>\n");
}

fn interfaces(out: &mut String, report: &Report) {
    out.push_str("<section id=\"interfaces\">\n<h2>Interfaces</h2>\n");
    if report.interfaces.is_empty() {
        out.push_str("<p class=\"note\">No interface in the report.</p>\n</section>\n");
        return;
    }
    out.push_str("<table class=\"interfaces\" id=\"table-interfaces\">\n<tr><th></th>");
    for i in &report.interfaces {
        let _ = write!(out, "<th>{}</th>", Esc(&i.name));
    }
    out.push_str("</tr>\n");
    let row = |out: &mut String, label: &str, cell: &dyn Fn(usize) -> String| {
        let _ = write!(out, "<tr><th>{}</th>", Esc(label));
        for index in 0..report.interfaces.len() {
            let _ = write!(out, "<td class=\"num\">{}</td>", cell(index));
        }
        out.push_str("</tr>\n");
    };
    let ifs = &report.interfaces;
    row(out, "driver", &|i| {
        Esc(ifs[i].driver.as_deref().unwrap_or("unknown")).to_string()
    });
    row(out, "intervals per verdict", &|i| {
        ifs[i]
            .verdicts
            .iter()
            .map(|(v, n)| format!("<span class=\"swatch verdict-{v}\"></span>{v}: {n}"))
            .collect::<Vec<_>>()
            .join("<br>")
    });
    row(out, "tx bytes", &|i| format::bytes(ifs[i].tx_bytes));
    row(out, "rx bytes", &|i| format::bytes(ifs[i].rx_bytes));
    row(out, "tx mean / peak", &|i| {
        format!(
            "{} / {}",
            format::bps(ifs[i].mean_tx_bps),
            format::bps(ifs[i].peak_tx_bps)
        )
    });
    row(out, "rx mean / peak", &|i| {
        format!(
            "{} / {}",
            format::bps(ifs[i].mean_rx_bps),
            format::bps(ifs[i].peak_rx_bps)
        )
    });
    row(out, "wire packets tx / rx", &|i| {
        format!("{} / {}", ifs[i].tx_wire_packets, ifs[i].rx_wire_packets)
    });
    row(out, "allowance counters", &|i| {
        if !ifs[i].allowance_available {
            return "unavailable".to_string();
        }
        ifs[i]
            .allowance
            .iter()
            .map(|(name, a)| {
                format!(
                    "{}: {} exceeded, {} overall, peak {}",
                    Esc(name),
                    a.exceeded,
                    format::opt_pct(a.pct),
                    format::opt_pct(a.peak_pct)
                )
            })
            .collect::<Vec<_>>()
            .join("<br>")
    });
    row(out, "retransmitted / sent segments", &|i| {
        format!(
            "{} / {} ({} overall, peak {})",
            ifs[i].retrans_segs,
            ifs[i].segs_out,
            format::opt_pct(ifs[i].retrans_pct),
            format::opt_pct(ifs[i].peak_retrans_pct)
        )
    });
    row(out, "peak local backlog", &|i| {
        format::bytes(ifs[i].peak_backlog_bytes)
    });
    row(out, "host drops", &|i| {
        if ifs[i].host_drops.is_empty() {
            return "none".to_string();
        }
        ifs[i]
            .host_drops
            .iter()
            .map(|(reason, n)| format!("{}: {n}", Esc(reason)))
            .collect::<Vec<_>>()
            .join("<br>")
    });
    out.push_str("</table>\n</section>\n");
}

fn flows(out: &mut String, report: &Report) {
    out.push_str("<section id=\"flows\">\n<h2>Flows</h2>\n");
    if report.flows.is_empty() {
        out.push_str("<p class=\"note\">No flow in the report.</p>\n</section>\n");
        return;
    }
    out.push_str(
        "<p class=\"note\">Ranked by backoff: the sum over intervals of each interval's \
         backoff score (0 to 100).</p>\n<table class=\"flows\" id=\"table-flows\">\n<tr>\
         <th>rank</th><th>peer</th><th>local port</th><th>owner</th><th>intervals</th>\
         <th>sent</th><th>received</th><th>retransmits (failed)</th><th>cwnd reductions</th>\
         <th>recovery</th><th>RTT inflation mean / peak</th><th>min RTT</th>\
         <th>backoff total / peak / intervals</th><th>closed</th></tr>\n",
    );
    for f in &report.flows {
        let owner = match &f.owner {
            Some(o) => format!("{} ({})", Esc(&o.comm), o.pid),
            None => "unknown".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"flow\"><td class=\"num\">{rank}</td><td>{peer}</td>\
             <td class=\"num\">{port}</td><td>{owner}</td><td class=\"num\">{intervals}</td>\
             <td class=\"num\">{sent}</td><td class=\"num\">{received}</td>\
             <td class=\"num\">{retrans} ({failed})</td><td class=\"num\">{cwnd}</td>\
             <td class=\"num\">{recovery} ms</td><td class=\"num\">{mean} / {peak}</td>\
             <td class=\"num\">{min_rtt} µs</td>\
             <td class=\"num\">{total} / {peak_backoff} / {backoff_intervals}</td>\
             <td>{closed}</td></tr>",
            rank = f.rank,
            peer = Esc(&f.peer.to_string()),
            port = f.local.port(),
            intervals = f.intervals,
            sent = format::bytes(f.bytes_sent),
            received = format::bytes(f.bytes_received),
            retrans = f.retransmits,
            failed = f.failed_retransmits,
            cwnd = f.cwnd_reductions,
            recovery = format::significant(f.recovery_loss_ms, 4),
            mean = format::opt_ratio(f.mean_rtt_inflation),
            peak = format::opt_ratio(f.peak_rtt_inflation),
            min_rtt = f.min_rtt_us,
            total = format::significant(f.backoff_total, 4),
            peak_backoff = format::significant(f.peak_backoff, 3),
            backoff_intervals = f.backoff_intervals,
            closed = if f.closed { "yes" } else { "no" },
        );
    }
    out.push_str("</table>\n</section>\n");
}

fn counts(map: &std::collections::BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".to_string();
    }
    map.iter()
        .map(|(k, n)| format!("{}: {n}", Esc(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn health(out: &mut String, report: &Report) {
    let h = &report.health;
    out.push_str("<section id=\"health\">\n<h2>Health</h2>\n");
    if !h.programs.is_empty() {
        out.push_str(
            "<table class=\"programs\">\n<tr><th>BPF program</th><th>events</th>\
             <th>missed (skipped by the kernel)</th></tr>\n",
        );
        for (name, p) in &h.programs {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                Esc(name),
                p.events,
                p.missed
            );
        }
        out.push_str("</table>\n");
    }
    let _ = writeln!(
        out,
        "<table class=\"health\">\n\
         <tr><th>ring buffer drops</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>untracked flows</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>counter read failures</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>host queue untracked</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>allowance counter resets</th><td>{}</td></tr>\n\
         <tr><th>allowance zeroed reads</th><td>{}</td></tr>\n\
         <tr><th>allowance read failures</th><td>{}</td></tr>\n\
         <tr><th>episodes forgotten</th><td class=\"num\">{}</td></tr>\n</table>",
        h.ringbuf_drops,
        h.untracked_flows,
        h.counter_read_failures,
        h.host_queue_untracked,
        counts(&h.allowance_resets),
        counts(&h.allowance_zeroed_reads),
        counts(&h.allowance_read_failures),
        h.episodes_forgotten
    );
    let _ = writeln!(out, "<h3>Read warnings ({})</h3>", h.read_warnings.len());
    if h.read_warnings.is_empty() {
        out.push_str("<p class=\"note\">none</p>\n");
    } else {
        out.push_str("<ul class=\"read-warnings\">\n");
        for w in &h.read_warnings {
            let _ = writeln!(out, "<li class=\"warning\">{}</li>", Esc(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn recording(out: &mut String, report: &Report) {
    let r = &report.recording;
    let s = &report.span;
    out.push_str("<section id=\"recording\">\n<h2>Recording</h2>\n<table class=\"recording\">\n");
    let mut row = |label: &str, value: String| {
        let _ = writeln!(out, "<tr><th>{}</th><td>{value}</td></tr>", Esc(label));
    };
    row(
        "files",
        report
            .files
            .iter()
            .map(|f| Esc(f).to_string())
            .collect::<Vec<_>>()
            .join("<br>"),
    );
    row("segments", r.segments.to_string());
    row("host", Esc(&r.host).to_string());
    row("kernel", Esc(&r.kernel).to_string());
    row("throttlescope version", Esc(&r.tool_version).to_string());
    row("trace format", Esc(&r.format_version).to_string());
    row(
        "interfaces",
        r.interfaces
            .iter()
            .map(|i| {
                format!(
                    "{} ({})",
                    Esc(&i.name),
                    Esc(i.driver.as_deref().unwrap_or("driver unknown"))
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    );
    row("interval", format::secs(r.interval_ns as f64 / 1e9));
    row("recording started", format::utc(r.start_unix_ms));
    let seqs = match (s.first_seq, s.last_seq) {
        (Some(a), Some(b)) => format!(", seq {a} to {b}"),
        _ => String::new(),
    };
    row(
        "span reported",
        format!(
            "{} intervals, {}{seqs}; {} to {}",
            s.intervals,
            format::secs(s.seconds),
            s.start_unix_ms
                .map(format::utc)
                .unwrap_or_else(|| "–".into()),
            s.end_unix_ms.map(format::utc).unwrap_or_else(|| "–".into())
        ),
    );
    let f = &report.filters;
    let list = |items: &[String]| {
        if items.is_empty() {
            "all".to_string()
        } else {
            items
                .iter()
                .map(|i| Esc(i).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    row(
        "filters",
        format!(
            "flows: {}; interfaces: {}; since: {}; until: {}",
            list(&f.flows),
            list(&f.interfaces),
            f.since_unix_ms
                .map(format::utc)
                .unwrap_or_else(|| "start".into()),
            f.until_unix_ms
                .map(format::utc)
                .unwrap_or_else(|| "end".into())
        ),
    );
    out.push_str("</table>\n</section>\n");
}

fn thresholds(out: &mut String, report: &Report) {
    out.push_str("<section id=\"thresholds\">\n<h2>Thresholds</h2>\n");
    if !report.thresholds_changed.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Differ from what the recording was judged with live: {}.</p>",
            report
                .thresholds_changed
                .iter()
                .map(|n| Esc(n).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // Values by name through serde: the struct's fields are generated from
    // the same table as `describe`, so every described name has a value.
    let values = serde_json::to_value(&report.thresholds).unwrap_or_default();
    out.push_str(
        "<table class=\"thresholds\">\n<tr><th>name</th><th>value</th><th>default</th>\
         <th>meaning</th></tr>\n",
    );
    for info in Thresholds::describe() {
        let value = values
            .get(info.name)
            .and_then(|v| v.as_f64())
            .map(|v| format::significant(v, 6))
            .unwrap_or_else(|| "–".to_string());
        let changed = report.thresholds_changed.iter().any(|n| n == info.name);
        let _ = writeln!(
            out,
            "<tr{cls}><td>{name}</td><td class=\"num\">{value}</td><td class=\"num\">{default}</td>\
             <td>{doc}</td></tr>",
            cls = if changed { " class=\"exceeded\"" } else { "" },
            name = Esc(info.name),
            default = format::significant(info.default, 6),
            doc = Esc(info.doc)
        );
    }
    out.push_str("</table>\n</section>\n");
}

#[cfg(test)]
mod tests;
