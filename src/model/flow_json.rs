//! A snapshot's flows as JSON, written by hand (src/model/json_splice.rs
//! says why and how): the same bytes serde's derive writes.

use serde::Serializer;

use super::json_splice::{self, write_array, HandField, JsonObject};
use super::snapshot::{FlowCounters, FlowSample, PerCaState, Snapshot};

/// `Snapshot::flows`, written by hand.
pub(crate) const FIELD: HandField = HandField {
    key: "flows",
    tag: "flows",
};

/// `serialize_with` of `Snapshot::flows`.
pub(crate) fn serialize_flows<S: Serializer>(
    flows: &[FlowSample],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    FIELD.serialize(flows, serializer)
}

/// `value`, which serializes `snap` once (a record line), as JSON: the
/// same bytes as `serde_json::to_vec(value)`.
pub(crate) fn to_json_vec<T: serde::Serialize + ?Sized>(
    value: &T,
    snap: &Snapshot,
    capacity: usize,
) -> serde_json::Result<Vec<u8>> {
    let flows = |out: &mut Vec<u8>| write_flows(out, &snap.flows);
    json_splice::to_json_vec(value, &[FIELD.written_by(&flows)], capacity)
}

/// `flows` as serde writes a `Vec<FlowSample>`.
pub(crate) fn write_flows(out: &mut Vec<u8>, flows: &[FlowSample]) -> serde_json::Result<()> {
    write_array(out, flows, write_flow)
}

fn write_flow(out: &mut Vec<u8>, flow: &FlowSample) -> serde_json::Result<()> {
    // Every field by name: a field added to FlowSample does not compile
    // here until it is written (in declaration order, as serde does).
    let FlowSample {
        id,
        netns,
        local,
        peer,
        state,
        ca_state,
        owner,
        srtt_us,
        min_rtt_us,
        rttvar_us,
        cwnd,
        ssthresh,
        mss,
        packets_out,
        retrans_out,
        lost_out,
        sacked_out,
        srtt_mean_us,
        srtt_max_us,
        cwnd_min,
        notsent_bytes,
        cwnd_limited,
        totals,
        delta,
        opened,
        closed,
        iface,
        unrouted,
        netns_name,
        peak_bps,
        kafka,
    } = flow;
    let mut o = JsonObject::start(out);
    o.u64("id", *id);
    o.u32("netns", *netns);
    // Addresses as serde writes them to a human-readable format: their
    // Display form, as a string.
    o.serde("local", local)?;
    o.serde("peer", peer)?;
    o.serde("state", state)?;
    o.serde("ca_state", ca_state)?;
    o.serde("owner", owner)?;
    o.u32("srtt_us", *srtt_us);
    o.u32("min_rtt_us", *min_rtt_us);
    o.u32("rttvar_us", *rttvar_us);
    o.u32("cwnd", *cwnd);
    o.u32("ssthresh", *ssthresh);
    o.u32("mss", *mss);
    o.u32("packets_out", *packets_out);
    o.u32("retrans_out", *retrans_out);
    o.u32("lost_out", *lost_out);
    o.u32("sacked_out", *sacked_out);
    o.opt_u32("srtt_mean_us", *srtt_mean_us);
    o.opt_u32("srtt_max_us", *srtt_max_us);
    o.opt_u32("cwnd_min", *cwnd_min);
    o.u32("notsent_bytes", *notsent_bytes);
    o.bool("cwnd_limited", *cwnd_limited);
    write_counters(o.key("totals"), totals);
    write_counters(o.key("delta"), delta);
    o.bool("opened", *opened);
    o.bool("closed", *closed);
    o.serde("iface", iface)?;
    if *unrouted {
        o.bool("unrouted", true);
    }
    if let Some(name) = netns_name {
        o.serde("netns_name", name)?;
    }
    if let Some(bps) = peak_bps {
        o.u64("peak_bps", *bps);
    }
    if let Some(k) = kafka {
        o.serde("kafka", k)?;
    }
    o.end();
    Ok(())
}

