//! Loads and attaches flows.bpf.c, and reads it back: flow records through
//! the `dump_flows` iterator, events through the ring buffer, health through
//! the per-CPU `health` array and each program's kernel stats.

use std::cell::{Cell, RefCell};
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use libbpf_rs::btf::Btf;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Iter, IterOpts, Link, MapCore, OpenObject, RingBufferBuilder};

use super::event_reader::{EventReader, Pending};
use super::flows_skel::types::{
    ts_close_event, ts_event, ts_event_kind, ts_flow_record, ts_health_counter, uo_health_counter,
};
use super::flows_skel::{FlowsSkel, FlowsSkelBuilder};
use super::load::{self, health_of, not_loaded, NotLoaded, ProgramSpec};
// Named by the lab tests and the benchmark from here, where they lived.
pub use super::load::{prog_stats, NetnsFilter, ProgStats};
use super::netns_dump::{read_iter, OtherNamespaces};
use super::percpu;
use super::records::read_record;
use super::udpopen::{UdpOpenRead, UdpOpenReader};
use crate::model::snapshot::ProgramHealth;

/// A raw event as the ring buffer delivered it.
#[derive(Debug, Clone)]
pub(crate) enum RawEvent {
    Plain(ts_event),
    Close(Box<ts_close_event>),
}

/// Cumulative counters of the `health` array.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProbeCounters(pub [u64; ts_health_counter::TS_H_MAX.0 as usize]);

impl ProbeCounters {
    pub(crate) fn get(&self, c: ts_health_counter) -> u64 {
        self.0[c.0 as usize]
    }
}

/// How each interval's flow records are read.
enum FlowDump {
    /// The socket-storage map iterator: every tracked socket of every
    /// namespace in one pass.
    Map(Link),
    /// The TCP socket iterator, which walks the namespace it is created
    /// in: this thread's, then (with --all-netns) every other one.
    PerNetns {
        link: Link,
        others: Option<OtherNamespaces>,
    },
}

/// The sweep of the moved set (flows.bpf.c, `sweep_moved`), where the kernel
/// runs it: each interval reads the flows that moved, and no other.
struct Sweep {
    ring: libbpf_rs::RingBuffer<'static>,
    /// What the ring's callback decoded since the last take.
    out: Arc<Mutex<SweepOut>>,
}

#[derive(Default)]
struct SweepOut {
    records: Vec<ts_flow_record>,
    malformed: u64,
}

/// A sweep run that keeps stopping on a full ring is given up after this
/// many runs in one dump (never expected: each run drains the ring first).
const SWEEP_MAX_RUNS: u32 = 1024;

/// The attached flow probes. Dropping it detaches every program.
pub(crate) struct FlowProbes {
    skel: FlowsSkel<'static>,
    dump: RefCell<FlowDump>,
    /// None where the sweep did not load or its first run was refused:
    /// every dump then goes through `dump`.
    sweep: Option<Sweep>,
    events: EventReader,
    /// Optional programs this kernel lacks or rejected.
    dropped: load::Dropped,
    /// tcp_probe's per-segment figures come from one run in this many (1:
    /// every run).
    probe_sampling: u32,
    /// TS_H_CLOSES_DEFERRED when `closed_overflow` was last walked.
    deferred_walked: Cell<u64>,
    /// The UDP socket count's link and reader (bpf/udpopen.bpf.h); None when
    /// not asked for, not loaded or not attached.
    udp_open: Option<(Link, UdpOpenReader)>,
    /// Tests only ([`load::TEST_DUMP_PAUSE_ENV`]): a pause between raising
    /// the dump generation and reading the flows.
    test_dump_pause: Option<std::time::Duration>,
}

