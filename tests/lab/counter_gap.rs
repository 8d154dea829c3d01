//! A counter gap never invents a verdict: the broker of a lab sends ~50
//! Mbit/s while this test plays the ENA device, writing `ethtool -S` text
//! whose bw_out_allowance_exceeded grows by 20% of b0's wire packets (free
//! flow); once the watch has judged two intervals of it (read as they come:
//! the watch's attach takes a second or more on a loaded machine), the file
//! is missing for 4 s and comes back with all the growth of the gap at once.
//! Run as root.
//!
//! Without the untrusted-read rule the first read after the gap puts four
//! seconds of growth into one interval (~100%) and judges
//! hypervisor_queuing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lab_support::traffic::Bulk;
use crate::lab_support::{enter_netns, tx_bytes_of, write_ena_counters, Lab};
use crate::support::TempDir;
use throttlescope::analysis::{Location, Verdict};

#[test]
fn a_four_second_counter_gap_on_a_free_flow_is_no_verdict() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("gap");
    let listen: SocketAddr = format!("{}:7401", lab.broker_ip).parse().unwrap();
    let bulk = Bulk::start(
        &lab.broker(),
        &lab.client(),
        listen,
        1,
        // A bound: closed once the watch has its intervals.
        Duration::from_secs(90),
        6_000_000,
    );
    let dir = TempDir::new("gap");
    let file: PathBuf = dir.join("ethtool-S-b0.txt");

    // The stand-in ENA: 20% of the wire packets (full-size frames of the
    // bulk flow) counted as over the allowance, every 100 ms; for 4 s from
    // the moment the test says (`gap`), no file at all.
    let stop = Arc::new(AtomicBool::new(false));
    let gap = Arc::new(AtomicBool::new(false));
    let writer = {
        let (file, stop, gap, ns) = (file.clone(), stop.clone(), gap.clone(), lab.broker());
        std::thread::spawn(move || {
            enter_netns(&PathBuf::from("/run/netns").join(ns));
            let base = tx_bytes_of("b0");
            let mut gap_since: Option<Instant> = None;
            while !stop.load(Ordering::SeqCst) {
                if gap_since.is_none() && gap.load(Ordering::SeqCst) {
                    gap_since = Some(Instant::now());
                }
                let exceeded = (tx_bytes_of("b0") - base) / 1514 / 5;
                if gap_since.is_none_or(|g| g.elapsed() >= Duration::from_secs(4)) {
                    write_ena_counters(&file, exceeded, false);
                } else {
                    let _ = std::fs::remove_file(&file);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut watch = lab.stream_watch_once_written(&file);
    watch.until(
        "two intervals judged at about 20%",
        Duration::from_secs(60),
        |out| crate::lab_support::b0_judged_near_20pct(out) >= 2,
    );
    gap.store(true, Ordering::SeqCst);
    // The 4 s gap, the read after it, and four more.
    for _ in 0..9 {
        watch.next("around the counter gap", Duration::from_secs(10));
    }
    let out = watch.stop();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    // The writers' 90 s is a bound: stopped now, or the close would wait
    // for it (the readers, never idle, would not see it).
    bulk.stop_writing();
    bulk.close();

    let mut untrusted = 0;
    let mut judged_rates = Vec::new();
    for (i, v) in crate::lab_support::interface_analyses(
        &lines
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
        "b0",
    )
    .iter()
    .enumerate()
    {
        let raw: Verdict = serde_json::from_value(v["verdict"].clone()).unwrap();
        let held: Verdict = serde_json::from_value(v["held"]["verdict"].clone()).unwrap();
        let flagged = v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["signal"] == "allowance_untrusted");
        let pct = v["rates"]["bw_out_pct"].as_f64();
        eprintln!("interval {i}: {raw} (held {held}) bw_out {pct:?} untrusted {flagged}");
        assert_ne!(raw.location(), Location::Hypervisor, "interval {i}");
        assert_ne!(held.location(), Location::Hypervisor, "interval {i}");
        untrusted += usize::from(flagged);
        judged_rates.extend(pct);
    }
    // The failed reads and the read after them were flagged, not judged;
    // the others read about 20%.
    assert!(untrusted >= 4, "{untrusted} intervals flagged");
    assert!(
        judged_rates
            .iter()
            .filter(|p| (10.0..=35.0).contains(*p))
            .count()
            >= 4,
        "{judged_rates:?}"
    );
}
