// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Per-flow TCP probes.
 *
 * Hot path (tcp_probe, once per incoming segment): one netns check, one
 * socket-local-storage lookup, a few stores. Everything that can be read from
 * struct tcp_sock at snapshot time (srtt, cwnd, byte counters) is read then, by
 * the `dump_flows` iterator, not copied on every event.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "flows.h"
#include "common.bpf.h"
#include "core_fixes.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

/* Filters, set by the loader before load. */
const volatile __u32 target_netns = 0; /* netns inode to observe */
const volatile bool all_netns = false;  /* observe every netns */
const volatile bool emit_events = true; /* ring-buffer events for recordings */
/* Set when on_tcp_cong_state_set is not loaded (tracepoint absent before
 * 5.19-era kernels, or rejected): on_tcp_probe then samples the congestion
 * state on each incoming segment, so time per state is still measured, at
 * segment granularity. Off, the verifier prunes the branch: the normal hot
 * path is unchanged. */
const volatile bool ca_from_probe = false;
/* tcp_probe's per-segment figures (srtt sum and max, cwnd minimum and cuts,
 * segments that found data waiting) come from a sample of its runs: one in
 * probe_sample_mask + 1, drawn per run (probe_sampled). The other runs
 * return first thing, before the namespace check, the storage lookup and the
 * stores (docs/performance.md). Unsampled segments leave no mark, so the dumps
 * also read the kernel's own stamps of each socket's last send and receive
 * (tcp_stamped_since). 0: every run (--probe-sampling 1); the loader forces
 * 0 with ca_from_probe, whose state time needs every segment. */
const volatile __u32 probe_sample_mask = 0;
/* --max-flows: at most this many sockets tracked at once (0: no cap). A
 * socket met past it is left untracked and counted as such, its bytes
 * too (untracked_account): the cap bounds the per-socket memory and the
 * dumps' work on a host with very many connections, and says what it left
 * out. */
const volatile __u32 max_flows = 0;
/* Sockets with storage that have not closed yet: what max_flows is
 * compared with. Incremented when storage is created, decremented when a
 * tracked socket enters TCP_CLOSE. Atomic, and checked before the storage
 * is created, so CPUs creating at the same moment can overshoot the cap by
 * one each. Signed: a socket that reconnects after TCP_CLOSE keeps its
 * storage uncounted and can be subtracted twice, and the count must then
 * read low (the cap lets a few more in), never wrap to "full". */
__s64 tracked_now = 0;
/* The per-flow peak-rate window (flow_peak), in microseconds; 0: off. */
const volatile __u32 peak_window_us = 0;

/* Whether this tcp_probe run is one of the sample: a hash of the segment's
 * sequence and acknowledgement numbers (TCP_SKB_CB, filled by
 * tcp_v4_rcv/tcp_v6_rcv before the tracepoint), its top bits against the
 * mask. Two loads and a multiply from a cache line the
 * stack just wrote: no helper, no store. Not bpf_get_prandom_u32(), which
 * measured ~80 ns a call on the lab VM, more than the work it saves; a
 * per-CPU draw (helper for the CPU number, a load and a store) ~25 ns; and
 * not every Nth run, which aliases: a CPU carrying both ends of a loopback
 * connection alternates between them, and every 8th run would always be
 * the same end. Successive segments of a flow differ in seq or ack_seq, so
 * their draws are independent; only repeats of one segment (duplicate ACKs)
 * draw alike. */
static __always_inline bool probe_sampled(const struct sk_buff *skb)
{
	const struct tcp_skb_cb *cb = (const void *)skb->cb;
	__u32 h = cb->seq ^ (cb->ack_seq * 2654435761u);

	h *= 2246822519u;
	h ^= h >> 15;
	return !((h >> 24) & probe_sample_mask);
}
/* Whether the segment takes sequence space (data, or a FIN): from the same
 * control block as the draw, no helper. */
static __always_inline bool skb_carries_data(const struct sk_buff *skb)
{
	const struct tcp_skb_cb *cb = (const void *)skb->cb;

	return cb->end_seq != cb->seq;
}

/* TEST ONLY (THROTTLESCOPE_TEST_FAIL_PROGRAM): bit N set makes the verifier
 * reject the optional program whose health counter is N, as an older kernel
 * would (TEST_REJECT, common.bpf.h); 0 (the only value outside tests) and the
 * check is pruned at load. */
const volatile __u32 test_reject = 0;
/* Tests only (THROTTLESCOPE_TEST_SKIP_LOSS_EVERY): every Nth run that moves
 * an observed socket into Loss returns before it counts anything, as a run
 * the kernel skips without counting does; 0 (always, outside tests): the
 * verifier prunes it. */
const volatile __u32 test_skip_loss_every = 0;
__u32 test_loss_runs = 0;

/* Written by user space (src/collect/probes/flows.rs) before each flow dump.
 * flow_dump_gen counts the dumps: event programs stamp a flow that moved
 * with it, and the dump iterators emit only the flows stamped recently
 * (TS_DUMP_GENS_KEPT, flows.h). flow_dump_all makes a dump emit every flow:
 * the first one, and one every so often so that a flow whose close event
 * was lost is noticed gone. .data, not .rodata: they change while loaded. */
volatile __u32 flow_dump_gen = 1;
volatile __u32 flow_dump_all = 1;
/* Set by user space once the seeding iterator has run: the namespace it
 * seeded (0 before). Every socket of that namespace open at start got its
 * storage from the seeding, so storage an event creates there afterwards
 * belongs to a socket born while we watched, even when the state change
 * that marks an opening was missed (the kernel skips a program re-entered
 * on its CPU, e.g. a task preempted inside it: tens per 1,000 sockets in a
 * storm). Without this such a flow counted as pre-existing, and its first
 * reading as a baseline: its segments, bytes and retransmits up to then
 * went missing from every sum. */
volatile __u32 seeded_netns = 0;
/* Set by user space once it reads each interval's flows by sweeping the
 * moved set (sweep_moved) instead of walking every flow: then the event
 * programs add each flow to the set at its first event of a generation,
 * and tcp_sendmsg_locked skips the storage when the flow sent this
 * generation already (docs/architecture.md, "The moved set"). 0: no set. */
volatile __u32 moved_gate = 0;

/* jiffies when the current generation's sweep began (written by it): the
 * gates of tcp_probe's unsampled runs and of tcp_sendmsg_locked. */
volatile __u32 gate_jiffies = 0;
/* What user space asks of the next sweep_moved run: a new sweep (sweep_new;
 * 0: go on with the members the last run left, when it filled the output
 * ring), and write records (sweep_emit) or only keep the set (a full dump
 * through an iterator read every flow already). */
volatile __u32 sweep_new = 1;
volatile __u32 sweep_emit = 1;
/* Entries in moved_queue (pushes less pops, atomic), and how many of them
 * the sweep in progress has still to visit. */
__s64 moved_queued = 0;
__s64 sweep_left = 0;

/* When each of the last dumps began (jiffies), by generation: slot gen & 3,
 * written by the dump's first record. A flow whose kernel stamps are later
 * than the start of the dump TS_DUMP_GENS_KEPT generations back moved lately
 * (the same window as moved_gen's). dump_first_jiffies: the first dump's,
 * the window while fewer dumps have run. */
