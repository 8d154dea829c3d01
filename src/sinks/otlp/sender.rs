//! Delivery on its own thread, so a collector that is down, slow or
//! refusing never holds up an interval: the pipeline only queues encoded
//! batches (`Sender::queue` takes a lock for a push), and the queue is
//! bounded: when full, the oldest batch goes, counted. Failed requests are
//! retried, the same batch first (cumulative sums stay in order), after an
//! exponential backoff; one stderr line says delivery is failing and one
//! that it recovered (through the program's one writer, `super::say`).
//!
//! At the end of a run ([`Sender::stop`], then [`Sender::drain`]) the
//! thread delivers what is queued until a deadline the caller gives (what
//! is left of the stop's budget); what it has not delivered by then, the
//! batch in flight included, is given up and counted as dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::http::{self, Endpoint, Outcome};
use crate::model::snapshot::OtlpHealth;

/// Batches waiting at most (one more may be in flight): at one batch a
/// second, 8 s of a collector outage are kept, and memory is bounded by 9
/// encoded batches (a few tens of KB each).
pub const QUEUE_BATCHES: usize = 8;
/// A request's whole life: connect, send, status line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Backoff after a failure: doubles from the first to the cap.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);

/// One encoded request: the signal's path and its protobuf body.
#[derive(Debug, Clone)]
pub struct Batch {
    pub path: &'static str,
    pub body: Vec<u8>,
}

/// What the end of a run left undelivered ([`Sender::drain`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Batches given up since the stop began: those the thread dropped at
    /// a failure once stopping, and those left (waiting or in flight) at
    /// the deadline. All counted in `dropped`.
    pub given_up: u64,
    /// The deadline came with batches still undelivered (the collector did
    /// not answer in time), as opposed to delivery failing outright.
    pub timed_out: bool,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    dropped: AtomicU64,
    failures: AtomicU64,
}

struct Queue {
    batches: VecDeque<Batch>,
    /// The thread holds a batch it is sending or will retry.
    in_flight: bool,
    stopping: bool,
    /// The drain's deadline passed: what was left is counted as dropped
    /// and the thread counts nothing more (it ends with the process).
    abandoned: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    counters: Counters,
}

impl Shared {
    fn new() -> Self {
        Shared {
            queue: Mutex::new(Queue {
                batches: VecDeque::with_capacity(QUEUE_BATCHES),
                in_flight: false,
                stopping: false,
                abandoned: false,
            }),
            wake: Condvar::new(),
            counters: Counters::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Nothing in the queue can be left half-changed by a panic.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

pub struct Sender {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// `dropped` when the stop began ([`Sender::stop`]).
    dropped_at_stop: Option<u64>,
}

/// How a batch is sent: `deliver` for real, a script in tests.
type SendFn = Box<dyn FnMut(&Batch) -> Outcome + Send>;

impl Sender {
    pub fn start(endpoint: Endpoint) -> std::io::Result<Self> {
        let e = endpoint.clone();
        Self::start_with(endpoint, Box::new(move |b| deliver(&e, b)))
    }

    fn start_with(endpoint: Endpoint, mut send: SendFn) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::new());
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("otlp-push".into())
                .spawn(move || run(&shared, &endpoint, &mut send))?
        };
        Ok(Sender {
            shared,
            thread: Some(thread),
            dropped_at_stop: None,
        })
    }

    /// Queues `batch` for delivery; never waits on the network.
    pub fn queue(&self, batch: Batch) {
        let mut q = self.shared.lock();
        if q.batches.len() >= QUEUE_BATCHES {
            q.batches.pop_front();
            self.shared.add(&self.shared.counters.dropped, 1);
        }
        q.batches.push_back(batch);
        drop(q);
        self.shared.wake.notify_one();
    }

    /// The exporter's own counters since it started, carried in the
    /// snapshot's health (`health.otlp`).
    pub fn counters(&self) -> OtlpHealth {
        let c = &self.shared.counters;
        // Under the lock, so the depth and the counts are of one moment.
        let q = self.shared.lock();
        OtlpHealth {
            sent: c.sent.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
            queued: q.batches.len() as u64 + u64::from(q.in_flight),
        }
    }

    /// The run is ending: the thread delivers what is queued and ends, and
    /// gives up at its next failure instead of backing off. Returns at once
    /// (the rest of the stop goes on meanwhile); idempotent.
    pub fn stop(&mut self) {
        if self.dropped_at_stop.is_none() {
            self.dropped_at_stop = Some(self.shared.counters.dropped.load(Ordering::Relaxed));
        }
        self.shared.lock().stopping = true;
        self.shared.wake.notify_all();
    }

