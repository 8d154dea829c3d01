//! Drains the event ring buffer as it fills, on a thread of its own.
//!
//! Read once per interval, a 4 MiB ring holds ~9,700 close records: a storm
//! of 36,000 closes lost most of them, and with them the flows' last
//! counters. Read as it fills (the programs wake this thread when the ring is
//! a quarter full, bpf/flows.bpf.c `wakeup_flags`), the ring only has to hold
//! what arrives while the thread waits to be scheduled. What it cannot hold
//! still reaches user space: close records wait in `closed_overflow`, other
//! events are counted. The interval's own drain consumes the ring too, so
//! that what is there when an interval ends belongs to it, and a lone event
//! waits for it: the thread does not look on a timer. It sleeps until the
//! ring fills or it is told to stop, so a quiet host costs it no wakeup
//! (it used to look every 100 ms: ten wakeups a second, about 0.5 ms of CPU
//! a second at 10,000 sockets).

use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::RingBuffer;

use super::flows::RawEvent;
use crate::shared::stop_fd::StopFd;

/// Plain (non-close) events kept between two drains at most: what a storm
/// of opens and state changes can pile up while the interval's consumer is
/// busy (each ~100 bytes here, more once encoded). Past it they are counted,
/// not kept. Close records are always kept: each carries a flow's final
/// counters, and there are at most as many as sockets closed.
pub(crate) const MAX_PENDING_PLAIN: usize = 100_000;

/// What the thread has read and not yet handed over.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    pub events: Vec<RawEvent>,
    plain: usize,
    /// Plain events dropped because `MAX_PENDING_PLAIN` were waiting.
    pub over_cap: u64,
    /// Ring-buffer messages that could not be decoded (never expected).
    pub malformed: u64,
}

impl Pending {
    /// Keeps `ev` unless it is a plain event past the cap.
    pub(crate) fn push(&mut self, ev: RawEvent) {
        if matches!(ev, RawEvent::Plain(_)) {
            if self.plain >= MAX_PENDING_PLAIN {
                self.over_cap += 1;
                return;
            }
            self.plain += 1;
        }
        self.events.push(ev);
    }

    /// The events read so far; the counts stay (they are cumulative).
    pub(crate) fn take(&mut self) -> Vec<RawEvent> {
        self.plain = 0;
        std::mem::take(&mut self.events)
    }
}

/// The reader thread. Dropping it stops the thread and waits for it.
pub(crate) struct EventReader {
    ring: Arc<Mutex<RingBuffer<'static>>>,
    pending: Arc<Mutex<Pending>>,
    /// What the thread waits on beside the ring: signalled to stop it.
    stop: Arc<StopFd>,
    thread: Option<JoinHandle<()>>,
}

/// How long the thread pauses after a failed wait, so that a broken ring
/// cannot spin a core.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

impl EventReader {
    /// Starts the thread on `ring`, whose callbacks push into `pending`.
    pub(crate) fn start(
        ring: RingBuffer<'static>,
        pending: Arc<Mutex<Pending>>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(StopFd::new()?);
        let epoll_fd = ring.epoll_fd();
        let ring = Arc::new(Mutex::new(ring));
        let thread = {
            let (stop, ring) = (stop.clone(), ring.clone());
            std::thread::Builder::new()
                .name("ts-events".into())
                .spawn(move || run(epoll_fd, &ring, &stop))?
        };
        Ok(EventReader {
            ring,
            pending,
            stop,
            thread: Some(thread),
        })
    }

    /// Every event in the ring now, and those read before, in ring order:
    /// what is there when the interval ends belongs to it.
    pub(crate) fn take(&self) -> Vec<RawEvent> {
        consume(&self.ring);
        self.lock().take()
    }

    /// Plain events dropped past the cap, and undecodable messages, since
    /// start.
    pub(crate) fn lost(&self) -> (u64, u64) {
        let p = self.lock();
        (p.over_cap, p.malformed)
    }

    /// A message read elsewhere (the overflow map) that could not be decoded.
    pub(crate) fn count_malformed(&self) {
        self.lock().malformed += 1;
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A callback cannot panic while holding it (it only pushes), so a
        // poisoned lock still holds consistent data.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads what the ring holds, through the callbacks. The ring is consumed by
/// one thread at a time: libbpf's consumer is not safe to run concurrently.
fn consume(ring: &Mutex<RingBuffer<'static>>) {
    let ring = ring.lock().unwrap_or_else(|e| e.into_inner());
    let _ = ring.consume_raw();
}

/// Sleeps until the programs wake it (the ring is filling) or it is told to
/// stop, consuming after each wakeup. It waits in poll(2) on libbpf's epoll
/// instance (readable when the ring is) and on the stop eventfd; it never
/// calls epoll_wait on libbpf's instance itself. A failed wait other than
/// EINTR pauses, so a broken ring cannot spin a core.
fn run(epoll_fd: i32, ring: &Mutex<RingBuffer<'static>>, stop: &StopFd) {
    loop {
        let mut fds = [
            libc::pollfd {
                fd: epoll_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            stop.pollfd(),
        ];
        // SAFETY: two pollfd entries, as passed; both descriptors live as
        // long as this thread (the ring and the eventfd are shared with it).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if rc < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            std::thread::sleep(RETRY_PAUSE);
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents != 0 {
            consume(ring);
        }
    }
}

impl Drop for EventReader {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::probes::flows_skel::types::ts_event;

    #[test]
    fn plain_events_past_the_cap_are_counted_closes_always_kept() {
        let mut p = Pending::default();
        for _ in 0..MAX_PENDING_PLAIN + 5 {
            p.push(RawEvent::Plain(ts_event::default()));
        }
        p.push(RawEvent::Close(Box::default()));
        assert_eq!(p.over_cap, 5);
        assert_eq!(p.take().len(), MAX_PENDING_PLAIN + 1);
        // After a take the cap starts again.
        p.push(RawEvent::Plain(ts_event::default()));
        assert_eq!(p.take().len(), 1);
        assert_eq!(p.over_cap, 5);
    }
}
