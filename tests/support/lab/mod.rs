//! The lab program's own helpers (tests/lab includes this module as
//! `lab_support`; the offline program needs none of it): a lab of network
//! namespaces made by `tools/lab` under a unique prefix, removed on drop
//! (also on panic), real TCP traffic between its namespaces, and what reads
//! `ss`, `nstat` and `watch --json` back.

pub mod gate;
pub mod stream;
pub mod traffic;

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use throttlescope::analysis::{Verdict, VerdictFamily};

use crate::support::{binary, repo_root, run};

/// A client <-> hv <-> broker lab (docs/lab.md) with a unique prefix. Its
/// addresses and paths are the lab's own (`tools/lab env`), asked once after
/// `up`: the tests follow the lab instead of repeating its layout.
pub struct Lab {
    pub prefix: String,
    /// The broker's address (LAB_BROKER_IP).
    pub broker_ip: String,
    /// The client's address (LAB_CLIENT_IP).
    pub client_ip: String,
    /// The broker's interface toward hv (LAB_BROKER_IF), whose ENA counters
    /// the lab emulates.
    pub broker_if: String,
    /// The emulated `ethtool -S` file of `broker_if` (LAB_COUNTERS).
    pub counters: PathBuf,
    /// The lab's state directory (LAB_DIR): pid files, churn results.
    pub dir: PathBuf,
    /// The address `tools/lab pod` gives the pod (LAB_POD_IP), and the
    /// broker's end of its veth (LAB_POD_BROKER_IF).
    pub pod_ip: String,
    pub pod_broker_if: String,
}

