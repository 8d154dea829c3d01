//! Drawing one screen from the data and the person's choices. Pure: the
//! same inputs draw the same cells, on a real terminal or a test buffer.

use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Sparkline, Table, Wrap};
use ratatui::Frame;

use super::flows::{rows, FlowRow, SortKey};
use super::format::{clip, rtt_pair};
use super::history::{newest, History};
use super::keys::UiState;
use super::layout::{columns_for, peer_width, plan, Column, COLUMN_SPACING, MIN_HEIGHT, MIN_WIDTH};
use crate::analysis::headroom::Headroom;
use crate::analysis::{InterfaceVerdict, IntervalAnalysis, VerdictFamily};
use crate::model::snapshot::{AllowanceStatus, Health, InterfaceSample, Snapshot};
use crate::shared::units::{self, bytes, micros, opt_pct, rate_bits, rate_pps};
use crate::sinks::{headroom, held};

/// The latest interval, as shown.
#[derive(Debug, Clone)]
pub(crate) struct Interval {
    pub snap: Snapshot,
    pub analysis: IntervalAnalysis,
    /// `live`, or where a replayed interval came from.
    pub source: String,
}

/// Everything drawn from the data: the latest interval and the history.
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    pub latest: Option<Interval>,
    pub history: History,
}

impl Model {
    pub(crate) fn push(&mut self, snap: &Snapshot, analysis: &IntervalAnalysis, source: &str) {
        self.history.push(analysis);
        self.latest = Some(Interval {
            snap: snap.clone(),
            analysis: analysis.clone(),
            source: source.to_string(),
        });
    }
}

/// One screen's inputs.
pub(crate) struct Screen<'a> {
    pub model: &'a Model,
    pub ui: &'a UiState,
    /// Intervals that arrived since the display was paused.
    pub new_while_paused: u64,
    /// No more intervals will come (the end of a replay).
    pub ended: bool,
}

pub(crate) fn draw(frame: &mut Frame, screen: &Screen) {
    draw_widgets(frame, screen);
    // The last line of defence: a cell that still holds a control character
    // (text from another user a widget forgot) shows a replacement mark.
    for cell in frame.buffer_mut().content.iter_mut() {
        if cell
            .symbol()
            .chars()
            .any(crate::shared::terminal_text::is_hostile)
        {
            cell.set_symbol("\u{fffd}");
        }
    }
}

fn draw_widgets(frame: &mut Frame, screen: &Screen) {
    let area = frame.area();
    let n_ifaces = screen
        .model
        .latest
        .as_ref()
        .map_or(0, |l| l.snap.interfaces.len());
    let headroom = screen
        .model
        .latest
        .as_ref()
        .and_then(|l| l.analysis.headroom.as_ref());
    let Some(p) = plan(area, n_ifaces, headroom.is_some()) else {
        let text = format!(
            "terminal too small ({}x{}): need {MIN_WIDTH}x{MIN_HEIGHT}. q quits",
            area.width, area.height
        );
        frame.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }), area);
        return;
    };
    frame.render_widget(Paragraph::new(title(screen, p.hidden_ifaces)), p.title);
    frame.render_widget(Paragraph::new(status_line(screen)), p.status);
    if let (Some(h), Some(row)) = (headroom, p.headroom) {
        frame.render_widget(Paragraph::new(headroom_line(h, row.width)), row);
    }
    let Some(latest) = &screen.model.latest else {
        let wait = Paragraph::new("waiting for the first interval...");
        frame.render_widget(wait, p.flows);
        return;
    };
    if latest.snap.interfaces.is_empty() {
        let none = Rect::new(p.flows.x, p.flows.y.saturating_sub(1), p.flows.width, 1);
        frame.render_widget(Paragraph::new("no interfaces observed"), none);
    }
    for (iface, area) in latest.snap.interfaces.iter().zip(&p.ifaces) {
        let verdict = latest
            .analysis
            .interfaces
            .iter()
            .find(|v| v.iface == iface.name);
        let earlier = held::earlier_episodes(&latest.analysis, &iface.name);
        let episodes = Episodes {
            earlier,
            // The latest enforcement against the plan (the one under way
            // when there is one: episodes come oldest first).
            against_plan: headroom::against_plan(&latest.analysis, &iface.name).pop(),
        };
        let share =
            headroom::interface(&latest.analysis, &iface.name).map(headroom::short_share_text);
        draw_interface(
            frame,
            *area,
            iface,
            verdict,
            share,
            episodes,
            &screen.model.history,
        );
    }
    let rows = rows(
        &latest.snap,
        &latest.analysis,
        screen.ui.sort,
        &screen.ui.filter,
    );
    let several = latest.snap.interfaces.len() > 1;
    // Who used the interface, by Kafka role: a line over the flow table
    // when the lookup named flows and the table keeps a few rows.
    let mut flows = p.flows;
    if let Some(k) = crate::report::kafka::interval_line(&latest.analysis.kafka) {
        if flows.height >= 4 {
            let line = Rect::new(flows.x, flows.y, flows.width, 1);
            frame.render_widget(Paragraph::new(clip(&k, usize::from(flows.width))), line);
            flows = Rect::new(flows.x, flows.y + 1, flows.width, flows.height - 1);
        }
    }
    draw_flows(frame, flows, &rows, screen.ui, several);
}

