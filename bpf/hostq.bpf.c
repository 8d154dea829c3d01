// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Host queue signals per interface: what the guest's own qdiscs queue and
 * what the guest's own stack drops, so host queuing is not blamed on the
 * hypervisor.
 *
 * Counting each packet once: qdisc_enqueue fires in dev_qdisc_enqueue() for
 * the qdisc a device tx queue points at (txq->qdisc: the root qdisc, or a
 * per-queue child of mq), not for the inner qdiscs a classful qdisc feeds.
 * To stay right on kernels that would also trace inner qdiscs, both qdisc
 * programs only count an event when `qdisc == txq->qdisc`. Packets that skip
 * the queue (TCQ_F_CAN_BYPASS on an empty pfifo_fast) fire neither hook:
 * they were never queued.
 *
 * Hot path (one run per enqueue, per dequeue batch, per dropped skb): a netns
 * check through direct BTF loads, one per-CPU hash lookup, a few stores; the
 * sojourn sampler adds one hash lookup on the qdisc hooks.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hostq.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Filters, set by the loader before load (same meaning as in flows.bpf.c). */
const volatile __u32 target_netns = 0; /* netns inode to observe */
const volatile bool all_netns = false;  /* observe every netns */

/* TEST ONLY (THROTTLESCOPE_TEST_FAIL_PROGRAM): bit N set makes the verifier
 * reject the program whose health counter is N (TEST_REJECT, common.bpf.h);
 * 0 outside tests, and pruned at load. */
const volatile __u32 test_reject = 0;

/* Set when on_qdisc_enqueue is not loaded: on_qdisc_dequeue then keeps the
 * interval's peak backlog (as seen after each dequeue). Off, the verifier
 * prunes the branch: the normal dequeue path is unchanged. */
const volatile bool peaks_at_dequeue = false;

/* Peak slot selector: userspace bumps it to close an interval (see hostq.h). */
volatile __u64 hq_epoch = 1;

/* Force the ABI types into BTF so libbpf-cargo generates them for Rust. */
struct hq_if_key _abi_if_key = {};
struct hq_if_stats _abi_if_stats = {};
struct hq_drop_key _abi_drop_key = {};
struct hq_sojourn _abi_sojourn = {};
enum hq_health_counter _abi_health_counter = HQ_H_MAX;

/* A sample whose packet was never seen leaving (qdisc reset, a drop from
 * inside the queue) is abandoned after this long and counted as lost. */
#define HQ_SOJOURN_STALE_NS (10ULL * 1000 * 1000 * 1000)
/* Longest bulk-dequeue chain walked to count gso segments. */
#define HQ_BULK_WALK 16

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, HQ_IF_ENTRIES);
	__type(key, struct hq_if_key);
	__type(value, struct hq_if_stats);
} if_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, HQ_DROP_ENTRIES);
	__type(key, struct hq_drop_key);
	__type(value, __u64);
} drops SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HQ_SOJOURN_ENTRIES);
	__type(key, struct hq_if_key);
	__type(value, struct hq_sojourn);
} sojourn SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HQ_H_MAX);
	__type(key, __u32);
	__type(value, __u64);
} hq_health SEC(".maps");

static __always_inline bool observed(__u32 netns)
{
	return NETNS_OBSERVED(netns, target_netns, all_netns);
}

/* Wire packets in one skb: gso segments, as the qdisc's own byte/packet
 * stats count them (bstats_update); any kind of skb passes here. */
static __always_inline __u32 skb_segs(const struct sk_buff *skb)
{
	return skb_gso_segs(skb, true);
}

static __always_inline struct hq_if_stats *stats_get(const struct hq_if_key *key)
{
	struct hq_if_stats zero = {}, *st;

	st = map_lookup_or_init(&if_stats, key, &zero);
	if (!st)
		health_inc(hq_health, HQ_H_IF_UNTRACKED);
	return st;
}

