//! The page on hand-built reports: escaping of hostile recordings, no
//! reference outside the file, gaps, bands and downsampling.

use std::collections::BTreeMap;

use super::render;
use crate::analysis::{Episode, Evidence, Thresholds, Verdict};
use crate::model::snapshot::Owner;
use crate::record::InterfaceInfo;
use crate::report::model::*;

const HOSTILE: &str = "<script>alert(1)</script>";

fn episode(iface: &str, verdict: Verdict, start: f64, end: f64) -> EpisodeReport {
    let enforcement = verdict.is_enforcement().then(|| EnforcementSummary {
        burst_ceiling_bps: Some(5e9),
        stepped_down: true,
        baseline_bps: Some(1.2e9),
        burst_secs: 42.0,
        direction: "out".to_string(),
        against_plan: None,
    });
    EpisodeReport {
        episode: Episode {
            iface: iface.to_string(),
            verdict,
            start_seq: start as u64,
            end_seq: end as u64,
            start_mono_ns: (start * 1e9) as u64,
            end_mono_ns: (end * 1e9) as u64,
            intervals: (end - start) as u64,
            peak: 97.5,
            peak_signal: "bw_out_pct".to_string(),
            throughput_before_bps: Some(5e9),
            throughput_during_bps: Some(1.2e9),
            mean_confidence: 0.8,
            stepped_down: true,
            open: false,
            peak_rate_bps: None,
            microburst: None,
            planned: None,
        },
        start_offset_secs: start,
        judged_alone: Default::default(),
        counters_in_microbursts: None,
        end_offset_secs: end,
        evidence: vec![Evidence {
            signal: "bw_out_pct".to_string(),
            value: 97.5,
            threshold: 50.0,
            note: format!("bw_out 97.5% >= 50% {HOSTILE}"),
            exceeded: true,
        }],
        held_note: String::new(),
        enforcement,
        kafka: kafka_uses(),
        linklocal: Some(linklocal_use()),
    }
}

/// A resolver loop (a hostile process name) over the link-local limit.
fn linklocal_use() -> crate::report::linklocal::LinkLocalUse {
    use crate::model::linklocal::LinkLocalService;
    use crate::report::linklocal::{LinkLocalSenderUse, LinkLocalUse};
    LinkLocalUse {
        intervals: 10,
        secs: 10.0,
        packets: 18_120,
        mean_pps: 1_812.0,
        peak_pps: 2_000.0,
        limit_pps: 1024.0,
        senders: vec![LinkLocalSenderUse {
            sender: format!("{HOSTILE}/4412"),
            service: LinkLocalService::Dns,
            proto: "udp".into(),
            family: 4,
            packets: 16_500,
            pps: 1_650.0,
            share_pct: 91.06,
        }],
        other_senders: 1,
        other_packets: 1_620,
        unnamed_packets: 0,
        unattributed: 0,
    }
}

/// A consumer group named by a client (hostile text) and a producer.
fn kafka_uses() -> Vec<crate::report::kafka::KafkaUse> {
    use crate::model::kafka::KafkaRole;
    use crate::report::kafka::KafkaUse;
    vec![
        KafkaUse {
            role: KafkaRole::Consume,
            group: Some(HOSTILE.to_string()),
            bytes_sent: 9_000_000,
            bytes_received: 1000,
            retrans_segs: 0,
        },
        KafkaUse {
            role: KafkaRole::Produce,
            group: None,
            bytes_sent: 1000,
            bytes_received: 4_000_000,
            retrans_segs: 0,
        },
    ]
}

