//! Per-flow attribution through the hypervisor shaper: one heavy flow and
//! several light ones. The heavy flow ranks first, and the flows' shares of
//! the bytes add up to about 100%. Inbound: under a bw_in verdict the
//! flows receiving through the interface rank, a loopback flow never does.

use std::net::SocketAddr;
use std::time::Duration;

use crate::lab_support::traffic::Bulk;
use crate::lab_support::{in_netns, watch_lines, Lab};
use throttlescope::analysis::{analyze, Thresholds};
use throttlescope::collect::collector::{Collector, CollectorConfig};

#[test]
fn heavy_flow_ranks_first_and_shares_sum_to_100() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("at");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    let counters = lab.counters.clone();
    let heavy_addr: SocketAddr = format!("{}:7201", lab.broker_ip).parse().unwrap();
    let light_addr: SocketAddr = format!("{}:7202", lab.broker_ip).parse().unwrap();
    let heavy = Bulk::start(
        &lab.broker(),
        &lab.client(),
        heavy_addr,
        1,
        Duration::from_secs(9),
        0,
    );
    // Three light flows of 1 MB/s each (8 Mbit/s) against a 200 Mbit/s shaper.
    let light = Bulk::start(
        &lab.broker(),
        &lab.client(),
        light_addr,
        3,
        Duration::from_secs(9),
        1_000_000,
    );
    let heavy_port = heavy.peer_ports[0];
    let light_ports = light.peer_ports.clone();

    let analyses = in_netns(&lab.broker(), move || {
        let mut c = Collector::start(CollectorConfig {
            counter_files: vec![("b0".into(), counters)],
            ..Default::default()
        })
        .expect("attach");
        let th = Thresholds::default();
        let mut history = Vec::new();
        let mut out = Vec::new();
        for _ in 0..5 {
            std::thread::sleep(Duration::from_secs(1));
            let snap = c.collect().unwrap();
            out.push(analyze(&history, &snap, &th));
            history.push(snap);
        }
        out
    });
    heavy.close();
    light.close();

    for a in analyses.iter().skip(1) {
        let ours: Vec<_> = a
            .flows
            .iter()
            .filter(|f| f.peer.port() == heavy_port || light_ports.contains(&f.peer.port()))
            .collect();
        let sum: f64 = ours.iter().map(|f| f.bytes_share_pct).sum();
        eprintln!(
            "interval {}: {:?}",
            a.seq,
            ours.iter()
                .map(|f| (
                    f.peer.port(),
                    f.rank,
                    format!("{:.1}%", f.bytes_share_pct),
                    format!("{:.2}", f.backoff_score)
                ))
                .collect::<Vec<_>>()
        );
        assert_eq!(ours.len(), 4, "all four flows attributed");
        assert!((95.0..=100.5).contains(&sum), "shares sum to {sum:.1}%");
        let first = ours.iter().min_by_key(|f| f.rank).unwrap();
        assert_eq!(first.peer.port(), heavy_port, "the heavy flow ranks first");
        let heavy_share = ours
            .iter()
            .find(|f| f.peer.port() == heavy_port)
            .unwrap()
            .bytes_share_pct;
        assert!(heavy_share > 70.0, "heavy flow's share {heavy_share:.1}%");
    }
}

/// Inbound (issue #42, 7): the client pushes to the broker through a shaped
/// inbound allowance (`hv_queuing --dir in`, offloads on as the lab comes
/// up), while a process in the broker keeps a loopback connection busy
/// with small requests that its local peer only acknowledges (as a Kafka
/// broker talks to its controller on 127.0.0.1:9093). In the intervals
/// b0's verdict is decided by bw_in, the flows that paid are the broker's
/// receiving ones, ranked inbound, the first of them first; the loopback
/// flows have no rank in any interval.
#[test]
fn under_bw_in_the_receivers_rank_and_loopback_never_does() {
    let _gate = crate::lab_support::gate::shared();
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let lab = Lab::up("ai");
    lab.tool(&["shape", "hv_queuing", "--dir", "in"]);
    lab.tool(&["emulator", "start"]);
    let broker_if = lab.broker_if.clone();
    // The client sends; the broker's sockets receive.
    let push_addr: SocketAddr = format!("{}:7203", lab.client_ip).parse().unwrap();
    let push = Bulk::start(
        &lab.client(),
        &lab.broker(),
        push_addr,
        2,
        Duration::from_secs(9),
        0,
    );
    // 39 bytes every 20 ms over loopback in the broker, never answered.
    let stop = Arc::new(AtomicBool::new(false));
    let chatter = {
        let stop = stop.clone();
        let ns = std::path::PathBuf::from("/run/netns").join(lab.broker());
        std::thread::spawn(move || {
            crate::lab_support::enter_netns(&ns);
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let reader = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut buf = [0u8; 4096];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            });
            let mut s = TcpStream::connect(addr).unwrap();
            while !stop.load(Ordering::Relaxed) {
                s.write_all(&[0x42; 39]).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(s);
            reader.join().unwrap();
        })
    };

    // The real command, as a user runs it in the broker.
    let lines = lab.watch_json_in_broker("7s", &["--interval", "1s"]);
    let analyses: Vec<_> = watch_lines(&lines).into_iter().map(|(_, a)| a).collect();
    stop.store(true, Ordering::Relaxed);
    chatter.join().unwrap();
    push.close();

    let mut inbound_intervals = 0;
    let mut loopback_seen = 0;
    for a in analyses.iter().skip(1) {
        let b0 = a
            .interfaces
            .iter()
            .find(|v| v.iface == broker_if)
            .unwrap_or_else(|| panic!("no {broker_if} in {:?}", a.interfaces));
        let by_bw_in = b0
            .evidence
            .first()
            .is_some_and(|e| e.signal == "bw_in_allowance_pct");
        let local: Vec<_> = a
            .flows
            .iter()
            .filter(|f| f.peer.ip().is_loopback())
            .collect();
        let pushed: Vec<_> = a.flows.iter().filter(|f| f.peer.port() == 7203).collect();
        eprintln!(
            "interval {}: b0 {:?} ({}), flows {:?}",
            a.seq,
            b0.verdict,
            b0.evidence.first().map_or("-", |e| e.signal.as_str()),
            a.flows
                .iter()
                .map(|f| (
                    f.peer.to_string(),
                    f.rank,
                    f.inbound,
                    f.bytes_sent,
                    f.bytes_received,
                    f.added_delay_us,
                    f.backoff_score
                ))
                .collect::<Vec<_>>()
        );
        loopback_seen += usize::from(!local.is_empty());
        for f in &local {
            assert_eq!(f.rank, 0, "a loopback flow ranked: {f:?}");
            assert_eq!(f.backoff_score, 0.0, "{f:?}");
        }
        if !by_bw_in {
            continue;
        }
        inbound_intervals += 1;
        assert_eq!(pushed.len(), 2, "both receiving flows attributed");
        for f in &pushed {
            assert!(
                f.inbound && f.rank >= 1,
                "a receiving flow not ranked: {f:?}"
            );
        }
        let first = a.flows.iter().find(|f| f.rank == 1).unwrap();
        assert_eq!(
            first.peer.port(),
            7203,
            "the first is a receiver: {first:?}"
        );
    }
    assert!(
        loopback_seen >= 3,
        "the loopback flows were seen in {loopback_seen} intervals"
    );
    assert!(
        inbound_intervals >= 3,
        "b0 judged by bw_in in only {inbound_intervals} of {} intervals",
        analyses.len() - 1
    );
}