/// The title row, most urgent first (a narrow screen cuts the end): the
/// end of a replay, the pause, interfaces that did not fit, then where the
/// data comes from and how the flows are chosen.
fn title(screen: &Screen, hidden_ifaces: usize) -> Line<'static> {
    let ui = screen.ui;
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut spans = vec![Span::styled("throttlescope ", bold)];
    if screen.ended {
        spans.push(Span::styled(
            format!(" {END_OF_RECORDING} "),
            Style::new().fg(Color::Black).bg(Color::Cyan),
        ));
        spans.push(Span::raw(" "));
    }
    if ui.paused {
        spans.push(Span::styled(
            format!(" PAUSED ({} new) ", screen.new_while_paused),
            Style::new().fg(Color::Black).bg(Color::Yellow),
        ));
        spans.push(Span::raw(" "));
    }
    let mut parts = Vec::new();
    if hidden_ifaces > 0 {
        parts.push(format!("interfaces hidden: {hidden_ifaces}"));
    }
    match &screen.model.latest {
        Some(l) => {
            parts.push(l.source.clone());
            parts.push(format!(
                "interval {} ({})",
                l.snap.seq,
                units::secs(l.snap.interval_secs())
            ));
        }
        None => parts.push("starting".into()),
    }
    parts.push(format!("sort: {}", ui.sort.label()));
    if !ui.filter.is_empty() {
        parts.push(format!("filter: {}", ui.filter));
    }
    spans.push(Span::styled(format!("| {}", parts.join(" | ")), bold));
    Line::from(spans)
}

/// The title's notice at the end of a replay.
pub(crate) const END_OF_RECORDING: &str = "end of recording — q quits";

pub(crate) const HELP: &str =
    "q/Esc quit | p/space pause | s sort | / filter by peer or process | Ctrl-Z suspend | ? hide help";

fn status_line(screen: &Screen) -> Line<'static> {
    let ui = screen.ui;
    if let Some(input) = &ui.input {
        return Line::from(vec![
            Span::styled("filter: ", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(format!("{input}_")),
            Span::styled(
                "   Enter applies, Esc clears",
                Style::new().fg(Color::DarkGray),
            ),
        ]);
    }
    if ui.help {
        return Line::from(HELP);
    }
    let latest = screen.model.latest.as_ref();
    let h = latest.map(|l| l.snap.health.clone()).unwrap_or_default();
    let mut text = health_text(&h);
    if let Some(folded) = latest.and_then(|l| l.snap.folded_text()) {
        text.push_str(&format!(" | {folded}"));
    }
    let style = if health_ok(&h) {
        Style::new().fg(Color::DarkGray)
    } else {
        Style::new().fg(Color::Yellow)
    };
    Line::from(vec![
        Span::styled(text, style),
        Span::styled("   ? keys", Style::new().fg(Color::DarkGray)),
    ])
}