/// Every program of flows.bpf.c. Required: the per-flow figures the verdicts
/// stand on (RTT/cwnd, retransmits, open/close, the iterators that seed and
/// read the flows) and which exist on every supported kernel. Optional: those
/// whose tracepoint is recent and whose figures have a fallback.
pub(crate) const FLOW_PROGRAMS: &[ProgramSpec] = &[
    ProgramSpec {
        name: "on_tcp_probe",
        tracepoint: Some("tcp_probe"),
        required: true,
        args: (2, 2),
        gives: "srtt, min_rtt, cwnd per incoming segment",
        lost: "",
    },
    ProgramSpec {
        name: "on_tcp_retransmit_skb",
        tracepoint: Some("tcp_retransmit_skb"),
        required: true,
        args: (2, 3),
        gives: "retransmits per flow (and failed attempts, on kernels whose tracepoint has `err`)",
        lost: "",
    },
    ProgramSpec {
        name: "on_tcp_cong_state_set",
        tracepoint: Some("tcp_cong_state_set"),
        required: false,
        args: (2, 2),
        gives: "each congestion-state change as it happens",
        lost: "exact congestion-state changes: time per state and entries are sampled \
               from incoming segments instead (changes between two segments are missed)",
    },
    ProgramSpec {
        name: "on_inet_sock_set_state",
        tracepoint: Some("inet_sock_set_state"),
        required: true,
        args: (3, 3),
        gives: "flow open and state changes",
        lost: "",
    },
    ProgramSpec {
        name: "on_tcp_destroy_sock",
        tracepoint: Some("tcp_destroy_sock"),
        required: true,
        args: (1, 1),
        gives: "flow close with final counters",
        lost: "",
    },
    ProgramSpec {
        name: "on_tcp_sendmsg_locked",
        tracepoint: Some("tcp_sendmsg_locked"),
        required: false,
        args: (1, 4),
        gives: "owner process and cgroup of each flow, seen by the kernel",
        lost: "owners from the kernel: they come from /proc socket inodes instead \
               (no cgroup id; a flow whose socket is gone from /proc has none)",
    },
    ProgramSpec {
        name: "seed_flows",
        tracepoint: None,
        required: true,
        args: (0, 0),
        gives: "flows already open at start (TCP iterator)",
        lost: "",
    },
    ProgramSpec {
        name: "dump_flows",
        tracepoint: None,
        required: false,
        args: (0, 0),
        gives: "each interval's flow records in one pass over every namespace \
                (socket-storage map iterator)",
        lost: "the one-pass flow dump: flow records come from the TCP socket iterator \
               instead, run in each observed network namespace (with --all-netns, every \
               namespace a process is in or /run/netns names); same figures",
    },
    ProgramSpec {
        name: "sweep_moved",
        tracepoint: None,
        required: false,
        args: (0, 0),
        gives: "each interval's flow records from the flows that moved only (the moved set), \
                with a full dump every minute",
        lost: "the moved-set sweep: each interval's dump walks every tracked flow (map \
               iterator) or every socket (TCP iterator); same figures, more work with many \
               idle flows",
    },
    ProgramSpec {
        name: "on_udp_socket",
        // cgroup/sock_create on the cgroup v2 root (bpf/udpopen.bpf.h): no
        // tracepoint to look for; a kernel or policy that refuses it fails
        // its load (dropped) or its attach (below).
        tracepoint: None,
        required: false,
        args: (0, 0),
        gives: "UDP and ICMP sockets made, by owner (the new UDP and ICMP flows the \
                connection tracking allowance counts)",
        lost: "UDP and ICMP openers: a conntrack_limit names the owners of new TCP flows \
               only and says UDP and ICMP were not measured",
    },
    ProgramSpec {
        name: "dump_flows_tcp",
        tracepoint: None,
        required: true,
        args: (0, 0),
        gives: "each interval's flow records where map iterators are refused (TCP iterator)",
        lost: "",
    },
];

/// The bit of `test_reject` that rejects `on_udp_socket` (bpf/udpopen.h,
/// `UO_TEST_REJECT_BIT`: a define, not in the skeleton's types).
const UO_TEST_REJECT_BIT: u32 = 31;