/// `n` one-second intervals on eth0 and eth1. eth1 is missing from
/// intervals 50..60, eth0's retransmit rate is unknown in 100..110 and
/// intervals 200..220 are missing altogether (a time jump). Every string a
/// recording can carry holds markup.
fn report(n: usize) -> Report {
    let mut series = Vec::new();
    for i in (0..n).filter(|i| !(200..220).contains(i)) {
        let t = i as f64 + 1.0;
        let mut interfaces = Vec::new();
        for (k, name) in ["eth0", "eth1"].iter().enumerate() {
            if k == 1 && (50..60).contains(&i) {
                continue;
            }
            let wave = ((i as f64) / 17.0).sin().abs();
            interfaces.push(InterfacePoint {
                iface: name.to_string(),
                verdict: Verdict::FreeFlow,
                tx_bps: 1e9 * (1.0 + wave) / (k as f64 + 1.0),
                rx_bps: 2e7 * (1.0 + wave),
                bw_out_pct: Some(60.0 * wave),
                bw_in_pct: Some(5.0 * wave),
                pps_pct: Some(1.0),
                conntrack_pct: None,
                retrans_pct: (!(100..110).contains(&i)).then_some(0.05 * wave),
                backlog_bytes: Some((wave * 64_000.0) as u64),
                tx_peak_bps: None,
            });
        }
        series.push(IntervalPoint {
            seq: i as u64,
            t_secs: t,
            interfaces,
        });
    }
    let flow_series = (0..3)
        .map(|f| FlowSeries {
            flow_id: f,
            label: format!("10.0.0.{f}:5201 {HOSTILE}"),
            points: (0..n)
                .filter(|i| i % 10 != f as usize)
                .map(|i| (i as f64 + 1.0, 1.0 + (i as f64 / 30.0).sin().abs()))
                .collect(),
        })
        .collect();
    let mut verdicts = BTreeMap::new();
    verdicts.insert(Verdict::FreeFlow, n as u64 - 30);
    verdicts.insert(Verdict::HypervisorQueuing, 30);
    let iface = |name: &str| InterfaceSummary {
        name: name.to_string(),
        driver: Some("ena".to_string()),
        verdicts: verdicts.clone(),
        tx_bytes: 1 << 40,
        rx_bytes: 1 << 30,
        mean_tx_bps: 1.5e9,
        peak_tx_bps: 2e9,
        mean_rx_bps: 3e7,
        peak_rx_bps: 4e7,
        tx_wire_packets: 1_000_000,
        rx_wire_packets: 500_000,
        allowance_available: name == "eth0",
        allowance: BTreeMap::from([(
            "bw_out_allowance_exceeded".to_string(),
            AllowanceSummary {
                exceeded: 1234,
                pct: Some(12.0),
                peak_pct: Some(97.5),
            },
        )]),
        retrans_segs: 10,
        segs_out: 100_000,
        retrans_pct: Some(0.01),
        peak_retrans_pct: Some(0.2),
        peak_backlog_bytes: 64_000,
        host_drops: BTreeMap::from([(HOSTILE.to_string(), 3)]),
        kafka: if name == "eth0" {
            kafka_uses()
        } else {
            Vec::new()
        },
        linklocal: (name == "eth0").then(linklocal_use),
    };
    let owner = Owner {
        pid: 4242,
        comm: HOSTILE.to_string(),
        thread: None,
        cgroup_id: 1,
        cgroup: None,
        workload: None,
    };
    let flows = (0..3)
        .map(|f| FlowSummary {
            rank: f + 1,
            flow_id: f as u64,
            local: "10.0.0.1:40000".parse().unwrap(),
            peer: format!("10.0.0.{}:5201", f + 2).parse().unwrap(),
            owner: (f != 2).then(|| owner.clone()),
            intervals: n as u64,
            bytes_sent: 1 << 33,
            bytes_received: 1 << 20,
            retransmits: 17,
            failed_retransmits: 2,
            spurious_retransmits: 3,
            peak_added_delay_us: 2500,
            backoff_parts_total: Default::default(),
            cwnd_reductions: 5,
            recovery_loss_ms: 12.5,
            mean_rtt_inflation: Some(1.4),
            peak_rtt_inflation: Some(3.2),
            min_rtt_us: 180,
            backoff_total: 321.0,
            peak_backoff: 80.0,
            backoff_intervals: 12,
            closed: f == 1,
            // An interface name may hold `<` (the kernel refuses only `/`,
            // `:` and white space).
            iface: match f {
                0 => Some("ens5".to_string()),
                1 => Some(HOSTILE.to_string()),
                _ => None,
            },
            peak_bps: None,
            // A consumer of a group a client named (hostile text), a
            // follower, and a flow Kafka did not name.
            kafka: match f {
                0 => Some(crate::model::kafka::KafkaFlow {
                    who: crate::model::kafka::KafkaIdentity {
                        group: Some(HOSTILE.to_string()),
                        ..crate::model::kafka::KafkaIdentity::role(
                            crate::model::kafka::KafkaRole::Consume,
                        )
                    },
                    ambiguous: Vec::new(),
                }),
                1 => Some(crate::model::kafka::KafkaFlow {
                    who: crate::model::kafka::KafkaIdentity {
                        broker: Some(3),
                        ..crate::model::kafka::KafkaIdentity::role(
                            crate::model::kafka::KafkaRole::ReplicationToFollower,
                        )
                    },
                    ambiguous: Vec::new(),
                }),
                _ => None,
            },
        })
        .collect();
    Report {
        files: vec![format!("/tmp/{HOSTILE}.jsonl.zst")],
        recording: RecordingInfo {
            host: format!("host-{HOSTILE}"),
            kernel: "6.1.0-18-cloud-amd64".to_string(),
            tool_version: "0.1.0".to_string(),
            format_version: "1.1".to_string(),
            interfaces: vec![
                InterfaceInfo {
                    name: "eth0".to_string(),
                    driver: Some("ena".to_string()),
                    driver_version: None,
                },
                InterfaceInfo {
                    name: "eth1".to_string(),
                    driver: None,
                    driver_version: None,
                },
            ],
            interval_ns: 1_000_000_000,
            start_unix_ms: 1_709_210_096_789,
            segments: 1,
        },
        thresholds: Thresholds::default(),
        thresholds_changed: vec!["bw_allowance_pct".to_string()],
        filters: Filters::default(),
        span: Span {
            intervals: n as u64,
            first_seq: Some(0),
            last_seq: Some(n as u64 - 1),
            start_unix_ms: Some(1_709_210_096_789),
            end_unix_ms: Some(1_709_210_096_789 + n as u64 * 1000),
            seconds: n as f64,
        },
        episodes: vec![
            episode("eth0", Verdict::Idle, 0.0, 10.0),
            episode("eth0", Verdict::FreeFlow, 10.0, 120.0),
            episode("eth0", Verdict::HypervisorQueuing, 120.0, 150.0),
            episode("eth1", Verdict::NetworkLoss, 130.0, 131.0),
        ],
        interfaces: vec![iface("eth0"), iface("eth1")],
        flows,
        workloads: Vec::new(),
        health: HealthSummary {
            read_warnings: vec![
                format!("line 7: skipped {HOSTILE}"),
                "\"><img src=x onerror=alert(1)>".to_string(),
            ],
            ..HealthSummary::default()
        },
        series,
        flow_series,
        right_sizing: RightSizing::default(),
    }
}

