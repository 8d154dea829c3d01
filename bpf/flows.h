/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of the kernel/user ABI of flows.bpf.c.
 *
 * The Rust loader never re-declares these structs: libbpf-cargo generates them
 * from this object's BTF (see the `_abi_*` globals in flows.bpf.c), and
 * src/collect/probes/ reads iterator and ring-buffer bytes as those generated types.
 */
#ifndef THROTTLESCOPE_FLOWS_H
#define THROTTLESCOPE_FLOWS_H

#define TS_COMM_LEN 16
/* TCP_CA_Open, Disorder, CWR, Recovery, Loss */
#define TS_CA_STATES 5

/*
 * Map sizes (max_entries). The per-socket storage has none: it lives and dies
 * with each socket.
 *
 * The event ring buffer, in bytes (the kernel wants a power of two and a
 * multiple of the page size). A reader thread in user space drains it as it
 * fills (src/collect/probes/event_reader.rs): programs wake it when the ring
 * holds a quarter of this, and each interval drains what is left. It holds
 * ~100,000 open, state, retransmit or congestion events (32 bytes and an
 * 8-byte ring header each), or ~8,600 close records (480 + 8 bytes): the
 * slack for the reader to be scheduled in a storm of closes. Events past it
 * are counted in TS_H_RINGBUF_DROPS; a close record past it goes to
 * closed_overflow instead.
 */
#define TS_EVENTS_RINGBUF_BYTES (4 << 20)
_Static_assert((TS_EVENTS_RINGBUF_BYTES & (TS_EVENTS_RINGBUF_BYTES - 1)) == 0 &&
		       TS_EVENTS_RINGBUF_BYTES % 4096 == 0,
	       "the kernel wants a ring buffer of a power of two pages");
/*
 * Close records that found the ring buffer full wait here, by socket cookie,
 * for the next interval (a hash without preallocation: memory only while a
 * storm fills it, at most ~16 MiB). Past it a close is lost
 * (TS_H_CLOSES_LOST) and its flow forgotten at the next full dump.
 */
#define TS_CLOSED_OVERFLOW_ENTRIES 32768
/* The per-CPU scratch record of the flow-dump iterators: one per CPU is all
 * an iterator run needs, it writes its record out before the next. */
#define TS_SCRATCH_ENTRIES 1
/* Untracked sockets remembered (by cookie) so that each is counted once and
 * the bytes it moves are counted: an LRU, so a socket whose entry was not
 * removed at close (its TCP_CLOSE passed before it was first untracked) ages
 * out instead of filling the table. Past this many untracked sockets at once
 * the oldest is forgotten and counted again when next seen
 * (docs/architecture.md, "Untracked flows"). */
#define TS_UNTRACKED_ENTRIES 8192

/*
 * The moved set (flows.bpf.c): the flows that moved lately, each once in a
 * hash by socket cookie (membership: an event adds a flow at its first
 * event of a dump generation unless it is a member already) and once in a
 * queue of members with where their socket and storage are (what the
 * sweep, sweep_moved, visits: it pops every member, writes its record, and
 * pushes it back unless the flow has been idle for longer than
 * TS_DUMP_GENS_KEPT generations and is not busy). The queue makes a sweep
 * cost its members only; a hash walk costs every bucket (~1 ms at this
 * size). Both preallocated (~6 MiB); past them a flow that moves is not
 * added, counted in TS_H_MOVED_FULL, and the next dump reads every flow.
 */
#define TS_MOVED_ENTRIES 65536
/* The sweep's output ring, in bytes: ~4,800 records a run. A sweep that
 * fills it stops there (the members it has not visited stay queued), user
 * space drains it and runs the sweep again for the rest. */
#define TS_SWEEP_RINGBUF_BYTES (2 << 20)
_Static_assert((TS_SWEEP_RINGBUF_BYTES & (TS_SWEEP_RINGBUF_BYTES - 1)) == 0 &&
		       TS_SWEEP_RINGBUF_BYTES % 4096 == 0,
	       "the kernel wants a ring buffer of a power of two pages");

/* Where a flow's ifindex came from (ts_flow_state.ifindex_source). */
enum ts_ifindex_source {
	TS_IFX_NONE = 0,         /* not known yet */
	TS_IFX_ROUTE = 1,        /* egress device of the socket's cached route */
	TS_IFX_RX = 2,           /* device the last early-demuxed segment came in on */
};

