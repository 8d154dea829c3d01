//! When the per-packet programs run (`--per-packet`, issue #47): the
//! host-queue and peak-rate programs pass every packet, and near the floor
//! the hooks a packet passes are what the observer costs a busy host. With
//! `auto` they run while they can explain something and are paused while
//! the host is quiet (docs/architecture.md, "Per-packet programs while
//! needed").
//!
//! The decision is a function of what the interval measured without them:
//! the snapshot's allowance counters and host drops (on_kfree_skb runs per
//! drop, not per packet, and stays), and each interface's root qdisc as
//! `tc -s qdisc` reads it (src/collect/qdisc_roots.rs: a queue that stands
//! without dropping). It does not ask the analysis: data flows one way,
//! from the probes to the sinks.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::collect::qdisc_roots::RootQueue;

use crate::model::snapshot::{is_qdisc_drop_reason, AllowanceCounters, PerPacketState, Snapshot};

/// `--per-packet`: when the per-packet programs run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PerPacketMode {
    /// Every interval: every figure measured, from the first packet.
    Always,
    /// While an allowance counter moves or a root qdisc holds 64 KiB or
    /// drops, for 10 intervals after, and one interval in 10 while quiet;
    /// paused otherwise. The default: a quiet host pays nothing per packet.
    #[default]
    Auto,
}

/// Intervals the programs keep running after the last reason to: an
/// enforcement's quiet seconds (the counters still between two bursts)
/// stay measured.
pub const LINGER_INTERVALS: u64 = 10;

/// A root qdisc holding at least this many bytes at the read runs them: a
/// queue standing (the lab's local queuing holds 190-350 KB), not the few
/// packets any busy qdisc has in it at an instant (a 64-byte flood through
/// a 10 Gbit/s tbf, judged idle of queues by every figure, ran them for a
/// third of its packets at any non-empty reading).
pub const ROOT_BACKLOG_BYTES: u32 = 64 * 1024;

/// One interval in this many runs them anyway: a queue that builds and
/// drains between two reads of the root qdiscs, with no counter moving and
/// no drop, is measured in that interval (docs/architecture.md says what is
/// lost).
pub const SAMPLE_EVERY: u64 = 10;

/// The `auto` decision, interval after interval.
#[derive(Debug, Clone, Default)]
pub struct PerPacketPolicy {
    /// The last reason to run, and the intervals since it.
    last: Option<String>,
    quiet: u64,
    /// Each interface's root qdisc drops at the previous read.
    root_drops: HashMap<String, u32>,
}

impl PerPacketPolicy {
    /// After the interval `snap` closed: whether the programs run in the
    /// next one, and why. `measured`: they ran through the whole of `snap`;
    /// `roots`: the observed interfaces' root qdiscs read at its end.
    pub fn after(
        &mut self,
        snap: &Snapshot,
        measured: bool,
        roots: &[(String, RootQueue)],
    ) -> PerPacketState {
        let state = |attached: bool, why: String| PerPacketState {
            measured,
            attached,
            why,
        };
        let queued = self.queued(roots);
        if let Some(why) = reason(snap).or(queued) {
            self.last = Some(why.clone());
            self.quiet = 0;
            return state(true, why);
        }
        self.quiet += 1;
        if let Some(last) = &self.last {
            if self.quiet < LINGER_INTERVALS {
                return state(
                    true,
                    format!(
                        "{last} {} ago (running {} more)",
                        plural(self.quiet, "interval"),
                        LINGER_INTERVALS - self.quiet
                    ),
                );
            }
        }
        if (snap.seq + 1) % SAMPLE_EVERY == 0 {
            return state(
                true,
                format!("sample: one interval in {SAMPLE_EVERY} runs them while quiet"),
            );
        }
        let since = match &self.last {
            Some(last) => format!("{last} {} ago", plural(self.quiet, "interval")),
            None => "none since start".to_string(),
        };
        state(
            false,
            format!(
                "paused: no allowance counter moved, no qdisc held or dropped packets ({since})"
            ),
        )
    }
}

impl PerPacketPolicy {
    /// A root qdisc that holds a standing queue now (`ROOT_BACKLOG_BYTES`), or dropped since the previous
    /// read (none at the first read of an interface: no baseline).
    fn queued(&mut self, roots: &[(String, RootQueue)]) -> Option<String> {
        let mut why = None;
        for (iface, q) in roots {
            let prev = self.root_drops.insert(iface.clone(), q.drops);
            // None at the first read, or when the count went back (a qdisc
            // replaced): no baseline.
            let dropped = prev.and_then(|p| q.drops.checked_sub(p)).unwrap_or(0);
            if why.is_some() {
                continue;
            }
            if q.backlog_bytes >= ROOT_BACKLOG_BYTES {
                why = Some(format!(
                    "{iface}'s qdisc held {} packets ({} bytes)",
                    q.qlen, q.backlog_bytes
                ));
            } else if dropped > 0 {
                why = Some(format!("{iface}'s qdisc dropped {dropped}"));
            }
        }
        self.root_drops
            .retain(|name, _| roots.iter().any(|(n, _)| n == name));
        why
    }
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The first reason in the interval to run the programs: an allowance
/// counter that rose, or a qdisc's drops, on any interface.
fn reason(snap: &Snapshot) -> Option<String> {
    for i in &snap.interfaces {
        if let Some(name) = i.allowance.sample().and_then(|a| rose(&a.delta)) {
            return Some(format!("{name} rose on {}", i.name));
        }
        let dropped: u64 = i.host_queue.as_ref().map_or(0, |h| {
            h.drops
                .iter()
                .filter(|(r, _)| is_qdisc_drop_reason(r))
                .map(|(_, n)| n)
                .sum()
        });
        if dropped > 0 {
            return Some(format!("{}'s qdisc dropped {dropped}", i.name));
        }
    }
    None
}

/// The first allowance counter that grew, by its `ethtool -S` name.
fn rose(d: &AllowanceCounters) -> Option<&'static str> {
    d.exceeded()
        .into_iter()
        .find(|(_, v)| v.unwrap_or(0) > 0)
        .map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{
        AllowanceSample, AllowanceStatus, HostQueueSample, InterfaceSample,
    };

