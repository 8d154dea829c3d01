//! What tests/offline/record_robustness.rs and tests/lab/record_robustness.rs share: they were one
//! file before its tests were split by whether they need root.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::support::binary;

/// Stdout kept as text by [`run_measured`]; the rest is only counted.
pub const HEAD_BYTES: usize = 64 << 20;

/// What a finished child did: exit code, its stdout lines (counted and
/// their `seq`s, so a gigabyte of output is never held), stderr, peak RSS.
pub struct Finished {
    pub code: Option<i32>,
    pub stdout_lines: u64,
    pub seqs: Vec<u64>,
    pub stdout_head: String,
    pub stderr: String,
    // Read by tests/offline (the 1 GiB trace) only; tests/lab, which
    // includes this module too, runs no memory-bound check.
    #[allow(dead_code)]
    pub max_rss_kb: i64,
}

/// The `seq` a JSON line starts with (`{"seq":N,...`, as the JSON view
/// writes a snapshot first); `None` for any other line.
pub fn leading_seq(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("{\"seq\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// Spawns `cmd` with piped stdout/stderr and waits for it (killing it and
/// failing after `limit`), reaping it with wait4 for its peak RSS.
// The child is reaped by wait4 (for its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
pub fn run_measured(cmd: &mut Command, limit: Duration) -> Finished {
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
pub fn replay_json(files: &[PathBuf], limit: Duration) -> Finished {
    run_measured(
        Command::new(binary())
            .args(["replay", "--as-fast-as-possible", "--json"])
            .args(files),
        limit,
    )
}

/// `throttlescope report --json FILE`: its intervals and read warnings.
pub struct ReportRun {
    pub finished: Finished,
    pub intervals: u64,
    pub warnings: Vec<String>,
}

pub fn report_json(file: &Path, limit: Duration) -> ReportRun {
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

pub fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("throttlescope: warning: "))
        .collect()
}
