//! The recording commands under abuse, through the real binary: a 1 GiB
//! trace read in bounded memory, `record` killed with SIGKILL while real
//! traffic flows, `record` refused or stopped by its output (existing file,
//! read-only directory, full disk), `watch --record` recording what it
//! shows, and a rotated recording replayed from shuffled file names.

mod common;
mod record_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::traffic::Bulk;
use common::{binary, Lab};
use record_support::{header, snapshot, TempDir};
use throttlescope::record::{self, EndRecord, RotateOptions, TraceRecord, TraceWriter};

/// Ceiling on the peak RSS of a command reading a trace of any size.
const READ_RSS_LIMIT_KB: i64 = 300 * 1024;

/// Stdout kept as text by [`run_measured`]; the rest is only counted.
const HEAD_BYTES: usize = 64 << 20;

/// What a finished child did: exit code, its stdout lines (counted and
/// their `seq`s, so a gigabyte of output is never held), stderr, peak RSS.
struct Finished {
    code: Option<i32>,
    stdout_lines: u64,
    seqs: Vec<u64>,
    stdout_head: String,
    stderr: String,
    max_rss_kb: i64,
}

/// The `seq` a JSON line starts with (`{"seq":N,...`, as the JSON view
/// writes a snapshot first); `None` for any other line.
fn leading_seq(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// Spawns `cmd` with piped stdout/stderr and waits for it (killing it and
/// failing after `limit`), reaping it with wait4 for its peak RSS.
// The child is reaped by wait4 (for its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run_measured(cmd: &mut Command, limit: Duration) -> Finished {
    let mut child: Child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let out_reader: JoinHandle<(u64, Vec<u64>, String)> = std::thread::spawn(move || {
        let mut lines = 0;
        let mut seqs = Vec::new();
        let mut head = String::new();
        let mut r = BufReader::with_capacity(1 << 20, out);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            lines += 1;
            let prefix = String::from_utf8_lossy(&line[..line.len().min(64)]);
            if let Some(s) = leading_seq(&prefix) {
                seqs.push(s);
            }
            if head.len() < HEAD_BYTES {
                head.push_str(&String::from_utf8_lossy(
                    &line[..line.len().min(HEAD_BYTES)],
                ));
            }
        }
        (lines, seqs, head)
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = BufReader::new(err).read_to_string(&mut s);
        s
    });
    let pid = child.id() as libc::pid_t;
    let started = Instant::now();
    let (status, rusage) = loop {
        let mut status = 0;
        // SAFETY: plain syscall on our own child; rusage is written by the kernel.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break (status, ru);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout_lines, seqs, stdout_head) = out_reader.join().unwrap();
    Finished {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout_lines,
        seqs,
        stdout_head,
        stderr: err_reader.join().unwrap(),
        max_rss_kb: rusage.ru_maxrss,
    }
}

/// `throttlescope replay --as-fast-as-possible --json FILES`, measured.
fn replay_json(files: &[PathBuf], limit: Duration) -> Finished {
    run_measured(
        Command::new(binary())
            .args(["replay", "--as-fast-as-possible", "--json"])
            .args(files),
        limit,
    )
}

/// `throttlescope report --json FILE`: its intervals and read warnings.
struct ReportRun {
    finished: Finished,
    intervals: u64,
    warnings: Vec<String>,
}

fn report_json(file: &Path, limit: Duration) -> ReportRun {
    let finished = run_measured(
        Command::new(binary()).args(["report", "--json"]).arg(file),
        limit,
    );
    assert!(
        finished.stdout_head.len() < HEAD_BYTES,
        "report longer than {HEAD_BYTES} bytes"
    );
    let v: serde_json::Value = serde_json::from_str(&finished.stdout_head).unwrap_or_else(|e| {
        panic!(
            "report --json: {e}: {}",
            &finished.stderr[..finished.stderr.len().min(2000)]
        )
    });
    let intervals = v["span"]["intervals"].as_u64().expect("span.intervals");
    let warnings = v["health"]["read_warnings"]
        .as_array()
        .expect("health.read_warnings")
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect();
    ReportRun {
        finished,
        intervals,
        warnings,
    }
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("throttlescope: warning: "))
        .collect()
}

// ---------------------------------------------------------------- (a) 1 GiB

