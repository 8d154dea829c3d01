//! A connection storm loses nothing a review needs (issue #30): in the
//! lab's broker namespace, twice, 50,000 connections are opened as fast as
//! they connect, each writes 100 bytes, and all are closed at once, while
//! `record` watches with 1 s intervals. Before, the ring buffer was read
//! once per interval: 2,382 of 36,000 closes arrived (their flows' last
//! counters with them), and intervals of 70 MB were written that `report`
//! then skipped. Checked here:
//!
//! - no close record lost (`closes_lost` 0), and the closes reported, one
//!   by one or folded, are one per run of `tcp_destroy_sock` on a tracked
//!   socket; it ran for every connection nstat counts as opened less the
//!   sockets still closing when the recording stopped, its runs the kernel
//!   skipped, and the closes it did not run for that the sweep counted
//!   (`moved_set_gone`); runs of other programs are no slack (issue #42);
//! - the flows' retransmits summed over every interval, listed and folded,
//!   equal nstat's TcpRetransSegs over the same time (the storm's SYNs
//!   retransmitted when the listeners' queues overflow), give or take the
//!   skipped runs of the programs that carry that figure
//!   (`tcp_retransmit_skb`, which marks the flow for the next reading, and
//!   `tcp_destroy_sock`, its last reading) and the sockets still closing;
//! - every interval is read back (no line too long, none skipped), and the
//!   intervals of the storm were folded to the listing limit;
//! - `report` (text and `--json`) reads every interval and says what the
//!   intervals hold: the folded flows, the health counters (the closes
//!   missed too), each
//!   interface's retransmits with the folded flows';
//! - peak RSS after each storm within the bound docs/performance.md
//!   ("Storms") states.
//!
//! And `watch --json` through one storm: every line within the readers'
//! limit, the analysis attributing only flows the line lists (their shares
//! of all the bytes, folded ones too), the same closes and retransmits.
//!
//! The load generator is tools/bench/scale_conns.c (`storm`), compiled here.
//! Run as root.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::lab_support::Lab;
use crate::support::report::{report, report_json};
use crate::support::TempDir;
use crate::support::{binary, repo_root, run};
use serde_json::Value;
use throttlescope::model::fold::DEFAULT_LISTED_FLOWS;
use throttlescope::model::snapshot::{Health, ProgramHealth, Snapshot};

const SOCKETS: u64 = 50_000;
const CYCLES: u64 = 2;
/// Storm workers (and listeners): scale_conns gives each at most 15,000.
const WORKERS: u16 = 4;
const PORT: u16 = 7600;
/// Peak RSS (VmHWM) of the observer through the storms, at most: the
/// bound docs/performance.md ("Storms") states.
const PEAK_RSS_KIB: u64 = 256 << 10;
/// The longest line a reader takes (`record::MAX_LINE_BYTES`).
const MAX_LINE_BYTES: usize = 64 << 20;
/// The programs that carry a flow's retransmits to user space
/// (src/collect/probes/flows.rs).
const RETRANSMIT_PROGRAMS: &[&str] = &["tcp_retransmit_skb", "tcp_destroy_sock"];

/// Processes this test started, killed and reaped however it ends.
struct Children(Vec<Child>);

