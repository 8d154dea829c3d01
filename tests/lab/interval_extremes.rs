//! A flow's interval extremes (its peak rate, srtt max, cwnd min) belong
//! to the interval that just ended, even when the dump reaches the flow
//! late. User space raises the dump generation, then reads the flows; a
//! segment sampled on another CPU in between starts the new generation in
//! the flow's storage. On a loaded machine the reading thread can be
//! preempted right there for milliseconds: once in a CI run the lab's
//! bursting flow lost its whole peak that way. The test-only pause
//! (THROTTLESCOPE_TEST_DUMP_PAUSE_MS) makes that gap every interval's, on
//! every dump path: with every segment sampled and 200 ms peak windows, a
//! 20 ms gap holds a window's end one time in ten, so a dump reading the
//! new generation would find no peak in most intervals.
//!
//! Needs root (BPF, netns). The lab is made under a unique prefix and
//! removed on drop, also when an assertion fails.

use std::process::Command;

use crate::lab_support::{watch_lines, Lab};
use crate::support::{binary, run};
use throttlescope::collect::probes::load::{TEST_DUMP_PAUSE_ENV, TEST_FAIL_ENV};

/// iperf3's port in the lab's broker (tools/lab).
const IPERF_PORT: u16 = 5201;

#[test]
fn a_late_dump_still_reads_the_interval_that_ended() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("ext");
    lab.tool(&["shape", "none"]);
    lab.tool(&[
        "traffic",
        "--streams",
        "1",
        "--time",
        "60",
        "--bitrate",
        "200M",
    ]);
    for (refused, _) in super::dump_paths::PATHS {
        let out = run(Command::new("ip")
            .args(["netns", "exec", &lab.broker()])
            .arg(binary())
            .args(["watch", "--json", "--duration", "6s", "--interval", "1s"])
            .args(["--probe-sampling", "1", "--peak-window", "200ms"])
            .env(TEST_DUMP_PAUSE_ENV, "20")
            .env(TEST_FAIL_ENV, refused));
        let lines = watch_lines(&out.stdout);
        assert!(lines.len() >= 5, "{refused:?}: {} intervals", lines.len());
        // The first interval reads from attach: left out.
        for (snap, _) in &lines[1..] {
            let secs = snap.interval_ns as f64 / 1e9;
            let flow = snap
                .flows
                .iter()
                .filter(|f| f.local.port() == IPERF_PORT)
                .max_by_key(|f| f.delta.bytes_sent)
                .unwrap_or_else(|| panic!("{refused:?}: no iperf3 flow in interval {}", snap.seq));
            let mean = flow.delta.bytes_sent as f64 * 8.0 / secs;
            assert!(
                mean > 50e6,
                "{refused:?}: interval {}: {mean} bit/s",
                snap.seq
            );
            let peak = flow.peak_bps.unwrap_or_else(|| {
                panic!(
                    "{refused:?}: interval {}: the flow moved {mean:.0} bit/s and has no peak",
                    snap.seq
                )
            }) as f64;
            // iperf3 paces its bitrate: no 200 ms window far from the mean.
            assert!(
                peak >= 0.8 * mean && peak <= 2.0 * mean,
                "{refused:?}: interval {}: peak {peak:.0}, mean {mean:.0} bit/s",
                snap.seq
            );
            assert!(
                flow.srtt_max_us.is_some() && flow.cwnd_min.is_some(),
                "{refused:?}: interval {}: {flow:?}",
                snap.seq
            );
        }
    }
}
