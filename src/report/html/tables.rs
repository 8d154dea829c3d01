//! The report's tables: episodes, interfaces, flows, health, recording
//! and thresholds. Every string from the recording goes through [`Esc`].

use std::collections::BTreeMap;
use std::fmt::Write;

use super::{format, Esc};
use crate::analysis::signal::Signal;
use crate::analysis::{Thresholds, Verdict};
use crate::report::model::{EpisodeReport, Report};
use crate::shared::clock::format_offset;
use crate::shared::units;

pub(crate) fn episodes(out: &mut String, report: &Report) {
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
         <th>baseline</th><th>burst length</th><th>against the plan</th></tr>\n",
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
             <td>{signal} = {peak}</td><td class=\"num\">{confidence}</td><td>",
            iface = Esc(&ep.iface),
            start = format_offset(e.start_offset_secs),
            end = format_offset(e.end_offset_secs),
            duration = units::secs(e.end_offset_secs - e.start_offset_secs),
            intervals = ep.intervals,
            signal = Esc(&ep.peak_signal),
            peak = Signal::display(&ep.peak_signal, ep.peak),
            // None beside a calm verdict (docs/verdicts.md, "Confidence").
            confidence = if ep.verdict.is_calm() {
                units::UNKNOWN.to_string()
            } else {
                format!("{:.2}", ep.mean_confidence)
            },
        );
        if !e.held_note.is_empty() {
            let _ = write!(out, "<p class=\"held\">{}</p>", Esc(&e.held_note));
        }
        if let Some(b) = &e.counters_in_microbursts {
            let _ = write!(
                out,
                "<p class=\"bursts\">in {} of {} intervals, {}</p>",
                b.intervals,
                ep.intervals,
                Esc(&b.line)
            );
        }
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
        if let Some(k) = crate::report::kafka::line(&e.kafka) {
            let _ = write!(out, "<p class=\"kafka\">by Kafka role: {}</p>", Esc(&k));
        }
        if let Some(l) = &e.linklocal {
            let _ = write!(
                out,
                "<p class=\"linklocal\">link-local: {}</p>",
                Esc(&crate::report::linklocal::line(l))
            );
        }
        out.push_str("</td>");
        match &e.enforcement {
            Some(enf) => {
                let _ = write!(
                    out,
                    "<td class=\"num\">{} ({})</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
                    enf.burst_ceiling_bps.map_or("steady (no step down)".to_string(), |b| format::opt_bps(Some(b))),
                    Esc(&enf.direction),
                    format::opt_bps(enf.baseline_bps),
                    units::secs(enf.burst_secs)
                );
                match &enf.against_plan {
                    Some(p) => {
                        let _ = write!(out, "<td class=\"against-plan\">{}</td>", Esc(&p.line));
                    }
                    None => out.push_str("<td>–</td>"),
                }
            }
            None => out.push_str("<td>–</td><td>–</td><td>–</td><td>–</td>"),
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</section>\n");
}

