//! One interface, one interval: what is holding the network back.
//!
//! The decision is a fixed order of questions (docs/verdicts.md, "Decision
//! order"); the first that says yes wins. Every signal that could be judged
//! is kept as evidence, the winning one first, so a reader can check the
//! verdict against the numbers. The signals are gathered in gather.rs, the
//! questions asked in decide.rs; here they meet, and the verdicts that say
//! more than their deciding signal get their first line.

pub use super::outcome::{Evidence, InterfaceVerdict, Location, Verdict, VerdictFamily};

use super::decide::decide;
use super::gather::{gather_signals, plateau_window};
use super::outcome::HeldVerdict;
use super::rates::NormalisedRates;
use super::signal::{fmt_num, Signal};
use super::thresholds::Thresholds;
use crate::model::snapshot::InterfaceSample;
use crate::shared::units;

/// Confidence is shown within these bounds: a verdict given is never sure
/// at 0, and the formulas' bonuses can add up past 1.
const MIN_CONFIDENCE: f64 = 0.05;
const MAX_CONFIDENCE: f64 = 1.0;
/// Confidence is rounded to three decimals (this many steps per unit):
/// finer digits mean nothing and would make JSON lines longer.
const CONFIDENCE_STEPS: f64 = 1000.0;
/// Decide one interface's verdict. `tx_history`/`rx_history` hold this
/// interface's throughput (bps) of the previous intervals, oldest first,
/// then the current one. `untrusted`: why this interval's allowance read
/// is no data (src/analysis/trust.rs); `rates` then carry no allowance part.
pub(crate) fn judge(
    iface: &InterfaceSample,
    rates: NormalisedRates,
    untrusted: Option<&str>,
    tx_history: &[f64],
    rx_history: &[f64],
    th: &Thresholds,
) -> InterfaceVerdict {
    let s = gather_signals(&rates, iface, untrusted, tx_history, rx_history, th);
    let (verdict, confidence, primary) = decide(&s, &rates, th);
    let mut evidence = s.ordered(primary);
    match verdict {
        Verdict::FreeFlow => {
            let line = free_flow_line(&rates, &evidence);
            evidence.insert(0, line);
        }
        Verdict::PpsLimit => {
            note_packet_carriers(&rates, iface.mtu, &mut evidence);
            note_fragments(&rates, &mut evidence);
        }
        Verdict::LinklocalLimit => note_linklocal_senders(&rates, &mut evidence),
        Verdict::ConntrackLimit => {
            let note =
                super::conntrack::note(&rates.conntrack_openers, rates.conntrack_trend.as_ref());
            if let Some(e) = evidence.first_mut() {
                e.note.push_str(&note);
            }
        }
        Verdict::HypervisorCap => {
            let line = cap_line(&rates, &evidence, th);
            evidence.insert(0, line);
        }
        _ => {}
    }
    if let Some(line) = microburst_line(verdict, &rates, &evidence, th) {
        // The cause stays first; how it happened goes on its line and,
        // with its own figures, right after it.
        if let Some(first) = evidence.first_mut() {
            first.note.push_str("; ");
            first.note.push_str(&line.note);
        }
        evidence.insert(1.min(evidence.len()), line);
    } else if let Some(line) = counters_in_microbursts(&rates, th) {
        // Free flow says why its counters rose on its own line, which the
        // held free flow shows; other verdicts keep their cause first and
        // this line right after it.
        if verdict == Verdict::FreeFlow {
            if let Some(first) = evidence.first_mut() {
                first.note.push_str("; ");
                first.note.push_str(&line.note);
            }
        }
        evidence.insert(1.min(evidence.len()), line);
    }
    InterfaceVerdict {
        iface: iface.name.clone(),
        verdict,
        confidence: (confidence.clamp(MIN_CONFIDENCE, MAX_CONFIDENCE) * CONFIDENCE_STEPS).round()
            / CONFIDENCE_STEPS,
        evidence,
        rates,
        held: HeldVerdict::default(),
    }
}

