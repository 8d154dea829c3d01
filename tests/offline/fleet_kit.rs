//! The fleet kit (tools/fleet/, docs/fleet.md): Prometheus rules checked and unit
//! tested by promtool (and shown to fail on a wrong expectation), the dashboard and the
//! rules held to the exporter's metric names so neither can drift from it, the
//! DaemonSet's privileges and the systemd unit checked.
//!
//! Needs `promtool` (Debian package `prometheus`, installed by tools/setup). The unit
//! checks need `systemd-analyze` (package systemd, installed by tools/setup) and fail without it.

use crate::support::TempDir;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every metric the exporter publishes (src/sinks/metrics), in the Prometheus text
/// format's names (counters with `_total`). A dashboard query or a rule naming
/// anything else would show nothing. Held to the exporter's own output by
/// `exporter_metrics_list_is_what_the_exporter_publishes`.
const EXPORTER_METRICS: &[&str] = &[
    "node_ethtool_bw_in_allowance_exceeded",
    "node_ethtool_bw_out_allowance_exceeded",
    "node_ethtool_pps_allowance_exceeded",
    "node_ethtool_conntrack_allowance_exceeded",
    "node_ethtool_linklocal_allowance_exceeded",
    "node_ethtool_conntrack_allowance_available",
    "throttlescope_wire_packets_total",
    "throttlescope_interface_packets_total",
    "throttlescope_interface_bytes_total",
    "throttlescope_interface_dropped_total",
    "throttlescope_tcp_segments_sent_total",
    "throttlescope_tcp_retransmitted_segments_total",
    "throttlescope_tcp_spurious_retransmitted_segments_total",
    "throttlescope_allowance_exceeded_percent",
    "throttlescope_retransmit_percent",
    "throttlescope_verdict",
    "throttlescope_verdict_confidence",
    "throttlescope_verdict_held_seconds",
    "throttlescope_interface_peak_bytes_per_second",
    "throttlescope_interface_peak_packets_per_second",
    "throttlescope_interface_peak_window_seconds",
    "throttlescope_bpf_attached",
    "throttlescope_bpf_events_total",
    "throttlescope_bpf_missed_total",
    "throttlescope_ringbuf_drops_total",
    "throttlescope_untracked_flows_total",
    "throttlescope_untracked_open_flows",
    "throttlescope_untracked_bytes_total",
    "throttlescope_counter_read_failures_total",
    "throttlescope_late_intervals_total",
    "throttlescope_idle_flows",
    "throttlescope_folded_flows",
    "throttlescope_closes_lost_total",
    "throttlescope_closes_deferred_total",
    "throttlescope_moved_set_full_total",
    "throttlescope_moved_set_gone_total",
    "throttlescope_allowance_read_failures_total",
    "throttlescope_allowance_untrusted_reads_total",
    "throttlescope_allowance_counter_resets_total",
    "throttlescope_intervals_total",
    "throttlescope_last_interval_timestamp_seconds",
    "throttlescope_flow_backoff_score",
    "throttlescope_flow_rtt_inflation_ratio",
    "throttlescope_flow_srtt_seconds",
    "throttlescope_flow_cwnd",
    "throttlescope_flow_retransmits",
    "throttlescope_flow_spurious_retransmits",
    "throttlescope_flow_tx_bytes_per_second",
    "throttlescope_flow_label_collisions_total",
    "throttlescope_instance_info",
    "throttlescope_baseline_bits_per_second",
    "throttlescope_baseline_utilisation_ratio",
    "throttlescope_interface_baseline_utilisation_ratio",
    "throttlescope_above_baseline_run_seconds",
    "throttlescope_above_baseline_run_bytes",
    "throttlescope_above_baseline_seconds_total",
    "throttlescope_above_baseline_bytes_total",
];

/// Prometheus's own series, allowed besides the exporter's.
const PROMETHEUS_METRICS: &[&str] = &["up"];

fn fleet(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tools/fleet")
        .join(rel)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(tool: &str, args: &[&str], dir: &Path) -> Output {
    Command::new(tool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running `{tool}`: {e}; install it (Debian package `prometheus` for promtool; tools/setup does)"
            )
        })
}