pub(crate) fn interfaces(out: &mut String, report: &Report) {
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
    row(out, "tx bytes", &|i| units::bytes(ifs[i].tx_bytes));
    row(out, "rx bytes", &|i| units::bytes(ifs[i].rx_bytes));
    row(out, "tx mean / peak", &|i| {
        format!(
            "{} / {}",
            units::rate_bits(ifs[i].mean_tx_bps),
            units::rate_bits(ifs[i].peak_tx_bps)
        )
    });
    row(out, "rx mean / peak", &|i| {
        format!(
            "{} / {}",
            units::rate_bits(ifs[i].mean_rx_bps),
            units::rate_bits(ifs[i].peak_rx_bps)
        )
    });
    row(out, "wire packets tx / rx", &|i| {
        format!(
            "{} / {}",
            format::count(ifs[i].tx_wire_packets),
            format::count(ifs[i].rx_wire_packets)
        )
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
                    format::count(a.exceeded),
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
            format::count(ifs[i].retrans_segs),
            format::count(ifs[i].segs_out),
            format::opt_pct(ifs[i].retrans_pct),
            format::opt_pct(ifs[i].peak_retrans_pct)
        )
    });
    row(out, "peak local backlog", &|i| {
        units::bytes(ifs[i].peak_backlog_bytes)
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
    if ifs.iter().any(|i| !i.kafka.is_empty()) {
        row(out, "by Kafka role", &|i| {
            crate::report::kafka::line(&ifs[i].kafka)
                .map_or("–".to_string(), |k| Esc(&k).to_string())
        });
    }
    if ifs.iter().any(|i| i.linklocal.is_some()) {
        row(out, "link-local", &|i| {
            ifs[i].linklocal.as_ref().map_or("–".to_string(), |l| {
                Esc(&crate::report::linklocal::line(l)).to_string()
            })
        });
    }
    out.push_str("</table>\n</section>\n");
}

pub(crate) fn flows(out: &mut String, report: &Report) {
    out.push_str("<section id=\"flows\">\n<h2>Flows</h2>\n");
    if report.flows.is_empty() {
        out.push_str("<p class=\"note\">No flow in the report.</p>\n</section>\n");
        return;
    }
    // What each flow is to the Kafka broker, only when the recording named
    // some.
    let kafka_col = report.flows.iter().any(|f| f.kafka.is_some());
    out.push_str(
        "<p class=\"note\">Ranked by backoff: the sum over intervals of each interval's \
         backoff score (0 to 100).</p>\n<table class=\"flows\" id=\"table-flows\">\n<tr>\
         <th>rank</th><th>peer</th><th>local port</th><th>interface</th><th>owner</th>",
    );
    if kafka_col {
        out.push_str("<th>Kafka role</th>");
    }
    out.push_str(
        "<th>intervals</th>\
         <th>sent</th><th>received</th><th>retransmits (spurious, failed)</th><th>cwnd reductions</th>\
         <th>recovery</th><th>RTT inflation mean / peak</th><th>peak added delay</th><th>min RTT</th>\
         <th>backoff total / peak / intervals</th><th>closed</th></tr>\n",
    );
    for f in &report.flows {
        let owner = match &f.owner {
            Some(o) => match &o.thread {
                Some(t) if *t != o.comm => {
                    format!("{} ({}), thread {}", Esc(&o.comm), o.pid, Esc(t))
                }
                _ => format!("{} ({})", Esc(&o.comm), o.pid),
            },
            None => "unknown".to_string(),
        };
        let kafka = match (kafka_col, &f.kafka) {
            (false, _) => String::new(),
            (true, Some(k)) => format!("<td class=\"kafka\">{}</td>", Esc(&k.label())),
            (true, None) => "<td class=\"kafka\">–</td>".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"flow\"><td class=\"num\">{rank}</td><td>{peer}</td>\
             <td class=\"num\">{port}</td><td>{iface}</td><td>{owner}</td>{kafka}\
             <td class=\"num\">{intervals}</td>\
             <td class=\"num\">{sent}</td><td class=\"num\">{received}</td>\
             <td class=\"num\">{retrans} ({spurious}, {failed})</td><td class=\"num\">{cwnd}</td>\
             <td class=\"num\">{recovery} ms</td><td class=\"num\">{mean} / {peak}</td>\
             <td class=\"num\">{delay}</td>\
             <td class=\"num\">{min_rtt} µs</td>\
             <td class=\"num\">{total} / {peak_backoff} / {backoff_intervals}</td>\
             <td>{closed}</td></tr>",
            rank = f.rank,
            peer = Esc(&f.peer.to_string()),
            port = f.local.port(),
            iface = Esc(f.iface.as_deref().unwrap_or("unknown")),
            intervals = f.intervals,
            sent = units::bytes(f.bytes_sent),
            received = units::bytes(f.bytes_received),
            retrans = f.retransmits,
            spurious = f.spurious_retransmits,
            failed = f.failed_retransmits,
            delay = units::secs(f.peak_added_delay_us as f64 / 1e6),
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

/// Backoff by pod, container or service; absent when no owner had one.
pub(crate) fn workloads(out: &mut String, report: &Report) {
    if report.workloads.is_empty() {
        return;
    }
    out.push_str(
        "<section id=\"workloads\">\n<h2>Workloads</h2>\n<p class=\"note\">Each pod, \
         container or service: its flows' backoff added up.</p>\n\
         <table class=\"workloads\" id=\"table-workloads\">\n<tr><th>kind</th><th>name</th>\
         <th>flows</th><th>sent</th><th>retransmits</th><th>backoff total</th></tr>\n",
    );
    for w in &report.workloads {
        let _ = writeln!(
            out,
            "<tr class=\"workload\"><td>{kind}</td><td>{name}</td><td class=\"num\">{flows}</td>\
             <td class=\"num\">{sent}</td><td class=\"num\">{retrans}</td>\
             <td class=\"num\">{total}</td></tr>",
            kind = Esc(&w.kind),
            name = Esc(&w.name),
            flows = w.flows,
            sent = units::bytes(w.bytes_sent),
            retrans = w.retransmits,
            total = format::significant(w.backoff_total, 4),
        );
    }
    out.push_str("</table>\n</section>\n");
}

fn counts(map: &BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".to_string();
    }
    map.iter()
        .map(|(k, n)| format!("{}: {n}", Esc(k)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn health(out: &mut String, report: &Report) {
    let h = &report.health;
    out.push_str("<section id=\"health\">\n<h2>Health</h2>\n");
    if !h.programs.is_empty() {
        out.push_str(
            "<table class=\"programs\">\n<tr><th>BPF program</th><th>events</th>\
             <th>missed (skipped by the kernel)</th></tr>\n",
        );
        for (name, p) in &h.programs {
            if let Some(why) = &p.not_attached {
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td colspan=\"2\">NOT attached: {}; missing: {}</td></tr>",
                    Esc(name),
                    Esc(why),
                    Esc(p.lost.as_deref().unwrap_or("unknown"))
                );
                continue;
            }
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
         <tr><th>late intervals (observer could not keep up)</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>incoming segments sampled for srtt, cwnd and data waiting (1 in N)</th><td class=\"num\">{}</td></tr>\n\
         <tr><th>intervals with the per-packet programs paused (queue figures, peak rates and link-local senders not measured)</th><td>{}</td></tr>\n\
         <tr><th>allowance counter resets</th><td>{}</td></tr>\n\
         <tr><th>allowance zeroed reads</th><td>{}</td></tr>\n\
         <tr><th>allowance read failures</th><td>{}</td></tr>\n\
         <tr><th>intervals not judged (allowance read not trusted)</th><td>{}</td></tr>\n\
         <tr><th>episodes forgotten</th><td class=\"num\">{}</td></tr>\n</table>",
        h.ringbuf_drops,
        h.untracked_flows,
        h.counter_read_failures,
        h.host_queue_untracked,
        h.late_intervals,
        h.probe_sampling.max(1),
        h.per_packet_paused.map_or_else(
            || "none (--per-packet always)".to_string(),
            |[paused, all]| format!("{paused} of {all} (--per-packet auto)")
        ),
        counts(&h.allowance_resets),
        counts(&h.allowance_zeroed_reads),
        counts(&h.allowance_read_failures),
        counts(&h.allowance_untrusted_intervals),
        h.episodes_forgotten
    );
    if let Some(o) = &h.otlp {
        let _ = writeln!(
            out,
            "<table class=\"health otlp\">\n\
             <tr><th>OTLP batches sent</th><td class=\"num\">{}</td></tr>\n\
             <tr><th>OTLP batches dropped</th><td class=\"num\">{}</td></tr>\n\
             <tr><th>OTLP failed requests</th><td class=\"num\">{}</td></tr>\n\
             <tr><th>OTLP batches queued at most</th><td class=\"num\">{}</td></tr>\n</table>",
            o.sent, o.dropped, o.failures, o.max_queued
        );
    }
    if let Some(k) = &h.kafka {
        let _ = writeln!(
            out,
            "<table class=\"health kafka\">\n\
             <tr><th>Kafka lookups of</th><td>{}</td></tr>\n\
             <tr><th>Kafka lookups ok</th><td class=\"num\">{}</td></tr>\n\
             <tr><th>Kafka lookups failed</th><td class=\"num\">{}</td></tr>\n\
             <tr><th>Kafka broker here</th><td>{}</td></tr>\n\
             <tr><th>Kafka last failure</th><td>{}</td></tr>\n</table>",
            Esc(&k.target),
            k.lookups_ok,
            k.lookups_failed,
            k.local_broker
                .map_or_else(|| "none".to_string(), |id| id.to_string()),
            Esc(k.last_error.as_deref().unwrap_or("none")),
        );
    }
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

pub(crate) fn recording(out: &mut String, report: &Report) {
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
    row("interval", units::secs(r.interval_ns as f64 / 1e9));
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
            units::secs(s.seconds),
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

pub(crate) fn thresholds(out: &mut String, report: &Report) {
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
         <th>allowed</th><th>meaning</th></tr>\n",
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
             <td>{range}</td><td>{doc}</td></tr>",
            cls = if changed { " class=\"changed\"" } else { "" },
            name = Esc(info.name),
            default = format::significant(info.default, 6),
            range = Esc(&info.range.to_string()),
            doc = Esc(info.doc)
        );
    }
    out.push_str("</table>\n</section>\n");
}
