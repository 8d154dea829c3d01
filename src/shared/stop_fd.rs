//! A stop request a sleeping thread can wait on beside its other
//! descriptors: an eventfd that becomes readable once [`StopFd::signal`]
//! is called, and stays so. Threads that wait in poll(2) for work (the
//! event-ring reader, the metrics server, the interval wait, which the
//! signal handler wakes through one) wait on it too, instead of
//! waking on a timer to look at a flag: an idle observer then costs no
//! wakeups at all.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

#[derive(Debug)]
pub(crate) struct StopFd(OwnedFd);

impl StopFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) returns a new descriptor, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just created and nothing else owns it.
        Ok(StopFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Asks the waiting thread to stop; the descriptor stays readable.
    /// Async-signal-safe: one write(2).
    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a live u64 to our eventfd. It can
        // only fail when the counter is about to overflow, which would take
        // 2^64 calls; it is readable then anyway.
        unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// An entry for poll(2) that reports the stop request.
    pub(crate) fn pollfd(&self) -> libc::pollfd {
        libc::pollfd {
            fd: self.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }
    }
}

impl AsRawFd for StopFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signalled(s: &StopFd) -> bool {
        let mut p = s.pollfd();
        // SAFETY: one pollfd, as passed; a zero timeout never blocks.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents != 0 }
    }

    #[test]
    fn readable_once_signalled_and_after() {
        let s = StopFd::new().unwrap();
        assert!(!signalled(&s));
        s.signal();
        assert!(signalled(&s));
        s.signal();
        assert!(signalled(&s), "stays readable");
    }

    #[test]
    fn a_thread_in_poll_wakes_when_signalled() {
        let s = std::sync::Arc::new(StopFd::new().unwrap());
        let t = {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut p = s.pollfd();
                // SAFETY: one pollfd; no timeout: only the signal ends it.
                unsafe { libc::poll(&mut p, 1, -1) }
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.signal();
        assert_eq!(t.join().unwrap(), 1);
    }
}
