//! From successive reads of a device's statistics to allowance totals and
//! deltas: picks the ENA allowance stats out by name and handles resets,
//! zeroed reads, stats that appear or vanish, and failed reads. No I/O:
//! the reader hands it what it read.

use crate::model::snapshot::{AllowanceCounters, AllowanceSample};

/// How many allowance statistics we know by name.
const N: usize = 11;

/// Which admin command fills a statistic. The ENA driver fetches the ENI
/// allowance stats and the ENA Express (SRD) stats with two separate admin
/// commands, and on failure each fills its own part from a zeroed struct,
/// so a zeroed read is judged per group.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Group {
    Eni = 0,
    Srd = 1,
}

const GROUPS: [Group; 2] = [Group::Eni, Group::Srd];

/// A cumulative counter (delta = growth) or a gauge (delta = the value).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

struct Stat {
    name: &'static str,
    kind: Kind,
    group: Group,
}

/// In the field order of `AllowanceCounters` (see `to_array`).
const STATS: [Stat; N] = [
    stat("bw_in_allowance_exceeded", Kind::Counter, Group::Eni),
    stat("bw_out_allowance_exceeded", Kind::Counter, Group::Eni),
    stat("pps_allowance_exceeded", Kind::Counter, Group::Eni),
    stat("conntrack_allowance_exceeded", Kind::Counter, Group::Eni),
    stat("linklocal_allowance_exceeded", Kind::Counter, Group::Eni),
    stat("conntrack_allowance_available", Kind::Gauge, Group::Eni),
    stat("ena_srd_mode", Kind::Gauge, Group::Srd),
    stat("ena_srd_tx_pkts", Kind::Counter, Group::Srd),
    stat("ena_srd_eligible_tx_pkts", Kind::Counter, Group::Srd),
    stat("ena_srd_rx_pkts", Kind::Counter, Group::Srd),
    stat("ena_srd_resource_utilization", Kind::Gauge, Group::Srd),
];

const fn stat(name: &'static str, kind: Kind, group: Group) -> Stat {
    Stat { name, kind, group }
}

type Values = [Option<u64>; N];

fn to_array(c: &AllowanceCounters) -> Values {
    [
        c.bw_in_allowance_exceeded,
        c.bw_out_allowance_exceeded,
        c.pps_allowance_exceeded,
        c.conntrack_allowance_exceeded,
        c.linklocal_allowance_exceeded,
        c.conntrack_allowance_available,
        c.ena_srd_mode,
        c.ena_srd_tx_pkts,
        c.ena_srd_eligible_tx_pkts,
        c.ena_srd_rx_pkts,
        c.ena_srd_resource_utilization,
    ]
}

fn from_array(v: Values) -> AllowanceCounters {
    AllowanceCounters {
        bw_in_allowance_exceeded: v[0],
        bw_out_allowance_exceeded: v[1],
        pps_allowance_exceeded: v[2],
        conntrack_allowance_exceeded: v[3],
        linklocal_allowance_exceeded: v[4],
        conntrack_allowance_available: v[5],
        ena_srd_mode: v[6],
        ena_srd_tx_pkts: v[7],
        ena_srd_eligible_tx_pkts: v[8],
        ena_srd_rx_pkts: v[9],
        ena_srd_resource_utilization: v[10],
    }
}

/// The ENA driver's admin-queue failure counters: the allowance stats come
/// from an admin command, so a failure since the last read makes it no data.
const ADMIN_FAILURE_STATS: [&str; 2] = ["ena_admin_q_aborted_cmd", "ena_admin_q_no_completion"];

/// The sum of the admin-queue failure counters, None when the device has
/// neither.
fn admin_failures(stats: &[(String, u64)]) -> Option<u64> {
    ADMIN_FAILURE_STATS
        .iter()
        .filter_map(|n| stats.iter().find(|(s, _)| s == n).map(|(_, v)| *v))
        .reduce(u64::saturating_add)
}

/// Picks the allowance stats out of everything a device reports. Matching
/// is by exact name; a name reported twice counts once (the first).
pub(crate) fn extract(stats: &[(String, u64)]) -> AllowanceCounters {
    let mut v: Values = [None; N];
    for (name, value) in stats {
        if let Some(i) = STATS.iter().position(|s| s.name == name) {
            v[i].get_or_insert(*value);
        }
    }
    from_array(v)
}