    fn snap(seq: u64, bw_out: u64, qdisc_drops: u64) -> Snapshot {
        let mut s = Snapshot::example(seq);
        let mut sample = AllowanceSample::default();
        sample.delta.bw_out_allowance_exceeded = Some(bw_out);
        let mut hq = HostQueueSample::default();
        if qdisc_drops > 0 {
            hq.drops.insert("QDISC_DROP".into(), qdisc_drops);
        }
        hq.drops.insert("NOT_SPECIFIED".into(), 7);
        s.interfaces.push(InterfaceSample {
            name: "eth0".into(),
            allowance: AllowanceStatus::Read(Box::new(sample)),
            host_queue: Some(hq),
            ..InterfaceSample::default()
        });
        s
    }

    /// The attached state after each of `snaps`.
    fn run(snaps: &[Snapshot]) -> Vec<PerPacketState> {
        let mut p = PerPacketPolicy::default();
        snaps.iter().map(|s| p.after(s, true, &[])).collect()
    }

    #[test]
    fn quiet_from_the_start_pauses_and_samples_one_interval_in_ten() {
        let states = run(&(0..30).map(|s| snap(s, 0, 0)).collect::<Vec<_>>());
        let on: Vec<u64> = (0..30).filter(|&s| states[s as usize].attached).collect();
        // Decided after seq 9, 19, 29: seq 10, 20, 30 run.
        assert_eq!(on, vec![9, 19, 29]);
        assert!(
            states[0].why.contains("none since start"),
            "{}",
            states[0].why
        );
        assert!(states[9].why.starts_with("sample"), "{}", states[9].why);
    }

    #[test]
    fn an_allowance_counter_runs_them_and_they_linger_after_it() {
        let mut snaps: Vec<Snapshot> = (0..3).map(|s| snap(s, 0, 0)).collect();
        snaps.push(snap(3, 40, 0));
        snaps.extend((4..20).map(|s| snap(s, 0, 0)));
        let states = run(&snaps);
        assert!(!states[2].attached);
        assert!(states[3].attached);
        assert_eq!(states[3].why, "bw_out_allowance_exceeded rose on eth0");
        // After seq 3 for LINGER_INTERVALS - 1 more quiet ones: 4..=12.
        for s in 4..3 + LINGER_INTERVALS {
            assert!(states[s as usize].attached, "seq {s}");
        }
        assert!(
            states[5].why.contains("2 intervals ago (running 8 more)"),
            "{}",
            states[5].why
        );
        let s = (3 + LINGER_INTERVALS) as usize;
        assert!(!states[s].attached, "{}", states[s].why);
        assert!(
            states[s].why.contains("10 intervals ago"),
            "{}",
            states[s].why
        );
    }

    #[test]
    fn a_qdisc_drop_runs_them_and_other_drops_do_not() {
        let states = run(&[snap(0, 0, 0), snap(1, 0, 3)]);
        assert!(!states[0].attached, "a drop of another reason is no reason");
        assert!(states[1].attached);
        assert_eq!(states[1].why, "eth0's qdisc dropped 3");
    }

    #[test]
    fn measured_is_passed_through() {
        let mut p = PerPacketPolicy::default();
        assert!(!p.after(&snap(0, 0, 0), false, &[]).measured);
        assert!(p.after(&snap(1, 0, 0), true, &[]).measured);
    }

    #[test]
    fn a_root_qdisc_holding_packets_or_dropping_runs_them() {
        let mut p = PerPacketPolicy::default();
        let root = |qlen, drops| {
            vec![(
                "b0".to_string(),
                RootQueue {
                    qlen,
                    backlog_bytes: qlen * 1500,
                    drops,
                },
            )]
        };
        // The first read's drops are a baseline, not this interval's.
        assert!(!p.after(&snap(0, 0, 0), true, &root(0, 50)).attached);
        // A few packets at an instant are no standing queue.
        assert!(!p.after(&snap(1, 0, 0), true, &root(12, 50)).attached);
        let s = p.after(&snap(2, 0, 0), true, &root(50, 50));
        assert!(s.attached);
        assert_eq!(s.why, "b0's qdisc held 50 packets (75000 bytes)");
        let mut p = PerPacketPolicy::default();
        p.after(&snap(0, 0, 0), true, &root(0, 50));
        assert_eq!(
            p.after(&snap(1, 0, 0), true, &root(0, 53)).why,
            "b0's qdisc dropped 3"
        );
        // A qdisc replaced (its counter back to 0) is no drop.
        let mut p = PerPacketPolicy::default();
        p.after(&snap(0, 0, 0), true, &root(0, 50));
        assert!(!p.after(&snap(1, 0, 0), true, &root(0, 0)).attached);
    }
}