/* Indexes into the per-CPU `health` array. Every one is shown to the user. */
enum ts_health_counter {
	/* tcp_probe has no counter here: each flow's probe_events already
	 * counts its runs, and user space sums those (one increment, not two,
	 * on the hottest path). */
	TS_H_RETRANS_EVENTS = 0, /* tcp_retransmit_skb runs on an observed socket */
	TS_H_CONG_EVENTS,        /* tcp_cong_state_set runs on an observed socket */
	TS_H_STATE_EVENTS,       /* inet_sock_set_state runs on an observed TCP socket */
	TS_H_DESTROY_EVENTS,     /* tcp_destroy_sock runs on an observed socket */
	TS_H_SENDMSG_EVENTS,     /* tcp_sendmsg_locked runs on an observed socket */
	TS_H_UNTRACKED,          /* sockets not tracked (storage could not be created, or
				  * --max-flows reached): each counted once, when first seen */
	TS_H_RINGBUF_DROPS,      /* events (not closes) lost because the ring buffer was full */
	TS_H_ITER_RECORDS,       /* flow records written by the snapshot iterator */
	TS_H_SEEDED,             /* pre-existing sockets found by the seeding iterator */
	TS_H_UNTRACKED_CLOSED,   /* untracked sockets that closed (TS_H_UNTRACKED less this:
				  * untracked now) */
	TS_H_UNTRACKED_SENT,     /* bytes sent (tcp_sock.bytes_sent growth) by untracked sockets */
	TS_H_UNTRACKED_RECEIVED, /* bytes received (bytes_received growth) by untracked sockets */
	TS_H_CLOSES_DEFERRED,    /* close records that found the ring buffer full
				  * and waited in closed_overflow (not lost) */
	TS_H_CLOSES_LOST,        /* close records that found both full: lost */
	TS_H_MOVED_FULL,         /* flows that moved and found the moved set full (the
				  * next dump then reads every flow) */
	TS_H_SWEEP_RECORDS,      /* flow records written by the sweep of the moved set */
	TS_H_SWEEP_GONE,         /* moved-set entries whose socket was gone (closed
				  * with its close event missed): taken out */
	TS_H_CONG_UNSEEN,        /* congestion-state changes made while tcp_cong_state_set
				  * did not run (a skip the kernel did not count), found
				  * at the socket's next change: it left a state other
				  * than the one last seen */
	TS_H_MAX,
};

/* What the probes accumulate per socket, kept in BPF_MAP_TYPE_SK_STORAGE.
 * The fields every tcp_probe and tcp_sendmsg_locked run touches come first,
 * in 64 bytes: with thousands of flows a socket's storage is cold when its
 * next segment comes, and each cache line the hot path touches is a miss. */