/// The (program name, health counter) pairs: the events each program counts.
/// `on_tcp_probe` is not here: its runs are the flows' `probe_events`.
const PROGRAM_EVENTS: &[(&str, ts_health_counter)] = &[
    (
        "on_tcp_retransmit_skb",
        ts_health_counter::TS_H_RETRANS_EVENTS,
    ),
    ("on_tcp_cong_state_set", ts_health_counter::TS_H_CONG_EVENTS),
    (
        "on_inet_sock_set_state",
        ts_health_counter::TS_H_STATE_EVENTS,
    ),
    (
        "on_tcp_destroy_sock",
        ts_health_counter::TS_H_DESTROY_EVENTS,
    ),
    (
        "on_tcp_sendmsg_locked",
        ts_health_counter::TS_H_SENDMSG_EVENTS,
    ),
];

impl FlowProbes {
    /// Open, load and attach; then seed the flows that already exist in the
    /// observer's own network namespace.
    /// `probe_sampling`: tcp_probe's per-segment figures come from one run
    /// in this many (a power of two; 1: every run); see
    /// `CollectorConfig::probe_sampling`. `max_flows`: at most this many
    /// sockets tracked at once, the rest counted as untracked (0: no cap).
    /// `peak_window_us`: each flow's peak rate over windows of at least
    /// this (0: none).
    pub(crate) fn attach(
        filter: NetnsFilter,
        emit_events: bool,
        probe_sampling: u32,
        max_flows: u32,
        peak_window_us: u32,
        udp_openers: bool,
    ) -> Result<Self> {
        load::check_kernel_floor(&load::kernel_release())?;
        let btf = Btf::from_vmlinux().ok();
        let fail = load::test_fail_programs();
        let counters: Vec<(&str, u32)> = PROGRAM_EVENTS
            .iter()
            .map(|(n, c)| (*n, c.0))
            .chain([
                ("dump_flows", ts_health_counter::TS_H_ITER_RECORDS.0),
                ("sweep_moved", ts_health_counter::TS_H_SWEEP_RECORDS.0),
                ("on_udp_socket", UO_TEST_REJECT_BIT),
            ])
            .collect();
        let (mut skel, mut dropped) =
            load::load_with_fallback("flow", FLOW_PROGRAMS, btf.as_ref(), |plan| {
                // The skeleton borrows its object storage for its whole
                // life; one observer per process (and a retry or two at
                // start), so leaking this small block is the simple way.
                let storage: &'static mut MaybeUninit<OpenObject> =
                    Box::leak(Box::new(MaybeUninit::uninit()));
                let mut open = FlowsSkelBuilder::default()
                    .open(storage)
                    .context("opening the BPF object")?;
                let rodata = open
                    .maps
                    .rodata_data
                    .as_deref_mut()
                    .context("BPF object has no .rodata")?;
                match filter {
                    NetnsFilter::Only(ino) => rodata.target_netns = ino,
                    NetnsFilter::All => rodata.all_netns = true,
                }
                rodata.emit_events = emit_events;
                rodata.ca_from_probe = plan.is_dropped("on_tcp_cong_state_set");
                // Congestion-state time read from tcp_probe needs every
                // segment: no sampling then (flows.bpf.c).
                rodata.probe_sample_mask = if rodata.ca_from_probe {
                    0
                } else {
                    probe_sampling.max(1) - 1
                };
                rodata.peak_window_us = peak_window_us;
                rodata.test_reject = load::test_reject_mask(&fail, &counters);
                rodata.test_skip_loss_every = load::test_skip_loss_every();
                rodata.max_flows = max_flows;
                // Iterators are attached by hand below (one needs the map fd).
                open.progs.seed_flows.set_autoload(true);
                open.progs.seed_flows.set_autoattach(false);
                open.progs.dump_flows.set_autoattach(false);
                open.progs.dump_flows_tcp.set_autoattach(false);
                open.progs.sweep_moved.set_autoattach(false);
                // Attached by hand below, so that a refused attach leaves
                // it out instead of failing the rest.
                open.progs.on_udp_socket.set_autoattach(false);
                open.progs.on_udp_socket.set_autoload(udp_openers);
                plan.apply(open.open_object_mut());
                Ok(open.load()?)
            })?;
        skel.attach()
            .context("attaching the BPF programs to their tracepoints")?;
        let udp_open = if udp_openers && !dropped.contains_key("on_udp_socket") {
            match attach_to_cgroup_root(&skel.progs.on_udp_socket) {
                Ok(link) => Some((link, UdpOpenReader::default())),
                Err(e) => {
                    dropped.insert("on_udp_socket", NotLoaded::Rejected(format!("{e:#}")));
                    None
                }
            }
        } else {
            None
        };

        let dump = if !dropped.contains_key("dump_flows") {
            FlowDump::Map(
                skel.progs
                    .dump_flows
                    .attach_iter(skel.maps.flow_state.as_fd())
                    .context("attaching the flow-dump iterator")?,
            )
        } else {
            FlowDump::PerNetns {
                link: skel
                    .progs
                    .dump_flows_tcp
                    .attach_iter_with_opts(IterOpts::None)
                    .context("attaching the per-namespace flow-dump iterator")?,
                others: match filter {
                    NetnsFilter::All => Some(OtherNamespaces::default()),
                    NetnsFilter::Only(_) => None,
                },
            }
        };

        let pending = Arc::new(Mutex::new(Pending::default()));
        let ring = ring_into(
            &skel.maps.events,
            pending.clone(),
            |p, data| match decode_event(data) {
                Some(ev) => p.push(ev),
                None => p.malformed += 1,
            },
        )
        .context("setting up the event ring buffer")?;
        let events =
            EventReader::start(ring, pending).context("starting the event reader thread")?;

        // What the loaded object does (the mask forced to 0 with
        // ca_from_probe), not what was asked.
        let probe_sampling = skel.maps.rodata_data.map_or(1, |r| r.probe_sample_mask + 1);
        let sweep = if dropped.contains_key("sweep_moved") {
            None
        } else {
            match Sweep::start(&skel) {
                Ok(sweep) => Some(sweep),
                Err(e) => {
                    // Loaded, and its run refused (a policy on test runs):
                    // said like a program the kernel rejected.
                    dropped.insert("sweep_moved", NotLoaded::Rejected(format!("{e:#}")));
                    None
                }
            }
        };
        let mut probes = FlowProbes {
            skel,
            dump: RefCell::new(dump),
            sweep,
            events,
            dropped,
            probe_sampling,
            deferred_walked: Cell::new(0),
            udp_open,
            test_dump_pause: load::test_dump_pause(),
        };
        probes.seed().context("seeding pre-existing flows")?;
        if probes.sweep.is_some() {
            // From now on the event programs fill the moved set (and gate
            // their runs on it). The first dump reads every flow anyway.
            let bss = probes
                .skel
                .maps
                .bss_data
                .as_deref_mut()
                .context("flow BPF object has no .bss")?;
            let gate: *mut u32 = &mut bss.moved_gate;
            // SAFETY: points into the mmapped .bss map, alive as long as
            // the skeleton; volatile because the BPF programs read it.
            unsafe { std::ptr::write_volatile(gate, 1) };
        }
        Ok(probes)
    }

