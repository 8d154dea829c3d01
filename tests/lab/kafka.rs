//! The Kafka workload: a real Apache Kafka broker in the lab's broker
//! namespace (`tools/lab traffic --kafka`, docs/lab.md), its consumers in the
//! client namespace reading a preloaded topic from the beginning, so the
//! broker sends bulk data through hv, where the shaper sits. One lab and one
//! broker for the three phases, each observed by its own
//! `throttlescope watch --json` in the broker namespace:
//!
//! - free_flow: the held verdict is free_flow (or idle) in >= 95% of the
//!   intervals with traffic;
//! - hv_queuing, then hv_drop: from shortly after the traffic starts, the held
//!   verdict is of the shaper's family (hypervisor_queuing, hypervisor_drop),
//!   and never of the other one;
//! - in every phase, the busiest flows are the broker's, on its Kafka client
//!   port, named after its process (`java`) with the sending thread beside;
//! - each of the broker's flows on the Kafka port, as last listed, has
//!   retransmitted exactly what `ss -tin` says for its socket (`retrans:X/Y`,
//!   and `dsack_dups` for the D-SACKed), as tests/lab/flows_vs_ss.rs checks
//!   on a reordering path: once the watch has read the intervals the phase
//!   judges, the consumers are stopped (SIGSTOP), the broker's sockets go
//!   idle with the consumers still connected (nothing left unacknowledged),
//!   the watch reads them twice more, and ss reads them after. Each phase
//!   waits for what it judges, not a fixed time: a fixed 14 s leaves too
//!   few intervals after the onset when the consumers' JVM or the watch's
//!   attach is slow, and a flow backed off by timeouts may retransmit after
//!   the watch's last interval and before ss.
//!
//! The lab runs as it is, packets of one flow free to be received on either
//! CPU: the veths then reorder some of the broker's packets, it retransmits
//! early and the consumers report the duplicates (D-SACK), as real brokers'
//! consumers do. Those retransmits lost nothing and must not make a loss
//! verdict (`tools/lab rps on` would hide them; it is not used here).
//!
//! Needs the Kafka jars that tools/setup fetches.

use crate::lab_support::{interface_analyses, parse_lab_env, verdict_family, Lab};
use serde_json::Value;
use std::time::Instant;
use throttlescope::analysis::VerdictFamily;

/// Seconds the consumers may run per phase: a bound only. They are stopped
/// (SIGSTOP) once the watch has read the intervals the phase judges
/// (`enough`), and the next phase's `traffic` ends them.
const PHASE_SECS: u32 = 150;
/// How long a phase may take to give the watch its intervals: the
/// consumers' JVM, the shaper's onset and the judged intervals, on a
/// loaded machine.
const PHASE_WITHIN: std::time::Duration = std::time::Duration::from_secs(90);
/// Intervals with traffic read before the consumers are stopped: in a
/// shaped phase, from HOLD_LAG intervals after the onset (check_held_family
/// judges 5 at least); in free flow, from the first with traffic.
const JUDGED: usize = 7;
/// An interval with at least this much sent by b0 carries the workload
/// (the consumers' JVM takes ~2 s to fetch its first records).
const TRAFFIC_BPS: f64 = 20e6;
/// The shapers' onset: the first interval in which b0 sent at least half
/// the rate of hv_queuing's and hv_drop's tbf (200 Mbit/s).
const ONSET_BPS: f64 = 100e6;
/// The held verdict needs a few intervals of a new verdict to change: the
/// shaper's family is required from this many intervals after the onset
/// (measured: 1-4, one interval of margin).
const HOLD_LAG: usize = 5;

/// One interval of b0, with the flows the observer listed.
#[derive(Debug)]
struct Interval {
    verdict: String,
    held: String,
    tx_bps: f64,
    /// (local address, owner's name, bytes sent in the interval), busiest first.
    flows: Vec<(String, String, u64)>,
    /// The busiest flow's owner thread, where the kernel said.
    top_thread: Option<String>,
    /// Segments retransmitted by all flows, and of them spurious.
    retrans: u64,
    spurious: u64,
}

/// A flow as the watch last listed it (not closed): its addresses and
/// cumulative retransmits, of them D-SACKed.
#[derive(Debug)]
struct LastSeen {
    local_port: u16,
    peer_port: u16,
    retrans: u64,
    dsack: u64,
}

