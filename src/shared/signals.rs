//! Stop requests: SIGINT, SIGTERM, SIGHUP, and a terminal that went away.
//!
//! A handler only records the signal and writes a byte to a pipe. The
//! interval loop checks [`stop_requested`] and stops cleanly: the probes are
//! detached by their destructors and a recording gets its end record
//! (reason `hangup` when the terminal went away, [`hung_up`]).
//!
//! The loop cannot always get to the flag: a write blocked on a pipe whose
//! reader stopped reading or on a terminal stopped with Ctrl-S, a collection
//! or a program load that takes long. So a watchdog thread, blocked on that
//! pipe and costing nothing until a stop is asked for, ends the process
//! itself when the clean stop has not happened within [`STOP_GRACE`], or at
//! once on a second SIGINT or SIGTERM (a person asking again). A repeated
//! SIGHUP does not hurry it: a hangup often comes twice, from the kernel
//! and from the shell that was left. A forced exit gives the terminal back
//! first (see [`on_forced_exit`]); its status is 128 + the signal.
//!
//! What the stop does after the loop fits in [`STOP_GRACE`] from the first
//! signal: whatever may wait on something outside (the OTLP exporter's
//! last deliveries) waits only for [`stop_budget_left`], less a margin, so
//! the watchdog ends a stop that truly did not finish, never one that was
//! only slow to give up on a collector. Its line says whether a recording
//! was left without its end record ([`recording_open`]).
//!
//! SIGHUP and SIGINT that the parent set to be ignored (`nohup`, a
//! background job of a non-interactive shell) stay ignored.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

use crate::shared::stop_fd::StopFd;

/// How long a clean stop may take before the watchdog ends the process.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(1);

/// The first cause of a stop: its signal number (SIGHUP for a terminal
/// that went away), 0 while none.
static CAUSE: AtomicI32 = AtomicI32::new(0);
/// CLOCK_MONOTONIC (ns) at the first cause of a stop, 0 while none: when
/// the watchdog's [`STOP_GRACE`] started.
static STOP_AT_NS: AtomicU64 = AtomicU64::new(0);
/// Whether a recording's file is open ([`recording_open`]): what a forced
/// exit says it leaves behind.
static RECORDING: AtomicU8 = AtomicU8::new(RECORDING_NONE);
const RECORDING_NONE: u8 = 0;
const RECORDING_OPEN: u8 = 1;
const RECORDING_CLOSED: u8 = 2;
/// SIGINT and SIGTERM received so far.
static URGENT_SIGNALS: AtomicU32 = AtomicU32::new(0);
/// The pipe's write end, -1 before [`install`].
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);
/// What sleepers wait on ([`sleep_or_stop`]): signalled at the first stop,
/// readable from then on. Unset before [`install`]. Reading it is an atomic
/// load and signalling it a write(2), both async-signal-safe.
static STOPPED: OnceLock<StopFd> = OnceLock::new();
/// A `fn()` to run before a forced exit (0: none).
static FORCED_EXIT_HOOK: AtomicUsize = AtomicUsize::new(0);
/// SIGTSTP and SIGCONT seen, for the full-screen view ([`take_job_control`]).
static SUSPEND: AtomicU32 = AtomicU32::new(0);
static CONTINUED: AtomicU32 = AtomicU32::new(0);

/// What the watchdog reads from the pipe.
const WAKE_STOP: u8 = 1;
const WAKE_AGAIN: u8 = 2;

static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    note_stop_time();
    let first = CAUSE
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok();
    let mut again = false;
    if sig == libc::SIGINT || sig == libc::SIGTERM {
        again = URGENT_SIGNALS.fetch_add(1, Ordering::SeqCst) > 0;
    }
    let byte = if again { WAKE_AGAIN } else { WAKE_STOP };
    if first {
        announce_stop();
    }
    if first || again {
        wake(byte);
    }
}

/// Notes when the first stop started (before its cause is set, so whoever
/// sees a stop sees its time): clock_gettime(2) is async-signal-safe.
fn note_stop_time() {
    let now = crate::shared::clock::monotonic_ns().max(1);
    let _ = STOP_AT_NS.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
}

/// Wakes the sleepers. Async-signal-safe.
fn announce_stop() {
    if let Some(stopped) = STOPPED.get() {
        stopped.signal();
    }
}