    /// Runs the `seed_flows` iterator once, in this thread's netns; then
    /// tells the programs which namespace is seeded (`seeded_netns` in
    /// flows.bpf.c: storage made there from now on is a new socket's).
    fn seed(&mut self) -> Result<()> {
        let link = self
            .skel
            .progs
            .seed_flows
            .attach_iter_with_opts(IterOpts::None)
            .context("attaching the seeding iterator")?;
        let mut it = Iter::new(&link)?;
        let mut sink = Vec::new();
        it.read_to_end(&mut sink)?;
        let own =
            crate::collect::netns::own().context("reading this thread's network namespace")?;
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref_mut()
            .context("flow BPF object has no .bss")?;
        let seeded: *mut u32 = &mut bss.seeded_netns;
        // SAFETY: points into the mmapped .bss map, alive as long as the
        // skeleton; volatile because the BPF programs read it concurrently.
        unsafe { std::ptr::write_volatile(seeded, own) };
        Ok(())
    }

    /// One record per tracked socket that moved lately, as of now; with
    /// `all`, one per tracked socket. The dump generation goes up by one
    /// per call (the rule is in bpf/flows.h, `moved_gen`). `expected`: how
    /// many records to make room for at once (0: grow as they come).
    pub(crate) fn read_flows(&mut self, all: bool, expected: usize) -> Result<Vec<ts_flow_record>> {
        let data = self
            .skel
            .maps
            .data_data
            .as_deref_mut()
            .context("flow BPF object has no .data")?;
        let gen: *mut u32 = &mut data.flow_dump_gen;
        let dump_all: *mut u32 = &mut data.flow_dump_all;
        // SAFETY: both point into the mmapped .data map, alive as long as
        // the skeleton; volatile because the BPF programs read them
        // concurrently. Only this thread writes them.
        unsafe {
            std::ptr::write_volatile(gen, std::ptr::read_volatile(gen).wrapping_add(1));
            std::ptr::write_volatile(dump_all, all as u32);
        }
        if let Some(pause) = self.test_dump_pause {
            // The dump comes late, as on a loaded machine: sampled runs on
            // other CPUs start the new generation first (interval_extremes).
            std::thread::sleep(pause);
        }
        let mut flows = Vec::with_capacity(expected);
        if let Some(sweep) = &mut self.sweep {
            if !all {
                sweep.run(&mut self.skel, true, &mut flows)?;
                return Ok(flows);
            }
            // A full dump: the iterator reads every flow; the sweep only
            // keeps the set (and opens the gate's window), emitting nothing.
            Self::read_iterators(&mut self.dump.borrow_mut(), &mut flows)?;
            sweep.run(&mut self.skel, false, &mut flows)?;
            return Ok(flows);
        }
        Self::read_iterators(&mut self.dump.borrow_mut(), &mut flows)?;
        Ok(flows)
    }

