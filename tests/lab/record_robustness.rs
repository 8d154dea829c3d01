//! The recording commands under abuse, through the real binary: a 1 GiB
//! trace read in bounded memory, `record` killed with SIGKILL while real
//! traffic flows, `record` refused or stopped by its output (existing file,
//! read-only directory, full disk), `watch --record` recording what it
//! shows, and a rotated recording replayed from shuffled file names.
//!
//! The tests here need root; those that need none are in
//! tests/offline/record_robustness.rs.

use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::lab_support::traffic::Bulk;
use crate::lab_support::Lab;
use crate::support::binary;
use crate::support::record_robustness::{replay_json, report_json, run_measured, warnings};
use crate::support::TempDir;
use throttlescope::record::{self};

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
    let mut cmd = in_broker(lab, &args);
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    // SIGHUP at its default action, whatever this test run inherited: under
    // `nohup` (a CI step run so) it arrives ignored, `record` rightly keeps
    // it so (`--help`: "nohup"), and the SIGHUP test would wait out --duration.
    // SAFETY: signal(2) only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
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
    let _gate = crate::lab_support::gate::shared();
    kill_9_record("killed.jsonl");
}

#[test]
fn kill_9_during_record_with_traffic_zstd() {
    let _gate = crate::lab_support::gate::shared();
    kill_9_record("killed.jsonl.zst");
}

/// A tmpfs mounted for one test, unmounted on drop.
struct Mount {
    dir: TempDir,
}

impl Mount {
    fn tmpfs(tag: &str, options: &str) -> Mount {
        crate::lab_support::needs_root("mounting a tmpfs");
        let dir = TempDir::new(tag);
        crate::support::run(
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
    let _gate = crate::lab_support::gate::shared();
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
    let _gate = crate::lab_support::gate::shared();
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
    let _gate = crate::lab_support::gate::shared();
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

/// SIGHUP (the terminal or session closed) ends `record` with the same
/// clean stop as SIGTERM: an end record (reason `hangup`), every interval
/// kept; the exit status is 129, as a shell reports death by SIGHUP.
#[test]
fn sighup_ends_a_recording_with_its_end_record() {
    let _gate = crate::lab_support::gate::shared();
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
