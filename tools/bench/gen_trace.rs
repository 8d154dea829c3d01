//! gen-trace: writes a synthetic but realistic recording, for benchmarks of
//! `report` and `replay` at sizes no lab run produces (1,000 flows for an
//! hour). It goes through the library's own `Snapshot` types and
//! `TraceWriter`, so the file is exactly what `throttlescope record` writes.
//!
//! The story of every recording: a burst phase (about 40% of the run) at the
//! burst ceiling with the allowance counters at free-flow rates (12-37% of tx
//! packets, seed 000), then enforcement on the first interface: throughput
//! flat at the baseline, `bw_out_allowance_exceeded` at 78-114% of tx
//! packets, RTT inflated 2-4x, and in the middle of it a stretch where the
//! hypervisor's queue overflows (retransmits at ~0.5%). Flows open and close
//! throughout (mean life 10 minutes), with their events, each on one
//! interface (`iface`), so only the first one's flows carry the loss; health
//! counters grow. Same `--seed`, same intervals (the end record carries the time it
//! was written).
//!
//!     cargo run --release --example gen-trace -- --out /tmp/t.jsonl.zst
//!     cargo run --release --example gen-trace -- --flows 50 --seconds 600 --out t.jsonl

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Parser;
use throttlescope::analysis::Thresholds;
use throttlescope::model::snapshot::*;
use throttlescope::record::{
    InterfaceInfo, RotateOptions, TraceHeader, TraceWriter, CURRENT_VERSION, FORMAT_NAME,
};

#[derive(Debug, Parser)]
#[command(
    name = "gen-trace",
    about = "Write a synthetic burst-then-enforcement recording (zstd when --out ends in .zst)"
)]
struct Args {
    /// Flows open at any time (closed ones are replaced by new ones).
    #[arg(long, default_value_t = 1000)]
    flows: usize,
    /// Length of the recording, in 1 s intervals.
    #[arg(long, default_value_t = 3600)]
    seconds: u64,
    /// Interfaces, 1 to 3: ens5 (ENA, shaped), ens6 (ENA), cni0 (veth).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=3))]
    interfaces: u8,
    /// Seed of the pseudo-random numbers.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The trace to write; never overwritten. A `.zst` suffix compresses.
    #[arg(long)]
    out: PathBuf,
}

/// xorshift64*: deterministic, good enough for plausible noise.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // Zero is xorshift's fixed point; mix the seed so 0, 1, 2 differ well.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    /// A whole number of events whose expectation is `mean` (floor plus a
    /// coin for the fraction: cheap, right on average).
    fn count(&mut self, mean: f64) -> u64 {
        let whole = mean.floor();
        whole as u64 + u64::from(self.unit() < mean - whole)
    }
}

const START_UNIX_MS: u64 = 1_763_000_000_000;
const START_MONO_NS: u64 = 86_400_000_000_000;
const SECOND_NS: u64 = 1_000_000_000;
const MSS: u32 = 8949;
/// Bytes per wire packet besides the payload (Ethernet, IP, TCP headers).
const HEADERS: u64 = 66;

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Burst,
    /// Enforced: the hypervisor queues (RTT up, few retransmits).
    Queuing,
    /// Enforced and its queue overflows: packets dropped, retransmits.
    Dropping,
}

fn phase_at(t: u64, seconds: u64) -> Phase {
    let burst_end = seconds * 2 / 5;
    let drop_from = seconds * 3 / 5;
    let drop_to = seconds * 7 / 10;
    if t < burst_end {
        Phase::Burst
    } else if (drop_from..drop_to).contains(&t) {
        Phase::Dropping
    } else {
        Phase::Queuing
    }
}

struct Flow {
    id: u64,
    iface: usize,
    peer: SocketAddr,
    local: SocketAddr,
    /// Share of its interface's traffic (0: an idle consumer).
    weight: f64,
    min_rtt_us: u32,
    totals: FlowCounters,
    cwnd: u32,
    opened: bool,
    /// Reported closed: replaced by a new flow at the next interval.
    closed: bool,
}