/// The markup of the svg with `id`.
fn svg<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no {id}"));
    let end = start + html[start..].find("</svg>").expect("svg not closed");
    &html[start..end]
}

/// The `d` of every series path in `svg`.
fn paths(svg: &str) -> Vec<&str> {
    svg.split("<path class=\"series")
        .skip(1)
        .map(|p| {
            let d = &p[p.find(" d=\"").expect("path without d") + 4..];
            &d[..d.find('"').unwrap()]
        })
        .collect()
}

/// Every tag of the page: (name, attribute names). Escaped text never
/// holds a raw `<`, so every `<` starts real markup.
fn tags(html: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for piece in html.split('<').skip(1) {
        let tag = &piece[..piece.find('>').expect("unclosed tag")];
        let tag = tag.trim_start_matches('/');
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
            .collect();
        // Attribute names: what precedes each `=` outside quoted values.
        let mut attrs = Vec::new();
        let mut in_quotes = false;
        let mut word = String::new();
        for c in tag[name.len()..].chars() {
            match c {
                '"' => in_quotes = !in_quotes,
                '=' if !in_quotes => attrs.push(std::mem::take(&mut word)),
                c if !in_quotes && c.is_whitespace() => word.clear(),
                c if !in_quotes => word.push(c),
                _ => {}
            }
        }
        out.push((name.to_ascii_lowercase(), attrs));
    }
    out
}

const CHARTS: [&str; 5] = [
    "chart-throughput",
    "chart-allowance",
    "chart-retransmits",
    "chart-rtt-inflation",
    "chart-backlog",
];

