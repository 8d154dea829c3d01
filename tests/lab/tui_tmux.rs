//! The full-screen view on a real terminal: `throttlescope watch` runs in a
//! tmux pane (its own tmux server) in the broker namespace of a lab shaped
//! as `hv_queuing`, with one heavy flow and two light ones. The test reads
//! the pane as a person would: the verdict, the interface and the heavy
//! flow appear; keys sort, filter and pause; resizing to a small and a tiny
//! window keeps it alive; `q` exits with status 0 and gives the terminal
//! back (main screen, cursor shown, canonical mode and echo on).
//!
//! A replay in the view stays on its last interval until `q`.
//!
//! Without a terminal, `watch` prints plain lines instead.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::lab_support::traffic::{Bulk, ProcessName};
use crate::lab_support::Lab;
use crate::support::run;

/// A tmux server of our own (its socket in a private directory), killed on
/// drop. Panes stay after their process exits, so its status can be read.
struct Tmux {
    dir: PathBuf,
}

impl Tmux {
    /// A private directory for the socket, config and the program's stderr.
    fn new() -> Tmux {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "throttlescope-tui-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        // Set before the pane starts, so a quick exit is not missed.
        std::fs::write(dir.join("tmux.conf"), "set -g remain-on-exit on\n").unwrap();
        Tmux { dir }
    }

    fn stderr_path(&self) -> PathBuf {
        self.dir.join("stderr")
    }