struct Iface {
    name: &'static str,
    driver: &'static str,
    ena: bool,
    mtu: u32,
    totals: LinkCounters,
    allowance: AllowanceCounters,
}

struct Generator {
    rng: Rng,
    seconds: u64,
    flows: Vec<Flow>,
    ifaces: Vec<Iface>,
    next_cookie: u64,
    next_port: u16,
    /// Cumulative program event counts, in `Health` order.
    program_events: [u64; 5],
    iter_records: u64,
    seeded: u64,
}

const PROGRAMS: [&str; 5] = [
    "on_tcp_probe",
    "on_retransmit",
    "on_cong_state",
    "on_sendmsg",
    "on_state_change",
];

impl Generator {
    fn new(args: &Args) -> Generator {
        let all = [
            ("ens5", "ena", true, 9001),
            ("ens6", "ena", true, 9001),
            ("cni0", "veth", false, 1500),
        ];
        let ifaces = all[..args.interfaces as usize]
            .iter()
            .map(|&(name, driver, ena, mtu)| Iface {
                name,
                driver,
                ena,
                mtu,
                totals: LinkCounters::default(),
                // A fresh instance already shows counts (seed 000: 474).
                allowance: AllowanceCounters {
                    bw_in_allowance_exceeded: Some(474),
                    bw_out_allowance_exceeded: Some(0),
                    pps_allowance_exceeded: Some(0),
                    conntrack_allowance_exceeded: Some(0),
                    linklocal_allowance_exceeded: Some(0),
                    conntrack_allowance_available: Some(60_000),
                    ..Default::default()
                },
            })
            .collect();
        let mut g = Generator {
            rng: Rng::new(args.seed),
            seconds: args.seconds,
            flows: Vec::with_capacity(args.flows),
            ifaces,
            next_cookie: 0x4000 + (args.seed & 0xffff) * 0x1_0000,
            next_port: 0,
            program_events: [0; 5],
            iter_records: 0,
            seeded: args.flows as u64,
        };
        for slot in 0..args.flows {
            let f = g.new_flow(slot, false);
            g.flows.push(f);
        }
        g
    }