fn show(out: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn has_tool(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

// ------------------------------------------------------------------ PromQL names

const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];
/// Keywords followed by a parenthesised list of label names.
const LABEL_LIST_KEYWORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Index just past the bracket that closes the one at `start`, skipping strings.
fn skip_balanced(chars: &[char], start: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    chars.len()
}

/// Index just past the string literal starting at `start`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        if chars[i] == '\\' && quote != '`' {
            i += 2;
            continue;
        }
        if chars[i] == quote {
            return i + 1;
        }
        i += 1;
    }
    chars.len()
}

fn next_non_space(chars: &[char], mut i: usize) -> usize {
    while i < chars.len() && chars[i].is_whitespace() {
        i += 1;
    }
    i
}

/// The metric names a PromQL expression selects: identifiers outside label matchers,
/// strings and ranges that are neither functions, aggregations, keywords nor Grafana
/// variables.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&chars, i);
        } else if c == '{' {
            i = skip_balanced(&chars, i, '{', '}');
        } else if c == '[' {
            i = skip_balanced(&chars, i, '[', ']');
        } else if c == '$' {
            // A Grafana variable: $name or ${name}.
            i += 1;
            if i < chars.len() && chars[i] == '{' {
                i = skip_balanced(&chars, i, '{', '}');
            } else {
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
            }
        } else if c.is_ascii_digit()
            || (c == '.' && i + 1 < chars.len() && chars[i + 1].is_ascii_digit())
        {
            // Numbers and durations (5m, 1e3, 0.1).
            while i < chars.len() && (is_ident(chars[i]) || chars[i] == '.') {
                i += 1;
            }
        } else if is_ident_start(c) {
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let after = next_non_space(&chars, i);
            let next_word: String = chars[after..]
                .iter()
                .take_while(|c| is_ident(**c))
                .collect();
            if LABEL_LIST_KEYWORDS.contains(&word.as_str()) {
                if after < chars.len() && chars[after] == '(' {
                    i = skip_balanced(&chars, after, '(', ')');
                }
            } else if KEYWORDS.contains(&word.as_str()) {
                // an operator or literal
            } else if (after < chars.len() && chars[after] == '(')
                || next_word == "by"
                || next_word == "without"
            {
                // a function or an aggregation
            } else {
                names.insert(word);
            }
        } else {
            i += 1;
        }
    }
    names
}

/// Metric names of a Grafana variable query: `label_values(SELECTOR, label)` names only
/// what SELECTOR selects; anything else is PromQL.
fn variable_query_names(query: &str) -> BTreeSet<String> {
    let q = query.trim();
    if let Some(inner) = q
        .strip_prefix("label_values(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let selector = match inner.rfind(',') {
            Some(comma) if !inner[comma..].contains('}') => &inner[..comma],
            _ => inner,
        };
        return metric_names(selector);
    }
    metric_names(q)
}

#[test]
fn metric_name_extraction_understands_promql() {
    let names = metric_names(
        "100 * sum by (instance, device) (rate(a_total{x=\"y\", z=~\"$dev\"}[$__rate_interval]))\n\
         / ignoring (direction) (b_total >= 100) and on (instance) max_over_time(c[1d]) \
         or topk(5, d:recorded:rate2m offset 5m) unless time() - e > 60",
    );
    let expect: BTreeSet<String> = ["a_total", "b_total", "c", "d:recorded:rate2m", "e"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(names, expect);
    assert_eq!(
        variable_query_names("label_values(m_total{instance=~\"$instance\"}, device)"),
        ["m_total".to_string()].into_iter().collect()
    );
}

// ------------------------------------------------------------------ YAML, line by line

/// `expr:` values of a rules file: one line or a block scalar (`expr: |`).
fn rule_exprs(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut exprs = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start().trim_start_matches("- ");
        if let Some(rest) = trimmed.strip_prefix("expr:") {
            let rest = rest.trim();
            if rest.starts_with('|') || rest.starts_with('>') {
                let mut block = String::new();
                i += 1;
                while i < lines.len() {
                    let l = lines[i];
                    let l_indent = l.len() - l.trim_start().len();
                    if !l.trim().is_empty() && l_indent <= indent {
                        break;
                    }
                    block.push_str(l.trim());
                    block.push('\n');
                    i += 1;
                }
                exprs.push(block);
                continue;
            }
            exprs.push(rest.trim_matches('"').trim_matches('\'').to_string());
        }
        i += 1;
    }
    exprs
}

