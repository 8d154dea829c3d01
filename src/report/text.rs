//! The report as text for a terminal: what was recorded and the baseline
//! planned against, the episodes with their evidence and the enforcement
//! (burst ceiling, then baseline, then set against the plan), each
//! interface's rates, the instance's rates against its baseline and the
//! types that cover them (right-sizing), the flows that backed off most,
//! and the observer's health with everything the reader skipped.

use std::fmt::Write;

use super::model::*;
use crate::analysis::Verdict;
use crate::shared::clock::{format_offset, format_time_of_day, format_utc};
use crate::shared::units::{self, bytes, opt_pct, rate_bits, secs};

/// Episodes listed one by one; the rest are counted (all are in `--json`).
const EPISODES_LISTED: usize = 50;
/// Evidence lines shown per episode: the deciding signal and the next ones
/// past their thresholds.
const EVIDENCE_LISTED: usize = 3;

pub(crate) fn render(r: &Report) -> String {
    let mut out = String::new();
    header(&mut out, r);
    episodes(&mut out, r);
    interfaces(&mut out, r);
    right_sizing(&mut out, r);
    flows(&mut out, r);
    workloads(&mut out, r);
    health(&mut out, r);
    out
}

fn header(out: &mut String, r: &Report) {
    let rec = &r.recording;
    let _ = writeln!(out, "throttlescope report: {}", r.files.join(", "));
    let _ = writeln!(
        out,
        "recording   host {}, kernel {}, throttlescope {}, trace format {}, {} file{}",
        rec.host,
        rec.kernel,
        rec.tool_version,
        rec.format_version,
        rec.segments,
        if rec.segments == 1 { "" } else { "s" }
    );
    let ifaces: Vec<String> = rec
        .interfaces
        .iter()
        .map(|i| match &i.driver {
            Some(d) => format!("{} ({d})", i.name),
            None => i.name.clone(),
        })
        .collect();
    let _ = writeln!(
        out,
        "            started {}, interval {}, interfaces {}",
        format_utc(rec.start_unix_ms),
        secs(rec.interval_ns as f64 / 1e9),
        ifaces.join(", ")
    );
    if r.thresholds_changed.is_empty() {
        let _ = writeln!(out, "thresholds  as judged live");
    } else {
        let now = serde_json::to_value(&r.thresholds).unwrap_or_default();
        let changed: Vec<String> = r
            .thresholds_changed
            .iter()
            .map(|n| format!("{n}={}", now.get(n).cloned().unwrap_or_default()))
            .collect();
        let _ = writeln!(out, "thresholds  re-judged with {}", changed.join(", "));
    }
    let sizing = &r.right_sizing;
    match (&sizing.baseline, &sizing.note) {
        (Some(b), _) => {
            let _ = writeln!(out, "plan        {}", b.describe());
        }
        (None, Some(note)) => {
            let _ = writeln!(out, "plan        no baseline: {note}");
        }
        (None, None) => {
            let _ = writeln!(out, "plan        no baseline known: {GIVE_A_BASELINE}");
        }
    }
    let f = &r.filters;
    let mut filters = Vec::new();
    if !f.interfaces.is_empty() {
        filters.push(format!("interfaces {}", f.interfaces.join(", ")));
    }
    if !f.flows.is_empty() {
        filters.push(format!("flows {}", f.flows.join(", ")));
    }
    if let Some(s) = f.since_unix_ms {
        filters.push(format!("since {}", format_utc(s)));
    }
    if let Some(u) = f.until_unix_ms {
        filters.push(format!("until {}", format_utc(u)));
    }
    if !filters.is_empty() {
        let _ = writeln!(out, "filters     {}", filters.join("; "));
    }
    let s = &r.span;
    if let (Some(a), Some(b), Some(first), Some(last)) =
        (s.start_unix_ms, s.end_unix_ms, s.first_seq, s.last_seq)
    {
        let _ = writeln!(
            out,
            "span        {} intervals, {} (seq {first} to {last}, {} to {} UTC)",
            s.intervals,
            secs(s.seconds),
            format_time_of_day(a),
            format_time_of_day(b)
        );
    }
}