/// A counter that went down is believed reset only when its new value is
/// at most this share of the old one: 24,648 back to 19,920 is a step back
/// (a stale or second writer, a glitch), not a reset.
const NEAR_ZERO_SHARE: u64 = 10;

/// ...and at most what the counter could have counted since the reset: the
/// most it grew in one read (times [`NEAR_ZERO_GROWTHS`]), or this many, the
/// untrusted-read slack, for a counter that never grew much.
const NEAR_ZERO_FLOOR: u64 = 10_000;
const NEAR_ZERO_GROWTHS: u64 = 2;

/// A decrease (a reset or a step back) this few reads after the previous
/// one is a repeat: real resets are rare (a driver or device reset), a
/// source that goes down again and again is not counting.
const DECREASE_MEMORY: u64 = 60;

/// After repeated decreases, the source is trusted again once this many
/// reads in a row went without one (the read that completes them is the
/// first trusted).
const CONSISTENT_READS: u64 = 5;

/// Whether a counter that went from `old` down to `new` was reset (and has
/// counted `new` since), given the most it grew in one read so far.
fn is_reset_to_near_zero(old: u64, new: u64, largest_growth: u64) -> bool {
    new.saturating_mul(NEAR_ZERO_SHARE) <= old
        && new <= NEAR_ZERO_FLOOR.max(largest_growth.saturating_mul(NEAR_ZERO_GROWTHS))
}

/// Delta state of one interface's allowance counters.
#[derive(Debug, Default)]
pub(crate) struct AllowanceTracker {
    /// The last accepted value of each stat: what the next delta is taken
    /// from. `None` while the device does not report the stat.
    baseline: Values,
    /// Per group: the previous read was a zeroed read, so another all-zero
    /// read is believed (a real reset) instead of being set aside again.
    zero_pending: [bool; 2],
    resets: u64,
    zeroed_reads: u64,
    read_failures: u64,
    /// The admin-queue failure count of the last good read.
    admin_failures: Option<u64>,
    /// Per counter, the most it grew from one trusted read to the next: what
    /// one interval can plausibly add, for telling a reset from a step back.
    largest_growth: Values,
    /// Reads since the last one in which a counter went down; None before
    /// the first such read.
    reads_since_decrease: Option<u64>,
    /// The source went down repeatedly: no read is trusted until
    /// [`CONSISTENT_READS`] in a row go without a decrease.
    distrusted: bool,
    /// Reads in a row without a decrease.
    consistent_reads: u64,
    /// Per counter, the value it last stepped back from, while that was
    /// less than [`DECREASE_MEMORY`] reads ago: a read that climbs back past
    /// it holds the growth the step back hid (a stale writer giving way to
    /// the counting one), so it is not one interval's growth.
    stepped_back_from: Values,
    /// The previous read was data (not failed, zeroed or untrusted): only
    /// then is this read's growth one interval's, fit for `largest_growth`.
    previous_was_data: bool,
    /// Per gauge, how far it fell between the last two reads when both were
    /// data (0 when it rose or held): whether a gauge now read as 0 was on
    /// course to reach 0 (see [`Self::fell_to_zero_on_course`]).
    gauge_fall: Values,
    untrusted_reads: u64,
}