    /// Stops ([`Sender::stop`]) and waits for the thread until `deadline()`
    /// (asked again as it waits: a signal during the wait shortens it);
    /// what is still undelivered then, queued or in flight, is counted as
    /// dropped and the thread is left to end with the process. Idempotent:
    /// a second call finds nothing more.
    pub fn drain(&mut self, deadline: &dyn Fn() -> Instant) -> Drained {
        self.stop();
        let Some(t) = self.thread.take() else {
            return Drained::default();
        };
        while !t.is_finished() && Instant::now() < deadline() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let finished = t.is_finished();
        if finished {
            let _ = t.join();
        }
        // What the thread did not get to (all of it when it is stuck in a
        // request): given up, counted.
        let mut q = self.shared.lock();
        let left = q.batches.len() as u64 + u64::from(q.in_flight);
        q.batches.clear();
        q.in_flight = false;
        q.abandoned = true;
        drop(q);
        self.shared.add(&self.shared.counters.dropped, left);
        let timed_out = !finished && left > 0;
        let at_stop = self.dropped_at_stop.unwrap_or(0);
        Drained {
            given_up: self.shared.counters.dropped.load(Ordering::Relaxed) - at_stop,
            timed_out,
        }
    }
}

impl Drop for Sender {
    /// A sender dropped without [`Sender::drain`] (an error path) gives up
    /// at once: nothing waits on the collector, and what is left is still
    /// counted.
    fn drop(&mut self) {
        let now = Instant::now();
        self.drain(&|| now);
    }
}

fn deliver(endpoint: &Endpoint, b: &Batch) -> Outcome {
    http::post(endpoint, b.path, &b.body, REQUEST_TIMEOUT)
}

