//! SIGINT/SIGTERM/SIGHUP set a flag (a closed terminal or session ends a
//! recording with its end record, as Ctrl-C does); the interval loop checks it and stops cleanly,
//! so the probes are detached by their destructors.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs the handlers (idempotent).
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGHUP, &sa, std::ptr::null_mut());
    }
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Sleeps up to `d`, returning early (true) when a stop was requested.
pub fn sleep_or_stop(d: std::time::Duration) -> bool {
    let end = std::time::Instant::now() + d;
    loop {
        if stop_requested() {
            return true;
        }
        let now = std::time::Instant::now();
        if now >= end {
            return false;
        }
        std::thread::sleep((end - now).min(std::time::Duration::from_millis(50)));
    }
}
