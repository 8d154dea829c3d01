//! The /metrics server: one thread, one poll(2) loop, every socket
//! non-blocking.
//!
//! A thread per connection with blocking reads let any local process pin
//! the exporter (idle connections held a thread and a descriptor each,
//! forever; one huge header was buffered whole; an accept() error ended
//! serving for good). Here every resource a client can claim has a bound:
//!
//! - open connections: `connection_cap` (at most 256, at most a quarter of
//!   the descriptor limit); at the cap a new connection evicts the one that
//!   has waited longest for its request, so an idle or slow-loris flood
//!   cannot lock out a scraper, whose request arrives with its connection;
//! - bytes buffered: `MAX_HEADER_BYTES` per connection, never read past;
//! - time: `HEADER_TIMEOUT` to send a request head, `WRITE_TIMEOUT` to take
//!   the answer;
//! - threads: this one.
//!
//! No accept() error ends the loop: out of descriptors, the connection
//! waiting longest is closed for the next; other errors rest the listener
//! for 50 ms. Every refusal is counted (the
//! `throttlescope_metrics_connections_dropped_total` family) and reported
//! on stderr at most once per `REPORT_EVERY`.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http::{self, Published, Response, Taken, MAX_HEADER_BYTES};
use super::state::EndpointCounters;
use crate::shared::stop_fd::StopFd;

/// Open connections at most: Prometheus needs one per scraper, so this is
/// room for many scrapers and a flood, at ~8 KiB of buffer each.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Time from connecting (or from the last answer, on a kept-alive
/// connection) to a complete request head. A scraper sends its request
/// within milliseconds.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Time to take a whole answer. Prometheus' default scrape timeout is
/// 10 s: past it the scraper has given up anyway.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed accept() that evicting cannot cure (no connection to
/// give back, or not EMFILE/ENFILE/ECONNABORTED) the listener rests this
/// long, so a persistent error cannot spin the loop.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// At most one stderr line per this long while connections are refused.
const REPORT_EVERY: Duration = Duration::from_secs(10);
/// Connections accepted per loop turn at most, so requests that arrived
/// meanwhile are read before a burst of new connections could evict them.
const ACCEPT_BURST: usize = 64;

/// The cap on open connections for a soft RLIMIT_NOFILE (`None`:
/// unlimited). A quarter of the descriptors at most: the rest are the
/// collector's (BPF objects, /proc and /sys, namespaces) and the
/// recording's.
pub(crate) fn connection_cap(soft_nofile: Option<u64>) -> usize {
    match soft_nofile {
        None => MAX_CONNECTIONS,
        Some(n) => usize::try_from(n / 4)
            .unwrap_or(usize::MAX)
            .clamp(1, MAX_CONNECTIONS),
    }
}

/// The soft RLIMIT_NOFILE of this process; `None` when unlimited.
pub(crate) fn soft_nofile() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Some(1024); // the usual default; errs on the small side
    }
    (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

/// Which connection to close to make room for a new one: the one that has
/// waited longest for its request (`waiting`, since when). Only when none
/// is waiting (all are taking answers) the oldest of those. `None` for no
/// connections.
pub(crate) fn pick_victim(conns: impl IntoIterator<Item = (bool, Instant)>) -> Option<usize> {
    conns
        .into_iter()
        .enumerate()
        .min_by_key(|&(_, (waiting, since))| (!waiting, since))
        .map(|(i, _)| i)
}

/// Counters shared with the collection side, which copies them into each
/// interval's exposition.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    evicted: AtomicU64,
    timeout: AtomicU64,
    header_too_large: AtomicU64,
    accept_error: AtomicU64,
    open: AtomicU64,
    max: u64,
}

impl Stats {
    pub(crate) fn new(max: usize) -> Stats {
        Stats {
            max: max as u64,
            ..Default::default()
        }
    }

    pub(crate) fn read(&self) -> EndpointCounters {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EndpointCounters {
            evicted: r(&self.evicted),
            timeout: r(&self.timeout),
            header_too_large: r(&self.header_too_large),
            accept_error: r(&self.accept_error),
            open: r(&self.open),
            max: self.max,
        }
    }