    fn new_flow(&mut self, slot: usize, opened: bool) -> Flow {
        self.next_cookie += 1 + self.rng.next_u64() % 7;
        self.next_port = self.next_port.wrapping_add(1);
        let r = &mut self.rng;
        // Most traffic on a few flows, a fifth of the consumers idle.
        let weight = if r.unit() < 0.2 {
            0.0
        } else {
            r.unit().powi(4) * 20.0 + 0.05
        };
        let host = r.next_u64();
        Flow {
            id: self.next_cookie,
            iface: slot % self.ifaces.len(),
            peer: SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(10, 1, (host >> 8) as u8, host as u8 | 1)),
                32768 + self.next_port % 28000,
            ),
            local: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10)), 9092),
            weight,
            min_rtt_us: r.range(120.0, 600.0) as u32,
            totals: FlowCounters::default(),
            cwnd: 10,
            opened,
            closed: false,
        }
    }

    /// Bytes per second each interface carries at `t`.
    fn offered(&mut self, iface: usize, phase: Phase) -> f64 {
        let noise = self.rng.range(0.97, 1.03);
        match (iface, phase) {
            // r4.large-like: ~10 Gbit/s burst ceiling, then ~0.75 Gbit/s.
            (0, Phase::Burst) => 1.25e9 * self.rng.range(0.85, 1.0),
            (0, _) => 0.75e9 / 8.0 * noise,
            (1, _) => 0.4e9 / 8.0 * self.rng.range(0.5, 1.5),
            _ => 0.1e9 / 8.0 * self.rng.range(0.5, 1.5),
        }
    }

    fn snapshot(&mut self, t: u64) -> Snapshot {
        let phase = phase_at(t, self.seconds);
        let interval_ns = SECOND_NS + self.rng.next_u64() % 2_000_000 - 1_000_000;
        let mono_ns = START_MONO_NS + (t + 1) * SECOND_NS + self.rng.next_u64() % 1_000_000;
        let mut events = Vec::new();
        // Replace the flows that closed last interval.
        for slot in 0..self.flows.len() {
            if self.flows[slot].closed {
                let f = self.new_flow(slot, true);
                for kind in [
                    FlowEventKind::Open,
                    FlowEventKind::State {
                        from: "SYN-RECV".into(),
                        to: "ESTAB".into(),
                    },
                ] {
                    events.push(event(mono_ns - interval_ns / 2, f.id, kind));
                }
                self.flows[slot] = f;
            }
        }
        let n_if = self.ifaces.len();
        let mut weight_sum = vec![0.0; n_if];
        for f in &self.flows {
            weight_sum[f.iface] += f.weight;
        }
        let offered: Vec<f64> = (0..n_if).map(|i| self.offered(i, phase)).collect();
        let mut link_delta = vec![LinkCounters::default(); n_if];
        let mut samples = Vec::with_capacity(self.flows.len());
        let mut probe_total = 0;
        let mut retrans_total = 0;
        let secs = interval_ns as f64 / 1e9;
        for slot in 0..self.flows.len() {
            let enforced = self.flows[slot].iface == 0 && phase != Phase::Burst;
            let dropping = self.flows[slot].iface == 0 && phase == Phase::Dropping;
            let closing = self.rng.unit() < 1.0 / 600.0;
            let r = &mut self.rng;
            let f = &mut self.flows[slot];
            let share = if weight_sum[f.iface] > 0.0 {
                f.weight / weight_sum[f.iface]
            } else {
                0.0
            };
            let bytes = (offered[f.iface] * secs * share * r.range(0.9, 1.1)) as u64;
            let data_segs = bytes.div_ceil(MSS as u64);
            let acks_in = data_segs / 2 + u64::from(data_segs > 0);
            let retrans_rate = match (dropping, enforced) {
                (true, _) => 0.005,
                (false, true) => 0.00003,
                _ => 0.00001,
            };
            let retrans = r.count(data_segs as f64 * retrans_rate);
            let inflation = if enforced {
                r.range(2.0, 4.0)
            } else {
                r.range(1.02, 1.2)
            };
            let srtt = (f.min_rtt_us as f64 * inflation) as u32;
            f.cwnd = if data_segs == 0 {
                f.cwnd
            } else if enforced {
                r.range(20.0, 60.0) as u32
            } else {
                (f.cwnd + 40).min(r.range(300.0, 500.0) as u32)
            };
            let in_recovery_us = if retrans > 0 {
                r.range(1_000.0, 50_000.0) as u64
            } else {
                0
            };
            let delta = FlowCounters {
                bytes_sent: bytes + retrans * MSS as u64,
                bytes_acked: bytes,
                bytes_retrans: retrans * MSS as u64,
                bytes_received: acks_in * 40 + data_segs * 3,
                segs_out: data_segs + retrans + acks_in / 4,
                data_segs_out: data_segs + retrans,
                retrans_segs: retrans,
                retrans_spurious: 0,
                retrans_skbs_traced: retrans,
                retrans_segs_traced: retrans,
                retrans_failed: 0,
                delivered: data_segs,
                probe_events: acks_in,
                cwnd_reductions: u64::from(retrans > 0) + u64::from(enforced && data_segs > 0),
                ca_time_us: PerCaState::from_array([
                    (interval_ns / 1000).saturating_sub(in_recovery_us),
                    0,
                    0,
                    in_recovery_us,
                    0,
                ]),
                ca_entries: PerCaState::from_array([
                    u64::from(retrans > 0),
                    0,
                    0,
                    u64::from(retrans > 0),
                    0,
                ]),
                // Under enforcement the senders have more than they may send.
                waiting_events: if enforced { acks_in } else { 0 },
                busy_us: if data_segs > 0 { interval_ns / 1000 } else { 0 },
                rwnd_limited_us: 0,
                sndbuf_limited_us: 0,
                ..FlowCounters::default()
            };
            add_counters(&mut f.totals, &delta);
            probe_total += acks_in;
            retrans_total += retrans;
            let l = &mut link_delta[f.iface];
            l.tx_packets += delta.segs_out;
            l.tx_bytes += delta.bytes_sent + delta.segs_out * HEADERS;
            l.rx_packets += acks_in;
            l.rx_bytes += delta.bytes_received + acks_in * HEADERS;
            let active = data_segs > 0;
            samples.push(FlowSample {
                id: f.id,
                netns: 4026531840,
                local: f.local,
                peer: f.peer,
                state: if closing { "CLOSE" } else { "ESTAB" }.into(),
                ca_state: if retrans > 0 { "recovery" } else { "open" }.into(),
                owner: Some(Owner {
                    pid: 2211,
                    comm: "java".into(),
                    thread: None,
                    cgroup_id: 9421,
                    cgroup: None,
                    workload: None,
                }),
                srtt_us: srtt,
                min_rtt_us: f.min_rtt_us,
                rttvar_us: srtt / 4,
                cwnd: f.cwnd,
                ssthresh: if enforced { f.cwnd } else { i32::MAX as u32 },
                mss: MSS,
                packets_out: if active { f.cwnd / 2 } else { 0 },
                retrans_out: u32::from(retrans > 0),
                lost_out: u32::from(dropping && retrans > 0),
                sacked_out: if retrans > 0 { 3 } else { 0 },
                srtt_mean_us: active.then_some(srtt),
                srtt_max_us: active.then(|| (srtt as f64 * r.range(1.0, 1.5)) as u32),
                cwnd_min: active.then(|| f.cwnd.saturating_sub(r.next_u64() as u32 % 8).max(2)),
                notsent_bytes: if enforced { 64 * 1024 } else { 0 },
                cwnd_limited: enforced,
                totals: f.totals,
                delta,
                opened: f.opened,
                closed: closing,
                iface: Some(self.ifaces[f.iface].name.to_string()),
                unrouted: false,
                netns_name: None,
                peak_bps: None,
                kafka: None,
            });
            f.opened = false;
            let when = mono_ns - interval_ns + r.next_u64() % interval_ns;
            // Events are sampled like the ring buffer would carry them; a
            // retransmit storm is capped so the line stays plausible.
            if retrans > 0 && events.len() < 200 {
                events.push(event(
                    when,
                    f.id,
                    FlowEventKind::CongestionState {
                        from: "open".into(),
                        to: "recovery".into(),
                    },
                ));
                events.push(event(
                    when + 10_000,
                    f.id,
                    FlowEventKind::Retransmit {
                        segs: retrans.min(u32::MAX as u64) as u32,
                    },
                ));
            }
            if closing {
                events.push(event(
                    when,
                    f.id,
                    FlowEventKind::State {
                        from: "ESTAB".into(),
                        to: "FIN-WAIT-1".into(),
                    },
                ));
                events.push(event(when + 50_000, f.id, FlowEventKind::Close));
                // The slot gets a new flow next interval.
                f.closed = true;
            }
        }
        events.sort_by_key(|e| e.mono_ns);
        let n_events = events.len() as u64;
        self.program_events[0] += probe_total;
        self.program_events[1] += retrans_total;
        self.program_events[2] += n_events / 2;
        self.program_events[3] += samples.len() as u64 * 3;
        self.program_events[4] += n_events / 4;
        self.iter_records += samples.len() as u64;
        let samples_len = samples.len() as u64;
        let interfaces = (0..n_if)
            .map(|i| self.interface(i, phase, link_delta[i]))
            .collect();
        Snapshot {
            seq: t,
            mono_ns,
            unix_ms: START_UNIX_MS + (mono_ns - START_MONO_NS) / 1_000_000,
            interval_ns,
            interfaces,
            flows: samples,
            idle_flows: 0,
            events,
            fragments_created: Some(0),
            folded: Default::default(),
            udp_openers: None,
            icmp_openers: None,
            health: Health {
                programs: PROGRAMS
                    .iter()
                    .zip(self.program_events)
                    .map(|(name, events)| ProgramHealth {
                        name: name.to_string(),
                        events,
                        ..Default::default()
                    })
                    .collect(),
                untracked_flows: 0,
                ringbuf_drops: 0,
                closes_deferred: 0,
                closes_lost: 0,
                iter_records: self.iter_records,
                seeded_flows: self.seeded,
                counter_read_failures: 0,
                allowance_read_failures: 0,
                allowance_untrusted_reads: 0,
                host_queue_untracked: 0,
                // As a full dump reads them: every flow of the interval.
                flows_dumped: samples_len,
                flows_carried: 0,
                probe_sampling: 1,
                late_intervals: 0,
                missing_interfaces: Vec::new(),
                ..Default::default()
            },
        }
    }

    fn interface(&mut self, i: usize, phase: Phase, delta: LinkCounters) -> InterfaceSample {
        let r = &mut self.rng;
        let iface = &mut self.ifaces[i];
        add_link(&mut iface.totals, &delta);
        let allowance = if iface.ena {
            // % of tx packets the shaper queued or dropped (seed 000).
            let pct = match (i, phase) {
                (0, Phase::Burst) | (1.., _) => r.range(12.0, 37.0),
                (0, _) => r.range(78.0, 114.0),
            };
            let d = AllowanceCounters {
                bw_in_allowance_exceeded: Some(r.count(delta.rx_packets as f64 * 0.001)),
                bw_out_allowance_exceeded: Some((delta.tx_packets as f64 * pct / 100.0) as u64),
                pps_allowance_exceeded: Some(r.count(0.2)),
                conntrack_allowance_exceeded: Some(0),
                linklocal_allowance_exceeded: Some(0),
                conntrack_allowance_available: Some(60_000 - r.next_u64() % 500),
                ..Default::default()
            };
            let a = &mut iface.allowance;
            let add =
                |t: &mut Option<u64>, d: Option<u64>| *t = Some(t.unwrap_or(0) + d.unwrap_or(0));
            add(&mut a.bw_in_allowance_exceeded, d.bw_in_allowance_exceeded);
            add(
                &mut a.bw_out_allowance_exceeded,
                d.bw_out_allowance_exceeded,
            );
            add(&mut a.pps_allowance_exceeded, d.pps_allowance_exceeded);
            a.conntrack_allowance_available = d.conntrack_allowance_available;
            AllowanceStatus::Read(Box::new(AllowanceSample {
                source: "ioctl".into(),
                totals: *a,
                delta: d,
                resets: 0,
                zeroed_reads: 0,
                read_failures: 0,
                admin_cmd_failures: Some(0),
                last_error: None,
                ..Default::default()
            }))
        } else {
            AllowanceStatus::Unavailable {
                reason: format!("driver {} has no allowance counters", iface.driver),
            }
        };
        let pkts = delta.tx_packets;
        let host_queue = HostQueueSample {
            enqueued: pkts,
            dequeued: pkts,
            backlog_packets: r.next_u64() % 4,
            backlog_bytes: (r.next_u64() % 4) * iface.mtu as u64,
            peak_backlog_packets: 8 + r.next_u64() % 24,
            peak_backlog_bytes: (8 + r.next_u64() % 24) * iface.mtu as u64,
            sojourn_mean_us: (pkts > 0).then(|| 5 + r.next_u64() % 30),
            sojourn_max_us: (pkts > 0).then(|| 60 + r.next_u64() % 400),
            drops: BTreeMap::new(),
            qdisc_drops: Some(0),
            qdisc_sent: Some(pkts),
            unseen_drops: 0,
            paused: false,
        };
        InterfaceSample {
            name: iface.name.into(),
            driver: Some(iface.driver.into()),
            totals: iface.totals,
            delta,
            offloads: Some(Offloads {
                tso: false,
                gso: false,
                gro: false,
            }),
            mtu: iface.mtu,
            allowance,
            host_queue: Some(host_queue),
            ..Default::default()
        }
    }
}