/// A hypervisor verdict (bandwidth or packet rate) whose interval
/// microbursts: its peak at least `microburst_ratio` times its mean in the
/// deciding direction. The allowance was exceeded by bursts the interval's
/// mean hides (docs/verdicts.md, "Microbursts").
pub(super) fn microburst_line(
    verdict: Verdict,
    rates: &NormalisedRates,
    evidence: &[Evidence],
    th: &Thresholds,
) -> Option<Evidence> {
    let (inbound, packets) = microburst_direction(verdict, evidence.first())?;
    let m = rates.microburst(inbound, packets, th.microburst_ratio)?;
    Some(Evidence {
        signal: Signal::MicroburstRatio.as_str().into(),
        value: m.times,
        threshold: th.microburst_ratio,
        note: rates.microburst_note(&m, packets),
        exceeded: true,
    })
}

/// Allowance counters that rose under their line while the interval
/// microbursted in their direction (docs/verdicts.md, "Microbursts"): the
/// answer to "why does my counter rise at a low average?". Each rate that
/// is judged (`min_rate_packets`), counted some packets and stayed under
/// its threshold, with the peak at least `microburst_ratio` times the mean
/// (bits for bw_out and bw_in, packets for pps); the one nearest its line
/// gives the busiest window and the flows that burst. Only where the
/// verdict itself is no microbursting hypervisor verdict (that one says it
/// on its own line).
pub(super) fn counters_in_microbursts(
    rates: &NormalisedRates,
    th: &Thresholds,
) -> Option<Evidence> {
    let min = th.min_rate_packets;
    let both = rates.tx_wire_packets + rates.rx_wire_packets;
    let counters = [
        (
            "bw_out_allowance_exceeded",
            rates.bw_out_pct,
            rates.tx_wire_packets,
            th.bw_allowance_pct,
            "tx wire packets",
            (false, false),
        ),
        (
            "bw_in_allowance_exceeded",
            rates.bw_in_pct,
            rates.rx_wire_packets,
            th.bw_allowance_pct,
            "rx wire packets",
            (true, false),
        ),
        (
            "pps_allowance_exceeded",
            rates.pps_pct,
            both,
            th.pps_allowance_pct,
            "tx+rx wire packets",
            (false, true),
        ),
    ];
    let mut rose = Vec::new();
    let mut lead: Option<(f64, super::rates::Microburst, bool)> = None;
    for (name, pct, packets, line, of, (inbound, by_packets)) in counters {
        let Some(p) = pct.filter(|p| *p > 0.0 && *p < line && packets as f64 >= min.max(1.0))
        else {
            continue;
        };
        let Some(m) = rates.microburst(inbound, by_packets, th.microburst_ratio) else {
            continue;
        };
        rose.push(format!(
            "{name} at {} of {of} (under the {} line)",
            units::pct(p),
            units::pct(line)
        ));
        let near = p / line;
        if lead.as_ref().is_none_or(|(n, _, _)| near > *n) {
            lead = Some((near, m, by_packets));
        }
    }
    let (_, m, by_packets) = lead?;
    Some(Evidence {
        signal: Signal::CountersInMicrobursts.as_str().into(),
        value: m.times,
        threshold: th.microburst_ratio,
        note: format!(
            "allowance counters rose in microbursts: {}; {}",
            rose.join(", "),
            rates.burst_detail(&m, by_packets)
        ),
        exceeded: true,
    })
}

/// The direction a microburst is looked for on a verdict: (inbound,
/// packets); None for verdicts that are not the hypervisor's rate limits.
pub(super) fn microburst_direction(
    verdict: Verdict,
    deciding: Option<&Evidence>,
) -> Option<(bool, bool)> {
    match verdict {
        Verdict::HypervisorQueuing | Verdict::HypervisorDrop => Some((
            deciding.is_some_and(|e| Signal::BwInAllowancePct.is(e)),
            false,
        )),
        Verdict::PpsLimit => Some((false, true)),
        _ => None,
    }
}