/// Values of `KEY: value` lines (list items included).
fn values_of(text: &str, key: &str) -> Vec<String> {
    let prefix = format!("{key}:");
    text.lines()
        .map(|l| l.trim_start().trim_start_matches("- "))
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().trim_matches('"').to_string())
        .collect()
}

fn allowed_names(extra: &[String]) -> BTreeSet<String> {
    EXPORTER_METRICS
        .iter()
        .chain(PROMETHEUS_METRICS)
        .map(|s| s.to_string())
        .chain(extra.iter().cloned())
        .collect()
}

// ------------------------------------------------------------------ the exporter itself

/// The exporter's exposition (Prometheus text format, as promtool and the
/// rules see it) after three intervals in which every family has a value:
/// ENA counters all present, ranked flows, program health. Snapshots from
/// tests/support/record.rs, judged by the real analysis.
fn populated_exposition() -> String {
    use throttlescope::analysis::{analyze, HeadroomTracker, Thresholds};
    use throttlescope::model::instance::{Baseline, BaselineFrom};
    use throttlescope::model::snapshot::{AllowanceCounters, AllowanceStatus};
    use throttlescope::sinks::metrics::{encode_state, to_prometheus_text, ExporterState};

    let th = Thresholds::default();
    let mut state = ExporterState::new(20);
    // A baseline known, so the headroom families have values too.
    let mut headroom = HeadroomTracker::new(Some(Baseline {
        instance_type: Some("m5.xlarge".into()),
        from: BaselineFrom::Dmi,
        tx_bps: 1.25e9,
        rx_bps: 1.25e9,
        burst_bps: Some(10e9),
        arch: None,
        source: "test".into(),
    }));
    let mut history = Vec::new();
    for seq in 0..3u64 {
        let mut snap = crate::support::record::snapshot(seq, 3);
        for iface in &mut snap.interfaces {
            // Packets in the interval, so the rates have a denominator.
            iface.delta = iface.totals;
            iface.delta.tx_packets = 100;
            iface.delta.rx_packets = 90;
            // Peak rates measured (the kernel's busiest window).
            iface.tx_peak_bps = Some(8_000_000);
            iface.rx_peak_bps = Some(800_000);
            iface.tx_peak_pps = Some(700);
            iface.rx_peak_pps = Some(600);
            iface.peak_window_us = Some(12_000);
            if let AllowanceStatus::Read(a) = &mut iface.allowance {
                // No read gap: the interval's allowance rates are data.
                a.zeroed_reads = 0;
                a.last_error = None;
                let v = Some(seq * 10);
                a.delta = AllowanceCounters {
                    bw_in_allowance_exceeded: Some(10),
                    bw_out_allowance_exceeded: Some(10),
                    ..Default::default()
                };
                a.totals = AllowanceCounters {
                    bw_in_allowance_exceeded: v,
                    bw_out_allowance_exceeded: v,
                    pps_allowance_exceeded: v,
                    conntrack_allowance_exceeded: v,
                    linklocal_allowance_exceeded: v,
                    conntrack_allowance_available: v,
                    ena_srd_mode: v,
                    ena_srd_tx_pkts: v,
                    ena_srd_eligible_tx_pkts: v,
                    ena_srd_rx_pkts: v,
                    ena_srd_resource_utilization: v,
                };
            }
        }
        let mut analysis = analyze(&history, &snap, &th);
        analysis.headroom = headroom.push(&snap);
        assert!(
            !analysis.flows.is_empty(),
            "no ranked flow in interval {seq}"
        );
        state.apply(&snap, &analysis);
        history.push(snap);
    }
    to_prometheus_text(&encode_state(state))
}

/// `# TYPE NAME TYPE` lines of a Prometheus text exposition: name -> type.
fn exposition_families(text: &str) -> std::collections::BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|rest| {
            let (name, ty) = rest.split_once(' ').expect("# TYPE line without a type");
            (name.to_string(), ty.to_string())
        })
        .collect()
}

