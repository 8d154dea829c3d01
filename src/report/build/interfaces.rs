//! Per interface over the span: throughput, allowance and retransmit
//! totals and peaks, the held verdicts counted, and the chart's series of
//! one point per interface and interval.

use std::collections::BTreeMap;

use crate::analysis::linklocal::LinkLocalCounts;
use crate::analysis::{InterfaceVerdict, IntervalAnalysis, Thresholds, Verdict};
use crate::model::kafka::KafkaFilter;
use crate::model::snapshot::{InterfaceSample, Snapshot};
use crate::report::kafka::KafkaAcc;
use crate::report::linklocal::{LinkLocalAcc, IFACE_SENDERS_KEPT};
use crate::report::model::{AllowanceSummary, InterfacePoint, InterfaceSummary, IntervalPoint};

/// Allowance exceeded over the span, with its denominator.
#[derive(Debug, Default, Clone)]
struct AllowanceAcc {
    exceeded: u64,
    packets: u64,
    peak_pct: Option<f64>,
}

#[derive(Debug, Clone)]
pub(super) struct IfaceAcc {
    pub(super) name: String,
    pub(super) driver: Option<String>,
    verdicts: BTreeMap<Verdict, u64>,
    secs: f64,
    tx_bytes: u64,
    rx_bytes: u64,
    peak_tx_bps: f64,
    peak_rx_bps: f64,
    tx_wire: u64,
    rx_wire: u64,
    allowance_available: bool,
    allowance: BTreeMap<String, AllowanceAcc>,
    retrans_segs: u64,
    segs_out: u64,
    peak_retrans_pct: Option<f64>,
    peak_backlog_bytes: u64,
    host_drops: BTreeMap<String, u64>,
    kafka: KafkaAcc,
    linklocal: LinkLocalAcc,
}

impl IfaceAcc {
    pub(super) fn new(name: &str) -> Self {
        IfaceAcc {
            name: name.to_string(),
            driver: None,
            verdicts: BTreeMap::new(),
            secs: 0.0,
            tx_bytes: 0,
            rx_bytes: 0,
            peak_tx_bps: 0.0,
            peak_rx_bps: 0.0,
            tx_wire: 0,
            rx_wire: 0,
            allowance_available: false,
            allowance: BTreeMap::new(),
            retrans_segs: 0,
            segs_out: 0,
            peak_retrans_pct: None,
            peak_backlog_bytes: 0,
            host_drops: BTreeMap::new(),
            kafka: KafkaAcc::default(),
            linklocal: LinkLocalAcc::new(IFACE_SENDERS_KEPT),
        }
    }

    pub(super) fn summary(&self) -> InterfaceSummary {
        let per_s = |bytes: u64| {
            if self.secs > 0.0 {
                bytes as f64 * 8.0 / self.secs
            } else {
                0.0
            }
        };
        InterfaceSummary {
            name: self.name.clone(),
            driver: self.driver.clone(),
            verdicts: self.verdicts.clone(),
            tx_bytes: self.tx_bytes,
            rx_bytes: self.rx_bytes,
            mean_tx_bps: per_s(self.tx_bytes),
            peak_tx_bps: self.peak_tx_bps,
            mean_rx_bps: per_s(self.rx_bytes),
            peak_rx_bps: self.peak_rx_bps,
            tx_wire_packets: self.tx_wire,
            rx_wire_packets: self.rx_wire,
            allowance_available: self.allowance_available,
            allowance: self
                .allowance
                .iter()
                .map(|(k, a)| {
                    (
                        k.clone(),
                        AllowanceSummary {
                            exceeded: a.exceeded,
                            pct: (a.packets > 0)
                                .then(|| a.exceeded as f64 / a.packets as f64 * 100.0),
                            peak_pct: a.peak_pct,
                        },
                    )
                })
                .collect(),
            retrans_segs: self.retrans_segs,
            segs_out: self.segs_out,
            retrans_pct: (self.segs_out > 0)
                .then(|| self.retrans_segs as f64 / self.segs_out as f64 * 100.0),
            peak_retrans_pct: self.peak_retrans_pct,
            peak_backlog_bytes: self.peak_backlog_bytes,
            host_drops: self.host_drops.clone(),
            kafka: self.kafka.finish(),
            linklocal: self.linklocal.finish(),
        }
    }