#[test]
fn a_1_gib_trace_is_read_in_bounded_memory() {
    const TARGET_BYTES: u64 = 1 << 30;
    const GARBAGE_EVERY: u64 = 300;
    let dir = TempDir::new("1gib");
    let path = dir.join("big.jsonl");

    // A real snapshot line (200 flows, ~260 KB); each copy gets its own
    // seq and times (the fields before `interval_ns`).
    let line = serde_json::to_string(&TraceRecord::Snapshot(Box::new(snapshot(0, 200)))).unwrap();
    let (_, rest) = line
        .split_once(",\"interval_ns\":")
        .expect("a snapshot line holds interval_ns");
    let rest = format!(",\"interval_ns\":{rest}");
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    writeln!(f, "{}", serde_json::to_string(&header()).unwrap()).unwrap();
    let mut written = 0u64;
    let mut line_no = 1u64;
    let mut intervals = 0u64;
    let mut bad_lines = Vec::new();
    let mut long_line = None;
    while written < TARGET_BYTES {
        line_no += 1;
        let bytes = if line_no % GARBAGE_EVERY == 0 {
            bad_lines.push(line_no);
            let g = format!("garbage {line_no}: {{\"type\": \"snapshot\", \"seq\": oops\n");
            f.write_all(g.as_bytes()).unwrap();
            g.len() as u64
        } else if line_no == 1000 {
            // One line over the reader's 64 MiB ceiling: skipped, never held.
            long_line = Some(line_no);
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..65 {
                f.write_all(&chunk).unwrap();
            }
            f.write_all(b"\n").unwrap();
            (65 << 20) + 1
        } else {
            let (mono, unix) = (
                10_000_000_000 + intervals * 1_000_000_000,
                1_763_000_000_000 + intervals * 1000,
            );
            let l = format!(
                "{{\"type\":\"snapshot\",\"seq\":{intervals},\"mono_ns\":{mono},\"unix_ms\":{unix}{rest}\n"
            );
            f.write_all(l.as_bytes()).unwrap();
            intervals += 1;
            l.len() as u64
        };
        written += bytes;
    }
    let end = EndRecord {
        unix_ms: 1_763_000_000_000,
        intervals,
        reason: "stopped".into(),
    };
    writeln!(
        f,
        "{}",
        serde_json::to_string(&TraceRecord::End(end)).unwrap()
    )
    .unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= TARGET_BYTES);
    let long_line = long_line.unwrap();

    let r = replay_json(std::slice::from_ref(&path), Duration::from_secs(900));
    eprintln!(
        "replay of {size} bytes ({intervals} intervals, {} bad lines): exit {:?}, peak RSS {} MiB",
        bad_lines.len() + 1,
        r.code,
        r.max_rss_kb / 1024
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout_lines, intervals);
    assert_eq!(r.seqs, (0..intervals).collect::<Vec<_>>());
    let w = warnings(&r.stderr);
    let p = path.display().to_string();
    let mut expected: Vec<String> = bad_lines
        .iter()
        .map(|n| format!("{p}:{n}: skipped a line that is not a record"))
        .collect();
    expected.insert(
        bad_lines.partition_point(|&n| n < long_line),
        format!("{p}:{long_line}: skipped a line longer than 64 MiB"),
    );
    assert_eq!(w.len(), expected.len(), "{w:?}");
    for (got, want) in w.iter().zip(&expected) {
        assert!(got.starts_with(want.as_str()), "{got} / {want}");
    }
    assert!(
        r.max_rss_kb < READ_RSS_LIMIT_KB,
        "replay peak RSS {} KiB over {} KiB",
        r.max_rss_kb,
        READ_RSS_LIMIT_KB
    );

    let r = report_json(&path, Duration::from_secs(900));
    eprintln!(
        "report --json: exit {:?}, peak RSS {} MiB",
        r.finished.code,
        r.finished.max_rss_kb / 1024
    );
    assert_eq!(r.finished.code, Some(0), "{}", r.finished.stderr);
    assert_eq!(r.intervals, intervals);
    assert_eq!(r.warnings.len(), expected.len(), "{:?}", r.warnings);
    for (got, want) in r.warnings.iter().zip(&expected) {
        assert!(got.starts_with(want.as_str()), "{got} / {want}");
    }
    assert_eq!(
        warnings(&r.finished.stderr),
        r.warnings,
        "{}",
        r.finished.stderr
    );
    assert!(
        r.finished.max_rss_kb < READ_RSS_LIMIT_KB,
        "report peak RSS {} KiB over {} KiB",
        r.finished.max_rss_kb,
        READ_RSS_LIMIT_KB
    );
}