/// What the observer missed: shown always, never hidden.
pub(crate) fn health_text(h: &Health) -> String {
    let mut text = format!(
        "health: missed runs {} | ringbuf drops {} | untracked flows {} | read failures {}",
        h.missed_total(),
        h.ringbuf_drops,
        h.untracked_flows + h.host_queue_untracked,
        h.counter_read_failures
    );
    if h.closes_lost > 0 {
        text.push_str(&format!(" | closes LOST {}", h.closes_lost));
    }
    if h.allowance_read_failures > 0 {
        text.push_str(&format!(
            " | allowance read failures {}",
            h.allowance_read_failures
        ));
    }
    if h.allowance_untrusted_reads > 0 {
        text.push_str(&format!(
            " | allowance reads not trusted {}",
            h.allowance_untrusted_reads
        ));
    }
    if h.late_intervals > 0 {
        text.push_str(&format!(" | late intervals {}", h.late_intervals));
    }
    if let Some(o) = h.otlp {
        // Always shown with --otlp: the exporter's stderr lines are held
        // back while this view owns the terminal.
        text.push_str(&format!(
            " | OTLP sent {} dropped {} failed {} queued {}",
            o.sent, o.dropped, o.failures, o.queued
        ));
    }
    if let Some(k) = &h.kafka {
        // Always shown with --kafka: the lookup's stderr lines are held
        // back while this view owns the terminal.
        text.push_str(&format!(
            " | Kafka lookups ok {} failed {}",
            k.lookups_ok, k.lookups_failed
        ));
        if let Some(e) = &k.last_error {
            text.push_str(&format!(
                " (last: {})",
                crate::shared::terminal_text::inert(e)
            ));
        }
    }
    if let Some(s) = h.probe_sampling_text() {
        text.push_str(&format!(" | segments sampled {s}"));
    }
    if let Some(p) = &h.per_packet {
        let state = if p.attached { "running" } else { "paused" };
        text.push_str(&format!(" | per-packet {state}"));
    }
    let absent = h.not_attached_text();
    if !absent.is_empty() {
        text.push_str(&format!(" | NOT attached: {absent}"));
    }
    if !h.missing_interfaces.is_empty() {
        text.push_str(&format!(
            " | interface MISSING: {}",
            h.missing_interfaces.join(", ")
        ));
    }
    text
}

pub(crate) fn health_ok(h: &Health) -> bool {
    h.missing_interfaces.is_empty()
        && h.missed_total() == 0
        && h.not_attached().next().is_none()
        && h.ringbuf_drops == 0
        && h.closes_lost == 0
        && h.untracked_flows == 0
        && h.host_queue_untracked == 0
        && h.counter_read_failures == 0
        && h.allowance_read_failures == 0
        && h.allowance_untrusted_reads == 0
        && h.late_intervals == 0
        && h.otlp.is_none_or(|o| o.dropped == 0 && o.failures == 0)
        && h.kafka.as_ref().is_none_or(|k| k.last_error.is_none())
}

/// The instance's headroom row: the full line when it fits `width`, else a
/// shorter one that keeps both directions' shares and the run above the
/// baseline (what an 80-column terminal must not lose). Yellow while the
/// instance runs above its baseline: it is spending burst credits.
pub(crate) fn headroom_line(h: &Headroom, width: u16) -> Line<'static> {
    let full = headroom::line(h);
    let text = if full.chars().count() <= usize::from(width) {
        full
    } else {
        headroom::short_line(h)
    };
    let style = if h.tx.above() || h.rx.above() {
        Style::new().fg(Color::Yellow)
    } else {
        Style::new()
    };
    match text.split_once(": ") {
        Some((head, rest)) => Line::from(vec![
            Span::styled(
                format!("{head}: "),
                Style::new().add_modifier(Modifier::BOLD),
            ),
            Span::styled(rest.to_string(), style),
        ]),
        None => Line::from(Span::styled(text, style)),
    }
}

fn verdict_style(v: &InterfaceVerdict) -> Style {
    let color = match v.held.verdict.family() {
        VerdictFamily::Idle => Color::DarkGray,
        VerdictFamily::Free => Color::Green,
        VerdictFamily::Queuing => Color::Yellow,
        VerdictFamily::Drop => Color::Red,
        VerdictFamily::Limit => Color::Magenta,
    };
    Style::new().fg(color).add_modifier(Modifier::BOLD)
}