/// Free flow rests on no signal: its line says so, with the throughput in
/// the note. Its signal, value and threshold are those of the signal that
/// came nearest its threshold (the decision's primary, first in
/// `evidence`), so a held free flow's `value` is a level against a
/// threshold like every other verdict's, never bits per second.
fn free_flow_line(rates: &NormalisedRates, evidence: &[Evidence]) -> Evidence {
    let rtt_inflated = evidence
        .iter()
        .any(|e| Signal::RttInflationP50.is(e) && e.exceeded);
    let nearest = evidence.first();
    Evidence {
        signal: nearest.map_or_else(|| "none".into(), |e| e.signal.clone()),
        value: nearest.map_or(0.0, |e| e.value),
        threshold: nearest.map_or(0.0, |e| e.threshold),
        note: format!(
            "no allowance, loss or host-queue signal past its threshold; tx {}, rx {}{}{}",
            units::rate_bits(rates.tx_bps),
            units::rate_bits(rates.rx_bps),
            if rtt_inflated {
                " (RTTs inflated with no cause seen here: queuing further away, or \
                 receivers reading slowly)"
            } else {
                ""
            },
            // The held free flow shows this line alone: it must not read
            // as "no loss" when the flows could not be looked at.
            if super::gather::flows_unseen(rates) {
                "; but the flows were not seen (every TCP byte of the interval went \
                 through untracked sockets): loss on them is not excluded"
            } else {
                ""
            }
        ),
        exceeded: false,
    }
}

/// Fragmented egress has a packet-rate limit of its own that counts in
/// pps_allowance_exceeded too: say on the deciding line whether there was
/// any.
fn note_fragments(rates: &NormalisedRates, evidence: &mut [Evidence]) {
    let frags = match rates.fragments_per_s {
        Some(f) if f > 0.0 => format!(
            "; the host sent {} IPv4 fragments/s: fragments have a packet-rate limit of \
             their own that counts here too (check the MTU toward the peers)",
            fmt_num(f)
        ),
        Some(_) => "; no IPv4 fragments sent: whole packets are over the allowance".into(),
        None => "; IPv4 fragments sent unknown".into(),
    };
    if let Some(e) = evidence.first_mut() {
        e.note.push_str(&frags);
    }
}

