/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of the kernel/user ABI of hostq.bpf.c (host queue
 * signals: qdisc enqueue/dequeue/backlog and kfree_skb drops per interface).
 *
 * The Rust loader never re-declares these structs: libbpf-cargo generates them
 * from this object's BTF (see the `_abi_*` globals in hostq.bpf.c).
 */
#ifndef THROTTLESCOPE_HOSTQ_H
#define THROTTLESCOPE_HOSTQ_H

/*
 * Map sizes (max_entries).
 *
 * Transmit queues live in a per-CPU ARRAY of HQ_IF_SLOTS slots, not a hash:
 * the qdisc hooks run once per packet, and an array lookup is an index, where
 * a hash lookup hashes and compares a key (issue "scale": the per-CPU hash
 * lookups and the shared sojourn hash made on_qdisc_enqueue ~1.9 us). A slot
 * is per (interface, transmit queue), because a multi-queue device (ENA, with
 * mq as its root) has one qdisc per queue, each with its own backlog: the
 * interface's backlog is their sum, as `tc -s qdisc` gives it for mq. Queue q
 * of interface i takes slot (i + c * HQ_TXQ_STRIDE) % HQ_IF_SLOTS on each CPU,
 * c the queue's offset in the device's queue array in cache lines (q times
 * sizeof(struct netdev_queue) / 64, 5 on 6.18: found without a division),
 * and writes its key there; an event whose slot holds another queue that was
 * active on that CPU in the last HQ_SLOT_IDLE_JIFFIES is not counted
 * (HQ_H_IF_UNTRACKED), an idle holder is evicted. ifindexes are small and
 * dense per namespace and the stride is odd, so an interface's first
 * 256 / 2^k queues never collide with each other (2^k the largest power of
 * two dividing the cache lines per queue: 1 for 5 lines, 64 queues for 4),
 * and busy queues of two interfaces collide only with many namespaces
 * (--all-netns) or many multi-queue interfaces.
 * 256 x 144 bytes: 36 KiB per CPU. A power of two: slots are picked with a
 * mask of HQ_IF_SLOTS - 1.
 */
#define HQ_IF_SLOTS 256
_Static_assert((HQ_IF_SLOTS & (HQ_IF_SLOTS - 1)) == 0, "HQ_IF_SLOTS is masked with N - 1");
#define HQ_TXQ_STRIDE 67
/* Queue indexes at or above this (no device we know has as many) are all
 * counted as this one: slots stay bounded. */
#define HQ_MAX_TXQ 1024
/* A slot's holder that saw no event on that CPU for this many jiffies may be
 * evicted by another interface; user space then starts the newcomer's
 * counters from zero (it tracks each slot's key per CPU). In jiffies because
 * events are stamped with bpf_jiffies64() (hostq.bpf.c: no clock read per
 * packet) and HZ is not known here: 60 s at HZ=1000, 4 min at HZ=250. */
#define HQ_SLOT_IDLE_JIFFIES (60ULL * 1000)
/* (netns, ifindex, drop reason), never deleted: room for 4 reasons per
 * interface on average at 1024 interfaces; a per-CPU hash, 8-byte values,
 * 32 KiB per CPU. Past it new keys are counted in HQ_H_DROP_UNTRACKED. Drops
 * are counted per dropped skb, not per packet through a qdisc. */
#define HQ_DROP_ENTRIES 4096
/* Sojourn sampling: an enqueue starts a sample when this CPU's enqueue count
 * on the interface is a multiple of this (and none is in progress): 1 packet
 * in 64 at most pays for a clock read and a shared write. A power of two:
 * tested with a mask of HQ_SOJOURN_EVERY - 1. */
#define HQ_SOJOURN_EVERY 64
_Static_assert((HQ_SOJOURN_EVERY & (HQ_SOJOURN_EVERY - 1)) == 0,
	       "HQ_SOJOURN_EVERY is masked with N - 1");

/* Indexes into the per-CPU `hq_health` array. Shown to the user: the
 * programs' events (ENQUEUE and DEQUEUE from the slots, the others here) in
 * health's programs; IF_UNTRACKED and DROP_UNTRACKED in health's
 * host_queue_untracked (src/collect/collector.rs). Counted, not shown:
 * SOJOURN_LOST, no figure lost (a sampled packet the qdisc dropped, or
 * split, has no sojourn; the sojourn is over the samples that left), and
 * BULK_TRUNCATED, whose skbs past the walk count one packet each: exact for
 * the small packets that make long bulk dequeues, short for a gso skb among
 * them (docs/architecture.md, "Host queue"). */