/// The verdict and its evidence, in one line: the deciding signal first,
/// then the others that crossed their thresholds.
pub(crate) fn verdict_line(name: Option<&str>, v: Option<&InterfaceVerdict>) -> Line<'static> {
    let mut spans = Vec::new();
    if let Some(n) = name {
        spans.push(Span::styled(
            format!("{n} "),
            Style::new().add_modifier(Modifier::BOLD),
        ));
    } else {
        spans.push(Span::raw("  "));
    }
    let Some(v) = v else {
        spans.push(Span::raw("no verdict (not analysed)"));
        return Line::from(spans);
    };
    let h = &v.held;
    spans.push(Span::styled(h.verdict.as_str(), verdict_style(v)));
    // No confidence beside a calm verdict (held.rs says why).
    if !h.verdict.is_calm() {
        spans.push(Span::raw(format!(" {:.0}%", h.confidence * 100.0)));
    }
    if h.intervals > 1 {
        spans.push(Span::raw(format!(" for {} intervals", h.intervals)));
    }
    spans.push(Span::raw(format!(": {}", h.note)));
    if let Some(own) = held::own_verdict_unsaid(v) {
        spans.push(Span::raw(format!("; this interval alone: {own}")));
    }
    if let Some(b) = held::bursts_unsaid(v) {
        spans.push(Span::raw(format!("; {b}")));
    }
    Line::from(spans)
}

fn rates_line(
    iface: &InterfaceSample,
    v: Option<&InterfaceVerdict>,
    share: Option<&str>,
) -> Line<'static> {
    let mut spans = vec![Span::styled(
        format!(
            "{} ({})",
            iface.name,
            iface.driver.as_deref().unwrap_or("?")
        ),
        Style::new().add_modifier(Modifier::BOLD),
    )];
    let text = match v {
        Some(v) => {
            let r = &v.rates;
            let per_s = |n: u64| {
                if r.interval_secs > 0.0 {
                    n as f64 / r.interval_secs
                } else {
                    0.0
                }
            };
            // The peak beside the mean: a mean far under it is a
            // microburst the mean alone hides.
            let peaks = crate::sinks::table::peak_text(iface, r.interval_secs)
                .map(|p| format!("  {p}"))
                .unwrap_or_default();
            // Right after the rates it is a share of, before what an
            // 80-column screen can lose.
            let share = share.map(|s| format!("  {s}")).unwrap_or_default();
            format!(
                "  tx {} {}  rx {} {}{share}  wire {}{}{peaks}",
                rate_bits(r.tx_bps),
                rate_pps(per_s(r.tx_wire_packets)),
                rate_bits(r.rx_bps),
                rate_pps(per_s(r.rx_wire_packets)),
                rate_pps(r.wire_pps),
                if r.wire_estimated { " (est.)" } else { "" }
            )
        }
        None => "  no rates".into(),
    };
    spans.push(Span::raw(text));
    Line::from(spans)
}

fn allowance_line(iface: &InterfaceSample, v: Option<&InterfaceVerdict>) -> Line<'static> {
    let Some(v) = v else {
        return Line::from("");
    };
    let r = &v.rates;
    // A failed or untrusted read comes first, in place of rates that are
    // not data: the reason is what the line has room for.
    let problems = crate::sinks::table::allowance_problems(&iface.allowance);
    if !problems.is_empty() {
        return Line::from(Span::styled(
            format!("  allowance {}", problems.join("; ")),
            Style::new().fg(Color::Yellow),
        ));
    }
    let allowance = match &iface.allowance {
        AllowanceStatus::Read(_) => format!(
            "  exceeded: bw_out {} bw_in {} pps {} conntrack {} linklocal {}",
            opt_pct(r.bw_out_pct),
            opt_pct(r.bw_in_pct),
            opt_pct(r.pps_pct),
            opt_pct(r.conntrack_pct),
            opt_pct(r.linklocal_pct),
        ),
        AllowanceStatus::Unavailable { reason } => format!("  allowance: {reason}"),
    };
    let backlog = if r.host_queue_available {
        format!(
            "  backlog {}p {} sojourn {} drops {}",
            r.local_backlog_packets,
            bytes(r.local_backlog_bytes),
            r.local_sojourn_mean_us.map_or("-".into(), |us| micros(
                u32::try_from(us).unwrap_or(u32::MAX)
            )),
            r.local_drops
        )
    } else {
        "  backlog n/a".into()
    };
    // Why the counters rose under their line, beside them (the verdict
    // line's end has the whole explanation).
    let bursts = v
        .evidence
        .iter()
        .find(|e| e.signal == "counters_in_microbursts")
        .map(|e| {
            format!(
                "  rose in microbursts (peak {} the mean)",
                crate::shared::units::ratio(e.value)
            )
        })
        .unwrap_or_default();
    Line::from(vec![
        Span::raw(allowance),
        Span::styled(bursts, Style::new().fg(Color::Yellow)),
        Span::raw(format!(
            "  retrans {}{}",
            opt_pct(r.retransmit_pct),
            crate::shared::units::spurious_note(r.retrans_spurious)
        )),
        Span::raw(backlog),
    ])
}

