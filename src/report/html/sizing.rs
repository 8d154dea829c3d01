//! The right-sizing section of the page: the instance's rates against its
//! baseline, and the instance types whose baseline covers them. Says the
//! same as the text report (src/report/text.rs), in tables.

use std::fmt::Write;

use super::{format, Esc};
use crate::report::model::{DirectionSizing, Report, GIVE_A_BASELINE, WHY_BASELINE};
use crate::shared::units;

pub(crate) fn render(out: &mut String, report: &Report) {
    let s = &report.right_sizing;
    out.push_str("<section id=\"right-sizing\">\n<h2>Right-sizing</h2>\n");
    let _ = writeln!(
        out,
        "<p class=\"note\">{} of the instance: {} summed, {} interval(s).</p>",
        Esc(&s.rates_of()),
        if s.interfaces.is_empty() {
            "no interface".to_string()
        } else {
            Esc(&s.interfaces.join(" + ")).to_string()
        },
        s.intervals
    );
    match &s.baseline {
        Some(b) => {
            let _ = writeln!(out, "<p class=\"baseline\">{}</p>", Esc(&b.describe()));
        }
        None => {
            let _ = writeln!(
                out,
                "<p class=\"baseline warning\">No baseline: {}; {}.</p>",
                Esc(s.note.as_deref().unwrap_or("none known")),
                Esc(GIVE_A_BASELINE)
            );
        }
    }
    out.push_str(
        "<table class=\"right-sizing\" id=\"table-right-sizing\">\n<tr><th>direction</th>\
         <th>p50</th><th>p99</th><th>max</th><th>baseline</th><th>time above it</th>\
         <th>bytes beyond it</th></tr>\n",
    );
    for (name, d) in [("out", &s.tx), ("in", &s.rx)] {
        direction_row(out, name, d);
    }
    out.push_str("</table>\n");
    if s.covering.is_empty() {
        let _ = writeln!(
            out,
            "<p>No type in the table has a baseline that covers the p99 (out {}, in {}).</p>",
            units::rate_bits(s.tx.p99_bps),
            units::rate_bits(s.rx.p99_bps)
        );
    } else {
        let first = s.order();
        let _ = writeln!(
            out,
            "<p>Types whose baseline covers the p99 (out {}, in {}), {}:</p>",
            units::rate_bits(s.tx.p99_bps),
            units::rate_bits(s.rx.p99_bps),
            Esc(&first)
        );
        out.push_str(
            "<table class=\"covering\" id=\"table-covering\">\n<tr><th>type</th><th>arch</th>\
             <th>vCPUs</th><th>baseline</th><th>burst (up to)</th></tr>\n",
        );
        for c in &s.covering {
            let _ = writeln!(
                out,
                "<tr class=\"covering-type\"><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                Esc(&c.instance_type),
                c.arch.as_str(),
                c.vcpus.map_or("?".to_string(), |n| n.to_string()),
                units::rate_bits(c.baseline_bps),
                match c.burst_bps {
                    Some(b) if b > c.baseline_bps => units::rate_bits(b),
                    Some(_) => "–".to_string(),
                    None => "?".to_string(),
                }
            );
        }
        out.push_str("</table>\n");
        if s.covering_total > s.covering.len() {
            let _ = writeln!(
                out,
                "<p class=\"note\">… and {} more types in the table (larger baselines).</p>",
                s.covering_total - s.covering.len()
            );
        }
    }
    let _ = writeln!(
        out,
        "<p class=\"note\">Specs: {}.</p>\n<p>{}</p>",
        Esc(&s.table_provenance()),
        Esc(WHY_BASELINE)
    );
    if let Some(c) = &s.capacity {
        // The figure to paste closes the review.
        let _ = writeln!(
            out,
            "<h3>Capacity for Kafka's rebalancers</h3>\n<p class=\"note\">The baseline less \
             {}% (docs/capacity.md).</p>\n<ul class=\"capacity\" id=\"capacity\">",
            units::significant(c.margin_pct, 3)
        );
        for line in crate::model::capacity::report_lines(c, s.measured.as_ref()) {
            let _ = writeln!(out, "<li><code>{}</code></li>", Esc(&line));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
}

fn direction_row(out: &mut String, name: &str, d: &DirectionSizing) {
    let of = |bps: f64, pct: Option<f64>| match pct {
        Some(p) => format!("{} ({})", units::rate_bits(bps), units::pct(p)),
        None => units::rate_bits(bps),
    };
    let known = d.baseline_bps.is_some();
    let _ = writeln!(
        out,
        "<tr><td>{name}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td></tr>",
        of(d.p50_bps, d.p50_pct),
        of(d.p99_bps, d.p99_pct),
        of(d.max_bps, d.max_pct),
        format::opt_bps(d.baseline_bps),
        if known {
            units::secs(d.above_secs)
        } else {
            "–".to_string()
        },
        if known {
            units::bytes(d.above_bytes as u64)
        } else {
            "–".to_string()
        }
    );
}
