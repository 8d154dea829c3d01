//! The plain-text view: interfaces, the busiest flows, and health.

use std::fmt::Write;

use crate::analysis::attribution::BaseRtts;
use crate::analysis::IntervalAnalysis;
use crate::model::snapshot::{AllowanceStatus, FlowSample, Health, InterfaceSample, Snapshot};
use crate::shared::units::{self, micros, opt_pct, rate_bits, rate_pps};
use crate::sinks::{headroom, held};

/// The interval's peak rates beside its means (issue 24): `peak 12 ms: tx
/// 348Mb/s 30.1kpps (5.2x the mean)  rx ...`; None when not measured.
/// Shared by the plain tables and the full-screen view.
pub(crate) fn peak_text(i: &InterfaceSample, secs: f64) -> Option<String> {
    let window = i.peak_window_us?;
    let side = |bps: Option<u64>, pps: Option<u64>, bytes: u64| {
        let bps = bps? as f64;
        let mean = bytes as f64 * 8.0 / secs;
        let times = if mean > 0.0 {
            format!(" ({} the mean)", units::ratio(bps / mean))
        } else {
            String::new()
        };
        Some(format!(
            "{} {}{times}",
            rate_bits(bps),
            rate_pps(pps.unwrap_or(0) as f64)
        ))
    };
    let tx = side(i.tx_peak_bps, i.tx_peak_pps, i.delta.tx_bytes);
    let rx = side(i.rx_peak_bps, i.rx_peak_pps, i.delta.rx_bytes);
    if tx.is_none() && rx.is_none() {
        return None;
    }
    let unknown = || units::UNKNOWN.to_string();
    Some(format!(
        "peak {} ms: tx {}  rx {}",
        units::significant(window as f64 / 1000.0, 3),
        tx.unwrap_or_else(unknown),
        rx.unwrap_or_else(unknown)
    ))
}