/// Who carried the packets of a `pps_limit` (docs/verdicts.md, "Who
/// carries the packets"): the flows and owners with the most packets both
/// ways, their shares and mean payload, and whether small packets are the
/// cause (the interval's mean frame under `SMALL_PACKET_FRACTION` of a full
/// one).
fn note_packet_carriers(rates: &NormalisedRates, mtu: u32, evidence: &mut [Evidence]) {
    use super::rates::{full_payload, SMALL_PACKET_FRACTION};
    let small_payload = full_payload(mtu) * SMALL_PACKET_FRACTION;
    let size = |b: f64| format!("{} B", fmt_num(b.round()));
    let mut note = if rates.packet_flows.is_empty() {
        "; packets carried by: no flow named (no TCP flow seen moving packets)".to_string()
    } else {
        let flows: Vec<String> = rates
            .packet_flows
            .iter()
            .map(|f| {
                format!(
                    "{} {} ({} out, {} in, mean {}{})",
                    f.flow,
                    units::pct(f.share_pct),
                    f.segs_out,
                    f.segs_in,
                    size(f.mean_payload_bytes),
                    if f.mean_payload_bytes < small_payload {
                        ", small"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        let owners: Vec<String> = rates
            .packet_owners
            .iter()
            .map(|o| format!("{} {}", o.owner, units::pct(o.share_pct)))
            .collect();
        format!(
            "; packets carried by: {} of the flows' {} packets; by owner: {}",
            flows.join(", "),
            rates.flow_packets,
            owners.join(", ")
        )
    };
    // Small packets are the cause when most of the flows' packets are in
    // flows of small ones, or the interface's mean frame is small.
    let packets = rates.tx_wire_packets + rates.rx_wire_packets;
    let bytes = (rates.tx_bps + rates.rx_bps) / 8.0 * rates.interval_secs;
    let frame = (packets > 0).then(|| bytes / packets as f64);
    let full = f64::from(if mtu == 0 { 1500 } else { mtu }) + 14.0;
    let small_share = (rates.flow_packets > 0)
        .then(|| rates.small_flow_packets as f64 * 100.0 / rates.flow_packets as f64);
    let frame_note = frame.map_or_else(String::new, |f| {
        format!(", the interval's mean frame {} of {}", size(f), size(full))
    });
    if small_share.is_some_and(|p| p >= 50.0)
        || frame.is_some_and(|f| f < full * SMALL_PACKET_FRACTION)
    {
        note.push_str(&format!(
            "; small packets are the cause: {} of the flows' packets in flows averaging \
             under {} of payload{frame_note}",
            units::pct(small_share.unwrap_or(0.0)),
            size(small_payload)
        ));
    } else if frame.is_some() {
        note.push_str(&format!(
            "; not small packets: {} of the flows' packets in small ones{frame_note}",
            units::pct(small_share.unwrap_or(0.0)),
        ));
    }
    if let Some(e) = evidence.first_mut() {
        e.note.push_str(&note);
    }
}

/// Who sent to the link-local services, on a `linklocal_limit`'s first
/// line (docs/verdicts.md, "Who sends to the link-local services"): the
/// interface's packets to them per second against the 1,024 pps limit, and
/// the top senders with their shares.
fn note_linklocal_senders(rates: &NormalisedRates, evidence: &mut [Evidence]) {
    use crate::model::linklocal::LINKLOCAL_PPS_LIMIT;
    let note = match rates.linklocal_pps {
        None if rates.host_queue_paused => "; senders not counted: the per-packet programs \
                                            were paused in this interval (--per-packet auto), \
                                            and run from the next"
            .to_string(),
        None => {
            "; senders not seen (the link-local probes did not measure this interface)".to_string()
        }
        Some(pps) => {
            let senders = if rates.linklocal_senders.is_empty() {
                "none seen".to_string()
            } else {
                rates
                    .linklocal_senders
                    .iter()
                    .map(|s| {
                        format!(
                            "{} {} ({} {}/{}, {})",
                            s.sender,
                            units::pct(s.share_pct),
                            s.service.as_str(),
                            s.proto,
                            if s.family == 6 { "ipv6" } else { "ipv4" },
                            units::rate_pps(s.pps)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let lost = if rates.linklocal_unattributed > 0 {
                format!(
                    "; {} datagrams to them with no sender kept (the sender map was full)",
                    rates.linklocal_unattributed
                )
            } else {
                String::new()
            };
            format!(
                "; sent to the link-local services: {} against the limit of {} pps \
                 per interface; senders: {senders}{lost}",
                units::rate_pps(pps),
                fmt_num(LINKLOCAL_PPS_LIMIT)
            )
        }
    };
    if let Some(e) = evidence.first_mut() {
        e.note.push_str(&note);
    }
}

/// A hard cap rests on several signals at once: its line names them all.
fn cap_line(rates: &NormalisedRates, evidence: &[Evidence], th: &Thresholds) -> Evidence {
    let value = rates.bw_out_pct.unwrap_or(0.0);
    let flat = evidence.iter().find(|e| Signal::TxPlateauCv.is(e)).map_or(
        format!(
            "flatness not known yet: {} intervals needed",
            plateau_window(th)
        ),
        |e| format!("cv {}", fmt_num(e.value)),
    );
    Evidence {
        signal: Signal::BwOutCapPct.as_str().into(),
        value,
        threshold: th.cap_allowance_pct,
        note: format!(
            "hard cap: tx at {} ({flat}), the senders had data waiting in {}% \
             of their incoming segments, and bw_out counted {}% of tx wire packets \
             (>= {}%, under the {}% line); a bottleneck beyond the hypervisor would read \
             alike only if the counter's microbursts coincided",
            units::rate_bits(rates.tx_bps),
            fmt_num(rates.data_waiting_pct.unwrap_or(0.0)),
            fmt_num(value),
            th.cap_allowance_pct,
            th.bw_allowance_pct
        ),
        exceeded: true,
    }
}