struct ts_dump_start {
	__u32 gen;
	__u32 jiffies;
};
struct ts_dump_start dump_starts[4] = {};
__u32 dump_first_jiffies = 0;
bool dump_first_seen = false;

/* Force the ABI types into BTF so libbpf-cargo generates them for Rust. */
struct ts_flow_record _abi_flow_record = {};
struct ts_event _abi_event = {};
struct ts_close_event _abi_close_event = {};
enum ts_health_counter _abi_health_counter = TS_H_MAX;
enum ts_event_kind _abi_event_kind = TS_EV_OPEN;
enum ts_ifindex_source _abi_ifindex_source = TS_IFX_NONE;
struct ts_moved _abi_moved = {};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ts_flow_state);
} flow_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TS_H_MAX);
	__type(key, __u32);
	__type(value, __u64);
} health SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TS_EVENTS_RINGBUF_BYTES);
} events SEC(".maps");

/* Close records that found the ring buffer full (flows.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, TS_CLOSED_OVERFLOW_ENTRIES);
	__type(key, __u64);
	__type(value, struct ts_flow_record);
} closed_overflow SEC(".maps");

/* on_tcp_destroy_sock's record on its way to closed_overflow. Its own: a
 * tracing program does not nest in itself on one CPU (the kernel skips and
 * counts such a run), but it can interrupt an iterator using `scratch`. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ts_flow_record);
} close_scratch SEC(".maps");
/* Untracked sockets by cookie (TS_UNTRACKED_ENTRIES, flows.h): each is
 * counted once, and the bytes it moves are counted. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, TS_UNTRACKED_ENTRIES);
	__type(key, __u64);
	__type(value, struct ts_untracked);
} untracked SEC(".maps");

static __always_inline void health_add(__u32 idx, __u64 n);

/* The moved set (flows.h, TS_MOVED_ENTRIES): members by cookie, and the
 * queue of members the sweep visits. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TS_MOVED_ENTRIES);
	__type(key, __u64);
	__type(value, __u8);
} moved_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, TS_MOVED_ENTRIES);
	__type(value, struct ts_moved);
} moved_queue SEC(".maps");

/* A member into the queue: counted; refused (the queue is full) it leaves
 * the set again, counted as a flow the set had no room for. */
static __always_inline void moved_enqueue(struct ts_moved *m)
{
	if (bpf_map_push_elem(&moved_queue, m, 0)) {
		bpf_map_delete_elem(&moved_flows, &m->cookie);
		health_add(TS_H_MOVED_FULL, 1);
		return;
	}
	__sync_fetch_and_add(&moved_queued, 1);
}

/* The sweep's records, drained by user space after each run. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, TS_SWEEP_RINGBUF_BYTES);
} sweep_out SEC(".maps");

/* Scratch space for one record: too large for the 512-byte stack. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TS_SCRATCH_ENTRIES);
	__type(key, __u32);
	__type(value, struct ts_flow_record);
} scratch SEC(".maps");

static __always_inline bool observed(const struct sock *sk)
{
	return NETNS_OBSERVED(sk_netns(sk), target_netns, all_netns);
}

/* `direct`: TS_READ (common.bpf.h). Through the tcp_sock: a plain load
 * past struct sock through a sock pointer is refused. */
static __always_inline __u32 current_ca_state(struct tcp_sock *tp, bool direct)
{
	return TS_READ_BITS(direct, tp, inet_conn.icsk_ca_state);
}

static __always_inline void update_ifindex(struct sock *sk, struct ts_flow_state *st, bool direct);

/* The flow moved: the next dumps read it again. A load and a compare first,
 * so that on the hot path a flow already stamped this generation costs no
 * store (no dirtied cache line); a plain store, since a racing stamp by the
 * iterator or another event writes the same or a newer generation.
 * The first event of a generation also puts the flow in the moved set
 * (while the sweep reads it) and refreshes the flow's interface: the sweep
 * can read the storage, not write it. The stamp is stored before the set
 * is touched: a sweep that takes the flow out at the same moment looks at
 * the stamp after its delete (both take the bucket's lock) and puts the
 * flow back (sweep_one). */
static __always_inline void mark_moved(struct sock *sk, struct ts_flow_state *st)
{
	__u32 gen = flow_dump_gen;
	struct ts_moved m = {};
	__u8 member = 1;
	long err;

	if (st->moved_gen == gen)
		return;
	st->moved_gen = gen;
	if (!moved_gate)
		return;
	update_ifindex(sk, st, true);
	/* The key from the stack: in the map iterator (dump_one) `st` is the
	 * iterator's value buffer, which 6.1's verifier refuses as a key. */
	m.cookie = st->cookie;
	err = bpf_map_update_elem(&moved_flows, &m.cookie, &member, BPF_NOEXIST);
	if (err == -17 /* EEXIST: a member already */)
		return;
	if (err) {
		health_add(TS_H_MOVED_FULL, 1);
		return;
	}
	m.sk = (__u64)sk;
	m.st = (__u64)st;
	moved_enqueue(&m);
}

/* Adds `n` to slot `idx` of the per-CPU health counters. */
static __always_inline void health_add(__u32 idx, __u64 n)
{
	__u64 *v = bpf_map_lookup_elem(&health, &idx);

	if (v)
		*v += n;
}

/* An untracked socket's bytes since it was last seen go to the health
 * counters. The socket's events can run on two CPUs at once (sendmsg in
 * process context, tcp_probe in softirq): the new total is stored with a
 * compare-and-swap, and a CPU that loses the race adds nothing; the growth is
 * counted at the socket's next event, or at its close. */
static __always_inline void untracked_account(struct sock *sk, struct ts_untracked *u)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	__u64 now, was;

	if (!tp)
		return;
	now = BPF_CORE_READ(tp, bytes_sent);
	was = u->bytes_sent;
	if (now > was && __sync_val_compare_and_swap(&u->bytes_sent, was, now) == was)
		health_add(TS_H_UNTRACKED_SENT, now - was);
	now = BPF_CORE_READ(tp, bytes_received);
	was = u->bytes_received;
	if (now > was && __sync_val_compare_and_swap(&u->bytes_received, was, now) == was)
		health_add(TS_H_UNTRACKED_RECEIVED, now - was);
}

/* The socket is not tracked: counted once (the first time, when it enters
 * the table), its bytes from then on counted as it moves. What it moved
 * before is not: a tracked flow's growth starts when it is first seen too. */
static __always_inline void untrack(struct sock *sk, __u64 cookie)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct ts_untracked u = {};

	if (tp) {
		u.bytes_sent = BPF_CORE_READ(tp, bytes_sent);
		u.bytes_received = BPF_CORE_READ(tp, bytes_received);
	}
	/* BPF_NOEXIST: a CPU that loses the race to insert leaves the count
	 * to the winner. */
	if (!bpf_map_update_elem(&untracked, &cookie, &u, BPF_NOEXIST))
		health_inc(health, TS_H_UNTRACKED);
}