impl AllowanceTracker {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// One successful read of every statistic the device reports. `None`
    /// when none of them is an allowance stat (the state is forgotten, so
    /// stats that come back later start a fresh baseline).
    pub(crate) fn observe(
        &mut self,
        stats: &[(String, u64)],
        source: &str,
    ) -> Option<AllowanceSample> {
        let now = to_array(&extract(stats));
        if now.iter().all(Option::is_none) {
            self.forget();
            return None;
        }
        let mut totals: Values = [None; N];
        let mut delta: Values = [None; N];
        let mut reset = false;
        let mut zeroed = false;
        // Counters that went down, not to near zero: `name old -> new`; and
        // that climbed back past where they had stepped back from.
        let mut step_backs: Vec<String> = Vec::new();
        let mut climbs_back: Vec<String> = Vec::new();
        if self
            .reads_since_decrease
            .is_none_or(|n| n + 1 >= DECREASE_MEMORY)
        {
            self.stepped_back_from = [None; N];
        }
        for group in GROUPS {
            let members: Vec<usize> = (0..N).filter(|&i| STATS[i].group == group).collect();
            let present: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&i| now[i].is_some())
                .collect();
            let all_zero = !present.is_empty() && present.iter().all(|&i| now[i] == Some(0));
            let had_nonzero = present
                .iter()
                .any(|&i| self.baseline[i].is_some_and(|b| b > 0));
            let on_course = self.fell_to_zero_on_course(&present);
            let pending = &mut self.zero_pending[group as usize];
            if all_zero && had_nonzero && !*pending && !on_course {
                // Every value of the group dropped to 0 at once: the driver's
                // admin command most likely failed. No data: keep the
                // baseline, report it as the totals, count nothing.
                *pending = true;
                zeroed = true;
                for &i in &members {
                    self.gauge_fall[i] = None;
                    if now[i].is_none() {
                        self.baseline[i] = None;
                        continue;
                    }
                    totals[i] = self.baseline[i];
                    delta[i] = match STATS[i].kind {
                        Kind::Counter => self.baseline[i].map(|_| 0),
                        Kind::Gauge => self.baseline[i],
                    };
                }
                continue;
            }
            // A second all-zero read in a row is believed: the counters that
            // go down below are counted as a reset like any other.
            *pending = false;
            for &i in &members {
                totals[i] = now[i];
                if STATS[i].kind == Kind::Gauge {
                    self.gauge_fall[i] = match (self.baseline[i], now[i]) {
                        (Some(b), Some(v)) if self.previous_was_data => Some(b.saturating_sub(v)),
                        _ => None,
                    };
                }
                delta[i] = match (self.baseline[i], now[i]) {
                    (_, None) => None,
                    // Appearing: its baseline starts now.
                    (None, Some(v)) => match STATS[i].kind {
                        Kind::Counter => Some(0),
                        Kind::Gauge => Some(v),
                    },
                    (Some(_), Some(v)) if STATS[i].kind == Kind::Gauge => Some(v),
                    (Some(b), Some(v)) if v >= b => {
                        if let Some(from) = self.stepped_back_from[i].filter(|f| v >= *f) {
                            climbs_back.push(format!(
                                "{} {b} -> {v}, past the {from} it had stepped back from",
                                STATS[i].name
                            ));
                            self.stepped_back_from[i] = None;
                        }
                        if self.previous_was_data {
                            let largest = self.largest_growth[i].get_or_insert(0);
                            *largest = (*largest).max(v - b);
                        }
                        Some(v - b)
                    }
                    // Went down to near zero: the device reset it; what it
                    // shows now is what was counted since.
                    (Some(b), Some(v))
                        if is_reset_to_near_zero(b, v, self.largest_growth[i].unwrap_or(0)) =>
                    {
                        reset = true;
                        Some(v)
                    }
                    // Went down, but not near zero: no reset gives that. Not
                    // data: nothing counted, and the new value is the
                    // baseline (if it was a glitch, the read after it spans
                    // the gap and is flagged in the analysis, src/analysis/trust.rs).
                    (Some(b), Some(v)) => {
                        step_backs.push(format!("{} {b} -> {v}", STATS[i].name));
                        let from = self.stepped_back_from[i].get_or_insert(b);
                        *from = (*from).max(b);
                        Some(0)
                    }
                };
                self.baseline[i] = now[i];
            }
        }
        self.resets += u64::from(reset);
        self.zeroed_reads += u64::from(zeroed);
        self.admin_failures = admin_failures(stats);
        let untrusted = self.judge_consistency(reset, &step_backs, &climbs_back);
        self.untrusted_reads += u64::from(untrusted.is_some());
        self.previous_was_data = !zeroed && untrusted.is_none();
        let mut sample = self.sample(source, totals, delta, None);
        sample.untrusted = untrusted;
        Some(sample)
    }

    /// Keeps count of the reads in which a counter went down and says why
    /// this read is not data, if it is not. A step back, or a climb back past
    /// where one stepped back from, is not data and makes the source
    /// untrusted until [`CONSISTENT_READS`] reads in a row go without a
    /// decrease (a stale writer's values may go on growing for a while, and
    /// the counting one's return jumps over the gap); a reset does too when
    /// it repeats within [`DECREASE_MEMORY`] reads of the last decrease.
    fn judge_consistency(
        &mut self,
        reset: bool,
        step_backs: &[String],
        climbs_back: &[String],
    ) -> Option<String> {
        let mut why = Vec::new();
        if !step_backs.is_empty() {
            why.push(format!(
                "went down, not to near zero (no reset gives that): {}",
                step_backs.join(", ")
            ));
        }
        if !climbs_back.is_empty() {
            why.push(format!(
                "climbed back over a step back, growth spanning it: {}",
                climbs_back.join(", ")
            ));
        }
        let decreased = reset || !step_backs.is_empty();
        if decreased {
            if let Some(n) = self.reads_since_decrease.filter(|n| *n < DECREASE_MEMORY) {
                self.distrusted = true;
                why.push(format!(
                    "counters went down again {} read(s) after the last time",
                    n + 1
                ));
            }
            self.reads_since_decrease = Some(0);
        } else if let Some(n) = self.reads_since_decrease.as_mut() {
            *n += 1;
        }
        if decreased || !climbs_back.is_empty() {
            self.consistent_reads = 0;
        } else {
            self.consistent_reads += 1;
        }
        if !step_backs.is_empty() || !climbs_back.is_empty() {
            self.distrusted = true;
        } else if self.distrusted && self.consistent_reads >= CONSISTENT_READS {
            self.distrusted = false;
        }
        if self.distrusted {
            why.push(format!(
                "the source is not trusted until {CONSISTENT_READS} reads in a row go without \
                 a decrease ({} so far)",
                self.consistent_reads
            ));
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// Whether the stats `present` (one group, every one read as 0 now)
    /// could really all be 0: every counter among them was already 0, and
    /// every gauge that was not had fallen at least half its own value
    /// between the last two reads, so at that pace it was due at 0 within
    /// two reads (one is too tight: the pace varies from read to read, and
    /// the first interval of a run can be short). That is a table filling
    /// up (`conntrack_allowance_available` reaching 0 an instant before the
    /// first refused connection is counted), not the zeroed struct of a
    /// failed admin command, which takes a steady gauge to 0 at once.
    fn fell_to_zero_on_course(&self, present: &[usize]) -> bool {
        present.iter().all(|&i| {
            let Some(b) = self.baseline[i].filter(|b| *b > 0) else {
                return true;
            };
            STATS[i].kind == Kind::Gauge
                && self.gauge_fall[i].is_some_and(|f| f.saturating_mul(2) >= b)
        })
    }

    /// A read that failed: counted, and the last good totals reported with
    /// zero growth (gauges keep their last value) so observing continues.
    pub(crate) fn failed(&mut self, error: String, source: &str) -> AllowanceSample {
        self.read_failures += 1;
        self.previous_was_data = false;
        let totals = self.baseline;
        let mut delta: Values = [None; N];
        for i in 0..N {
            delta[i] = match STATS[i].kind {
                Kind::Counter => totals[i].map(|_| 0),
                Kind::Gauge => totals[i],
            };
        }
        self.sample(source, totals, delta, Some(error))
    }

    /// The device reports no allowance stats (any more).
    pub(crate) fn forget(&mut self) {
        self.baseline = [None; N];
        self.gauge_fall = [None; N];
        self.zero_pending = [false; 2];
        self.largest_growth = [None; N];
        self.stepped_back_from = [None; N];
        self.previous_was_data = false;
    }

    fn sample(
        &self,
        source: &str,
        totals: Values,
        delta: Values,
        last_error: Option<String>,
    ) -> AllowanceSample {
        AllowanceSample {
            source: source.to_string(),
            totals: from_array(totals),
            delta: from_array(delta),
            resets: self.resets,
            zeroed_reads: self.zeroed_reads,
            read_failures: self.read_failures,
            admin_cmd_failures: self.admin_failures,
            last_error,
            untrusted: None,
            untrusted_reads: self.untrusted_reads,
            skipped_lines: 0,
            skipped: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
        pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    fn eni(bw_in: u64, bw_out: u64, pps: u64) -> Vec<(String, u64)> {
        stats(&[
            ("tx_timeout", 3),
            ("bw_in_allowance_exceeded", bw_in),
            ("bw_out_allowance_exceeded", bw_out),
            ("pps_allowance_exceeded", pps),
            ("queue_0_tx_cnt", 999),
        ])
    }

    fn observe(t: &mut AllowanceTracker, s: &[(String, u64)]) -> AllowanceSample {
        t.observe(s, "test").expect("allowance stats present")
    }

    #[test]
    fn names_are_in_field_order() {
        let mut v: Values = [None; N];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = Some(i as u64);
        }
        let c = from_array(v);
        let json = serde_json::to_value(c).unwrap();
        for (i, name) in STATS.iter().map(|s| s.name).enumerate() {
            assert_eq!(json[name], i as u64, "{name}");
        }
        assert_eq!(to_array(&c), v);
    }

    #[test]
    fn extract_finds_allowance_stats_by_name_among_others() {
        let c = extract(&stats(&[
            ("queue_0_tx_cnt", 5),
            ("bw_out_allowance_exceeded", 7),
            ("bw_out_allowance_exceeded_x", 8),
            ("ena_srd_mode", 1),
            ("bw_out_allowance_exceeded", 9),
        ]));
        assert_eq!(c.bw_out_allowance_exceeded, Some(7));
        assert_eq!(c.ena_srd_mode, Some(1));
        assert_eq!(c.bw_in_allowance_exceeded, None);
    }

    #[test]
    fn first_read_is_a_baseline_then_growth() {
        let mut t = AllowanceTracker::new();
        let s = observe(&mut t, &eni(474, 10, 0));
        assert_eq!(s.totals.bw_in_allowance_exceeded, Some(474));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.delta.linklocal_allowance_exceeded, None);
        let s = observe(&mut t, &eni(480, 110, 2));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(6));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(100));
        assert_eq!(s.delta.pps_allowance_exceeded, Some(2));
        assert_eq!((s.resets, s.zeroed_reads, s.read_failures), (0, 0, 0));
        assert_eq!(s.source, "test");
    }

    #[test]
    fn a_counter_going_down_is_a_reset_not_a_wrap() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(1000, 500, 7));
        let s = observe(&mut t, &eni(1010, 20, 7));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(20));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(10));
        assert_eq!(s.resets, 1);
        // One counter going to 0 while others do not is a reset too.
        let s = observe(&mut t, &eni(1010, 0, 9));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.delta.pps_allowance_exceeded, Some(2));
        assert_eq!(s.resets, 2);
        let s = observe(&mut t, &eni(1011, 5, 9));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(5));
        assert_eq!(s.resets, 2);
    }

    #[test]
    fn a_reset_to_near_zero_is_trusted_and_counts_what_came_since() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 1_000_000, 0));
        observe(&mut t, &eni(0, 1_050_000, 0));
        // Grew 50,000 in a read: 80,000 since a reset is plausible.
        let s = observe(&mut t, &eni(0, 80_000, 0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(80_000));
        assert_eq!((s.resets, s.untrusted_reads), (1, 0));
        assert_eq!(s.untrusted, None);
        let s = observe(&mut t, &eni(0, 90_000, 0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(10_000));
        assert_eq!(s.untrusted, None);
    }

    #[test]
    fn a_step_back_is_an_untrusted_read_never_a_reset_plus_the_full_value() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 20_000, 0));
        observe(&mut t, &eni(0, 24_648, 0));
        // The field case: read as a reset it was 19,920 new exceeded
        // packets, 229% of the wire packets.
        let s = observe(&mut t, &eni(5, 19_920, 0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(5));
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(19_920));
        assert_eq!(s.resets, 0);
        assert_eq!(s.untrusted_reads, 1);
        let why = s.untrusted.expect("flagged");
        assert!(
            why.contains("bw_out_allowance_exceeded 24648 -> 19920"),
            "{why}"
        );
        // The next reads grow from the new value, but are not trusted: a
        // stale writer's value may go on growing, and the counting one's
        // return jumps over the gap.
        let s = observe(&mut t, &eni(5, 19_950, 0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(30));
        assert!(s.untrusted.unwrap().contains("(1 so far)"));
        let s = observe(&mut t, &eni(5, 25_000, 0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(5_050));
        let why = s.untrusted.unwrap();
        assert!(
            why.contains("bw_out_allowance_exceeded 19950 -> 25000, past the 24648"),
            "{why}"
        );
        assert!(why.contains("(0 so far)"), "{why}");
        // Five reads in a row without a decrease: trusted again.
        let flags: Vec<bool> = (1..=5)
            .map(|k| observe(&mut t, &eni(5, 25_000 + k, 0)).untrusted.is_some())
            .collect();
        assert_eq!(flags, [true, true, true, true, false]);
        // A value above a tenth of the old one is no reset, however small.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 600, 0));
        let s = observe(&mut t, &eni(0, 100, 0));
        assert_eq!((s.resets, s.untrusted_reads), (0, 1));
        // Nor is one below a tenth but above what the counter could count
        // since: it never grew more than 10,000 in a read.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 5_000_000, 0));
        observe(&mut t, &eni(0, 5_000_100, 0));
        let s = observe(&mut t, &eni(0, 400_000, 0));
        assert_eq!((s.resets, s.untrusted_reads), (0, 1));
    }

    #[test]
    fn alternating_writers_mark_the_source_untrusted_from_the_first_step_back() {
        let mut t = AllowanceTracker::new();
        // Two writers of one file: one counts on, the other repeats a stale
        // value (the field case held hypervisor_queuing from its third
        // interval, resets climbing 1 to 8 in 16 s).
        let mut flagged = Vec::new();
        let mut deltas = 0;
        for i in 0..16u64 {
            let bw_out = if i % 2 == 0 { 20_000 + 500 * i } else { 19_920 };
            let s = observe(&mut t, &eni(0, bw_out, 0));
            flagged.push(s.untrusted.is_some());
            if s.untrusted.is_none() {
                deltas += s.delta.bw_out_allowance_exceeded.unwrap();
            }
            assert_eq!(s.resets, 0, "read {i}");
        }
        // The baseline is trusted; from the first step back on, no read is.
        let mut expected = [true; 16];
        expected[0] = false;
        assert_eq!(flagged, expected);
        assert_eq!(deltas, 0);
        // The counting writer alone again: its first read jumps over the gap.
        let s = observe(&mut t, &eni(0, 30_000, 0));
        assert!(s.untrusted.unwrap().contains("past the 27000"));
    }

    #[test]
    fn an_untrusted_source_is_trusted_again_after_five_consistent_reads() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 1000, 0));
        observe(&mut t, &eni(0, 900, 0));
        observe(&mut t, &eni(0, 1100, 0));
        let s = observe(&mut t, &eni(0, 950, 0));
        assert!(s
            .untrusted
            .as_deref()
            .unwrap()
            .contains("went down again 2 read(s)"));
        let mut untrusted = Vec::new();
        for k in 1..=6 {
            let s = observe(&mut t, &eni(0, 950 + 10 * k, 0));
            untrusted.push(s.untrusted.is_some());
            assert_eq!(s.delta.bw_out_allowance_exceeded, Some(10));
        }
        assert_eq!(untrusted, [true, true, true, true, false, false]);
        // 900 (a step back), 1100 (climbs back over it), 950, then four.
        assert_eq!(t.untrusted_reads, 3 + 4);
        // Long after, one reset is a reset again, not a repeat.
        for k in 0..DECREASE_MEMORY {
            observe(&mut t, &eni(0, 1_100 + k, 0));
        }
        let s = observe(&mut t, &eni(0, 3, 0));
        assert_eq!((s.resets, s.untrusted), (1, None));
    }

    #[test]
    fn several_counters_down_at_once_are_one_reset() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(1000, 500, 7));
        let s = observe(&mut t, &eni(3, 2, 1));
        assert_eq!(s.resets, 1);
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(3));
    }

    #[test]
    fn an_all_zero_read_is_no_data_and_keeps_the_baseline() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(100, 200, 300));
        let s = observe(&mut t, &eni(0, 0, 0));
        assert_eq!(s.zeroed_reads, 1);
        assert_eq!(s.resets, 0);
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(200));
        // The fetch works again: growth from the kept baseline.
        let s = observe(&mut t, &eni(101, 250, 300));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(1));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(50));
        assert_eq!((s.resets, s.zeroed_reads), (0, 1));
    }

    #[test]
    fn two_all_zero_reads_in_a_row_are_a_real_reset() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(100, 200, 300));
        let s = observe(&mut t, &eni(0, 0, 0));
        assert_eq!((s.resets, s.zeroed_reads), (0, 1));
        let s = observe(&mut t, &eni(0, 0, 0));
        assert_eq!((s.resets, s.zeroed_reads), (1, 1));
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        // From now on 0 is the baseline: zeros are ordinary data.
        let s = observe(&mut t, &eni(0, 0, 0));
        assert_eq!((s.resets, s.zeroed_reads), (1, 1));
        let s = observe(&mut t, &eni(4, 0, 0));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(4));
    }

    #[test]
    fn zeros_from_the_start_are_not_a_zeroed_read() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(0, 0, 0));
        let s = observe(&mut t, &eni(0, 0, 0));
        assert_eq!((s.resets, s.zeroed_reads), (0, 0));
    }

    #[test]
    fn gauges_are_copied_and_held_over_a_zeroed_read() {
        let mut t = AllowanceTracker::new();
        let read = |exceeded: u64, available: u64| {
            stats(&[
                ("conntrack_allowance_exceeded", exceeded),
                ("conntrack_allowance_available", available),
            ])
        };
        let s = observe(&mut t, &read(0, 5000));
        assert_eq!(s.delta.conntrack_allowance_available, Some(5000));
        let s = observe(&mut t, &read(2, 4000));
        assert_eq!(s.delta.conntrack_allowance_available, Some(4000));
        assert_eq!(s.delta.conntrack_allowance_exceeded, Some(2));
        // A gauge going down is not a reset.
        assert_eq!(s.resets, 0);
        // The counter had been 0 all along, but the gauge was not: the all
        // zero read is still a failed fetch.
        let t2 = &mut AllowanceTracker::new();
        observe(t2, &read(0, 5000));
        let s = observe(t2, &read(0, 0));
        assert_eq!(s.zeroed_reads, 1);
        assert_eq!(s.delta.conntrack_allowance_available, Some(5000));
        assert_eq!(s.totals.conntrack_allowance_available, Some(5000));
    }

    /// The lab's conntrack_limit run, once in ~15: the table filled at ~400
    /// entries a read, and one read caught it full an instant before the
    /// first refused connection was counted. All zero, yet real: two
    /// intervals (that read and the one spanning it) went unjudged at the
    /// very moment the allowance ran out.
    #[test]
    fn a_gauge_on_course_to_zero_reading_zero_is_data_not_a_zeroed_read() {
        let read = |exceeded: u64, available: u64| {
            stats(&[
                ("conntrack_allowance_exceeded", exceeded),
                ("conntrack_allowance_available", available),
            ])
        };
        // The failed run's figures: 398 at the end of interval 0, 0 at the
        // end of interval 1, ~400 entries a second.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &read(0, 790));
        observe(&mut t, &read(0, 398));
        let s = observe(&mut t, &read(0, 0));
        assert_eq!((s.zeroed_reads, s.resets, s.untrusted_reads), (0, 0, 0));
        assert_eq!(s.delta.conntrack_allowance_available, Some(0));
        assert_eq!(s.totals.conntrack_allowance_available, Some(0));
        let s = observe(&mut t, &read(35, 0));
        assert_eq!(s.delta.conntrack_allowance_exceeded, Some(35));
        assert_eq!(s.zeroed_reads, 0);
        // Falling, but far from 0 at that pace: a failed fetch.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &read(0, 1000));
        observe(&mut t, &read(0, 700));
        let s = observe(&mut t, &read(0, 0));
        assert_eq!(s.zeroed_reads, 1);
        assert_eq!(s.totals.conntrack_allowance_available, Some(700));
        // On course, but a counter was not 0: the struct was zeroed.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &read(3, 1000));
        observe(&mut t, &read(3, 400));
        let s = observe(&mut t, &read(0, 0));
        assert_eq!(s.zeroed_reads, 1);
        // The fall is only measured between two reads that were data.
        let mut t = AllowanceTracker::new();
        observe(&mut t, &read(0, 1000));
        observe(&mut t, &read(0, 0));
        let s = observe(&mut t, &read(0, 900));
        assert_eq!(s.zeroed_reads, 1);
        let s = observe(&mut t, &read(0, 0));
        assert_eq!(s.zeroed_reads, 2);
    }

    #[test]
    fn zeroed_read_is_judged_per_admin_command_group() {
        let mut t = AllowanceTracker::new();
        let read = |bw_out: u64, srd_tx: u64| {
            stats(&[
                ("bw_out_allowance_exceeded", bw_out),
                ("ena_srd_mode", 1),
                ("ena_srd_tx_pkts", srd_tx),
            ])
        };
        observe(&mut t, &read(50, 1000));
        // The ENI fetch failed, the SRD one did not.
        let s = observe(&mut t, &read(0, 1100));
        assert_eq!(s.zeroed_reads, 1);
        assert_eq!(s.resets, 0);
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.delta.ena_srd_tx_pkts, Some(100));
        assert_eq!(s.delta.ena_srd_mode, Some(1));
    }

    #[test]
    fn a_stat_appearing_starts_its_baseline_and_one_vanishing_is_none() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &stats(&[("bw_out_allowance_exceeded", 10)]));
        let s = observe(
            &mut t,
            &stats(&[
                ("bw_out_allowance_exceeded", 12),
                ("pps_allowance_exceeded", 77),
            ]),
        );
        assert_eq!(s.totals.pps_allowance_exceeded, Some(77));
        assert_eq!(s.delta.pps_allowance_exceeded, Some(0));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(2));
        let s = observe(&mut t, &stats(&[("pps_allowance_exceeded", 80)]));
        assert_eq!(s.totals.bw_out_allowance_exceeded, None);
        assert_eq!(s.delta.bw_out_allowance_exceeded, None);
        assert_eq!(s.delta.pps_allowance_exceeded, Some(3));
        // Coming back: a new baseline, not growth from the old one.
        let s = observe(
            &mut t,
            &stats(&[
                ("bw_out_allowance_exceeded", 500),
                ("pps_allowance_exceeded", 80),
            ]),
        );
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        assert_eq!(s.resets, 0);
    }

    #[test]
    fn no_allowance_stats_is_none_and_forgets() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(5, 5, 5));
        assert!(t.observe(&stats(&[("peer_ifindex", 2)]), "test").is_none());
        let s = observe(&mut t, &eni(9, 9, 9));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(0));
    }

    #[test]
    fn a_failed_read_is_counted_and_observing_continues() {
        let mut t = AllowanceTracker::new();
        observe(&mut t, &eni(10, 20, 30));
        let s = t.failed(
            "eth0: SIOCETHTOOL GSTATS: Input/output error".into(),
            "ioctl",
        );
        assert_eq!(s.read_failures, 1);
        assert_eq!(
            s.last_error.as_deref(),
            Some("eth0: SIOCETHTOOL GSTATS: Input/output error")
        );
        assert_eq!(s.totals.bw_out_allowance_exceeded, Some(20));
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(0));
        let s = observe(&mut t, &eni(11, 25, 30));
        assert_eq!(s.last_error, None);
        assert_eq!(s.read_failures, 1);
        assert_eq!(s.delta.bw_out_allowance_exceeded, Some(5));
    }

    #[test]
    fn a_failed_first_read_still_gives_a_sample() {
        let mut t = AllowanceTracker::new();
        let s = t.failed("boom".into(), "file:/x");
        assert_eq!(s.read_failures, 1);
        assert_eq!(s.totals, AllowanceCounters::default());
        let s = observe(&mut t, &eni(1, 2, 3));
        assert_eq!(s.delta.bw_in_allowance_exceeded, Some(0));
    }

    #[test]
    fn admin_queue_failures_are_summed_and_absent_without_them() {
        let mut t = AllowanceTracker::new();
        let stats = |aborted: u64, no_completion: u64| {
            vec![
                ("bw_out_allowance_exceeded".to_string(), 5),
                ("ena_admin_q_aborted_cmd".to_string(), aborted),
                ("ena_admin_q_no_completion".to_string(), no_completion),
            ]
        };
        let s = t.observe(&stats(1, 2), "t").unwrap();
        assert_eq!(s.admin_cmd_failures, Some(3));
        let s = t.observe(&stats(1, 4), "t").unwrap();
        assert_eq!(s.admin_cmd_failures, Some(5));
        let s = t
            .observe(&[("bw_out_allowance_exceeded".to_string(), 6)], "t")
            .unwrap();
        assert_eq!(s.admin_cmd_failures, None);
    }
}
