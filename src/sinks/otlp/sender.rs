//! Delivery on its own thread, so a collector that is down, slow or
//! refusing never holds up an interval: the pipeline only queues encoded
//! batches (`Sender::queue` takes a lock for a push), and the queue is
//! bounded: when full, the oldest batch goes, counted. Failed requests are
//! retried, the same batch first (cumulative sums stay in order), after an
//! exponential backoff; one stderr line says delivery is failing and one
//! that it recovered.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::http::{self, Endpoint, Outcome};

/// Batches waiting at most (one more may be in flight): at one batch a
/// second, 8 s of a collector outage are kept, and memory is bounded by 9
/// encoded batches (a few tens of KB each).
pub const QUEUE_BATCHES: usize = 8;
/// A request's whole life: connect, send, status line.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Backoff after a failure: doubles from the first to the cap.
pub const BACKOFF_FIRST: Duration = Duration::from_secs(1);
pub const BACKOFF_CAP: Duration = Duration::from_secs(30);
/// How long the end of a run waits for the queue to drain.
const DRAIN_AT_EXIT: Duration = Duration::from_secs(2);

/// One encoded request: the signal's path and its protobuf body.
#[derive(Debug, Clone)]
pub struct Batch {
    pub path: &'static str,
    pub body: Vec<u8>,
}

/// The exporter's own counters since it started, as shown by the
/// Prometheus endpoint and the plain view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OtlpCounters {
    /// Batches the collector took (2xx).
    pub sent: u64,
    /// Batches given up: the oldest at a full queue, those the collector
    /// refused for good, and those still queued when the run ended.
    pub dropped: u64,
    /// Failed requests (each attempt: a batch retried 3 times counts 3).
    pub failures: u64,
}

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    dropped: AtomicU64,
    failures: AtomicU64,
}

struct Queue {
    batches: VecDeque<Batch>,
    stopping: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    counters: Counters,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Nothing in the queue can be left half-changed by a panic.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct Sender {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    pub fn start(endpoint: Endpoint) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                batches: VecDeque::with_capacity(QUEUE_BATCHES),
                stopping: false,
            }),
            wake: Condvar::new(),
            counters: Counters::default(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("otlp-push".into())
                .spawn(move || run(&shared, &endpoint, &mut |b| deliver(&endpoint, b)))?
        };
        Ok(Sender {
            shared,
            thread: Some(thread),
        })
    }

    /// Queues `batch` for delivery; never waits on the network.
    pub fn queue(&self, batch: Batch) {
        let mut q = self.shared.lock();
        if q.batches.len() >= QUEUE_BATCHES {
            q.batches.pop_front();
            self.shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
        q.batches.push_back(batch);
        drop(q);
        self.shared.wake.notify_one();
    }

    pub fn counters(&self) -> OtlpCounters {
        let c = &self.shared.counters;
        OtlpCounters {
            sent: c.sent.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Sender {
    /// Lets the thread deliver what is queued, for `DRAIN_AT_EXIT` at most
    /// (a down collector must not hold the end of a run for the backoff);
    /// past that the thread is left to end with the process.
    fn drop(&mut self) {
        let deadline = Instant::now() + DRAIN_AT_EXIT;
        self.shared.lock().stopping = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

fn deliver(endpoint: &Endpoint, b: &Batch) -> Outcome {
    http::post(endpoint, b.path, &b.body, REQUEST_TIMEOUT)
}

/// The delivery loop: takes the oldest batch, sends it until it is
/// delivered or refused for good, backing off between failures; ends when
/// stopping and the queue is empty, or at the first failure once stopping.
fn run(shared: &Shared, endpoint: &Endpoint, send: &mut dyn FnMut(&Batch) -> Outcome) {
    let mut backoff = BACKOFF_FIRST;
    // Failed requests since the last delivery (0: delivering).
    let mut failing = 0u64;
    let dropped_at_failure = |s: &Shared| s.counters.dropped.load(Ordering::Relaxed);
    let mut dropped_before = 0;
    loop {
        let batch = {
            let mut q = shared.lock();
            loop {
                if let Some(b) = q.batches.pop_front() {
                    break b;
                }
                if q.stopping {
                    return;
                }
                q = shared.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        loop {
            match send(&batch) {
                Outcome::Delivered => {
                    shared.counters.sent.fetch_add(1, Ordering::Relaxed);
                    if failing > 0 {
                        eprintln!(
                            "throttlescope: OTLP {}: delivery recovered after {failing} failed requests; {} batches dropped meanwhile",
                            endpoint.url(""),
                            dropped_at_failure(shared) - dropped_before
                        );
                    }
                    failing = 0;
                    backoff = BACKOFF_FIRST;
                    break;
                }
                Outcome::Rejected(why) => {
                    // Sending it again would be refused again: count it,
                    // say so once, and go on with the next.
                    shared.counters.failures.fetch_add(1, Ordering::Relaxed);
                    shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    if failing == 0 {
                        eprintln!(
                            "throttlescope: OTLP {}: the collector refused a batch ({why}); it is dropped, not retried",
                            endpoint.url(batch.path)
                        );
                    }
                    break;
                }
                Outcome::Retry(why) => {
                    shared.counters.failures.fetch_add(1, Ordering::Relaxed);
                    if failing == 0 {
                        dropped_before = dropped_at_failure(shared);
                        eprintln!(
                            "throttlescope: OTLP {}: delivery failing ({why}); retrying with backoff up to {} s, keeping the newest {QUEUE_BATCHES} batches",
                            endpoint.url(batch.path),
                            BACKOFF_CAP.as_secs()
                        );
                    }
                    failing += 1;
                    let mut q = shared.lock();
                    if q.stopping {
                        // The run is over: no more waiting on a collector
                        // that does not answer.
                        let left = q.batches.len() as u64 + 1;
                        q.batches.clear();
                        shared.counters.dropped.fetch_add(left, Ordering::Relaxed);
                        return;
                    }
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
                    backoff = (backoff * 2).min(BACKOFF_CAP);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Arc<Shared> {
        Arc::new(Shared {
            queue: Mutex::new(Queue {
                batches: VecDeque::new(),
                stopping: false,
            }),
            wake: Condvar::new(),
            counters: Counters::default(),
        })
    }

    fn batch(n: u8) -> Batch {
        Batch {
            path: "/v1/metrics",
            body: vec![n],
        }
    }

    /// A full queue drops its oldest batch, counted, and never grows.
    #[test]
    fn a_full_queue_drops_the_oldest() {
        let s = Sender {
            shared: shared(),
            thread: None,
        };
        for n in 0..20 {
            s.queue(batch(n));
        }
        let q = s.shared.lock();
        assert_eq!(q.batches.len(), QUEUE_BATCHES);
        assert_eq!(q.batches.front().unwrap().body, vec![12]);
        drop(q);
        assert_eq!(s.counters().dropped, 12);
    }

    /// Delivered, retried after a failure (same batch again), refused for
    /// good (dropped, next one), and the loop ends once stopping.
    #[test]
    fn failures_are_retried_and_refusals_dropped() {
        let sh = shared();
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
        let e = Endpoint::parse("http://127.0.0.1:9").unwrap();
        // Stopping only once every batch was tried: stopping ends a retry.
        let sh2 = sh.clone();
        let t = Instant::now();
        run(&sh, &e, &mut |b| {
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
        // One backoff of BACKOFF_FIRST was slept.
        assert!(t.elapsed() >= BACKOFF_FIRST);
    }
}
