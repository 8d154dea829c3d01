//! Values at and past the edges of the command line are clear errors, never
//! a panic, a busy loop or a silently ignored option.
//!
//! The tests here need no root; those that need it are in
//! tests/lab/cli_limits.rs.

use std::process::Command;

use crate::support::binary;
use crate::support::cli_limits::status;

#[test]
fn absurd_intervals_and_durations_are_refused() {
    for (args, want) in [
        (
            &["watch", "--interval", "18446744073709551615s"][..],
            "too long",
        ),
        (&["watch", "--interval", "0.0000000001"], "nanosecond"),
        (&["watch", "--interval", "2h"], "from 10ms to 1h"),
        (&["watch", "--duration", "5000000000000000h"], "too long"),
        (
            &["watch", "--interval", "10s", "--duration", "2s"],
            "shorter than one --interval",
        ),
        (
            &["record", "-o", "/nonexistent/x.jsonl", "--interval", "5ms"],
            "from 10ms to 1h",
        ),
    ] {
        let (code, stderr) = run(args);
        assert!(code == 1 || code == 2, "{args:?}: exit {code}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: want {want:?} in {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// A `--counters` path that does not exist, is a directory or a device is
/// a usage error: exit 2, one line on stderr, before anything is attached
/// (no root or lab needed to get there).
#[test]
fn counter_files_that_cannot_be_are_usage_errors() {
    for (path, want) in [
        (
            "/nonexistent",
            "--counters a0=/nonexistent: /nonexistent does not exist",
        ),
        (
            "/tmp",
            "--counters a0=/tmp: /tmp is a directory, not a counter file",
        ),
        (
            "/dev/zero",
            "--counters a0=/dev/zero: /dev/zero is not a regular file",
        ),
    ] {
        for cmd in [
            &["watch", "--plain"][..],
            &["record", "-o", "/nonexistent-dir/x.jsonl"][..],
        ] {
            let mut args = cmd.to_vec();
            let counters = format!("a0={path}");
            args.extend(["--counters", &counters]);
            let (code, stderr) = run(&args);
            assert_eq!(code, 2, "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(
                stderr.starts_with(&format!("throttlescope: {want}")),
                "{args:?}: want {want:?} in {stderr}"
            );
        }
    }
}

/// What the instance is planned against: a bad table, type or rate is a
/// usage error naming what was wrong, before anything is attached.
#[test]
fn bad_instance_options_are_usage_errors() {
    let dir = std::env::temp_dir().join(format!("ts-specs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.tsv");
    std::fs::write(&bad, "# source: x\nm5.large x86_64 2 0.75\n").unwrap();
    let good = dir.join("good.tsv");
    std::fs::write(&good, "lab.small x86_64 2 0.1 0.4\n").unwrap();
    let (bad, good) = (bad.display().to_string(), good.display().to_string());
    for (args, want) in [
        (
            &["watch", "--instance-type", "m5.xxlarge"][..],
            "not in the instance specs",
        ),
        (&["watch", "--baseline", "fast"][..], "is not a rate"),
        (&["watch", "--baseline", "1G/"][..], "is not a rate"),
        (
            &[
                "record",
                "-o",
                "/dev/null/x",
                "--instance-specs",
                "/nonexistent.tsv",
            ][..],
            "/nonexistent.tsv",
        ),
        (&["watch", "--instance-specs", &bad][..], "line 2: 4 fields"),
        (
            &[
                "watch",
                "--instance-specs",
                &good,
                "--instance-type",
                "m5.xlarge",
            ][..],
            "not in the instance specs",
        ),
    ] {
        let (code, stderr) = run(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// (exit code, stderr) of `throttlescope ARGS`.
fn run(args: &[&str]) -> (i32, String) {
    status(Command::new(binary()).args(args))
}
