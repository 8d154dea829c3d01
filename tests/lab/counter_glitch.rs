//! A counter file that goes down without a reset never invents a verdict:
//! the broker of a lab sends ~50 Mbit/s while this test plays the ENA device
//! with two writers of one `ethtool -S` file, as in the field case of issue
//! #30. One counts bw_out_allowance_exceeded at 20% of b0's wire packets
//! (free flow); once the watch has judged two intervals of it (read as they
//! come, not after a fixed time: the watch's attach takes a second or more
//! on a loaded machine), every 700 ms the other takes its turn and writes
//! the value the first had 3 s before (a stale copy), so the counter steps
//! back and forth. Every write also holds one malformed line, which must be
//! skipped without losing the other counters. Run as root.
//!
//! Before the plausibility rule each step back was read as a reset plus its
//! whole value (tens of % of the wire packets, growing with time), held as
//! hypervisor_queuing within a few intervals, `resets` climbing every other
//! second.

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
fn a_counter_stepping_back_and_forth_is_flagged_never_a_verdict() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("glitch");
    let listen: SocketAddr = format!("{}:7402", lab.broker_ip).parse().unwrap();
    let bulk = Bulk::start(
        &lab.broker(),
        &lab.client(),
        listen,
        1,
        // A bound: closed once the watch has its intervals.
        Duration::from_secs(90),
        6_000_000,
    );
    let dir = TempDir::new("glitch");
    let file: PathBuf = dir.join("ethtool-S-b0.txt");

    let stop = Arc::new(AtomicBool::new(false));
    // Set by the test once the watch has judged the counting writer alone.
    let stale = Arc::new(AtomicBool::new(false));
    let writer = {
        let (file, stop, stale, ns) = (file.clone(), stop.clone(), stale.clone(), lab.broker());
        std::thread::spawn(move || {
            enter_netns(&PathBuf::from("/run/netns").join(ns));
            let base = tx_bytes_of("b0");
            let start = Instant::now();
            // (time, the counting writer's value), to play the stale one.
            let mut history: Vec<(Duration, u64)> = Vec::new();
            let mut stale_since: Option<Instant> = None;
            while !stop.load(Ordering::SeqCst) {
                let t = start.elapsed();
                let counted = (tx_bytes_of("b0") - base) / 1514 / 5;
                history.push((t, counted));
                if stale_since.is_none() && stale.load(Ordering::SeqCst) {
                    stale_since = Some(Instant::now());
                }
                let stale_turn = stale_since
                    .is_some_and(|s| (s.elapsed().as_millis() / 700) % 2 == 1)
                    && t >= Duration::from_secs(3);
                let value = if stale_turn {
                    let then = t - Duration::from_secs(3);
                    history
                        .iter()
                        .rev()
                        .find(|(at, _)| *at <= then)
                        .map_or(counted, |(_, v)| *v)
                } else {
                    counted
                };
                write_ena_counters(&file, value, true);
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut watch = lab.stream_watch_once_written(&file);
    // The counting writer alone until two intervals read about 20% (the
    // check below), and 3 s of its history for the stale one to replay.
    watch.until(
        "two intervals judged at about 20%",
        Duration::from_secs(60),
        |out| {
            crate::lab_support::b0_judged_near_20pct(out) >= 2
                && crate::lab_support::interface_analyses(out, "b0").len() >= 4
        },
    );
    stale.store(true, Ordering::SeqCst);
    for _ in 0..10 {
        watch.next("with the stale writer", Duration::from_secs(10));
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

    let text = lines
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    let analyses = crate::lab_support::interface_analyses(&text, "b0");
    assert_eq!(analyses.len(), lines.len());
    let mut flagged_samples = 0;
    let mut flagged_intervals = 0;
    let mut judged_rates = Vec::new();
    for (i, (line, v)) in lines.iter().zip(&analyses).enumerate() {
        let b0 = line["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "b0")
            .expect("b0 in the snapshot");
        let sample = &b0["allowance"];
        assert_eq!(sample["status"], "read", "interval {i}: {sample}");
        // The bad line is skipped, named and counted; the rest is read.
        assert!(sample["last_error"].is_null(), "interval {i}: {sample}");
        assert!(
            sample["skipped"]
                .as_str()
                .is_some_and(|s| s.contains("value \"n/a\" is not an unsigned integer")),
            "interval {i}: {sample}"
        );
        assert!(sample["totals"]["bw_out_allowance_exceeded"].is_u64());
        let raw: Verdict = serde_json::from_value(v["verdict"].clone()).unwrap();
        let held: Verdict = serde_json::from_value(v["held"]["verdict"].clone()).unwrap();
        let untrusted = sample["untrusted"].as_str();
        let flagged = v["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["signal"] == "allowance_untrusted");
        let pct = v["rates"]["bw_out_pct"].as_f64();
        eprintln!(
            "interval {i}: {raw} (held {held}) bw_out {pct:?} total {} resets {} flagged {flagged} \
             untrusted {untrusted:?}",
            sample["totals"]["bw_out_allowance_exceeded"], sample["resets"]
        );
        assert_ne!(raw.location(), Location::Hypervisor, "interval {i}");
        assert_ne!(held.location(), Location::Hypervisor, "interval {i}");
        // A sample the collector did not trust is never judged.
        if untrusted.is_some() {
            assert!(flagged, "interval {i}: untrusted but judged");
        }
        flagged_samples += usize::from(untrusted.is_some());
        flagged_intervals += usize::from(flagged);
        judged_rates.extend(pct);
    }
    let last = lines.last().unwrap();
    let b0 = last["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "b0")
        .unwrap();
    let health = &last["health"];
    eprintln!(
        "{flagged_samples} samples untrusted, {flagged_intervals} intervals flagged, health \
         allowance_untrusted_reads {} allowance_read_failures {}, resets {}, skipped_lines {}",
        health["allowance_untrusted_reads"],
        health["allowance_read_failures"],
        b0["allowance"]["resets"],
        b0["allowance"]["skipped_lines"]
    );
    // From the stale writer's second turn on, the source is untrusted.
    assert!(flagged_samples >= 5, "{flagged_samples} samples untrusted");
    assert!(flagged_intervals >= flagged_samples);
    assert_eq!(
        health["allowance_untrusted_reads"].as_u64(),
        b0["allowance"]["untrusted_reads"].as_u64()
    );
    assert!(health["allowance_untrusted_reads"].as_u64().unwrap() >= 5);
    assert_eq!(health["allowance_read_failures"], 0);
    // A step back is never a reset.
    assert_eq!(b0["allowance"]["resets"], 0);
    // Before the second writer, the reads are trusted and read about 20%.
    assert!(
        judged_rates
            .iter()
            .filter(|p| (10.0..=35.0).contains(*p))
            .count()
            >= 2,
        "{judged_rates:?}"
    );
}