/// Renders one snapshot (and its analysis, when given) as text; `top`
/// flows at most.
pub(crate) fn render(snap: &Snapshot, analysis: Option<&IntervalAnalysis>, top: usize) -> String {
    let secs = snap.interval_secs().max(1e-9);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- interval {} ({}) --",
        snap.seq,
        units::secs(snap.interval_secs())
    );
    // The instance before its interfaces: the baseline is the instance's,
    // and its interfaces' shares below are read against it.
    if let Some(line) = analysis.and_then(headroom::of) {
        let _ = writeln!(out, "{line}");
    }
    for i in &snap.interfaces {
        let _ = writeln!(
            out,
            "{:<12} {:<8} tx {:>10} {:>9}   rx {:>10} {:>9}   drops tx {} rx {}",
            i.name,
            i.driver.as_deref().unwrap_or("-"),
            rate_bits(i.delta.tx_bytes as f64 * 8.0 / secs),
            rate_pps(i.delta.tx_packets as f64 / secs),
            rate_bits(i.delta.rx_bytes as f64 * 8.0 / secs),
            rate_pps(i.delta.rx_packets as f64 / secs),
            i.delta.tx_dropped,
            i.delta.rx_dropped,
        );
        if let Some(peaks) = peak_text(i, secs) {
            let _ = writeln!(out, "{:<12} {peaks}", "");
        }
        if let Some(share) = analysis.and_then(|a| headroom::share(a, &i.name)) {
            let _ = writeln!(out, "{:<12} {share}", "");
        }
        if let AllowanceStatus::Unavailable { reason } = &i.allowance {
            let _ = writeln!(out, "{:<12} allowance counters unavailable: {reason}", "");
        }
        for problem in allowance_problems(&i.allowance) {
            let _ = writeln!(out, "{:<12} allowance {problem}", "");
        }
        if let Some(v) = analysis.and_then(|a| a.interfaces.iter().find(|v| v.iface == i.name)) {
            let r = &v.rates;
            let _ = writeln!(
                out,
                "{:<12} bw_out {} bw_in {} pps {} retrans {}{}  => {}",
                "",
                opt_pct(r.bw_out_pct),
                opt_pct(r.bw_in_pct),
                opt_pct(r.pps_pct),
                opt_pct(r.retransmit_pct),
                units::spurious_note(r.retrans_spurious),
                held::one_line(v)
            );
            if let Some(before) = analysis.and_then(|a| held::earlier_episodes(a, &i.name)) {
                let _ = writeln!(out, "{:<12} before: {before}", "");
            }
        }
        // Episodes carry a plan only when a baseline is known; said
        // whether or not this interval judged the interface.
        for plan in analysis.map_or_else(Vec::new, |a| headroom::against_plan(a, &i.name)) {
            let _ = writeln!(out, "{:<12} against plan: {plan}", "");
        }
    }
    // With several interfaces, which one a flow uses says whose signals it
    // feeds; with one it says nothing.
    let iface_col = snap.interfaces.len() > 1;
    let iface_of = |f: &FlowSample| {
        if iface_col {
            format!(" {:<10}", f.iface_label())
        } else {
            String::new()
        }
    };
    // Who the flow belongs to on a container host, when anyone knows.
    let workload_col = snap.flows.iter().any(|f| f.workload_label().is_some());
    let workload_of = |f: &FlowSample| {
        if workload_col {
            format!(" {:<24}", f.workload_label().unwrap_or_else(|| "-".into()))
        } else {
            String::new()
        }
    };
    // Each flow's busiest window beside its mean, when the kernel measured
    // one: the flows that burst.
    let peak_col = snap.flows.iter().any(|f| f.peak_bps.is_some());
    let peak_of = |f: &FlowSample| {
        if peak_col {
            format!(
                " {:>10}",
                f.peak_bps
                    .map_or_else(|| "-".into(), |p| rate_bits(p as f64))
            )
        } else {
            String::new()
        }
    };
    let shown: Vec<&FlowSample> = busiest(&snap.flows).into_iter().take(top).collect();
    // The process and the thread that sent: as wide as the longest shown.
    let owner_width = shown
        .iter()
        .map(|f| owner_label(f).chars().count())
        .max()
        .unwrap_or(0)
        .max(OWNER_WIDTH);
    // Who used the interface, by Kafka role, over the flows.
    if let Some(k) = analysis.and_then(|a| crate::report::kafka::interval_line(&a.kafka)) {
        let _ = writeln!(out, "{k}");
    }
    // Added delay as the ranking takes it: over the peer's base RTT.
    let bases = BaseRtts::of(snap);
    let _ = writeln!(
        out,
        "{:<40} {:>6}{} {:<owner_width$}{} {:>10}{} {:>9} {:>9} {:>6} {:>6} {:>8} {:<6}",
        "peer",
        "lport",
        if iface_col {
            format!(" {:<10}", "iface")
        } else {
            String::new()
        },
        "owner",
        if workload_col {
            format!(" {:<24}", "workload")
        } else {
            String::new()
        },
        "tx",
        if peak_col {
            format!(" {:>10}", "peak")
        } else {
            String::new()
        },
        "srtt",
        "min_rtt",
        "infl",
        "cwnd",
        "retrans",
        "state"
    );
    // What each flow is to the local Kafka broker, when a lookup named it:
    // last, so the columns before keep their places.
    let kafka_col = snap.flows.iter().any(|f| f.kafka.is_some());
    for f in shown {
        let kafka = match (&f.kafka, kafka_col) {
            (Some(k), _) => format!(" {}", k.label()),
            (None, true) => " -".into(),
            (None, false) => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<40} {:>6}{} {:<owner_width$}{} {:>10}{} {:>9} {:>9} {:>6} {:>6} {:>8} {:<6}{kafka}",
            f.peer.to_string(),
            f.local.port(),
            iface_of(f),
            owner_label(f),
            workload_of(f),
            rate_bits(f.delta.bytes_sent as f64 * 8.0 / secs),
            peak_of(f),
            micros(f.srtt_us),
            micros(f.min_rtt_us),
            f.rtt_inflation()
                .map(|x| format!(
                    "{} {}",
                    units::ratio(x),
                    units::added_delay(bases.added_delay_us(f))
                ))
                .unwrap_or_else(|| "-".into()),
            f.cwnd,
            units::retransmits(
                f.delta.retrans_segs,
                f.delta.spurious_retransmits(),
                f.delta.retrans_failed
            ) + &units::probes_note(f.delta.retrans_probes),
            if f.closed { "closed" } else { f.state.as_str() },
        );
    }
    let more = snap.flows.len().saturating_sub(top);
    let unshown: Vec<String> = [
        (more > 0).then(|| format!("{more} more flows")),
        (snap.idle_flows > 0)
            .then(|| format!("{} idle flows (tracked, not listed)", snap.idle_flows)),
        snap.folded_text(),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !unshown.is_empty() {
        let _ = writeln!(out, "... and {}", unshown.join(", and "));
    }
    let h = &snap.health;
    let _ = writeln!(
        out,
        "health: missed runs {}  ringbuf drops {}  closes lost {} (late {})  untracked flows {}  counter read failures {}  allowance read failures {}  allowance reads not trusted {}  late intervals {}",
        h.missed_total(),
        h.ringbuf_drops,
        h.closes_lost,
        h.closes_deferred,
        h.untracked_flows,
        h.counter_read_failures,
        h.allowance_read_failures,
        h.allowance_untrusted_reads,
        h.late_intervals
    );
    if let Some(s) = untracked_text(h) {
        let _ = writeln!(out, "health: {s}");
    }
    if let Some(s) = h.kafka_text() {
        let _ = writeln!(out, "health: {s}");
    }
    if let Some(s) = h.otlp_text() {
        let _ = writeln!(out, "health: {s}");
    }
    if h.moved_set_full + h.moved_set_gone > 0 {
        let _ = writeln!(
            out,
            "health: moved set full {} times (the next dump read every flow), {} members gone \
             with their close missed",
            h.moved_set_full, h.moved_set_gone
        );
    }
    if let Some(s) = h.probe_sampling_text() {
        let _ = writeln!(
            out,
            "health: srtt mean/max, cwnd min and cuts, data waiting from {s} incoming segments (--probe-sampling)"
        );
    }
    if let Some(s) = h.per_packet_text() {
        let _ = writeln!(out, "health: per-packet programs {s} (--per-packet auto)");
    }
    if !h.missing_interfaces.is_empty() {
        let _ = writeln!(
            out,
            "health: interface MISSING: {} (asked for with --iface; the others go on)",
            h.missing_interfaces.join(", ")
        );
    }
    for p in h.not_attached() {
        let _ = writeln!(
            out,
            "health: program {} NOT attached ({}); missing: {}",
            p.name,
            p.not_attached.as_deref().unwrap_or("unknown reason"),
            p.lost.as_deref().unwrap_or("unknown")
        );
    }
    out
}