fn write_counters(out: &mut Vec<u8>, c: &FlowCounters) {
    let FlowCounters {
        bytes_sent,
        bytes_acked,
        bytes_retrans,
        bytes_received,
        segs_out,
        data_segs_out,
        segs_in,
        retrans_segs,
        retrans_spurious,
        retrans_skbs_traced,
        retrans_segs_traced,
        retrans_failed,
        delivered,
        probe_events,
        cwnd_reductions,
        waiting_events,
        ca_time_us,
        ca_entries,
        busy_us,
        rwnd_limited_us,
        sndbuf_limited_us,
        retrans_dsack,
        retrans_undone,
        retrans_probes,
        rto_undone,
        recovery_undone,
    } = c;
    let mut o = JsonObject::start(out);
    o.u64("bytes_sent", *bytes_sent);
    o.u64("bytes_acked", *bytes_acked);
    o.u64("bytes_retrans", *bytes_retrans);
    o.u64("bytes_received", *bytes_received);
    o.u64("segs_out", *segs_out);
    o.u64("data_segs_out", *data_segs_out);
    o.u64("segs_in", *segs_in);
    o.u64("retrans_segs", *retrans_segs);
    o.u64("retrans_spurious", *retrans_spurious);
    o.u64("retrans_skbs_traced", *retrans_skbs_traced);
    o.u64("retrans_segs_traced", *retrans_segs_traced);
    o.u64("retrans_failed", *retrans_failed);
    o.u64("delivered", *delivered);
    o.u64("probe_events", *probe_events);
    o.u64("cwnd_reductions", *cwnd_reductions);
    o.u64("waiting_events", *waiting_events);
    write_per_state(o.key("ca_time_us"), ca_time_us);
    write_per_state(o.key("ca_entries"), ca_entries);
    o.u64("busy_us", *busy_us);
    o.u64("rwnd_limited_us", *rwnd_limited_us);
    o.u64("sndbuf_limited_us", *sndbuf_limited_us);
    o.u64("retrans_dsack", *retrans_dsack);
    o.u64("retrans_undone", *retrans_undone);
    o.u64("retrans_probes", *retrans_probes);
    o.u64("rto_undone", *rto_undone);
    o.u64("recovery_undone", *recovery_undone);
    o.end();
}

