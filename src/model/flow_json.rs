//! A snapshot's flows as JSON, written by hand: the same bytes serde's
//! derive writes for `Vec<FlowSample>`, in a fraction of the time.
//!
//! Why: at 200 busy flows a `watch --json` line or a recorded interval is
//! ~400 KB, nine tenths of it flows, and serde_json spends most of its time
//! per field, not per byte: every field name is scanned for characters to
//! escape and written in four small pieces. That was a fifth of the
//! observer's process time at a broker's scale (docs/performance.md,
//! "Fourth pass"). Here the names are constants written with their quotes
//! and colon in one piece, and numbers go straight through `itoa`.
//!
//! How it joins the rest of a line: while [`to_json_vec`] encodes a value
//! that holds a snapshot, `Snapshot::flows` serializes as a placeholder
//! string (see [`serialize_flows`]); the hand-written array then replaces
//! that string in the output. Strings that come from elsewhere (states,
//! owners, interface names) still go through serde_json, so they are
//! escaped exactly as before. A test compares the bytes with serde's.

use std::cell::Cell;
use std::net::SocketAddr;

use serde::{Serialize, Serializer};

use super::snapshot::{FlowCounters, FlowSample, PerCaState, Snapshot};

thread_local! {
    /// Set while [`to_json_vec`] encodes on this thread: the flows are
    /// written afterwards, by hand.
    static FLOWS_BY_HAND: Cell<bool> = const { Cell::new(false) };
}

/// What `Snapshot::flows` serializes as while [`FLOWS_BY_HAND`] is set
/// (with control characters, which serde_json escapes).
const PLACEHOLDER: &str = "\u{1}throttlescope:flows\u{1}";
/// The field as serde_json writes it with the placeholder for its value.
/// Only a key can be followed by `:`, and a string's inner quotes are
/// escaped, so the first match is the snapshot's flows field (nothing
/// before it in a snapshot holds a field of that name).
const FIELD_JSON: &[u8] = b"\"flows\":\"\\u0001throttlescope:flows\\u0001\"";

/// `serialize_with` of `Snapshot::flows`: the placeholder while a line is
/// encoded by [`to_json_vec`], else the flows as serde writes them.
pub(crate) fn serialize_flows<S: Serializer>(
    flows: &[FlowSample],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if FLOWS_BY_HAND.with(Cell::get) {
        serializer.serialize_str(PLACEHOLDER)
    } else {
        flows.serialize(serializer)
    }
}

/// Clears [`FLOWS_BY_HAND`] however the encoding ends.
struct ByHand;

impl ByHand {
    fn start() -> Self {
        FLOWS_BY_HAND.with(|f| f.set(true));
        ByHand
    }
}

impl Drop for ByHand {
    fn drop(&mut self) {
        FLOWS_BY_HAND.with(|f| f.set(false));
    }
}

/// `value`, which serializes `snap` once (a record line, a `--json` line),
/// as JSON: the same bytes as `serde_json::to_vec(value)`. `capacity`: the
/// buffer's size to start with (the last line's length, say).
pub(crate) fn to_json_vec<T: Serialize + ?Sized>(
    value: &T,
    snap: &Snapshot,
    capacity: usize,
) -> serde_json::Result<Vec<u8>> {
    let rest = {
        let _by_hand = ByHand::start();
        let mut rest = Vec::with_capacity(capacity / 8 + 1024);
        serde_json::to_writer(&mut rest, value)?;
        rest
    };
    let Some(field) = rest.windows(FIELD_JSON.len()).position(|w| w == FIELD_JSON) else {
        // `value` holds no snapshot: serde alone.
        return Ok(rest);
    };
    // The array goes where the placeholder string is (after `"flows":`).
    let start = field + b"\"flows\":".len();
    let mut out = Vec::with_capacity(capacity.max(rest.len() + snap.flows.len() * 1700));
    out.extend_from_slice(&rest[..start]);
    write_flows(&mut out, &snap.flows)?;
    out.extend_from_slice(&rest[field + FIELD_JSON.len()..]);
    Ok(out)
}

/// `flows` as serde writes a `Vec<FlowSample>`.
pub(crate) fn write_flows(out: &mut Vec<u8>, flows: &[FlowSample]) -> serde_json::Result<()> {
    out.push(b'[');
    for (i, flow) in flows.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_flow(out, flow)?;
    }
    out.push(b']');
    Ok(())
}

/// A JSON object written a field at a time: `key` is the field's name as
/// serde writes it (names here are plain ASCII: nothing to escape).
struct Object<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Object<'a> {
    fn start(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        Object { out, first: true }
    }

    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn u64(&mut self, key: &str, v: u64) {
        let out = self.key(key);
        out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    }

    fn u32(&mut self, key: &str, v: u32) {
        self.u64(key, v.into());
    }

    fn opt_u32(&mut self, key: &str, v: Option<u32>) {
        match v {
            Some(v) => self.u32(key, v),
            None => self.key(key).extend_from_slice(b"null"),
        }
    }

    fn bool(&mut self, key: &str, v: bool) {
        let text: &[u8] = if v { b"true" } else { b"false" };
        self.key(key).extend_from_slice(text);
    }

    /// Anything else (strings, addresses, owners) as serde_json writes it.
    fn serde<T: Serialize + ?Sized>(&mut self, key: &str, v: &T) -> serde_json::Result<()> {
        serde_json::to_writer(&mut *self.key(key), v)
    }

    fn end(self) {
        self.out.push(b'}');
    }
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
        netns_name,
        peak_bps,
    } = flow;
    let mut o = Object::start(out);
    o.u64("id", *id);
    o.u32("netns", *netns);
    write_addr(&mut o, "local", local)?;
    write_addr(&mut o, "peer", peer)?;
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
    if let Some(name) = netns_name {
        o.serde("netns_name", name)?;
    }
    if let Some(bps) = peak_bps {
        o.u64("peak_bps", *bps);
    }
    o.end();
    Ok(())
}

/// An address as serde writes one to a human-readable format: its Display
/// form as a string (digits, dots, colons and brackets: nothing to escape).
fn write_addr(o: &mut Object, key: &str, addr: &SocketAddr) -> serde_json::Result<()> {
    o.serde(key, addr)
}

fn write_counters(out: &mut Vec<u8>, c: &FlowCounters) {
    let FlowCounters {
        bytes_sent,
        bytes_acked,
        bytes_retrans,
        bytes_received,
        segs_out,
        data_segs_out,
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
    } = c;
    let mut o = Object::start(out);
    o.u64("bytes_sent", *bytes_sent);
    o.u64("bytes_acked", *bytes_acked);
    o.u64("bytes_retrans", *bytes_retrans);
    o.u64("bytes_received", *bytes_received);
    o.u64("segs_out", *segs_out);
    o.u64("data_segs_out", *data_segs_out);
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
    let mut o = Object::start(out);
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
        let by_serde = serde_json::to_vec(&snap).unwrap();
        assert_eq!(
            String::from_utf8(by_hand).unwrap(),
            String::from_utf8(by_serde).unwrap()
        );
        // The flag is down again: serde alone writes the flows.
        assert!(!FLOWS_BY_HAND.with(Cell::get));
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