struct ts_flow_state {
	/* hot: every event */
	__u64 first_seen_ns;     /* bpf_ktime when the storage was created */
	/* The dump generation (flow_dump_gen in flows.bpf.c) in which the flow
	 * last moved: stored by the event programs, and by the dump iterator
	 * for a flow it finds busy. The iterator emits a flow only while this
	 * is within TS_DUMP_GENS_KEPT of the current generation (the rule:
	 * docs/architecture.md, "Work proportional to what moved"). A store,
	 * never a read-modify-write, so an event racing the iterator on
	 * another CPU cannot be lost. */
	__u32 moved_gen;
	__u32 lport;             /* local port, kept because the kernel zeroes
				  * it when the socket is unhashed at close */
	__u32 owner_tgid;        /* owner, from tcp_sendmsg_locked (process context) */
	__u32 srtt_max_us;       /* max srtt in generation ext_gen */
	__u32 last_cwnd;
	__u32 cwnd_min;          /* min cwnd in generation ext_gen */
	__u64 probe_events;      /* tcp_probe runs (incoming segments on the fast path) */
	__u64 waiting_events;    /* tcp_probe runs that found data written and not
				  * yet sent (write_seq != snd_nxt): the share of
				  * them says how much of the time the application
				  * had more to send than the path took */
	__u64 srtt_sum_us;       /* sum of srtt over probe events, for the interval mean */
	__u32 cwnd_reductions;   /* probe events where cwnd was lower than the previous one */
	__u32 ca_state;          /* current congestion state, as last seen */
	/* The flow's peak rate (issue 24): bytes sent + received over windows of
	 * at least peak_window_us (flows.bpf.c, flow_peak), read on sampled
	 * tcp_probe runs with the socket's own microsecond clock (tcp_mstamp):
	 * no clock read. The second cache line: touched on sampled runs only. */
	__u64 pk_start_us;       /* tcp_mstamp when the window in progress began; 0: none */
	__u64 pk_start_bytes;    /* bytes_sent + bytes_received then */
	__u64 peak_bps;          /* the busiest window in generation ext_gen, bits/s */
	/* The dump generation whose sampled runs srtt_max_us, cwnd_min and
	 * peak_bps hold: the first sampled run of a new generation starts them
	 * again, so no dump has to reset them (the sweep cannot write a
	 * flow's storage), and keeps the generation it ends in the prev_*
	 * fields. A dump of generation G reads generation G - 1: from the
	 * fields above when ext_gen is G - 1, from prev_* when a sampled run
	 * of G came before the dump reached the flow (ext_gen G, prev_ext_gen
	 * G - 1), else none (flows.bpf.c, interval_extremes). */
	__u32 ext_gen;
	__u32 prev_ext_gen;
	__u32 prev_srtt_max_us;
	__u32 prev_cwnd_min;
	__u64 prev_peak_bps;
	/* cold: state changes, retransmits, a new owner */
	__u64 opened_ns;         /* when seen entering ESTABLISHED; 0 if it pre-existed */
	__u64 ca_since_ns;       /* when the current congestion state was entered */
	__u64 ca_time_ns[TS_CA_STATES];
	__u32 ca_entries[TS_CA_STATES];
	__u32 owner_pid;
	__u64 retrans_skbs;      /* tcp_retransmit_skb with err == 0 */
	__u64 retrans_segs;      /* segments in those skbs */
	__u64 retrans_failed;    /* tcp_retransmit_skb with err != 0 (host-side queuing) */
	/* Retransmits the kernel itself tells apart from loss (docs/verdicts.md,
	 * "Spurious retransmits"). Tail loss probes: retransmits sent outside
	 * Recovery and Loss, which only tcp_send_loss_probe() does (every other
	 * retransmit follows tcp_enter_recovery() or tcp_enter_loss(), or the
	 * Loss of tcp_simple_retransmit()); one a probe, like nstat's
	 * TcpExtTCPLossProbes (which also counts probes of new data: not
	 * retransmits, not here). */
	__u32 retrans_probes;
	__u32 probe_segs;        /* segments of the latest probe */
	__u32 probe_seq;         /* snd_nxt at the latest probe (the kernel's
				  * tlp_high_seq); 0 once an episode took it */
	/* Loss episodes (Recovery, Loss) the kernel undid: it found the
	 * retransmits spurious (F-RTO, timestamps, D-SACKs) and put cwnd back.
	 * Seen at tcp_cong_state_set: a move out of Recovery or Loss to Open or
	 * Disorder with tcp_sock.undo_marker zeroed, which only
	 * tcp_undo_cwnd_reduction() does on that path. */
	__u32 rto_undone;        /* Loss undone: spurious timeouts (nstat TcpExtTCPLossUndo) */
	__u32 recovery_undone;   /* Recovery undone (TCPFullUndo, TCPPartialUndo, TCPDSACKUndo) */
	__u32 retrans_undone;    /* segments retransmitted in those episodes (total_retrans
				  * from the episode's start, with a probe it began with) */
	__u32 undo_marker;       /* tcp_sock.undo_marker when the episode began; 0: none */
	__u32 undo_base;         /* total_retrans then, less an unanswered probe */
	__u64 owner_cgroup_id;
	/* The owner's process name (its thread group leader's comm, as ps and
	 * ss -p show it), and the name of the thread that was seen sending
	 * (a JVM's data-plane-kafka-..., a Go runtime's thread): a process
	 * names its threads as it likes, and one broker must read as one. */
	char owner_comm[TS_COMM_LEN];
	char owner_thread[TS_COMM_LEN];
	/* the flow's interface in its own netns, as last known: kept because
	 * the cached route can be dropped (RTO, route change, close) */
	__u32 ifindex;
	__u32 ifindex_source;    /* enum ts_ifindex_source */
	/* The socket's cookie, set when the storage is made: the sweep, which
	 * reaches the storage by address, checks it is still this flow's. */
	__u64 cookie;
};

/* A member of the moved set's queue (TS_MOVED_ENTRIES): the addresses of
 * the flow's socket and storage, as the event that added it saw them. The
 * sweep reads both with checked reads and trusts neither until the cookie
 * in each matches this one. */
struct ts_moved {
	__u64 cookie;
	__u64 sk;
	__u64 st;
	__u32 busy_gen;          /* the last generation the sweep found it busy */
	__u32 _pad;
};

/* An untracked socket's byte counters when last seen: what it moved since is
 * added to TS_H_UNTRACKED_SENT and _RECEIVED. */