    fn count(&self, reason: Refusal) {
        let c = match reason {
            Refusal::Evicted => &self.evicted,
            Refusal::Timeout => &self.timeout,
            Refusal::HeaderTooLarge => &self.header_too_large,
            Refusal::AcceptError => &self.accept_error,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a connection was refused or closed by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    Evicted,
    Timeout,
    HeaderTooLarge,
    AcceptError,
}

/// One client connection.
struct Conn {
    stream: TcpStream,
    /// When the current wait began: for a request (the eviction order),
    /// or for the answer to be taken.
    since: Instant,
    deadline: Instant,
    /// Bytes of the next request received so far; never over
    /// `MAX_HEADER_BYTES`.
    buf: Vec<u8>,
    /// Answers completed on this connection.
    served: u64,
    /// The answer being written, and how much of it is written.
    out: Option<(Response, usize)>,
}

/// What to do with a connection after it was served a readiness event.
enum Next {
    Keep,
    /// Close; `Some` counts it as a drop.
    Close(Option<Refusal>),
}

impl Conn {
    fn new(stream: TcpStream, now: Instant) -> Conn {
        Conn {
            stream,
            since: now,
            deadline: now + HEADER_TIMEOUT,
            buf: Vec::new(),
            served: 0,
            out: None,
        }
    }

    fn waiting(&self) -> bool {
        self.out.is_none()
    }

    /// A kept-alive connection between requests: closing it at its
    /// deadline is ordinary, not a refusal.
    fn between_requests(&self) -> bool {
        self.out.is_none() && self.served > 0 && self.buf.is_empty()
    }

    fn events(&self) -> libc::c_short {
        if self.waiting() {
            libc::POLLIN
        } else {
            libc::POLLOUT
        }
    }

    fn on_ready(&mut self, published: &Published, now: Instant) -> Next {
        if self.waiting() {
            self.read(published, now)
        } else {
            self.write(published, now)
        }
    }

    fn read(&mut self, published: &Published, now: Instant) -> Next {
        let room = MAX_HEADER_BYTES - self.buf.len();
        let mut chunk = [0u8; 4096];
        let want = room.min(chunk.len());
        match self.stream.read(&mut chunk[..want]) {
            // The client closed (or reset): nothing to answer.
            Ok(0) => return Next::Close(None),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if retry(&e) => return Next::Keep,
            Err(_) => return Next::Close(None),
        }
        self.take_request(published, now)
    }

    /// Starts the answer once the buffer holds a whole request head, or
    /// refuses when it cannot hold one.
    fn take_request(&mut self, published: &Published, now: Instant) -> Next {
        let response = match http::take_request(&mut self.buf, published) {
            Taken::Answer(response) => response,
            Taken::TooLarge => {
                self.start(http::refusal(431), now);
                return match self.write(published, now) {
                    Next::Keep => Next::Keep,
                    // Counted whether or not the 431 got out.
                    Next::Close(_) => Next::Close(Some(Refusal::HeaderTooLarge)),
                };
            }
            Taken::Incomplete => return Next::Keep,
        };
        self.start(response, now);
        self.write(published, now)
    }

    fn start(&mut self, response: Response, now: Instant) {
        self.out = Some((response, 0));
        self.since = now;
        self.deadline = now + WRITE_TIMEOUT;
    }

    /// Writes what the socket takes of the answer; at its end closes or
    /// goes back to reading.
    fn write(&mut self, published: &Published, now: Instant) -> Next {
        let Some((response, written)) = &mut self.out else {
            return Next::Keep;
        };
        let head = &response.head;
        let body = response.body_bytes();
        while *written < response.len() {
            // Head and body in one writev: the body is the published
            // text itself, never copied per request.
            let r = if *written < head.len() {
                self.stream
                    .write_vectored(&[IoSlice::new(&head[*written..]), IoSlice::new(body)])
            } else {
                self.stream.write(&body[*written - head.len()..])
            };
            match r {
                Ok(0) => return Next::Close(None),
                Ok(n) => *written += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Keep,
                Err(_) => return Next::Close(None),
            }
        }
        if response.close {
            return Next::Close(None);
        }
        self.out = None;
        self.served += 1;
        self.since = now;
        self.deadline = now + HEADER_TIMEOUT;
        // A pipelined request may already be in the buffer.
        if self.buf.is_empty() {
            Next::Keep
        } else {
            self.take_request(published, now)
        }
    }
}

fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// The stderr line, at most once per `REPORT_EVERY`, and only when
/// something was refused since the last one.
struct Reporter {
    addr: SocketAddr,
    /// When the counts below were reported (the start at first).
    at: Instant,
    reported: EndpointCounters,
    /// The last accept() error, for the next line.
    accept_error: Option<io::Error>,
    quiet_until: Option<Instant>,
}

impl Reporter {
    fn tick(&mut self, stats: &Stats, now: Instant) {
        if self.quiet_until.is_some_and(|t| now < t) {
            return;
        }
        let c = stats.read();
        let r = self.reported;
        let d = |now: u64, then: u64| now - then;
        let (ev, to, big, acc) = (
            d(c.evicted, r.evicted),
            d(c.timeout, r.timeout),
            d(c.header_too_large, r.header_too_large),
            d(c.accept_error, r.accept_error),
        );
        if ev + to + big + acc == 0 {
            return;
        }
        let mut parts = Vec::new();
        if ev > 0 {
            parts.push(format!("{ev} evicted at the cap of {} open", c.max));
        }
        if to > 0 {
            parts.push(format!("{to} timed out"));
        }
        if big > 0 {
            parts.push(format!(
                "{big} with request headers over {MAX_HEADER_BYTES} bytes (431)"
            ));
        }
        if acc > 0 {
            let last = self
                .accept_error
                .as_ref()
                .map_or(String::new(), |e| format!(" (last: {e})"));
            parts.push(format!("{acc} failed accepts{last}"));
        }
        // Under the full-screen view the counts stay in the metrics only.
        if crate::sinks::tui::terminal::is_taken() {
            self.reported = c;
            self.at = now;
            self.accept_error = None;
            self.quiet_until = Some(now + REPORT_EVERY);
            return;
        }
        // Only when stderr can take it now: a blocked stderr (a stopped
        // pipe, a terminal held by Ctrl-S) must not stop the server; the
        // counts are in the metrics either way.
        let line = format!(
            "throttlescope: metrics endpoint {}: dropped connections in the last {:.0} s: {}; \
             still serving ({} open)\n",
            self.addr,
            now.duration_since(self.at).as_secs_f64(),
            parts.join(", "),
            c.open,
        );
        crate::shared::signals::write_if_ready(libc::STDERR_FILENO, line.as_bytes());
        self.reported = c;
        self.at = now;
        self.accept_error = None;
        self.quiet_until = Some(now + REPORT_EVERY);
    }
}

fn ms_until(now: Instant, t: Instant) -> libc::c_int {
    // Rounded up: waking a hair early would only spin once more.
    let d = t.saturating_duration_since(now);
    libc::c_int::try_from(d.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX)
}

/// Serves `listener` (already non-blocking) until `stop` is signalled; at
/// most `cap` connections at once. The thread sleeps in poll(2) until a
/// socket is ready, a deadline (a connection's, the listener's rest, the
/// refusal report's quiet time) comes, or `stop` is signalled: between
/// scrapes it does not wake.
pub(crate) fn run(
    listener: TcpListener,
    published: Published,
    stop: Arc<StopFd>,
    stats: Arc<Stats>,
    cap: usize,
) {
    let addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let mut conns: Vec<Conn> = Vec::with_capacity(cap);
    let mut pollfds: Vec<libc::pollfd> = Vec::with_capacity(cap + 1);
    let mut listen_after: Option<Instant> = None;
    let mut reporter = Reporter {
        addr,
        at: Instant::now(),
        reported: stats.read(),
        accept_error: None,
        quiet_until: None,
    };
    // Dropping a `Conn` closes its socket; this counts why, if it counts.
    let count = |reason: Option<Refusal>| {
        if let Some(r) = reason {
            stats.count(r);
        }
    };

    loop {
        let now = Instant::now();
        conns.retain(|c| {
            if c.deadline > now {
                return true;
            }
            count((!c.between_requests()).then_some(Refusal::Timeout));
            false
        });
        if listen_after.is_some_and(|t| now >= t) {
            listen_after = None;
        }

        pollfds.clear();
        pollfds.push(libc::pollfd {
            // A negative descriptor is skipped: the listener rests.
            fd: if listen_after.is_some() {
                -1
            } else {
                listener.as_raw_fd()
            },
            events: libc::POLLIN,
            revents: 0,
        });
        pollfds.push(stop.pollfd());
        let mut wake: Option<Instant> = None;
        let mut wake_by = |t: Instant| wake = Some(wake.map_or(t, |w| w.min(t)));
        for c in &conns {
            pollfds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events: c.events(),
                revents: 0,
            });
            wake_by(c.deadline);
        }
        if let Some(t) = listen_after {
            wake_by(t);
        }
        // Refusals counted during the report's quiet time are said when
        // it ends.
        if let Some(t) = reporter.quiet_until.filter(|t| *t > now) {
            wake_by(t);
        }
        let timeout = wake.map_or(-1, |t| ms_until(now, t));
        // SAFETY: `pollfds` is a live, initialised array of its length.
        let n = unsafe { libc::poll(pollfds.as_mut_ptr(), pollfds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            // EINTR, or ENOMEM: either way the next turn tries again.
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if pollfds[1].revents != 0 {
            return;
        }
        let now = Instant::now();

        // Requests and answers first, then new connections: a request
        // that has arrived is served before a burst of accepts could
        // evict its connection.
        let mut keep = Vec::with_capacity(conns.len());
        for (c, p) in conns.iter_mut().zip(&pollfds[2..]) {
            let next = if p.revents != 0 {
                c.on_ready(&published, now)
            } else {
                Next::Keep
            };
            keep.push(match next {
                Next::Keep => true,
                Next::Close(reason) => {
                    count(reason);
                    false
                }
            });
        }
        let mut k = keep.into_iter();
        conns.retain(|_| k.next().unwrap_or(true));

        if pollfds[0].revents != 0 {
            accept_some(
                &listener,
                &mut conns,
                cap,
                &stats,
                &mut listen_after,
                &mut reporter,
                now,
            );
        }
        stats.open.store(conns.len() as u64, Ordering::Relaxed);
        reporter.tick(&stats, now);
    }
}

/// Evicts the connection `pick_victim` names, counting it.
fn evict(conns: &mut Vec<Conn>, stats: &Stats) -> bool {
    match pick_victim(conns.iter().map(|c| (c.waiting(), c.since))) {
        Some(i) => {
            conns.swap_remove(i);
            stats.count(Refusal::Evicted);
            true
        }
        None => false,
    }
}

fn accept_some(
    listener: &TcpListener,
    conns: &mut Vec<Conn>,
    cap: usize,
    stats: &Stats,
    listen_after: &mut Option<Instant>,
    reporter: &mut Reporter,
    now: Instant,
) {
    for _ in 0..ACCEPT_BURST.min(cap.div_ceil(4)).max(1) {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue; // closed on drop; cannot happen on a live socket
                }
                if conns.len() >= cap {
                    evict(conns, stats);
                }
                conns.push(Conn::new(stream, now));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                stats.count(Refusal::AcceptError);
                let errno = e.raw_os_error();
                // The client gave up during the handshake: the next one
                // may be fine.
                if errno == Some(libc::ECONNABORTED) {
                    reporter.accept_error = Some(e);
                    continue;
                }
                // Out of descriptors: give one back (the longest-waiting
                // connection) and take the next pending one at once, so
                // a scraper queued behind a flood is reached quickly. Only
                // when there is nothing to give back, rest.
                let out_of_fds = matches!(errno, Some(libc::EMFILE) | Some(libc::ENFILE));
                reporter.accept_error = Some(e);
                if out_of_fds && evict(conns, stats) {
                    continue;
                }
                *listen_after = Some(now + ACCEPT_BACKOFF);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_follows_the_descriptor_limit() {
        assert_eq!(connection_cap(None), MAX_CONNECTIONS);
        assert_eq!(connection_cap(Some(1024)), 256);
        assert_eq!(connection_cap(Some(524_288)), 256);
        assert_eq!(connection_cap(Some(256)), 64);
        assert_eq!(connection_cap(Some(3)), 1);
        assert_eq!(connection_cap(Some(0)), 1);
    }

    #[test]
    fn victim_is_the_longest_waiting_for_a_request() {
        let t0 = Instant::now();
        let t = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(pick_victim([]), None);
        // Writers are spared while anyone waits, however old they are.
        assert_eq!(
            pick_victim([(false, t(0)), (true, t(30)), (true, t(10)), (false, t(5))]),
            Some(2)
        );
        // All taking answers: the oldest of them.
        assert_eq!(
            pick_victim([(false, t(7)), (false, t(3)), (false, t(9))]),
            Some(1)
        );
        assert_eq!(pick_victim([(true, t(1))]), Some(0));
    }
}