impl Drop for Children {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn compile_scale_conns(dir: &Path) -> PathBuf {
    let out = dir.join("scale_conns");
    run(Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&out)
        .arg(repo_root().join("tools/bench/scale_conns.c")));
    out
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Until the observer's output `file` has two lines (a recording's header
/// and first interval; two of watch's intervals): its programs are
/// attached, and what the storm opens is seen from its start. A fixed 3 s
/// is short of a debug build's attach on a loaded machine.
fn wait_until_attached(file: &Path) {
    let start = std::time::Instant::now();
    loop {
        let lines = std::fs::read(file)
            .map(|t| t.iter().filter(|b| **b == b'\n').count())
            .unwrap_or(0);
        if lines >= 2 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the observer wrote no interval to {} within a minute",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Until the recording's last two intervals are small ones (the storm's
/// are megabytes), for at most a minute.
fn wait_until_caught_up(trace: &Path) {
    for _ in 0..120 {
        let text = std::fs::read(trace).unwrap();
        let lines: Vec<&[u8]> = text
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        if lines.len() > 4 && lines[lines.len() - 2..].iter().all(|l| l.len() < 200_000) {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("the recorder did not catch up with the storm within a minute");
}

/// The lab with the storm's listeners up in the client namespace, and the
/// sysctls a storm needs on both sides.
struct StormLab {
    lab: Lab,
    dir: TempDir,
    storm: PathBuf,
    children: Children,
}

impl StormLab {
    fn up(tag: &str) -> StormLab {
        let lab = Lab::up(tag);
        let dir = TempDir::new(tag);
        let storm = compile_scale_conns(&dir.0);
        // The broker opens the connections (the observed side): ports for
        // 50,000 at once, and TIME_WAIT ports reused by the second storm.
        // The client listens: queues deep enough for a storm's connects.
        lab.exec(
            &lab.broker(),
            "sysctl",
            &[
                "-qw",
                "net.ipv4.ip_local_port_range=1024 65535",
                "net.ipv4.tcp_tw_reuse=1",
            ],
        );
        lab.exec(
            &lab.client(),
            "sysctl",
            &[
                "-qw",
                "net.core.somaxconn=65535",
                "net.ipv4.tcp_max_syn_backlog=65535",
            ],
        );
        let mut children = Children(Vec::new());
        for w in 0..WORKERS {
            children.0.push(
                Command::new("ip")
                    .args(["netns", "exec", &lab.client()])
                    .arg(&storm)
                    .args(["server", &(PORT + w).to_string()])
                    .stdout(Stdio::null())
                    .spawn()
                    .unwrap(),
            );
        }
        StormLab {
            lab,
            dir,
            storm,
            children,
        }
    }

    /// Starts the observer (`throttlescope ARGS` in the broker namespace,
    /// stdout to `stdout` when given); its pid.
    fn observe(&mut self, args: &[&str], stdout: Option<&Path>) -> u32 {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.lab.broker()])
            .arg(binary())
            .args(args);
        if let Some(path) = stdout {
            cmd.stdout(std::fs::File::create(path).unwrap());
        }
        self.children.0.push(cmd.spawn().unwrap());
        self.children.0.last().unwrap().id()
    }

    /// `cycles` storms, the observer `pid` watching (writing `file`) from
    /// its second line on; what the kernel counted meanwhile, and the
    /// observer's (peak RSS, RSS) after each.
    fn storms(&self, cycles: u64, pid: u32, file: &Path) -> Counted {
        let lab = &self.lab;
        wait_until_attached(file);
        let opens0 = lab.nstat(&lab.broker(), "TcpActiveOpens");
        let retrans0 = lab.nstat(&lab.broker(), "TcpRetransSegs");
        let mut rss = Vec::new();
        for cycle in 0..cycles {
            let out = lab.exec(
                &lab.broker(),
                self.storm.to_str().unwrap(),
                &[
                    "storm",
                    &lab.client_ip,
                    &PORT.to_string(),
                    &SOCKETS.to_string(),
                    "1",
                    "0",
                ],
            );
            eprintln!("storm {cycle}: {}", out.trim().replace('\n', " "));
            // Past the next interval and its write.
            std::thread::sleep(Duration::from_secs(3));
            rss.push((status_kib(pid, "VmHWM:"), status_kib(pid, "VmRSS:")));
        }
        let opens = lab.nstat(&lab.broker(), "TcpActiveOpens") - opens0;
        let retrans = lab.nstat(&lab.broker(), "TcpRetransSegs") - retrans0;
        // Sockets still closing (FIN_WAIT, LAST_ACK) when the observer
        // stops have not closed yet: not a lost close.
        let still_closing = lab
            .exec(
                &lab.broker(),
                "ss",
                &[
                    "-Htan",
                    "state",
                    "established",
                    "state",
                    "syn-sent",
                    "state",
                    "fin-wait-1",
                    "state",
                    "fin-wait-2",
                    "state",
                    "close-wait",
                    "state",
                    "last-ack",
                    "state",
                    "closing",
                ],
            )
            .lines()
            .count() as u64;
        assert_eq!(
            opens,
            SOCKETS * cycles,
            "the storm did not open every connection"
        );
        Counted {
            opens,
            retrans,
            still_closing,
            rss,
        }
    }

    /// Stops the observer `pid` once its output `file` caught up: SIGTERM,
    /// and it must exit cleanly. Returns its peak RSS (VmHWM, KiB) as it
    /// caught up: the storms' intervals all done with.
    fn stop(&mut self, pid: u32, file: &Path) -> u64 {
        // The storm's intervals take the observer a while (a debug build
        // most of all); a stop must not land in one, whose grace is 1 s.
        wait_until_caught_up(file);
        let peak = status_kib(pid, "VmHWM:");
        let rc = unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        assert_eq!(rc, 0);
        let i = self.children.0.iter().position(|c| c.id() == pid).unwrap();
        let status = self.children.0.remove(i).wait().unwrap();
        assert!(status.success(), "the observer exited {status}");
        peak
    }
}

/// What the kernel counted in the broker namespace through the storms.
struct Counted {
    opens: u64,
    retrans: u64,
    still_closing: u64,
    /// The observer's (VmHWM, VmRSS) after each storm, KiB.
    rss: Vec<(u64, u64)>,
}

impl Counted {
    /// Peak RSS within the documented bound, after each storm and at the
    /// end (`final_peak`: 3 s after a storm a debug build may still be in
    /// its interval, short of its peak). RSS after a storm is only printed.
    fn check_memory(&self, what: &str, final_peak: u64) {
        eprintln!(
            "{what}: peak RSS / RSS after each storm (KiB): {:?}; peak RSS once caught up {final_peak}",
            self.rss
        );
        for peak in self.rss.iter().map(|(p, _)| p).chain([&final_peak]) {
            assert!(
                *peak <= PEAK_RSS_KIB,
                "{what}: peak RSS {peak} KiB, over the {PEAK_RSS_KIB} KiB bound"
            );
        }
    }
}

/// One program's health: a program missing from it, or not attached, is
/// an error (a renamed program must not make a slack 0 unnoticed, nor
/// pass as one that ran).
fn program<'a>(h: &'a Health, name: &str) -> &'a ProgramHealth {
    let p = h
        .programs
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no program {name} in health: {:?}", h.programs));
    assert!(p.attached, "{name} not attached: {p:?}");
    p
}

/// Runs the kernel skipped of `programs`, from health.
fn missed(h: &Health, programs: &[&str]) -> u64 {
    programs.iter().map(|name| program(h, name).missed).sum()
}

/// Closes and retransmits summed over `snaps` (listed and folded)
/// against what the kernel counted; the flows listed within the limit and
/// the storm's intervals folded. Returns (closes, retransmits) reported.
fn check_figures(what: &str, snaps: &[Snapshot], k: &Counted) -> (u64, u64) {
    let last = &snaps.last().unwrap().health;
    assert_eq!(last.closes_lost, 0, "{what}: {last:?}");
    let mut closed = 0u64;
    let mut retrans_seen = 0u64;
    let mut folded_intervals = 0;
    for s in snaps {
        assert!(
            s.flows.len() <= DEFAULT_LISTED_FLOWS,
            "{what}: seq {}: {} flows listed",
            s.seq,
            s.flows.len()
        );
        closed += s.flows.iter().filter(|f| f.closed).count() as u64;
        retrans_seen += s.flows.iter().map(|f| f.delta.retrans_segs).sum::<u64>();
        for g in &s.folded.flows {
            closed += g.closed;
            retrans_seen += g.delta.retrans_segs;
        }
        folded_intervals += !s.folded.flows.is_empty() as u32;
    }
    let destroy = program(last, "tcp_destroy_sock");
    let retrans_slack = missed(last, RETRANSMIT_PROGRAMS);
    // Sockets the kernel closed (opened less still closing) that the close
    // program did not run for, no skipped run counted either.
    let unseen = k
        .opens
        .saturating_sub(k.still_closing + destroy.events + destroy.missed);
    eprintln!(
        "{what}: opened {} (nstat), closed {closed} reported, {} still closing, {} deferred; \
         tcp_destroy_sock ran {} times, skipped {}, {unseen} closes unseen, \
         {} counted missed (moved set gone); \
         retransmits {retrans_seen} (ours) / {} (nstat), {retrans_slack} runs skipped; \
         {folded_intervals} intervals folded; (program, missed, events) {:?}",
        k.opens,
        k.still_closing,
        last.closes_deferred,
        destroy.events,
        destroy.missed,
        last.moved_set_gone,
        k.retrans,
        last.programs
            .iter()
            .map(|p| (&p.name, p.missed, p.events))
            .collect::<Vec<_>>()
    );
    assert!(
        folded_intervals >= 1,
        "{what}: no interval of the storm was folded"
    );
    // Every close the close program ran for reached user space and the
    // output: one per run on a tracked socket (the runs on sockets never
    // tracked send none; a record lost would be in closes_lost).
    assert!(
        closed <= destroy.events,
        "{what}: {closed} closes reported, {} runs of tcp_destroy_sock",
        destroy.events
    );
    assert!(
        destroy.events - closed <= last.untracked_flows + last.closes_lost,
        "{what}: tcp_destroy_sock ran {} times, {closed} closes reported, untracked {}",
        destroy.events,
        last.untracked_flows
    );
    // And it ran for every socket closed, less the runs the kernel skipped
    // (a program re-entered on its CPU: counted as missed) and those it
    // did not make, counted when the moved set's sweep finds the socket
    // gone with no close record (`moved_set_gone`): 0 to 690 a storm here,
    // while `perf stat` counted every tcp_destroy_sock event and the
    // program's own run count (kernel.bpf_stats_enabled) fell short of it
    // by as many, none counted as missed. Runs of other programs are no
    // slack: inet_sock_set_state's skipped runs (~1,000 a storm) cost no
    // close record, since tcp_destroy_sock sends it whatever created the
    // flow's storage.
    assert!(
        unseen <= last.moved_set_gone,
        "{what}: {unseen} of {} closes neither seen by tcp_destroy_sock nor counted as \
         its skipped runs ({}) or as missed closes ({}); {} still closing",
        k.opens,
        destroy.missed,
        last.moved_set_gone,
        k.still_closing
    );
    // A flow's retransmits are read from its socket (total_retrans) at each
    // dump that finds it moved (a tcp_retransmit_skb run marks it) and in
    // its close record (tcp_destroy_sock); a socket still closing at the
    // stop may retransmit after nstat was read.
    assert!(
        retrans_seen.abs_diff(k.retrans) <= retrans_slack + k.still_closing,
        "{what}: retransmits: ours {retrans_seen}, nstat {}, skipped runs {retrans_slack}, \
         still closing {}",
        k.retrans,
        k.still_closing
    );
    (closed, retrans_seen)
}

/// The recording through `report`, text and `--json`: every interval read,
/// and the figures the intervals hold.
fn check_report(trace: &Path, snaps: &[Snapshot]) {
    let path = trace.to_str().unwrap();
    let r: Value = report_json(&[path]);
    let h = &r["health"];
    assert_eq!(r["span"]["intervals"].as_u64(), Some(snaps.len() as u64));
    assert_eq!(h["read_warnings"], serde_json::json!([]), "{h}");
    let folded_flows: u64 = snaps
        .iter()
        .flat_map(|s| &s.folded.flows)
        .map(|g| g.flows)
        .sum();
    let folded_intervals = snaps.iter().filter(|s| !s.folded.flows.is_empty()).count() as u64;
    assert!(folded_flows > 0);
    assert_eq!(h["folded_flows"].as_u64(), Some(folded_flows), "{h}");
    assert_eq!(
        h["folded_intervals"].as_u64(),
        Some(folded_intervals),
        "{h}"
    );
    let last = &snaps.last().unwrap().health;
    assert_eq!(h["closes_lost"].as_u64(), Some(last.closes_lost));
    assert_eq!(h["closes_deferred"].as_u64(), Some(last.closes_deferred));
    assert_eq!(h["closes_missed"].as_u64(), Some(last.moved_set_gone));
    assert_eq!(h["ringbuf_drops"].as_u64(), Some(last.ringbuf_drops));
    // Counted from zero: the recording's first interval is its seq 0.
    assert_eq!(snaps[0].seq, 0);
    for p in &last.programs {
        let got = &h["programs"][&p.name];
        assert_eq!(got["events"].as_u64(), Some(p.events), "{}: {got}", p.name);
        assert_eq!(got["missed"].as_u64(), Some(p.missed), "{}: {got}", p.name);
    }
    // Each interface's retransmits: its listed and folded flows', and
    // those of flows whose interface is not known (counted on every one).
    let ifaces = r["interfaces"].as_array().unwrap();
    assert!(!ifaces.is_empty());
    for i in ifaces {
        let name = i["name"].as_str().unwrap();
        let on = |iface: &Option<String>| iface.as_deref().is_none_or(|n| n == name);
        let expected: u64 = snaps
            .iter()
            .map(|s| {
                s.flows
                    .iter()
                    .filter(|f| on(&f.iface))
                    .map(|f| f.delta.retrans_segs)
                    .sum::<u64>()
                    + s.folded
                        .flows
                        .iter()
                        .filter(|g| on(&g.iface))
                        .map(|g| g.delta.retrans_segs)
                        .sum::<u64>()
            })
            .sum();
        eprintln!(
            "report: {name} retransmits {}, expected {expected}",
            i["retrans_segs"]
        );
        assert_eq!(i["retrans_segs"].as_u64(), Some(expected), "{name}");
    }

    let (code, text, stderr) = report(&[path]);
    assert_eq!(code, 0, "report failed: {stderr}");
    for expected in [
        format!(
            "closes lost {} (late {}), closes missed {}",
            last.closes_lost, last.closes_deferred, last.moved_set_gone
        ),
        format!("{folded_flows} flows in {folded_intervals} intervals past --list-flows"),
    ]
    .iter()
    .chain(
        last.programs
            .iter()
            .map(|p| {
                // A program the kernel refused (dump_flows where a BPF LSM
                // policy refuses map iterators) is said to be, with why.
                if p.attached {
                    format!("{} {} events, {} missed", p.name, p.events, p.missed)
                } else {
                    format!("{} NOT attached", p.name)
                }
            })
            .collect::<Vec<_>>()
            .iter(),
    ) {
        assert!(
            text.contains(expected.as_str()),
            "report text lacks {expected:?}:\n{text}"
        );
    }
    assert!(!text.contains("skipped"), "{text}");
}

#[test]
fn a_storm_of_50000_connections_loses_no_close_and_every_interval_reads_back() {
    let _gate = crate::lab_support::gate::alone("a storm of connections fills the machine");
    let mut storm = StormLab::up("storm");
    let trace = storm.dir.join("storm.jsonl");
    let recorder = storm.observe(
        &[
            "record",
            "-q",
            "--no-host-queue",
            "--interval",
            "1s",
            "-o",
            trace.to_str().unwrap(),
        ],
        None,
    );
    let counted = storm.storms(CYCLES, recorder, &trace);
    // SIGTERM: the recorder stops cleanly and writes its end record.
    let peak = storm.stop(recorder, &trace);
    counted.check_memory("record", peak);

    // Every interval reads back, none skipped.
    let mut reader = throttlescope::record::open(&trace).unwrap();
    let snaps: Vec<_> = reader
        .by_ref()
        .map(|s| s.expect("an interval that reads back"))
        .collect();
    let summary = reader.summary();
    assert_eq!(summary.skipped_lines, 0, "{summary:?}");
    assert!(summary.end.is_some(), "no end record: {summary:?}");
    let longest = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(str::len)
        .max()
        .unwrap();
    eprintln!("{} intervals, longest line {longest} bytes", snaps.len());
    check_figures("record", &snaps, &counted);
    check_report(&trace, &snaps);
}

/// `watch --json` through a storm: each line within the readers' limit,
/// its analysis attributing the flows the line lists and no other, each
/// one's share of all the interval's bytes (the folded flows' too); the
/// closes and retransmits as the recording's.
#[test]
fn watch_json_through_a_storm_stays_within_the_line_limit() {
    let _gate = crate::lab_support::gate::alone("a storm of connections fills the machine");
    let mut storm = StormLab::up("stormjson");
    let out = storm.dir.join("watch.jsonl");
    let watch = storm.observe(
        &["watch", "--json", "--no-host-queue", "--interval", "1s"],
        Some(&out),
    );
    let counted = storm.storms(1, watch, &out);
    let peak = storm.stop(watch, &out);
    counted.check_memory("watch --json", peak);

    let text = std::fs::read_to_string(&out).unwrap();
    let mut snaps = Vec::new();
    let mut attributed_intervals = 0;
    for line in text.lines() {
        assert!(
            line.len() < MAX_LINE_BYTES,
            "a line of {} bytes",
            line.len()
        );
        let v: Value = serde_json::from_str(line).unwrap();
        let snap: Snapshot = serde_json::from_str(line).unwrap();
        let listed: HashSet<u64> = snap.flows.iter().map(|f| f.id).collect();
        let attributions = v["analysis"]["flows"].as_array().unwrap();
        assert!(
            attributions.len() <= listed.len(),
            "seq {}: {} attributions, {} flows listed",
            snap.seq,
            attributions.len(),
            listed.len()
        );
        let mut shares = 0.0;
        for a in attributions {
            let id = a["flow_id"].as_u64().unwrap();
            assert!(
                listed.contains(&id),
                "seq {}: flow {id} is not listed",
                snap.seq
            );
            shares += a["bytes_share_pct"].as_f64().unwrap();
        }
        let listed_sent: u64 = snap.flows.iter().map(|f| f.delta.bytes_sent).sum();
        let folded_sent: u64 = snap.folded.flows.iter().map(|g| g.delta.bytes_sent).sum();
        if listed_sent + folded_sent > 0 {
            let expected = listed_sent as f64 / (listed_sent + folded_sent) as f64 * 100.0;
            assert!(
                (shares - expected).abs() < 1e-6 * 100.0,
                "seq {}: the shares sum to {shares}%, the listed flows sent {expected}%",
                snap.seq
            );
        }
        attributed_intervals += (!attributions.is_empty() && !snap.folded.flows.is_empty()) as u32;
        snaps.push(snap);
    }
    assert!(
        attributed_intervals >= 1,
        "no folded interval attributed its flows"
    );
    let longest = text.lines().map(str::len).max().unwrap();
    eprintln!("{} lines, longest {longest} bytes", snaps.len());
    check_figures("watch --json", &snaps, &counted);
}
