//! The held verdict in words, for every view that shows it: the plain
//! table and the full-screen view say the same things the same way.

use crate::analysis::{InterfaceVerdict, IntervalAnalysis, Verdict};
use crate::shared::units;

/// The episodes before the current one on `iface`, oldest first, as
/// "free_flow 14.0s, hypervisor_queuing 3.00s" (the live pipeline carries the
/// last few in each interval's analysis); None when there were none.
pub fn earlier_episodes(a: &IntervalAnalysis, iface: &str) -> Option<String> {
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
pub fn own_verdict_unsaid(v: &InterfaceVerdict) -> Option<Verdict> {
    (v.verdict != v.held.verdict && !v.held.note.starts_with(v.verdict.as_str()))
        .then_some(v.verdict)
}

/// The held verdict in one line: how long it has held, confidence, why,
/// and this interval's own judgement where it differs.
pub fn one_line(v: &InterfaceVerdict) -> String {
    let h = &v.held;
    let age = if h.intervals > 1 {
        format!(", {} intervals", h.intervals)
    } else {
        String::new()
    };
    let mut text = format!(
        "{} ({:.0}%{age}): {}",
        h.verdict,
        h.confidence * 100.0,
        h.note
    );
    if let Some(own) = own_verdict_unsaid(v) {
        text.push_str(&format!("; this interval alone: {own}"));
    }
    text
}
