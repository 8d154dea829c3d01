//! `throttlescope report` end to end: recordings of real lab traffic
//! reported through the CLI, compared with what the live view judged and
//! with a report built in memory; and the CLI on files that are not whole,
//! current traces.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/report.rs.

use std::path::Path;

use crate::support::record::{header, snapshot};
use crate::support::report::{report, report_json};
use crate::support::TempDir;
use serde_json::Value;
use throttlescope::record::{RotateOptions, TraceWriter};

/// Writes a zstd or plain trace of `n` small intervals; returns the file
/// size after the header and after each interval.
fn write_trace(path: &Path, n: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut w = TraceWriter::create(path, header(), RotateOptions::default()).unwrap();
    sizes.push(std::fs::metadata(path).unwrap().len());
    for s in 0..n {
        w.write(&snapshot(s, 3)).unwrap();
        sizes.push(std::fs::metadata(path).unwrap().len());
    }
    w.finish().unwrap();
    sizes
}

#[test]
fn files_with_nothing_to_report_are_errors_naming_the_file() {
    let dir = TempDir::new("report-bad");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, b"{\"hello\":1}\n").unwrap();
    let future = dir.join("future.jsonl");
    let mut h = serde_json::to_value(header()).unwrap();
    h["version"] = serde_json::json!({"major": 2, "minor": 0});
    std::fs::write(&future, format!("{h}\n")).unwrap();
    let header_only = dir.join("header-only.jsonl");
    std::fs::write(
        &header_only,
        format!("{}\n", serde_json::to_value(header()).unwrap()),
    )
    .unwrap();
    let cut = dir.join("cut.jsonl");
    let sizes = write_trace(&cut, 2);
    let bytes = std::fs::read(&cut).unwrap();
    std::fs::write(&cut, &bytes[..(sizes[0] + 20) as usize]).unwrap();

    for (path, want) in [
        (&empty, "empty file, not a throttlescope trace".to_string()),
        (&foreign, ":1: not a throttlescope trace".to_string()),
        (
            &future,
            ":1: format version 2.0 is newer than this throttlescope understands".to_string(),
        ),
        (&header_only, "no complete interval in".to_string()),
        (
            &cut,
            "the tail was cut after line 1 (no complete interval)".to_string(),
        ),
    ] {
        let name = path.display().to_string();
        let (code, stdout, stderr) = report(&[&name]);
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stdout.is_empty(), "{name}: {stdout}");
        assert!(stderr.starts_with("throttlescope: "), "{stderr}");
        assert!(stderr.contains(&name), "{name}: {stderr}");
        assert!(stderr.contains(&want), "{name}: want {want:?} in {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // Every file bad: every one named.
    let (code, _, stderr) = report(&[&empty.display().to_string(), &foreign.display().to_string()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("empty.jsonl") && stderr.contains("foreign.jsonl"),
        "{stderr}"
    );
}

#[test]
fn damaged_files_report_what_is_whole_with_warnings() {
    let dir = TempDir::new("report-damaged");
    // Garbage lines: skipped, named by file and line.
    let garbage = dir.join("garbage.jsonl");
    write_trace(&garbage, 6);
    let text = std::fs::read_to_string(&garbage).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(3, "\u{1}\u{2} not json at all");
    std::fs::write(&garbage, lines.join("\n") + "\n").unwrap();
    let name = garbage.display().to_string();
    let (code, stdout, stderr) = report(&["--json", &name]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 6);
    let want = format!("{name}:4: skipped a line that is not a record");
    assert!(stderr.contains(&format!("warning: {want}")), "{stderr}");
    assert!(
        r["health"]["read_warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().starts_with(&want)),
        "{r}"
    );

    // A zstd file cut inside interval 5: intervals 0-4 are reported.
    let zst = dir.join("cut.jsonl.zst");
    let sizes = write_trace(&zst, 8);
    let bytes = std::fs::read(&zst).unwrap();
    std::fs::write(&zst, &bytes[..((sizes[5] + sizes[6]) / 2) as usize]).unwrap();
    let name = zst.display().to_string();
    let (code, stdout, stderr) = report(&["--json", &name]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 5);
    assert_eq!(r["span"]["last_seq"], 4);
    assert!(
        stderr.contains("the tail was cut after line 6 (last complete interval seq 4)"),
        "{stderr}"
    );

    // One good file and one that is not a trace: the good one is reported.
    let foreign = dir.join("foreign.jsonl");
    std::fs::write(&foreign, b"{\"hello\":1}\n").unwrap();
    let (code, stdout, stderr) = report(&[
        "--json",
        &garbage.display().to_string(),
        &foreign.display().to_string(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let r: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["span"]["intervals"], 6);
    assert!(
        stderr.contains(&format!(
            "{}:1: not a throttlescope trace",
            foreign.display()
        )) && stderr.contains("skipped this file"),
        "{stderr}"
    );
}

#[test]
fn bad_options_are_clear_errors() {
    let dir = TempDir::new("report-opts");
    let path = dir.join("t.jsonl");
    write_trace(&path, 4);
    let name = path.display().to_string();
    let not_a_dir = dir.join("file");
    std::fs::write(&not_a_dir, b"x").unwrap();
    let html = not_a_dir.join("out.html").display().to_string();
    for (args, want) in [
        (
            vec!["--since", "yesterday"],
            "--since \"yesterday\": not a time",
        ),
        (
            vec!["--until", "2026-02-30T00:00:00Z"],
            "--until \"2026-02-30T00:00:00Z\": not a time",
        ),
        (
            vec!["--flow", ":http"],
            "--flow \":http\": \"http\" is not a port",
        ),
        (
            vec!["--iface", "eth9"],
            "--iface eth9: not in the recording (it has: eth0, veth0)",
        ),
        (vec!["--threshold", "nope=1"], "--threshold nope=1"),
        (vec!["--since", "1h"], "no interval between --since"),
        (vec!["--html", &html], "cannot write the report there"),
        (vec!["--html", &name], "is one of the trace files"),
    ] {
        let mut all = args.clone();
        all.push(&name);
        let (code, stdout, stderr) = report(&all);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }

    // A writable --html gets a page; stdout still has the text report.
    let out = dir.join("r.html");
    let (code, stdout, stderr) = report(&["--html", &out.display().to_string(), &name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("throttlescope report: "), "{stdout}");
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    // 0640 (the umask may take more away), and never written over.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
    let (code, _, stderr) = report(&["--html", &out.display().to_string(), &name]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("already exists; refusing to overwrite"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), page);
}

/// The baseline flags: a plan over the recording's (which has none), and
/// a bad table or an unknown type as clear errors, not "no baseline".
#[test]
fn instance_flags_plan_the_report_or_are_clear_errors() {
    let dir = TempDir::new("report-plan");
    let path = dir.join("t.jsonl");
    write_trace(&path, 4);
    let name = path.display().to_string();

    let (code, stdout, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("plan        no baseline: the recording has no baseline"),
        "{stdout}"
    );
    assert!(stdout.contains("\nright-sizing ("), "{stdout}");

    let r = report_json(&["--instance-type", "m5.xlarge", &name]);
    let b = &r["right_sizing"]["baseline"];
    assert_eq!(b["instance_type"], "m5.xlarge");
    assert_eq!(b["tx_bps"].as_f64(), Some(1.25e9));
    assert_eq!(r["right_sizing"]["arch"], "x86_64");
    let r = report_json(&["--baseline", "1G/2G", &name]);
    assert_eq!(r["right_sizing"]["tx"]["baseline_bps"].as_f64(), Some(1e9));
    assert_eq!(r["right_sizing"]["rx"]["baseline_bps"].as_f64(), Some(2e9));

    let bad = dir.join("specs.tsv");
    std::fs::write(&bad, "m5.xlarge x86_64 4 1.25\n").unwrap();
    let bad = bad.display().to_string();
    for (args, want) in [
        (
            vec!["--instance-type", "m9.nope"],
            "--instance-type m9.nope: not in the instance specs",
        ),
        (
            vec!["--instance-specs", &bad],
            "specs.tsv, line 1: 4 fields",
        ),
        (
            vec!["--instance-specs", "/nonexistent/specs.tsv"],
            "--instance-specs /nonexistent/specs.tsv",
        ),
    ] {
        let mut all = args.clone();
        all.push(&name);
        let (code, stdout, stderr) = report(&all);
        assert_eq!(code, 2, "{args:?}: a usage error: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
    }
}

/// `report --flow java` on a JVM's recording: every flow's owner is the
/// process `java`, and each sent from a thread of another name (as a
/// broker's network threads do). `--flow` selects them by the process's
/// name, and the text report names both, `java[thread]/pid`.
#[test]
fn flow_java_selects_a_jvms_flows_and_the_text_names_the_thread() {
    use throttlescope::model::snapshot::Owner;
    let dir = TempDir::new("report-jvm");
    let path = dir.join("jvm.jsonl");
    let mut w = TraceWriter::create(&path, header(), RotateOptions::default()).unwrap();
    let threads = ["data-plane-kafk", "kafka-network-t", "ReplicaFetcherT"];
    for seq in 0..4 {
        let mut s = snapshot(seq, 4);
        for (f, thread) in s.flows.iter_mut().zip(threads) {
            f.owner = Some(Owner {
                pid: 4242,
                comm: "java".into(),
                thread: Some(thread.into()),
                cgroup_id: 77,
                cgroup: None,
                workload: None,
            });
        }
        // The fourth flow is another process's.
        if let Some(o) = s.flows[3].owner.as_mut() {
            o.comm = "python3".into();
            o.pid = 7;
            o.thread = Some("python3".into());
        }
        w.write(&s).unwrap();
    }
    w.finish().unwrap();
    let name = path.display().to_string();

    let r = report_json(&["--flow", "java", &name]);
    let mut ids: Vec<u64> = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["flow_id"].as_u64().unwrap())
        .collect();
    ids.sort();
    assert_eq!(ids, vec![0x1000, 0x1001, 0x1002], "{}", r["flows"]);
    for f in r["flows"].as_array().unwrap() {
        assert_eq!(f["owner"]["comm"], "java", "{f}");
    }
    // A thread's name is not a process's: it selects nothing.
    let none = report_json(&["--flow", "data-plane-kafk", &name]);
    assert_eq!(
        none["flows"].as_array().unwrap().len(),
        0,
        "{}",
        none["flows"]
    );

    let (code, text, stderr) = report(&["--flow", "java", &name]);
    assert_eq!(code, 0, "{stderr}");
    for thread in threads {
        assert!(
            text.contains(&format!(" java[{thread}]/4242 ")),
            "{thread} in\n{text}"
        );
    }
    assert!(!text.contains("python3"), "{text}");
}

/// Writes `n` intervals of eth0 carrying traffic, with `linklocal` as its
/// UDP to the link-local services in each (None: not measured), and
/// `kafka` as the Kafka identity of the first flow.
fn write_linklocal_trace(
    path: &Path,
    n: u64,
    linklocal: Option<throttlescope::model::linklocal::LinkLocalSample>,
    kafka: Option<throttlescope::model::kafka::KafkaFlow>,
) {
    let mut w = TraceWriter::create(path, header(), RotateOptions::default()).unwrap();
    for seq in 0..n {
        let mut s = snapshot(seq, 3);
        let delta = s.interfaces[1].delta;
        let eth0 = &mut s.interfaces[0];
        eth0.delta = delta;
        eth0.linklocal.clone_from(&linklocal);
        s.flows[0].kafka.clone_from(&kafka);
        w.write(&s).unwrap();
    }
    w.finish().unwrap();
}

/// Issue 45, item 4: the report's text, HTML and JSON say who sent to the
/// link-local services, per interface and per episode, the three senders
/// with the most packets and how many more; nothing of it for a recording
/// without link-local traffic.
#[test]
fn the_report_names_the_senders_to_the_link_local_services() {
    use throttlescope::model::linklocal::{LinkLocalSample, LinkLocalSender, LinkLocalService};
    use throttlescope::model::snapshot::Owner;
    let sender = |pid: u32, comm: &str, service: LinkLocalService, packets: u64| LinkLocalSender {
        owner: Owner {
            pid,
            comm: comm.into(),
            thread: None,
            cgroup_id: 9,
            cgroup: None,
            workload: None,
        },
        service,
        proto: "udp".into(),
        family: 4,
        packets,
        bytes: packets * 40,
        forwarded: false,
        from_netns: None,
    };
    let sample = LinkLocalSample::of(
        vec![
            sender(4412, "dns_loop.py", LinkLocalService::Dns, 1_650),
            sender(4413, "dns_loop.py", LinkLocalService::Dns, 150),
            sender(600, "chronyd", LinkLocalService::Time, 8),
            sender(700, "aws", LinkLocalService::Metadata, 3),
            sender(701, "dig", LinkLocalService::Dns, 1),
        ],
        0,
    );
    let dir = TempDir::new("report-linklocal");
    let path = dir.join("ll.jsonl");
    write_linklocal_trace(&path, 6, Some(sample), None);
    let name = path.display().to_string();

    let line = "link-local: mean 1.81kpps (177% of the limit of 1024 pps per interface), peak \
                1.81kpps (177%); top senders: dns_loop.py/4412 dns udp/ipv4 1.65kpps (91.1%), \
                dns_loop.py/4413 dns udp/ipv4 150pps (8.28%), chronyd/600 time udp/ipv4 8.00pps \
                (0.442%), +2 more (0.221%)";
    let (code, text, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    // Under eth0's episode and eth0 itself; veth0 was not measured.
    assert_eq!(text.matches(line).count(), 2, "{text}");
    let episode = text.find("  eth0       +00:00:01").expect("eth0's episode");
    let interfaces = text.find("\ninterfaces\n").unwrap();
    let first = text.find(line).unwrap();
    assert!(episode < first && first < interfaces, "{text}");
    assert!(
        text[interfaces..].contains(&format!("\n    {line}\n")),
        "{text}"
    );

    let html_path = dir.join("ll.html");
    let (code, _, stderr) = report(&["--html", &html_path.display().to_string(), &name]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains(&format!("<p class=\"linklocal\">{line}</p>")),
        "no link-local line in the HTML's episodes"
    );
    assert!(
        html.contains(&format!(
            "<tr><th>link-local</th><td class=\"num\">{}</td>",
            line.trim_start_matches("link-local: ")
        )),
        "no link-local row in the HTML's interfaces"
    );

    let r = report_json(&[&name]);
    let ll = &r["interfaces"][0]["linklocal"];
    assert_eq!(ll["packets"], 6 * 1_812, "{ll}");
    assert_eq!(ll["senders"][0]["sender"], "dns_loop.py/4412", "{ll}");
    assert_eq!(ll["senders"][0]["service"], "dns", "{ll}");
    assert_eq!(ll["senders"][0]["packets"], 6 * 1_650, "{ll}");
    assert_eq!(
        (ll["other_senders"].as_u64(), ll["other_packets"].as_u64()),
        (Some(2), Some(24))
    );
    assert_eq!(r["interfaces"][1].get("linklocal"), None);
    let eth0_episode = r["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["iface"] == "eth0" && e["verdict"] != "idle")
        .unwrap();
    assert_eq!(
        eth0_episode["linklocal"]["senders"][0]["sender"],
        "dns_loop.py/4412"
    );

    // Measured and nothing sent, or not measured: no line, row or field.
    for (stem, sample) in [
        ("none", Some(LinkLocalSample::default())),
        ("unmeasured", None),
    ] {
        let path = dir.join(&format!("{stem}.jsonl"));
        write_linklocal_trace(&path, 6, sample, None);
        let name = path.display().to_string();
        let (code, text, stderr) = report(&[&name]);
        assert_eq!(code, 0, "{stderr}");
        assert!(!text.contains("link-local:"), "{stem}: {text}");
        let html_path = dir.join(&format!("{stem}.html"));
        let (code, _, stderr) = report(&["--html", &html_path.display().to_string(), &name]);
        assert_eq!(code, 0, "{stderr}");
        let html = std::fs::read_to_string(&html_path).unwrap();
        assert!(!html.contains("class=\"linklocal\""), "{stem}");
        assert!(!html.contains("<th>link-local</th>"), "{stem}");
        let r = report_json(&[&name]);
        assert!(!r.to_string().contains("\"linklocal\""), "{stem}: {r}");
    }
}

/// Issue 44: each flow's Kafka role in the report's flows table (text,
/// HTML) and in `--json`; no column, nor field, for a recording whose
/// flows have none.
#[test]
fn the_flows_table_names_each_flows_kafka_role() {
    use throttlescope::model::kafka::{KafkaFlow, KafkaIdentity, KafkaRole};
    let consume = KafkaFlow {
        who: KafkaIdentity {
            group: Some("orders".into()),
            client_id: Some("orders-1".into()),
            ..KafkaIdentity::role(KafkaRole::Consume)
        },
        ambiguous: Vec::new(),
    };
    let dir = TempDir::new("report-kafka-flows");
    let path = dir.join("kafka.jsonl");
    write_linklocal_trace(&path, 4, None, Some(consume));
    let name = path.display().to_string();

    let (code, text, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    let flows = &text[text.find("\nflows backing off").unwrap()..];
    let head = flows.lines().nth(2).unwrap();
    assert!(head.contains(" owner "), "{flows}");
    assert!(head.contains(" kafka role "), "{flows}");
    let row = |port: &str| {
        flows
            .lines()
            .find(|l| l.contains(port))
            .unwrap_or_else(|| panic!("{port} in\n{flows}"))
    };
    // The role's column is where the header says.
    let at = head.find("kafka role").unwrap();
    assert_eq!(
        &row(" 40000 ")[at..at + 23],
        "consume orders/orders-1",
        "{flows}"
    );
    assert_eq!(&row(" 40001 ")[at..at + 2], "- ", "{flows}");

    let html_path = dir.join("kafka.html");
    let (code, _, stderr) = report(&["--html", &html_path.display().to_string(), &name]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("<th>owner</th><th>Kafka role</th>"),
        "no column"
    );
    assert!(html.contains("<td class=\"kafka\">consume orders/orders-1</td>"));

    let r = report_json(&[&name]);
    let by_port = |port: u64| {
        r["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["local"].as_str().unwrap().ends_with(&format!(":{port}")))
            .unwrap()
            .clone()
    };
    let k = &by_port(40000)["kafka"];
    assert_eq!(k["role"], "consume", "{k}");
    assert_eq!(k["group"], "orders", "{k}");
    assert_eq!(k["client_id"], "orders-1", "{k}");
    assert_eq!(by_port(40001).get("kafka"), None);

    // No Kafka identity in the recording: no column, no field.
    let path = dir.join("plain.jsonl");
    write_linklocal_trace(&path, 4, None, None);
    let name = path.display().to_string();
    let (code, text, stderr) = report(&[&name]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!text.contains("kafka role"), "{text}");
    let html_path = dir.join("plain.html");
    let (code, _, stderr) = report(&["--html", &html_path.display().to_string(), &name]);
    assert_eq!(code, 0, "{stderr}");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("<th>owner</th><th>intervals</th>"));
    assert!(!html.contains("Kafka role</th>"));
    let r = report_json(&[&name]);
    for f in r["flows"].as_array().unwrap() {
        assert_eq!(f.get("kafka"), None, "{f}");
    }
}