fn episodes(out: &mut String, r: &Report) {
    let shown: Vec<&EpisodeReport> = r
        .episodes
        .iter()
        .filter(|e| e.episode.verdict != Verdict::Idle)
        .collect();
    let idle = r.episodes.len() - shown.len();
    let _ = writeln!(
        out,
        "\nepisodes ({} with traffic, {idle} idle not listed)",
        shown.len()
    );
    if shown.is_empty() {
        let _ = writeln!(out, "  none: every interval was idle");
    }
    for e in shown.iter().take(EPISODES_LISTED) {
        let ep = &e.episode;
        let _ = writeln!(
            out,
            "  {:<10} {} to {}  {:>4} interval{}  {}{}{}{}",
            ep.iface,
            format_offset(e.start_offset_secs),
            format_offset(e.end_offset_secs),
            ep.intervals,
            if ep.intervals == 1 { " " } else { "s" },
            ep.verdict,
            // None beside a calm verdict (docs/verdicts.md, "Confidence").
            if ep.verdict.is_calm() {
                String::new()
            } else {
                format!(" (confidence {:.0}%)", ep.mean_confidence * 100.0)
            },
            match (&ep.microburst, ep.peak_rate_bps) {
                (Some(_), Some(p)) => format!(", in microbursts (peak {})", rate_bits(p)),
                (Some(_), None) => ", in microbursts".to_string(),
                (None, Some(p)) if !ep.verdict.is_calm() => format!(", peak {}", rate_bits(p)),
                _ => String::new(),
            },
            if ep.open {
                ", still going at the end"
            } else {
                ""
            }
        );
        if let Some(m) = &ep.microburst {
            let _ = writeln!(out, "             {m}");
        }
        if !e.held_note.is_empty() {
            let _ = writeln!(out, "             why: {}", e.held_note);
        }
        if let Some(b) = &e.counters_in_microbursts {
            let _ = writeln!(
                out,
                "             in {} of {} intervals, {}",
                b.intervals, ep.intervals, b.line
            );
        }
        if !e.judged_alone.is_empty() {
            let list: Vec<String> = e
                .judged_alone
                .iter()
                .map(|(v, n)| format!("{v} in {n} of {} intervals", ep.intervals))
                .collect();
            let _ = writeln!(
                out,
                "             judged alone: {}, never held (readings past a threshold that did not last)",
                list.join(", ")
            );
        }
        // The interval's own signals at the peak, for the verdicts that
        // rest on signals (for free flow and idle the note says it all).
        let calm = ep.verdict.is_calm();
        let notes: Vec<&str> = e
            .evidence
            .iter()
            .filter(|ev| ev.exceeded && ev.signal != "wire_pps")
            .map(|ev| ev.note.as_str())
            .take(EVIDENCE_LISTED)
            .collect();
        if !calm && !notes.is_empty() {
            let _ = writeln!(out, "             at its peak: {}", notes.join("; "));
        }
        if let Some(k) = crate::report::kafka::line(&e.kafka) {
            let _ = writeln!(out, "             by Kafka role: {k}");
        }
        if let Some(l) = &e.linklocal {
            let _ = writeln!(
                out,
                "             link-local: {}",
                crate::report::linklocal::line(l)
            );
        }
        if let Some(x) = &e.enforcement {
            let baseline = x.baseline_bps.map_or("unknown".to_string(), rate_bits);
            match x.burst_ceiling_bps {
                Some(ceiling) => {
                    let _ = writeln!(
                        out,
                        "             enforcement ({}): burst ceiling {} for {}, then baseline {baseline}",
                        x.direction,
                        rate_bits(ceiling),
                        secs(x.burst_secs)
                    );
                }
                None => {
                    let how = if e.episode.verdict == Verdict::HypervisorCap {
                        "capped"
                    } else {
                        "queued"
                    };
                    let _ = writeln!(
                        out,
                        "             enforcement ({}): {how} at a steady {baseline}, no step down in throughput",
                        x.direction
                    );
                }
            }
            if let Some(p) = &x.against_plan {
                let _ = writeln!(out, "             against the plan: {}", p.line);
            }
        }
    }
    if shown.len() > EPISODES_LISTED {
        let _ = writeln!(
            out,
            "  ... and {} more (all are in --json)",
            shown.len() - EPISODES_LISTED
        );
    }
}