/// The delivery loop: takes the oldest batch, sends it until it is
/// delivered or refused for good, backing off between failures; ends when
/// stopping and the queue is empty, at the first failure once stopping, or
/// when the drain gave up on it (then it counts nothing more).
fn run(shared: &Shared, endpoint: &Endpoint, send: &mut dyn FnMut(&Batch) -> Outcome) {
    let mut backoff = BACKOFF_FIRST;
    // Failed requests since the last delivery (0: delivering).
    let mut failing = 0u64;
    let dropped_now = |s: &Shared| s.counters.dropped.load(Ordering::Relaxed);
    let mut dropped_before = 0;
    let c = &shared.counters;
    loop {
        let batch = {
            let mut q = shared.lock();
            loop {
                if q.abandoned {
                    return;
                }
                if let Some(b) = q.batches.pop_front() {
                    q.in_flight = true;
                    break b;
                }
                if q.stopping {
                    return;
                }
                q = shared.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        loop {
            let outcome = send(&batch);
            let mut q = shared.lock();
            if q.abandoned {
                // The drain counted this batch as dropped already.
                return;
            }
            match outcome {
                Outcome::Delivered => {
                    q.in_flight = false;
                    shared.add(&c.sent, 1);
                    drop(q);
                    if failing > 0 {
                        super::say(format_args!(
                            "throttlescope: OTLP {}: delivery recovered after {failing} failed requests; {} batches dropped meanwhile",
                            endpoint.url(""),
                            dropped_now(shared) - dropped_before
                        ));
                    }
                    failing = 0;
                    backoff = BACKOFF_FIRST;
                    break;
                }
                Outcome::Rejected(why) => {
                    // Sending it again would be refused again: count it,
                    // say so once, and go on with the next.
                    q.in_flight = false;
                    shared.add(&c.failures, 1);
                    shared.add(&c.dropped, 1);
                    drop(q);
                    if failing == 0 {
                        super::say(format_args!(
                            "throttlescope: OTLP {}: the collector refused a batch ({why}); it is dropped, not retried",
                            endpoint.url(batch.path)
                        ));
                    }
                    break;
                }
                Outcome::Retry(why) => {
                    shared.add(&c.failures, 1);
                    if q.stopping {
                        // The run is over: no more waiting on a collector
                        // that does not answer.
                        let left = q.batches.len() as u64 + 1;
                        q.batches.clear();
                        q.in_flight = false;
                        shared.add(&c.dropped, left);
                        return;
                    }
                    if failing == 0 {
                        dropped_before = dropped_now(shared);
                        drop(q);
                        super::say(format_args!(
                            "throttlescope: OTLP {}: delivery failing ({why}); retrying with backoff up to {} s, keeping the newest {QUEUE_BATCHES} batches",
                            endpoint.url(batch.path),
                            BACKOFF_CAP.as_secs()
                        ));
                        q = shared.lock();
                    }
                    failing += 1;
                    // Sleeps the backoff, woken early only to stop.
                    let until = Instant::now() + backoff;
                    while !q.stopping {
                        let Some(left) = until.checked_duration_since(Instant::now()) else {
                            break;
                        };
                        q = shared
                            .wake
                            .wait_timeout(q, left)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    if q.abandoned {
                        return;
                    }
                    backoff = (backoff * 2).min(BACKOFF_CAP);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn batch(n: u8) -> Batch {
        Batch {
            path: "/v1/metrics",
            body: vec![n],
        }
    }

    fn endpoint() -> Endpoint {
        Endpoint::parse("http://127.0.0.1:9").unwrap()
    }

    /// A full queue drops its oldest batch, counted, and never grows.
    #[test]
    fn a_full_queue_drops_the_oldest() {
        let s = Sender {
            shared: Arc::new(Shared::new()),
            thread: None,
            dropped_at_stop: None,
        };
        for n in 0..20 {
            s.queue(batch(n));
        }
        let q = s.shared.lock();
        assert_eq!(q.batches.len(), QUEUE_BATCHES);
        assert_eq!(q.batches.front().unwrap().body, vec![12]);
        drop(q);
        assert_eq!(s.counters().dropped, 12);
        assert_eq!(s.counters().queued, QUEUE_BATCHES as u64);
    }

    /// Delivered, retried after a failure (same batch again), refused for
    /// good (dropped, next one), and the loop ends once stopping.
    #[test]
    fn failures_are_retried_and_refusals_dropped() {
        let sh = Arc::new(Shared::new());
        {
            let mut q = sh.lock();
            for n in 0..3 {
                q.batches.push_back(batch(n));
            }
        }
        let mut seen = Vec::new();
        let mut script = vec![
            Outcome::Delivered,
            Outcome::Retry("down".into()),
            Outcome::Delivered,
            Outcome::Rejected("HTTP 400".into()),
        ]
        .into_iter();
        // Stopping only once every batch was tried: stopping ends a retry.
        let sh2 = sh.clone();
        let t = Instant::now();
        run(&sh, &endpoint(), &mut |b| {
            seen.push(b.body[0]);
            if seen.len() == 4 {
                sh2.lock().stopping = true;
            }
            script.next().unwrap()
        });
        assert_eq!(seen, vec![0, 1, 1, 2]);
        let c = &sh.counters;
        assert_eq!(c.sent.load(Ordering::Relaxed), 2);
        assert_eq!(c.failures.load(Ordering::Relaxed), 2);
        assert_eq!(c.dropped.load(Ordering::Relaxed), 1);
        assert!(!sh.lock().in_flight);
        // One backoff of BACKOFF_FIRST was slept.
        assert!(t.elapsed() >= BACKOFF_FIRST);
    }

    /// A collector that never answers: the drain waits only until its
    /// deadline, then counts the batch in flight and those waiting as
    /// dropped; the request that ends later counts nothing more.
    #[test]
    fn a_drain_gives_up_at_its_deadline_and_counts_what_it_left() {
        let (release, held) = mpsc::channel::<()>();
        let (started, in_send) = mpsc::channel::<()>();
        let held = Mutex::new(held);
        let mut s = Sender::start_with(
            endpoint(),
            Box::new(move |_| {
                let _ = started.send(());
                // Blocked until the test lets it go: a silent collector.
                let _ = held.lock().unwrap().recv();
                Outcome::Delivered
            }),
        )
        .unwrap();
        for n in 0..3 {
            s.queue(batch(n));
        }
        in_send.recv().unwrap();
        assert_eq!(
            s.counters(),
            OtlpHealth {
                queued: 3,
                ..Default::default()
            }
        );
        let t = Instant::now();
        let deadline = t + Duration::from_millis(200);
        let d = s.drain(&|| deadline);
        let took = t.elapsed();
        assert!(took >= Duration::from_millis(200), "{took:?}");
        assert!(took < Duration::from_millis(600), "{took:?}");
        assert_eq!(
            d,
            Drained {
                given_up: 3,
                timed_out: true
            }
        );
        // The request in flight ends after the drain gave it up: counted
        // once (dropped), never also as sent.
        release.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let c = s.counters();
        assert_eq!((c.sent, c.dropped, c.queued), (0, 3, 0));
        // A second drain finds nothing more.
        assert_eq!(s.drain(&Instant::now), Drained::default());
    }

    /// A collector that answers: the drain delivers what was queued and
    /// gives up nothing.
    #[test]
    fn a_drain_delivers_what_is_queued() {
        let mut s = Sender::start_with(endpoint(), Box::new(|_| Outcome::Delivered)).unwrap();
        for n in 0..5 {
            s.queue(batch(n));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        assert_eq!(s.drain(&|| deadline), Drained::default());
        let c = s.counters();
        assert_eq!((c.sent, c.dropped, c.queued), (5, 0, 0));
    }

    /// Failing once stopping: the batch and those behind it are given up
    /// at once (no backoff), counted, and the drain reports them.
    #[test]
    fn a_failure_during_the_drain_gives_up_at_once() {
        let mut s =
            Sender::start_with(endpoint(), Box::new(|_| Outcome::Retry("refused".into()))).unwrap();
        for n in 0..4 {
            s.queue(batch(n));
        }
        let t = Instant::now();
        let deadline = t + Duration::from_secs(5);
        let d = s.drain(&|| deadline);
        // The first failure may come before the stop (one backoff begun,
        // cut short by it), the next after: no backoff is sat through.
        assert!(t.elapsed() < BACKOFF_FIRST, "{:?}", t.elapsed());
        assert_eq!(
            d,
            Drained {
                given_up: 4,
                timed_out: false
            }
        );
        let c = s.counters();
        assert_eq!((c.sent, c.dropped, c.queued), (0, 4, 0));
        assert!((1..=2).contains(&c.failures), "{c:?}");
    }
}