/* Storage for a socket that has none: created unless the socket is already
 * known untracked or the --max-flows cap is reached. A socket left untracked
 * stays so for its life, even if the cap frees later: its figures would start
 * part-way through, and it would count as both. */
static __always_inline struct ts_flow_state *flow_create(struct sock *sk)
{
	__u64 cookie = bpf_get_socket_cookie(sk);
	struct ts_untracked *u;
	struct ts_flow_state *st;

	u = bpf_map_lookup_elem(&untracked, &cookie);
	if (u) {
		untracked_account(sk, u);
		return NULL;
	}
	if (max_flows && tracked_now >= (__s64)max_flows) {
		untrack(sk, cookie);
		return NULL;
	}
	st = bpf_sk_storage_get(&flow_state, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!st) {
		/* Another CPU may have created it first (the kernel then
		 * refuses a second): look again before calling it untracked. */
		st = bpf_sk_storage_get(&flow_state, sk, 0, 0);
		if (!st)
			untrack(sk, cookie);
		return st;
	}
	if (!st->first_seen_ns)
		__sync_fetch_and_add(&tracked_now, 1);
	return st;
}

/* The flow's storage; created (and initialised) when `create` is set.
 * Every event that reaches a flow's storage comes through here, so this is
 * where the flow is marked as moved (the next dumps read it). A tracked
 * socket costs one lookup, as before; only a socket without storage goes on
 * to flow_create. */
static __always_inline struct ts_flow_state *flow_get(struct sock *sk, bool create)
{
	struct ts_flow_state *st;

	st = bpf_sk_storage_get(&flow_state, sk, 0, 0);
	if (!st && create)
		st = flow_create(sk);
	if (!st)
		return NULL;
	if (!st->first_seen_ns) {
		__u64 now = bpf_ktime_get_ns();
		st->cookie = bpf_get_socket_cookie(sk);
		st->first_seen_ns = now;
		st->ca_since_ns = now;
		st->ca_state = current_ca_state((struct tcp_sock *)sk, false); /* once a flow */
		if (seeded_netns && sk_netns(sk) == seeded_netns)
			st->opened_ns = now;
	}
	mark_moved(sk, st);
	if (!st->lport)
		st->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	return st;
}

/* Wake the reader thread only once the ring holds a quarter of its size: a
 * lone event waits for the interval's own drain, and a steady trickle of
 * events costs no wakeup each (the kernel's default wakes the reader for
 * every record that finds the ring empty). */
static __always_inline __u64 wakeup_flags(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= TS_EVENTS_RINGBUF_BYTES / 4
		       ? BPF_RB_FORCE_WAKEUP
		       : BPF_RB_NO_WAKEUP;
}

/* The socket enters TCP_CLOSE: a tracked one no longer counts against
 * --max-flows (its storage lives on until the socket is freed, for the
 * close record); an untracked one's last bytes are counted and it leaves the
 * table. */
static __always_inline void flow_closing(struct sock *sk, struct ts_flow_state *st)
{
	struct ts_untracked *u;
	__u64 cookie;

	if (st) {
		__sync_fetch_and_add(&tracked_now, -1);
		return;
	}
	cookie = bpf_get_socket_cookie(sk);
	u = bpf_map_lookup_elem(&untracked, &cookie);
	if (!u)
		return;
	untracked_account(sk, u);
	if (!bpf_map_delete_elem(&untracked, &cookie))
		health_inc(health, TS_H_UNTRACKED_CLOSED);
}

static __always_inline void emit(__u32 kind, struct sock *sk, __s32 arg0, __s32 arg1)
{
	struct ts_event *ev;

	if (!emit_events)
		return;
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		health_inc(health, TS_H_RINGBUF_DROPS);
		return;
	}
	ev->ts_ns = bpf_ktime_get_ns();
	ev->cookie = bpf_get_socket_cookie(sk);
	ev->kind = kind;
	ev->arg0 = arg0;
	ev->arg1 = arg1;
	ev->netns = sk_netns(sk);
	bpf_ringbuf_submit(ev, wakeup_flags());
}

/* The interface the flow uses, in its own netns: the egress device of the
 * socket's cached route; when there is none (not yet routed, or dropped by an
 * RTO or a route change), the device its segments last arrived on. The value
 * is kept in the storage, so a flow whose route is gone for the moment (and
 * the close record) still carries it; a route-derived value is not replaced
 * by a receive-derived one. Runs at a flow's first event of a generation,
 * and at dumps and closes. The pointers are RCU ones and may be NULL: a
 * direct load through a NULL one reads 0, as the checked read does. */
static __always_inline void update_ifindex(struct sock *sk, struct ts_flow_state *st, bool direct)
{
	struct dst_entry *dst = TS_READ(direct, sk, sk_dst_cache);
	struct net_device *dev = dst ? TS_READ(direct, dst, dev) : NULL;
	int rx = 0;

	if (dev) {
		int idx = TS_READ(direct, dev, ifindex);
		if (idx > 0) {
			st->ifindex = idx;
			st->ifindex_source = TS_IFX_ROUTE;
			return;
		}
	}
	if (st->ifindex_source == TS_IFX_ROUTE)
		return;
	rx = sk_rx_ifindex(sk, direct); /* core_fixes.bpf.h: moved in 5.16 */
	if (rx > 0) {
		st->ifindex = rx;
		st->ifindex_source = TS_IFX_RX;
	}
}

/* The chrono counters as tcp_get_info() reports them: the period running now
 * (chrono_type, since chrono_start) is added to its type (chrono_type's width
 * changed in 7.0: tcp_chrono_type(), core_fixes.bpf.h). Returns
 * whether a period is running (its time grows at every read), so that the
 * dump's still_busy() need not read chrono_type again. */
static __always_inline bool fill_send_limits(struct ts_flow_record *rec, struct tcp_sock *tp,
					     bool direct)
{
	__u32 stat[3];
	__u32 type, now;

	rec->now_jiffies = bpf_jiffies64();
	now = (__u32)rec->now_jiffies;
	stat[0] = TS_READ(direct, tp, chrono_stat[0]);
	stat[1] = TS_READ(direct, tp, chrono_stat[1]);
	stat[2] = TS_READ(direct, tp, chrono_stat[2]);
	type = tcp_chrono_type(tp, direct);
	if (type >= 1 && type <= 3) {
		__u32 running = now - TS_READ(direct, tp, chrono_start);

		if (type == 1)
			stat[0] += running;
		else if (type == 2)
			stat[1] += running;
		else
			stat[2] += running;
	}
	rec->busy_jiffies = stat[0] + stat[1] + stat[2];
	rec->rwnd_limited_jiffies = stat[1];
	rec->sndbuf_limited_jiffies = stat[2];
	rec->notsent_bytes = TS_READ(direct, tp, write_seq) - TS_READ(direct, tp, snd_nxt);
	rec->cwnd_limited = TS_READ_BITS(direct, tp, is_cwnd_limited);
	return type != 0;
}

