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
 * Hot path (one run per enqueue, per dequeue batch; issue 12): a netns
 * check, the device's index and the queue's offset through direct BTF loads
 * (no division: queue_slot), one per-CPU ARRAY lookup (the slot of that
 * transmit queue, its holder compared),
 * the skb's segment count from two direct loads (skb_segs), a few stores
 * into that CPU's slot, and a read of the slot's sojourn sample. No hash lookup, no shared write
 * and no clock read per packet: a sojourn sample starts on at most 1 enqueue
 * in HQ_SOJOURN_EVERY per CPU and ends at its skb's dequeue, and only those
 * two events read the clock. Measured on the small-packet bench
 * (docs/performance.md): bpf_ktime_get_ns() cost ~85 ns a call on the lab
 * VM and a 4-byte bpf_probe_read_kernel() ~50 ns, against ~60 ns for an
 * empty program on the same tracepoint, so both are kept off the per-packet
 * path; bpf_jiffies64() (a load) stamps the events instead.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hostq.h"
#include "common.bpf.h"
#include "core_fixes.bpf.h"
#include "linklocal.bpf.h"

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

/* Set by the loader when on_qdisc_dequeue is not attached because on_dev_xmit
 * does its work (the kernel has bpf_rdonly_cast, 6.2, and peak rates are on):
 * a packet through a qdisc then passes two of these programs, not three
 * (issue 47; xmit_dequeue below). Off, the verifier prunes that path. */
const volatile bool dequeue_at_xmit = false;

/* Peak slot selector: userspace bumps it to close an interval (see hostq.h). */
volatile __u64 hq_epoch = 1;

/* Set by user space while the per-packet programs are paused (--per-packet
 * auto, hostq.rs, `pause_per_packet`): the others are detached then, and
 * on_dev_xmit, kept for the link-local senders, skips its host-queue work. */
volatile __u32 hq_paused = 0;

/* The peak-rate window (struct hq_rate): buckets of `peak_bucket_ns`,
 * windows of `peak_subs` buckets (1 to HQ_RATE_BUCKETS); 0: no peak rates. */
const volatile __u64 peak_bucket_ns = 0;
const volatile __u32 peak_subs = 0;

/* Force the ABI types into BTF so libbpf-cargo generates them for Rust. */
struct hq_if_key _abi_if_key = {};
struct hq_if_stats _abi_if_stats = {};
struct hq_drop_key _abi_drop_key = {};
struct hq_sojourn _abi_sojourn = {};
struct hq_rate _abi_rate = {};
enum hq_dir _abi_dir = HQ_DIR_RX;
enum hq_rate_pack _abi_rate_pack = HQ_RATE_PKTS_SHIFT;
enum hq_health_counter _abi_health_counter = HQ_H_MAX;

/* A sample whose packet was never seen leaving (qdisc reset, a drop from
 * inside the queue) is abandoned after this long and counted as lost. */
#define HQ_SOJOURN_STALE_NS (10ULL * 1000 * 1000 * 1000)
/* A sample whose qdisc has sent this many times the bytes queued at its
 * start, plus a gso skb's worth (BIG TCP's 185 KB and more), without it, is
 * given up (hostq.h): in a FIFO it left after 1 time; a fair queue may keep
 * it longer behind other flows, rarely 4 times. */
#define HQ_SOJOURN_GIVE_UP_TIMES 4
#define HQ_SOJOURN_GIVE_UP_SLACK (256 * 1024)
/* Longest bulk-dequeue chain walked to count gso segments. */
#define HQ_BULK_WALK 16
/* TCQ_F_CPUSTATS (include/net/sch_generic.h, the same value since 4.x): the
 * qdisc keeps qlen and backlog per CPU (pfifo_fast), not in q.qlen. A macro,
 * not vmlinux.h: it has no #defines. */
#define HQ_TCQ_F_CPUSTATS 0x20
/* The bytes of a bucket's word (struct hq_rate, frames). */
#define HQ_RATE_BYTES_MASK ((1ULL << HQ_RATE_PKTS_SHIFT) - 1)