/// EXPORTER_METRICS is what the exporter actually publishes, no more, no
/// less: the families of a populated exposition, in the Prometheus text
/// format where a counter family carries its `_total` (the name the rules
/// and the dashboard must use). Counters end in `_total` and nothing else
/// does; every sample is named by its family; docs/metrics.md lists them.
#[test]
fn exporter_metrics_list_is_what_the_exporter_publishes() {
    let text = populated_exposition();
    let families = exposition_families(&text);
    eprintln!("{} families: {families:?}", families.len());
    let published: BTreeSet<String> = families.keys().cloned().collect();
    let listed: BTreeSet<String> = EXPORTER_METRICS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        EXPORTER_METRICS.len(),
        listed.len(),
        "EXPORTER_METRICS has duplicates"
    );
    let unlisted: Vec<&String> = published.difference(&listed).collect();
    let not_published: Vec<&String> = listed.difference(&published).collect();
    assert!(
        unlisted.is_empty() && not_published.is_empty(),
        "published but not in EXPORTER_METRICS: {unlisted:?}; \
         in EXPORTER_METRICS but not published: {not_published:?}"
    );

    for (name, ty) in &families {
        assert_eq!(
            ty == "counter",
            name.ends_with("_total"),
            "{name} is of type {ty}: only counters end in _total"
        );
    }
    // node_exporter's names stay untyped and without the suffix.
    for name in published.iter().filter(|n| n.starts_with("node_ethtool_")) {
        assert_eq!(families[name], "untyped", "{name}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(
            published.contains(name),
            "sample {line:?} is not named by a family"
        );
    }

    let docs = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"));
    for name in &published {
        assert!(
            docs.contains(&format!("`{name}`")),
            "docs/metrics.md does not list {name}"
        );
    }
}

// ------------------------------------------------------------------ Prometheus rules

const RULES: &str = "prometheus/throttlescope.rules.yml";
const RULE_TESTS: &str = "prometheus/throttlescope.rules.test.yml";

#[test]
fn promtool_checks_the_rules_and_the_scrape_example() {
    let dir = fleet("prometheus");
    let out = run(
        "promtool",
        &["check", "rules", "throttlescope.rules.yml"],
        &dir,
    );
    assert!(out.status.success(), "promtool check rules: {}", show(&out));
    let out = run("promtool", &["check", "config", "scrape-example.yml"], &dir);
    assert!(
        out.status.success(),
        "promtool check config: {}",
        show(&out)
    );
}

#[test]
fn promtool_unit_tests_pass() {
    let out = run(
        "promtool",
        &["test", "rules", "throttlescope.rules.test.yml"],
        &fleet("prometheus"),
    );
    assert!(out.status.success(), "promtool test rules: {}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("SUCCESS"),
        "{}",
        show(&out)
    );
}

/// The unit tests must be able to fail: with broker-2 (23.8%, free flow) moved to 60%,
/// or the rule's 50% threshold lowered to 20%, the same tests fail.
#[test]
fn promtool_unit_tests_fail_on_a_wrong_expectation() {
    let rules = read(&fleet(RULES));
    let tests = read(&fleet(RULE_TESTS));
    let free_flow = "'474+238000x80'";
    assert!(tests.contains(free_flow), "test file lost the 23.8% series");
    let threshold = "percent2m > 50\n";
    assert!(rules.contains(threshold), "rules lost the 50% threshold");

    // (what changed, rules, tests, what the failure must name)
    let cases = [
        (
            "broker-2's 23.8% made 60%",
            rules.clone(),
            tests.replacen(free_flow, "'474+600000x80'", 1),
            "broker-2:9979",
        ),
        (
            "threshold 50% made 20%",
            rules.replace(threshold, "percent2m > 20\n"),
            tests.clone(),
            "ThrottlescopeBwOutAllowanceHigh",
        ),
    ];
    for (what, rules, tests, named) in cases {
        let dir = TempDir::new("mutant");
        fs::write(dir.0.join("throttlescope.rules.yml"), rules).unwrap();
        fs::write(dir.0.join("throttlescope.rules.test.yml"), tests).unwrap();
        let out = run(
            "promtool",
            &["test", "rules", "throttlescope.rules.test.yml"],
            &dir.0,
        );
        assert!(
            !out.status.success(),
            "{what}: promtool still passed: {}",
            show(&out)
        );
        // promtool reports failures on stderr.
        let report = show(&out);
        assert!(
            report.contains("FAILED") && report.contains(named),
            "{what}: expected a failure naming {named}: {}",
            show(&out)
        );
    }
}