/// What is wrong with an interface's allowance read this interval, each with
/// its reason, for every view: the read failed (counted, the last good totals
/// shown), it worked but its counters are not trusted, or lines of the
/// counter file were skipped. Empty when nothing is.
pub(crate) fn allowance_problems(status: &AllowanceStatus) -> Vec<String> {
    let Some(a) = status.sample() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(e) = &a.last_error {
        out.push(format!(
            "read FAILED ({} since start): {e}",
            a.read_failures
        ));
    }
    if let Some(why) = &a.untrusted {
        out.push(format!("read NOT trusted: {why}"));
    }
    if let Some(skipped) = &a.skipped {
        out.push(format!("file: {skipped}"));
    }
    out
}

/// Flows by bytes sent in the interval, then by id for a stable order.
pub(crate) fn busiest(flows: &[FlowSample]) -> Vec<&FlowSample> {
    let mut v: Vec<&FlowSample> = flows.iter().collect();
    v.sort_by(|a, b| {
        (b.delta.bytes_sent + b.delta.bytes_received)
            .cmp(&(a.delta.bytes_sent + a.delta.bytes_received))
            .then(a.id.cmp(&b.id))
    });
    v
}

/// The owner column's least width: a process name (15) and a pid.
const OWNER_WIDTH: usize = 16;

/// `comm[thread]/pid` ([`crate::model::snapshot::Owner::label_with_thread`]).
fn owner_label(f: &FlowSample) -> String {
    match &f.owner {
        Some(o) => o.label_with_thread(),
        None => "-".into(),
    }
}