/// What the verdict line says about an interface's episodes.
struct Episodes {
    /// The closed ones before the current one.
    earlier: Option<String>,
    /// The latest enforcement set against the plan, when a baseline is known.
    against_plan: Option<String>,
}

fn draw_interface(
    frame: &mut Frame,
    area: Rect,
    iface: &InterfaceSample,
    v: Option<&InterfaceVerdict>,
    share: Option<String>,
    episodes: Episodes,
    history: &History,
) {
    let line = |i: u16| Rect::new(area.x, area.y.saturating_add(i), area.width, 1);
    let verdict_line = |name, v| {
        let mut l = verdict_line(name, v);
        if let Some(e) = &episodes.earlier {
            l.spans.push(Span::raw(format!(" | before: {e}")));
        }
        if let Some(p) = &episodes.against_plan {
            l.spans.push(Span::raw(format!(" | against plan: {p}")));
        }
        l
    };
    let share = share.as_deref();
    let mut lines = match area.height {
        0 => return,
        1 => vec![verdict_line(Some(&iface.name), v)],
        2 => vec![rates_line(iface, v, share), verdict_line(None, v)],
        _ => vec![
            rates_line(iface, v, share),
            allowance_line(iface, v),
            verdict_line(None, v),
        ],
    };
    for (i, l) in lines.drain(..).enumerate() {
        frame.render_widget(Paragraph::new(l), line(i as u16));
    }
    if area.height >= 4 {
        draw_sparklines(frame, line(3), &iface.name, history);
    }
}

/// Throughput and allowance-exceeded history side by side.
fn draw_sparklines(frame: &mut Frame, area: Rect, iface: &str, history: &History) {
    let Some(h) = history.get(iface) else {
        return;
    };
    let half = area.width / 2;
    let left = Rect::new(area.x, area.y, half, 1);
    let right = Rect::new(area.x.saturating_add(half), area.y, area.width - half, 1);

    let peak = h.tx_bps.iter().copied().fold(0.0, f64::max);
    let wide = half >= 40;
    let tx_label = if wide {
        format!("  tx (max {}) ", rate_bits(peak))
    } else {
        "  tx ".to_string()
    };
    let [label, spark] = split_label(left, &tx_label);
    frame.render_widget(Paragraph::new(tx_label), label);
    // Kilobits: sparkline values are integers.
    let tx: Vec<u64> = newest(&h.tx_bps, spark.width as usize)
        .into_iter()
        .map(|b| (b / 1e3) as u64)
        .collect();
    let tx_spark = Sparkline::default()
        .data(tx)
        .max(((peak / 1e3) as u64).max(1))
        .style(Style::new().fg(Color::Cyan));
    frame.render_widget(tx_spark, spark);

    let al_label = if wide {
        " allowance exceeded (0-100%) "
    } else {
        " allow% "
    };
    let [label, spark] = split_label(right, al_label);
    frame.render_widget(Paragraph::new(al_label), label);
    // Tenths of a percent, capped at 100%: the scale is fixed, so a flat
    // line at the top means every packet was over the allowance.
    let al: Vec<Option<u64>> = newest(&h.allowance_pct, spark.width as usize)
        .into_iter()
        .map(|p| p.map(|p| (p.clamp(0.0, 100.0) * 10.0) as u64))
        .collect();
    let al_spark = Sparkline::default()
        .data(al)
        .max(1000)
        .style(Style::new().fg(Color::Yellow));
    frame.render_widget(al_spark, spark);
}

