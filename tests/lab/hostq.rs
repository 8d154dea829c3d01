//! Host-queue probes against real qdiscs: two namespaces joined by a veth,
//! a TBF on the sender's side, iperf3 through it, and the probes attached
//! in the sender's namespace. Ground truth is `tc -s -j qdisc`.
//!
//! Needs root (BPF, netns). Every namespace is made here under a unique
//! name and removed on drop, also when an assertion fails.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use throttlescope::collect::ifindex::IfIndexNames;
use throttlescope::collect::probes::flows::NetnsFilter;
use throttlescope::collect::probes::hostq::{HostQueueProbes, Parts};
use throttlescope::model::snapshot::{HostQueueSample, ProgramHealth};

const SENDER_IF: &str = "hqa";
const RECEIVER_IF: &str = "hqb";
const SENDER_IP: &str = "10.201.0.1";
const RECEIVER_IP: &str = "10.201.0.2";
/// On the pair's subnet, held by no one.
const NOBODY_IP: &str = "10.201.0.9";
/// Why these tests run with no other lab test beside them.
const ALONE: &str = "it holds every packet and drop of a qdisc to tc's counts, which a second lab's traffic would make harder to trust";
/// `--peak-window`'s default (10 ms): the default setup, in which on_dev_xmit
/// also does on_qdisc_dequeue's work where the kernel allows it.
const DEFAULT_PEAK_WINDOW_US: u64 = 10_000;