struct ts_untracked {
	__u64 bytes_sent;
	__u64 bytes_received;
};

/* A flow that moved in dump generation G is emitted by the dumps of
 * generations G, G + 1 and G + 2: at least two dumps after its last event,
 * the second a whole interval later, so a record read while the kernel was
 * still processing the segment whose tracepoint marked it (tcp_probe fires
 * before the ACK is processed, a delayed ACK follows later) is read again
 * when the socket has settled. */
#define TS_DUMP_GENS_KEPT 2

/* One flow as the snapshot iterator (or a close event) sees it. */
struct ts_flow_record {
	__u64 cookie;            /* socket cookie: unique for the socket's lifetime */
	__u64 now_ns;            /* bpf_ktime when the record was made */
	__u32 netns;             /* network namespace inode */
	__u16 family;            /* AF_INET or AF_INET6 */
	__u16 lport;             /* host order */
	__u16 rport;             /* host order */
	__u8 tcp_state;
	__u8 ca_state;           /* icsk_ca_state now */
	__u8 saddr[16];          /* IPv4 in the first 4 bytes */
	__u8 daddr[16];
	__u64 sock_ino;          /* inode of the owning struct socket, 0 if orphaned */
	/* current values from struct tcp_sock */
	__u32 srtt_us;           /* unscaled (srtt_us >> 3) */
	__u32 min_rtt_us;
	__u32 mdev_us;           /* unscaled (mdev_us >> 2) */
	__u32 snd_cwnd;
	__u32 snd_ssthresh;
	__u32 packets_out;
	__u32 retrans_out;
	__u32 lost_out;
	__u32 sacked_out;
	__u32 total_retrans;
	__u32 delivered;
	__u32 segs_out;
	__u32 data_segs_out;
	__u32 segs_in;           /* segments received (ss -i segs_in) */
	__u32 _pad_segs_in;
	__u32 mss_cache;
	__u64 bytes_sent;
	__u64 bytes_retrans;
	__u64 bytes_acked;
	__u64 bytes_received;
	/* What limited sending, as tcp_info's tcpi_busy_time, tcpi_rwnd_limited
	 * and tcpi_sndbuf_limited count it (ss -i: busy, rwnd_limited,
	 * sndbuf_limited), in jiffies including the period running now. busy
	 * is every period with data unsent or unacknowledged; sndbuf_limited is
	 * the part where the application had more to write than the send buffer
	 * took: data waiting that the network did not take. */
	__u64 now_jiffies;       /* bpf_jiffies64 when the record was made */
	__u32 busy_jiffies;
	__u32 rwnd_limited_jiffies;
	__u32 sndbuf_limited_jiffies;
	__u32 notsent_bytes;     /* write_seq - snd_nxt: written, not yet sent */
	/* Retransmitted segments the receiver reported as duplicates (D-SACK,
	 * RFC 2883): the original had arrived, the retransmit was spurious
	 * (reordering, a tail loss probe or an early retransmit that was not
	 * needed). tcp_sock.dsack_dups, tcp_info's tcpi_dsack_dups; the sum
	 * over a namespace's flows is nstat's TcpExtTCPDSACKRecvSegs. */
	__u32 dsack_dups;
	__u8 cwnd_limited;       /* tcp_sock.is_cwnd_limited now */
	/* 1 when the flow moved lately (stamped within TS_DUMP_GENS_KEPT dumps)
	 * or is still busy: the dump iterator's own rule, so that a full dump,
	 * which reads every flow, still tells the moving ones from the idle.
	 * User space lists a flow in the snapshot only then (or when it opened
	 * or closed); the others are counted as idle. 0 in close events. */
	__u8 moved_lately;
	__u8 _pad[2];
	struct ts_flow_state st;
};

enum ts_event_kind {
	TS_EV_OPEN = 1,          /* arg0 = old tcp state, arg1 = new */
	TS_EV_STATE = 2,         /* arg0 = old tcp state, arg1 = new */
	TS_EV_RETRANS = 3,       /* arg0 = err, arg1 = segments */
	TS_EV_CONG = 4,          /* arg0 = old ca state, arg1 = new */
	TS_EV_CLOSE = 5,         /* the record is filled: the flow's final values */
};

/* Every ring-buffer message starts with this header. */
struct ts_event {
	__u64 ts_ns;
	__u64 cookie;
	__u32 kind;
	__s32 arg0;
	__s32 arg1;
	__u32 netns;
};

/* TS_EV_CLOSE carries the final record after the header. */
struct ts_close_event {
	struct ts_event hdr;
	struct ts_flow_record rec;
};

#endif