fn event(mono_ns: u64, flow_id: u64, kind: FlowEventKind) -> FlowEvent {
    FlowEvent {
        mono_ns,
        flow_id,
        netns: 4026531840,
        kind,
    }
}

fn add_counters(t: &mut FlowCounters, d: &FlowCounters) {
    t.bytes_sent += d.bytes_sent;
    t.bytes_acked += d.bytes_acked;
    t.bytes_retrans += d.bytes_retrans;
    t.bytes_received += d.bytes_received;
    t.segs_out += d.segs_out;
    t.data_segs_out += d.data_segs_out;
    t.retrans_segs += d.retrans_segs;
    t.retrans_skbs_traced += d.retrans_skbs_traced;
    t.retrans_segs_traced += d.retrans_segs_traced;
    t.retrans_failed += d.retrans_failed;
    t.delivered += d.delivered;
    t.probe_events += d.probe_events;
    t.cwnd_reductions += d.cwnd_reductions;
    t.waiting_events += d.waiting_events;
    t.busy_us += d.busy_us;
    t.rwnd_limited_us += d.rwnd_limited_us;
    t.sndbuf_limited_us += d.sndbuf_limited_us;
    let (mut a, b) = (t.ca_time_us.to_array(), d.ca_time_us.to_array());
    let (mut c, e) = (t.ca_entries.to_array(), d.ca_entries.to_array());
    for k in 0..5 {
        a[k] += b[k];
        c[k] += e[k];
    }
    t.ca_time_us = PerCaState::from_array(a);
    t.ca_entries = PerCaState::from_array(c);
}