    /// The records the iterators give, every flow or the moved ones as the
    /// data words ask.
    fn read_iterators(dump: &mut FlowDump, flows: &mut Vec<ts_flow_record>) -> Result<()> {
        match dump {
            FlowDump::Map(link) => read_iter(link.as_fd().as_raw_fd(), flows)?,
            FlowDump::PerNetns { link, others } => {
                // This thread's namespace first, then the others'.
                let fd = link.as_fd().as_raw_fd();
                read_iter(fd, flows)?;
                if let Some(others) = others {
                    others.read(fd, flows)?;
                }
            }
        }
        Ok(())
    }

    /// One slot of the `health` array summed over CPUs: a read of the map
    /// for that slot only.
    pub(crate) fn counter(&self, c: ts_health_counter) -> Result<u64> {
        percpu::counter(&self.skel.maps.health, c.0).context("reading the health counters")
    }

    /// How each interval's flows are read, for `doctor` and the docs' table.
    pub(crate) fn dump_path(&self) -> String {
        let walk = match &*self.dump.borrow() {
            FlowDump::Map(_) => "the socket-storage map iterator",
            FlowDump::PerNetns { .. } => "the TCP socket iterator (map iterators refused)",
        };
        if self.sweep.is_some() {
            format!(
                "flows that moved, from the moved set (sweep_moved); every flow once a \
                 minute through {walk}"
            )
        } else {
            format!("every flow each interval through {walk} (no moved-set sweep)")
        }
    }

    /// Every event read from the ring buffer since the last call, then the
    /// close records that found it full and waited in `closed_overflow`
    /// (bpf/flows.h), taken out of that map.
    pub(crate) fn drain_events(&self) -> Result<Vec<RawEvent>> {
        let mut events = self.events.take();
        self.take_deferred_closes(&mut events)?;
        Ok(events)
    }