/// Every alert has a unit test where it fires and one where it stays silent.
#[test]
fn every_alert_has_a_firing_and_a_silent_test() {
    let rules = read(&fleet(RULES));
    let tests = read(&fleet(RULE_TESTS));
    let alerts = values_of(&rules, "alert");
    assert!(alerts.len() >= 10, "only {} alerts found", alerts.len());
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    for alert in &alerts {
        let mut fires = 0;
        let mut silent = 0;
        for (i, line) in lines.iter().enumerate() {
            if line.strip_prefix("alertname:").map(str::trim) != Some(alert.as_str()) {
                continue;
            }
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => silent += 1,
                Some(&"exp_alerts:") => fires += 1,
                other => panic!(
                    "{alert}: test at line {} has no exp_alerts: {other:?}",
                    i + 1
                ),
            }
        }
        assert!(fires >= 1, "{alert}: no unit test where it fires");
        // Besides the `exp_alerts: []` cases, every firing case is silent for the
        // series it does not list: promtool matches exp_alerts exactly.
        assert!(silent >= 1, "{alert}: no unit test where it stays silent");
    }
}

/// Every alert points at a runbook section that exists in docs/fleet.md.
#[test]
fn every_runbook_link_resolves() {
    let rules = read(&fleet(RULES));
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/fleet.md");
    let doc = read(&doc_path);
    let links = values_of(&rules, "runbook");
    assert_eq!(
        links.len(),
        values_of(&rules, "alert").len(),
        "an alert without a runbook"
    );
    for link in links {
        let anchor = link
            .strip_prefix("docs/fleet.md#")
            .unwrap_or_else(|| panic!("runbook {link:?} is not in docs/fleet.md"));
        assert!(
            doc.contains(&format!("<a id=\"{anchor}\"></a>")),
            "docs/fleet.md has no section {anchor:?}"
        );
    }
}

#[test]
fn rules_use_only_exporter_metrics() {
    let rules = read(&fleet(RULES));
    let recorded = values_of(&rules, "record");
    assert!(!recorded.is_empty());
    let allowed = allowed_names(&recorded);
    let exprs = rule_exprs(&rules);
    assert_eq!(
        exprs.len(),
        values_of(&rules, "alert").len() + recorded.len(),
        "one expr per rule"
    );
    for expr in &exprs {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no metric in rule expr {expr:?}");
        for name in names {
            assert!(
                allowed.contains(&name),
                "rule expr uses unknown metric {name}: {expr}"
            );
        }
    }
}

// ------------------------------------------------------------------ Grafana dashboard