/// A line on the untracked sockets when any is open or moved bytes in the
/// interval: they are in no flow table, so the view says so beside it.
fn untracked_text(h: &Health) -> Option<String> {
    let moved = h.untracked_bytes_sent + h.untracked_bytes_received;
    if h.untracked_open == 0 && moved == 0 {
        return None;
    }
    let cap = if h.max_flows > 0 {
        format!(" (--max-flows {})", h.max_flows)
    } else {
        String::new()
    };
    Some(format!(
        "{} untracked sockets open{cap}, {} sent and {} received this interval: not in the flows listed",
        h.untracked_open,
        units::bytes(h.untracked_bytes_sent),
        units::bytes(h.untracked_bytes_received),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{FlowCounters, Health, InterfaceSample, LinkCounters};

    /// The first interval (no flows) of `interfaces`, with `health`.
    fn one_interval(interfaces: Vec<InterfaceSample>, health: Health) -> Snapshot {
        Snapshot {
            interfaces,
            health,
            ..Snapshot::example(0)
        }
    }

    fn iface(name: &str) -> InterfaceSample {
        InterfaceSample {
            name: name.into(),
            driver: None,
            totals: LinkCounters::default(),
            delta: LinkCounters::default(),
            offloads: None,
            mtu: 1500,
            allowance: AllowanceStatus::Unavailable {
                reason: "test".into(),
            },
            host_queue: None,
            ..Default::default()
        }
    }

    fn flow(id: u64, iface: Option<&str>) -> FlowSample {
        FlowSample {
            peer: format!("10.0.0.{id}:40000").parse().unwrap(),
            delta: FlowCounters {
                bytes_sent: 1000 * id,
                ..Default::default()
            },
            iface: iface.map(String::from),
            ..FlowSample::example(id)
        }
    }

    #[test]
    fn allowance_failures_untrusted_reads_and_skipped_lines_are_shown_with_their_reason() {
        use crate::model::snapshot::AllowanceSample;
        let mut eth0 = iface("eth0");
        eth0.allowance = AllowanceStatus::Read(Box::new(AllowanceSample {
            read_failures: 3,
            last_error: Some("/tmp/ena.txt: cannot read: No such file or directory".into()),
            untrusted: Some("went down, not to near zero: bw_out_allowance_exceeded 9 -> 8".into()),
            skipped: Some("1 line skipped: /tmp/ena.txt:2: no value for \"x\"".into()),
            ..Default::default()
        }));
        let snap = one_interval(
            vec![eth0],
            Health {
                counter_read_failures: 1,
                allowance_read_failures: 3,
                allowance_untrusted_reads: 2,
                ..Default::default()
            },
        );
        let text = render(&snap, None, 10);
        for want in [
            "allowance read FAILED (3 since start): /tmp/ena.txt: cannot read: No such file",
            "allowance read NOT trusted: went down, not to near zero: bw_out_allowance_exceeded 9 -> 8",
            "allowance file: 1 line skipped: /tmp/ena.txt:2: no value for \"x\"",
            "counter read failures 1  allowance read failures 3  allowance reads not trusted 2",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
    }

    /// The OTLP exporter's delivery is a health line of its own with
    /// `--otlp`, and absent without.
    #[test]
    fn the_otlp_delivery_is_a_health_line() {
        let mut snap = one_interval(vec![iface("eth0")], Health::default());
        assert!(!render(&snap, None, 10).contains("OTLP"));
        snap.health.otlp = Some(crate::model::snapshot::OtlpHealth {
            sent: 4,
            dropped: 9,
            failures: 7,
            queued: 8,
        });
        let text = render(&snap, None, 10);
        assert!(
            text.contains("health: OTLP batches sent 4, dropped 9, failed requests 7, queued 8"),
            "{text}"
        );
    }

    #[test]
    fn the_interface_column_appears_with_several_interfaces() {
        let mut snap = Snapshot {
            flows: vec![flow(2, Some("ens6")), flow(1, None)],
            ..one_interval(vec![iface("ens5"), iface("ens6")], Health::default())
        };
        let text = render(&snap, None, 10);
        let line = |peer: &str| text.lines().find(|l| l.starts_with(peer)).unwrap();
        assert!(line("peer").contains(" iface "), "{text}");
        assert!(line("10.0.0.2:40000").contains(" ens6 "), "{text}");
        assert!(line("10.0.0.1:40000").contains(" - "), "{text}");
        snap.interfaces.pop();
        let text = render(&snap, None, 10);
        assert!(!text.contains("iface") && !text.contains("ens6"), "{text}");
    }

    #[test]
    fn peaks_show_beside_the_means_when_measured() {
        let mut snap = Snapshot {
            flows: vec![flow(2, None), flow(1, None)],
            ..one_interval(vec![iface("ens5")], Health::default())
        };
        let text = render(&snap, None, 10);
        assert!(!text.contains("peak"), "{text}");
        let i = &mut snap.interfaces[0];
        i.delta.tx_bytes = 8_000_000;
        i.tx_peak_bps = Some(352_000_000);
        i.tx_peak_pps = Some(30_000);
        i.peak_window_us = Some(12_000);
        snap.flows[0].peak_bps = Some(300_000_000);
        let text = render(&snap, None, 10);
        assert!(
            text.contains("peak 12 ms: tx 352Mb/s 30.0kpps (5.5x the mean)  rx -"),
            "{text}"
        );
        let line = |peer: &str| text.lines().find(|l| l.starts_with(peer)).unwrap();
        assert!(line("peer").contains(" peak "), "{text}");
        assert!(line("10.0.0.2:40000").contains(" 300Mb/s "), "{text}");
    }

    #[test]
    fn the_workload_column_appears_when_a_flow_has_one() {
        let mut snap = Snapshot {
            flows: vec![flow(2, None), flow(1, None)],
            ..one_interval(vec![iface("ens5")], Health::default())
        };
        let text = render(&snap, None, 10);
        assert!(!text.contains("workload"), "{text}");
        snap.flows[0].owner = Some(crate::model::snapshot::Owner {
            pid: 7,
            comm: "java".into(),
            thread: None,
            cgroup_id: 0,
            cgroup: Some("/system.slice/kafka.service".into()),
            workload: Some(crate::model::workload::Workload::from_cgroup_path(
                "/system.slice/kafka.service",
            )),
        });
        snap.flows[1].netns_name = Some("tenant-b".into());
        let text = render(&snap, None, 10);
        let line = |peer: &str| text.lines().find(|l| l.starts_with(peer)).unwrap();
        assert!(line("peer").contains(" workload "), "{text}");
        assert!(line("10.0.0.2:40000").contains(" kafka.service "), "{text}");
        assert!(
            line("10.0.0.1:40000").contains(" netns tenant-b "),
            "{text}"
        );
    }

    /// The owner shows with the thread that sent, and a flow's added
    /// delay is over its peer's base RTT, as the ranking and the report
    /// take it (not over its own min_rtt, taken under the queue).
    #[test]
    fn the_sending_thread_and_the_added_delay_over_the_peers_base_show() {
        let java = |thread: Option<&str>| crate::model::snapshot::Owner {
            pid: 4242,
            comm: "java".into(),
            thread: thread.map(String::from),
            cgroup_id: 0,
            cgroup: None,
            workload: None,
        };
        let mut early = flow(2, None);
        early.owner = Some(java(Some("data-plane-kafk")));
        early.min_rtt_us = 10;
        early.srtt_us = 110;
        let mut late = flow(1, None);
        late.peer = "10.0.0.2:40001".parse().unwrap();
        late.owner = Some(java(Some("java")));
        late.min_rtt_us = 5_000;
        late.srtt_us = 6_000;
        let snap = Snapshot {
            flows: vec![early, late],
            ..one_interval(vec![iface("ens5")], Health::default())
        };
        let text = render(&snap, None, 10);
        let line = |peer: &str| text.lines().find(|l| l.starts_with(peer)).unwrap();
        let early = line("10.0.0.2:40000");
        assert!(early.contains(" java[data-plane-kafk]/4242 "), "{text}");
        assert!(early.contains(" 11x +100us "), "{text}");
        let late = line("10.0.0.2:40001");
        // The thread is the process's own name: said once.
        assert!(late.contains(" java/4242 "), "{text}");
        assert!(late.contains(" 1.2x +5.99ms "), "{text}");
        // The columns stay aligned past the longest owner: the tx column
        // ends where its header does.
        let end = |l: &str, s: &str| l.find(s).unwrap() + s.len();
        assert_eq!(end(line("peer"), " tx"), end(early, "b/s"), "{text}");
        assert_eq!(end(line("peer"), " tx"), end(late, "b/s"), "{text}");
    }

    #[test]
    fn headroom_shows_with_a_baseline_and_is_absent_without() {
        use crate::analysis::IntervalAnalysis;
        use crate::sinks::headroom::tests::{example, planned_episode};
        let snap = one_interval(vec![iface("ens5"), iface("veth0")], Health::default());
        let mut a = IntervalAnalysis {
            seq: 0,
            mono_ns: 0,
            interfaces: Vec::new(),
            flows: Vec::new(),
            episodes: vec![planned_episode("ens5", true)],
            headroom: Some(example()),
            kafka: Vec::new(),
        };
        let text = render(&snap, Some(&a), 10);
        let line = |start: &str| text.lines().find(|l| l.trim_start().starts_with(start));
        let head = line("headroom").expect(&text);
        assert!(
            head.starts_with("headroom m5.xlarge: out 312% of 1.25Gb/s, above for 14.0min (38.0GB beyond); in 4.00% of 1.25Gb/s"),
            "{text}"
        );
        // Right under the interval's first line, before the interfaces.
        assert!(
            text.lines().nth(1).unwrap().starts_with("headroom"),
            "{text}"
        );
        assert!(
            line("out 312% in 4.00% of the baseline").is_some(),
            "{text}"
        );
        assert!(
            line("out 156% in 0% of the baseline (not summed").is_some(),
            "{text}"
        );
        let plan = line("against plan:").expect(&text);
        assert!(
            plan.contains("(under way): baseline 1.58Gb/s measured, 1.25Gb/s published (m5.xlarge); burst ceiling 9.95Gb/s measured, 10.0Gb/s published; the burst lasted 16.1min, 1.71TB above the baseline"),
            "{text}"
        );
        // No baseline: no line, no share, no plan (the episode carries none).
        a.headroom = None;
        a.episodes[0].planned = None;
        let text = render(&snap, Some(&a), 10);
        for absent in ["headroom", "baseline", "against plan"] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
    }

    #[test]
    fn untracked_sockets_are_said_beside_the_flows() {
        let quiet = one_interval(vec![iface("eth0")], Health::default());
        assert!(!render(&quiet, None, 10).contains("untracked sockets"));
        let snap = one_interval(
            vec![iface("eth0")],
            Health {
                untracked_flows: 5,
                untracked_open: 3,
                untracked_bytes_sent: 2_000_000,
                max_flows: 2,
                ..Default::default()
            },
        );
        let text = render(&snap, None, 10);
        assert!(
            text.contains("health: 3 untracked sockets open (--max-flows 2), 2.00MB sent"),
            "{text}"
        );
    }

    #[test]
    fn programs_not_attached_are_shown_with_what_is_missing() {
        let snap = one_interval(
            vec![iface("ens5")],
            Health {
                programs: vec![crate::model::snapshot::ProgramHealth {
                    name: "tcp_sendmsg_locked".into(),
                    attached: false,
                    not_attached: Some("tracepoint absent".into()),
                    lost: Some("owners from the kernel".into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        let text = render(&snap, None, 10);
        assert!(
            text.contains(
                "program tcp_sendmsg_locked NOT attached (tracepoint absent); missing: owners from the kernel"
            ),
            "{text}"
        );
        let tui = crate::sinks::tui::render::health_text(&snap.health);
        assert!(tui.contains("NOT attached: tcp_sendmsg_locked"), "{tui}");
    }

    /// Issue 44: a by-role line over the flows when the lookup named them.
    #[test]
    fn a_kafka_by_role_line_over_the_flows() {
        use crate::analysis::kafka_roles::KafkaRoleSum;
        use crate::analysis::IntervalAnalysis;
        use crate::model::kafka::KafkaRole;
        let snap = one_interval(vec![iface("ens5")], Health::default());
        let row =
            |role, group: Option<&str>, sent| KafkaRoleSum::example("ens5", role, group, sent, 0);
        let mut a = IntervalAnalysis {
            seq: 0,
            mono_ns: 0,
            interfaces: Vec::new(),
            flows: Vec::new(),
            episodes: Vec::new(),
            headroom: None,
            kafka: vec![
                row(KafkaRole::ReplicationToFollower, None, 3_000_000),
                row(KafkaRole::Consume, Some("orders"), 1_000_000),
            ],
        };
        let text = render(&snap, Some(&a), 10);
        assert!(
            text.contains(
                "\nkafka on ens5: tx: replication to followers 75.0% (3.00MB), consume group orders 25.0%\n"
            ),
            "{text}"
        );
        a.kafka.clear();
        assert!(!render(&snap, Some(&a), 10).contains("kafka on"));
    }
}