extern "C" fn on_job_control(sig: libc::c_int) {
    match sig {
        libc::SIGTSTP => SUSPEND.fetch_add(1, Ordering::SeqCst),
        _ => CONTINUED.fetch_add(1, Ordering::SeqCst),
    };
}

/// Writes one byte to the watchdog's pipe (non-blocking: a full pipe
/// already holds a wake-up). Async-signal-safe.
fn wake(byte: u8) {
    let fd = WAKE_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: write(2) on our own pipe from a valid one-byte buffer.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

fn set_handler(sig: libc::c_int, handler: usize, respect_ignore: bool) {
    // SAFETY: sigaction with a zeroed, then filled, struct; the handlers
    // only touch atomics and write(2), which are async-signal-safe.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if respect_ignore
            && libc::sigaction(sig, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
        {
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Installs the handlers and starts the watchdog (idempotent).
pub fn install() {
    INSTALL.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills two descriptors we own from here on.
        let piped = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if piped == 0 {
            let read_fd = fds[0];
            // The read end blocks: the watchdog sleeps in read(2).
            // SAFETY: fcntl on the descriptor just created.
            unsafe { libc::fcntl(read_fd, libc::F_SETFL, 0) };
            WAKE_FD.store(fds[1], Ordering::SeqCst);
            let spawned = std::thread::Builder::new()
                .name("stop-watchdog".into())
                .spawn(move || watchdog(read_fd));
            if spawned.is_err() {
                WAKE_FD.store(-1, Ordering::SeqCst);
            }
        }
        if let Ok(stopped) = StopFd::new() {
            let _ = STOPPED.set(stopped);
        }
        let handler = on_signal as *const () as usize;
        set_handler(libc::SIGINT, handler, true);
        set_handler(libc::SIGTERM, handler, false);
        set_handler(libc::SIGHUP, handler, true);
    });
}

/// Whether a stop was asked for (a signal, or the terminal went away).
pub(crate) fn stop_requested() -> bool {
    CAUSE.load(Ordering::SeqCst) != 0
}

/// Whether the stop came from a hangup: SIGHUP, or the terminal lost.
pub fn hung_up() -> bool {
    CAUSE.load(Ordering::SeqCst) == libc::SIGHUP
}

/// The terminal went away (EOF, EIO or a hangup seen on it, a failed
/// write): a stop like SIGHUP's, with the same watchdog behind it.
pub(crate) fn terminal_lost() {
    note_stop_time();
    if CAUSE
        .compare_exchange(0, libc::SIGHUP, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        announce_stop();
        wake(WAKE_STOP);
    }
}

/// What is left of the stop's [`STOP_GRACE`] before the watchdog ends the
/// process; None while no stop was asked for (no watchdog is counting).
pub(crate) fn stop_budget_left() -> Option<Duration> {
    if !stop_requested() {
        return None;
    }
    let at = STOP_AT_NS.load(Ordering::SeqCst);
    let since = Duration::from_nanos(crate::shared::clock::monotonic_ns().saturating_sub(at));
    Some(STOP_GRACE.saturating_sub(since))
}

/// A recording's file is open (`true`: created; `false`: closed with its
/// end record), for what a forced exit says: "lacks its end record" only
/// when one does.
pub(crate) fn recording_open(open: bool) {
    let state = if open {
        RECORDING_OPEN
    } else {
        RECORDING_CLOSED
    };
    RECORDING.store(state, Ordering::SeqCst);
}

/// `hook` runs (on the watchdog's thread) before a forced exit: it must
/// give back what the process changed outside itself (the terminal) without
/// taking a lock the stuck thread may hold, such as stdout's.
pub(crate) fn on_forced_exit(hook: fn()) {
    FORCED_EXIT_HOOK.store(hook as usize, Ordering::SeqCst);
}

/// Catches SIGTSTP and SIGCONT (`on`) for a view that must give the
/// terminal back before it stops and take it again after, or restores their
/// default actions.
pub(crate) fn take_job_control(on: bool) {
    let handler = if on {
        on_job_control as *const () as usize
    } else {
        libc::SIG_DFL
    };
    set_handler(libc::SIGTSTP, handler, false);
    set_handler(libc::SIGCONT, handler, false);
}

/// SIGTSTP arrived since the last call.
pub(crate) fn take_suspend() -> bool {
    SUSPEND.swap(0, Ordering::SeqCst) > 0
}

/// SIGCONT arrived since the last call.
pub(crate) fn take_continued() -> bool {
    CONTINUED.swap(0, Ordering::SeqCst) > 0
}

/// Stops this process as Ctrl-Z would, with SIGTSTP's default action, and
/// returns when it is continued.
pub(crate) fn stop_self() {
    set_handler(libc::SIGTSTP, libc::SIG_DFL, false);
    // SAFETY: raise(3) on this process.
    unsafe { libc::raise(libc::SIGTSTP) };
    set_handler(libc::SIGTSTP, on_job_control as *const () as usize, false);
    CONTINUED.store(0, Ordering::SeqCst);
}

/// Sleeps up to `d`, returning early (true) when a stop was requested.
/// The sleep is one poll(2) on [`STOPPED`] (a stop makes it readable), not
/// a loop of short sleeps: an idle observer wakes once an
/// interval, not twenty times. Before [`install`] it looks at the flag
/// every 50 ms.
pub fn sleep_or_stop(d: Duration) -> bool {
    let end = Instant::now() + d;
    let stopped = STOPPED.get();
    loop {
        if stop_requested() {
            return true;
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        let left = end - now;
        let Some(stopped) = stopped else {
            std::thread::sleep(left.min(Duration::from_millis(50)));
            continue;
        };
        let mut pfd = stopped.pollfd();
        // Rounded up, so the loop does not spin on a sub-millisecond rest.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one pollfd, as passed, on our own eventfd.
        unsafe { libc::poll(&mut pfd, 1, ms) };
    }
}

/// Sleeps in read(2) until a stop is asked for, then gives the clean stop
/// [`STOP_GRACE`] (or until a second urgent signal) before ending the
/// process itself.
fn watchdog(fd: libc::c_int) {
    loop {
        match read_byte(fd, None) {
            Some(WAKE_STOP) => break,
            Some(_) => {}
            None => return,
        }
    }
    // Counted from the stop itself (the signal handler noted when), the
    // same start [`stop_budget_left`] counts from.
    let deadline = Instant::now() + stop_budget_left().unwrap_or(STOP_GRACE);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            force_exit(&format!(
                "the clean stop did not finish within {} s",
                STOP_GRACE.as_secs()
            ));
        }
        if read_byte(fd, Some(left)) == Some(WAKE_AGAIN) {
            force_exit("a second signal came during the stop");
        }
    }
}

/// One byte from the pipe; None when the wait timed out or the pipe failed.
fn read_byte(fd: libc::c_int, timeout: Option<Duration>) -> Option<u8> {
    loop {
        let ms = timeout.map_or(-1, |t| t.as_millis().clamp(1, i32::MAX as u128) as i32);
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return None;
        }
        let mut byte = 0u8;
        // SAFETY: read(2) of one byte into a local.
        let r = unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) };
        return (r == 1).then_some(byte);
    }
}

