//! A terminal that goes away, and signals, in a real pseudo-terminal.
//!
//! Each test opens a pty, starts `throttlescope` on its slave (as an SSH
//! session would: a new session whose controlling terminal it is, or, for
//! the hangup seen only as EOF/EIO, without one), reads its screen until it
//! has drawn, then closes the master, as sshd does when the connection
//! drops. The process must exit within 2 s, use under 0.2 s of CPU from the
//! close to its exit (the old view spun at a full core), and a recording
//! must end with its end record. The same for SIGTERM sent to a process
//! whose pty has gone, and for a stop held up by a blocked write (forced,
//! saying so, and saying of a recording only when there is one).

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::lab_support::needs_root;
use crate::support::TempDir;

const EXIT_WITHIN: Duration = Duration::from_secs(2);
const CPU_AT_MOST: f64 = 0.2;

/// How the child gets the terminal.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Session {
    /// Its own session with the pty as controlling terminal: a hangup sends
    /// it SIGHUP, and reads then return EOF.
    Controlling,
    /// The pty as stdio only (a new session without a controlling
    /// terminal): no SIGHUP, only EOF and EIO on the descriptors.
    StdioOnly,
}

/// A child process on the slave side of a pty; the master is drained by a
/// thread (a full pty would block the child's writes) until closed.
struct PtyChild {
    pid: libc::pid_t,
    screen: Arc<Mutex<Vec<u8>>>,
    close: Arc<AtomicBool>,
    drainer: Option<JoinHandle<()>>,
    /// A second descriptor of the master, for typing keys.
    keyboard: Option<File>,
    reaped: bool,
}

fn cpu_of_stat(pid: libc::pid_t) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("child alive");
    let after_name = stat.rsplit_once(')').unwrap().1;
    let f: Vec<&str> = after_name.split_whitespace().collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / hz
}

impl PtyChild {
    fn spawn(args: &[&str], session: Session) -> PtyChild {
        Self::spawn_with_stdin(args, session, true)
    }

