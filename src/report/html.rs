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
mod over_time;
mod sizing;
mod tables;

use std::fmt::{self, Write};

use super::model::{EpisodeReport, Report};
use crate::analysis::Verdict;
use crate::shared::units;

/// Points per series and chart at most; more are reduced min/max-preserving.
pub(crate) const MAX_POINTS: usize = 1500;

/// One colour per verdict, for bands, legends and table cells.
pub const VERDICT_COLOURS: [(Verdict, &str); 11] = [
    (Verdict::Idle, "#cbd5e1"),
    (Verdict::FreeFlow, "#86efac"),
    (Verdict::HypervisorQueuing, "#f59e0b"),
    (Verdict::HypervisorDrop, "#dc2626"),
    (Verdict::HypervisorCap, "#b45309"),
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
    over_time::render(&mut out, report);
    tables::episodes(&mut out, report);
    tables::interfaces(&mut out, report);
    sizing::render(&mut out, report);
    tables::flows(&mut out, report);
    tables::workloads(&mut out, report);
    tables::health(&mut out, report);
    tables::recording(&mut out, report);
    tables::thresholds(&mut out, report);
    out.push_str("</body>\n</html>\n");
    out
}

/// The page, headings and tables, as every report page draws them (the
/// single host's and the cluster's).
pub(crate) const PAGE_CSS: &str =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#111827;background:#fff}\n\
     h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #e5e7eb}\n\
     table{border-collapse:collapse;margin:8px 0}\n\
     th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top}\n\
     th{background:#f3f4f6}\n\
     .note{color:#4b5563}\n\
     .warning{color:#b45309}\n";

/// A colour per verdict: bands, swatches and table cells.
pub(crate) fn verdict_css(css: &mut String) {
    for (verdict, colour) in VERDICT_COLOURS {
        let v = verdict.as_str();
        let _ = writeln!(
            css,
            ".band.verdict-{v}{{fill:{colour}}}.swatch.verdict-{v}{{background:{colour}}}\
             td.verdict-{v}{{border-left:6px solid {colour}}}"
        );
    }
}

fn css() -> String {
    let mut css = String::from(PAGE_CSS);
    css.push_str(
        "h3{font-size:15px;margin:4px 0}\n\
         td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}\n\
         table.interfaces td{text-align:left;white-space:normal}\n\
         .chart-figure{margin:16px 0}\n\
         svg.chart{display:block;background:#fff}\n\
         svg.chart text{font-size:11px;fill:#374151}\n\
         svg.chart .axis-title{font-size:12px;fill:#111827}\n\
         svg.chart .grid{stroke:#e5e7eb;stroke-width:1}\n\
         svg.chart .axis-line,svg.chart .tick-mark{stroke:#6b7280;stroke-width:1}\n\
         svg.chart .threshold{stroke:#111827;stroke-width:1;stroke-dasharray:6 4}\n\
         svg.chart .baseline-line{stroke:#b91c1c;stroke-width:1.4;stroke-dasharray:8 4}\n\
         svg.chart .baseline-label{fill:#b91c1c}\n\
         .swatch.baseline{height:0;border-top:2px dashed #b91c1c}\n\
         svg.chart .series{fill:none;stroke-width:1.6;stroke-linejoin:round;stroke-linecap:round}\n\
         svg.chart .band{fill-opacity:.28}\n\
         svg.chart .no-data{font-size:16px;fill:#9ca3af}\n\
         .legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:4px 0 0 80px}\n\
         .swatch{display:inline-block;width:14px;height:10px;margin-right:4px;\
         vertical-align:middle;opacity:.8}\n\
         .swatch.line{height:3px}\n\
         .swatch.dashed{height:0;border-top:2px dashed #111827}\n\
         figcaption{color:#4b5563;font-size:12px;margin:4px 0 0 80px}\n\
         .exceeded,.changed{font-weight:600}\n\
         ul.evidence{margin:0;padding-left:16px}\n",
    );
    verdict_css(&mut css);
    for (index, colour) in chart::PALETTE.iter().enumerate() {
        let _ = writeln!(
            css,
            "svg.chart .series-{index}{{stroke:{colour}}}.swatch.series-{index}{{background:{colour}}}"
        );
    }
    css
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
        units::secs(report.span.seconds),
        report
            .span
            .start_unix_ms
            .map(format::utc)
            .unwrap_or_else(|| "an unknown start".to_string()),
        report.interfaces.len(),
        banded.len(),
        report.flows.len()
    );
    let sizing = &report.right_sizing;
    let baseline = match (&sizing.baseline, &sizing.note) {
        (Some(b), _) => b.describe(),
        (None, Some(note)) => format!("No baseline: {note}"),
        (None, None) => format!("No baseline known: {}", super::model::GIVE_A_BASELINE),
    };
    let _ = writeln!(out, "<p class=\"baseline\">{}</p>", Esc(&baseline));
}

/// Episodes drawn as bands: the ones that say something is holding the
/// network back (not idle, not free flow).
fn is_banded(verdict: Verdict) -> bool {
    !verdict.is_calm()
}

#[cfg(test)]
mod tests;
