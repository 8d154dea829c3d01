//! The held verdict in words, for every view that shows it: the plain
//! table and the full-screen view say the same things the same way.

use crate::analysis::{InterfaceVerdict, IntervalAnalysis, Verdict};
use crate::shared::units;

/// The episodes before the current one on `iface`, oldest first, as
/// "free_flow 14.0s, hypervisor_queuing 3.00s" (the live pipeline carries the
/// last few in each interval's analysis); None when there were none.
pub(crate) fn earlier_episodes(a: &IntervalAnalysis, iface: &str) -> Option<String> {
    let eps: Vec<String> = a
        .episodes
        .iter()
        .filter(|e| e.iface == iface && !e.open)
        .map(|e| {
            let secs = e.end_mono_ns.saturating_sub(e.start_mono_ns) as f64 / 1e9;
            format!("{} {}", e.verdict, units::secs(secs))
        })
        .collect();
    (!eps.is_empty()).then(|| eps.join(", "))
}

/// This interval's own verdict where it differs from the held one and the
/// held note does not already name it (a verdict seen but not held).
pub(crate) fn own_verdict_unsaid(v: &InterfaceVerdict) -> Option<Verdict> {
    (v.verdict != v.held.verdict && !v.held.note.starts_with(v.verdict.as_str()))
        .then_some(v.verdict)
}

/// Why this interval's allowance counters rose under their line (in
/// microbursts, docs/verdicts.md), where the held note does not say it
/// already (the held free flow's note carries it; a verdict seen but not
/// held, or held over the window, does not).
pub(crate) fn bursts_unsaid(v: &InterfaceVerdict) -> Option<&str> {
    v.evidence
        .iter()
        .find(|e| e.signal == "counters_in_microbursts")
        .map(|e| e.note.as_str())
        .filter(|n| !v.held.note.contains(n))
}

/// The held verdict in one line: how long it has held, confidence, why,
/// this interval's own judgement where it differs, and why its counters
/// rose where they rose in microbursts.
pub(crate) fn one_line(v: &InterfaceVerdict) -> String {
    let h = &v.held;
    let age = if h.intervals > 1 {
        format!(", {} intervals", h.intervals)
    } else {
        String::new()
    };
    // A calm verdict shows no confidence: for free flow it only says how
    // close the nearest signal came to its threshold (the evidence lists
    // them), and "free_flow (50%)" reads as a coin toss (docs/verdicts.md).
    let sure = if h.verdict.is_calm() {
        String::new()
    } else {
        format!("{:.0}%", h.confidence * 100.0)
    };
    let head = format!("{sure}{age}");
    let head = head.trim_start_matches(", ");
    let mut text = if head.is_empty() {
        format!("{}: {}", h.verdict, h.note)
    } else {
        format!("{} ({head}): {}", h.verdict, h.note)
    };
    if let Some(own) = own_verdict_unsaid(v) {
        text.push_str(&format!("; this interval alone: {own}"));
    }
    if let Some(b) = bursts_unsaid(v) {
        text.push_str(&format!("; {b}"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, Thresholds};
    use crate::model::snapshot::{InterfaceSample, Snapshot};

    /// A real verdict of a quiet interface, held as `verdict` with `confidence`.
    fn held_as(verdict: Verdict, confidence: f64) -> InterfaceVerdict {
        let snap = Snapshot {
            interfaces: vec![InterfaceSample {
                name: "eth0".into(),
                ..Default::default()
            }],
            ..Snapshot::example(0)
        };
        let mut v = analyze(&[], &snap, &Thresholds::default())
            .interfaces
            .remove(0);
        v.verdict = verdict;
        v.held.verdict = verdict;
        v.held.confidence = confidence;
        v.held.note = "why".into();
        v
    }

    #[test]
    fn calm_verdicts_show_no_confidence_and_the_others_do() {
        assert_eq!(one_line(&held_as(Verdict::FreeFlow, 0.5)), "free_flow: why");
        assert_eq!(one_line(&held_as(Verdict::Idle, 1.0)), "idle: why");
        let mut v = held_as(Verdict::FreeFlow, 0.5);
        v.held.intervals = 3;
        assert_eq!(one_line(&v), "free_flow (3 intervals): why");
        assert_eq!(
            one_line(&held_as(Verdict::HypervisorQueuing, 0.83)),
            "hypervisor_queuing (83%): why"
        );
    }
}