/* Fills `rec` from the socket, `rec->st` holding a copy of the flow's
 * storage already (its port and interface are brought up to date in that
 * copy); returns whether a send-limit period is running
 * (fill_send_limits). `direct` (TS_READ, common.bpf.h): `sk` and `tp` are
 * BTF pointers (the iterators' and the close's arguments, or the sweep's
 * bpf_core_cast views), read with plain loads; else addresses (the sweep
 * before 6.2), read with checked reads. One body for the iterators, the
 * close and the sweep, so their records agree. */
static __always_inline bool fill_from_socket(struct ts_flow_record *rec, struct sock *sk,
					     struct tcp_sock *tp, bool direct)
{
	struct socket *sock;
	struct file *file;
	struct inode *inode;
	bool sending;

	rec->now_ns = bpf_ktime_get_ns();
	rec->family = TS_READ(direct, sk, __sk_common.skc_family);
	rec->lport = TS_READ(direct, sk, __sk_common.skc_num);
	if (rec->lport)
		rec->st.lport = rec->lport;
	else
		rec->lport = rec->st.lport; /* closing: the kernel already unhashed it */
	rec->rport = bpf_ntohs(TS_READ(direct, sk, __sk_common.skc_dport));
	rec->tcp_state = TS_READ(direct, sk, __sk_common.skc_state);
	rec->ca_state = current_ca_state(tp, direct);
	if (rec->family == AF_INET6) {
		__u32 *sa = (__u32 *)rec->saddr, *da = (__u32 *)rec->daddr;

		sa[0] = TS_READ(direct, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[0]);
		sa[1] = TS_READ(direct, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[1]);
		sa[2] = TS_READ(direct, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[2]);
		sa[3] = TS_READ(direct, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32[3]);
		da[0] = TS_READ(direct, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[0]);
		da[1] = TS_READ(direct, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[1]);
		da[2] = TS_READ(direct, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[2]);
		da[3] = TS_READ(direct, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32[3]);
	} else {
		__builtin_memset(rec->saddr, 0, sizeof(rec->saddr));
		__builtin_memset(rec->daddr, 0, sizeof(rec->daddr));
		*(__u32 *)rec->saddr = TS_READ(direct, sk, __sk_common.skc_rcv_saddr);
		*(__u32 *)rec->daddr = TS_READ(direct, sk, __sk_common.skc_daddr);
	}
	/* Each pointer may be NULL (a socket being torn down): both ways read
	 * 0 through one. */
	sock = TS_READ(direct, sk, sk_socket);
	file = sock ? TS_READ(direct, sock, file) : NULL;
	inode = file ? TS_READ(direct, file, f_inode) : NULL;
	rec->sock_ino = inode ? TS_READ(direct, inode, i_ino) : 0;

	rec->srtt_us = TS_READ(direct, tp, srtt_us) >> 3;
	rec->min_rtt_us = TS_READ(direct, tp, rtt_min.s[0].v);
	rec->mdev_us = TS_READ(direct, tp, mdev_us) >> 2;
	rec->snd_cwnd = TS_READ(direct, tp, snd_cwnd);
	rec->snd_ssthresh = TS_READ(direct, tp, snd_ssthresh);
	rec->packets_out = TS_READ(direct, tp, packets_out);
	rec->retrans_out = TS_READ(direct, tp, retrans_out);
	rec->lost_out = TS_READ(direct, tp, lost_out);
	rec->sacked_out = TS_READ(direct, tp, sacked_out);
	rec->total_retrans = TS_READ(direct, tp, total_retrans);
	rec->dsack_dups = TS_READ(direct, tp, dsack_dups);
	rec->delivered = TS_READ(direct, tp, delivered);
	rec->segs_out = TS_READ(direct, tp, segs_out);
	rec->data_segs_out = TS_READ(direct, tp, data_segs_out);
	rec->segs_in = TS_READ(direct, tp, segs_in);
	rec->mss_cache = TS_READ(direct, tp, mss_cache);
	rec->bytes_sent = TS_READ(direct, tp, bytes_sent);
	rec->bytes_retrans = TS_READ(direct, tp, bytes_retrans);
	rec->bytes_acked = TS_READ(direct, tp, bytes_acked);
	rec->bytes_received = TS_READ(direct, tp, bytes_received);
	sending = fill_send_limits(rec, tp, direct);
	rec->moved_lately = 0; /* the dump's to say (dump_one, sweep_one) */
	update_ifindex(sk, &rec->st, direct);
	return sending;
}

/* Fills `rec` from a socket and its storage, both trusted pointers: the
 * storage's port and interface are kept up to date too. */
static __always_inline bool fill_record(struct ts_flow_record *rec, struct sock *sk,
					struct tcp_sock *tp, struct ts_flow_state *st)
{
	bool sending;

	__builtin_memcpy(&rec->st, st, sizeof(rec->st));
	rec->cookie = bpf_get_socket_cookie(sk);
	rec->netns = sk_netns(sk);
	sending = fill_from_socket(rec, sk, tp, true);
	st->lport = rec->st.lport;
	st->ifindex = rec->st.ifindex;
	st->ifindex_source = rec->st.ifindex_source;
	return sending;
}

/* A dump of generation `gen` reads the interval extremes (srtt max, cwnd
 * min, peak rate) of the generation just ended, gen - 1: user space raised
 * the generation just before the dump, and a sampled run on another CPU
 * between the two starts generation `gen` in the storage, the ended one
 * kept in prev_* (on_tcp_probe). Older ones are no reading of this
 * interval: zeroed in the record ("none"), not in the storage. Reading
 * `gen`'s own first runs instead would lose the interval's extremes to
 * a slice of the next one (a flow's whole peak, once, in the lab). */
static __always_inline void interval_extremes(struct ts_flow_record *rec, __u32 gen)
{
	struct ts_flow_state *st = &rec->st;

	if (st->ext_gen == gen && st->prev_ext_gen == gen - 1) {
		st->srtt_max_us = st->prev_srtt_max_us;
		st->cwnd_min = st->prev_cwnd_min;
		st->peak_bps = st->prev_peak_bps;
	} else if (st->ext_gen != gen - 1) {
		st->srtt_max_us = 0;
		st->cwnd_min = 0;
		st->peak_bps = 0;
	}
}

/* The flow leaves its congestion state for `new_state`: time in the old state
 * and entries of the new one are counted. */
static __always_inline void ca_transition(struct sock *sk, struct ts_flow_state *st,
					  __u32 new_state)
{
	__u32 old, idx;
	__u64 now;

	old = st->ca_state;
	if (old == new_state)
		return;
	now = bpf_ktime_get_ns();
	/* barrier_var keeps clang from bounds-checking one copy and indexing
	 * with another, which the verifier rejects. */
	barrier_var(old);
	if (old < TS_CA_STATES)
		st->ca_time_ns[old] += now - st->ca_since_ns;
	st->ca_since_ns = now;
	st->ca_state = new_state;
	idx = new_state;
	barrier_var(idx);
	if (idx < TS_CA_STATES)
		st->ca_entries[idx]++;
	emit(TS_EV_CONG, sk, old, new_state);
}

/*
 * The flow's busiest window since the last dump (issue 24): windows of at
 * least peak_window_us, from one sampled run to the first sampled run at or
 * past its end, timed by tcp_mstamp (the socket's microsecond clock,
 * refreshed at its latest send or receive: a load, no clock read). The
 * rate is bits over the window's own length, so a window stretched by an
 * idle gap reads lower, never higher. One division per window, none per run.
 */