impl Lab {
    pub fn up(tag: &str) -> Lab {
        needs_root("the lab's network namespaces");
        static N: AtomicU32 = AtomicU32::new(0);
        // Short: interface and namespace names have length limits.
        let prefix = format!(
            "t{}{}{}",
            &tag[..tag.len().min(3)],
            std::process::id() % 100_000,
            N.fetch_add(1, Ordering::SeqCst)
        );
        // Built before `up` so that Drop takes the lab down if anything
        // below fails.
        let mut lab = Lab {
            prefix,
            broker_ip: String::new(),
            client_ip: String::new(),
            broker_if: String::new(),
            counters: PathBuf::new(),
            dir: PathBuf::new(),
            pod_ip: String::new(),
            pod_broker_if: String::new(),
        };
        lab.tool(&["up"]);
        let env = parse_lab_env(&String::from_utf8_lossy(&lab.tool(&["env"]).stdout));
        let var = |name: &str| {
            env.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("`tools/lab env` printed no {name}: {env:?}"))
        };
        lab.broker_ip = var("LAB_BROKER_IP");
        lab.client_ip = var("LAB_CLIENT_IP");
        lab.broker_if = var("LAB_BROKER_IF");
        lab.counters = PathBuf::from(var("LAB_COUNTERS"));
        lab.dir = PathBuf::from(var("LAB_DIR"));
        lab.pod_ip = var("LAB_POD_IP");
        lab.pod_broker_if = var("LAB_POD_BROKER_IF");
        lab
    }

    /// Runs `tools/lab ARGS --prefix P`.
    pub fn tool(&self, args: &[&str]) -> Output {
        run(Command::new(repo_root().join("tools/lab"))
            .args(args)
            .args(["--prefix", &self.prefix]))
    }

    pub fn client(&self) -> String {
        format!("{}-client", self.prefix)
    }
    pub fn hv(&self) -> String {
        format!("{}-hv", self.prefix)
    }
    pub fn broker(&self) -> String {
        format!("{}-broker", self.prefix)
    }
    /// The namespace `tools/lab pod` makes behind the broker.
    pub fn pod(&self) -> String {
        format!("{}-pod", self.prefix)
    }

    /// `ip netns exec NS PROGRAM ARGS...`, output checked.
    pub fn exec(&self, ns: &str, program: &str, args: &[&str]) -> String {
        let out = run(Command::new("ip")
            .args(["netns", "exec", ns, program])
            .args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `throttlescope watch --json --duration DURATION` in the broker
    /// namespace, with the lab's emulated counters for b0 and `extra`
    /// arguments; returns its stdout (one JSON line per interval).
    pub fn watch_json_in_broker(&self, duration: &str, extra: &[&str]) -> Vec<u8> {
        self.watch_json_in_broker_reading(&self.counters, duration, extra)
    }

    /// As [`Lab::watch_json_in_broker`], the broker interface's allowance
    /// counters read from `counters` (a test playing the ENA device).
    pub fn watch_json_in_broker_reading(
        &self,
        counters: &Path,
        duration: &str,
        extra: &[&str],
    ) -> Vec<u8> {
        run(&mut self.watch_command(counters, duration, extra)).stdout
    }

    /// `watch --json` in the broker's namespace, b0's counters from
    /// `counters`.
    fn watch_command(&self, counters: &Path, duration: &str, extra: &[&str]) -> Command {
        let counters = format!("{}={}", self.broker_if, counters.display());
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.broker()])
            .arg(binary())
            .args(["watch", "--json", "--duration", duration])
            .args(["--counters", &counters])
            .args(extra);
        cmd
    }

    /// As [`Lab::watch_json_in_broker`], with its stderr too.
    pub fn watch_json_in_broker_output(&self, duration: &str, extra: &[&str]) -> Output {
        let out = self
            .watch_command(&self.counters, duration, extra)
            .output()
            .expect("running watch");
        assert!(
            out.status.success(),
            "watch failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// As [`Lab::watch_json_in_broker`], started and left running: the
    /// caller reads its output (one JSON line an interval) and waits for it.
    pub fn spawn_watch_json_in_broker(
        &self,
        duration: &str,
        extra: &[&str],
    ) -> std::process::Child {
        self.watch_command(&self.counters, duration, extra)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting watch")
    }

    /// `watch --json` in the broker's namespace, its lines read as they
    /// come, stopped by the test once it has the intervals it needs
    /// ([`stream::WatchStream`]).
    pub fn stream_watch_json_in_broker(&self, extra: &[&str]) -> stream::WatchStream {
        self.stream_watch_json_in_broker_reading(&self.counters, extra)
    }

    /// As [`Lab::stream_watch_json_in_broker`], b0's counters from
    /// `counters` (a test playing the ENA device itself).
    pub fn stream_watch_json_in_broker_reading(
        &self,
        counters: &Path,
        extra: &[&str],
    ) -> stream::WatchStream {
        stream::WatchStream::start(
            self.watch_command(counters, stream::STREAM_BOUND, extra),
            &format!("watch in {}", self.broker()),
        )
    }

    /// As [`Lab::stream_watch_json_in_broker_reading`], started once the
    /// test's own ENA writer has written `counters` (at most 10 s), its
    /// first interval read.
    pub fn stream_watch_once_written(&self, counters: &Path) -> stream::WatchStream {
        let written = std::time::Instant::now();
        while !counters.exists() {
            assert!(
                written.elapsed() < std::time::Duration::from_secs(10),
                "the writer wrote no counter file"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let mut watch = self.stream_watch_json_in_broker_reading(counters, &["--interval", "1s"]);
        watch.attached();
        watch
    }

    /// Waits (up to 10 s, then fails with `what`) until `ss args` in the
    /// broker's namespace lists a socket at each of `addrs` (`IP:PORT`):
    /// servers listening (`-Hltn`), or connections established (`-Htn state
    /// established`), before a test relies on them, not after a fixed time.
    pub fn until_listed(&self, args: &[&str], addrs: &[String], what: &str) {
        let start = std::time::Instant::now();
        loop {
            let out = self.exec(&self.broker(), "ss", args);
            let missing: Vec<&String> = addrs
                .iter()
                .filter(|a| !out.contains(&format!("{a} ")))
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "{what} at {missing:?} after 10 s: {out}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// Waits (up to 30 s, then fails) until the broker's interface has sent
    /// at least `min_bytes` in each of `secs` one-second reads in a row:
    /// the traffic `tools/lab traffic` started (it returns before its
    /// client has connected) flows at its own rate, so a watch started next
    /// judges it from its first interval. Any one-second read of a traffic
    /// that bursts once a second or faster holds a whole period.
    pub fn until_sending(&self, secs: u32, min_bytes: u64) {
        let stat = format!("/sys/class/net/{}/statistics/tx_bytes", self.broker_if);
        let read = || -> u64 {
            let text = self.exec(&self.broker(), "cat", &[&stat]);
            text.trim()
                .parse()
                .unwrap_or_else(|e| panic!("{stat}: {e}: {text:?}"))
        };
        let start = std::time::Instant::now();
        let (mut prev, mut sending) = (read(), 0);
        while sending < secs {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(30),
                "{} did not send {min_bytes} bytes a second for {secs} s in a row within 30 s",
                self.broker_if
            );
            std::thread::sleep(std::time::Duration::from_secs(1));
            let now = read();
            sending = if now - prev >= min_bytes {
                sending + 1
            } else {
                0
            };
            prev = now;
        }
    }

    /// Panics unless the load `tools/lab traffic` started still runs
    /// (`traffic-client.pid`): called once an observation is over, so that
    /// every interval it judged had its load (see [`still_running`]).
    pub fn traffic_ran(&self, what: &str) {
        still_running(&self.dir.join("traffic-client.pid"), what);
    }

    /// Inode of a namespace's netns: what FlowSample::netns carries.
    pub fn netns_inode(&self, ns: &str) -> u32 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(Path::new("/run/netns").join(ns))
            .expect("netns file")
            .ino() as u32
    }

    /// `nstat` counter of a namespace, absolute.
    pub fn nstat(&self, ns: &str, counter: &str) -> u64 {
        nstat_value(&self.exec(ns, "nstat", &["-asz", counter]), counter)
    }
}

/// `nstat` counter of the calling thread's namespace (a thread that entered
/// a lab's namespace: [`in_netns`]), absolute.
pub fn nstat_here(counter: &str) -> u64 {
    let out = Command::new("nstat")
        .args(["-asz", counter])
        .output()
        .expect("nstat");
    nstat_value(&String::from_utf8_lossy(&out.stdout), counter)
}

/// `ss -tin` in the calling thread's namespace, parsed.
pub fn ss_now() -> Vec<SsFlow> {
    let out = Command::new("ss").args(["-tin"]).output().expect("ss");
    parse_ss(&String::from_utf8_lossy(&out.stdout))
}

/// Waits, in the calling thread's namespace, until no flow to `ports` has a
/// byte unacknowledged (ss's Send-Q 0): until then a flow may still
/// retransmit, or undo a loss episode. Writes stopping is not that: a flow
/// backed off by timeouts in a row sends its next retransmit only when its
/// lengthened timer fires, seconds later. A fixed wait of 2 s once left
/// nstat 14 retransmits above the flows' sum (each flow equal to ss at the
/// reading): counted after the reading, before the sockets closed. Usually
/// every byte is acknowledged within 300 ms. Returns how long it took.
pub fn wait_acked(ports: &[u16], within: std::time::Duration) -> std::time::Duration {
    wait_in_flight_gone(
        "bytes still unacknowledged (peer port, Send-Q)",
        within,
        |s| (ports.contains(&s.peer_port) && s.send_q > 0).then_some((s.peer_port, s.send_q)),
    )
}

/// Waits, in the calling thread's namespace, until `ss -tin` lists no
/// socket for which `in_flight` gives a (port, amount); fails after
/// `within` with `what` and those pairs. Returns how long it took.
pub fn wait_in_flight_gone(
    what: &str,
    within: std::time::Duration,
    in_flight: impl Fn(&SsFlow) -> Option<(u16, u64)>,
) -> std::time::Duration {
    let start = std::time::Instant::now();
    loop {
        let left: Vec<(u16, u64)> = ss_now().iter().filter_map(&in_flight).collect();
        if left.is_empty() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{what} after {within:?}: {left:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The totals once the flows to `ports` are idle, read together before any
/// socket closes, in the calling thread's namespace: every byte acknowledged
/// (no retransmit or undo is to come), a second more for a late ACK or
/// D-SACK, then `c`'s snapshot, `ss` and `counters()` (nstat). Read earlier,
/// or nstat after the close, counts land between the readings: one run had
/// each flow one undone timeout short of nstat, another nstat 14 retransmits
/// above the flows' sum.
pub fn settled_totals<T>(
    c: &mut throttlescope::collect::collector::Collector,
    ports: &[u16],
    counters: impl FnOnce() -> T,
) -> (throttlescope::model::snapshot::Snapshot, Vec<SsFlow>, T) {
    let took = wait_acked(ports, std::time::Duration::from_secs(60));
    eprintln!("every byte acknowledged {took:?} after the traffic stopped");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let snap = c.collect().unwrap();
    let ss = ss_now();
    (snap, ss, counters())
}

/// `counter`'s value in `nstat -asz` output (0 when absent: -z lists zeros,
/// but a kernel without the counter lists nothing).
fn nstat_value(out: &str, counter: &str) -> u64 {
    out.lines()
        .find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some(counter)).then(|| it.next().unwrap().parse().unwrap())
        })
        .unwrap_or(0)
}

/// `KEY=VALUE` lines as `tools/lab env` prints them (shell-sourceable, no
/// quoting: its values are names, addresses and paths without spaces).
pub fn parse_lab_env(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("tools/lab"))
            .args(["down", "--prefix", &self.prefix])
            .output();
    }
}

/// Runs `f` on a thread that has entered network namespace `ns`
/// (`setns` changes only the calling thread's namespace).
/// Marks a test as root-only, and fails it (never skips it) when run
/// without root, saying what needed root. tools/test runs as root.
/// Panics unless the process whose pid `pidfile` holds still runs: a
/// lab's background load, checked once the observation that judged it is
/// over. The loads' `--time` is a bound, never the timing (each test stops
/// its load); a load that ends before its observation leaves intervals with
/// nothing to judge, which a check of a share or a sum then reads as a
/// product's error.
pub fn still_running(pidfile: &Path, what: &str) {
    let pid = std::fs::read_to_string(pidfile)
        .unwrap_or_else(|e| panic!("{what}: {}: {e}", pidfile.display()));
    assert!(
        Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "{what}: its load (pid {}, {}) ended before the observation did",
        pid.trim(),
        pidfile.display()
    );
}

pub fn needs_root(what: &str) {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "root-only test: {what} needs root; run the tests as root (tools/test does)"
    );
}

pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = Path::new("/run/netns").join(ns);
    std::thread::spawn(move || {
        enter_netns(&path);
        f()
    })
    .join()
    .expect("thread in netns panicked")
}

/// Moves the calling thread into the netns at `path`.
pub fn enter_netns(path: &Path) {
    needs_root("entering a network namespace");
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // SAFETY: valid fd; CLONE_NEWNET only affects this thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(
        rc,
        0,
        "setns {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// One flow's line from `ss -tin`, the fields we compare.
#[derive(Debug, Clone, Default)]
pub struct SsFlow {
    // Parsed with peer_port, from the same columns; no check compares them
    // today, but a flow printed with {:?} should say whose it is.
    #[allow(dead_code)]
    pub local_port: u16,
    pub peer_port: u16,
    #[allow(dead_code)]
    pub peer: String,
    pub srtt_us: f64,
    pub min_rtt_us: f64,
    pub cwnd: u32,
    pub retrans_total: u64,
    /// `dsack_dups:N`: retransmits the peer reported as duplicates (absent
    /// counts as 0).
    pub dsack_dups: u64,
    /// `busy`, `rwnd_limited` and `sndbuf_limited`, in microseconds (ss
    /// prints whole milliseconds; absent counts as 0).
    pub busy_us: f64,
    pub rwnd_limited_us: f64,
    pub sndbuf_limited_us: f64,
    /// `bytes_acked:N`, `segs_out:N` and `segs_in:N` (absent counts as 0).
    pub bytes_acked: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    /// The Send-Q column: for a connected socket, the bytes written and
    /// not yet acknowledged (0: nothing in flight, nothing to retransmit).
    pub send_q: u64,
    /// `unacked:N`: segments sent and not yet acknowledged (absent counts as
    /// 0). Unlike Send-Q, 0 when the only bytes left wait on a closed window
    /// (a stopped reader): nothing is in flight to be retransmitted.
    pub unacked: u64,
}

/// Parses `ss -tin` output: a header line, then per socket a line with
/// state/queues/addresses and an indented line of info (`rtt:A/B`,
/// `minrtt:M`, `cwnd:C`, `retrans:X/Y`).
pub fn parse_ss(text: &str) -> Vec<SsFlow> {
    let mut out = Vec::new();
    let mut cur: Option<SsFlow> = None;
    for line in text.lines().skip(1) {
        if !line.starts_with(char::is_whitespace) {
            if let Some(f) = cur.take() {
                out.push(f);
            }
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() >= 5 {
                let local = cols[3];
                let port_of = |a: &str| a.rsplit(':').next().unwrap().parse().unwrap_or(0);
                cur = Some(SsFlow {
                    local_port: port_of(local),
                    peer_port: port_of(cols[4]),
                    peer: cols[4].to_string(),
                    send_q: cols[2].parse().expect("ss -tin: the Send-Q column"),
                    ..Default::default()
                });
            }
            continue;
        }
        let Some(f) = cur.as_mut() else { continue };
        for tok in line.split_whitespace() {
            if let Some(v) = tok.strip_prefix("rtt:") {
                f.srtt_us = v.split('/').next().unwrap().parse::<f64>().unwrap() * 1000.0;
            } else if let Some(v) = tok.strip_prefix("minrtt:") {
                f.min_rtt_us = v.parse::<f64>().unwrap() * 1000.0;
            } else if let Some(v) = tok.strip_prefix("cwnd:") {
                f.cwnd = v.parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("retrans:") {
                f.retrans_total = v.split('/').nth(1).unwrap().parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("dsack_dups:") {
                f.dsack_dups = v.parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("busy:") {
                f.busy_us = ss_ms(v);
            } else if let Some(v) = tok.strip_prefix("rwnd_limited:") {
                f.rwnd_limited_us = ss_ms(v);
            } else if let Some(v) = tok.strip_prefix("sndbuf_limited:") {
                f.sndbuf_limited_us = ss_ms(v);
            } else if let Some(v) = tok.strip_prefix("bytes_acked:") {
                f.bytes_acked = v.parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("segs_out:") {
                f.segs_out = v.parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("segs_in:") {
                f.segs_in = v.parse().unwrap();
            } else if let Some(v) = tok.strip_prefix("unacked:") {
                f.unacked = v.parse().unwrap();
            }
        }
    }
    out.extend(cur);
    out
}

/// `1234ms` or `1234ms(5.6%)` as ss prints a chrono time, in microseconds.
fn ss_ms(v: &str) -> f64 {
    let ms = v.split("ms").next().unwrap();
    ms.parse::<f64>().unwrap() * 1000.0
}

/// True when `ours` is within `rel` (fraction) or `abs` of `theirs`.
pub fn close_to(ours: f64, theirs: f64, rel: f64, abs: f64) -> bool {
    (ours - theirs).abs() <= (theirs.abs() * rel).max(abs)
}

/// Coarse class of a verdict name, for checks that must never confuse
/// queuing with loss: the product's own `Verdict::family`, so a verdict the
/// tests do not know fails loudly instead of landing in a catch-all.
pub fn verdict_family(verdict: &str) -> VerdictFamily {
    let v: Verdict = serde_json::from_value(serde_json::Value::String(verdict.to_string()))
        .unwrap_or_else(|e| panic!("unknown verdict {verdict:?} in the observer's output: {e}"));
    v.family()
}

/// A scenario's verdicts after the first interval (a warm-up): `expected`
/// in >= 60% of them, and none that `wrong` rejects.
pub fn check_verdicts(
    scenario: &str,
    verdicts: &[&str],
    expected: &str,
    wrong: impl Fn(&str) -> bool,
) {
    let judged = verdicts.get(1..).unwrap_or_default();
    assert!(
        judged.len() >= 5,
        "{scenario}: too few intervals: {verdicts:?}"
    );
    let right = judged.iter().filter(|v| **v == expected).count();
    eprintln!(
        "{scenario}: {right}/{} intervals judged {expected}",
        judged.len()
    );
    assert!(
        right * 10 >= judged.len() * 6,
        "{scenario}: {expected} in only {right} of {} intervals: {judged:?}",
        judged.len()
    );
    let bad: Vec<_> = judged.iter().filter(|v| wrong(v)).collect();
    assert!(bad.is_empty(), "{scenario}: wrong family: {bad:?}");
}

/// Intervals of `lines` whose b0 reads bw_out_allowance_exceeded at
/// 10-35% of its wire packets: judged near the 20% a counter test's own
/// writer counts.
pub fn b0_judged_near_20pct(lines: &str) -> usize {
    interface_analyses(lines, "b0")
        .iter()
        .filter_map(|v| v["rates"]["bw_out_pct"].as_f64())
        .filter(|p| (10.0..=35.0).contains(p))
        .count()
}

/// The analysis of interface `iface` in each `watch --json` line, in order.
pub fn interface_analyses(lines: &str, iface: &str) -> Vec<serde_json::Value> {
    lines
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            v["analysis"]["interfaces"]
                .as_array()?
                .iter()
                .find(|i| i["iface"] == iface)
                .cloned()
        })
        .collect()
}

/// `watch --json` output parsed back: each line's snapshot and analysis.
pub fn watch_lines(
    stdout: &[u8],
) -> Vec<(
    throttlescope::model::snapshot::Snapshot,
    throttlescope::analysis::IntervalAnalysis,
)> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("JSON line");
            (
                serde_json::from_value(v.clone()).expect("snapshot fields"),
                serde_json::from_value(v["analysis"].clone()).expect("analysis"),
            )
        })
        .collect()
}

/// `dev`'s (received, transmitted) bytes, from the calling thread's
/// network namespace.
pub fn link_bytes_of(dev: &str) -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    let prefix = format!("{dev}:");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&prefix))
        .unwrap_or_else(|| panic!("{dev} in /proc/thread-self/net/dev"));
    // face: rx bytes packets errs drop fifo frame compressed multicast | tx bytes ...
    let fields: Vec<&str> = line.split(':').nth(1).unwrap().split_whitespace().collect();
    (fields[0].parse().unwrap(), fields[8].parse().unwrap())
}

/// `dev`'s transmitted bytes, from the calling thread's network namespace.
pub fn tx_bytes_of(dev: &str) -> u64 {
    link_bytes_of(dev).1
}

/// Plays the ENA device: writes `ethtool -S` text with `bw_out` as
/// bw_out_allowance_exceeded (the other allowance counters 0) to `path`,
/// whole (a rename), optionally with one line no parser can read
/// (`tx_timeout: n/a`).
pub fn write_ena_counters(path: &Path, bw_out: u64, malformed_line: bool) {
    let odd = if malformed_line {
        "     tx_timeout: n/a\n"
    } else {
        ""
    };
    let text = format!(
        "NIC statistics:\n{odd}     bw_in_allowance_exceeded: 0\n     \
         bw_out_allowance_exceeded: {bw_out}\n     pps_allowance_exceeded: 0\n     \
         conntrack_allowance_exceeded: 0\n     linklocal_allowance_exceeded: 0\n     \
         conntrack_allowance_available: 100000\n"
    );
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