fn run(args: &[&str]) -> String {
    let out = crate::support::run(Command::new(args[0]).args(&args[1..]));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A sender and a receiver namespace joined by a veth; removed on drop.
struct Pair {
    sender: String,
    receiver: String,
    iperf_server: Option<Child>,
}

impl Pair {
    fn new() -> Pair {
        Pair::with_queues(1)
    }

    /// A pair whose veth has `queues` transmit and receive queues.
    fn with_queues(queues: usize) -> Pair {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!(
            "{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let pair = Pair {
            sender: format!("hqtest_s{id}"),
            receiver: format!("hqtest_r{id}"),
            iperf_server: None,
        };
        for ns in [&pair.sender, &pair.receiver] {
            run(&["ip", "netns", "add", ns]);
            // No IPv6 autoconfiguration chatter through the qdisc.
            run(&[
                "ip",
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
            run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        }
        let queues = queues.to_string();
        run(&[
            "ip",
            "-n",
            &pair.sender,
            "link",
            "add",
            SENDER_IF,
            "numtxqueues",
            &queues,
            "numrxqueues",
            &queues,
            "type",
            "veth",
            "peer",
            "name",
            RECEIVER_IF,
            "numtxqueues",
            &queues,
            "numrxqueues",
            &queues,
            "netns",
            &pair.receiver,
        ]);
        for (ns, dev, ip) in [
            (&pair.sender, SENDER_IF, SENDER_IP),
            (&pair.receiver, RECEIVER_IF, RECEIVER_IP),
        ] {
            run(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                dev,
            ]);
            run(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        pair
    }

    fn in_sender(&self, args: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", &self.sender];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Waits (at most 15 s) until the sender is done sending after its
    /// client exited: no socket with bytes unacknowledged or a FIN not yet
    /// acknowledged, and the root qdisc empty, its sent count unchanged over
    /// two reads 200 ms apart. A fixed 500 ms could end while a socket of a
    /// lossy queue still retransmitted, backed off by timeouts, and a packet
    /// passing between tc's read and the probes' breaks their equality.
    fn wait_sender_done(&self) {
        let start = Instant::now();
        let mut last = self.tc_root();
        let mut still = 0;
        while still < 2 {
            std::thread::sleep(Duration::from_millis(200));
            let closing = self.in_sender(&[
                "ss",
                "-Htan",
                "state",
                "fin-wait-1",
                "state",
                "closing",
                "state",
                "last-ack",
            ]);
            let unacked = self
                .in_sender(&["ss", "-Htn"])
                .lines()
                .filter(|l| {
                    l.split_whitespace()
                        .nth(2)
                        .is_some_and(|q| q.parse::<u64>().is_ok_and(|q| q > 0))
                })
                .count();
            let now = self.tc_root();
            let quiet = closing.trim().is_empty()
                && unacked == 0
                && now.qlen == 0
                && now.packets == last.packets;
            still = if quiet { still + 1 } else { 0 };
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "the sender still sending 15 s after its client exited: {now:?}, \
                 {unacked} sockets with bytes unacknowledged, closing: {closing}"
            );
            last = now;
        }
    }

    /// Three datagrams through the sender's qdisc, 50 ms apart, after the
    /// drain: fresh qdisc events, so that the qdisc's own counters are
    /// noted after the last drop and send (hostq.h: they are read at the
    /// latest event the programs ran for, and the kernel skips some).
    fn nudge_qdisc(&self) {
        let send = format!(
            "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
             for _ in range(3):\n    s.sendto(b'x',('{RECEIVER_IP}',9)); time.sleep(0.05)"
        );
        self.in_sender(&["python3", "-c", &send]);
    }

    fn set_offloads(&self, on: bool) {
        let v = if on { "on" } else { "off" };
        self.in_sender(&["ethtool", "-K", SENDER_IF, "tso", v, "gso", v, "gro", v]);
    }

    /// Root TBF on the sender's veth, e.g. "rate 50mbit burst 16kb limit 30kb".
    fn tbf(&self, params: &str) {
        let mut args = vec!["tc", "qdisc", "add", "dev", SENDER_IF, "root", "tbf"];
        args.extend(params.split_whitespace());
        self.in_sender(&args);
    }

    /// Sent packets, drops and backlog of the root qdisc, as tc says.
    fn tc_root(&self) -> TcStats {
        let json = self.in_sender(&["tc", "-s", "-j", "qdisc", "show", "dev", SENDER_IF]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("tc -j output");
        let root = v
            .as_array()
            .and_then(|a| a.iter().find(|q| q["root"].as_bool() == Some(true)))
            .unwrap_or_else(|| panic!("no root qdisc in {json}"));
        TcStats {
            packets: root["packets"].as_u64().expect("packets"),
            drops: root["drops"].as_u64().expect("drops"),
            qlen: root["qlen"].as_u64().expect("qlen"),
            backlog: root["backlog"].as_u64().expect("backlog"),
        }
    }

    /// Starts a one-shot iperf3 server in the receiver namespace.
    fn start_server(&mut self) {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.receiver,
                "iperf3",
                "-s",
                "-1",
                "-B",
                RECEIVER_IP,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning iperf3 -s");
        self.iperf_server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ss = run(&[
                "ip",
                "netns",
                "exec",
                &self.receiver,
                "ss",
                "-Hltn",
                "sport",
                "=",
                ":5201",
            ]);
            if !ss.trim().is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "iperf3 server did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// iperf3 client from the sender for `secs` seconds (sender -> receiver).
    fn run_client(&mut self, secs: u32) {
        self.in_sender(&["iperf3", "-c", RECEIVER_IP, "-t", &secs.to_string()]);
        if let Some(mut c) = self.iperf_server.take() {
            let _ = c.wait();
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if let Some(mut c) = self.iperf_server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for ns in [&self.sender, &self.receiver] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct TcStats {
    packets: u64,
    drops: u64,
    /// Backlog now (packets, bytes): in a window, at its end.
    qlen: u64,
    backlog: u64,
}

/// Moves the calling thread into a named namespace; returns its inode.
fn enter_netns(name: &str) -> u32 {
    use std::os::unix::fs::MetadataExt;
    crate::lab_support::enter_netns(&std::path::Path::new("/run/netns").join(name));
    std::fs::metadata("/proc/thread-self/ns/net").unwrap().ino() as u32
}

/// Kernel run-time statistics on while held (BPF_ENABLE_STATS; refcounted
/// by the kernel, so concurrent tests do not switch each other off).
fn enable_bpf_stats() -> OwnedFd {
    // SAFETY: plain syscall wrapper; the returned fd is ours.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    assert!(fd >= 0, "BPF_ENABLE_STATS failed: {fd}");
    // SAFETY: fd is a fresh, owned file descriptor.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The probes may not count more than tc (beyond packets at the window's
/// edges): more would mean events of other namespaces leaked in. They count
/// events, and the kernel does not run a tracepoint's programs for every hit:
/// measured on 29 November 2026, perf's count of the same tracepoints
/// matched tc while two independent copies of the programs both ran fewer
/// times, alike, with no recursion miss reported (docs/architecture.md,
/// "Host queue"). Hence the looser lower bound on event counts.
fn close(probes: u64, tc: u64, what: &str) {
    close_within(probes, tc, 5, what);
}

/// The interface's qdisc figures as the sample holds them: the qdisc's own
/// counters equal tc's sent packets and dropped exactly (read at the last
/// event, after the drain); the event counts are within [`close`] of them,
/// and the drops counted as local (drop events plus the ones found unseen)
/// add up to the qdisc's count. Drop events alone (QDISC_DROP) fell short by
/// up to 10% in bursts the kernel ran no program for; the sample's
/// `unseen_drops` holds those, so none are lost.
fn assert_qdisc_counts(s: &HostQueueSample, tc: &TcStats, label: &str) {
    let events = s.drops.get("QDISC_DROP").copied().unwrap_or(0);
    eprintln!(
        "[{label}] tc sent {} dropped {}; qdisc counters sent {:?} dropped {:?}; \
         events dequeued {} QDISC_DROP {events}, unseen {}",
        tc.packets, tc.drops, s.qdisc_sent, s.qdisc_drops, s.dequeued, s.unseen_drops
    );
    assert_eq!(
        (s.qdisc_sent, s.qdisc_drops),
        (Some(tc.packets), Some(tc.drops)),
        "{label}: the qdisc's own counters (sent, dropped) vs tc's"
    );
    close(s.dequeued, tc.packets, "dequeued packets vs tc sent");
    assert_eq!(
        events + s.unseen_drops,
        events.max(tc.drops),
        "{label}: drop events and unseen drops add up to the qdisc's count"
    );
    close(
        events + s.unseen_drops,
        tc.drops,
        "QDISC_DROP + unseen vs tc dropped",
    );
}

fn close_within(probes: u64, tc: u64, under_pct: u64, what: &str) {
    let edge = 20;
    let under = edge.max(tc * under_pct / 100);
    assert!(
        probes <= tc + edge && probes + under >= tc,
        "{what}: probes {probes} vs tc {tc} (allowed: {under} under, {edge} over)"
    );
}

fn report_cost(probes: &HostQueueProbes, label: &str) {
    for p in probes.program_health() {
        let per = p.run_time_ns.checked_div(p.run_cnt).unwrap_or(0);
        eprintln!(
            "[{label}] {}: events {} run_cnt {} run_time_ns {} => {} ns/run, missed {}",
            p.name, p.events, p.run_cnt, p.run_time_ns, per, p.missed
        );
    }
    eprintln!("[{label}] health {:?}", probes.health());
}

/// One measured window: probes and tc read before and after the traffic.
struct Window {
    sample: HashMap<String, HostQueueSample>,
    tc: TcStats,
    programs: Vec<ProgramHealth>,
}

impl Window {
    fn sender(&self) -> &HostQueueSample {
        self.sample
            .get(SENDER_IF)
            .unwrap_or_else(|| panic!("no sample for {SENDER_IF}: {:?}", self.sample))
    }
}

/// In a thread that entered the pair's sender namespace: attach the probes
/// (observing that namespace only), run iperf3 for `secs`, read the probes
/// and tc over the same window. `noise` runs meanwhile in other namespaces.
/// `at_xmit`: the dequeue side counted at the driver's transmit
/// (`Parts::dequeue_at_xmit`, the default), where the kernel allows.
fn measure(
    pair: &mut Pair,
    secs: u32,
    peak_window_us: u64,
    at_xmit: bool,
    label: &str,
    noise: Option<&mut Pair>,
) -> Window {
    pair.start_server();
    std::thread::scope(|s| {
        let noise_thread = noise.map(|n| {
            n.start_server();
            s.spawn(move || n.run_client(secs + 1))
        });
        let window = s
            .spawn(|| {
                let ino = enter_netns(&pair.sender);
                let _stats = enable_bpf_stats();
                let parts = Parts {
                    host_queue: true,
                    dequeue_at_xmit: at_xmit,
                    ..Parts::default()
                };
                let mut probes =
                    HostQueueProbes::attach_parts(NetnsFilter::Only(ino), peak_window_us, parts)
                        .expect("attach");
                let mut names = IfIndexNames::new().expect("a socket for interface names");
                probes.read(&mut names, 1).expect("baseline read");
                let before = pair.tc_root();
                pair.run_client(secs);
                pair.wait_sender_done();
                pair.nudge_qdisc();
                let after = pair.tc_root();
                let sample = probes.read(&mut names, 2).expect("read");
                report_cost(&probes, label);
                Window {
                    programs: probes.program_health(),
                    sample,
                    tc: TcStats {
                        packets: after.packets - before.packets,
                        drops: after.drops - before.drops,
                        qlen: after.qlen,
                        backlog: after.backlog,
                    },
                }
            })
            .join()
            .expect("measuring thread");
        if let Some(t) = noise_thread {
            t.join().expect("noise traffic");
        }
        window
    })
}

/// Whether the kernel has the bpf_rdonly_cast kfunc (6.2): then, with peak
/// rates on, the dequeue side is counted at the driver's transmit.
fn kernel_casts() -> bool {
    let btf = libbpf_rs::btf::Btf::from_vmlinux().expect("the kernel's BTF");
    btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>("bpf_rdonly_cast")
        .is_some()
}

/// Which program counted what left the qdisc (issue #47): in the default
/// setup (peak rates on) on a kernel with bpf_rdonly_cast, on_dev_xmit,
/// and on_qdisc_dequeue is not attached and never ran: a packet through the
/// qdisc passes two programs on transmit, not three. Otherwise
/// on_qdisc_dequeue, attached and running.
fn assert_dequeue_side(w: &Window, peak_window_us: u64, at_xmit: bool, label: &str) {
    let program = |name: &str| {
        w.programs
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{label}: no {name} in the program health"))
    };
    let dequeue = program("qdisc_dequeue");
    let xmit = program("dev_xmit");
    if at_xmit && peak_window_us != 0 && kernel_casts() {
        assert!(
            !dequeue.attached && dequeue.run_cnt == 0 && dequeue.not_attached.is_some(),
            "{label}: qdisc_dequeue should not be attached (dev_xmit does its work): {dequeue:?}"
        );
        assert!(
            xmit.attached && xmit.run_cnt > 0,
            "{label}: dev_xmit: {xmit:?}"
        );
    } else {
        assert!(
            dequeue.attached && dequeue.run_cnt > 0,
            "{label}: qdisc_dequeue: {dequeue:?}"
        );
    }
}

/// Every packet counted in is counted out, still queued, or (a segment of a
/// gso skb the TBF split, counted at enqueue) refused by the full queue.
fn assert_enqueue_balance(s: &HostQueueSample) {
    let qdisc_drops = s.drops.get("QDISC_DROP").copied().unwrap_or(0);
    let out = s.dequeued + s.backlog_packets;
    assert!(
        s.enqueued + 20 >= out && s.enqueued <= out + qdisc_drops + 20,
        "enqueued {} vs dequeued {} + backlog {} (+ up to {qdisc_drops} refused segments)",
        s.enqueued,
        s.dequeued,
        s.backlog_packets
    );
}

#[test]
fn qdisc_counts_backlog_and_drops_match_tc() {
    let _gate = crate::lab_support::gate::alone(ALONE);
    let mut pair = Pair::new();
    pair.set_offloads(true);
    pair.tbf("rate 50mbit burst 16kb limit 30kb");
    // Another pair, same interface names, a tiny queue that drops a lot:
    // none of it may show up in our counts.
    let mut noise = Pair::new();
    noise.tbf("rate 20mbit burst 8kb limit 6kb");

    // The dequeue side at the driver's transmit, the default from 6.2 with
    // peak rates on (on_qdisc_dequeue's path, as before 6.2 or with
    // --peak-window 0, is held to tc by tiny_limit_drops_without_offloads).
    let label = "tbf 50mbit limit 30kb, offloads on, dequeue at transmit";
    let w = measure(
        &mut pair,
        3,
        DEFAULT_PEAK_WINDOW_US,
        true,
        label,
        Some(&mut noise),
    );
    eprintln!("tc {:?}\nprobes {:#?}", w.tc, w.sample);
    assert_dequeue_side(&w, DEFAULT_PEAK_WINDOW_US, true, label);
    let s = w.sender();
    assert!(w.tc.packets > 10_000, "too little traffic: {:?}", w.tc);
    assert_qdisc_counts(s, &w.tc, label);
    assert_enqueue_balance(s);
    // The backlog is the one left by the latest event; events are stamped in
    // jiffies, and of CPUs tied within one the smallest backlog is taken
    // (docs/architecture.md, "Host queue"): after the drain, tc's.
    assert_eq!(
        (s.backlog_packets, s.backlog_bytes),
        (w.tc.qlen, w.tc.backlog),
        "backlog after the drain vs tc"
    );
    assert!(s.peak_backlog_packets > 0 && s.peak_backlog_bytes > 0);
    assert!(
        s.peak_backlog_bytes <= 30 * 1024,
        "peak backlog {} above the TBF limit",
        s.peak_backlog_bytes
    );
    // 30 KiB at 50 Mbit/s drains in ~5 ms: a packet cannot wait much longer.
    let mean = s.sojourn_mean_us.expect("sojourn measured");
    let max = s.sojourn_max_us.expect("sojourn max");
    assert!(
        mean > 0 && mean <= max && max < 20_000,
        "sojourn mean {mean} max {max} us"
    );
    // Only the sender namespace's interfaces (and socket-only drops).
    for name in w.sample.keys() {
        assert!(
            name == SENDER_IF || name == "lo" || name == "(no device)",
            "unexpected interface {name}"
        );
    }
}

#[test]
fn tiny_limit_drops_without_offloads() {
    let _gate = crate::lab_support::gate::alone(ALONE);
    let mut pair = Pair::new();
    pair.set_offloads(false);
    pair.tbf("rate 20mbit burst 8kb limit 6kb");
    // Peak rates off: on_qdisc_dequeue counts what leaves the qdisc, as on
    // a kernel before 6.2.
    let label = "tbf 20mbit limit 6kb, offloads off, --peak-window 0";
    let w = measure(&mut pair, 3, 0, false, label, None);
    eprintln!("tc {:?}\nprobes {:#?}", w.tc, w.sample);
    assert_dequeue_side(&w, 0, false, label);
    let s = w.sender();
    assert!(w.tc.drops > 50, "the tiny queue should drop: {:?}", w.tc);
    assert_qdisc_counts(s, &w.tc, label);
    // TCP hands the qdisc gso skbs even with offloads off (they are split
    // after the qdisc); the TBF splits those above its burst itself.
    assert_enqueue_balance(s);
    assert_eq!(
        (s.backlog_packets, s.backlog_bytes),
        (w.tc.qlen, w.tc.backlog),
        "backlog after the drain vs tc"
    );
    assert!(s.peak_backlog_bytes > 0 && s.peak_backlog_bytes <= 6 * 1024);
}

/// iperf3 from the pair's sender for `secs` seconds with `parallel` flows,
/// on a thread of its own (the caller reads the probes meanwhile).
fn iperf_client(
    pair: &Pair,
    secs: u32,
    parallel: u32,
) -> std::thread::JoinHandle<std::process::Output> {
    let sender = pair.sender.clone();
    let (secs, parallel) = (secs.to_string(), parallel.to_string());
    std::thread::spawn(move || {
        crate::support::run(Command::new("ip").args([
            "netns",
            "exec",
            &sender,
            "iperf3",
            "-c",
            RECEIVER_IP,
            "-t",
            &secs,
            "-P",
            &parallel,
        ]))
    })
}

/// A multi-queue device (an ENA interface has one qdisc per transmit queue
/// under mq): the interface's backlog is the sum of its queues', as `tc`
/// gives it for mq. Four queues, each with its own TBF, and 16 flows
/// spread over them by their hash. Each interval's peak (summed over the
/// queues) must hold every backlog tc saw during it; the largest queue's
/// peak alone, which is what one slot per interface gave, does not.
#[test]
fn a_multi_queue_backlog_is_the_sum_of_its_queues() {
    let _gate = crate::lab_support::gate::alone(ALONE);
    const QUEUES: usize = 4;
    const LIMIT: u64 = 100 * 1024;
    let mut pair = Pair::with_queues(QUEUES);
    pair.set_offloads(true);
    pair.in_sender(&[
        "tc", "qdisc", "add", "dev", SENDER_IF, "root", "handle", "1:", "mq",
    ]);
    for q in 1..=QUEUES {
        pair.in_sender(&[
            "tc",
            "qdisc",
            "replace",
            "dev",
            SENDER_IF,
            "parent",
            &format!("1:{q}"),
            "tbf",
            "rate",
            "20mbit",
            "burst",
            "16kb",
            "limit",
            &LIMIT.to_string(),
        ]);
    }
    pair.start_server();
    let (intervals, end, tc_end, children) = std::thread::scope(|s| {
        let pair = &pair;
        let measuring = s.spawn(move || {
            let ino = enter_netns(&pair.sender);
            let mut probes =
                HostQueueProbes::attach(NetnsFilter::Only(ino), DEFAULT_PEAK_WINDOW_US)
                    .expect("attach");
            let mut names = IfIndexNames::new().expect("a socket for interface names");
            probes.read(&mut names, 1).expect("baseline read");
            let client = iperf_client(pair, 7, 16);
            // Two seconds for the queues to fill, then four intervals: in
            // each, tc's backlog read a few times, then the probes.
            std::thread::sleep(Duration::from_secs(2));
            probes.read(&mut names, 2).expect("read");
            let mut intervals = Vec::new();
            for i in 0..4 {
                let mut tc_max = 0;
                for _ in 0..5 {
                    std::thread::sleep(Duration::from_millis(150));
                    tc_max = tc_max.max(pair.tc_root().backlog);
                }
                let sample = probes.read(&mut names, 3 + i).expect("read");
                let s = sample
                    .get(SENDER_IF)
                    .cloned()
                    .expect("a sample for the sender");
                intervals.push((tc_max, s));
            }
            client.join().expect("iperf3 client");
            pair.wait_sender_done();
            let tc_end = pair.tc_root();
            let end = probes.read(&mut names, 10).expect("read");
            let json = pair.in_sender(&["tc", "-s", "-j", "qdisc", "show", "dev", SENDER_IF]);
            (intervals, end, tc_end, json)
        });
        measuring.join().expect("measuring thread")
    });
    // Every queue must have carried traffic, or the test shows nothing.
    let v: serde_json::Value = serde_json::from_str(&children).expect("tc -j output");
    let busy = v
        .as_array()
        .expect("qdisc list")
        .iter()
        .filter(|q| q["kind"] == "tbf" && q["packets"].as_u64().unwrap_or(0) > 1000)
        .count();
    assert!(
        busy >= 2,
        "the flows used fewer than two queues: {children}"
    );
    let mut above_one_queue = 0;
    for (tc_max, s) in &intervals {
        eprintln!(
            "tc backlog max {tc_max} bytes; probes peak {} bytes, backlog {} bytes",
            s.peak_backlog_bytes, s.backlog_bytes
        );
        assert!(
            s.peak_backlog_bytes + 2 * 1514 >= *tc_max,
            "peak {} below a backlog tc saw in the interval ({tc_max})",
            s.peak_backlog_bytes
        );
        assert!(
            s.peak_backlog_bytes <= QUEUES as u64 * (LIMIT + 64 * 1024),
            "peak {} above what the queues hold",
            s.peak_backlog_bytes
        );
        if *tc_max > LIMIT + 64 * 1024 {
            above_one_queue += 1;
        }
    }
    assert!(
        above_one_queue > 0,
        "tc never saw more than one queue can hold, so the sum went untested: {intervals:?}"
    );
    let s = end.get(SENDER_IF).expect("a sample for the sender");
    assert_eq!(
        (s.backlog_packets, s.backlog_bytes),
        (tc_end.qlen, tc_end.backlog),
        "backlog after the drain vs tc"
    );
}

/// One root qdisc over a device's several transmit queues (a TBF on a veth,
/// which has one queue per CPU by default): the kernel traces its enqueue
/// with the queue each packet picked and its dequeue with the qdisc's own
/// queue (queue 0). All traffic is steered to queue 1 (XPS), so each
/// interval's packets enter on one queue and leave on another: the sojourn
/// is measured in every interval, and the backlog is the qdisc's once, not
/// once per queue (never above the interval's peak by more than the one skb
/// enqueued between the epoch's close and the read). The TBF's 32 KB burst
/// also splits every gso skb above it into new skbs: a sample on one is
/// given up once the queue has sent past it, not held for 10 s.
#[test]
fn a_root_qdisc_over_several_queues_is_one_queue() {
    let _gate = crate::lab_support::gate::alone(ALONE);
    const GSO_SKB: u64 = 64 * 1024 + 1514;
    let mut pair = Pair::with_queues(2);
    pair.set_offloads(true);
    // Every CPU sends on queue 1 (mask of all CPUs), none on queue 0.
    let cpus = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(32);
    let mask = format!("{:x}", (1u64 << cpus) - 1);
    pair.in_sender(&[
        "sh",
        "-c",
        &format!(
            "echo 0 > /sys/class/net/{SENDER_IF}/queues/tx-0/xps_cpus && \
             echo {mask} > /sys/class/net/{SENDER_IF}/queues/tx-1/xps_cpus"
        ),
    ]);
    // The steering holds: under mq, queue 1's child carries every packet.
    pair.in_sender(&[
        "tc", "qdisc", "add", "dev", SENDER_IF, "root", "handle", "1:", "mq",
    ]);
    pair.start_server();
    pair.run_client(1);
    let json = pair.in_sender(&["tc", "-s", "-j", "qdisc", "show", "dev", SENDER_IF]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("tc -j output");
    let sent = |parent: &str| {
        v.as_array()
            .expect("qdisc list")
            .iter()
            .find(|q| q["parent"] == parent)
            .and_then(|q| q["packets"].as_u64())
            .unwrap_or_else(|| panic!("no child at {parent}: {json}"))
    };
    assert!(
        sent("1:1") == 0 && sent("1:2") > 1000,
        "XPS did not steer every packet to queue 1: {json}"
    );
    pair.in_sender(&["tc", "qdisc", "del", "dev", SENDER_IF, "root"]);
    pair.tbf("rate 100mbit burst 32kb limit 4mb");

    pair.start_server();
    let intervals = std::thread::scope(|s| {
        let pair = &pair;
        s.spawn(move || {
            let ino = enter_netns(&pair.sender);
            let mut probes =
                HostQueueProbes::attach(NetnsFilter::Only(ino), DEFAULT_PEAK_WINDOW_US)
                    .expect("attach");
            let mut names = IfIndexNames::new().expect("a socket for interface names");
            probes.read(&mut names, 1).expect("baseline read");
            // 10 s: the four intervals below, each a second and a tc read,
            // well inside the traffic (6 s left one tc read's delay of
            // margin).
            let client = iperf_client(pair, 10, 4);
            // The queue built (above one skb), then four intervals.
            let built = Instant::now();
            while pair.tc_root().backlog <= GSO_SKB {
                assert!(
                    built.elapsed() < Duration::from_secs(10),
                    "the queue never stood above one skb"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            probes.read(&mut names, 2).expect("read");
            let mut intervals = Vec::new();
            for i in 0..4 {
                std::thread::sleep(Duration::from_secs(1));
                let tc = pair.tc_root();
                let sample = probes.read(&mut names, 3 + i).expect("read");
                let s = sample
                    .get(SENDER_IF)
                    .cloned()
                    .expect("a sample for the sender");
                intervals.push((tc, s));
            }
            eprintln!("health {:?}", probes.health());
            client.join().expect("iperf3 client");
            intervals
        })
        .join()
        .expect("measuring thread")
    });
    for (tc, s) in &intervals {
        eprintln!(
            "tc backlog {} bytes; probes backlog {} bytes, peak {} bytes, sojourn mean {:?} us",
            tc.backlog, s.backlog_bytes, s.peak_backlog_bytes, s.sojourn_mean_us
        );
    }
    assert!(
        intervals.iter().all(|(_, s)| s.sojourn_mean_us.is_some()),
        "an interval without a sojourn measured: {intervals:?}"
    );
    assert!(
        intervals.iter().any(|(tc, _)| tc.backlog > GSO_SKB),
        "the queue never stood above one skb, so the backlog went untested: {intervals:?}"
    );
    // A FIFO at 100 Mbit/s: a packet waits about the time tc's backlog takes
    // to drain (both averaged over the intervals; tc's read at their ends).
    let n = intervals.len() as f64;
    let drain_us = intervals
        .iter()
        .map(|(tc, _)| tc.backlog as f64 * 8.0 / 100.0)
        .sum::<f64>()
        / n;
    let sojourn_us = intervals
        .iter()
        .filter_map(|(_, s)| s.sojourn_mean_us)
        .sum::<u64>() as f64
        / n;
    eprintln!("sojourn {sojourn_us:.0} us, tc's backlog drains in {drain_us:.0} us");
    assert!(
        sojourn_us >= drain_us / 2.0 && sojourn_us <= drain_us * 2.0,
        "sojourn {sojourn_us:.0} us against tc's backlog's drain time {drain_us:.0} us"
    );
    for (_, s) in &intervals {
        assert!(
            s.backlog_bytes <= s.peak_backlog_bytes + GSO_SKB,
            "backlog {} above the interval's peak {}: counted once per queue",
            s.backlog_bytes,
            s.peak_backlog_bytes
        );
    }
}

/// The sender veth's transmit counters (packets, bytes), as `ip -s` gives them.
fn link_tx(pair: &Pair) -> (u64, u64) {
    let json = pair.in_sender(&["ip", "-s", "-j", "link", "show", "dev", SENDER_IF]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("ip -j output");
    let tx = &v[0]["stats64"]["tx"];
    (
        tx["packets"].as_u64().expect("tx packets"),
        tx["bytes"].as_u64().expect("tx bytes"),
    )
}

/// Peak rates count every frame handed to the driver, on both of the
/// programs' ways of adding: plain adds where the queue has a qdisc (its
/// skbs reach the driver from one CPU at a time; from 6.2) and atomic ones
/// where it has none (veth's default noqueue, a lockless device). A burst
/// of datagrams well inside one 1 s window, on a quiet interface (no IPv6,
/// a permanent neighbour entry: no ARP, and no replies), reads as exactly that burst: its
/// frames and bytes as the link's counters give them, and one transmit
/// event per frame, in the interval after the read it followed at once;
/// and a lone datagram after a quiet second reads as itself, not as the
/// burst's window.
#[test]
fn peak_windows_count_every_frame_with_and_without_a_qdisc() {
    let _gate = crate::lab_support::gate::alone(ALONE);
    const DATAGRAMS: u64 = 400;
    const PAYLOAD: usize = 100;
    for qdisc in [None, Some("pfifo limit 1000")] {
        let pair = Pair::new();
        if let Some(q) = qdisc {
            let mut args = vec!["tc", "qdisc", "add", "dev", SENDER_IF, "root"];
            args.extend(q.split_whitespace());
            pair.in_sender(&args);
        }
        // A neighbour no one has: the receiver drops the frames as for
        // another host, silently (a reply, even an ICMP error, would fail
        // the next write of a connected socket).
        pair.in_sender(&[
            "ip",
            "neigh",
            "replace",
            NOBODY_IP,
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            SENDER_IF,
            "nud",
            "permanent",
        ]);
        let label = qdisc.unwrap_or("noqueue");
        let (peak, events, sent, quiet, lone) = std::thread::scope(|s| {
            s.spawn(|| {
                let ino = enter_netns(&pair.sender);
                let mut probes =
                    HostQueueProbes::attach(NetnsFilter::Only(ino), 1_000_000).expect("attach");
                let mut names = IfIndexNames::new().expect("a socket for interface names");
                probes.read(&mut names, 1).expect("baseline read");
                // At once: the burst shares its first bucket with the read
                // (a bucket is 125 ms), and still belongs to the next one.
                let before = link_tx(&pair);
                let events_before = xmit_events(&probes);
                // One write, one datagram (bash's /dev/udp is a connected
                // UDP socket).
                let burst = |n: u64| {
                    let script = format!(
                        "exec 3>/dev/udp/{NOBODY_IP}/9; p=$(printf '%0{PAYLOAD}d' 0); \
                         for ((i = 0; i < {n}; i++)); do printf %s \"$p\" >&3; done"
                    );
                    pair.in_sender(&["bash", "-c", &script]);
                };
                let tx_peak =
                    |probes: &HostQueueProbes| probes.peaks().get(SENDER_IF).and_then(|p| p.0);
                burst(DATAGRAMS);
                std::thread::sleep(Duration::from_millis(200));
                let after = link_tx(&pair);
                probes.read(&mut names, 2).expect("read");
                let peak = tx_peak(&probes);
                let events = xmit_events(&probes) - events_before;
                // Quiet past the window, then one datagram: its interval's
                // peak is that datagram, not the old burst's window (which
                // the kernel would fold when the datagram opens a bucket).
                std::thread::sleep(Duration::from_millis(1_300));
                probes.read(&mut names, 3).expect("read");
                let quiet = tx_peak(&probes).map_or(0, |p| p.pps);
                burst(1);
                std::thread::sleep(Duration::from_millis(200));
                probes.read(&mut names, 4).expect("read");
                let lone = tx_peak(&probes).map(|p| (p.pps, p.bps));
                (
                    peak,
                    events,
                    (after.0 - before.0, after.1 - before.1),
                    quiet,
                    lone,
                )
            })
            .join()
            .expect("measuring thread")
        });
        let frame = (14 + 20 + 8 + PAYLOAD) as u64;
        assert_eq!(
            sent,
            (DATAGRAMS, DATAGRAMS * frame),
            "{label}: the link sent other frames than the burst"
        );
        let peak = peak.unwrap_or_else(|| panic!("{label}: no transmit peak"));
        assert_eq!(peak.window_us, 1_000_000, "{label}");
        assert_eq!(
            (peak.pps, peak.bps),
            (sent.0, sent.1 * 8),
            "{label}: the 1 s window holding the burst vs the link's counters"
        );
        assert_eq!(events, DATAGRAMS, "{label}: transmit events");
        assert_eq!(quiet, 0, "{label}: a quiet interval's peak");
        assert_eq!(
            lone,
            Some((1, frame * 8)),
            "{label}: one datagram after a quiet second"
        );
    }
}

/// Transmit runs the peak program counted so far.
fn xmit_events(probes: &HostQueueProbes) -> u64 {
    probes
        .program_health()
        .iter()
        .find(|p| p.name == "dev_xmit")
        .map(|p| p.events)
        .expect("dev_xmit in the program health")
}