static __always_inline void flow_peak(struct ts_flow_state *st, struct tcp_sock *tp)
{
	__u64 now = tp->tcp_mstamp;
	__u64 bytes = tp->bytes_sent + tp->bytes_received;
	__u64 dt = now - st->pk_start_us, bps;

	if (st->pk_start_us && now > st->pk_start_us && dt < peak_window_us)
		return;
	if (st->pk_start_us && now > st->pk_start_us && bytes >= st->pk_start_bytes) {
		bps = (bytes - st->pk_start_bytes) * 8 * 1000000 / dt;
		if (bps > st->peak_bps)
			st->peak_bps = bps;
	}
	st->pk_start_us = now;
	st->pk_start_bytes = bytes;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	struct ts_flow_state *st;
	struct tcp_sock *tp;
	__u32 srtt, cwnd, gen;

	/* The draw first: it is cheaper than the namespace check, so runs left
	 * out of the sample, of any namespace, pay only the draw. A flow that
	 * keeps moving on unsampled segments only is still read: the dumps and
	 * the sweep look at the kernel's own stamps (tcp_stamped_since). With
	 * the moved set, a flow has to get into it first: an unsampled segment
	 * carrying data (a pure ACK answers data this flow sent, and its
	 * sendmsg put it in) that finds the flow has received nothing since
	 * this generation's sweep (icsk_ack.lrcvtime, stamped for data only,
	 * after this tracepoint) marks it. */
	if (probe_sample_mask && !probe_sampled(skb)) {
		if (!moved_gate || !skb_carries_data(skb) || !observed(sk))
			return 0;
		tp = tcp_sock_of(sk);
		if (!tp || (__s32)(tp->inet_conn.icsk_ack.lrcvtime - gate_jiffies) > 0)
			return 0;
		flow_get(sk, true);
		return 0;
	}
	if (!observed(sk))
		return 0;
	st = flow_get(sk, true);
	tp = tcp_sock_of(sk);
	if (!st || !tp)
		return 0;
	gen = flow_dump_gen;
	if (st->ext_gen != gen) {
		/* The generation ended, for the dump that may not have read it
		 * yet (interval_extremes). */
		st->prev_ext_gen = st->ext_gen;
		st->prev_srtt_max_us = st->srtt_max_us;
		st->prev_cwnd_min = st->cwnd_min;
		st->prev_peak_bps = st->peak_bps;
		st->ext_gen = gen;
		st->srtt_max_us = 0;
		st->cwnd_min = 0;
		st->peak_bps = 0;
	}
	srtt = tp->srtt_us >> 3;
	cwnd = tp->snd_cwnd;
	st->probe_events++;
	if (tp->write_seq != tp->snd_nxt)
		st->waiting_events++;
	st->srtt_sum_us += srtt;
	if (srtt > st->srtt_max_us)
		st->srtt_max_us = srtt;
	if (cwnd < st->last_cwnd)
		st->cwnd_reductions++;
	if (cwnd < st->cwnd_min || !st->cwnd_min)
		st->cwnd_min = cwnd;
	st->last_cwnd = cwnd;
	if (peak_window_us)
		flow_peak(st, tp);
	if (ca_from_probe)
		ca_transition(sk, st, current_ca_state(tp, true));
	return 0;
}

/* A retransmit, or (from 6.17, which passes `err`: tcp_retransmit_err(),
 * core_fixes.bpf.h) a retransmit that failed to go out. */
SEC("tp_btf/tcp_retransmit_skb")
int on_tcp_retransmit_skb(__u64 *ctx)
{
	struct sock *sk = (struct sock *)ctx[0];
	const struct sk_buff *skb = (const struct sk_buff *)ctx[1];
	struct ts_flow_state *st;
	int err;
	__u32 segs;

	if (!observed(sk))
		return 0;
	health_inc(health, TS_H_RETRANS_EVENTS);
	st = flow_get(sk, true);
	if (!st)
		return 0;
	err = tcp_retransmit_err(ctx);
	if (err) {
		st->retrans_failed++;
		emit(TS_EV_RETRANS, sk, err, 0);
		return 0;
	}
	/* A TCP skb: gso_segs as its transmit set it, no gso_size check. */
	segs = skb_gso_segs(skb);
	st->retrans_skbs++;
	st->retrans_segs += segs;
	/* Outside Recovery and Loss, only a tail loss probe retransmits
	 * (flows.h, retrans_probes). Checked reads: ctx holds no BTF pointer. */
	if (current_ca_state((struct tcp_sock *)sk, false) < TCP_CA_Recovery) {
		st->retrans_probes++;
		st->probe_segs = segs;
		st->probe_seq = BPF_CORE_READ((struct tcp_sock *)sk, snd_nxt);
	}
	emit(TS_EV_RETRANS, sk, 0, segs);
	return 0;
}

/*
 * Loss episodes the kernel undoes (flows.h, rto_undone). The tracepoint
 * fires in tcp_set_ca_state() before the new state is stored, so the
 * socket still holds the state being left. An episode begins on a move to
 * Recovery or Loss that finds a new undo_marker (tcp_init_undo() sets it to
 * snd_una just before; a Recovery that times out keeps its marker, and its
 * retransmits stay in the episode): total_retrans then is its base, less a
 * tail loss probe whose data is still unacknowledged (the probe found
 * nothing, and the episode it led to decides what it was). An undo is a
 * move out of Recovery or Loss to Open or Disorder with undo_marker zeroed:
 * tcp_try_undo_loss, _recovery, _partial and _dsack all call
 * tcp_undo_cwnd_reduction(), which zeroes it, before they leave the state;
 * an episode that ends without an undo keeps its marker (6.1 to 6.18 alike).
 * Not seen: a late D-SACK undo after the episode ended (tcp_try_undo_dsack
 * in Open or Disorder, no state change: its retransmits are all D-SACKed,
 * counted in dsack_dups), and Reno (no SACK), whose undo may keep the state.
 */
static __always_inline void undo_note(struct ts_flow_state *st, struct tcp_sock *tp,
				      __u32 old, __u32 new_state)
{
	__u32 marker = tp->undo_marker;

	if (new_state >= TCP_CA_Recovery) {
		if (marker != st->undo_marker) {
			__u32 base = tp->total_retrans;

			if (st->probe_seq && (__s32)(st->probe_seq - tp->snd_una) > 0)
				base -= st->probe_segs;
			st->undo_marker = marker;
			st->undo_base = base;
		}
		st->probe_seq = 0;
		return;
	}
	if (old < TCP_CA_Recovery)
		return;
	if (st->undo_marker && !marker) {
		st->retrans_undone += tp->total_retrans - st->undo_base;
		if (old == TCP_CA_Loss)
			st->rto_undone++;
		else
			st->recovery_undone++;
	}
	st->undo_marker = 0;
}

/* Optional: congestion-state transitions as they happen. Without it (no
 * tracepoint before 5.19-era kernels) on_tcp_probe samples the state, and
 * no undo is seen. */
SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(on_tcp_cong_state_set, struct sock *sk, const __u8 new_state)
{
	struct ts_flow_state *st;
	struct tcp_sock *tp;

	TEST_REJECT(test_reject, TS_H_CONG_EVENTS);
	if (!observed(sk))
		return 0;
	/* A plain increment (no fetch-and-add result before -mcpu=v3): two
	 * CPUs at once may lose one, and skip another run than planned; the
	 * test holds what was skipped to what was found, not to a number. */
	if (test_skip_loss_every && new_state == TCP_CA_Loss &&
	    ++test_loss_runs % test_skip_loss_every == 0)
		return 0;
	health_inc(health, TS_H_CONG_EVENTS);
	st = flow_get(sk, true);
	if (!st)
		return 0;
	tp = tcp_sock_of(sk);
	if (tp) {
		__u32 leaving = current_ca_state(tp, true);

		/* The socket leaves a state this program never saw it enter: a
		 * run the kernel skipped. Mostly one it did not count
		 * (recursion_misses stays 0; seen on 6.18 for timer softirqs
		 * interrupting some tasks: every BPF program on the tracepoint
		 * skipped, the trace event recorded); one it counted is found
		 * here too, so health's missed may count a skip twice, never
		 * none (docs/architecture.md, "Runs the kernel skips"). Counted,
		 * and the state taken from the socket, so the change now seen is
		 * recorded from where the socket really is. One read serves this
		 * and undo_note. */
		if (leaving != st->ca_state) {
			health_inc(health, TS_H_CONG_UNSEEN);
			st->ca_state = leaving;
		}
		undo_note(st, tp, leaving, new_state);
	}
	ca_transition(sk, st, new_state);
	return 0;
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_inet_sock_set_state, const struct sock *csk, const int oldstate, const int newstate)
{
	struct sock *sk = (struct sock *)csk;
	struct ts_flow_state *st;

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP || !observed(sk))
		return 0;
	health_inc(health, TS_H_STATE_EVENTS);
	if (newstate == TCP_ESTABLISHED) {
		st = flow_get(sk, true);
		if (!st)
			return 0;
		/* A flow born while we watch: its counters start from zero. */
		if (!st->opened_ns)
			st->opened_ns = bpf_ktime_get_ns();
		emit(TS_EV_OPEN, sk, oldstate, newstate);
		return 0;
	}
	if (newstate == TCP_SYN_SENT) {
		st = flow_get(sk, true);
		if (st)
			st->opened_ns = bpf_ktime_get_ns();
		return 0;
	}
	st = flow_get(sk, false);
	if (newstate == TCP_CLOSE && oldstate != TCP_CLOSE)
		flow_closing(sk, st);
	if (st)
		emit(TS_EV_STATE, sk, oldstate, newstate);
	return 0;
}

/* The ring buffer is full (a storm of closes outran the reader thread): the
 * final record waits in closed_overflow, which user space drains each
 * interval, so the flow's last counters still reach it. */
static __always_inline void defer_close(struct sock *sk, struct tcp_sock *tp,
					struct ts_flow_state *st)
{
	struct ts_flow_record *rec;
	__u32 zero = 0;

	rec = bpf_map_lookup_elem(&close_scratch, &zero);
	if (!rec) {
		health_inc(health, TS_H_CLOSES_LOST);
		return;
	}
	fill_record(rec, sk, tp, st);
	bpf_map_delete_elem(&moved_flows, &rec->cookie);
	if (bpf_map_update_elem(&closed_overflow, &rec->cookie, rec, BPF_ANY))
		health_inc(health, TS_H_CLOSES_LOST);
	else
		health_inc(health, TS_H_CLOSES_DEFERRED);
}

SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(on_tcp_destroy_sock, struct sock *sk)
{
	struct ts_close_event *ev;
	struct ts_flow_state *st;
	struct tcp_sock *tp;
	__u64 cookie;

	if (!observed(sk))
		return 0;
	health_inc(health, TS_H_DESTROY_EVENTS);
	st = flow_get(sk, false);
	tp = bpf_skc_to_tcp_sock(sk);
	if (!st || !tp)
		return 0;
	/* Always sent, even with emit_events off: it is how a closed flow is
	 * reported once with its final counters. */
	ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		defer_close(sk, tp, st);
		return 0;
	}
	fill_record(&ev->rec, sk, tp, st);
	/* The key from the stack: kernels before 6.2 or so refuse one in
	 * ring-buffer memory. */
	cookie = ev->rec.cookie;
	bpf_map_delete_elem(&moved_flows, &cookie);
	ev->hdr.ts_ns = ev->rec.now_ns;
	ev->hdr.cookie = ev->rec.cookie;
	ev->hdr.kind = TS_EV_CLOSE;
	ev->hdr.arg0 = 0;
	ev->hdr.arg1 = 0;
	ev->hdr.netns = ev->rec.netns;
	bpf_ringbuf_submit(ev, wakeup_flags());
	return 0;
}

/* Optional: the tracepoint is new in 6.16. Without it owners come from the
 * socket-inode index user space builds from /proc (src/collect/owners.rs). */
SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(on_tcp_sendmsg_locked, const struct sock *csk)
{
	struct sock *sk = (struct sock *)csk;
	struct ts_flow_state *st;
	struct task_struct *task;
	__u64 pid_tgid;

	TEST_REJECT(test_reject, TS_H_SENDMSG_EVENTS);
	if (!observed(sk))
		return 0;
	health_inc(health, TS_H_SENDMSG_EVENTS);
	/* The gate (moved_gate): new data went out after this generation's
	 * sweep began, so a run before this one (a send, or the ACK that
	 * clocked it out) marked the flow already. The owner is looked at on
	 * a connection's first send (nothing sent yet: the connection's setup
	 * stamps lsndtime too), on the first send of a generation that finds
	 * nothing sent since the sweep, and on one send in 64 besides (a draw
	 * on write_seq, which every send moves): a flow that never stops
	 * sending, its transmits clocked out by ACKs between the sweep and its
	 * next send, finds lsndtime fresh at every send and would otherwise
	 * never name a new owner. */
	if (moved_gate) {
		struct tcp_sock *tp = tcp_sock_of(sk);

		if (tp && tp->bytes_sent && (__s32)(tp->lsndtime - gate_jiffies) > 0 &&
		    ((tp->write_seq * 2654435761u) >> 26))
			return 0;
	}
	st = flow_get(sk, true);
	if (!st)
		return 0;
	pid_tgid = bpf_get_current_pid_tgid();
	if (st->owner_tgid == pid_tgid >> 32)
		return 0;
	st->owner_tgid = pid_tgid >> 32;
	st->owner_pid = (__u32)pid_tgid;
	st->owner_cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(st->owner_thread, sizeof(st->owner_thread));
	task = (struct task_struct *)bpf_get_current_task();
	BPF_CORE_READ_STR_INTO(&st->owner_comm, task, group_leader, comm);
	return 0;
}

/* Run once at start in the observer's netns: sockets that existed before we
 * attached get storage now, so they are tracked (and counted) even if idle,
 * and owned by their process when they next send. */