fn interfaces(out: &mut String, r: &Report) {
    let _ = writeln!(out, "\ninterfaces");
    for i in &r.interfaces {
        let _ = writeln!(
            out,
            "  {}{}: tx {} (mean {}, peak {}), rx {} (mean {}, peak {})",
            i.name,
            i.driver
                .as_deref()
                .map(|d| format!(" ({d})"))
                .unwrap_or_default(),
            bytes(i.tx_bytes),
            rate_bits(i.mean_tx_bps),
            rate_bits(i.peak_tx_bps),
            bytes(i.rx_bytes),
            rate_bits(i.mean_rx_bps),
            rate_bits(i.peak_rx_bps)
        );
        let verdicts: Vec<String> = i.verdicts.iter().map(|(v, n)| format!("{v} {n}")).collect();
        let _ = writeln!(out, "    intervals: {}", verdicts.join(", "));
        if !i.allowance_available {
            let _ = writeln!(out, "    allowance counters unavailable");
        }
        for (name, a) in &i.allowance {
            let of = match name.as_str() {
                "bw_out" => "tx wire packets",
                "bw_in" => "rx wire packets",
                _ => "tx+rx wire packets",
            };
            let _ = writeln!(
                out,
                "    allowance {name:<9} {} exceeded: {} of {of} overall, peak {}",
                a.exceeded,
                opt_pct(a.pct),
                opt_pct(a.peak_pct)
            );
        }
        let _ = writeln!(
            out,
            "    retransmits {} of {} segments: {} overall, peak {}",
            i.retrans_segs,
            i.segs_out,
            opt_pct(i.retrans_pct),
            opt_pct(i.peak_retrans_pct)
        );
        if let Some(k) = crate::report::kafka::line(&i.kafka) {
            let _ = writeln!(out, "    by Kafka role: {k}");
        }
        if let Some(l) = &i.linklocal {
            let _ = writeln!(out, "    link-local: {}", crate::report::linklocal::line(l));
        }
        if i.peak_backlog_bytes > 0 || !i.host_drops.is_empty() {
            let drops: Vec<String> = i
                .host_drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "    host queue: peak backlog {}, drops {}",
                bytes(i.peak_backlog_bytes),
                if drops.is_empty() {
                    "none".to_string()
                } else {
                    drops.join(", ")
                }
            );
        }
    }
}

