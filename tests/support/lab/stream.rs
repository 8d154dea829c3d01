//! A `watch --json` left running, its lines read as they come: a test waits
//! for what it needs in the lab (traffic flowing, a shaper binding, flows
//! gone idle) by reading intervals, and stops the watch once it has them,
//! instead of giving the lab a fixed time. `watch --duration D` counts from
//! the moment the programs are attached, which takes a second or more on a
//! loaded machine: traffic timed against the spawn of a watch starts, and
//! ends, at a moment the watch does not share.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a streamed watch runs if the test never stops it (it is
/// stopped, with SIGTERM, once the test has its intervals).
pub const STREAM_BOUND: &str = "300s";

/// How long the first interval may take: the programs' load and attach, on
/// a loaded machine with a debug build, and one interval.
pub const FIRST_LINE_WITHIN: Duration = Duration::from_secs(60);

pub struct WatchStream {
    child: Option<Child>,
    lines: Receiver<String>,
    reading: Option<JoinHandle<()>>,
    /// Every line read so far, each ending in a newline.
    out: String,
    /// What the watch is, for messages.
    what: String,
}

impl WatchStream {
    /// Spawns `cmd` (a `watch --json ...` command) with its stdout read by a
    /// thread, line by line: a full pipe would hold the watch's intervals
    /// back.
    pub fn start(mut cmd: Command, what: &str) -> WatchStream {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let stdout = BufReader::new(child.stdout.take().expect("watch's stdout"));
        let (tx, lines) = mpsc::channel();
        let reading = std::thread::spawn(move || {
            for l in stdout.lines() {
                let Ok(l) = l else { return };
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        WatchStream {
            child: Some(child),
            lines,
            reading: Some(reading),
            out: String::new(),
            what: what.to_string(),
        }
    }

    /// The next interval's line, within `within` (kept in the output); a
    /// panic saying `why` it was awaited when none comes.
    pub fn next(&mut self, why: &str, within: Duration) -> String {
        match self.lines.recv_timeout(within) {
            Ok(l) => {
                self.out.push_str(&l);
                self.out.push('\n');
                l
            }
            Err(RecvTimeoutError::Timeout) => {
                panic!("{}: no interval within {within:?} {why}", self.what)
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.as_mut().and_then(|c| c.wait().ok());
                panic!("{}: ended ({status:?}) before an interval {why}", self.what)
            }
        }
    }

    /// Waits for the first interval: the programs are attached and the
    /// counters' first reading is taken, so traffic started after it is
    /// all seen.
    pub fn attached(&mut self) -> String {
        self.next("after the start (attach)", FIRST_LINE_WITHIN)
    }

    /// Reads intervals until `enough` holds for the lines read so far (all
    /// of them, parsed by the caller), within `within` in all; a panic
    /// saying `what_for` when it never does.
    pub fn until(
        &mut self,
        what_for: &str,
        within: Duration,
        mut enough: impl FnMut(&str) -> bool,
    ) {
        let start = Instant::now();
        while !enough(&self.out) {
            let left = within.saturating_sub(start.elapsed());
            assert!(
                !left.is_zero(),
                "{}: {what_for} not reached within {within:?}; its intervals:\n{}",
                self.what,
                self.out
            );
            // Each interval is awaited for what is left, at least 10 s (an
            // interval that is due but late is not a timeout of the wait).
            self.next(what_for, left.max(Duration::from_secs(10)));
        }
    }

    /// Keeps the lines that came since the last read, without waiting: the
    /// next `next` is an interval that ends after this call.
    pub fn drain(&mut self) {
        while let Ok(l) = self.lines.try_recv() {
            self.out.push_str(&l);
            self.out.push('\n');
        }
    }

    /// Stops the watch (SIGTERM: a clean stop) and returns every line it
    /// wrote; it must exit 0.
    pub fn stop(mut self) -> String {
        let mut child = self.child.take().expect("a running watch");
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        if let Some(r) = self.reading.take() {
            r.join().expect("reading the watch's output");
        }
        self.drain();
        let status = child.wait().expect("waiting for watch");
        assert!(status.success(), "{}: stopped with {status}", self.what);
        std::mem::take(&mut self.out)
    }
}

impl Drop for WatchStream {
    /// A test that failed on the way: the watch is killed, not left behind.
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
