//! The cluster report as one self-contained HTML page
//! (src/report/cluster.rs): a lane per host on one time axis (an SVG, each
//! episode a band in its verdict's colour), then the notable episodes with
//! the roles that carried them and what the other hosts saw, then the
//! hosts. Everything from the recordings is escaped; no script.

use std::fmt::Write;

use super::cluster::ClusterReport;
use super::cluster_text::peer_line;
use super::html::{Esc, VERDICT_COLOURS};
use crate::analysis::Verdict;
use crate::shared::clock::{format_offset, format_utc};
use crate::shared::units::{pct, secs};

const WIDTH: f64 = 1000.0;
const LABEL: f64 = 240.0;
const LANE_H: f64 = 26.0;
const TOP: f64 = 8.0;

/// The whole page.
pub fn render(r: &ClusterReport) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let names: Vec<String> = r.hosts.iter().map(|h| h.name.clone()).collect();
    let title = format!("throttlescope cluster report: {}", names.join(", "));
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
        Esc(&title),
        css()
    );
    let _ = writeln!(out, "<h1>{}</h1>", Esc(&title));
    let _ = writeln!(
        out,
        "<p>{} hosts on one time axis, {} to {} ({}); times are +HH:MM:SS from the first.</p>",
        r.hosts.len(),
        format_utc(r.start_unix_ms),
        format_utc(r.end_unix_ms),
        secs(r.end_unix_ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0)
    );
    timeline(&mut out, r);
    episodes(&mut out, r);
    hosts(&mut out, r);
    out.push_str("</body>\n</html>\n");
    out
}

fn css() -> String {
    let mut css = String::from(super::html::PAGE_CSS);
    css.push_str(
        "svg.timeline{display:block;background:#fff}\n\
         svg.timeline text{font-size:12px;fill:#374151}\n\
         svg.timeline .lane-bg{fill:#f9fafb;stroke:#e5e7eb}\n\
         svg.timeline .tick{stroke:#9ca3af;stroke-width:1;stroke-dasharray:2 3}\n\
         .legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:4px 0 0 0}\n\
         .swatch{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}\n\
         ul{margin:0;padding-left:16px}\n",
    );
    super::html::verdict_css(&mut css);
    css
}

fn timeline(out: &mut String, r: &ClusterReport) {
    let total = r.end_unix_ms.saturating_sub(r.start_unix_ms).max(1) as f64;
    let plot = WIDTH - LABEL - 10.0;
    let x = |ms: u64| LABEL + (ms.saturating_sub(r.start_unix_ms) as f64 / total) * plot;
    let height = TOP + LANE_H * r.hosts.len() as f64 + 24.0;
    let _ = writeln!(out, "<h2>Time axis</h2>");
    let _ = writeln!(
        out,
        "<svg class=\"timeline\" id=\"cluster-timeline\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" aria-label=\"a lane per host\">"
    );
    for (i, h) in r.hosts.iter().enumerate() {
        let y = TOP + LANE_H * i as f64;
        let _ = writeln!(
            out,
            "<g class=\"lane\" data-host=\"{}\"><text x=\"4\" y=\"{:.1}\">{}</text>\
             <rect class=\"lane-bg\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
            i,
            y + LANE_H * 0.65,
            Esc(&h.name),
            x(h.start_unix_ms),
            y + 3.0,
            (x(h.end_unix_ms) - x(h.start_unix_ms)).max(1.0),
            LANE_H - 6.0
        );
        for e in &h.lane {
            if e.verdict == Verdict::Idle {
                continue;
            }
            let _ = writeln!(
                out,
                "<rect class=\"band verdict-{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\">\
                 <title>{} {} {} to {}</title></rect>",
                e.verdict.as_str(),
                x(e.start_ms),
                y + 3.0,
                (x(e.end_ms) - x(e.start_ms)).max(1.0),
                LANE_H - 6.0,
                Esc(&e.iface),
                e.verdict,
                format_offset(e.start_ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0),
                format_offset(e.end_ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0),
            );
        }
        out.push_str("</g>\n");
    }
    let axis_y = TOP + LANE_H * r.hosts.len() as f64;
    for t in 0..=5u64 {
        let ms = r.start_unix_ms + (total as u64) * t / 5;
        let xx = x(ms);
        let anchor = match t {
            0 => "start",
            5 => "end",
            _ => "middle",
        };
        let _ = writeln!(
            out,
            "<line class=\"tick\" x1=\"{xx:.1}\" y1=\"{TOP}\" x2=\"{xx:.1}\" y2=\"{axis_y:.1}\"/>\
             <text x=\"{xx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            axis_y + 16.0,
            format_offset((ms - r.start_unix_ms) as f64 / 1000.0)
        );
    }
    out.push_str("</svg>\n<div class=\"legend\">");
    for (v, _) in VERDICT_COLOURS {
        if v == Verdict::Idle {
            continue;
        }
        let _ = write!(
            out,
            "<span><span class=\"swatch verdict-{}\"></span>{}</span>",
            v.as_str(),
            v
        );
    }
    out.push_str("</div>\n");
}