    /// Moves every record of `closed_overflow` into `out` as a close event.
    /// Keys are listed first and deleted after: deleting while walking a
    /// hash map's keys can restart the walk. The map is walked only when
    /// the count of deferred closes grew since the last walk: listing the
    /// keys of an empty hash visits all its 32,768 buckets (about 65 us a
    /// walk here). The count is taken before the walk and a program adds to
    /// it after its record is in the map, so a record the walk misses is
    /// counted after this read, and the next interval walks.
    fn take_deferred_closes(&self, out: &mut Vec<RawEvent>) -> Result<()> {
        let deferred = self.counter(ts_health_counter::TS_H_CLOSES_DEFERRED)?;
        if deferred == self.deferred_walked.get() {
            return Ok(());
        }
        self.deferred_walked.set(deferred);
        let map = &self.skel.maps.closed_overflow;
        let keys: Vec<Vec<u8>> = map.keys().collect();
        for key in keys {
            let Some(value) = map
                .lookup_and_delete(&key)
                .context("taking a deferred close record")?
            else {
                continue;
            };
            match read_record::<ts_flow_record>(&value) {
                Some(rec) => {
                    let hdr = ts_event {
                        ts_ns: rec.now_ns,
                        cookie: rec.cookie,
                        kind: ts_event_kind::TS_EV_CLOSE.0,
                        arg0: 0,
                        arg1: 0,
                        netns: rec.netns,
                    };
                    out.push(RawEvent::Close(Box::new(ts_close_event { hdr, rec })));
                }
                None => self.events.count_malformed(),
            }
        }
        Ok(())
    }

    /// Events lost in user space: plain events past the reader's cap, and
    /// messages that could not be decoded (never expected).
    pub(crate) fn lost_in_reader(&self) -> u64 {
        let (over_cap, malformed) = self.events.lost();
        let sweep_malformed = self.sweep.as_ref().map_or(0, |s| {
            s.out.lock().unwrap_or_else(|e| e.into_inner()).malformed
        });
        over_cap + malformed + sweep_malformed
    }

    /// The `health` array summed over CPUs: in one batch, else slot by slot.
    pub(crate) fn counters(&self) -> Result<ProbeCounters> {
        let mut out = ProbeCounters::default();
        if let Some(all) = percpu::read_all(&self.skel.maps.health) {
            for (i, slot) in out.0.iter_mut().enumerate() {
                *slot = all.sum_u64(i);
            }
            return Ok(out);
        }
        for (i, slot) in out.0.iter_mut().enumerate() {
            *slot = self.counter(ts_health_counter(i as u32))?;
        }
        Ok(out)
    }

    /// The UDP and ICMP sockets made since the last read, by owner; None
    /// when the program is not attached.
    pub(crate) fn read_udp_openers(&mut self) -> Option<Result<UdpOpenRead>> {
        let (_, reader) = self.udp_open.as_mut()?;
        let health = &self.skel.maps.uo_health;
        let full = percpu::counter(health, uo_health_counter::UO_H_MAP_FULL.0)
            .and_then(|udp| {
                percpu::counter(health, uo_health_counter::UO_H_ICMP_MAP_FULL.0)
                    .map(|icmp| [udp, icmp])
            })
            .context("reading the UDP and ICMP socket count's health");
        Some(full.and_then(|full| reader.read(&self.skel.maps.uo_owners, full)))
    }

    /// The UDP and ICMP socket count's events: sockets made in an observed
    /// namespace.
    fn udp_sockets_made(&self) -> u64 {
        [uo_health_counter::UO_H_PORTS, uo_health_counter::UO_H_ICMP]
            .iter()
            .map(|c| percpu::counter(&self.skel.maps.uo_health, c.0).unwrap_or(0))
            .sum()
    }

    /// Optional programs this kernel lacks or rejected, with why.
    pub(crate) fn not_loaded(&self) -> Vec<(&'static ProgramSpec, &NotLoaded)> {
        not_loaded(FLOW_PROGRAMS, &self.dropped)
    }