/* The peak slot of the current epoch, started afresh when the epoch moved. */
static __always_inline __u32 peak_slot(struct hq_if_stats *st)
{
	__u64 epoch = hq_epoch;
	__u32 slot = epoch & 1;

	barrier_var(slot);
	if (slot > 1)
		return 0;
	if (st->peak_epoch[slot] != epoch) {
		st->peak_epoch[slot] = epoch;
		st->peak_qlen[slot] = 0;
		st->peak_backlog_bytes[slot] = 0;
		st->sojourn_max_ns[slot] = 0;
	}
	return slot;
}

static __always_inline void note_backlog(struct hq_if_stats *st, struct Qdisc *q, __u64 now)
{
	st->last_ns = now;
	st->last_qlen = q->q.qlen;
	st->last_backlog_bytes = q->qstats.backlog;
}

/* The interval's peak backlog, from the backlog just noted. */
static __always_inline void note_peaks(struct hq_if_stats *st)
{
	__u32 slot = peak_slot(st);

	if (st->last_qlen > st->peak_qlen[slot])
		st->peak_qlen[slot] = st->last_qlen;
	if (st->last_backlog_bytes > st->peak_backlog_bytes[slot])
		st->peak_backlog_bytes[slot] = st->last_backlog_bytes;
}

/* The stats entry of the device behind `txq`, when this event is the one
 * to count (the qdisc the queue points at: each packet once) and the device
 * is in an observed namespace; counts the event under `counter`. */