// ------------------------------------------------------- (b) kill -9, lab

/// Every `\n`-terminated line of a trace file's decoded text, and whether
/// text follows the last one. A zstd stream cut mid-block decodes up to
/// the break.
fn complete_lines(path: &Path) -> (Vec<String>, bool) {
    let raw = std::fs::read(path).unwrap();
    let text = if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let mut d = zstd::stream::read::Decoder::new(&raw[..]).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match d.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    } else {
        raw
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    let tail = !text.is_empty() && !text.ends_with('\n');
    let mut lines: Vec<String> = text.split_inclusive('\n').map(str::to_string).collect();
    if tail {
        lines.pop();
    }
    (lines, tail)
}

/// Intervals the trace at `path` holds right now (0 while it is absent).
fn intervals_now(path: &Path) -> usize {
    match record::open(path) {
        Ok(r) => r.filter(|i| i.is_ok()).count(),
        Err(_) => 0,
    }
}

/// `throttlescope ARGS` inside the lab's broker namespace.
fn in_broker(lab: &Lab, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.broker()])
        .arg(binary())
        .args(args);
    c
}

/// Four connections from the broker to the client for `secs` (closing the
/// traffic waits for their end).
fn broker_traffic(lab: &Lab, port: u16, secs: u64) -> Bulk {
    let listen: SocketAddr = format!("{}:{port}", lab.broker_ip).parse().unwrap();
    // A few MB/s per connection: real segments every interval, little CPU.
    Bulk::start(
        &lab.broker(),
        &lab.client(),
        listen,
        4,
        Duration::from_secs(secs),
        4 << 20,
    )
}

