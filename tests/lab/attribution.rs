//! Per-flow attribution through the hypervisor shaper: one heavy flow and
//! several light ones. The heavy flow ranks first, and the flows' shares of
//! the bytes add up to about 100%.

use std::net::SocketAddr;
use std::time::Duration;

use crate::lab_support::traffic::Bulk;
use crate::lab_support::{in_netns, Lab};
use throttlescope::analysis::{analyze, Thresholds};
use throttlescope::collect::collector::{Collector, CollectorConfig};

#[test]
fn heavy_flow_ranks_first_and_shares_sum_to_100() {
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
