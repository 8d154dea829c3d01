//! What the reader says about files that are not whole, current traces.

use std::path::{Path, PathBuf};

use crate::support::record::{header, snapshot};
use crate::support::TempDir;
use throttlescope::model::snapshot::AllowanceStatus;
use throttlescope::record::{self, ProblemKind, RotateOptions, TraceWriter};

fn open_err(path: &Path) -> String {
    format!("{:#}", record::open(path).err().expect("open must fail"))
}

fn read_warnings(path: &Path) -> (usize, Vec<String>) {
    let (_, snaps, warnings) = record::read_all(&[path.to_path_buf()]).unwrap();
    (snaps.len(), warnings)
}

/// Writes `n` intervals and returns the file size after each write
/// (index 0: header only), so tests can cut at interval boundaries.
fn write_trace(path: &Path, n: u64) -> Vec<u64> {
    let mut sizes = Vec::new();
    let mut w = TraceWriter::create(path, header(), RotateOptions::default()).unwrap();
    sizes.push(std::fs::metadata(path).unwrap().len());
    for s in 0..n {
        w.write(&snapshot(s, 4)).unwrap();
        sizes.push(std::fs::metadata(path).unwrap().len());
    }
    w.finish().unwrap();
    sizes
}

#[test]
fn empty_missing_and_foreign_files_are_errors_naming_the_file() {
    let dir = TempDir::new("bad");
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, b"").unwrap();
    let msg = open_err(&empty);
    assert_eq!(
        msg,
        format!("{}: empty file, not a throttlescope trace", empty.display())
    );

    let missing = dir.join("missing.jsonl");
    assert!(open_err(&missing).starts_with(&format!("{}: cannot open", missing.display())));

    let json = dir.join("other.jsonl");
    std::fs::write(&json, b"{\"hello\":1}\n{\"type\":\"snapshot\"}\n").unwrap();
    let msg = open_err(&json);
    assert!(
        msg.starts_with(&format!("{}:1: not a throttlescope trace", json.display())),
        "{msg}"
    );

    let binary = dir.join("binary");
    std::fs::write(&binary, [0u8, 159, 146, 150, 255, 10, 1, 2]).unwrap();
    let msg = open_err(&binary);
    assert!(
        msg.starts_with(&format!(
            "{}:1: not a throttlescope trace",
            binary.display()
        )),
        "{msg}"
    );

    // zstd data that is not a trace inside.
    let zst = dir.join("other.zst");
    std::fs::write(&zst, zstd::encode_all(&b"just text\n"[..], 3).unwrap()).unwrap();
    assert!(open_err(&zst).contains("not a throttlescope trace"));

    // read_all stops on a file that is not a trace rather than guessing.
    let err = record::read_all(std::slice::from_ref(&json)).err().unwrap();
    assert!(format!("{err:#}").contains(&json.display().to_string()));
}

#[test]
fn a_newer_major_version_is_refused_clearly() {
    let dir = TempDir::new("major");
    let path = dir.join("future.jsonl");
    let mut h = serde_json::to_value(header()).unwrap();
    h["version"] = serde_json::json!({"major": 2, "minor": 0});
    // A 2.0 header may well lack fields 1.x requires: the version decides first.
    h.as_object_mut().unwrap().remove("interfaces");
    std::fs::write(&path, format!("{h}\n")).unwrap();
    assert_eq!(
        open_err(&path),
        format!(
            "{}:1: format version 2.0 is newer than this throttlescope understands (1.x)",
            path.display()
        )
    );
}

#[test]
fn a_newer_minor_version_reads_ignoring_what_it_added() {
    let dir = TempDir::new("minor");
    let path = dir.join("newer.jsonl");
    let mut h = serde_json::to_value(header()).unwrap();
    h["version"] = serde_json::json!({"major": 1, "minor": 9});
    h["added_in_1_9"] = serde_json::json!({"x": 1});
    let mut snap = serde_json::to_value(snapshot(0, 2)).unwrap();
    snap["type"] = "snapshot".into();
    snap["new_field"] = serde_json::json!([1, 2, 3]);
    let text = format!(
        "{h}\n{snap}\n{}\n{}\n",
        r#"{"type":"marker","text":"a record type from 1.9"}"#,
        r#"{"type":"end","unix_ms":1,"intervals":1,"reason":"stopped","why":"new"}"#
    );
    std::fs::write(&path, text).unwrap();
    let mut r = record::open(&path).unwrap();
    assert_eq!(r.header().version.minor, 9);
    let snaps: Vec<_> = r.by_ref().map(|x| x.unwrap()).collect();
    assert_eq!(snaps, vec![snapshot(0, 2)]);
    assert_eq!(r.summary().unknown_records, 1);
    let w = r.closing_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("skipped 1 records of a type"), "{w:?}");
}