enum hq_health_counter {
	HQ_H_ENQUEUE_EVENTS = 0, /* unused: enqueue events are the slots' enqueued_skbs */
	HQ_H_DEQUEUE_EVENTS,     /* unused: dequeue events are the slots' dequeue_runs */
	HQ_H_DROP_EVENTS,        /* kfree_skb runs on an observed skb */
	HQ_H_IF_UNTRACKED,       /* qdisc events not counted: the slot held another interface */
	HQ_H_DROP_UNTRACKED,     /* (interface, reason) drop entry could not be created */
	HQ_H_SOJOURN_LOST,       /* sojourn sample skb never seen dequeued (dropped/timed out) */
	HQ_H_BULK_TRUNCATED,     /* bulk dequeues longer than the walk bound (counted 1/skb) */
	HQ_H_XMIT_EVENTS,        /* net_dev_start_xmit runs on an observed device (peak rates) */
	HQ_H_RECV_EVENTS,        /* netif_receive_skb runs on an observed device (peak rates) */
	HQ_H_MAX,
};

/* Queues are keyed by (netns, ifindex, queue index, direction): ifindex is
 * per namespace; txq is a queue's index in the device's transmit queues (0
 * on a single-queue device): for the qdisc slots, the queue the qdisc belongs
 * to (0 for a root qdisc serving every queue, hostq.bpf.c queue_slot); dir is an enum hq_dir: the peak-rate slots
 * hold either direction, the qdisc slots only transmit queues (HQ_DIR_TX). */
struct hq_if_key {
	__u32 netns;
	__u32 ifindex;
	__u32 txq;
	__u32 dir;
};

/*
 * One transmit queue's state on one CPU, in its slot of the per-CPU `if_stats`
 * array. `key` says whose it is (ifindex 0: never used). Counters are
 * cumulative from when the interface took the slot on that CPU (userspace
 * computes deltas per slot and CPU); peaks live in two slots selected by the
 * parity of `hq_epoch`, so userspace can close an interval by bumping the
 * epoch instead of writing to the map (which would race with the counters).
 */
struct hq_if_stats {
	struct hq_if_key key;
	__u64 txq_addr;          /* the queue's kernel address: how the holder is recognised */
	__u64 enqueued;          /* packets (gso segments) entering the tx qdisc */
	__u64 dequeued;          /* packets (gso segments) leaving it */
	__u64 enqueued_skbs;     /* = observed qdisc_enqueue events */
	__u64 dequeued_skbs;
	__u64 dequeue_runs;      /* observed qdisc_dequeue events that returned packets
				  * (0 with dequeue_at_xmit: on_dev_xmit counts its own) */
	__u64 sojourn_sum_ns;    /* over sampled packets, see hostq.bpf.c */
	__u64 sojourn_samples;
	/* Backlog of the queue's qdisc after this CPU's latest event on it,
	 * stamped with bpf_jiffies64() (not a clock: ~85 ns a read, per packet).
	 * User space takes, per queue, the CPU with the latest stamp (CPUs tied
	 * within a jiffy give the smallest backlog) and sums the queues
	 * (hostq.rs). */
	__u64 last_jiffies;
	__u32 last_qlen;
	__u32 last_backlog_bytes;
	/* The qdisc's own counters, cumulative, at this CPU's first event on
	 * the queue (when it took the slot) and at its latest: its drops
	 * (qstats.drops) and the packets it handed on (bstats.packets), what
	 * `tc -s qdisc` shows as dropped and sent. Exact where counting events
	 * is not: the kernel was measured not running the programs for some
	 * tracepoint hits (docs/architecture.md, "Host queue"). User space
	 * takes, per queue, the smallest first and the latest-stamped last
	 * (qdisc_counts.rs). counts_known 0: a qdisc with per-CPU stats
	 * (pfifo_fast), which keeps them elsewhere. */
	__u64 first_sent;
	__u64 last_sent;
	__u32 first_drops;
	__u32 last_drops;
	__u32 counts_known;
	__u32 _pad_counts;
	/* Interval extremes, slot = epoch & 1, valid when peak_epoch[slot] == epoch. */
	__u64 peak_epoch[2];
	__u32 peak_qlen[2];
	__u32 peak_backlog_bytes[2];
	__u64 sojourn_max_ns[2];
};