/// A label on the left of `area` and the rest for a sparkline; the label
/// gives way when the area is narrow.
fn split_label(area: Rect, label: &str) -> [Rect; 2] {
    let want = u16::try_from(label.chars().count()).unwrap_or(u16::MAX);
    let w = want.min(area.width / 2);
    Layout::horizontal([Constraint::Length(w), Constraint::Fill(1)]).areas(area)
}

fn cell(c: Column, r: &FlowRow) -> String {
    let a = r.attr;
    match c {
        // 0: no rank (sent nothing, or never left the host).
        Column::Rank if a.rank == 0 => "-".into(),
        Column::Rank => a.rank.to_string(),
        Column::Backoff => format!("{:.1}", a.backoff_score),
        Column::Peer => a.peer.to_string(),
        Column::LocalPort => a.local.port().to_string(),
        Column::Iface => clip(r.iface.as_deref().unwrap_or("-"), 10),
        Column::Owner => r.owner_label(usize::from(Column::Owner.width(0))),
        Column::Workload => clip(r.workload.as_deref().unwrap_or("-"), 24),
        Column::Tx => rate_bits(r.tx_bps),
        Column::Rtt => rtt_pair(a.srtt_us, a.min_rtt_us),
        Column::Cwnd => a.cwnd.to_string(),
        Column::Retrans => crate::shared::units::retransmits(
            a.retransmits,
            a.spurious_retransmits,
            a.failed_retransmits,
        ),
        Column::State => r.state_label(),
    }
}

/// The column a sort key orders by, marked in the header.
fn sorted_column(k: SortKey) -> Column {
    match k {
        SortKey::Backoff => Column::Backoff,
        SortKey::TxRate => Column::Tx,
        SortKey::Retransmits => Column::Retrans,
        SortKey::RttInflation => Column::Rtt,
        SortKey::Cwnd => Column::Cwnd,
    }
}

/// `iface`: show which interface each flow uses (several interfaces).
fn draw_flows(frame: &mut Frame, area: Rect, rows: &[FlowRow], ui: &UiState, iface: bool) {
    if area.height == 0 {
        return;
    }
    let peers: Vec<String> = rows.iter().map(|r| r.attr.peer.to_string()).collect();
    let peer_width = peer_width(peers.iter().map(String::as_str));
    let workload = rows.iter().any(|r| r.workload.is_some());
    let cols = columns_for(area.width, peer_width, iface, workload);
    let sorted = sorted_column(ui.sort);
    let header = Row::new(cols.iter().map(|c| {
        let t = if *c == sorted {
            format!("{}*", c.title())
        } else {
            c.title().to_string()
        };
        Cell::from(t)
    }))
    .style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED));
    // Rows for flows under the header; the last one says what did not fit.
    let room = usize::from(area.height.saturating_sub(1));
    let (shown, note) = if rows.is_empty() {
        let text = if ui.filter.is_empty() {
            "no active flows this interval".to_string()
        } else {
            format!("no flow matches filter '{}'", clip(&ui.filter, 40))
        };
        (0, Some(text))
    } else if rows.len() > room {
        let shown = room.saturating_sub(1);
        (shown, Some(format!("+{} more flows", rows.len() - shown)))
    } else {
        (rows.len(), None)
    };
    let body: Vec<Row> = rows
        .iter()
        .take(shown)
        .map(|r| {
            let style = if r.attr.backoff_score >= 50.0 {
                Style::new().fg(Color::Red)
            } else if r.attr.backoff_score >= 10.0 {
                Style::new().fg(Color::Yellow)
            } else {
                Style::new()
            };
            Row::new(cols.iter().map(|c| Cell::from(cell(*c, r)))).style(style)
        })
        .collect();
    let table_area = match &note {
        Some(text) => {
            let used = u16::try_from(shown).unwrap_or(u16::MAX).saturating_add(1);
            let at = Rect::new(area.x, area.y.saturating_add(used), area.width, 1);
            if at.bottom() <= area.bottom() {
                frame.render_widget(Paragraph::new(text.clone()), at);
            }
            Rect::new(area.x, area.y, area.width, used.min(area.height))
        }
        None => area,
    };
    let widths: Vec<Constraint> = cols
        .iter()
        .map(|c| Constraint::Length(c.width(peer_width)))
        .collect();
    let table = Table::new(body, widths)
        .header(header)
        .column_spacing(COLUMN_SPACING)
        .flex(Flex::Start);
    frame.render_widget(table, table_area);
}