    /// Starts the server with one session running `command`.
    fn start(&self, command: &str, width: u16, height: u16) {
        run(Command::new("tmux")
            .arg("-S")
            .arg(self.dir.join("socket"))
            .arg("-f")
            .arg(self.dir.join("tmux.conf"))
            .args(["new-session", "-d", "-s", "tui"])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command));
    }

    fn tmux(&self, args: &[&str]) -> Output {
        run(Command::new("tmux")
            .arg("-S")
            .arg(self.dir.join("socket"))
            .args(args))
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "tui"]).stdout).into()
    }

    /// The pane's screen and its scrollback.
    fn capture_all(&self) -> String {
        let out = self.tmux(&["capture-pane", "-p", "-S", "-", "-t", "tui"]);
        String::from_utf8_lossy(&out.stdout).into()
    }

    /// A tmux format of the pane, e.g. `#{pane_dead}`.
    fn format(&self, f: &str) -> String {
        String::from_utf8_lossy(&self.tmux(&["display-message", "-p", "-t", "tui", f]).stdout)
            .trim()
            .to_string()
    }

    /// The exit status of the pane's process, once it is dead and reaped.
    /// tmux marks the pane dead when its terminal closes and learns the
    /// status on SIGCHLD; tmux built with libutempter can miss that signal
    /// and leave a zombie (tmux/tmux#311), so it is sent again to our own
    /// server, by its pid, while the status is missing.
    fn dead_status(&self) -> Option<String> {
        let f = self.format("#{pane_dead} #{pane_dead_status} #{pid}");
        let fields: Vec<&str> = f.split(' ').collect();
        match fields.as_slice() {
            ["1", status, _] if !status.is_empty() => Some(status.to_string()),
            ["1", "", server] => {
                if let Ok(pid) = server.parse::<i32>() {
                    // SAFETY: kill(2) with a pid tmux gave for its server.
                    unsafe { libc::kill(pid, libc::SIGCHLD) };
                }
                None
            }
            _ => None,
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "tui"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    fn resize(&self, width: u16, height: u16) {
        self.tmux(&[
            "resize-window",
            "-t",
            "tui",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
    }

    /// Captures the pane until `ok` accepts it, for at most `secs` seconds;
    /// fails showing the last capture and the program's stderr.
    fn wait_for(&self, what: &str, secs: u64, ok: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(secs);
        loop {
            let screen = self.capture();
            if ok(&screen) {
                return screen;
            }
            if Instant::now() > end {
                let stderr = std::fs::read_to_string(self.stderr_path()).unwrap_or_default();
                panic!(
                    "within {secs} s: {what}\n--- pane ---\n{screen}\n--- stderr ---\n{stderr}\n\
                     pane dead, status: {}; the pane process: {}",
                    self.format("#{pane_dead} #{pane_dead_status}"),
                    String::from_utf8_lossy(
                        &Command::new("ps")
                            .args(["-o", "pid,ppid,stat,cmd", "-p", &self.format("#{pane_pid}")])
                            .output()
                            .unwrap()
                            .stdout
                    )
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(self.dir.join("socket"))
            .arg("kill-server")
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The line of the pane that shows the flow with peer port `port`.
fn flow_line<'a>(screen: &'a str, client_ip: &str, port: u16) -> Option<&'a str> {
    let peer = format!("{client_ip}:{port} ");
    screen.lines().find(|l| l.contains(&peer))
}

/// The first flow row under the table header.
fn first_flow(screen: &str) -> Option<&str> {
    let mut lines = screen.lines().skip_while(|l| !l.contains("peer"));
    lines.next()?;
    lines.next()
}

/// `interval N` from the title.
fn interval_of(screen: &str) -> Option<u64> {
    let title = screen.lines().next()?;
    let rest = &title[title.find("interval ")? + "interval ".len()..];
    rest.split_whitespace().next()?.parse().ok()
}

#[test]
fn live_view_in_tmux_shows_verdict_flows_and_survives_resize_and_quit() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("tui");
    lab.tool(&["shape", "hv_queuing"]);
    lab.tool(&["emulator", "start"]);
    let heavy_addr: SocketAddr = format!("{}:7201", lab.broker_ip).parse().unwrap();
    let light_addr: SocketAddr = format!("{}:7202", lab.broker_ip).parse().unwrap();
    // Longer than the test needs; the senders stop by themselves after it
    // (a receiver busy reading does not see `close` before that).
    let send_for = Duration::from_secs(60);
    let heavy = Bulk::start(&lab.broker(), &lab.client(), heavy_addr, 1, send_for, 0);
    // Two light flows of 1 MB/s each against the 200 Mbit/s shaper.
    let light = Bulk::start(
        &lab.broker(),
        &lab.client(),
        light_addr,
        2,
        send_for,
        1_000_000,
    );
    let heavy_port = heavy.peer_ports[0];
    let light_port = light.peer_ports[0];

    let counters = lab.counters.display();
    let tmux = Tmux::new();
    // The pane's shell runs watch, then reports its status and the
    // terminal modes it was left in.
    let command = format!(
        "ip netns exec {ns} {bin} watch --interval 1s --counters b0={counters} 2>{stderr}; \
         s=$?; echo \"watch exited with status $s\"; stty -a; echo 'end of modes'; \
         read line; exit $s",
        ns = lab.broker(),
        bin = crate::support::binary().display(),
        stderr = tmux.stderr_path().display(),
    );
    tmux.start(&command, 160, 50);

    let screen = tmux.wait_for("the verdict, the interface and the heavy flow", 45, |s| {
        s.contains("hypervisor_queuing")
            && s.contains("b0 (veth)")
            && flow_line(s, &lab.client_ip, heavy_port).is_some_and(|l| l.contains("7201"))
    });
    eprintln!("--- 160x50 ---\n{screen}");
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "1 0");
    let heavy_row = flow_line(&screen, &lab.client_ip, heavy_port).unwrap();
    assert!(heavy_row.contains("ESTAB"), "{heavy_row}");
    assert!(screen.contains("health: missed runs"), "{screen}");

    // `s` sorts by tx rate: the heavy flow on top.
    tmux.keys(&["s"]);
    let screen = tmux.wait_for("sorted by tx rate, heavy flow first", 10, |s| {
        s.contains("sort: tx rate")
            && first_flow(s).is_some_and(|l| l.contains(&format!(":{heavy_port} ")))
    });
    eprintln!("--- sorted by tx ---\n{screen}");

    // `/` filters by peer: one light flow left.
    tmux.keys(&["/"]);
    tmux.keys(&["-l", &format!("{}:{light_port}", lab.client_ip)]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("only the filtered flow", 10, |s| {
        s.contains("filter: ")
            && flow_line(s, &lab.client_ip, light_port).is_some()
            && flow_line(s, &lab.client_ip, heavy_port).is_none()
    });
    eprintln!("--- filtered ---\n{screen}");
    // `/` then Esc clears the filter (and does not quit).
    tmux.keys(&["/", "Escape"]);
    tmux.wait_for("the filter cleared", 10, |s| {
        !s.contains("filter: ") && flow_line(s, &lab.client_ip, heavy_port).is_some()
    });

    // `p` freezes the display while intervals keep arriving.
    tmux.keys(&["p"]);
    let screen = tmux.wait_for("paused, with new intervals counted", 15, |s| {
        s.contains("PAUSED (2 new)")
    });
    let frozen_at = interval_of(&screen).expect("interval in the title");
    let screen = tmux.wait_for("still paused", 15, |s| s.contains("PAUSED (3 new)"));
    assert_eq!(interval_of(&screen), Some(frozen_at), "{screen}");
    tmux.keys(&["p"]);
    tmux.wait_for("live again", 10, |s| {
        !s.contains("PAUSED") && interval_of(s).is_some_and(|i| i > frozen_at)
    });

    // Small: still drawn, verdict and interface on screen.
    tmux.resize(60, 15);
    let screen = tmux.wait_for("the view redrawn at 60x15", 10, |s| {
        s.lines().all(|l| l.chars().count() <= 60)
            && s.contains("hypervisor_queuing")
            && s.contains("b0 (veth)")
    });
    eprintln!("--- 60x15 ---\n{screen}");
    assert_eq!(tmux.format("#{pane_dead}"), "0");

    // Tiny: a notice instead of a broken screen.
    tmux.resize(20, 5);
    let screen = tmux.wait_for("a too-small notice at 20x5", 10, |s| {
        s.contains("too small")
    });
    eprintln!("--- 20x5 ---\n{screen}");
    assert_eq!(tmux.format("#{pane_dead}"), "0");

    // Back to full size, then quit.
    tmux.resize(160, 50);
    tmux.wait_for("the full view back", 10, |s| {
        s.contains("hypervisor_queuing")
    });
    tmux.keys(&["q"]);
    // The shell prints watch's status and the terminal modes, then waits
    // for a line, so the pane is still alive to be looked at.
    tmux.wait_for("watch's status and the terminal modes after q", 15, |s| {
        s.contains("end of modes")
    });
    // With the history: resizes may have scrolled the main screen.
    let screen = tmux.capture_all();
    eprintln!("--- after q ---\n{screen}");
    assert!(
        screen.contains("watch exited with status 0"),
        "exit status: {screen}"
    );
    // The shell's own output is on the main screen; the view is gone.
    assert!(!screen.contains("hypervisor_queuing"), "{screen}");
    let modes: Vec<&str> = screen.split_whitespace().collect();
    assert!(
        modes.contains(&"icanon") && modes.contains(&"echo"),
        "raw mode left on: {screen}"
    );
    assert_eq!(
        tmux.format("#{alternate_on} #{cursor_flag} #{pane_dead}"),
        "0 1 0",
        "alternate screen left, cursor shown"
    );
    tmux.keys(&["Enter"]);
    tmux.wait_for("the pane's process gone", 15, |_| {
        tmux.dead_status().is_some()
    });
    assert_eq!(tmux.dead_status().as_deref(), Some("0"));

    // Not joined: the senders stop within `send_for`, and the lab's
    // namespaces go when `lab` drops.
    drop((heavy, light));
}

/// `replay` in the full-screen view: when the recording ends, the view
/// stays on the last interval, says so in its title, still takes keys, and
/// quits on `q` with status 0.
#[test]
fn replay_in_tmux_holds_the_last_interval_until_q() {
    let _gate = crate::lab_support::gate::shared();
    let tmux = Tmux::new();
    let trace = tmux.dir.join("rec.jsonl");
    {
        let lab = Lab::up("trp");
        run(Command::new("ip")
            .args(["netns", "exec", &lab.broker()])
            .arg(crate::support::binary())
            .args([
                "record",
                "--quiet",
                "--interval",
                "1s",
                "--duration",
                "3s",
                "-o",
            ])
            .arg(&trace));
    }
    let last_seq = throttlescope::record::open(&trace)
        .unwrap()
        .map(|s| s.unwrap().seq)
        .last()
        .expect("intervals recorded");

    let command = format!(
        "{bin} replay {trace} --speed 4 2>{stderr}; s=$?; \
         echo \"replay exited with status $s\"; read line; exit $s",
        bin = crate::support::binary().display(),
        trace = trace.display(),
        stderr = tmux.stderr_path().display(),
    );
    tmux.start(&command, 200, 40);
    let screen = tmux.wait_for("the end-of-recording notice", 30, |s| {
        s.contains("end of recording") && s.contains("q quits")
    });
    eprintln!("--- end of recording ---\n{screen}");
    assert_eq!(interval_of(&screen), Some(last_seq), "{screen}");
    assert!(!screen.contains("replay exited"), "{screen}");
    assert_eq!(tmux.format("#{pane_dead} #{alternate_on}"), "0 1");

    // Keys still work on the last screen.
    tmux.keys(&["s"]);
    tmux.wait_for("sorted, still at the end", 10, |s| {
        s.contains("sort: tx rate") && s.contains("end of recording")
    });
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("replay's exit status after q", 15, |s| {
        s.contains("replay exited with status")
    });
    assert!(screen.contains("replay exited with status 0"), "{screen}");
    assert_eq!(tmux.format("#{alternate_on} #{cursor_flag}"), "0 1");
    tmux.keys(&["Enter"]);
    tmux.wait_for("the pane's process gone", 15, |_| {
        tmux.dead_status().is_some()
    });
    assert_eq!(tmux.dead_status().as_deref(), Some("0"));
}

#[test]
fn plain_lines_when_stdout_is_not_a_terminal() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("tpl");
    let out = run(Command::new("ip")
        .args(["netns", "exec", &lab.broker()])
        .arg(crate::support::binary())
        .args(["watch", "--interval", "500ms", "--duration", "2s"]));
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(
        text.matches("-- interval ").count() >= 2,
        "interval headers: {text}"
    );
    assert!(text.lines().any(|l| l.starts_with("b0 ")), "{text}");
    assert!(text.contains("health: "), "{text}");
    // No terminal control: no escape sequences at all.
    assert!(!text.contains('\x1b'), "escape sequences in plain output");
}

/// A sender that named itself with escape sequences and a newline (clear
/// screen, set the window title): the full-screen view shows the name as
/// visible escapes; the pane is neither cleared nor retitled by it.
#[test]
fn a_hostile_process_name_is_inert_in_the_live_view() {
    let _gate = crate::lab_support::gate::shared();
    let lab = Lab::up("tesc");
    let addr: SocketAddr = format!("{}:7203", lab.broker_ip).parse().unwrap();
    // The process's name is what the view shows: renamed while this test
    // runs (the other tests here do not look at names).
    let _name = ProcessName::set("\x1b[2J\nX\x1b]0;P\x07");
    let bulk = Bulk::start_as(
        &lab.broker(),
        &lab.client(),
        addr,
        1,
        Duration::from_secs(20),
        2_000_000,
        Some("\x1b[2J\nX\x1b]0;P\x07"),
    );
    let port = bulk.peer_ports[0];
    let tmux = Tmux::new();
    let command = format!(
        "ip netns exec {ns} {bin} watch --interval 1s 2>{stderr}; read line",
        ns = lab.broker(),
        bin = crate::support::binary().display(),
        stderr = tmux.stderr_path().display(),
    );
    tmux.start(&command, 200, 40);
    let screen = tmux.wait_for("the flow with its owner's name escaped", 30, |s| {
        flow_line(s, &lab.client_ip, port).is_some_and(|l| l.contains("\\x1b[2J\\nX"))
    });
    eprintln!("{screen}");
    assert_ne!(tmux.format("#{pane_title}"), "P", "retitled by the name");
    tmux.keys(&["q"]);
    bulk.close();
}