fn episodes(out: &mut String, r: &ClusterReport) {
    let _ = writeln!(
        out,
        "<h2>Episodes ({}; not idle, not free flow)</h2>",
        r.episodes.len()
    );
    if r.episodes.is_empty() {
        out.push_str("<p>None: no host was held back.</p>\n");
        return;
    }
    out.push_str(
        "<table class=\"cluster-episodes\"><tr><th>start</th><th>end</th><th>host</th>\
         <th>interface</th><th>verdict</th><th>carried by (Kafka role)</th>\
         <th>what the other hosts saw</th></tr>\n",
    );
    for v in &r.episodes {
        let h = &r.hosts[v.host];
        let e = &v.span;
        let off = |ms: u64| format_offset(ms.saturating_sub(r.start_unix_ms) as f64 / 1000.0);
        let carried = if v.carriers.is_empty() {
            "<span class=\"note\">no Kafka lookup in this recording</span>".to_string()
        } else {
            let items: String = v
                .carriers
                .iter()
                .take(6)
                .map(|c| format!("<li>{} {}</li>", Esc(&c.label), pct(c.pct)))
                .collect();
            format!("{} of {}:<ul>{items}</ul>", "share", v.direction)
        };
        let mut others = String::new();
        for o in &v.others {
            let _ = write!(others, "<div class=\"other\"><b>{}</b>: ", Esc(&o.name));
            if o.secs == 0.0 {
                others.push_str("not recorded then</div>");
                continue;
            }
            let verdicts: Vec<String> = o
                .verdicts
                .iter()
                .take(3)
                .map(|x| format!("{} {} {}", Esc(&x.iface), x.verdict, secs(x.secs)))
                .collect();
            others.push_str(&if verdicts.is_empty() {
                "idle".to_string()
            } else {
                verdicts.join(", ")
            });
            others.push_str("<ul>");
            if o.peers.is_empty() {
                let _ = write!(others, "<li>no flows to {}</li>", Esc(&h.name));
            }
            for p in o.peers.iter().take(6) {
                let _ = write!(others, "<li>{}</li>", Esc(&peer_line(p)));
            }
            others.push_str("</ul></div>");
        }
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict-{}\">{}</td>\
             <td>{carried}</td><td>{others}</td></tr>",
            off(e.start_ms),
            off(e.end_ms),
            Esc(&h.name),
            Esc(&e.iface),
            e.verdict.as_str(),
            e.verdict,
        );
    }
    out.push_str("</table>\n");
}

fn hosts(out: &mut String, r: &ClusterReport) {
    out.push_str(
        "<h2>Hosts</h2>\n<table class=\"cluster-hosts\"><tr><th>host</th><th>broker</th>\
         <th>addresses</th><th>recorded</th><th>intervals</th><th>files</th></tr>\n",
    );
    for h in &r.hosts {
        let addrs: Vec<String> = h.addrs.iter().take(3).map(|a| a.to_string()).collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} to {}</td><td>{}</td><td>{}</td></tr>",
            Esc(&h.name),
            h.broker.map_or("unknown".to_string(), |b| b.to_string()),
            Esc(&addrs.join(", ")),
            format_utc(h.start_unix_ms),
            format_utc(h.end_unix_ms),
            h.report.span.intervals,
            Esc(&h.files.join(", "))
        );
    }
    out.push_str("</table>\n");
    for h in &r.hosts {
        for w in &h.report.health.read_warnings {
            let _ = writeln!(out, "<p class=\"warning\">{}: {}</p>", Esc(&h.name), Esc(w));
        }
    }
    out.push_str(
        "<p class=\"note\">One host's whole report: <code>throttlescope report --html OUT</code> \
         with that host's files.</p>\n",
    );
}