/*
 * Sub-second peak rates (issue 24, microbursts): per interface, direction
 * and queue, the bytes and wire packets in windows of `--peak-window`
 * (`peak_subs` buckets of `peak_bucket_ns`, sliding by a bucket, below),
 * and per interval (epoch, as the backlog peaks) the busiest window. Counted where every packet passes
 * whatever the qdisc: the driver's transmit (net_dev_start_xmit, after the
 * qdisc and also for the packets a qdisc lets bypass it, pfifo_fast's
 * empty-queue path, and for noqueue devices) and the stack's receive
 * (netif_receive_skb, after GRO); the two points where tcpdump sees them.
 *
 * A plain (not per-CPU) ARRAY of HQ_RATE_SLOTS: one window split over
 * per-CPU copies would not add up, and one TCP flow transmits from two
 * CPUs at once (its sender's and the one its ACKs arrive on). A transmit
 * queue with a qdisc hands its skbs to the driver from one CPU at a time
 * (the CPU that holds the qdisc's run, qdisc_run_begin(), whatever the
 * device's locking): there the adds are plain (hostq.bpf.c, tx_qdisc;
 * from 6.2, where the queue can be read without a helper call). Elsewhere
 * (a receive queue with RPS, a queue without a qdisc on a lockless (LLTX)
 * device such as veth's default noqueue) several CPUs may add at once: the
 * add is atomic, one per skb (bytes and packets packed in one word,
 * HQ_RATE_PKTS_SHIFT), and one CPU at a time opens the next bucket
 * (`claim`, below). A packet whose clock read is older than the bucket in
 * progress (another CPU opened a later one after this CPU read the clock),
 * or that comes while another CPU opens the next bucket, is added to the
 * bucket in progress: placed late by at most that other CPU's roll, never
 * lost, and never rolling the buckets back (a roll back to an older bucket
 * emptied the whole ring: a burst's window read as a fraction of itself).
 * A window's sum folded on two CPUs at once may keep the smaller of the two
 * sums. Slot of (dir, ifindex, queue): dir * HQ_IF_SLOTS + (ifindex +
 * queue * HQ_TXQ_STRIDE) % HQ_IF_SLOTS; queues colliding on a slot take it
 * over from each other (`key`; rare, as for the per-CPU slots).
 *
 * Windows slide: the slot keeps the bytes and packets of its last
 * HQ_RATE_BUCKETS buckets of `peak_bucket_ns`, and when a packet opens a
 * new bucket the window of `peak_subs` buckets that ends with the bucket
 * just completed is summed and folded into the interval's peak. So every
 * window that ends at a bucket's edge is seen, not only the ones aligned on
 * a multiple of the window (which cut a burst in two and read up to half of
 * it). A window belongs to the epoch of its latest packet: the epoch rule,
 * written where the kernel applies it (hostq.bpf.c, rate_roll).
 *
 * Packets are placed in time by a clock read shared by the packets that
 * follow it (a clock read costs a helper call; the jiffies are a load): the
 * clock is read again once the jiffy changes or `clock_every_bytes` or
 * `clock_every_pkts` have passed unclocked: HQ_CLOCK_BYTES and
 * HQ_CLOCK_PKTS, or an eighth of the bucket just completed when that is
 * more (a busy link reads the clock about 8 times a bucket, not once per
 * 64 KB skb). A packet's bucket is thus off by at most that much traffic
 * and never by more than a tick, so a window's sum is off by at most twice
 * that at its two edges: a few percent of any burst worth the name (the
 * kernel's tick alone, 4 ms at HZ=250, misplaced a third of a 12 ms
 * window's bytes).
 */
/* A bucket's word (struct hq_rate, frames): bytes below this bit, packets
 * from it. A bucket holds at most an eighth of the longest window (1 s) plus
 * a tick: 2^40 bytes is 8.8 TB/s over 125 ms, 2^24 packets 134 Mpps. An enum,
 * not a #define, so the Rust side gets it from the skeleton's BTF. */
enum hq_rate_pack {
	HQ_RATE_PKTS_SHIFT = 40,
};