#[test]
fn the_version_1_0_fixture_still_reads() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/record_fixtures/v1_0.jsonl");
    let (headers, snaps, warnings) = record::read_all(&[path]).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(headers.len(), 1);
    let h = &headers[0];
    assert_eq!((h.version.major, h.version.minor), (1, 0));
    assert_eq!(h.host, "broker-7");
    // Fields 1.0 did not have take their defaults.
    assert_eq!(h.thresholds, serde_json::Value::Null);
    assert_eq!(h.segment, 0);
    assert_eq!(snaps.len(), 3);
    assert_eq!(
        snaps.iter().map(|s| s.seq).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    let eth = &snaps[2].interfaces[0];
    assert_eq!(eth.name, "ens5");
    assert_eq!(eth.totals.tx_bytes, 4_500_000);
    assert_eq!(eth.mtu, 0);
    assert_eq!(eth.offloads, None);
    assert_eq!(eth.host_queue, None);
    assert!(matches!(eth.allowance, AllowanceStatus::Unavailable { .. }));
    assert!(snaps[2].events.is_empty());
    assert_eq!(snaps[0].flows[0].owner.as_ref().unwrap().comm, "java");
    assert!(snaps[0].flows[0].opened);
    // 1.2's flow interface: unknown in a 1.0 file.
    assert!(snaps
        .iter()
        .flat_map(|s| &s.flows)
        .all(|f| f.iface.is_none()));
}

#[test]
fn a_garbage_line_is_skipped_counted_and_named() {
    let dir = TempDir::new("garbage");
    let path = dir.join("t.jsonl");
    write_trace(&path, 5);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{\"type\":\"snapshot\",\"seq\":\"two\"}"; // seq 2, spoiled
    lines.insert(5, "\u{1}\u{2} not json at all");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();

    let mut r = record::open(&path).unwrap();
    let items: Vec<_> = r.by_ref().collect();
    let seqs: Vec<u64> = items
        .iter()
        .filter_map(|i| i.as_ref().ok())
        .map(|s| s.seq)
        .collect();
    assert_eq!(seqs, vec![0, 1, 3, 4]);
    let problems: Vec<_> = items.iter().filter_map(|i| i.as_ref().err()).collect();
    assert_eq!(problems.len(), 2);
    assert_eq!((problems[0].line, problems[1].line), (4, 6));
    assert!(matches!(problems[0].kind, ProblemKind::BadLine(_)));
    let shown = problems[0].to_string();
    assert!(
        shown.starts_with(&format!(
            "{}:4: skipped a line that is not a record",
            path.display()
        )),
        "{shown}"
    );
    assert_eq!(r.summary().skipped_lines, 2);

    let (n, warnings) = read_warnings(&path);
    assert_eq!(n, 4);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("intervals seq 2 to 2 are missing")),
        "{warnings:?}"
    );
}

#[test]
fn a_cut_plain_tail_is_reported_with_line_and_seq() {
    let dir = TempDir::new("cutplain");
    let path = dir.join("t.jsonl");
    let sizes = write_trace(&path, 6);
    // Cut in the middle of the 5th interval (seq 4).
    let cut = (sizes[4] + sizes[5]) / 2;
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..cut as usize]).unwrap();
    let (n, warnings) = read_warnings(&path);
    assert_eq!(n, 4);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "{}: the tail was cut after line 5 (last complete interval seq 3)",
            path.display()
        )),
        "{warnings:?}"
    );

    // Cut exactly at an interval boundary: nothing partial, but no end record.
    std::fs::write(&path, &bytes[..sizes[3] as usize]).unwrap();
    let (n, warnings) = read_warnings(&path);
    assert_eq!(n, 3);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("no end record after line 4 (last interval seq 2)"),
        "{warnings:?}"
    );
}

#[test]
fn a_cut_zstd_stream_keeps_every_whole_interval() {
    let dir = TempDir::new("cutzstd");
    let path = dir.join("t.jsonl.zst");
    let sizes = write_trace(&path, 12);
    let bytes = std::fs::read(&path).unwrap();
    let cut_path = dir.join("cut.jsonl.zst");
    // At each interval boundary: exactly the intervals before it, and a
    // warning (the frame never ended).
    for (k, &size) in sizes.iter().enumerate() {
        std::fs::write(&cut_path, &bytes[..size as usize]).unwrap();
        let (n, warnings) = read_warnings(&cut_path);
        assert_eq!(n, k, "cut at boundary {k}");
        assert_eq!(warnings.len(), 1, "cut at boundary {k}: {warnings:?}");
    }
    // Anywhere inside an interval: the ones before it, and the tail is cut.
    for k in 1..sizes.len() {
        for cut in [
            sizes[k - 1] + 1,
            (sizes[k - 1] + sizes[k]) / 2,
            sizes[k] - 1,
        ] {
            if cut <= sizes[k - 1] {
                continue;
            }
            std::fs::write(&cut_path, &bytes[..cut as usize]).unwrap();
            let (n, warnings) = read_warnings(&cut_path);
            assert_eq!(n, k - 1, "cut at byte {cut}");
            assert_eq!(warnings.len(), 1, "{warnings:?}");
            assert!(
                warnings[0].contains("the tail was cut after line"),
                "{warnings:?}"
            );
            if k >= 2 {
                assert!(
                    warnings[0].contains(&format!("(last complete interval seq {})", k - 2)),
                    "{warnings:?}"
                );
            }
        }
    }
    // Corrupt bytes in the middle: a prefix, a warning, no panic.
    let mut spoiled = bytes.clone();
    let mid = sizes[6] as usize + 10;
    for b in &mut spoiled[mid..mid + 40] {
        *b ^= 0x5a;
    }
    std::fs::write(&cut_path, &spoiled).unwrap();
    let (n, warnings) = read_warnings(&cut_path);
    eprintln!("corrupt after interval 6: read {n}, {warnings:?}");
    assert!((4..12).contains(&n), "read {n}");
    assert!(!warnings.is_empty());
}