    /// `stdin_pty` false: stdin is /dev/null, stdout and stderr the pty.
    fn spawn_with_stdin(args: &[&str], session: Session, stdin_pty: bool) -> PtyChild {
        needs_root("loading the BPF programs");
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 40,
            ws_col: 160,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: openpty fills two descriptors we own from here on.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both were just returned by openpty.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let stdio = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        let mut cmd = Command::new(crate::support::binary());
        cmd.args(args)
            .stdin(if stdin_pty {
                stdio(&slave)
            } else {
                Stdio::null()
            })
            .stdout(stdio(&slave))
            .stderr(stdio(&slave))
            .env("TERM", "xterm-256color");
        let master_fd = master.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::close(master_fd);
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if session == Session::Controlling && libc::ioctl(1, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // Reaped by wait4 in `wait_exit` (which also reads its CPU time),
        // also on drop.
        #[allow(clippy::zombie_processes)]
        let child = cmd.spawn().expect("spawning throttlescope");
        drop(slave);
        let keyboard = Some(File::from(master.try_clone().unwrap()));
        let screen = Arc::new(Mutex::new(Vec::new()));
        let close = Arc::new(AtomicBool::new(false));
        let drainer = {
            let (screen, close) = (screen.clone(), close.clone());
            std::thread::spawn(move || drain(master, &screen, &close))
        };
        PtyChild {
            pid: child.id() as libc::pid_t,
            screen,
            close,
            drainer: Some(drainer),
            keyboard,
            reaped: false,
        }
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the screen holds `what` (the program is up and drawing).
    fn wait_for_screen(&self, what: &str) {
        let end = Instant::now() + Duration::from_secs(30);
        let tail = |s: String| {
            s.chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<String>()
        };
        while !self.screen().contains(what) {
            assert!(
                Instant::now() < end,
                "no {what:?} on the screen within 30 s; it ends with:\n{}",
                tail(self.screen())
            );
            assert!(
                self.try_status().is_none(),
                "exited early:\n{}",
                tail(self.screen())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn try_status(&self) -> Option<()> {
        // Peek without reaping.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid with WNOWAIT leaves the child to be reaped later.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is valid for a WEXITED result.
        (rc == 0 && unsafe { info.si_pid() } == self.pid).then_some(())
    }

    /// Types `keys` on the terminal.
    fn type_keys(&mut self, keys: &[u8]) {
        use std::io::Write;
        self.keyboard.as_mut().unwrap().write_all(keys).unwrap();
    }

    /// Closes the master, as sshd does when the connection drops.
    fn close_pty(&mut self) {
        self.keyboard = None;
        self.close.store(true, Ordering::SeqCst);
        if let Some(d) = self.drainer.take() {
            d.join().unwrap();
        }
    }

    /// The CPU time the process has used so far, in seconds.
    fn cpu(&self) -> f64 {
        cpu_of_stat(self.pid)
    }

    /// Waits up to `limit` for the exit: its wait status and its total CPU
    /// time (from the kernel's accounting at exit, in microseconds).
    fn wait_exit(&mut self, limit: Duration) -> Option<(libc::c_int, f64, Duration)> {
        let start = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: an rusage we own; wait4 on our own child.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            let r = unsafe { libc::wait4(self.pid, &mut status, libc::WNOHANG, &mut ru) };
            if r == self.pid {
                self.reaped = true;
                let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
                return Some((
                    status,
                    secs(ru.ru_utime) + secs(ru.ru_stime),
                    start.elapsed(),
                ));
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.pid, sig) };
    }
}

impl Drop for PtyChild {
    fn drop(&mut self) {
        if !self.reaped {
            self.signal(libc::SIGKILL);
            let _ = self.wait_exit(Duration::from_secs(5));
        }
        self.close.store(true, Ordering::SeqCst);
        if let Some(d) = self.drainer.take() {
            let _ = d.join();
        }
    }
}

/// Reads the master until told to close it (then drops it: the close).
fn drain(master: OwnedFd, screen: &Mutex<Vec<u8>>, close: &AtomicBool) {
    let mut file = File::from(master);
    let mut buf = [0u8; 8192];
    while !close.load(Ordering::SeqCst) {
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } == 1 {
            match file.read(&mut buf) {
                Ok(n) if n > 0 => screen.lock().unwrap().extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

fn exit_code(status: libc::c_int) -> String {
    if libc::WIFEXITED(status) {
        format!("exit {}", libc::WEXITSTATUS(status))
    } else {
        format!("signal {}", libc::WTERMSIG(status))
    }
}

/// The last line of a plain (uncompressed) recording.
fn last_record(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    let last = text.lines().last().expect("a recording with lines");
    serde_json::from_str(last).unwrap()
}

/// Closes the pty of a running child and checks the clean, prompt stop:
/// exit status, time, CPU from the close to the exit.
fn close_and_expect_exit(child: &mut PtyChild, what: &str, expect: &str) {
    let before = child.cpu();
    child.close_pty();
    let (status, cpu_total, took) = child
        .wait_exit(EXIT_WITHIN)
        .unwrap_or_else(|| panic!("{what}: still running {EXIT_WITHIN:?} after its pty closed"));
    let cpu = cpu_total - before;
    eprintln!(
        "{what}: {} after {took:?}, {cpu:.3} s CPU after the close",
        exit_code(status)
    );
    assert_eq!(exit_code(status), expect, "{what}");
    // The stat figure has 10 ms ticks: allow one.
    assert!(
        cpu < CPU_AT_MOST + 0.01,
        "{what}: {cpu:.3} s of CPU between the close and the exit"
    );
}

#[test]
fn watch_with_a_recording_stops_cleanly_when_its_terminal_hangs_up() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    for session in [Session::Controlling, Session::StdioOnly] {
        let dir = TempDir::new("hangup-watch");
        let rec = dir.join("w.jsonl");
        let rec_arg = rec.display().to_string();
        let mut child = PtyChild::spawn(
            &["watch", "--interval", "200ms", "--record", &rec_arg],
            session,
        );
        child.wait_for_screen("live | interval");
        close_and_expect_exit(
            &mut child,
            &format!("watch --record ({session:?})"),
            "exit 129",
        );
        let end = last_record(&rec);
        assert_eq!(end["type"], "end", "{session:?}: last line {end}");
        assert_eq!(end["reason"], "hangup", "{session:?}");
        assert!(end["intervals"].as_u64().unwrap() >= 1);
    }
}

#[test]
fn replay_holding_its_last_screen_stops_when_its_terminal_hangs_up() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    let dir = TempDir::new("hangup-replay");
    let rec = dir.join("r.jsonl");
    let rec_arg = rec.display().to_string();
    let out = crate::support::run(Command::new(crate::support::binary()).args([
        "record",
        "-o",
        &rec_arg,
        "--interval",
        "200ms",
        "--duration",
        "1s",
        "--quiet",
    ]));
    assert!(out.status.success());
    for session in [Session::Controlling, Session::StdioOnly] {
        let mut child = PtyChild::spawn(&["replay", "--speed", "100", &rec_arg], session);
        child.wait_for_screen("end of recording");
        close_and_expect_exit(&mut child, &format!("replay ({session:?})"), "exit 129");
    }
}

#[test]
fn plain_and_json_views_stop_when_their_terminal_goes_away() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    // No SIGHUP here: the next write after the close fails with EIO.
    for view in ["--plain", "--json"] {
        let mut child =
            PtyChild::spawn(&["watch", view, "--interval", "200ms"], Session::StdioOnly);
        child.wait_for_screen(if view == "--json" {
            "\"seq\""
        } else {
            "-- interval 1"
        });
        close_and_expect_exit(&mut child, &format!("watch {view}"), "exit 129");
    }
}

#[test]
fn sigterm_to_a_recorder_whose_terminal_has_gone_stops_it_cleanly() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    let dir = TempDir::new("hangup-term");
    let rec = dir.join("t.jsonl");
    let rec_arg = rec.display().to_string();
    // `record` does not use the terminal: it goes on recording after the
    // pty closes (no SIGHUP reaches a process without a controlling
    // terminal), idle, and must still answer SIGTERM.
    let mut child = PtyChild::spawn(
        &["record", "-o", &rec_arg, "--interval", "200ms"],
        Session::StdioOnly,
    );
    child.wait_for_screen("recording to");
    // "recording to" is said before the probes load: the CPU budget is for
    // recording, so it is measured once the first interval is written
    // (loading and the first full dump are not idling).
    let started = std::time::Instant::now();
    while std::fs::read_to_string(&rec).map_or(0, |t| t.lines().count()) < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no interval recorded in 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let before = child.cpu();
    child.close_pty();
    std::thread::sleep(Duration::from_secs(1));
    let idle = child.cpu() - before;
    assert!(
        child.try_status().is_none(),
        "record ended when its pty closed"
    );
    assert!(
        idle < CPU_AT_MOST + 0.01,
        "{idle:.3} s of CPU in the second after its pty closed"
    );
    child.signal(libc::SIGTERM);
    let (status, _, took) = child
        .wait_exit(EXIT_WITHIN)
        .expect("record still running 2 s after SIGTERM");
    eprintln!("record: {} {took:?} after SIGTERM", exit_code(status));
    assert_eq!(exit_code(status), "exit 0");
    let end = last_record(&rec);
    assert_eq!(end["type"], "end", "last line {end}");
    assert_eq!(end["reason"], "stopped");
}

/// `watch --json` into a pipe nobody reads: the write blocks, so the loop
/// never gets to the stop flag. The watchdog ends the process: within the
/// grace after one SIGTERM, at once after a second.
#[test]
fn a_stop_held_up_by_a_blocked_write_is_forced() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    needs_root("loading the BPF programs");
    for signals in [1, 2] {
        let mut fds = [0; 2];
        // SAFETY: pipe fills two descriptors we own from here on.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both were just created.
        let (read_end, write_end) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // The smallest pipe (a page), so that it fills in a few intervals.
        // SAFETY: fcntl on our own descriptor.
        unsafe { libc::fcntl(write_end.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) };
        let mut child = Command::new(crate::support::binary())
            .args(["watch", "--json", "--interval", "100ms"])
            .stdin(Stdio::null())
            .stdout(Stdio::from(write_end))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let blocked = Instant::now() + Duration::from_secs(30);
        loop {
            let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
            if wchan.contains("pipe_write") {
                break;
            }
            assert!(
                Instant::now() < blocked,
                "never blocked writing (wchan {wchan:?})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let start = Instant::now();
        for _ in 0..signals {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < EXIT_WITHIN,
                "{signals} SIGTERM: still running after {EXIT_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        drop(read_end);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        eprintln!("{signals} SIGTERM: {status:?} after {:?}", start.elapsed());
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.code(),
            Some(128 + libc::SIGTERM),
            "{status:?} {stderr}"
        );
        assert!(status.signal().is_none());
        let why = if signals == 1 {
            "did not finish within"
        } else {
            "a second signal"
        };
        assert!(stderr.contains(why), "{signals} SIGTERM: stderr {stderr:?}");
        // Nothing was being recorded: the line does not say a recording
        // lacks its end record.
        assert!(
            !stderr.contains("end record"),
            "{signals} SIGTERM: stderr {stderr:?}"
        );
    }
}

/// Keys come from the controlling terminal when stdin is not one
/// (`watch < /dev/null`); without any terminal to read keys from, the view
/// says why and exits instead of starting blind.
#[test]
fn the_view_reads_keys_from_the_terminal_when_stdin_is_not_one() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    let mut child = PtyChild::spawn_with_stdin(
        &["watch", "--interval", "200ms"],
        Session::Controlling,
        false,
    );
    child.wait_for_screen("live | interval");
    child.type_keys(b"q");
    let (status, _, _) = child.wait_exit(EXIT_WITHIN).expect("q did not quit");
    assert_eq!(exit_code(status), "exit 0");

    let mut child =
        PtyChild::spawn_with_stdin(&["watch", "--interval", "200ms"], Session::StdioOnly, false);
    let (status, _, _) = child
        .wait_exit(Duration::from_secs(30))
        .expect("a view without a terminal for keys kept running");
    assert_eq!(exit_code(status), "exit 1");
    let screen = child.screen();
    assert!(
        screen.contains("no controlling terminal") && screen.contains("--plain"),
        "said: {screen}"
    );
}

/// Stopped and continued: SIGSTOP then SIGCONT (the shell may have reset
/// the terminal meanwhile) makes the view take the terminal again and go
/// on; SIGTSTP gives the terminal back first (here, in an orphaned process
/// group, the kernel does not stop it, so it takes it back at once). Then
/// `q` still quits with status 0, the terminal given back.
#[test]
fn a_stopped_and_continued_view_takes_its_terminal_again() {
    let _gate = crate::lab_support::gate::alone("it holds a stop to its time budget");
    const ENTER: &str = "\x1b[?1049h";
    const LEAVE: &str = "\x1b[?1049l";
    let mut child = PtyChild::spawn(&["watch", "--interval", "200ms"], Session::Controlling);
    child.wait_for_screen("live | interval");
    assert_eq!(child.screen().matches(ENTER).count(), 1);
    child.signal(libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    let cpu = child.cpu();
    std::thread::sleep(Duration::from_millis(500));
    assert!(child.cpu() - cpu < 0.02, "ran while stopped");
    child.signal(libc::SIGCONT);
    let back = Instant::now() + Duration::from_secs(10);
    while child.screen().matches(ENTER).count() < 2 {
        assert!(Instant::now() < back, "not taken again after SIGCONT");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.signal(libc::SIGTSTP);
    while child.screen().matches(ENTER).count() < 3 {
        assert!(Instant::now() < back, "not taken again after SIGTSTP");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        child.screen().matches(LEAVE).count() >= 2,
        "terminal not given back"
    );
    child.type_keys(b"q");
    let (status, _, _) = child.wait_exit(EXIT_WITHIN).expect("q did not quit");
    assert_eq!(exit_code(status), "exit 0");
    assert!(child.screen().ends_with("\x1b[?25h") || child.screen().contains(LEAVE));
}