    /// One interval of this interface into its totals.
    fn add(
        &mut self,
        v: &InterfaceVerdict,
        sample: Option<&InterfaceSample>,
        min_packets: f64,
        min_segs: f64,
    ) {
        let r = &v.rates;
        *self.verdicts.entry(v.held.verdict).or_default() += 1;
        self.secs += r.interval_secs;
        if let Some(s) = sample {
            self.tx_bytes += s.delta.tx_bytes;
            self.rx_bytes += s.delta.rx_bytes;
            if s.driver.is_some() {
                self.driver.clone_from(&s.driver);
            }
            if let Some(h) = &s.host_queue {
                for (reason, n) in &h.drops {
                    *self.host_drops.entry(reason.clone()).or_default() += n;
                }
            }
        }
        self.peak_tx_bps = self.peak_tx_bps.max(r.tx_bps);
        self.peak_rx_bps = self.peak_rx_bps.max(r.rx_bps);
        self.tx_wire += r.tx_wire_packets;
        self.rx_wire += r.rx_wire_packets;
        self.peak_backlog_bytes = self.peak_backlog_bytes.max(r.local_backlog_bytes);
        self.retrans_segs += r.retrans_segs;
        self.segs_out += r.segs_out;
        if r.segs_out as f64 >= min_segs {
            if let Some(p) = r.retransmit_pct {
                self.peak_retrans_pct = Some(self.peak_retrans_pct.map_or(p, |x| x.max(p)));
            }
        }
        if r.allowance_available {
            self.allowance_available = true;
            self.add_allowances(v, min_packets);
        }
    }

    /// Each allowance rate over the packets it is a share of
    /// (docs/verdicts.md); the peak only over intervals with enough packets
    /// to judge, as live.
    fn add_allowances(&mut self, v: &InterfaceVerdict, min_packets: f64) {
        let r = &v.rates;
        let both = r.tx_wire_packets + r.rx_wire_packets;
        let counters = [
            ("bw_out", r.bw_out_exceeded, r.tx_wire_packets),
            ("bw_in", r.bw_in_exceeded, r.rx_wire_packets),
            ("pps", r.pps_exceeded, both),
            ("conntrack", r.conntrack_exceeded, both),
            ("linklocal", r.linklocal_exceeded, both),
        ];
        for (name, exceeded, packets) in counters {
            let Some(n) = exceeded else { continue };
            let a = self.allowance.entry(name.to_string()).or_default();
            a.exceeded += n;
            a.packets += packets;
            if packets > 0 && packets as f64 >= min_packets {
                let p = n as f64 / packets as f64 * 100.0;
                a.peak_pct = Some(a.peak_pct.map_or(p, |x| x.max(p)));
            }
        }
    }

    /// The verdict counted for an interval moves from `old` to `verdict`.
    fn recount(&mut self, old: Verdict, verdict: Verdict) {
        if let Some(n) = self.verdicts.get_mut(&old) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.verdicts.remove(&old);
            }
        }
        *self.verdicts.entry(verdict).or_default() += 1;
    }
}

/// The interfaces' totals and the chart's series.
#[derive(Debug, Default)]
pub(super) struct Interfaces {
    accs: Vec<IfaceAcc>,
    series: Vec<IntervalPoint>,
    /// Where the current recording's points start in `series`: a held
    /// verdict is dated back within its recording only.
    recording_from: usize,
}

