//! Every way the flows can be read each interval gives the same per-flow
//! figures. The default reads the flows that moved (the moved-set sweep)
//! with a full dump now and then through the socket-storage map iterator;
//! a kernel or policy can refuse the sweep, the map iterator or both
//! (the test-only switch THROTTLESCOPE_TEST_FAIL_PROGRAM refuses them
//! here; on a machine whose policy refuses map iterators, the paths that
//! would use one read as without it). On a lossy lab, per path: `doctor` names the path, health shows
//! which programs ran, and each flow's last listed totals (read after it
//! went idle, still open) equal `ss -tin`'s retransmits, bytes acked and
//! segments out and in exactly, and their sum nstat's TcpRetransSegs.
//!
//! Needs root (BPF, netns). The lab is made under a unique prefix and
//! removed on drop, also when an assertion fails.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::lab_support::stream::{WatchStream, STREAM_BOUND};
use crate::lab_support::traffic::Bulk;
use crate::lab_support::{in_netns, parse_ss, wait_acked, watch_lines, Lab};
use throttlescope::collect::probes::load::TEST_FAIL_ENV;
use throttlescope::model::snapshot::FlowSample;

/// (programs refused, what doctor's "flow dump" line says).
pub(crate) const PATHS: &[(&str, &[&str])] = &[
    (
        "",
        &["moved set (sweep_moved)", "socket-storage map iterator"],
    ),
    (
        "dump_flows",
        &["moved set (sweep_moved)", "TCP socket iterator"],
    ),
    (
        "sweep_moved",
        &["every flow each interval", "socket-storage map iterator"],
    ),
    (
        "sweep_moved,dump_flows",
        &["every flow each interval", "TCP socket iterator"],
    ),
];

#[test]
fn every_dump_path_gives_the_figures_ss_and_nstat_give() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("dmp");
    lab.tool(&["shape", "hv_drop"]);
    // A host whose BPF LSM policy refuses map iterators (to root too)
    // refuses dump_flows to every path: there the paths that would read
    // through it read through the TCP socket iterator, as users' there do.
    let policy_refuses_map_iterators = doctor_flow_dump("").contains("(map iterators refused)");
    if policy_refuses_map_iterators {
        eprintln!("this machine refuses map iterators: every path reads with dump_flows refused");
    }
    for (i, (refused, doctor_says)) in PATHS.iter().enumerate() {
        let line = doctor_flow_dump(refused);
        for words in *doctor_says {
            let words = match *words {
                "socket-storage map iterator" if policy_refuses_map_iterators => {
                    "TCP socket iterator"
                }
                w => w,
            };
            assert!(line.contains(words), "refused [{refused}]: {line}");
        }
        let dump_refused = policy_refuses_map_iterators || refused.contains("dump_flows");
        one_path(&lab, refused, dump_refused, 7200 + i as u16);
    }
}

/// doctor's "flow dump" line with the programs `refused` refused.
fn doctor_flow_dump(refused: &str) -> String {
    let doctor = Command::new(crate::support::binary())
        .arg("doctor")
        .env(TEST_FAIL_ENV, refused)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    text.lines()
        .find(|l| l.contains("flow dump: "))
        .unwrap_or_else(|| panic!("doctor names the flow dump: {text}"))
        .to_string()
}