/// Gives the terminal back and exits with 128 + the signal, saying why on
/// stderr when stderr can take it without blocking.
fn force_exit(why: &str) -> ! {
    let hook = FORCED_EXIT_HOOK.load(Ordering::SeqCst);
    if hook != 0 {
        // SAFETY: only `fn()` values are stored (on_forced_exit).
        let hook: fn() = unsafe { std::mem::transmute::<usize, fn()>(hook) };
        hook();
    }
    let sig = CAUSE.load(Ordering::SeqCst).max(1);
    let left = match RECORDING.load(Ordering::SeqCst) {
        RECORDING_OPEN => " (the recording in progress lacks its end record)",
        RECORDING_CLOSED => " (the recording was closed with its end record)",
        _ => "",
    };
    let msg = format!("throttlescope: {why}; exiting now{left}\n");
    write_if_ready(libc::STDERR_FILENO, msg.as_bytes());
    // SAFETY: _exit ends the process without running anything the stuck
    // thread may be in the middle of.
    unsafe { libc::_exit(128 + sig) }
}

/// Writes `bytes` to `fd` only when it can take them now: a forced exit
/// must not block on the very terminal or pipe that held the stop up.
pub(crate) fn write_if_ready(fd: libc::c_int, bytes: &[u8]) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd, write(2) from a valid buffer.
    unsafe {
        if libc::poll(&mut pfd, 1, 0) == 1 && pfd.revents & libc::POLLOUT != 0 {
            libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        }
    }
}