fn add_link(t: &mut LinkCounters, d: &LinkCounters) {
    t.tx_packets += d.tx_packets;
    t.rx_packets += d.rx_packets;
    t.tx_bytes += d.tx_bytes;
    t.rx_bytes += d.rx_bytes;
    t.tx_dropped += d.tx_dropped;
    t.rx_dropped += d.rx_dropped;
    t.tx_errors += d.tx_errors;
    t.rx_errors += d.rx_errors;
}

fn run(args: &Args) -> Result<u64> {
    if args.flows == 0 || args.seconds == 0 {
        bail!("--flows and --seconds must be above 0");
    }
    // TraceWriter refuses an existing file too; checked first so nothing
    // is generated for nothing.
    if args.out.exists() {
        bail!(
            "{}: already exists; refusing to overwrite (remove it or choose another name)",
            args.out.display()
        );
    }
    let mut g = Generator::new(args);
    let header = TraceHeader {
        format: FORMAT_NAME.into(),
        version: CURRENT_VERSION,
        tool_version: format!("gen-trace {}", env!("CARGO_PKG_VERSION")),
        tool_commit: String::new(),
        bpf_objects: Default::default(),
        host: format!("gen-trace-seed-{}", args.seed),
        kernel: "synthetic".into(),
        interfaces: g
            .ifaces
            .iter()
            .map(|i| InterfaceInfo {
                name: i.name.into(),
                driver: Some(i.driver.into()),
                driver_version: None,
            })
            .collect(),
        interval_ns: SECOND_NS,
        thresholds: serde_json::to_value(Thresholds::default())?,
        start_unix_ms: START_UNIX_MS,
        start_mono_ns: START_MONO_NS,
        segment: 0,
        instance_type: None,
        baseline: None,
        host_id: None,
    };
    let mut w = TraceWriter::create(&args.out, header, RotateOptions::default())?;
    for t in 0..args.seconds {
        let snap = g.snapshot(t);
        w.write(&snap)?;
    }
    w.finish()?;
    Ok(std::fs::metadata(&args.out)?.len())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(bytes) => {
            println!(
                "gen-trace: wrote {} ({} bytes, {:.1} MiB): {} intervals, {} flows, {} interfaces, seed {}",
                args.out.display(),
                bytes,
                bytes as f64 / (1 << 20) as f64,
                args.seconds,
                args.flows,
                args.interfaces,
                args.seed
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen-trace: {e:#}");
            ExitCode::FAILURE
        }
    }
}