    /// One tcp_probe run in this many updates the per-segment figures (1:
    /// every run).
    pub(crate) fn probe_sampling(&self) -> u32 {
        self.probe_sampling
    }

    /// The `--max-flows` cap the loaded object applies (0: none).
    pub(crate) fn max_flows(&self) -> u32 {
        self.skel.maps.rodata_data.map_or(0, |r| r.max_flows)
    }

    /// Per-program health: events (our counter; for `on_tcp_probe`, the
    /// flows' `probe_events` summed by the caller, times the sampling: an
    /// estimate when sampled), recursion misses and,
    /// when `kernel.bpf_stats_enabled` is on, run count and time; for a
    /// program not attached, why and what is missing.
    pub(crate) fn program_health(
        &self,
        counters: &ProbeCounters,
        probe_events: u64,
    ) -> Vec<ProgramHealth> {
        // The map iterator is listed only when it is missing, so that the
        // fallback dump it left to shows.
        let dump_lost = self.dropped.get("dump_flows").map(|_| ("dump_flows", 0));
        std::iter::once((
            "on_tcp_probe",
            probe_events.saturating_mul(self.probe_sampling.into()),
        ))
        .chain(
            PROGRAM_EVENTS
                .iter()
                .map(|(name, counter)| (*name, counters.get(*counter))),
        )
        .chain(dump_lost)
        // The sweep always: when it runs, its records and run time are the
        // per-interval cost; when it does not, why.
        .chain([(
            "sweep_moved",
            counters.get(ts_health_counter::TS_H_SWEEP_RECORDS),
        )])
        // Listed when asked for: attached, its sockets counted; else why not.
        .chain(
            (self.udp_open.is_some() || self.dropped.contains_key("on_udp_socket"))
                .then(|| ("on_udp_socket", self.udp_sockets_made())),
        )
        .map(|(name, events)| {
            let mut h = health_of(
                self.skel.object(),
                FLOW_PROGRAMS,
                &self.dropped,
                name,
                events,
            );
            // Runs the kernel skipped without counting them, found by the
            // program itself afterwards (bpf/flows.h, TS_H_CONG_UNSEEN).
            if name == "on_tcp_cong_state_set" && h.attached {
                h.missed += counters.get(ts_health_counter::TS_H_CONG_UNSEEN);
            }
            h
        })
        .collect()
    }
}

impl Sweep {
    /// The sweep's output ring and a first run (on an empty set): a kernel
    /// or policy that refuses test runs says so here, at start.
    fn start(skel: &FlowsSkel<'static>) -> Result<Self> {
        let out = Arc::new(Mutex::new(SweepOut::default()));
        let ring = ring_into(
            &skel.maps.sweep_out,
            out.clone(),
            |o, data| match read_record::<ts_flow_record>(data) {
                Some(rec) => o.records.push(rec),
                None => o.malformed += 1,
            },
        )
        .context("setting up the sweep's ring buffer")?;
        let sweep = Sweep { ring, out };
        sweep
            .run_once(skel)
            .context("a first test run of the sweep")?;
        Ok(sweep)
    }

    /// One run of `sweep_moved` from its data words as set; returns 1 when
    /// it stopped on a full output ring, else 0.
    fn run_once(&self, skel: &FlowsSkel<'static>) -> Result<u32> {
        // raw_tp test runs take the tracepoint's arguments as context;
        // the sweep reads none.
        let mut ctx = [0u8; 8];
        let out = skel
            .progs
            .sweep_moved
            .test_run(libbpf_rs::ProgramInput {
                context_in: Some(&mut ctx),
                ..Default::default()
            })
            .context("running the moved-set sweep")?;
        Ok(out.return_value)
    }