SEC("iter/tcp")
int seed_flows(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct ts_flow_state *st;
	struct tcp_sock *tp;
	bool fresh;
	__u8 state;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0; /* request and timewait sockets */
	state = BPF_CORE_READ(skc, skc_state);
	if (state == TCP_LISTEN || state == TCP_CLOSE)
		return 0;
	if (!observed((struct sock *)tp))
		return 0;
	fresh = !bpf_sk_storage_get(&flow_state, (struct sock *)tp, 0, 0);
	st = flow_get((struct sock *)tp, true);
	if (!st)
		return 0;
	health_inc(health, TS_H_SEEDED);
	/* Being found is not moving: storage made here gets the stamp of a
	 * flow idle for longer than the dumps keep one, so the flow counts as
	 * idle until an event marks it (or the first dump finds it busy). A
	 * socket that had storage already was reached by an event: it moved. */
	if (fresh)
		st->moved_gen = flow_dump_gen - TS_DUMP_GENS_KEPT - 1;
	return 0;
}

/* Whether a flow's record can change with no event to mark it: a send limit
 * period is running (`sending`, as fill_record() found it: its time grows at
 * every read: busy, rwnd_limited, sndbuf_limited), data is in flight or unsent (timers send it: RTO, tail
 * loss probe, zero-window probe), the congestion state is not open, the
 * connection is not established (segments of other states do not pass
 * tcp_probe), or an ACK is scheduled (the delayed-ACK timer sends it). */
static __always_inline bool still_busy(struct tcp_sock *tp, const struct ts_flow_record *rec,
				       bool sending, bool direct)
{
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)tp;

	return sending || rec->packets_out ||
	       rec->notsent_bytes || rec->ca_state != 0 /* TCP_CA_Open */ ||
	       rec->tcp_state != TCP_ESTABLISHED || TS_READ(direct, icsk, icsk_ack.pending);
}

/* Whether the flow was stamped within the last TS_DUMP_GENS_KEPT dumps. The
 * unsigned difference is right across the counter's wrap. */
static __always_inline bool stamped_lately(const struct ts_flow_state *st, __u32 gen)
{
	return gen - st->moved_gen <= TS_DUMP_GENS_KEPT;
}

/* The window in which a kernel stamp (jiffies, wrapping) counts as moving
 * lately: from the start of the dump TS_DUMP_GENS_KEPT generations back, less
 * a jiffy (a stamp in the same jiffy may come before the start), or the first
 * dump's start while fewer dumps have run, to now. */
struct ts_stamp_window {
	__u32 since;
	__u32 now;
};

/* Notes when this dump began (the first socket it visits) and returns the
 * window. Generation 0 is never a dump's (flow_dump_gen starts at 1), so an
 * unwritten slot, zeroed, is never taken for one. Nothing without sampling,
 * which needs no stamps: the verifier drops the rest. */
static __always_inline struct ts_stamp_window moved_window(void)
{
	__u32 gen = flow_dump_gen, back = gen - TS_DUMP_GENS_KEPT;
	struct ts_stamp_window w = {};
	__u32 now;

	if (!probe_sample_mask)
		return w;
	now = (__u32)bpf_jiffies64();
	w.now = now;
	struct ts_dump_start *cur = &dump_starts[gen & 3];
	struct ts_dump_start *from = &dump_starts[back & 3];

	if (cur->gen != gen) {
		cur->gen = gen;
		cur->jiffies = now;
	}
	if (!dump_first_seen) {
		dump_first_seen = true;
		dump_first_jiffies = now;
	}
	if (back && from->gen == back)
		w.since = from->jiffies - 1;
	else
		w.since = dump_first_jiffies - 1;
	return w;
}

/* Whether `stamp` falls in the window. Both ends are checked: a stamp older
 * than 2^31 jiffies (25 days at HZ=1000) wraps, and one end alone would take
 * it for new for half of every 2^32 jiffies; with both, only while it wraps
 * through the window itself. */
static __always_inline bool in_window(__u32 stamp, struct ts_stamp_window w)
{
	return (__s32)(stamp - w.since) >= 0 && (__s32)(w.now - stamp) >= 0;
}

/* Whether the kernel stamped the socket within the window `w`:
 * an acceptable ACK in (rcv_tstamp), new data out (lsndtime) or data in
 * (icsk_ack.lrcvtime). These cover the segments tcp_probe sees that were not
 * sampled; everything else that moves a flow comes through an event that
 * marks its storage, or leaves it busy (still_busy). */
static __always_inline bool tcp_stamped_since(struct tcp_sock *tp, struct ts_stamp_window w,
					      bool direct)
{
	return in_window(TS_READ(direct, tp, rcv_tstamp), w) ||
	       in_window(TS_READ(direct, tp, lsndtime), w) ||
	       in_window(TS_READ(direct, tp, inet_conn.icsk_ack.lrcvtime), w);
}

/* Whether this dump emits the flow: it moved lately (marked by an event, or,
 * with tcp_probe sampled, stamped by the kernel), or every flow is asked
 * for. The mark is checked first, so without sampling an idle flow costs the
 * iterator one load and a compare. */
static __always_inline bool moved_lately(const struct ts_flow_state *st, struct tcp_sock *tp,
					 __u32 gen, struct ts_stamp_window w)
{
	return stamped_lately(st, gen) || (probe_sample_mask && tcp_stamped_since(tp, w, true));
}

static __always_inline bool wanted(const struct ts_flow_state *st, struct tcp_sock *tp,
				   struct ts_stamp_window w)
{
	return flow_dump_all || moved_lately(st, tp, flow_dump_gen, w);
}

/* One flow's record into the iterator's output. A flow the iterators leave
 * out (!wanted) is carried by user space as last read. */
static __always_inline void dump_one(struct seq_file *seq, struct sock *sk, struct tcp_sock *tp,
				     struct ts_flow_state *st, struct ts_stamp_window w)
{
	struct ts_flow_record *rec;
	__u32 gen = flow_dump_gen;
	__u32 zero = 0;
	bool busy;

	rec = bpf_map_lookup_elem(&scratch, &zero);
	if (!rec)
		return;
	busy = still_busy(tp, rec, fill_record(rec, sk, tp, st), true);
	rec->moved_lately = busy || moved_lately(st, tp, gen, w);
	interval_extremes(rec, gen);
	bpf_seq_write(seq, rec, sizeof(*rec));
	health_inc(health, TS_H_ITER_RECORDS);
	/* Busy: stamped as moved in this generation, and with the moved set in
	 * use, put in it, as an event would. A stamp alone made the flow's
	 * events of this generation find it stamped and skip the set (the
	 * stamp is their "already a member"): after a full dump (the first
	 * one, and one every FULL_DUMP_EVERY intervals) a busy flow missed the
	 * next interval's sweep, and the interval after listed it with both
	 * intervals' bytes. */
	if (busy)
		mark_moved(sk, st);
}

/* Run every interval: one ts_flow_record per tracked socket, every netns. */
SEC("iter/bpf_sk_storage_map")
int dump_flows(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct ts_flow_state *st = ctx->value;
	struct sock *sk = ctx->sk;
	struct tcp_sock *tp;
	struct ts_stamp_window w;

	TEST_REJECT(test_reject, TS_H_ITER_RECORDS);
	if (!sk || !st)
		return 0;
	w = moved_window();
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp || !wanted(st, tp, w))
		return 0;
	dump_one(ctx->meta->seq, sk, tp, st, w);
	return 0;
}