/// Waits until the broker's namespace has no socket left that can still
/// retransmit: the previous path's sockets close over the lossy path, and
/// a FIN lost there is sent again, which nstat would count in this path's
/// retransmits (TIME-WAIT sends nothing again).
fn settled(lab: &Lab) {
    let args = [
        "-tHn",
        "state",
        "all",
        "exclude",
        "listening",
        "exclude",
        "time-wait",
    ];
    let start = std::time::Instant::now();
    loop {
        let left = lab.exec(&lab.broker(), "ss", &args);
        if left.trim().is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the previous path's sockets did not close: {left}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Bulk traffic through the lossy lab while `watch` runs with `refused`
/// programs refused (and dump_flows refused, by the test or the machine,
/// when `dump_refused`); the flows' last listed totals against ss and
/// nstat.
fn one_path(lab: &Lab, refused: &'static str, dump_refused: bool, port: u16) {
    let listen: SocketAddr = format!("{}:{port}", lab.broker_ip).parse().unwrap();
    settled(lab);
    let before = lab.nstat(&lab.broker(), "TcpRetransSegs");
    let broker = lab.broker();
    let client = lab.client();
    let (stdout, ss, ports, after) = in_netns(&broker.clone(), move || {
        // Stopped below once the flows are idle.
        let mut cmd = Command::new(crate::support::binary());
        cmd.args([
            "watch",
            "--json",
            "--duration",
            STREAM_BOUND,
            "--interval",
            "1s",
        ])
        .env(TEST_FAIL_ENV, refused)
        .stderr(Stdio::null());
        let mut watch = WatchStream::start(cmd, &format!("watch [{refused}]"));
        // Attached once it prints: the flows below are born observed, so
        // their totals start from zero as ss's do.
        watch.attached();
        let bulk = Bulk::start(&broker, &client, listen, 3, Duration::from_secs(3), 0);
        let ports = bulk.peer_ports.clone();
        bulk.wait_sent();
        // A flow the lossy path starved still sends what its buffer holds
        // after its writer stops, backed off by timeouts seconds at a time:
        // a fixed 9 s run once ended with one flow 3 segments (4,344 bytes
        // acked) short of ss, read after. So every byte acknowledged first,
        // then two whole intervals read while the flows are idle.
        let took = wait_acked(&ports, Duration::from_secs(60));
        eprintln!("[{refused}] every byte acknowledged {took:?} after the writers stopped");
        watch.drain();
        for _ in 0..2 {
            watch.next("after the flows went idle", Duration::from_secs(10));
        }
        let stdout = watch.stop();
        // The sockets are idle (for 2 intervals or more) and still open.
        let out = Command::new("ss").args(["-tin"]).output().unwrap();
        let ss = parse_ss(&String::from_utf8_lossy(&out.stdout));
        // With ss, before the close: a lost FIN's retransmit after it
        // would count in nstat alone.
        let after = crate::lab_support::nstat_here("TcpRetransSegs");
        bulk.close();
        (stdout, ss, ports, after)
    });

    let rows = watch_lines(stdout.as_bytes());
    let (last, _) = rows.last().expect("intervals");
    let attached = |name: &str| {
        last.health
            .programs
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.attached)
    };
    let sweep = !refused.contains("sweep_moved");
    assert_eq!(attached("sweep_moved"), Some(sweep), "[{refused}]");
    assert_eq!(attached("dump_flows"), Some(!dump_refused), "[{refused}]");
    // Each flow as last listed: the dumps read a flow again after it goes
    // idle, so that reading holds its final counters.
    let mut last_seen: HashMap<u16, &FlowSample> = HashMap::new();
    for (snap, _) in &rows {
        for f in snap.flows.iter().filter(|f| ports.contains(&f.peer.port())) {
            last_seen.insert(f.peer.port(), f);
        }
    }
    let mut total = 0;
    for s in ss.iter().filter(|s| ports.contains(&s.peer_port)) {
        let f = last_seen
            .get(&s.peer_port)
            .unwrap_or_else(|| panic!("[{refused}] flow {} listed", s.peer_port));
        eprintln!(
            "[{refused}] peer {}: retrans {} / ss {}, bytes_acked {} / {}, segs_out {} / {}, \
             segs_in {} / {}",
            s.peer_port,
            f.totals.retrans_segs,
            s.retrans_total,
            f.totals.bytes_acked,
            s.bytes_acked,
            f.totals.segs_out,
            s.segs_out,
            f.totals.segs_in,
            s.segs_in
        );
        assert_eq!(
            f.totals.retrans_segs, s.retrans_total,
            "[{refused}] retransmits"
        );
        assert_eq!(
            f.totals.bytes_acked, s.bytes_acked,
            "[{refused}] bytes acked"
        );
        assert_eq!(f.totals.segs_out, s.segs_out, "[{refused}] segments out");
        // Packets both ways, what a pps_limit names flows by (issue 45).
        assert_eq!(f.totals.segs_in, s.segs_in, "[{refused}] segments in");
        assert!(s.segs_in > 0, "[{refused}] ss counted segments in");
        total += f.totals.retrans_segs;
    }
    assert_eq!(last_seen.len(), 3, "[{refused}] three flows seen");
    assert!(
        total > 10,
        "[{refused}] the lossy path made retransmits ({total})"
    );
    assert_eq!(
        total,
        after - before,
        "[{refused}] total equals nstat TcpRetransSegs"
    );
}