fn dashboard() -> serde_json::Value {
    let path = fleet("grafana/throttlescope-dashboard.json");
    serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn panels(d: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

fn exprs_of(p: &serde_json::Value) -> Vec<String> {
    p["targets"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .filter_map(|t| t["expr"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn dashboard_is_wired_to_a_datasource_variable_and_has_the_panels() {
    let d = dashboard();
    assert!(d["uid"].is_string() && d["title"].is_string());
    let vars = d["templating"]["list"].as_array().expect("templating");
    let var = |name: &str| vars.iter().find(|v| v["name"] == name);
    let ds = var("datasource").expect("a datasource variable");
    assert_eq!(ds["type"], "datasource");
    assert_eq!(ds["query"], "prometheus");
    for name in ["instance", "device"] {
        let v = var(name).unwrap_or_else(|| panic!("no ${name} variable"));
        assert_eq!(v["datasource"]["uid"], "${datasource}", "${name}");
    }

    let mut ids = BTreeSet::new();
    let mut seen_exprs = String::new();
    for p in panels(&d) {
        let id = p["id"].as_u64().expect("panel id");
        assert!(ids.insert(id), "duplicate panel id {id}");
        for key in ["x", "y", "w", "h"] {
            assert!(p["gridPos"][key].is_u64(), "panel {id}: gridPos.{key}");
        }
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "panel {id}: {}",
            p["title"]
        );
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "panel {id} has no query");
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "panel {id} target");
            assert!(t["refId"].is_string(), "panel {id} target without refId");
        }
        for e in exprs_of(p) {
            seen_exprs.push_str(&format!("[{}] {e}\n", p["type"].as_str().unwrap_or("")));
        }
    }
    // The panels the fleet needs, found by what they query.
    let panel_with = |typ: &str, metric: &str| {
        panels(&d).into_iter().any(|p| {
            p["type"] == typ && exprs_of(p).iter().any(|e| metric_names(e).contains(metric))
        })
    };
    assert!(
        panel_with("state-timeline", "throttlescope_verdict"),
        "verdict timeline"
    );
    assert!(
        panel_with("timeseries", "node_ethtool_bw_out_allowance_exceeded"),
        "normalised rates"
    );
    assert!(
        panel_with("timeseries", "throttlescope_interface_bytes_total"),
        "throughput"
    );
    assert!(
        panel_with(
            "timeseries",
            "throttlescope_tcp_retransmitted_segments_total"
        ),
        "retransmit %"
    );
    assert!(
        panel_with("timeseries", "node_ethtool_pps_allowance_exceeded"),
        "raw counters"
    );
    assert!(
        panel_with("table", "throttlescope_flow_backoff_score"),
        "top flows"
    );
    assert!(
        panel_with("timeseries", "throttlescope_bpf_missed_total"),
        "observer health"
    );
    assert!(
        panel_with("timeseries", "throttlescope_baseline_utilisation_ratio"),
        "share of the baseline"
    );
    assert!(
        panel_with("timeseries", "throttlescope_above_baseline_run_seconds"),
        "run above the baseline"
    );
    assert!(seen_exprs.contains("$instance") && seen_exprs.contains("$device"));
}

#[test]
fn dashboard_queries_use_only_exporter_metrics() {
    let d = dashboard();
    let allowed = allowed_names(&[]);
    let mut checked = 0;
    for p in panels(&d) {
        for e in exprs_of(p) {
            let names = metric_names(&e);
            assert!(
                !names.is_empty(),
                "panel {}: no metric in {e:?}",
                p["title"]
            );
            for name in names {
                assert!(
                    allowed.contains(&name),
                    "panel {:?} queries {name}, which the exporter does not publish: {e}",
                    p["title"]
                );
            }
            checked += 1;
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        let q = v["query"]["query"].as_str().or(v["definition"].as_str());
        if v["type"] != "query" {
            continue;
        }
        let q = q.expect("query variable without a query");
        for name in variable_query_names(q) {
            assert!(
                allowed.contains(&name),
                "variable {} queries {name}",
                v["name"]
            );
        }
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} queries checked");
}

/// Every dashboard query is valid PromQL: promtool parses them as recording rules
/// (Grafana's variables replaced by plain values).
#[test]
fn dashboard_queries_parse_as_promql() {
    let d = dashboard();
    let mut yaml = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut n = 0;
    for p in panels(&d) {
        for e in exprs_of(p) {
            let e = e
                .replace("$__rate_interval", "1m")
                .replace("$instance", ".*")
                .replace("$device", ".*");
            yaml.push_str(&format!(
                "      - record: dashboard:query{n}\n        expr: |\n"
            ));
            for line in e.lines() {
                yaml.push_str(&format!("          {line}\n"));
            }
            n += 1;
        }
    }
    let dir = TempDir::new("dashboard");
    fs::write(dir.0.join("dashboard.rules.yml"), &yaml).unwrap();
    let out = run(
        "promtool",
        &["check", "rules", "dashboard.rules.yml"],
        &dir.0,
    );
    assert!(
        out.status.success(),
        "dashboard PromQL: {}\n{yaml}",
        show(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("{n} rules found")),
        "{}",
        show(&out)
    );
}

// ------------------------------------------------------------------ Kubernetes

/// A manifest's setting lines, trimmed: comments explain, only settings count.
fn settings_of(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect()
}

#[test]
fn daemonset_runs_unprivileged_with_bpf_and_perfmon_only() {
    let path = fleet("kubernetes/throttlescope-daemonset.yaml");
    let text = read(&path);
    let settings = settings_of(&text);
    let has = |want: &str| settings.contains(&want);
    for want in [
        "kind: DaemonSet",
        "hostNetwork: true",
        "hostPID: false",
        "privileged: false",
        "allowPrivilegeEscalation: false",
        "readOnlyRootFilesystem: true",
        "type: RuntimeDefault",
        "mountPath: /sys/kernel/btf",
        "path: /sys/kernel/btf",
        "automountServiceAccountToken: false",
    ] {
        assert!(has(want), "{}: no `{want}`", path.display());
    }
    assert!(!settings.iter().any(|l| l.starts_with("privileged: true")));
    let list = |key: &str| -> BTreeSet<String> {
        let v = values_of(&settings.join("\n"), key);
        assert_eq!(v.len(), 1, "{key}: expected exactly one list, got {v:?}");
        v[0].trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .collect()
    };
    assert_eq!(list("drop"), ["ALL".to_string()].into_iter().collect());
    assert_eq!(
        list("add"),
        ["BPF".to_string(), "PERFMON".to_string()]
            .into_iter()
            .collect(),
        "capabilities beyond what the observer was measured to need"
    );
    // The BTF mount is read-only: the line after its mountPath.
    let btf = settings
        .iter()
        .position(|l| *l == "mountPath: /sys/kernel/btf")
        .unwrap();
    assert_eq!(settings[btf + 1], "readOnly: true");
    for want in ["limits:", "requests:", "memory: 256Mi"] {
        assert!(has(want), "no resource `{want}`");
    }
    // Reachable by Prometheus: the exporter listens on the node's address.
    // Kubernetes expands `$(HOST_IP)` in args itself: the image has no shell.
    assert!(text.contains("fieldPath: status.hostIP"));
    let args = daemonset_args(&settings);
    let metrics = args
        .iter()
        .position(|a| a == "--metrics")
        .expect("--metrics");
    assert_eq!(args[metrics + 1], "$(HOST_IP):9979");
    assert!(has("prometheus.io/scrape: \"true\""));
}

/// The container's `args:` list items, in order (one per line, quotes
/// removed), up to the next key.
fn daemonset_args(settings: &[&str]) -> Vec<String> {
    let start = settings
        .iter()
        .position(|l| *l == "args:")
        .expect("the DaemonSet has no `args:` list");
    settings[start + 1..]
        .iter()
        .map_while(|l| l.strip_prefix("- "))
        .map(|a| a.trim_matches('"').to_string())
        .collect()
}

/// The Containerfile's instructions: continuation lines joined, comments
/// and blank lines dropped; (INSTRUCTION, arguments).
fn containerfile() -> Vec<(String, String)> {
    let text = read(&fleet("container/Containerfile"));
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || (line.is_empty() && current.is_empty()) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                let (ins, rest) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((ins.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

/// `KEY="value"` pairs of every LABEL instruction.
fn containerfile_labels(instructions: &[(String, String)]) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for (_, args) in instructions.iter().filter(|(i, _)| i == "LABEL") {
        let mut rest = args.as_str();
        while let Some((key, after)) = rest.split_once("=\"") {
            let (value, tail) = after.split_once('"').expect("a closing quote");
            labels.insert(key.trim().to_string(), value.to_string());
            rest = tail;
        }
    }
    labels
}

/// The image tools/release builds (tools/fleet/container/Containerfile) is
/// the one source of what the container runs as: the DaemonSet must run its
/// entrypoint, as its user, with the capabilities it declares, and name it
/// with the version it is built with.
#[test]
fn daemonset_runs_the_image_the_containerfile_builds() {
    let ins = containerfile();
    let one = |name: &str| -> String {
        let v: Vec<&String> = ins
            .iter()
            .filter(|(i, _)| i == name)
            .map(|(_, a)| a)
            .collect();
        assert_eq!(v.len(), 1, "Containerfile: expected one {name}, got {v:?}");
        v[0].clone()
    };
    assert_eq!(one("FROM"), "scratch", "the image is the binary alone");
    let entrypoint: Vec<String> =
        serde_json::from_str(&one("ENTRYPOINT")).expect("ENTRYPOINT in JSON (exec) form");
    let binary = entrypoint[0].clone();
    // The binary is copied to where the entrypoint runs it, and only it
    // and the licence texts are copied at all.
    let copies: Vec<&String> = ins
        .iter()
        .filter(|(i, _)| i == "COPY")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
    assert_eq!(*copies[0], format!("throttlescope {binary}"));
    assert!(copies[1].starts_with("licenses/ "), "{}", copies[1]);
    let user = one("USER");
    let (uid, gid) = user.split_once(':').expect("USER uid:gid");
    let caps: BTreeSet<String> = containerfile_labels(&ins)
        .get("io.containers.capabilities")
        .expect("the io.containers.capabilities label")
        .split(',')
        .map(|c| c.trim().to_string())
        .collect();

    let path = fleet("kubernetes/throttlescope-daemonset.yaml");
    let text = read(&path);
    let settings = settings_of(&text);
    let joined = settings.join("\n");
    let single = |key: &str| -> String {
        let v = values_of(&joined, key);
        assert_eq!(v.len(), 1, "{}: {key}: {v:?}", path.display());
        v[0].clone()
    };
    let image = single("image");
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        image.ends_with(&format!("/throttlescope:{version}")),
        "{}: image {image} is not throttlescope:{version}, what tools/release builds",
        path.display()
    );
    let command: Vec<String> = serde_json::from_str(&single("command")).expect("command as a list");
    assert_eq!(
        command,
        std::slice::from_ref(&binary),
        "the DaemonSet runs another binary than the image's"
    );
    assert_eq!(
        daemonset_args(&settings).first().map(String::as_str),
        Some("record")
    );
    assert_eq!(
        single("runAsUser"),
        uid,
        "user differs from the Containerfile's USER"
    );
    assert_eq!(
        single("runAsGroup"),
        gid,
        "group differs from the Containerfile's USER"
    );
    let added: BTreeSet<String> = single("add")
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .collect();
    assert_eq!(
        added, caps,
        "capabilities differ from the Containerfile's label"
    );
    assert_eq!(single("drop"), "[\"ALL\"]");
}

// ------------------------------------------------------------------ systemd

#[test]
fn systemd_unit_is_hardened() {
    let path = fleet("systemd/throttlescope.service");
    let text = read(&path);
    let settings: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    for want in [
        "DynamicUser=yes",
        "CapabilityBoundingSet=CAP_BPF CAP_PERFMON",
        "AmbientCapabilities=CAP_BPF CAP_PERFMON",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "StateDirectory=throttlescope",
        "SystemCallFilter=@system-service bpf",
        "Environment=THROTTLESCOPE_METRICS=127.0.0.1:9979",
    ] {
        assert!(settings.contains(&want), "{}: no `{want}`", path.display());
    }
    assert!(text.contains("throttlescope record --quiet") && text.contains("--metrics"));

    // tools/setup installs systemd (systemd-analyze): a missing tool fails
    // the test rather than let the unit go unchecked.
    assert!(
        has_tool("systemd-analyze"),
        "systemd-analyze is not installed (package systemd): the unit cannot be verified"
    );
    // verify checks that ExecStart's binary exists: a copy of the unit
    // pointing at the binary under test stands in for /usr/local/bin.
    let tmp = TempDir::new("unit");
    let dir = tmp.0.as_path();
    fs::write(
        dir.join("throttlescope.service"),
        text.replace(
            "/usr/local/bin/throttlescope",
            env!("CARGO_BIN_EXE_throttlescope"),
        ),
    )
    .unwrap();
    let out = run(
        "systemd-analyze",
        &["verify", "./throttlescope.service"],
        dir,
    );
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "systemd-analyze verify (warnings count as failures): {}",
        show(&out)
    );
    let out = run(
        "systemd-analyze",
        &["security", "--offline=true", "./throttlescope.service"],
        dir,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout.lines().find_map(|l| {
        l.split("Overall exposure level for throttlescope.service:")
            .nth(1)
    }) {
        Some(rest) => {
            let level: f64 = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("exposure level in {rest:?}"));
            println!("systemd-analyze security: exposure {level}");
            assert!(
                level <= 2.5,
                "exposure {level} > 2.5: hardening regressed\n{stdout}"
            );
        }
        None => panic!(
            "no exposure level from `systemd-analyze security --offline` (systemd 250+ needed): {}",
            show(&out)
        ),
    }
}