impl Interfaces {
    /// Starts with `accs` (the headers' interfaces, in their order).
    pub(super) fn new(accs: Vec<IfaceAcc>) -> Self {
        Interfaces {
            accs,
            series: Vec::new(),
            recording_from: 0,
        }
    }

    /// The points that follow are another recording's (the walk's
    /// `NewRecording`): its held verdicts start there, and are never dated
    /// back over the recording before (whose seqs run over the same
    /// numbers).
    pub(super) fn new_recording(&mut self) {
        self.recording_from = self.series.len();
    }

    fn acc(&mut self, name: &str) -> &mut IfaceAcc {
        let i = match self.accs.iter().position(|a| a.name == name) {
            Some(i) => i,
            None => {
                self.accs.push(IfaceAcc::new(name));
                self.accs.len() - 1
            }
        };
        &mut self.accs[i]
    }

    /// One interval of every kept interface: its totals, its chart point,
    /// and the points a held verdict dated back now covers.
    pub(super) fn add(
        &mut self,
        a: &IntervalAnalysis,
        snap: &Snapshot,
        t: f64,
        th: &Thresholds,
        kafka: &KafkaFilter,
        linklocal: &[(String, LinkLocalCounts)],
    ) {
        let min_packets = th.min_rate_packets;
        let min_segs = th.min_segs_out;
        let mut points = Vec::with_capacity(a.interfaces.len());
        for v in &a.interfaces {
            let sample = snap.interfaces.iter().find(|i| i.name == v.iface);
            let acc = self.acc(&v.iface);
            acc.add(v, sample, min_packets, min_segs);
            acc.kafka.add(&a.kafka, &v.iface, kafka);
            if let Some((_, c)) = linklocal.iter().find(|(i, _)| *i == v.iface) {
                acc.linklocal.add(c, snap.interval_secs());
            }
            points.push(point(v));
        }
        self.series.push(IntervalPoint {
            seq: snap.seq,
            t_secs: (t * 1000.0).round() / 1000.0,
            interfaces: points,
        });
        for v in &a.interfaces {
            self.date_back(&v.iface, v.held.since_seq, v.held.verdict);
        }
    }

    /// A held verdict dated back to `since`: the intervals of its
    /// recording it now covers were shown (and counted) with the verdict
    /// before; they take this one, as its episode does.
    fn date_back(&mut self, iface: &str, since: u64, verdict: Verdict) {
        let mut moved: Vec<Verdict> = Vec::new();
        for p in self.series[self.recording_from..].iter_mut().rev().skip(1) {
            if p.seq < since {
                break;
            }
            if let Some(i) = p.interfaces.iter_mut().find(|i| i.iface == iface) {
                if i.verdict != verdict {
                    moved.push(i.verdict);
                    i.verdict = verdict;
                }
            }
        }
        if moved.is_empty() {
            return;
        }
        let acc = self.acc(iface);
        for old in moved {
            acc.recount(old, verdict);
        }
    }

    pub(super) fn summaries(&self) -> Vec<InterfaceSummary> {
        self.accs.iter().map(IfaceAcc::summary).collect()
    }

    pub(super) fn into_series(self) -> Vec<IntervalPoint> {
        self.series
    }
}

/// An interval of one interface on the chart, with its held verdict.
fn point(v: &InterfaceVerdict) -> InterfacePoint {
    let r = &v.rates;
    InterfacePoint {
        iface: v.iface.clone(),
        verdict: v.held.verdict,
        tx_bps: r.tx_bps,
        rx_bps: r.rx_bps,
        bw_out_pct: r.bw_out_pct,
        bw_in_pct: r.bw_in_pct,
        pps_pct: r.pps_pct,
        conntrack_pct: r.conntrack_pct,
        retrans_pct: r.retransmit_pct,
        backlog_bytes: r.host_queue_available.then_some(r.local_backlog_bytes),
        tx_peak_bps: r.tx_peak_bps,
    }
}
