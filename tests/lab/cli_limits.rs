//! Values at and past the edges of the command line are clear errors, never
//! a panic, a busy loop or a silently ignored option.
//!
//! The tests here need root; those that need none are in
//! tests/offline/cli_limits.rs.

use std::process::Command;

use crate::lab_support::Lab;
use crate::support::binary;
use crate::support::cli_limits::status;

#[test]
fn counters_for_an_unwatched_or_repeated_interface_are_errors() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("cli");
    let in_broker = |args: &[&str]| {
        status(
            Command::new("ip")
                .args(["netns", "exec", &lab.broker()])
                .arg(binary())
                .args(args),
        )
    };
    // Files that exist: a missing one is refused before the interfaces are
    // looked at (below).
    let file = std::env::temp_dir().join(format!("ts-cli-counters-{}", std::process::id()));
    std::fs::write(
        &file,
        "NIC statistics:\n     bw_out_allowance_exceeded: 0\n",
    )
    .unwrap();
    let eth9 = format!("eth9={}", file.display());
    let b0 = format!("b0={}", file.display());
    for (counters, want) in [
        (
            &[eth9.as_str()][..],
            "eth9 is not among the interfaces watched here (b0)",
        ),
        (
            &[b0.as_str(), b0.as_str()],
            "--counters b0: given more than once",
        ),
    ] {
        let mut args = vec!["watch", "--json", "--duration", "1s"];
        for c in counters {
            args.extend(["--counters", c]);
        }
        let (code, stderr) = in_broker(&args);
        assert_eq!(code, 1, "{counters:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{counters:?}: want {want:?} in {stderr}"
        );
    }
    let _ = std::fs::remove_file(&file);

    // Port 0: the kernel picks one, and the observer says which.
    let (code, stderr) = in_broker(&[
        "watch",
        "--json",
        "--duration",
        "1s",
        "--metrics",
        "127.0.0.1:0",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let port: u16 = stderr
        .split("metrics on http://127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no address in {stderr}"));
    assert!(port > 0);
}

/// An observer that cannot keep up (here: stopped for a second, as a starved
/// process is) says so in health, and does not squeeze the next intervals
/// short to catch up.
#[test]
fn an_interval_that_ends_late_is_counted_not_hidden() {
    let _gate = crate::lab_support::gate::shared();
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let lab = Lab::up("late");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.broker()])
        .arg(binary())
        .args(["watch", "--json", "--interval", "200ms", "--duration", "4s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut snaps: Vec<throttlescope::model::snapshot::Snapshot> = Vec::new();
    let mut read = |n: usize, snaps: &mut Vec<_>| {
        for _ in 0..n {
            let line = lines.next().expect("a line").unwrap();
            snaps.push(serde_json::from_str(&line).unwrap());
        }
    };
    read(3, &mut snaps);
    // `ip netns exec` execs the binary: the child's pid is the observer's.
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(std::time::Duration::from_millis(1000));
    assert!(Command::new("kill")
        .args(["-CONT", &pid])
        .status()
        .unwrap()
        .success());
    read(4, &mut snaps);
    child.kill().ok();
    child.wait().ok();

    // A loaded machine may make other intervals late too: the stopped one
    // is the one that lasted the second, after the three read before it.
    let first = snaps
        .iter()
        .skip(3)
        .find(|s| s.interval_ns >= 900_000_000)
        .expect("the interval of the stop says how long it was");
    assert!(
        first.health.late_intervals >= 1,
        "the interval of a 1 s stop is counted late: {:?}",
        first.health
    );
    let after: Vec<_> = snaps.iter().filter(|s| s.seq > first.seq).collect();
    assert!(!after.is_empty());
    for s in after {
        assert!(
            s.interval_ns >= 150_000_000,
            "interval {} squeezed to {} ns to catch up",
            s.seq,
            s.interval_ns
        );
    }
}

/// `--peak-window 0` turns peaks off: the two per-packet programs are not
/// loaded, and health says so and what is missing; but for on_dev_xmit,
/// which stays for the link-local count (bpf/linklocal.bpf.h) unless that is
/// off too (`--no-linklocal`).
#[test]
fn peaks_turned_off_are_not_loaded_and_said() {
    let _gate = crate::lab_support::gate::shared();
    let watch = |extra: &[&str]| {
        let out = crate::support::run(
            Command::new(binary())
                .args([
                    "watch",
                    "--json",
                    "--duration",
                    "1s",
                    "--peak-window",
                    "0",
                    "--baseline",
                    "1G",
                ])
                .args(extra),
        );
        let last = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .map(str::to_string)
            .expect("an interval");
        let v: serde_json::Value = serde_json::from_str(&last).unwrap();
        (last, v)
    };
    let program = |v: &serde_json::Value, last: &str, name: &str| {
        v["health"]["programs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} in health: {last}"))
            .clone()
    };
    let turned_off = |p: &serde_json::Value| {
        assert_eq!(p["attached"], false, "{p}");
        assert!(
            p["not_attached"]
                .as_str()
                .unwrap()
                .contains("--peak-window 0"),
            "{p}"
        );
    };
    let (last, v) = watch(&[]);
    turned_off(&program(&v, &last, "netif_receive"));
    assert_eq!(program(&v, &last, "dev_xmit")["attached"], true, "{last}");
    let (last, v) = watch(&["--no-linklocal"]);
    for name in ["dev_xmit", "netif_receive"] {
        turned_off(&program(&v, &last, name));
    }
    // The baseline given: headroom in the analysis.
    assert_eq!(
        v["analysis"]["headroom"]["tx"]["baseline_bps"], 1e9,
        "{last}"
    );
}