/// `record -o PATH` (200 ms intervals) in the lab's broker namespace,
/// once it has written `intervals` intervals. `ip netns exec` execs, so
/// the child is the recorder itself.
fn recording(lab: &Lab, path: &Path, intervals: usize) -> Child {
    let p = path.to_str().unwrap();
    let args = [
        "record",
        "-o",
        p,
        "--interval",
        "200ms",
        "--duration",
        "60s",
        "-q",
    ];
    let mut child = in_broker(lab, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while intervals_now(path) < intervals {
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "record wrote fewer than {intervals} intervals in 45 s"
        );
        assert!(child.try_wait().unwrap().is_none(), "record exited early");
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

fn kill_9_record(name: &str) {
    let lab = Lab::up("rk");
    let port = 5611;
    let traffic = broker_traffic(&lab, port, 20);
    let dir = TempDir::new("rkill");
    let path = dir.join(name);
    let p = path.to_str().unwrap();
    let mut child = recording(&lab, &path, 10);
    // `ip netns exec` execs: this is the recorder itself.
    child.kill().unwrap();
    child.wait().unwrap();
    traffic.close();

    let (lines, cut_tail) = complete_lines(&path);
    let whole = lines.len() as u64 - 1; // minus the header
    let (_, snaps, warns) = record::read_all(std::slice::from_ref(&path)).unwrap();
    eprintln!(
        "{name}: {whole} whole lines after the header, tail cut: {cut_tail}, read {} intervals; {warns:?}",
        snaps.len()
    );
    // Every complete line is an interval, and all of them are read back.
    assert_eq!(snaps.len() as u64, whole);
    let seqs: Vec<u64> = snaps.iter().map(|s| s.seq).collect();
    assert_eq!(seqs, (0..whole).collect::<Vec<_>>());
    // The recording saw the test's traffic.
    let sent: u64 = snaps
        .iter()
        .flat_map(|s| &s.flows)
        .filter(|f| f.local.port() == port)
        .map(|f| f.delta.bytes_sent)
        .sum();
    assert!(
        sent > 1 << 20,
        "only {sent} bytes of the test's flows recorded"
    );
    // One warning, naming the file: its tail was cut, or it was not closed.
    assert_eq!(warns.len(), 1, "{warns:?}");
    let last = whole - 1;
    let tail_cut = format!(
        "{p}: the tail was cut after line {} (last complete interval seq {last})",
        whole + 1
    );
    let unclosed = format!(
        "{p}: no end record after line {} (last interval seq {last})",
        whole + 1
    );
    assert!(
        warns[0].starts_with(&tail_cut) || warns[0].starts_with(&unclosed),
        "{}",
        warns[0]
    );
    if cut_tail {
        assert!(warns[0].starts_with(&tail_cut), "{}", warns[0]);
    }

    // The CLI gives the same intervals and the same warning.
    let r = replay_json(std::slice::from_ref(&path), Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.seqs, seqs);
    assert_eq!(r.stdout_lines, whole);
    assert_eq!(warnings(&r.stderr), vec![warns[0].as_str()], "{}", r.stderr);
    let r = report_json(&path, Duration::from_secs(120));
    assert_eq!(r.finished.code, Some(0), "{}", r.finished.stderr);
    assert_eq!(r.intervals, whole);
    assert_eq!(r.warnings, warns);
}

#[test]
fn kill_9_during_record_with_traffic_plain() {
    kill_9_record("killed.jsonl");
}

#[test]
fn kill_9_during_record_with_traffic_zstd() {
    kill_9_record("killed.jsonl.zst");
}

// ------------------------------------------------- (c) output errors

#[test]
fn record_refuses_an_existing_file() {
    let dir = TempDir::new("exists");
    let path = dir.join("precious.jsonl");
    std::fs::write(&path, b"not yours to overwrite\n").unwrap();
    let r = run_measured(
        Command::new(binary())
            .args(["record", "-o"])
            .arg(&path)
            .args(["--duration", "2s"]),
        Duration::from_secs(30),
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{}: already exists", path.display())),
        "{}",
        r.stderr
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"not yours to overwrite\n".to_vec()
    );
}

/// A tmpfs mounted for one test, unmounted on drop.
struct Mount {
    dir: TempDir,
}

impl Mount {
    fn tmpfs(tag: &str, options: &str) -> Mount {
        common::needs_root("mounting a tmpfs");
        let dir = TempDir::new(tag);
        common::run(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", options, "tmpfs"])
                .arg(&dir.0),
        );
        Mount { dir }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir.0).status();
    }
}

#[test]
fn record_into_a_read_only_directory_fails_naming_the_file() {
    let ro = Mount::tmpfs("rofs", "ro,size=64k");
    let lab = Lab::up("rro");
    for path in [
        ro.dir.join("trace.jsonl"),
        ro.dir.join("no-such-dir/trace.jsonl"),
    ] {
        let p = path.to_str().unwrap();
        let r = run_measured(
            &mut in_broker(
                &lab,
                &[
                    "record",
                    "-o",
                    p,
                    "--interval",
                    "200ms",
                    "--duration",
                    "60s",
                ],
            ),
            Duration::from_secs(45),
        );
        eprintln!("{p}: exit {:?}: {}", r.code, r.stderr.trim());
        assert_eq!(r.code, Some(1), "{}", r.stderr);
        let last = r.stderr.lines().last().unwrap_or("");
        assert!(
            last.starts_with(&format!("throttlescope: {p}: cannot create: ")),
            "{}",
            r.stderr
        );
        assert!(
            last.contains("Read-only file system") || last.contains("No such file or directory"),
            "{last}"
        );
        assert!(!path.exists());
    }
}

#[test]
fn record_on_a_full_disk_stops_and_keeps_what_it_wrote() {
    let fs = Mount::tmpfs("full", "size=64k");
    let lab = Lab::up("rfl");
    let port = 5612;
    let traffic = broker_traffic(&lab, port, 20);
    let path = fs.dir.join("trace.jsonl");
    let p = path.to_str().unwrap();
    let r = run_measured(
        &mut in_broker(
            &lab,
            &[
                "record",
                "-o",
                p,
                "--interval",
                "100ms",
                "--duration",
                "60s",
            ],
        ),
        Duration::from_secs(45),
    );
    traffic.close();
    eprintln!("exit {:?}: {}", r.code, r.stderr.trim());
    // The observer stopped (well before its 60 s, or run_measured failed).
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let last = r.stderr.lines().last().unwrap_or("");
    // The file is named first, then why.
    assert!(
        last.starts_with(&format!("throttlescope: {p}: recording stopped")),
        "{last}"
    );
    assert!(
        last.contains(&format!("{p}: writing interval seq ")),
        "{last}"
    );
    assert!(last.contains("No space left on device"), "{last}");
    // "the N intervals up to seq S are intact": and they are.
    let intact = last
        .rsplit_once("; the ")
        .and_then(|(_, rest)| rest.split_once(" intervals up to seq "))
        .map(|(n, rest)| {
            let seq = rest.split(' ').next().unwrap();
            (n.parse::<u64>().unwrap(), seq.parse::<u64>().unwrap())
        })
        .unwrap_or_else(|| panic!("no intact count in {last}"));
    assert!(intact.0 > 0, "{last}");
    let (lines, tail) = complete_lines(&path);
    assert!(!tail, "the failed write left a partial line");
    let (_, snaps, warns) = record::read_all(std::slice::from_ref(&path)).unwrap();
    assert_eq!(snaps.len() as u64, intact.0, "{warns:?}");
    assert_eq!(lines.len() as u64, intact.0 + 1);
    assert_eq!(snaps.last().unwrap().seq, intact.1);
    assert_eq!(warns.len(), 1, "{warns:?}");
    assert!(
        warns[0].starts_with(&format!("{p}: no end record")),
        "{warns:?}"
    );
}

// --------------------------------------------- (d) watch --record

#[test]
fn watch_record_holds_the_intervals_it_printed() {
    let lab = Lab::up("rwr");
    let traffic = broker_traffic(&lab, 5613, 10);
    let dir = TempDir::new("watchrec");
    let path = dir.join("watched.jsonl.zst");
    let p = path.to_str().unwrap();
    let r = run_measured(
        &mut in_broker(
            &lab,
            &["watch", "--record", p, "--plain", "--duration", "3s"],
        ),
        Duration::from_secs(60),
    );
    traffic.close();
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // 3 intervals of plain tables fit in the head run_measured keeps.
    let printed: Vec<u64> = r
        .stdout_head
        .lines()
        .filter_map(|l| l.strip_prefix("-- interval "))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect();
    let (_, snaps, warns) = record::read_all(std::slice::from_ref(&path)).unwrap();
    let recorded: Vec<u64> = snaps.iter().map(|s| s.seq).collect();
    eprintln!("printed {printed:?}, recorded {recorded:?}");
    assert!(printed.len() >= 2, "{}", r.stdout_head);
    assert_eq!(printed, recorded);
    assert!(warns.is_empty(), "{warns:?}");
    assert!(
        r.stderr
            .contains(&format!("recorded {} intervals to {p}", recorded.len())),
        "{}",
        r.stderr
    );
}

// --------------------------------------- (e) rotated, shuffled replay

#[test]
fn replay_puts_shuffled_rotated_segments_in_order() {
    let dir = TempDir::new("rotshuf");
    let base = dir.join("rot.jsonl");
    let opts = RotateOptions {
        max_bytes: Some(40_000),
        max_age: None,
        keep: 20,
    };
    let mut w = TraceWriter::create(&base, header(), opts).unwrap();
    for seq in 0..60 {
        w.write(&snapshot(seq, 6)).unwrap();
    }
    let segments = w.segment_index() as usize + 1;
    w.finish().unwrap();
    assert!(segments >= 4, "only {segments} segments");
    let mut files: Vec<PathBuf> = (0..segments)
        .map(|n| record::segments::segment_path(&base, n))
        .collect();
    // Newest first as a listing gives them, then swapped around.
    files.rotate_left(segments / 2);
    files.swap(0, segments - 1);
    eprintln!("{files:?}");
    let r = replay_json(&files, Duration::from_secs(120));
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.seqs, (0..60).collect::<Vec<_>>());
    assert!(warnings(&r.stderr).is_empty(), "{}", r.stderr);
}

/// SIGHUP (the terminal or session closed) ends `record` with the same
/// clean stop as SIGTERM: an end record (reason `hangup`), every interval
/// kept; the exit status is 129, as a shell reports death by SIGHUP.
#[test]
fn sighup_ends_a_recording_with_its_end_record() {
    let lab = Lab::up("rhup");
    let dir = TempDir::new("rhup");
    let path = dir.join("hup.jsonl");
    let mut child = recording(&lab, &path, 3);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGHUP) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(129), "record after SIGHUP: {status}");
    let mut r = record::open(&path).unwrap();
    let n = r.by_ref().filter(|i| i.is_ok()).count();
    let summary = r.summary();
    assert!(summary.end.is_some(), "no end record: {summary:?}");
    let end = summary.end.unwrap();
    assert_eq!(end.intervals, n as u64);
    assert_eq!(end.reason, "hangup");
}