/// The instance's rates against its baseline, and the types whose
/// baseline covers them.
fn right_sizing(out: &mut String, r: &Report) {
    let s = &r.right_sizing;
    let _ = writeln!(
        out,
        "\nright-sizing ({} of the instance: {} summed, {} intervals)",
        s.rates_of(),
        if s.interfaces.is_empty() {
            "no interface".to_string()
        } else {
            s.interfaces.join(" + ")
        },
        s.intervals
    );
    match &s.baseline {
        Some(b) => {
            let _ = writeln!(out, "  {}", b.describe());
        }
        None => {
            let why = s.note.as_deref().unwrap_or("no baseline known");
            let _ = writeln!(out, "  no baseline: {why}");
            let _ = writeln!(out, "  {GIVE_A_BASELINE}");
        }
    }
    for (name, d) in [("out", &s.tx), ("in", &s.rx)] {
        let of = |bps: f64, pct: Option<f64>| match pct {
            Some(p) => format!("{} ({})", rate_bits(bps), units::pct(p)),
            None => rate_bits(bps),
        };
        let mut line = format!(
            "  {name:<3} p50 {}, p99 {}, max {}",
            of(d.p50_bps, d.p50_pct),
            of(d.p99_bps, d.p99_pct),
            of(d.max_bps, d.max_pct)
        );
        if let Some(base) = d.baseline_bps {
            line.push_str(&format!(
                " of baseline {}; above it {}, {} beyond",
                rate_bits(base),
                secs(d.above_secs),
                bytes(d.above_bytes as u64)
            ));
        }
        let _ = writeln!(out, "{line}");
    }
    if s.covering.is_empty() {
        let _ = writeln!(
            out,
            "  no type in the table has a baseline that covers the p99 (out {}, in {})",
            rate_bits(s.tx.p99_bps),
            rate_bits(s.rx.p99_bps)
        );
    } else {
        let first = s.order();
        let _ = writeln!(
            out,
            "  types whose baseline covers the p99 (out {}, in {}), {first}:",
            rate_bits(s.tx.p99_bps),
            rate_bits(s.rx.p99_bps)
        );
        for c in &s.covering {
            let burst = match c.burst_bps {
                Some(b) if b > c.baseline_bps => format!(", burst up to {}", rate_bits(b)),
                _ => String::new(),
            };
            let cpus = match c.vcpus {
                Some(n) => format!("{n:>3} vCPU{}", if n == 1 { " " } else { "s" }),
                None => "  ? vCPUs".to_string(),
            };
            let _ = writeln!(
                out,
                "    {:<16} {:<6} {cpus}  baseline {}{burst}",
                c.instance_type,
                c.arch.as_str(),
                rate_bits(c.baseline_bps)
            );
        }
        if s.covering_total > s.covering.len() {
            let _ = writeln!(
                out,
                "    ... and {} more types in the table (larger baselines)",
                s.covering_total - s.covering.len()
            );
        }
    }
    let _ = writeln!(out, "  specs: {}", s.table_provenance());
    let _ = writeln!(out, "  {WHY_BASELINE}");
    if let Some(c) = &s.capacity {
        let _ = writeln!(
            out,
            "  capacity for Kafka's rebalancers (baseline less {}%, docs/capacity.md):",
            crate::shared::units::significant(c.margin_pct, 3)
        );
        for line in crate::model::capacity::report_lines(c, s.measured.as_ref()) {
            let _ = writeln!(out, "    {line}");
        }
    }
}

