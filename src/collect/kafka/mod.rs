//! The Kafka lookup (issue 44, `--kafka`): a thread of its own asks the
//! local broker's cluster, once per period, who its brokers and consumer
//! group members are (lookup.rs over wire.rs), and publishes the answer;
//! each interval classifies its flows with the latest (src/model/kafka.rs)
//! without waiting for it. A lookup is bounded in time (a deadline shorter
//! than the period) and memory (lookup.rs's bounds); one that fails is
//! counted in health, said once on stderr with what to do (and again only
//! when the reason changes), and flows keep their addresses meanwhile.

mod detect;
mod lookup;
mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::kafka::{KafkaDirectory, KafkaIndex};
use crate::model::snapshot::KafkaHealth;

pub(crate) use detect::check_target;

/// The default period between lookups (`--kafka-period`).
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(30);

/// What `--kafka` asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaTarget {
    /// No lookup.
    Off,
    /// The broker found on this host, if any (looked for every period
    /// until one is).
    Auto,
    /// This broker (`HOST:PORT`), its PLAINTEXT listener.
    Addr(String),
}

#[derive(Debug, Default)]
struct Shared {
    latest: Option<(Arc<KafkaIndex>, Instant)>,
    health: KafkaHealth,
}

/// The running lookup; dropping it stops the thread after its current
/// lookup (which its deadline bounds).
pub struct KafkaLookup {
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl KafkaLookup {
    /// Starts the thread; None for `Off`.
    pub fn start(
        target: KafkaTarget,
        period: Duration,
        say: fn(std::fmt::Arguments<'_>),
    ) -> Option<KafkaLookup> {
        if target == KafkaTarget::Off {
            return None;
        }
        let shared = Arc::new(Mutex::new(Shared {
            health: KafkaHealth {
                target: match &target {
                    KafkaTarget::Addr(a) => a.clone(),
                    _ => "auto".into(),
                },
                ..Default::default()
            },
            ..Default::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (shared.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name("kafka-lookup".into())
            .spawn(move || run(target, period, say, s, st))
            .ok()?;
        Some(KafkaLookup {
            shared,
            stop,
            thread: handle.thread().clone(),
        })
    }

    /// The latest directory and the health to report with it; never waits
    /// for a lookup (the thread holds the lock only to publish).
    pub(crate) fn current(&self) -> (Option<Arc<KafkaIndex>>, KafkaHealth) {
        let s = match self.shared.lock() {
            Ok(s) => s,
            Err(p) => p.into_inner(),
        };
        let mut h = s.health.clone();
        h.directory_age_ms = s
            .latest
            .as_ref()
            .map(|(_, at)| at.elapsed().as_millis() as u64);
        (s.latest.as_ref().map(|(i, _)| i.clone()), h)
    }
}

impl Drop for KafkaLookup {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

fn run(
    target: KafkaTarget,
    period: Duration,
    say: fn(std::fmt::Arguments<'_>),
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
) {
    let mut said: Option<String> = None;
    let mut cost = wire::Cost::default();
    let mut found_said = false;
    let mut client_said = false;
    // A lookup may take at most this long: most of the period, never more
    // than 20 s (a cluster that slow is counted as failing).
    let budget = period.mul_f64(0.8).min(Duration::from_secs(20));
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let found = detect::find_local();
        let (bootstrap, hints, how) = match (&target, found) {
            (KafkaTarget::Addr(a), Ok(Some(f))) => (Some(a.clone()), f.hints, None),
            (KafkaTarget::Addr(a), _) => (Some(a.clone()), Default::default(), None),
            (_, Ok(Some(f))) => (Some(f.bootstrap), f.hints, Some(f.how)),
            (_, Ok(None)) => (None, Default::default(), None),
            (_, Err(why)) => {
                fail(&shared, say, &mut said, why, &cost, started);
                sleep(period, &stop);
                continue;
            }
        };
        let Some(bootstrap) = bootstrap else {
            // Auto and no broker here (yet): nothing to say, nothing failed.
            sleep(period, &stop);
            continue;
        };
        if let Some(how) = how.filter(|_| !found_said) {
            say(format_args!(
                "throttlescope: Kafka: asking {bootstrap}: {how}"
            ));
            found_said = true;
        }
        let res = lookup::lookup(&bootstrap, &hints, started + budget, &mut cost);
        match res {
            Ok(looked) => {
                let dir: KafkaDirectory = looked.dir;
                if dir.client_host && !client_said {
                    say(format_args!(
                        "throttlescope: Kafka: no broker of the cluster runs here ({bootstrap} \
                         is another host's address and no kafka.Kafka process is in this \
                         namespace): this host's flows to the brokers read as other_client"
                    ));
                    client_said = true;
                }
                let partial = (!looked.partial.is_empty()).then(|| looked.partial.join("; "));
                if let Some(p) = &partial {
                    if said.as_deref() != Some(p) {
                        say(format_args!(
                            "throttlescope: Kafka: lookup in part: {p}; the groups those \
                             brokers coordinate are missing (counted in health)"
                        ));
                        said = Some(p.clone());
                    }
                } else if said.take().is_some() {
                    say(format_args!(
                        "throttlescope: Kafka: the lookup of {bootstrap} works again"
                    ));
                }
                let mut s = match shared.lock() {
                    Ok(s) => s,
                    Err(p) => p.into_inner(),
                };
                let h = &mut s.health;
                h.target = bootstrap.clone();
                h.lookups_ok += 1;
                h.last_error = partial;
                h.brokers = dir.brokers.len() as u64;
                h.groups = dir.groups;
                h.members = dir.members_listed;
                h.groups_not_described = dir.groups_not_described;
                h.brokers_not_asked = dir.brokers_not_asked;
                h.requests = cost.requests;
                h.bytes_sent = cost.bytes_sent;
                h.bytes_received = cost.bytes_received;
                h.last_lookup_ms = started.elapsed().as_millis() as u64;
                h.local_broker = dir.local_broker;
                s.latest = Some((Arc::new(KafkaIndex::new(dir)), Instant::now()));
            }
            Err(e) => fail(&shared, say, &mut said, format!("{e:#}"), &cost, started),
        }
        sleep(period.saturating_sub(started.elapsed()), &stop);
    }
}

/// A failed lookup: counted; said when its reason is new. The directory
/// of the last lookup that worked stays in use (its age says how old).
fn fail(
    shared: &Mutex<Shared>,
    say: fn(std::fmt::Arguments<'_>),
    said: &mut Option<String>,
    why: String,
    cost: &wire::Cost,
    started: Instant,
) {
    if said.as_deref() != Some(why.as_str()) {
        say(format_args!(
            "throttlescope: Kafka lookup failed: {why} (observing goes on; flows keep their \
             addresses; counted in health)"
        ));
        *said = Some(why.clone());
    }
    let mut s = match shared.lock() {
        Ok(s) => s,
        Err(p) => p.into_inner(),
    };
    let h = &mut s.health;
    h.lookups_failed += 1;
    h.last_error = Some(why);
    h.requests = cost.requests;
    h.bytes_sent = cost.bytes_sent;
    h.bytes_received = cost.bytes_received;
    h.last_lookup_ms = started.elapsed().as_millis() as u64;
}

fn sleep(d: Duration, stop: &AtomicBool) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::park_timeout(left);
    }
}