#[test]
fn recording_text_cannot_inject_markup() {
    let html = render(&report(300));
    assert!(!html.contains(HOSTILE), "raw script tag in the page");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    // The owner's comm in the flow table, escaped.
    assert!(html.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt; (4242)</td>"));
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
    const ALLOWED: [&str; 31] = [
        "!doctype",
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "h1",
        "h2",
        "h3",
        "p",
        "section",
        "figure",
        "figcaption",
        "svg",
        "g",
        "rect",
        "line",
        "text",
        "path",
        "div",
        "span",
        "i",
        "table",
        "tr",
        "th",
        "td",
        "ul",
        "li",
        "br",
        "title",
    ];
    for (name, attrs) in tags(&html) {
        assert!(ALLOWED.contains(&name.as_str()), "unexpected tag <{name}>");
        for attr in attrs {
            assert!(!attr.starts_with("on"), "event handler {attr} on <{name}>");
        }
    }
}

#[test]
fn nothing_outside_the_file_is_referenced() {
    let html = render(&report(300));
    for needle in [
        "http://", "https://", "url(", "@import", "//cdn", "<script", "<link",
    ] {
        assert!(!html.contains(needle), "page contains {needle:?}");
    }
    for (name, attrs) in tags(&html) {
        for attr in attrs {
            assert!(
                !["src", "href", "xlink:href", "action", "srcset", "data"].contains(&attr.as_str()),
                "<{name}> has a {attr} attribute"
            );
        }
    }
    // And the page forbids fetches and scripts itself.
    assert!(html.contains("Content-Security-Policy\" content=\"default-src 'none'"));
}

#[test]
fn missing_values_are_gaps_not_zeros() {
    let html = render(&report(300));
    // eth0's retransmit rate: unknown in 100..110 and no intervals in
    // 200..220, so three runs.
    let retrans = paths(svg(&html, "chart-retransmits"));
    assert_eq!(retrans.len(), 2, "one path per interface");
    assert_eq!(retrans[0].matches('M').count(), 3, "eth0: {}", retrans[0]);
    // eth1 is also missing from 50..60.
    assert_eq!(retrans[1].matches('M').count(), 4, "eth1: {}", retrans[1]);
    // eth1's throughput has the same gaps; eth0's only the time jump.
    let throughput = paths(svg(&html, "chart-throughput"));
    assert_eq!(throughput.len(), 4, "tx and rx per interface");
    assert_eq!(throughput[0].matches('M').count(), 2);
    assert_eq!(throughput[2].matches('M').count(), 3);
    // conntrack_pct is None throughout: no path, and the legend says so.
    let allowance = paths(svg(&html, "chart-allowance"));
    assert_eq!(allowance.len(), 6, "8 series, 2 without values");
    assert!(html.contains("eth0 conntrack (no values)"));
    // Points per run: 300 intervals less 20 missing less 10 unknown.
    let points: usize = retrans[0].matches(['M', 'L']).count();
    assert_eq!(points, 270);
    // Flow points skip every tenth interval: each flow is broken at each.
    let rtt = paths(svg(&html, "chart-rtt-inflation"));
    assert_eq!(rtt.len(), 3);
    assert!(rtt.iter().all(|d| d.matches('M').count() >= 29));
}

#[test]
fn episodes_are_bands_with_a_legend_on_every_chart() {
    let html = render(&report(300));
    for id in CHARTS {
        let chart = svg(&html, id);
        assert_eq!(
            chart
                .matches("<rect class=\"band verdict-hypervisor_queuing\"")
                .count(),
            1,
            "{id}"
        );
        assert_eq!(
            chart
                .matches("<rect class=\"band verdict-network_loss\"")
                .count(),
            1,
            "{id}"
        );
        assert!(!chart.contains("band verdict-idle"), "{id}");
        assert!(!chart.contains("band verdict-free_flow"), "{id}");
        assert!(chart.contains("class=\"axis y-axis\""), "{id}");
        assert!(chart.contains("class=\"tick\""), "{id}");
    }
    assert_eq!(
        html.matches("class=\"legend-band\"><i class=\"swatch verdict-hypervisor_queuing\">")
            .count(),
        5
    );
    // The band spans 120..150 s of a 1..300 s axis.
    let chart = svg(&html, "chart-throughput");
    let rect = &chart[chart.find("band verdict-hypervisor_queuing").unwrap()..];
    let width: f64 = rect[rect.find("width=\"").unwrap() + 7..]
        .split('"')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let plot = super::chart::WIDTH - 100.0;
    let expected = 30.0 / 299.0 * plot;
    assert!(
        (width - expected).abs() < 0.5,
        "band {width} px, expected {expected}"
    );
}

#[test]
fn tables_hold_the_report() {
    let html = render(&report(300));
    let episodes = &html[html.find("id=\"table-episodes\"").unwrap()..];
    let episodes = &episodes[..episodes.find("</table>").unwrap()];
    // Idle is not listed; free flow, queuing and loss are.
    assert_eq!(episodes.matches("<tr class=\"episode\">").count(), 3);
    assert!(episodes.contains("5.00Gb/s (out)"), "burst ceiling");
    assert!(episodes.contains("1.20Gb/s"), "baseline");
    assert!(episodes.contains("42.0s"), "burst length");
    assert!(episodes.contains("30.0s"), "duration");
    let flows = &html[html.find("id=\"table-flows\"").unwrap()..];
    assert_eq!(
        flows[..flows.find("</table>").unwrap()]
            .matches("<tr class=\"flow\">")
            .count(),
        3
    );
    assert!(flows.contains("1.4× / 3.2×"));
    assert!(flows.contains("<th>interface</th>"));
    assert!(flows.contains("<td>ens5</td>"));
    assert!(flows.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"));
    assert!(flows.contains("<td>unknown</td>"));
    assert!(html.contains("2024-02-29 12:34:56.789 UTC"));
    assert!(html.contains("Read warnings (2)"));
    for info in Thresholds::describe() {
        assert!(
            html.contains(&format!("<td>{}</td>", info.name)),
            "{}",
            info.name
        );
    }
    // Each with its allowed range (escaped: `>=`).
    assert!(html.contains("<td>a whole number &gt;= 1</td>"));
}

#[test]
fn an_hour_is_downsampled_and_stays_small() {
    let html = render(&report(3600));
    for id in CHARTS {
        for d in paths(svg(&html, id)) {
            let points = d.matches(['M', 'L']).count();
            assert!(points <= super::MAX_POINTS, "{id}: {points} points");
            assert!(points >= 500, "{id}: only {points} points");
        }
    }
    assert!(html.contains("Downsampled to at most 1500 points per series"));
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
}

#[test]
fn an_empty_report_renders() {
    let mut r = report(40);
    r.series.clear();
    r.flow_series.clear();
    r.episodes.clear();
    r.flows.clear();
    r.interfaces.clear();
    r.recording.interval_ns = 0;
    let html = render(&r);
    for id in CHARTS {
        assert!(svg(&html, id).contains("no data"), "{id}");
    }
    assert!(html.ends_with("</html>\n"));
}

#[test]
fn a_measured_peak_is_a_line_over_the_mean() {
    let mut r = report(30);
    for p in &mut r.series {
        for i in &mut p.interfaces {
            if i.iface == "eth0" {
                i.tx_peak_bps = Some(i.tx_bps * 5.0);
            }
        }
    }
    let html = render(&r);
    let throughput = paths(svg(&html, "chart-throughput"));
    // eth0 tx, rx, tx peak; eth1 tx, rx (no peak measured: no line).
    assert_eq!(throughput.len(), 5, "{throughput:?}");
    assert!(html.contains("eth0 tx peak"));
    assert!(!html.contains("eth1 tx peak"));
}

fn baseline(tx_bps: f64, rx_bps: f64) -> crate::model::instance::Baseline {
    crate::model::instance::Baseline {
        instance_type: Some(format!("m5.{HOSTILE}")),
        from: crate::model::instance::BaselineFrom::InstanceTypeFlag,
        tx_bps,
        rx_bps,
        burst_bps: Some(10e9),
        arch: Some(crate::model::instance::Arch::X86_64),
        source: "built-in table".to_string(),
    }
}

#[test]
fn the_baseline_is_a_dashed_line_on_the_throughput_chart_only_when_known() {
    let mut r = report(300);
    let html = render(&r);
    assert!(!svg(&html, "chart-throughput").contains("baseline-line"));
    assert!(html.contains("No baseline known: give --instance-type TYPE"));

    // Out and in the same: one line, labelled, within the y axis.
    r.right_sizing.baseline = Some(baseline(1.5e9, 1.5e9));
    let html = render(&r);
    let chart = svg(&html, "chart-throughput");
    assert_eq!(chart.matches("<line class=\"baseline-line\"").count(), 1);
    assert!(
        chart.contains(">baseline 1.50Gb/s (out and in)</text>"),
        "{chart}"
    );
    assert!(html.contains("<i class=\"swatch baseline\"></i>baseline 1.50Gb/s (out and in)"));
    // Without the instance's interfaces known, no sum is drawn.
    assert!(!chart.contains("instance tx"));
    // The other charts are not rates: no baseline on them.
    assert!(!svg(&html, "chart-allowance").contains("baseline-line"));

    // Several interfaces summed: the instance's sum out and in is drawn
    // after the interfaces' lines (eth0 tx, rx, eth1 tx, rx), with a gap
    // where one of them is missing (eth1 in 50..60), as eth1's own line.
    r.right_sizing.interfaces = vec!["eth0".into(), "eth1".into()];
    let html = render(&r);
    let chart = svg(&html, "chart-throughput");
    assert!(
        chart.contains("<title>instance tx (eth0 + eth1)</title>"),
        "{chart}"
    );
    assert!(chart.contains("<title>instance rx (eth0 + eth1)</title>"));
    let d = paths(chart);
    assert_eq!(d.len(), 6);
    assert_eq!(d[4].matches('M').count(), d[2].matches('M').count());
    assert_eq!(d[4].matches('M').count(), 3, "{}", d[4]);

    // Out and in apart: two lines.
    r.right_sizing.baseline = Some(baseline(1.5e9, 1e9));
    let html = render(&r);
    let chart = svg(&html, "chart-throughput");
    assert_eq!(chart.matches("<line class=\"baseline-line\"").count(), 2);
    assert!(chart.contains(">baseline out 1.50Gb/s</text>"));
    assert!(chart.contains(">baseline in 1.00Gb/s</text>"));

    // Far above the data it would squash the lines: said, not drawn.
    r.right_sizing.baseline = Some(baseline(100e9, 100e9));
    let html = render(&r);
    assert!(!svg(&html, "chart-throughput").contains("baseline-line"));
    assert!(html.contains("Not drawn, far above the data: baseline 100Gb/s (out and in)."));
}

#[test]
fn right_sizing_section_and_the_plan_in_the_episodes_table() {
    use crate::analysis::episodes::PlannedBaseline;
    use crate::model::instance::Arch;
    let mut r = report(300);
    r.right_sizing = RightSizing {
        baseline: Some(baseline(1.25e9, 1.25e9)),
        interval_secs: 1.0,
        intervals: 300,
        interfaces: vec!["eth0".into(), HOSTILE.into()],
        tx: DirectionSizing {
            p50_bps: 1e9,
            p99_bps: 2e9,
            max_bps: 2.5e9,
            baseline_bps: Some(1.25e9),
            p50_pct: Some(80.0),
            p99_pct: Some(160.0),
            max_pct: Some(200.0),
            above_secs: 120.0,
            above_bytes: 9e9,
        },
        arch: Some(Arch::X86_64),
        arch_from: Some("that of m5.xlarge".into()),
        covering: vec![CoveringType {
            instance_type: "m5.2xlarge".into(),
            arch: Arch::X86_64,
            vcpus: Some(8),
            baseline_bps: 2.5e9,
            burst_bps: Some(10e9),
            same_arch: true,
        }],
        covering_total: 30,
        table_origin: "built-in table".into(),
        table_retrieved: Some("2026-11-25".into()),
        ..Default::default()
    };
    for e in &mut r.episodes {
        if let Some(x) = &mut e.enforcement {
            x.against_plan = Some(PlanComparison {
                line: format!("baseline 1.20Gb/s measured, 1.25Gb/s published {HOSTILE}"),
                plan: PlannedBaseline {
                    instance_type: Some("m5.xlarge".into()),
                    published: true,
                    baseline_bps: 1.25e9,
                    burst_bps: Some(10e9),
                    burst_above_secs: 960.0,
                    burst_above_bytes: 1.7e12,
                },
            });
        }
    }
    let html = render(&r);
    let start = html.find("<section id=\"right-sizing\">").unwrap();
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    assert!(
        section.contains("1-second rates of the instance"),
        "{section}"
    );
    assert!(
        section.contains("<td class=\"num\">2.00Gb/s (160%)</td>"),
        "{section}"
    );
    assert!(
        section.contains("<td class=\"num\">2.00min</td>"),
        "{section}"
    );
    assert!(section.contains("<td>m5.2xlarge</td>"), "{section}");
    assert!(
        section.contains("x86_64 first (that of m5.xlarge)"),
        "{section}"
    );
    assert!(section.contains("and 29 more types"), "{section}");
    assert!(
        section.contains("built-in table, retrieved 2026-11-25"),
        "{section}"
    );
    assert!(section.contains("only the baseline can be planned against"));
    assert!(!section.contains(HOSTILE), "escaped");
    assert!(html.contains("<th>against the plan</th>"));
    assert!(html.contains(
        "<td class=\"against-plan\">baseline 1.20Gb/s measured, 1.25Gb/s published &lt;script&gt;"
    ));
}

/// Issue 44: which Kafka role and group used the allowance, per episode
/// and per interface; none of it without Kafka identities.
#[test]
fn kafka_roles_per_episode_and_interface() {
    let r = report(200);
    let html = render(&r);
    assert!(
        html.contains("<p class=\"kafka\">by Kafka role: tx: consume group "),
        "no by-role line in the episodes"
    );
    assert!(html.contains("<tr><th>by Kafka role</th><td class=\"num\">tx: consume group "));
    assert!(html.contains("; rx: produce "), "no rx part");
    let mut r = report(200);
    for e in &mut r.episodes {
        e.kafka.clear();
    }
    for i in &mut r.interfaces {
        i.kafka.clear();
    }
    assert!(!render(&r).contains("by Kafka role"));
}

/// Issue 44: each flow's Kafka role in the flows' table, escaped; no
/// column when no flow has one.
#[test]
fn the_flows_table_names_each_flows_kafka_role() {
    let r = report(200);
    let html = render(&r);
    let table = &html[html.find("id=\"table-flows\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<th>owner</th><th>Kafka role</th><th>intervals</th>"));
    assert!(
        table.contains("<td class=\"kafka\">consume &lt;script&gt;alert(1)&lt;/script&gt;</td>")
    );
    assert!(table.contains("<td class=\"kafka\">replication to follower 3</td>"));
    assert!(table.contains("<td class=\"kafka\">–</td>"));
    assert_eq!(table.matches("<td class=\"kafka\">").count(), 3);
    let mut r = report(200);
    for f in &mut r.flows {
        f.kafka = None;
    }
    let html = render(&r);
    let table = &html[html.find("id=\"table-flows\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(table.contains("<th>owner</th><th>intervals</th>"));
    assert!(!table.contains("Kafka role"));
    assert!(!table.contains("class=\"kafka\""));
}

/// Issue 45, item 4: who sent to the link-local services, per episode and
/// per interface, escaped; no row or line without link-local traffic.
#[test]
fn linklocal_senders_per_episode_and_interface() {
    let r = report(200);
    let html = render(&r);
    let sender = "&lt;script&gt;alert(1)&lt;/script&gt;/4412 dns udp/ipv4 1.65kpps (91.1%)";
    assert!(
        html.contains(&format!(
            "<p class=\"linklocal\">link-local: mean 1.81kpps (177% of the limit of 1024 pps \
             per interface), peak 2.00kpps (195%); top senders: {sender}, +1 more (8.94%)</p>"
        )),
        "no link-local line in the episodes"
    );
    assert!(html.contains("<tr><th>link-local</th><td class=\"num\">mean 1.81kpps"));
    let mut r = report(200);
    for e in &mut r.episodes {
        e.linklocal = None;
    }
    for i in &mut r.interfaces {
        i.linklocal = None;
    }
    let html = render(&r);
    assert!(!html.contains("class=\"linklocal\""));
    assert!(!html.contains("<th>link-local</th>"));
}