fn write_per_state(out: &mut Vec<u8>, v: &PerCaState<u64>) {
    let PerCaState {
        open,
        disorder,
        cwr,
        recovery,
        loss,
    } = v;
    let mut o = JsonObject::start(out);
    o.u64("open", *open);
    o.u64("disorder", *disorder);
    o.u64("cwr", *cwr);
    o.u64("recovery", *recovery);
    o.u64("loss", *loss);
    o.end();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::{InterfaceSample, Owner};
    use crate::model::workload::Workload;
    use serde::Serialize;

    const PLACEHOLDER: &str = "\u{1}throttlescope:flows\u{1}";

    /// Flows with every optional part both ways, numbers at their limits,
    /// strings that need escaping and both address families.
    fn snapshot() -> Snapshot {
        let counters = |k: u64| FlowCounters {
            bytes_sent: u64::MAX,
            bytes_acked: 123_456_789_012 * k,
            bytes_retrans: k,
            bytes_received: 0,
            segs_out: 98_765 + k,
            data_segs_out: 90_000,
            segs_in: 45_000 + k,
            retrans_segs: 7,
            retrans_spurious: 1,
            retrans_skbs_traced: 3,
            retrans_segs_traced: 6,
            retrans_failed: 2,
            delivered: 97_000,
            probe_events: 1_000,
            cwnd_reductions: 4,
            waiting_events: 5,
            ca_time_us: PerCaState::from_array([1, 2, 3, 4, u64::MAX]),
            ca_entries: PerCaState::from_array([9, 8, 7, 6, 0]),
            busy_us: 10,
            rwnd_limited_us: 11,
            sndbuf_limited_us: 12,
            retrans_dsack: 1,
            retrans_undone: 13,
            retrans_probes: 14,
            rto_undone: 15,
            recovery_undone: k,
        };
        let owner = Owner {
            pid: 4242,
            comm: "java \"kafka\"\u{1b}[2J\\".into(),
            thread: Some("data-plane-kafka-0".into()),
            cgroup_id: 77,
            cgroup: Some("/kubepods/pod\u{e9}".into()),
            workload: Some(Workload {
                pod_name: Some("broker-0".into()),
                ..Workload::default()
            }),
        };
        let mut snap = Snapshot::example(3);
        snap.interfaces.push(InterfaceSample {
            name: PLACEHOLDER.into(),
            ..InterfaceSample::default()
        });
        snap.flows = vec![
            FlowSample::example(1),
            FlowSample {
                local: "[fe80::1%2]:9092".parse().unwrap(),
                peer: "[2001:db8::7]:40001".parse().unwrap(),
                state: PLACEHOLDER.into(),
                ca_state: "recovery".into(),
                owner: Some(owner.clone()),
                srtt_us: u32::MAX,
                srtt_mean_us: Some(0),
                srtt_max_us: Some(u32::MAX),
                cwnd_min: Some(1),
                notsent_bytes: 9,
                cwnd_limited: true,
                totals: counters(2),
                delta: counters(1),
                opened: true,
                closed: true,
                iface: Some("eth\"0".into()),
                netns_name: Some("pod default/broker-0".into()),
                peak_bps: Some(u64::MAX),
                kafka: Some(crate::model::kafka::KafkaFlow {
                    who: crate::model::kafka::KafkaIdentity {
                        group: Some("g\"1".into()),
                        ..crate::model::kafka::KafkaIdentity::role(
                            crate::model::kafka::KafkaRole::Consume,
                        )
                    },
                    ambiguous: vec!["a/b".into()],
                }),
                id: u64::MAX,
                netns: u32::MAX,
                ..FlowSample::example(2)
            },
            FlowSample {
                owner: Some(Owner {
                    thread: None,
                    cgroup: None,
                    workload: None,
                    ..owner
                }),
                iface: Some("eth0".into()),
                peak_bps: Some(0),
                ..FlowSample::example(3)
            },
        ];
        snap
    }

    #[test]
    fn flows_by_hand_are_the_bytes_serde_writes() {
        let snap = snapshot();
        let by_hand = to_json_vec(&snap, &snap, 0).unwrap();
        // After to_json_vec, serde writes the flows itself again.
        let by_serde = serde_json::to_vec(&snap).unwrap();
        assert!(memchr::memmem::find(&by_serde, b"\"flows\":\"\\u0001").is_none());
        assert_eq!(
            String::from_utf8(by_hand).unwrap(),
            String::from_utf8(by_serde).unwrap()
        );
        let mut alone = Vec::new();
        write_flows(&mut alone, &snap.flows).unwrap();
        assert_eq!(alone, serde_json::to_vec(&snap.flows).unwrap());
    }

    #[test]
    fn a_snapshot_inside_a_line_and_none_at_all() {
        #[derive(Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Tagged<'a> {
            Snapshot(&'a Snapshot),
        }
        #[derive(Serialize)]
        struct Flat<'a> {
            #[serde(flatten)]
            snapshot: &'a Snapshot,
            after: &'a str,
        }
        let snap = snapshot();
        let tagged = Tagged::Snapshot(&snap);
        assert_eq!(
            to_json_vec(&tagged, &snap, 64).unwrap(),
            serde_json::to_vec(&tagged).unwrap()
        );
        let flat = Flat {
            snapshot: &snap,
            after: PLACEHOLDER,
        };
        assert_eq!(
            to_json_vec(&flat, &snap, 64).unwrap(),
            serde_json::to_vec(&flat).unwrap()
        );
        // No snapshot in the value: serde's bytes, the placeholder text
        // left as it was.
        let text = ("flows", PLACEHOLDER);
        assert_eq!(
            to_json_vec(&text, &snap, 0).unwrap(),
            serde_json::to_vec(&text).unwrap()
        );
    }

    #[test]
    #[ignore = "timing, not a check: cargo test --release --lib flow_json_timing -- --ignored --nocapture"]
    fn flow_json_timing() {
        let mut snap = snapshot();
        let flows: Vec<FlowSample> = (0..200)
            .map(|i| FlowSample {
                id: 1_000_000 + i,
                ..snap.flows[1].clone()
            })
            .collect();
        snap.flows = flows;
        let rounds = 300u32;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(serde_json::to_vec(&snap).unwrap());
        }
        let serde = t.elapsed() / rounds;
        let t = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(to_json_vec(&snap, &snap, 400_000).unwrap());
        }
        let by_hand = t.elapsed() / rounds;
        eprintln!("200 flows: serde {serde:?}, by hand {by_hand:?}");
    }
}