static __always_inline struct hq_if_stats *queue_stats(struct Qdisc *q,
						       const struct netdev_queue *txq,
						       __u32 counter, struct hq_if_key *key)
{
	struct net_device *dev = txq->dev;

	if (!dev || txq->qdisc != q)
		return NULL;
	key->netns = dev_netns(dev);
	if (!observed(key->netns))
		return NULL;
	key->ifindex = dev->ifindex;
	health_inc(hq_health, counter);
	return stats_get(key);
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(on_qdisc_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{
	struct hq_if_key key;
	struct hq_if_stats *st;
	struct hq_sojourn *sj, fresh = {};
	__u64 now;

	TEST_REJECT(test_reject, HQ_H_ENQUEUE_EVENTS);
	st = queue_stats(q, txq, HQ_H_ENQUEUE_EVENTS, &key);
	if (!st)
		return 0;
	now = bpf_ktime_get_ns();
	st->enqueued += skb_segs(skb);
	st->enqueued_skbs++;
	note_backlog(st, q, now);
	note_peaks(st);

	/* Start a sojourn sample when none is in progress: this packet leaves
	 * after the qlen packets ahead of it and itself. */
	sj = map_lookup_or_init(&sojourn, &key, &fresh);
	if (!sj)
		return 0;
	if (sj->remaining > 0) {
		if (now - sj->enq_ns < HQ_SOJOURN_STALE_NS)
			return 0;
		health_inc(hq_health, HQ_H_SOJOURN_LOST);
	}
	sj->qdisc = (__u64)q;
	sj->enq_ns = now;
	sj->remaining = st->last_qlen ? st->last_qlen : 1;
	return 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(on_qdisc_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets,
	     struct sk_buff *skb)
{
	struct hq_if_key key;
	struct hq_if_stats *st;
	struct hq_sojourn *sj;
	struct sk_buff *it = skb;
	__u64 now, segs = 0;
	__u32 slot;
	int i;

	TEST_REJECT(test_reject, HQ_H_DEQUEUE_EVENTS);
	/* Fires with skb == NULL when the qdisc had nothing to send. */
	if (!skb || packets <= 0)
		return 0;
	st = queue_stats(q, txq, HQ_H_DEQUEUE_EVENTS, &key);
	if (!st)
		return 0;

	/* A bulk dequeue hands over `packets` skbs chained by ->next. */
	for (i = 0; i < HQ_BULK_WALK && i < packets && it; i++) {
		segs += skb_segs(it);
		it = BPF_CORE_READ(it, next);
	}
	if (packets > HQ_BULK_WALK) {
		segs += packets - HQ_BULK_WALK;
		health_inc(hq_health, HQ_H_BULK_TRUNCATED);
	}
	now = bpf_ktime_get_ns();
	st->dequeued += segs;
	st->dequeued_skbs += packets;
	note_backlog(st, q, now);
	if (peaks_at_dequeue)
		note_peaks(st);

	sj = bpf_map_lookup_elem(&sojourn, &key);
	if (!sj || sj->remaining <= 0 || sj->qdisc != (__u64)q)
		return 0;
	sj->remaining -= packets;
	if (sj->remaining > 0)
		return 0;
	now -= sj->enq_ns;
	st->sojourn_sum_ns += now;
	st->sojourn_samples++;
	slot = peak_slot(st);
	if (now > st->sojourn_max_ns[slot])
		st->sojourn_max_ns[slot] = now;
	return 0;
}

/*
 * kfree_skb's arguments differ by kernel: (skb, location) before 5.17,
 * + `reason` from 5.17 (6.1 has (skb, location, reason)), + `rx_sk` from 6.11.
 * The program reads the raw context and each later argument only when the
 * kernel's prototype of the tracepoint has it (CO-RE type matches on local
 * prototype flavours, resolved at load time): the verifier rejects an access
 * to an argument the tracepoint lacks, and the dead branch is never walked.
 */
/* Stand-ins for enum skb_drop_reason, so nothing here depends on the
 * enumerators of the build host's kernel. A type match on an enum needs every
 * local enumerator to exist in the kernel: the prototype's stand-in holds the
 * one every kernel with the enum has (5.17+); SKB_CONSUMED (6.0+) has its own,
 * used only by value relocation. */
enum skb_drop_reason___proto {
	SKB_DROP_REASON_NOT_SPECIFIED___proto = 2,
};
enum skb_drop_reason___ts {
	SKB_CONSUMED___ts = 1,
};
typedef void (*btf_trace_kfree_skb___reason)(void *, struct sk_buff *, void *,
					     enum skb_drop_reason___proto);
typedef void (*btf_trace_kfree_skb___rx_sk)(void *, struct sk_buff *, void *,
					    enum skb_drop_reason___proto, struct sock *);

SEC("tp_btf/kfree_skb")
int on_kfree_skb(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct sock *sk = NULL;
	__u32 reason = 0;
	struct net_device *dev;
	struct hq_drop_key key = {};
	__u64 zero = 0, *cnt;

	TEST_REJECT(test_reject, HQ_H_DROP_EVENTS);
	if (bpf_core_type_matches(btf_trace_kfree_skb___rx_sk)) {
		reason = (__u32)ctx[2];
		sk = (struct sock *)ctx[3];
	} else if (bpf_core_type_matches(btf_trace_kfree_skb___reason)) {
		reason = (__u32)ctx[2];
	}
	/* Older kernels traced frees that were not drops with this reason. */
	if (bpf_core_enum_value_exists(enum skb_drop_reason___ts, SKB_CONSUMED___ts) &&
	    reason == bpf_core_enum_value(enum skb_drop_reason___ts, SKB_CONSUMED___ts))
		return 0;
	dev = skb->dev;
	if (dev) {
		key.netns = dev_netns(dev);
		key.ifindex = dev->ifindex;
	} else if (sk) {
		key.netns = sk_netns(sk);
	} else {
		return 0;
	}
	if (!observed(key.netns))
		return 0;
	key.reason = reason;
	health_inc(hq_health, HQ_H_DROP_EVENTS);
	cnt = map_lookup_or_init(&drops, &key, &zero);
	if (!cnt) {
		health_inc(hq_health, HQ_H_DROP_UNTRACKED);
		return 0;
	}
	*cnt += 1;
	return 0;
}