/* Per-CPU slots of transmit queues, indexed by (ifindex, queue) (hostq.h). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HQ_IF_SLOTS);
	__type(key, __u32);
	__type(value, struct hq_if_stats);
} if_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, HQ_DROP_ENTRIES);
	__type(key, struct hq_drop_key);
	__type(value, __u64);
} drops SEC(".maps");

/* The sojourn sample in progress of each slot (hostq.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HQ_IF_SLOTS);
	__type(key, __u32);
	__type(value, struct hq_sojourn);
} sojourn SEC(".maps");

/* The peak-rate windows (hostq.h, struct hq_rate). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HQ_RATE_SLOTS);
	__type(key, __u32);
	__type(value, struct hq_rate);
} rates SEC(".maps");

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

/*
 * gso segments of a gso skb, from its skb_shared_info: the slow path of
 * skb_segs(). skb_gso_segs() (common.bpf.h) reads head, end and gso_segs
 * with a probe read each and no gso_size (right only for a TCP skb); here
 * `head` and `end` are direct loads (the skb is a BTF pointer) and gso_size
 * and gso_segs, adjacent in skb_shared_info on every kernel we know, come in
 * one probe read of 4 bytes. The offsets are CO-RE relocated: on a kernel
 * where they were not adjacent, the two-read branch is the one left after
 * load.
 */
static __always_inline __u32 skb_segs_shinfo(const struct sk_buff *skb)
{
	struct skb_shared_info *shinfo = (void *)(skb->head + skb->end);
	__u32 size_off = bpf_core_field_offset(struct skb_shared_info, gso_size);
	__u32 segs_off = bpf_core_field_offset(struct skb_shared_info, gso_segs);
	__u16 gso[2] = {};

	if (segs_off == size_off + 2) {
		bpf_probe_read_kernel(gso, sizeof(gso), (void *)shinfo + size_off);
	} else {
		bpf_probe_read_kernel(&gso[0], sizeof(gso[0]), (void *)shinfo + size_off);
		bpf_probe_read_kernel(&gso[1], sizeof(gso[1]), (void *)shinfo + segs_off);
	}
	if (!gso[0] || !gso[1])
		return 1;
	return gso[1];
}

/*
 * Wire packets in one skb: gso segments, as the qdisc's own byte/packet
 * stats count them (bstats_update: gso_segs when gso_size is set, else 1).
 *
 * Without reading skb_shared_info for every skb (a probe read, ~50 ns):
 * __dev_queue_xmit() sets qdisc_skb_cb(skb)->pkt_len before the qdisc sees
 * the skb (qdisc_pkt_len_init), to skb->len plus, for a gso skb whose
 * transport header is set, the headers of every segment after the first. So
 * pkt_len == len is a one-packet skb, known from two direct loads (skb->cb
 * is a scalar array of a BTF pointer); anything else (a gso skb, or a size
 * table that rewrote pkt_len) takes the shared-info read. A qdisc that splits
 * a gso skb (tbf) gives each segment pkt_len = len. The one miscount: a gso
 * skb without a transport header counts as 1 here; the local stack always
 * sets it on transmit.
 */
