//! An interval's flow attributions as JSON, written by hand
//! (src/model/json_splice.rs says why and how): the same bytes serde's
//! derive writes.

use serde::Serializer;

use super::attribution::{BackoffParts, FlowAttribution};
use crate::model::json_splice::{write_array, HandField, JsonObject};

/// `IntervalAnalysis::flows`, written by hand.
pub(crate) const FIELD: HandField = HandField {
    key: "flows",
    tag: "attribution",
};

/// `serialize_with` of `IntervalAnalysis::flows`.
pub(crate) fn serialize_attributions<S: Serializer>(
    flows: &[FlowAttribution],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    FIELD.serialize(flows, serializer)
}

/// `flows` as serde writes a `Vec<FlowAttribution>`.
pub(crate) fn write_attributions(
    out: &mut Vec<u8>,
    flows: &[FlowAttribution],
) -> serde_json::Result<()> {
    write_array(out, flows, write_attribution)
}

fn write_attribution(out: &mut Vec<u8>, a: &FlowAttribution) -> serde_json::Result<()> {
    // Every field by name: a field added to FlowAttribution does not
    // compile here until it is written (in declaration order, as serde does).
    let FlowAttribution {
        flow_id,
        local,
        peer,
        owner,
        state,
        ca_state,
        bytes_sent,
        bytes_received,
        bytes_share_pct,
        received_share_pct,
        rtt_inflation,
        srtt_us,
        min_rtt_us,
        cwnd,
        cwnd_reductions,
        segs_out,
        retransmits,
        spurious_retransmits,
        failed_retransmits,
        recovery_loss_ms,
        base_rtt_us,
        added_delay_us,
        backoff_parts,
        backoff_score,
        inbound,
        rank,
    } = a;
    let mut o = JsonObject::start(out);
    o.u64("flow_id", *flow_id);
    o.serde("local", local)?;
    o.serde("peer", peer)?;
    o.serde("owner", owner)?;
    o.serde("state", state)?;
    o.serde("ca_state", ca_state)?;
    o.u64("bytes_sent", *bytes_sent);
    o.u64("bytes_received", *bytes_received);
    o.f64("bytes_share_pct", *bytes_share_pct)?;
    o.f64("received_share_pct", *received_share_pct)?;
    o.opt_f64("rtt_inflation", *rtt_inflation)?;
    o.u32("srtt_us", *srtt_us);
    o.u32("min_rtt_us", *min_rtt_us);
    o.u32("cwnd", *cwnd);
    o.u64("cwnd_reductions", *cwnd_reductions);
    o.u64("segs_out", *segs_out);
    o.u64("retransmits", *retransmits);
    o.u64("spurious_retransmits", *spurious_retransmits);
    o.u64("failed_retransmits", *failed_retransmits);
    o.f64("recovery_loss_ms", *recovery_loss_ms)?;
    o.u32("base_rtt_us", *base_rtt_us);
    o.u32("added_delay_us", *added_delay_us);
    let BackoffParts {
        recovery,
        retransmits,
        delay,
        cwnd,
    } = backoff_parts;
    let mut parts = JsonObject::start(o.key("backoff_parts"));
    parts.f64("recovery", *recovery)?;
    parts.f64("retransmits", *retransmits)?;
    parts.f64("delay", *delay)?;
    parts.f64("cwnd", *cwnd)?;
    parts.end();
    o.f64("backoff_score", *backoff_score)?;
    o.bool("inbound", *inbound);
    o.u64("rank", *rank as u64);
    o.end();
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::snapshot::Owner;

    /// Attributions with every optional part both ways and the floats
    /// serde writes specially (not finite: null; whole, tiny and huge).
    pub(crate) fn attributions() -> Vec<FlowAttribution> {
        let base = FlowAttribution {
            flow_id: u64::MAX,
            local: "10.0.0.1:9092".parse().unwrap(),
            peer: "[2001:db8::2]:40000".parse().unwrap(),
            owner: Some(Owner {
                pid: 1,
                comm: "ja\"va\u{7}".into(),
                thread: Some("t".into()),
                cgroup_id: 3,
                cgroup: None,
                workload: None,
            }),
            state: "ESTAB".into(),
            ca_state: "loss".into(),
            bytes_sent: 2_000_000,
            bytes_received: 0,
            bytes_share_pct: 100.0 / 3.0,
            received_share_pct: 0.0,
            rtt_inflation: Some(1.5),
            srtt_us: u32::MAX,
            min_rtt_us: 1000,
            cwnd: 10,
            cwnd_reductions: 4,
            segs_out: 100,
            retransmits: 3,
            spurious_retransmits: 1,
            failed_retransmits: 2,
            recovery_loss_ms: 1e-7,
            base_rtt_us: 1000,
            added_delay_us: 1500,
            backoff_parts: BackoffParts {
                recovery: 0.0,
                retransmits: 1.0,
                delay: 0.123456789,
                cwnd: 1e300,
            },
            backoff_score: 99.9,
            inbound: false,
            rank: usize::MAX,
        };
        vec![
            base.clone(),
            FlowAttribution {
                owner: None,
                bytes_share_pct: f64::NAN,
                rtt_inflation: None,
                recovery_loss_ms: f64::INFINITY,
                backoff_score: -0.0,
                received_share_pct: 12.5,
                inbound: true,
                rank: 2,
                ..base.clone()
            },
            FlowAttribution {
                rtt_inflation: Some(f64::NEG_INFINITY),
                backoff_parts: BackoffParts::default(),
                ..base
            },
        ]
    }

    #[test]
    fn attributions_by_hand_are_the_bytes_serde_writes() {
        let flows = attributions();
        let mut by_hand = Vec::new();
        write_attributions(&mut by_hand, &flows).unwrap();
        assert_eq!(
            String::from_utf8(by_hand).unwrap(),
            serde_json::to_string(&flows).unwrap()
        );
    }
}
