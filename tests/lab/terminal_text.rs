//! Text from other users reaches the operator's terminal inert: a process
//! that names itself with escape sequences and a newline (prctl, as any
//! unprivileged process may) sends real TCP in a lab; `watch --plain`,
//! `report` and `replay` print its name as visible escapes, no byte of it
//! raw. (The full-screen view: tests/lab/tui_tmux.rs.) Run as root.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::lab_support::traffic::{Bulk, ProcessName};
use crate::lab_support::Lab;
use crate::support::TempDir;
use crate::support::{binary, run};

/// 12 bytes: clear screen, a newline, set the window title, bell.
pub const HOSTILE: &str = "\x1b[2J\nX\x1b]0;P\x07";
/// How it must read instead.
const SHOWN: &str = "\\x1b[2J\\nX\\x1b]0;P\\x07";

fn check(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    assert!(
        !out.contains(&0x1b),
        "{what}: a raw ESC reached the output:\n{text}"
    );
    assert!(
        !out.contains(&0x07),
        "{what}: a raw BEL reached the output:\n{text}"
    );
    assert!(
        text.contains(SHOWN),
        "{what}: the name is shown escaped:\n{text}"
    );
}

#[test]
fn a_hostile_process_name_is_inert_in_plain_report_and_replay() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("esc");
    let listen: SocketAddr = format!("{}:7301", lab.broker_ip).parse().unwrap();
    // The process's name is what is shown (its sending thread's is kept
    // beside it): both hostile.
    let _name = ProcessName::set(HOSTILE);
    let bulk = Bulk::start_as(
        &lab.broker(),
        &lab.client(),
        listen,
        1,
        Duration::from_secs(8),
        2_000_000,
        Some(HOSTILE),
    );
    let dir = TempDir::new("esc");
    let rec = dir.join("esc.jsonl");
    let out = run(Command::new("ip")
        .args(["netns", "exec", &lab.broker()])
        .arg(binary())
        .args([
            "watch",
            "--plain",
            "--interval",
            "1s",
            "--duration",
            "4s",
            "--record",
            rec.to_str().unwrap(),
        ]));
    bulk.close();
    check("watch --plain", &out.stdout);

    // The recording keeps the name as it was (JSON escapes it its own way).
    let recorded = std::fs::read_to_string(&rec).unwrap();
    assert!(
        recorded.contains(r#""comm":"\u001b[2J\nX\u001b]0;P\u0007""#),
        "{recorded}"
    );

    let report = run(Command::new(binary()).arg("report").arg(&rec));
    check("report", &report.stdout);
    let replay = run(Command::new(binary())
        .args(["replay", "--plain", "--as-fast-as-possible"])
        .arg(&rec));
    check("replay --plain", &replay.stdout);
}