static __always_inline __u32 skb_segs(const struct sk_buff *skb)
{
	const struct qdisc_skb_cb *cb = (const void *)skb->cb;

	if (cb->pkt_len == skb->len)
		return 1;
	return skb_segs_shinfo(skb);
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

/* `stamp` is bpf_jiffies64(): it orders this CPU's latest backlog against
 * the other CPUs' (hostq.h), and a load costs nothing next to a clock read. */
static __always_inline void note_backlog(struct hq_if_stats *st, struct Qdisc *q, __u64 stamp)
{
	st->last_jiffies = stamp;
	st->last_qlen = q->q.qlen;
	st->last_backlog_bytes = q->qstats.backlog;
	/* The qdisc's own counters (hostq.h), at enqueues and dequeues alike:
	 * noted at dequeues only, a missed run of the drain's last dequeue (the
	 * kernel skips some) left a drop out of the count in 1 of 5 runs. */
	st->last_drops = q->qstats.drops;
	st->last_sent = qdisc_packets_sent(q);
	st->counts_known = !(q->flags & HQ_TCQ_F_CPUSTATS);
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

/* The index of `txq` among the device's transmit queues: its offset in the
 * dev->_tx array (the type's size is CO-RE relocated). Past HQ_MAX_TXQ (or
 * outside the array, which no kernel does) it is HQ_MAX_TXQ. */
static __always_inline __u32 txq_index(const struct net_device *dev,
				       const struct netdev_queue *txq)
{
	__u64 size = bpf_core_type_size(struct netdev_queue);
	__u64 off = (__u64)txq - (__u64)dev->_tx;

	if (!size || off >= size * HQ_MAX_TXQ)
		return HQ_MAX_TXQ;
	return off / size;
}

/*
 * This CPU's slot of the qdisc `q` that transmit queue `txq` points at, when
 * this event is the one to count (the qdisc the queue points at: each packet
 * once) and the device is in an observed namespace. `*idx` is the slot index
 * (for the sojourn array).
 *
 * The slot is the qdisc's own queue (q->dev_queue), not `txq`: one root
 * qdisc (tbf, fq, htb) serves every transmit queue of a multi-queue device
 * (a veth has one per CPU), and the kernel traces its enqueue with the
 * queue the packet picked but its dequeue with q->dev_queue (queue 0). Keyed
 * by `txq`, a sojourn sample started on queue 1 was never seen leaving and
 * held its slot for HQ_SOJOURN_STALE_NS, and the root's backlog was counted
 * once per queue that enqueued. A child of mq is its queue's own qdisc: its
 * dev_queue is `txq`.
 * The slot is taken when free, or from a holder idle on this CPU for
 * HQ_SLOT_IDLE_JIFFIES; else the event is not counted (HQ_H_IF_UNTRACKED).
 *
 * The slot is found from the queue's offset in dev->_tx in cache lines
 * (every netdev_queue is cache-line aligned), and its holder recognised by
 * the queue's address with the device's ifindex and namespace: no division
 * per packet. The queue's index (txq_index(), a 64-bit division by the
 * type's size: ~5 ns a run on the small-packet bench, docs/performance.md)
 * is computed only when a queue takes the slot.
 */
static __always_inline struct hq_if_stats *queue_slot(struct Qdisc *q,
						      const struct netdev_queue *txq,
						      __u32 *idx)
{
	struct net_device *dev = txq->dev;
	struct hq_if_stats *st;
	__u32 netns, ifindex;
	__u64 lines;

	if (!dev || txq->qdisc != q)
		return NULL;
	if (q->dev_queue)
		txq = q->dev_queue;
	netns = dev_netns(dev);
	if (!observed(netns))
		return NULL;
	ifindex = dev->ifindex;
	lines = ((__u64)txq - (__u64)dev->_tx) >> 6;
	*idx = (ifindex + lines * HQ_TXQ_STRIDE) & (HQ_IF_SLOTS - 1);
	st = bpf_map_lookup_elem(&if_stats, idx);
	if (!st)
		return NULL;
	if (st->txq_addr == (__u64)txq && st->key.ifindex == ifindex && st->key.netns == netns)
		return st;
	if (st->key.ifindex && bpf_jiffies64() - st->last_jiffies < HQ_SLOT_IDLE_JIFFIES) {
		health_inc(hq_health, HQ_H_IF_UNTRACKED);
		return NULL;
	}
	/* Free or idle: this CPU's slot starts over for this interface (only
	 * this CPU writes it; user space sees the new key and starts from 0). */
	__builtin_memset(st, 0, sizeof(*st));
	st->key.netns = netns;
	st->key.ifindex = ifindex;
	st->key.txq = txq_index(dev, txq);
	st->txq_addr = (__u64)txq;
	st->first_drops = q->qstats.drops;
	st->first_sent = qdisc_packets_sent(q);
	return st;
}

/* Ends the slot's sample without a measurement. */
static __always_inline void sojourn_give_up(struct hq_sojourn *sj)
{
	sj->skb = 0;
	health_inc(hq_health, HQ_H_SOJOURN_LOST);
}

/* The sample's qdisc has sent past the sample's give-up mark without it: had
 * its skb stayed queued, it would have left (hostq.h). A qdisc with per-CPU
 * stats reads 0 sent bytes: never overdue, the stale rule applies. */
static __always_inline bool sojourn_overdue(struct Qdisc *q, const struct hq_sojourn *sj)
{
	return !(q->flags & HQ_TCQ_F_CPUSTATS) &&
	       (__s64)(qdisc_bytes_sent(q) - sj->give_up_bytes) > 0;
}

/* The sampled skb leaves its qdisc: its sojourn, from enqueue to now, into
 * the sums and the current peak slot's largest. */
static __always_inline void sojourn_end(struct hq_if_stats *st, struct hq_sojourn *sj)
{
	__u64 now = bpf_ktime_get_ns(), enq_ns = sj->enq_ns;
	__u32 slot;

	sj->skb = 0;
	if (now < enq_ns)
		return; /* a racing start (hostq.h): not this skb's clock */
	now -= enq_ns;
	st->sojourn_sum_ns += now;
	st->sojourn_samples++;
	slot = peak_slot(st);
	if (now > st->sojourn_max_ns[slot])
		st->sojourn_max_ns[slot] = now;
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(on_qdisc_enqueue, struct Qdisc *q, const struct netdev_queue *txq, struct sk_buff *skb)
{
	struct hq_if_stats *st;
	struct hq_sojourn *sj;
	__u64 now, n;
	__u32 idx = 0;

	TEST_REJECT(test_reject, HQ_H_ENQUEUE_EVENTS);
	st = queue_slot(q, txq, &idx);
	if (!st)
		return 0;
	n = st->enqueued_skbs++;
	st->enqueued += skb_segs(skb);
	note_backlog(st, q, bpf_jiffies64());
	note_peaks(st);

	sj = bpf_map_lookup_elem(&sojourn, &idx);
	if (!sj)
		return 0;
	/* The sampled address enqueued again: that skb was freed without being
	 * seen leaving, and the address reused. Checked on every enqueue (a
	 * compare), or the reused skb's dequeue would end the sample late. */
	if (sj->skb == (__u64)skb)
		sojourn_give_up(sj);
	/* With the dequeue side at the driver's transmit (dequeue_at_xmit), an
	 * empty queue is not known there (a bulk dequeue empties it before its
	 * first skb is handed over, the sampled one maybe among the later
	 * ones): the rule moves here. This skb alone in the qdisc: the sample
	 * of this qdisc not seen leaving never will be. */
	else if (dequeue_at_xmit && sj->skb && sj->qdisc == (__u64)q &&
		 ((q->q.qlen == 1 && !(q->flags & HQ_TCQ_F_CPUSTATS)) || sojourn_overdue(q, sj)))
		sojourn_give_up(sj);
	/* Sampled: the first enqueue on this CPU, then 1 in HQ_SOJOURN_EVERY.
	 * Only these read the clock, to start a sample or age out one whose
	 * skb was never seen leaving. */
	if (n & (HQ_SOJOURN_EVERY - 1))
		return 0;
	now = bpf_ktime_get_ns();
	if (sj->skb) {
		if ((__s64)(now - sj->enq_ns) <= (__s64)HQ_SOJOURN_STALE_NS)
			return 0;
		sojourn_give_up(sj);
	}
	sj->enq_ns = now;
	sj->qdisc = (__u64)q;
	sj->give_up_bytes = qdisc_bytes_sent(q) +
			    HQ_SOJOURN_GIVE_UP_TIMES * (__u64)q->qstats.backlog +
			    HQ_SOJOURN_GIVE_UP_SLACK;
	sj->skb = (__u64)skb;
	return 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(on_qdisc_dequeue, struct Qdisc *q, const struct netdev_queue *txq, int packets,
	     struct sk_buff *skb)
{
	struct hq_if_stats *st;
	struct hq_sojourn *sj;
	struct sk_buff *it = skb;
	__u64 segs = 0, sampled = 0;
	bool hit = false;
	__u32 idx = 0;
	int i;

	TEST_REJECT(test_reject, HQ_H_DEQUEUE_EVENTS);
	/* Fires with skb == NULL when the qdisc had nothing to send. */
	if (!skb || packets <= 0)
		return 0;
	st = queue_slot(q, txq, &idx);
	if (!st)
		return 0;
	sj = bpf_map_lookup_elem(&sojourn, &idx);
	if (sj && sj->qdisc == (__u64)q)
		sampled = sj->skb;

	/* A bulk dequeue hands over `packets` skbs chained by ->next: direct
	 * loads (each `it` stays a BTF pointer, so skb_segs() reads it as it
	 * reads the first). `hit` is set without a branch: one path fewer per
	 * iteration for the verifier, which walks all HQ_BULK_WALK of them
	 * (8,697 instructions processed on 6.18 for this program, 2,602 on
	 * main; the other two programs of this object, 345 and 99). */
	for (i = 0; i < HQ_BULK_WALK && i < packets && it; i++) {
		segs += skb_segs(it);
		hit |= (__u64)it == sampled;
		it = it->next;
	}
	if (packets > HQ_BULK_WALK) {
		segs += packets - HQ_BULK_WALK;
		health_inc(hq_health, HQ_H_BULK_TRUNCATED);
	}
	st->dequeued += segs;
	st->dequeued_skbs += packets;
	st->dequeue_runs++;
	note_backlog(st, q, bpf_jiffies64());
	if (peaks_at_dequeue)
		note_peaks(st);

	if (!sampled || !sj)
		return 0;
	if (!hit) {
		/* Empty, or past the give-up mark, and the sample not seen
		 * leaving: it never will be (the qdisc dropped it, or split it
		 * into new skbs). A qdisc with per-CPU stats keeps neither
		 * q.qlen nor its sent bytes here: the other rules apply. */
		if ((!st->last_qlen && !(q->flags & HQ_TCQ_F_CPUSTATS)) || sojourn_overdue(q, sj))
			sojourn_give_up(sj);
		return 0;
	}
	sojourn_end(st, sj);
	return 0;
}

/* A drop by the host's own stack: the reason and the receiving socket where
 * the kernel passes them (kfree_skb_args(), core_fixes.bpf.h: 5.17, 6.11). */
SEC("tp_btf/kfree_skb")
int on_kfree_skb(__u64 *ctx)
{
	struct sk_buff *skb = (struct sk_buff *)ctx[0];
	struct sock *sk;
	__u32 reason;
	struct net_device *dev;
	struct hq_drop_key key = {};
	__u64 zero = 0, *cnt;

	TEST_REJECT(test_reject, HQ_H_DROP_EVENTS);
	kfree_skb_args(ctx, &reason, &sk);
	if (drop_reason_is_consumed(reason))
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

/* The window of `subs` buckets ending with the bucket `r->cur`, folded into
 * `epoch`'s peak slot. */
static __always_inline void rate_fold(struct hq_rate *r, __u32 subs, __u64 epoch)
{
	__u64 bytes = 0, pkts = 0;
	__u32 slot = epoch & 1, i, b;

	barrier_var(slot);
	if (slot > 1)
		return;
	for (i = 0; i < HQ_RATE_BUCKETS; i++) {
		if (i >= subs)
			break;
		b = (r->cur - i) & (HQ_RATE_BUCKETS - 1);
		bytes += r->frames[b] & HQ_RATE_BYTES_MASK;
		pkts += r->frames[b] >> HQ_RATE_PKTS_SHIFT;
	}
	if (r->peak_epoch[slot] != epoch) {
		r->peak_epoch[slot] = epoch;
		r->peak_bytes[slot] = 0;
		r->peak_pkts[slot] = 0;
	}
	if (bytes > r->peak_bytes[slot])
		r->peak_bytes[slot] = bytes;
	if (pkts > r->peak_pkts[slot])
		r->peak_pkts[slot] = pkts;
}

/* The bucket `now` (a bucket number) opens: the window of `subs` buckets
 * that ends with the bucket just completed goes into this epoch's peak, and
 * the buckets skipped since (no packet) are emptied.
 *
 * The epoch rule, written here once (hostq.h, hostq.rs and
 * docs/architecture.md refer to it): a window belongs to the epoch of its
 * latest packet (`last_epoch`). Each read closes an epoch (hostq.rs,
 * close_epoch) and takes, beside the peak folded here, the window that ends
 * with the bucket in progress when that bucket's latest packet came in the
 * epoch it closes (hostq.rs, queue_peak); so the kernel folds a window only
 * when its latest packet came in the current epoch, or, at a queue's first
 * packet of a new epoch, into the epoch just closed (rate_note), for a read
 * that comes after that packet. Folded later, a quiet
 * queue's last window would be a peak of an interval that never saw that
 * traffic (one datagram after a quiet second read as the burst before it);
 * left to the kernel alone, a burst sharing its first bucket with a read
 * would count in no interval until a later packet came. */
static __always_inline void rate_roll(struct hq_rate *r, __u64 now, __u32 subs, __u64 epoch)
{
	__u64 bytes, pkts, gap = now - r->cur;
	__u32 i, b;

	if (r->last_epoch == epoch)
		rate_fold(r, subs, epoch);
	/* The clock's pace for the bucket now open (hostq.h). */
	b = r->cur & (HQ_RATE_BUCKETS - 1);
	bytes = gap == 1 ? (r->frames[b] & HQ_RATE_BYTES_MASK) / 8 : 0;
	pkts = gap == 1 ? (r->frames[b] >> HQ_RATE_PKTS_SHIFT) / 8 : 0;
	r->clock_every_bytes = bytes > HQ_CLOCK_BYTES ? bytes : HQ_CLOCK_BYTES;
	r->clock_every_pkts = pkts > HQ_CLOCK_PKTS ? pkts : HQ_CLOCK_PKTS;
	for (i = 1; i <= HQ_RATE_BUCKETS; i++) {
		if (i > gap)
			break;
		b = (r->cur + i) & (HQ_RATE_BUCKETS - 1);
		r->frames[b] = 0;
	}
}

/* The clock read `bucket`: opens it when it is later than the bucket in
 * progress. Where CPUs add at once (!plain), only the CPU that moves
 * `claim` from `cur` rolls; the others, and a clock read older than `cur`
 * (read before another CPU opened a later bucket), add to the bucket in
 * progress (hostq.h). The roll empties the buckets it opens before `cur`
 * names them, and `cur` is published with an atomic (a full barrier), so an
 * add into a newly opened bucket is never emptied after it. */
static __always_inline void rate_advance(struct hq_rate *r, __u64 bucket, __u32 subs,
					 __u64 epoch, bool plain)
{
	__u64 cur = *(volatile __u64 *)&r->cur;

	if (bucket <= cur)
		return;
	if (plain) {
		if (cur)
			rate_roll(r, bucket, subs, epoch);
		r->claim = bucket;
		r->cur = bucket;
		return;
	}
	if (__sync_val_compare_and_swap(&r->claim, cur, bucket) != cur)
		return;
	if (cur)
		rate_roll(r, bucket, subs, epoch);
	__sync_val_compare_and_swap(&r->cur, cur, bucket);
}

/* Runs counted on the plain-add path, moved to the health counter (at a
 * clock read, or before the slot starts over). */
static __always_inline void rate_flush_runs(struct hq_rate *r, __u32 counter)
{
	__u64 *v;

	if (!r->unclocked_runs)
		return;
	v = bpf_map_lookup_elem(&hq_health, &counter);
	if (v)
		*v += r->unclocked_runs;
	r->unclocked_runs = 0;
}

/*
 * The qdisc of transmit queue `queue` when it has one (txq->qdisc->enqueue
 * set; noqueue clears it), and the queue in `*txqp`; NULL without one. With
 * a qdisc the queue's skbs reach the driver one at a time:
 * __dev_queue_xmit() hands them over only from the CPU that holds the
 * qdisc's run (qdisc_run_begin(): the root lock's owner, or the seqlock of
 * a lockless qdisc), also on its empty-queue bypass. Without a qdisc, a
 * lockless (LLTX) device such as veth is sent to by CPUs at once. Queues
 * past HQ_MAX_TXQ share one slot: not one at a time (NULL). Needs a plain
 * read of the queue from its address (has_rdonly_cast, core_fixes.bpf.h:
 * 6.2): before that, NULL (atomic adds, as for receive).
 */
static __always_inline struct Qdisc *tx_qdisc(const struct net_device *dev, __u32 queue,
					      struct netdev_queue **txqp)
{
	struct netdev_queue *txq;
	struct Qdisc *q;

	if (!has_rdonly_cast() || queue >= HQ_MAX_TXQ)
		return NULL;
	txq = bpf_core_cast((void *)dev->_tx + queue * bpf_core_type_size(struct netdev_queue),
			    struct netdev_queue);
	q = txq->qdisc;
	if (!q || !q->enqueue)
		return NULL;
	*txqp = txq;
	return q;
}

/*
 * One skb of `len` frame bytes passing `dev` in direction `dir` on queue
 * `queue`: added to its slot's bucket in progress. The clock is read only
 * when the jiffy changed or enough traffic passed since the last read
 * (hostq.h); a read that opens a new bucket sums the window that just ended
 * (rate_roll). Wire packets: 1 unless the skb is longer than a frame of the
 * device's MTU, when gso_segs is read (a probe read, only for gso/gro skbs,
 * each of which carries many packets). `plain`: only one CPU at a time
 * passes packets of this queue (a transmit queue with a qdisc
 * runs only: tx_qdisc): the bucket's add and the run's count need no
 * atomic and no per-run health counter.
 */
static __always_inline void rate_note(const struct sk_buff *skb, const struct net_device *dev,
				      __u32 dir, __u32 queue, __u32 len, bool plain)
{
	__u64 sub = peak_bucket_ns, epoch = hq_epoch, jiffies, bucket, pkts = 1, frame;
	__u32 subs = peak_subs, idx, b;
	__u32 counter = dir == HQ_DIR_TX ? HQ_H_XMIT_EVENTS : HQ_H_RECV_EVENTS;
	struct hq_if_key k = {};
	struct hq_rate *r;

	if (!sub || !subs || !dev)
		return;
	k.netns = dev_netns(dev);
	if (!observed(k.netns))
		return;
	if (!plain)
		health_inc(hq_health, counter);
	k.ifindex = dev->ifindex;
	k.txq = queue < HQ_MAX_TXQ ? queue : HQ_MAX_TXQ;
	k.dir = dir;
	idx = ((k.ifindex + k.txq * HQ_TXQ_STRIDE) & (HQ_IF_SLOTS - 1)) + (dir ? HQ_IF_SLOTS : 0);
	r = bpf_map_lookup_elem(&rates, &idx);
	if (!r) {
		if (plain)
			health_inc(hq_health, counter);
		return;
	}
	if (len > dev->mtu + dev->hard_header_len)
		pkts = skb_segs_shinfo(skb);
	if (r->key.ifindex != k.ifindex || r->key.txq != k.txq || r->key.netns != k.netns ||
	    r->key.dir != k.dir) {
		rate_flush_runs(r, counter);
		__builtin_memset(r, 0, sizeof(*r));
		r->key = k;
		r->clock_every_bytes = HQ_CLOCK_BYTES;
		r->clock_every_pkts = HQ_CLOCK_PKTS;
	}
	/* The queue's first packet of a new epoch: the window in progress ended
	 * with the latest packet of the epoch just closed, and is folded into it
	 * now, before this packet can roll past it. User space raises the epoch,
	 * then reads (hostq.rs, read_peaks): a packet on another CPU in between
	 * would otherwise leave that window in no epoch (the epoch rule, above
	 * rate_roll). Only the epoch just closed: an older one was read long
	 * ago, and the one before it has the current epoch's slot. */
	if (r->cur && r->last_epoch + 1 == epoch)
		rate_fold(r, subs, r->last_epoch);
	jiffies = bpf_jiffies64();
	r->unclocked_bytes += len;
	r->unclocked_pkts += pkts;
	if (plain)
		r->unclocked_runs++;
	if (jiffies != r->clock_jiffies || r->unclocked_bytes >= r->clock_every_bytes ||
	    r->unclocked_pkts >= r->clock_every_pkts) {
		bucket = bpf_ktime_get_ns() / sub;
		r->clock_jiffies = jiffies;
		r->unclocked_bytes = 0;
		r->unclocked_pkts = 0;
		rate_flush_runs(r, counter);
		rate_advance(r, bucket, subs, epoch, plain);
	}
	r->last_epoch = epoch;
	b = r->cur & (HQ_RATE_BUCKETS - 1);
	frame = len | pkts << HQ_RATE_PKTS_SHIFT;
	if (plain)
		r->frames[b] += frame;
	else
		__sync_fetch_and_add(&r->frames[b], frame);
}

/*
 * The dequeue side of the host queue, done at the driver's transmit
 * (dequeue_at_xmit): skb leaves the qdisc `q` of `txq`. What on_qdisc_dequeue
 * counts per run, counted here per skb handed to the driver: its segments
 * (dequeued), the backlog left in the qdisc, the end of a sojourn sample.
 * The same packets, but for two: an skb sent on the qdisc's empty-queue
 * bypass (TCQ_F_CAN_BYPASS: pfifo_fast, pfifo, bfifo) counts as dequeued
 * here, never enqueued (tc's Sent counts it too; on_qdisc_dequeue did not),
 * and an skb requeued by the driver (NETDEV_TX_BUSY) counts once per
 * attempt, as on_qdisc_dequeue counted it once per dequeue. A qdisc's run
 * that finds it empty costs nothing here: with on_qdisc_dequeue it was a
 * run of its own (two runs a packet on the small-packet bench).
 */
static __always_inline void xmit_dequeue(struct Qdisc *q, struct netdev_queue *txq,
					 const struct sk_buff *skb)
{
	struct hq_if_stats *st;
	struct hq_sojourn *sj;
	__u32 idx = 0;

	st = queue_slot(q, txq, &idx);
	if (!st)
		return;
	st->dequeued += skb_segs(skb);
	st->dequeued_skbs++;
	note_backlog(st, q, bpf_jiffies64());
	if (peaks_at_dequeue)
		note_peaks(st);
	sj = bpf_map_lookup_elem(&sojourn, &idx);
	if (!sj || sj->skb != (__u64)skb || sj->qdisc != (__u64)q)
		return;
	sojourn_end(st, sj);
}

/* Every skb handed to a driver: after the qdisc, and also the ones that
 * bypass it or have none (hostq.h). Frame bytes as tcpdump sees them. With
 * dequeue_at_xmit, also the qdisc's dequeue side (xmit_dequeue); with
 * linklocal_on, the UDP to the link-local services (linklocal.bpf.h). Each
 * part is set before load; one that is off is not in the program. */
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_dev_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	struct netdev_queue *txq = NULL;
	struct Qdisc *q;
	__u32 queue;

	TEST_REJECT(test_reject, HQ_H_XMIT_EVENTS);
	linklocal_note(skb, dev, target_netns, all_netns);
	if (!peak_bucket_ns && !dequeue_at_xmit)
		return 0; /* link-local senders only (--no-host-queue, or peaks off) */
	if (hq_paused)
		return 0; /* paused while quiet (--per-packet auto) */
	queue = skb->queue_mapping;
	q = tx_qdisc(dev, queue, &txq);
	rate_note(skb, dev, HQ_DIR_TX, queue, skb->len, q != NULL);
	if (dequeue_at_xmit && q && txq)
		xmit_dequeue(q, txq, skb);
	return 0;
}

/* Every skb the stack receives, after GRO: its frame is its data plus the
 * link header already pulled (mac_len), as tcpdump sees it. */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(on_netif_receive, struct sk_buff *skb)
{
	TEST_REJECT(test_reject, HQ_H_RECV_EVENTS);
	rate_note(skb, skb->dev, HQ_DIR_RX, skb->queue_mapping, skb->len + skb->mac_len, false);
	return 0;
}