/* The same records through the TCP socket iterator, for kernels or BPF LSM
 * policies that refuse map iterators: it walks the sockets of the network
 * namespace the iterator was created in, so user space runs it once per
 * observed namespace. */
SEC("iter/tcp")
int dump_flows_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct ts_flow_state *st;
	struct tcp_sock *tp;
	struct ts_stamp_window w;

	if (!skc)
		return 0;
	w = moved_window();
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp || !observed((struct sock *)tp))
		return 0;
	st = bpf_sk_storage_get(&flow_state, (struct sock *)tp, 0, 0);
	if (!st || !wanted(st, tp, w))
		return 0;
	dump_one(ctx->meta->seq, (struct sock *)tp, tp, st, w);
	return 0;
}

/* What one sweep_moved run carries from member to member. */
struct sweep_state {
	struct ts_stamp_window w;
	__u32 gen;
	bool emit;
	bool full;   /* the output ring filled: the rest waits for the next run */
};

enum sweep_found {
	SWEEP_GONE,   /* not the member's socket or storage any more */
	SWEEP_IDLE,   /* read; idle for longer than the dumps keep a flow */
	SWEEP_LATELY, /* read; moved lately or busy: stays in the set */
};

/* A member's record: the socket `sk` (`tp`, the same address) checked to be
 * the member's, its storage copied in, the rest read from the socket;
 * `direct` as in fill_from_socket. */
static __always_inline enum sweep_found sweep_read(struct ts_flow_record *rec, struct ts_moved *m,
						   struct sweep_state *sw, struct sock *sk,
						   struct tcp_sock *tp, bool direct)
{
	__u32 gen = sw->gen;
	bool busy, lately;

	if (TS_READ(direct, sk, __sk_common.skc_cookie.counter) != m->cookie ||
	    TS_READ(direct, sk, __sk_common.skc_state) == TCP_CLOSE ||
	    bpf_probe_read_kernel(&rec->st, sizeof(rec->st), (void *)m->st) ||
	    rec->st.cookie != m->cookie)
		return SWEEP_GONE;
	rec->cookie = m->cookie;
	rec->netns = direct ? sk_netns(sk) : BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	busy = still_busy(tp, rec, fill_from_socket(rec, sk, tp, direct), direct);
	if (busy)
		m->busy_gen = gen;
	lately = busy || stamped_lately(&rec->st, gen) || gen - m->busy_gen <= TS_DUMP_GENS_KEPT ||
		 (probe_sample_mask && tcp_stamped_since(tp, sw->w, direct));
	rec->moved_lately = lately;
	interval_extremes(rec, gen);
	return lately ? SWEEP_LATELY : SWEEP_IDLE;
}

/* One member of the moved set, off the queue: its socket and storage read
 * by address, each trusted only once it carries the member's cookie (a
 * socket whose close event was missed may be freed and its memory reused:
 * TCP sockets come from a slab whose memory stays a socket under RCU,
 * which the test run holds, and storage is freed after a grace period);
 * its record written; and back on the queue unless the flow has been idle
 * for longer than the dumps keep a flow (TS_DUMP_GENS_KEPT) and is not
 * busy. The ring space is taken before the member leaves the queue, so a
 * full ring stops the sweep with nothing lost. */
static long sweep_one(__u64 i, struct sweep_state *sw)
{
	struct ts_flow_record *rec;
	struct ts_moved m;
	enum sweep_found found;
	__u32 gen = sw->gen, moved_gen = 0;
	__u8 member = 1;

	if (sweep_left <= 0)
		return 1;
	rec = bpf_ringbuf_reserve(&sweep_out, sizeof(*rec), 0);
	if (!rec) {
		sw->full = true;
		return 1;
	}
	if (bpf_map_pop_elem(&moved_queue, &m)) {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		sweep_left = 0;
		return 1;
	}
	sweep_left--;
	__sync_fetch_and_add(&moved_queued, -1);
	/* Closed (its close event took it out of the set), or gone. */
	if (!bpf_map_lookup_elem(&moved_flows, &m.cookie))
		goto drop;
	/* From 6.2 a read-only BTF view of the address (has_rdonly_cast,
	 * core_fixes.bpf.h); before, checked reads of the address. */
	if (has_rdonly_cast())
		found = sweep_read(rec, &m, sw, bpf_core_cast((void *)m.sk, struct sock),
				   bpf_core_cast((void *)m.sk, struct tcp_sock), true);
	else
		found = sweep_read(rec, &m, sw, (struct sock *)m.sk, (struct tcp_sock *)m.sk, false);
	if (found == SWEEP_GONE) {
		bpf_map_delete_elem(&moved_flows, &m.cookie);
		health_inc(health, TS_H_SWEEP_GONE);
		goto drop;
	}
	if (sw->emit) {
		bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
		health_inc(health, TS_H_SWEEP_RECORDS);
	} else {
		bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
	}
	if (found == SWEEP_LATELY) {
		moved_enqueue(&m);
		return 0;
	}
	/* Idle: out of the set. An event that marked the flow meanwhile found
	 * it a member and did not add it; its stamp, stored before that,
	 * shows here after the delete (both take the bucket's lock): the
	 * flow goes back in, unless the event's own add came after the delete
	 * and won. */
	bpf_map_delete_elem(&moved_flows, &m.cookie);
	bpf_probe_read_kernel(&moved_gen, sizeof(moved_gen),
			      (void *)(m.st + __builtin_offsetof(struct ts_flow_state, moved_gen)));
	if (gen - moved_gen <= TS_DUMP_GENS_KEPT &&
	    !bpf_map_update_elem(&moved_flows, &m.cookie, &member, BPF_NOEXIST))
		moved_enqueue(&m);
	return 0;
drop:
	bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

/* Run by user space (a test run, not attached to anything) once per
 * interval while it reads flows this way: each flow of the moved set, and
 * no other, gives its record (docs/architecture.md, "The moved set"). A
 * new sweep visits the members queued when it starts (those added while it
 * runs wait for the next); its first run opens the window of
 * tcp_sendmsg_locked's gate. Returns 1 when the output ring filled before
 * every member was visited (run it again, sweep_new 0, after draining).
 * bpf_loop: at most 2^23 visits a run, more than the queue holds. */
SEC("raw_tp")
int sweep_moved(void *ctx)
{
	struct sweep_state sw = {
		.gen = flow_dump_gen,
		.emit = sweep_emit != 0,
	};

	TEST_REJECT(test_reject, TS_H_SWEEP_RECORDS);
	if (sweep_new) {
		gate_jiffies = (__u32)bpf_jiffies64();
		sweep_left = moved_queued;
	}
	sw.w = moved_window();
	bpf_loop(TS_MOVED_ENTRIES, sweep_one, &sw, 0);
	return sw.full ? 1 : 0;
}

/* New UDP sockets, by owner (optional: a cgroup program). */
#include "udpopen.bpf.h"