    /// Sweeps the moved set once for this dump (the generation is set
    /// already): with `emit`, appends the members' records to `flows`.
    fn run(
        &mut self,
        skel: &mut FlowsSkel<'static>,
        emit: bool,
        flows: &mut Vec<ts_flow_record>,
    ) -> Result<()> {
        for n in 0..SWEEP_MAX_RUNS {
            {
                let data = skel
                    .maps
                    .data_data
                    .as_deref_mut()
                    .context("flow BPF object has no .data")?;
                let (new, e): (*mut u32, *mut u32) = (&mut data.sweep_new, &mut data.sweep_emit);
                // SAFETY: both point into the mmapped .data map, alive as
                // long as the skeleton; volatile because BPF reads them.
                unsafe {
                    std::ptr::write_volatile(new, (n == 0) as u32);
                    std::ptr::write_volatile(e, emit as u32);
                }
            }
            let full = self.run_once(skel)? != 0;
            self.ring.consume().context("draining the sweep's ring")?;
            let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
            flows.append(&mut out.records);
            if !full {
                return Ok(());
            }
        }
        anyhow::bail!("the moved-set sweep stopped on a full ring {SWEEP_MAX_RUNS} times in a row")
    }
}

/// Attaches the cgroup program `prog` to the root of the cgroup v2
/// hierarchy (a link: gone when the observer is, beside any program
/// already there), so that it runs for every process's sockets.
fn attach_to_cgroup_root(prog: &libbpf_rs::ProgramMut<'_>) -> Result<Link> {
    let dir = open_cgroup_root()?;
    prog.attach_cgroup(dir.as_raw_fd())
        .context("attaching cgroup/sock_create to the cgroup v2 root")
}

/// The root of the cgroup v2 hierarchy, opened: where /proc/mounts says it
/// is mounted; else (`ip netns exec` remounts /sys in a mount namespace of
/// its own, hiding /sys/fs/cgroup) mounted for the moment on a private
/// directory, opened and detached again: the open directory is all the
/// attach needs, and nothing stays mounted.
fn open_cgroup_root() -> Result<std::fs::File> {
    let mounts = std::fs::read_to_string("/proc/mounts").context("reading /proc/mounts")?;
    if let Some(root) = crate::collect::cgroups::cgroup2_mount(&mounts) {
        return std::fs::File::open(&root).with_context(|| format!("opening {}", root.display()));
    }
    let tmp = std::env::temp_dir().join(format!("throttlescope-cgroup2-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let path = std::ffi::CString::new(tmp.as_os_str().as_encoded_bytes())?;
    let fstype = c"cgroup2";
    // SAFETY: NUL-terminated strings that outlive the calls; no data.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            path.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let _ = std::fs::remove_dir(&tmp);
        return Err(e).context("no cgroup v2 hierarchy in /proc/mounts, and mounting one failed");
    }
    let dir = std::fs::File::open(&tmp);
    // SAFETY: as above.
    unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) };
    let _ = std::fs::remove_dir(&tmp);
    dir.with_context(|| format!("opening the cgroup v2 root mounted on {}", tmp.display()))
}

/// A ring buffer over `map` whose messages `take` hands to `sink`, under its
/// lock (the event reader thread and the collector share some).
fn ring_into<T: Send + 'static>(
    map: &dyn MapCore,
    sink: Arc<Mutex<T>>,
    take: fn(&mut T, &[u8]),
) -> Result<libbpf_rs::RingBuffer<'static>> {
    let mut builder = RingBufferBuilder::new();
    builder.add(map, move |data: &[u8]| {
        take(&mut sink.lock().unwrap_or_else(|e| e.into_inner()), data);
        0
    })?;
    Ok(builder.build()?)
}

fn decode_event(data: &[u8]) -> Option<RawEvent> {
    let hdr: ts_event = read_record(data)?;
    if ts_event_kind(hdr.kind) == ts_event_kind::TS_EV_CLOSE {
        read_record::<ts_close_event>(data).map(|c| RawEvent::Close(Box::new(c)))
    } else {
        Some(RawEvent::Plain(hdr))
    }
}