enum hq_rate_clock {
	HQ_CLOCK_BYTES = 8192,
	HQ_CLOCK_PKTS = 64,
};
#define HQ_RATE_SLOTS (2 * HQ_IF_SLOTS)
/* Buckets a slot keeps: the most a window is cut in. A power of two: the
 * ring of buckets is walked with a mask of HQ_RATE_BUCKETS - 1. */
#define HQ_RATE_BUCKETS 16
_Static_assert((HQ_RATE_BUCKETS & (HQ_RATE_BUCKETS - 1)) == 0,
	       "HQ_RATE_BUCKETS is masked with N - 1");
enum hq_dir {
	HQ_DIR_TX = 0,
	HQ_DIR_RX = 1,
};

struct hq_rate {
	/* What every packet touches first, in the slot's first 56 bytes. */
	struct hq_if_key key;    /* txq: the queue (the receive queue for HQ_DIR_RX) */
	__u64 cur;               /* the bucket in progress: the latest clock read / peak_bucket_ns; 0: none yet */
	/* The bucket a roll is under way to; equal to `cur` when none is. A
	 * CPU that reads a later bucket takes the roll by moving `claim` from
	 * `cur` (compare-and-swap), rolls, then publishes `cur`: only one CPU
	 * rolls (hostq.bpf.c, rate_advance). */
	__u64 claim;
	__u64 clock_jiffies;     /* the jiffies at the latest clock read */
	__u32 unclocked_bytes;   /* passed since that read */
	__u32 unclocked_pkts;
	/* Runs since that read not yet added to the health counter: counted
	 * here on the plain-add path (one at a time) and moved to the counter
	 * at each clock read; user space adds what is left here to the
	 * counter's figure (hostq.rs). The atomic path counts each run in the
	 * health counter at once. */
	__u64 unclocked_runs;
	/* The epoch (hq_epoch) of the latest packet: whose interval the window
	 * in progress belongs to (the epoch rule: hostq.bpf.c, rate_roll). */
	__u64 last_epoch;
	/* Per bucket (index: bucket number % HQ_RATE_BUCKETS): frame bytes (as
	 * tcpdump counts them) in the low HQ_RATE_PKTS_SHIFT bits, wire packets
	 * (gso segments) above, so one add per skb counts both. */
	__u64 frames[HQ_RATE_BUCKETS];
	__u64 clock_every_bytes; /* read the clock again past this many */
	__u64 clock_every_pkts;
	__u64 peak_epoch[2];     /* slot = epoch & 1, as hq_if_stats' peaks */
	__u64 peak_bytes[2];
	__u64 peak_pkts[2];
};

/* Drops are keyed by (netns, ifindex, reason); ifindex 0: no device, by socket. */
struct hq_drop_key {
	__u32 netns;
	__u32 ifindex;
	__u32 reason;            /* enum skb_drop_reason value of the running kernel */
	__u32 pad;
};

/*
 * One sojourn measurement in progress per slot (shared by the interfaces of
 * that slot): the skb enqueued at `enq_ns` is recognised by its address when
 * it is dequeued. A plain (not per-CPU) ARRAY: enqueue and dequeue of one
 * qdisc may run on different CPUs. Written only when a sample starts or ends;
 * every enqueue and dequeue only reads it. A sample is given up
 * (HQ_H_SOJOURN_LOST) when the qdisc is seen empty without the skb having
 * left (it was dropped, or split into new skbs by the qdisc), when the same
 * address is enqueued again (freed and reused), when the qdisc has sent
 * HQ_SOJOURN_GIVE_UP_TIMES the bytes queued at the sample's start (plus one
 * gso skb) without it (the skb was split into new skbs, as a TBF splits a gso
 * skb larger than its burst, or dropped from a queue that never empties), or
 * after HQ_SOJOURN_STALE_NS (qdiscs with per-CPU stats, whose sent bytes are
 * not read).
 *
 * No atomics: enqueues and dequeues of one qdisc run under its lock, and
 * only CPUs starting samples on different qdiscs at once (children of mq,
 * interfaces sharing the slot) race; the sample then holds one CPU's skb with
 * the other's clock, taken within the same instant, or is lost uncounted.
 */
struct hq_sojourn {
	__u64 skb;               /* kernel address of the sampled skb; 0: none in progress */
	__u64 qdisc;             /* kernel address of its qdisc, as an id */
	__u64 enq_ns;
	__u64 give_up_bytes;     /* the qdisc's sent bytes past which the skb is not coming */
};

#endif