fn flows(out: &mut String, r: &Report) {
    let _ = writeln!(out, "\nflows backing off (by total backoff score)");
    if r.flows.is_empty() {
        let _ = writeln!(out, "  none");
        return;
    }
    // Which interface a flow used matters when there are several.
    let iface_col = r.interfaces.len() > 1;
    let iface = |name: Option<&str>| {
        if iface_col {
            format!(" {:<10}", name.unwrap_or("-"))
        } else {
            String::new()
        }
    };
    // The process and the thread that sent (`java[data-plane-kafk]/4242`),
    // as wide as the longest.
    let owner = |f: &FlowSummary| {
        f.owner
            .as_ref()
            .map_or("-".to_string(), |o| o.label_with_thread())
    };
    let owner_width = r
        .flows
        .iter()
        .map(|f| owner(f).chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    // What each flow is to the Kafka broker (`consume orders/orders-1`),
    // only when the recording named some.
    let kafka_col = r.flows.iter().any(|f| f.kafka.is_some());
    let kafka_width = r
        .flows
        .iter()
        .filter_map(|f| f.kafka.as_ref())
        .map(|k| k.label().chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let kafka = |label: Option<String>| {
        if kafka_col {
            format!(" {:<kafka_width$}", label.unwrap_or_else(|| "-".into()))
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        out,
        "  {:>4} {:<40} {:>6}{} {:<owner_width$}{} {:>10} {:>10} {:>22} {:>16}  from",
        "rank",
        "peer",
        "lport",
        iface(Some("iface")),
        "owner",
        kafka(Some("kafka role".into())),
        "sent",
        "retrans",
        "rtt infl +delay",
        "backoff",
    );
    for f in &r.flows {
        let owner = owner(f);
        let infl = match (f.mean_rtt_inflation, f.peak_rtt_inflation) {
            (Some(m), Some(p)) => format!(
                "{}/{} +{}",
                units::ratio(m),
                units::ratio(p),
                secs(f.peak_added_delay_us as f64 / 1e6)
            ),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "  {:>4} {:<40} {:>6}{} {:<owner_width$}{} {:>10} {:>10} {:>22} {:>16}  {}{}",
            f.rank,
            f.peer.to_string(),
            f.local.port(),
            iface(f.iface.as_deref()),
            owner,
            kafka(f.kafka.as_ref().map(|k| k.label())),
            bytes(f.bytes_sent),
            units::retransmits(f.retransmits, f.spurious_retransmits, f.failed_retransmits),
            infl,
            format!(
                "{:.0} ({}/{})",
                f.backoff_total, f.backoff_intervals, f.intervals
            ),
            backoff_from(&f.backoff_parts_total),
            match (f.closed, f.peak_bps) {
                (true, Some(p)) => format!(" closed; peak {}", rate_bits(p)),
                (false, Some(p)) => format!("; peak {}", rate_bits(p)),
                (true, None) => " closed".to_string(),
                (false, None) => String::new(),
            }
        );
    }
    let _ = writeln!(
        out,
        "  retrans: N/Ms = M known spurious (D-SACKed or undone), +Nf = failed in the host; rtt infl: \
         srtt/min_rtt mean/peak, +delay = peak queuing delay over the peer's base RTT; backoff: \
         summed score (intervals backing off/seen), from: its largest parts; peak: the flow's \
         busiest window (--peak-window) of the recording"
    );
}

/// The parts that made a flow's backoff, largest first, as a share of
/// their sum: `delay 80%, cwnd 20%`; `-` when none.
fn backoff_from(p: &crate::analysis::BackoffParts) -> String {
    let mut parts = [
        ("delay", p.delay),
        ("retrans", p.retransmits),
        ("recovery", p.recovery),
        ("cwnd", p.cwnd),
    ];
    let sum: f64 = parts.iter().map(|(_, v)| v).sum();
    if sum <= 0.0 {
        return "-".into();
    }
    parts.sort_by(|a, b| b.1.total_cmp(&a.1));
    parts
        .iter()
        .filter(|(_, v)| *v / sum >= 0.05)
        .map(|(n, v)| format!("{n} {:.0}%", v / sum * 100.0))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Backoff by pod, container or service; only when some flow's owner had one.
fn workloads(out: &mut String, r: &Report) {
    if r.workloads.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nworkloads backing off (their flows' backoff added up)"
    );
    let _ = writeln!(
        out,
        "  {:<9} {:<40} {:>6} {:>10} {:>8} {:>10}",
        "kind", "name", "flows", "sent", "retrans", "backoff"
    );
    for w in &r.workloads {
        let _ = writeln!(
            out,
            "  {:<9} {:<40} {:>6} {:>10} {:>8} {:>10.0}",
            w.kind,
            w.name,
            w.flows,
            bytes(w.bytes_sent),
            w.retransmits,
            w.backoff_total
        );
    }
}

fn health(out: &mut String, r: &Report) {
    let h = &r.health;
    let _ = writeln!(out, "\nhealth (over the span)");
    let programs: Vec<String> = h
        .programs
        .iter()
        .map(|(n, p)| match &p.not_attached {
            Some(why) => format!(
                "{n} NOT attached ({why}; missing: {})",
                p.lost.as_deref().unwrap_or("unknown")
            ),
            None => format!("{n} {} events, {} missed", p.events, p.missed),
        })
        .collect();
    if !programs.is_empty() {
        let _ = writeln!(out, "  programs: {}", programs.join("; "));
    }
    let _ = writeln!(
        out,
        "  ring buffer drops {}, closes lost {} (late {}), closes missed {}, untracked flows {}, counter read failures {}, host-queue entries untracked {}, late intervals {}",
        h.ringbuf_drops, h.closes_lost, h.closes_deferred, h.closes_missed, h.untracked_flows, h.counter_read_failures, h.host_queue_untracked, h.late_intervals
    );
    if let Some([paused, all]) = h.per_packet_paused {
        let _ = writeln!(
            out,
            "  per-packet programs (--per-packet auto): paused in {paused} of {all} intervals \
             (their host-queue figures, peak rates and link-local senders not measured)"
        );
    }
    if let Some(o) = &h.otlp {
        let _ = writeln!(
            out,
            "  OTLP export: {} batches sent, {} dropped, {} failed requests, at most {} queued",
            o.sent, o.dropped, o.failures, o.max_queued
        );
    }
    if let Some(k) = &h.kafka {
        let _ = writeln!(out, "  {}", kafka_lookup_line(k));
    }
    if h.folded_flows > 0 {
        let _ = writeln!(
            out,
            "  {} flows in {} intervals past --list-flows: summed per interface, not listed (their traffic is in every verdict)",
            h.folded_flows, h.folded_intervals
        );
    }
    if h.probe_sampling > 1 {
        let _ = writeln!(
            out,
            "  srtt mean/max, cwnd min and cuts, data waiting: from 1 in {} incoming segments (--probe-sampling)",
            h.probe_sampling
        );
    }
    for (iface, resets) in &h.allowance_resets {
        let zeroed = h.allowance_zeroed_reads.get(iface).copied().unwrap_or(0);
        let failed = h.allowance_read_failures.get(iface).copied().unwrap_or(0);
        let untrusted = h
            .allowance_untrusted_intervals
            .get(iface)
            .copied()
            .unwrap_or(0);
        let _ = writeln!(
            out,
            "  allowance counters {iface}: {resets} resets, {zeroed} zeroed reads, {failed} failed reads, {untrusted} intervals not judged (read not trusted)"
        );
    }
    if h.episodes_forgotten > 0 {
        let _ = writeln!(
            out,
            "  {} old episodes forgotten (too many to keep)",
            h.episodes_forgotten
        );
    }
    if h.read_warnings.is_empty() {
        let _ = writeln!(out, "  read: every line read, nothing missing");
    } else {
        let _ = writeln!(out, "  read warnings ({}):", h.read_warnings.len());
        for w in &h.read_warnings {
            let _ = writeln!(out, "    {w}");
        }
    }
}

/// The Kafka lookup over the span, in one line: what was asked, how often
/// it worked and failed, the broker this host runs, and the last failure.
pub(crate) fn kafka_lookup_line(k: &crate::report::model::KafkaLookupSummary) -> String {
    let mut s = format!(
        "Kafka lookups of {}: {} ok, {} failed",
        crate::shared::terminal_text::inert(&k.target),
        k.lookups_ok,
        k.lookups_failed
    );
    match k.local_broker {
        Some(id) => s.push_str(&format!("; broker {id} runs here")),
        None if k.directory_age_ms.is_some() => s.push_str("; no broker of the cluster runs here"),
        None => {}
    }
    if let Some(ms) = k.directory_age_ms {
        s.push_str(&format!(
            "; directory {:.1} s old at the end",
            ms as f64 / 1000.0
        ));
    }
    if let Some(e) = &k.last_error {
        s.push_str(&format!(
            "; last: {}",
            crate::shared::terminal_text::inert(e)
        ));
    }
    s
}