/// Each open flow of `lines` as last listed, by socket cookie.
fn last_seen(lines: &str) -> std::collections::HashMap<u64, LastSeen> {
    let mut out = std::collections::HashMap::new();
    for s in lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        for f in s["flows"].as_array().into_iter().flatten() {
            let id = f["id"].as_u64().expect("a flow's id");
            if f["closed"].as_bool() == Some(true) {
                out.remove(&id);
                continue;
            }
            let port = |k: &str| {
                let a: std::net::SocketAddr = f[k].as_str().unwrap().parse().unwrap();
                a.port()
            };
            out.insert(
                id,
                LastSeen {
                    local_port: port("local"),
                    peer_port: port("peer"),
                    retrans: f["totals"]["retrans_segs"].as_u64().unwrap(),
                    dsack: f["totals"]["retrans_dsack"].as_u64().unwrap(),
                },
            );
        }
    }
    out
}

fn intervals(lines: &str, iface: &str) -> Vec<Interval> {
    let analyses = interface_analyses(lines, iface);
    let snaps: Vec<Value> = lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert_eq!(
        analyses.len(),
        snaps.len(),
        "an analysis of {iface} per line"
    );
    analyses
        .iter()
        .zip(&snaps)
        .map(|(a, s)| {
            let mut flows: Vec<(String, String, u64)> = s["flows"]
                .as_array()
                .map(|fs| {
                    fs.iter()
                        .map(|f| {
                            (
                                f["local"].as_str().unwrap_or("").to_string(),
                                f["owner"]["comm"].as_str().unwrap_or("?").to_string(),
                                f["delta"]["bytes_sent"].as_u64().unwrap_or(0),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            flows.sort_by_key(|f| std::cmp::Reverse(f.2));
            let all = s["flows"].as_array().cloned().unwrap_or_default();
            let sum = |field: &str| -> u64 {
                all.iter()
                    .map(|f| f["delta"][field].as_u64().unwrap_or(0))
                    .sum()
            };
            let top_thread = all
                .iter()
                .max_by_key(|f| f["delta"]["bytes_sent"].as_u64().unwrap_or(0))
                .and_then(|f| f["owner"]["thread"].as_str().map(str::to_string));
            Interval {
                top_thread,
                retrans: sum("retrans_segs"),
                spurious: sum("retrans_spurious"),
                verdict: a["verdict"].as_str().unwrap_or("?").to_string(),
                held: a["held"]["verdict"].as_str().unwrap_or("?").to_string(),
                tx_bps: a["rates"]["tx_bps"].as_f64().unwrap_or(0.0),
                flows,
            }
        })
        .collect()
}

/// Whether the intervals read so far hold what a phase judges: JUDGED
/// intervals with traffic from HOLD_LAG after the onset (`shaped`), or from
/// the first with traffic (free flow). Read as they come, not after a fixed
/// time: the consumers' JVM takes ~2 s to its first fetch unloaded, more on
/// a loaded machine, and the watch's own start (attach) a second or more.
fn enough(v: &[Interval], shaped: bool) -> bool {
    let from = if shaped {
        v.iter()
            .position(|i| i.tx_bps >= ONSET_BPS)
            .map(|o| o + HOLD_LAG)
    } else {
        v.iter().position(|i| i.tx_bps >= TRAFFIC_BPS)
    };
    from.is_some_and(|f| v.iter().skip(f).filter(|i| i.tx_bps >= TRAFFIC_BPS).count() >= JUDGED)
}

/// Waits until none of the broker's sockets on `port` has a segment
/// unacknowledged (ss's `unacked`): with the consumers stopped their windows
/// close, the bytes left wait on them (Send-Q stays above 0), and nothing is
/// in flight to be retransmitted. Until then a flow backed off by timeouts
/// may still retransmit, seconds later.
fn wait_in_flight_acked(lab: &Lab, scenario: &str, port: u16) {
    let took = crate::lab_support::in_netns(&lab.broker(), move || {
        crate::lab_support::wait_in_flight_gone(
            "segments still unacknowledged (peer port, unacked)",
            std::time::Duration::from_secs(60),
            |s| (s.local_port == port && s.unacked > 0).then_some((s.peer_port, s.unacked)),
        )
    });
    eprintln!("{scenario}: nothing in flight {took:?} after the consumers stopped");
}

/// Shapes SCENARIO, runs the Kafka consumers with `extra` traffic options
/// (the broker is started and the topic preloaded on the first call) and
/// watches b0 until the phase's intervals are read (`enough`); then the
/// consumers are stopped, their flows go idle, the watch reads them twice
/// more and ss reads them after.
fn phase(lab: &Lab, scenario: &str, extra: &[&str], shaped: bool) -> Vec<Interval> {
    lab.tool(&["shape", scenario]);
    lab.tool(&["emulator", "start"]);
    let t = Instant::now();
    let secs = PHASE_SECS.to_string();
    let mut args = vec!["traffic", "--kafka", "--time", &secs];
    args.extend_from_slice(extra);
    let out = lab.tool(&args);
    eprintln!(
        "{scenario}: traffic --kafka returned in {:.1} s: {}",
        t.elapsed().as_secs_f64(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let kafka_port: u16 = parse_lab_env(&String::from_utf8_lossy(&lab.tool(&["env"]).stdout))
        ["LAB_KAFKA_PORT"]
        .parse()
        .unwrap();
    let consumers: i32 = std::fs::read_to_string(lab.dir.join("traffic-client.pid"))
        .expect("the consumers' pid file")
        .trim()
        .parse()
        .expect("a pid");
    let mut watch = lab.stream_watch_json_in_broker(&["--interval", "1s"]);
    watch.attached();
    let iface = lab.broker_if.clone();
    watch.until(
        &format!("{scenario}'s judged intervals"),
        PHASE_WITHIN,
        |lines| enough(&intervals(lines, &iface), shaped),
    );
    // SAFETY: kill(2) on the pid the lab recorded for this phase's consumers.
    assert_eq!(
        unsafe { libc::kill(consumers, libc::SIGSTOP) },
        0,
        "stopping the consumers"
    );
    wait_in_flight_acked(lab, scenario, kafka_port);
    watch.drain();
    for _ in 0..2 {
        watch.next(
            "after the broker's flows went idle",
            std::time::Duration::from_secs(10),
        );
    }
    let lines = watch.stop();
    let ss = crate::lab_support::parse_ss(&lab.exec(&lab.broker(), "ss", &["-tin"]));
    // SAFETY: as above; the next phase's `traffic` ends them.
    unsafe { libc::kill(consumers, libc::SIGCONT) };
    let v = intervals(&lines, &lab.broker_if);
    let ours = last_seen(&lines);
    let mut compared = 0;
    let mut retrans = 0;
    for s in ss.iter().filter(|s| s.local_port == kafka_port) {
        let f = ours
            .values()
            .find(|f| f.local_port == s.local_port && f.peer_port == s.peer_port)
            .unwrap_or_else(|| panic!("{scenario}: the watch never listed {s:?}"));
        assert_eq!(
            (f.retrans, f.dsack),
            (s.retrans_total, s.dsack_dups),
            "{scenario}: a flow's retransmits (and D-SACKed) against ss's for its socket: {f:?} {s:?}"
        );
        compared += 1;
        retrans += f.retrans;
    }
    eprintln!("{scenario}: {compared} broker flows equal ss's retransmits ({retrans} in all)");
    assert!(
        compared > 0,
        "{scenario}: no broker socket on the Kafka port in ss"
    );
    for (n, i) in v.iter().enumerate() {
        let top: Vec<String> = i
            .flows
            .iter()
            .take(3)
            .map(|(local, comm, b)| format!("{comm}@{local} {:.0} Mbit/s", *b as f64 * 8e-6))
            .collect();
        eprintln!(
            "{scenario} {n:2}: {:<20} held {:<20} tx {:7.1} Mbit/s retrans {}/{}s | {}",
            i.verdict,
            i.held,
            i.tx_bps / 1e6,
            i.retrans,
            i.spurious,
            top.join(", ")
        );
    }
    v
}

/// The intervals that carry the workload.
fn with_traffic(v: &[Interval]) -> Vec<&Interval> {
    v.iter().filter(|i| i.tx_bps >= TRAFFIC_BPS).collect()
}

/// The busiest flow of every interval with traffic is the broker's, on its
/// Kafka client port, and such flows carry nearly all the bytes sent.
fn check_busiest_flows(scenario: &str, v: &[Interval], kafka_local: &str) {
    let mut on_port = 0u64;
    let mut total = 0u64;
    for i in with_traffic(v) {
        let (local, comm, _) = i.flows.first().unwrap_or_else(|| {
            panic!("{scenario}: no flow listed in an interval with traffic: {i:?}")
        });
        assert_eq!(
            local, kafka_local,
            "{scenario}: the busiest flow is not on the Kafka client port: {:?}",
            i.flows
        );
        // The process, as ps names it, not the JVM thread that sent
        // ("data-plane-kafk"), which is kept beside it.
        assert_eq!(
            comm, "java",
            "{scenario}: the busiest flow's owner: {:?}",
            i.flows
        );
        assert!(
            i.top_thread.as_deref().is_some_and(|t| !t.is_empty()),
            "{scenario}: no sending thread named for the busiest flow"
        );
        for (local, _, b) in &i.flows {
            total += b;
            if local == kafka_local {
                on_port += b;
            }
        }
    }
    assert!(
        on_port as f64 >= 0.95 * total as f64,
        "{scenario}: flows on {kafka_local} sent {on_port} of {total} bytes"
    );
}

/// From HOLD_LAG intervals after the onset to the end of the traffic, the held
/// verdict is of `expected`'s family; none at all of the opposite family
/// (queuing for drop, drop for queuing).
fn check_held_family(scenario: &str, v: &[Interval], expected: &str) {
    let want = verdict_family(expected);
    let onset = v
        .iter()
        .position(|i| i.tx_bps >= ONSET_BPS)
        .unwrap_or_else(|| panic!("{scenario}: the shaper never bound: {v:?}"));
    // To the last interval with traffic: the consumers are stopped before
    // the watch ends (phase()), and the idle intervals after are not judged.
    let last = v
        .iter()
        .rposition(|i| i.tx_bps >= TRAFFIC_BPS)
        .map_or(0, |l| l + 1);
    let judged = &v[(onset + HOLD_LAG).min(last)..last];
    assert!(
        judged.len() >= 5,
        "{scenario}: too few intervals after the onset (interval {onset}): {v:?}"
    );
    let held: Vec<&str> = judged.iter().map(|i| i.held.as_str()).collect();
    let exact = held.iter().filter(|h| **h == expected).count();
    eprintln!(
        "{scenario}: onset at interval {onset}; held {expected} in {exact} of {} intervals from interval {}",
        held.len(),
        onset + HOLD_LAG
    );
    assert!(
        held.iter().all(|h| verdict_family(h) == want),
        "{scenario}: held verdicts after the onset not all of {expected}'s family: {held:?}"
    );
    let opposite = |f: VerdictFamily| {
        (want == VerdictFamily::Queuing && f == VerdictFamily::Drop)
            || (want == VerdictFamily::Drop && f == VerdictFamily::Queuing)
    };
    let wrong: Vec<&str> = v
        .iter()
        .map(|i| i.held.as_str())
        .filter(|h| opposite(verdict_family(h)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{scenario}: held of the wrong family: {wrong:?}"
    );
}

#[test]
fn kafka_broker_free_then_queuing_then_drop() {
    let _gate = crate::lab_support::gate::alone("a JVM broker and its clients fill the machine");
    let start = Instant::now();
    let lab = Lab::up("kaf");
    let env = parse_lab_env(&String::from_utf8_lossy(&lab.tool(&["env"]).stdout));
    let port = env
        .get("LAB_KAFKA_PORT")
        .expect("`tools/lab env` prints LAB_KAFKA_PORT");
    let kafka_local = format!("{}:{port}", lab.broker_ip);
    // No `rps on`: the reordering the veths cause across the two CPUs, and
    // the spurious retransmits it brings, are part of the test.

    // A steady load well under every limit, as the iperf3 free flow test
    // offers (unpaced, 4 consumers take both cores at 3-9 Gbit/s).
    let free = phase(&lab, "free_flow", &["--consume-rate", "400"], false);
    let traffic = with_traffic(&free);
    assert!(
        traffic.len() >= 5,
        "free_flow: too few intervals with traffic: {free:?}"
    );
    let free_held = traffic
        .iter()
        .filter(|i| i.held == "free_flow" || i.held == "idle")
        .count();
    eprintln!(
        "free_flow: held free_flow or idle in {free_held} of {} intervals with traffic",
        traffic.len()
    );
    assert!(
        free_held * 100 >= traffic.len() * 95,
        "free_flow: held free_flow or idle in only {free_held} of {} intervals with traffic: {:?}",
        traffic.len(),
        traffic.iter().map(|i| &i.held).collect::<Vec<_>>()
    );
    check_busiest_flows("free_flow", &free, &kafka_local);

    let queuing = phase(&lab, "hv_queuing", &[], true);
    check_held_family("hv_queuing", &queuing, "hypervisor_queuing");
    check_busiest_flows("hv_queuing", &queuing, &kafka_local);

    let dropping = phase(&lab, "hv_drop", &[], true);
    check_held_family("hv_drop", &dropping, "hypervisor_drop");
    check_busiest_flows("hv_drop", &dropping, &kafka_local);

    drop_lab_and_report(lab, start);
}

/// Takes the lab (and the broker) down inside the measured time.
fn drop_lab_and_report(lab: Lab, start: Instant) {
    drop(lab);
    eprintln!("kafka test: {:.1} s wall", start.elapsed().as_secs_f64());
}
