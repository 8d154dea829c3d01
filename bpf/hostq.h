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
 * Map sizes (max_entries). Both per-CPU hashes are preallocated (the
 * default: no BPF_F_NO_PREALLOC), so each costs max_entries x value size x
 * possible CPUs of memory whether used or not: sized for many namespaces'
 * interfaces, not without bound.
 *
 * Interfaces, keyed by (netns, ifindex): user space never deletes entries, so
 * this bounds the interfaces seen in the observer's lifetime (veths of
 * containers come and go with new ifindexes). 1024 x 112 bytes is 112 KiB
 * per CPU. Past it new interfaces are counted in HQ_H_IF_UNTRACKED.
 */
#define HQ_IF_ENTRIES 1024
/* (netns, ifindex, drop reason), never deleted either: room for 4 reasons
 * per interface on average at HQ_IF_ENTRIES interfaces; 8-byte values, 32 KiB
 * per CPU. Past it new keys are counted in HQ_H_DROP_UNTRACKED. */
#define HQ_DROP_ENTRIES 4096
/* One sojourn sample in progress per interface, same key as the interface
 * stats: the same bound. A plain hash, not per CPU. */
#define HQ_SOJOURN_ENTRIES HQ_IF_ENTRIES

/* Indexes into the per-CPU `hq_health` array. Every one is shown to the user. */
enum hq_health_counter {
	HQ_H_ENQUEUE_EVENTS = 0, /* qdisc_enqueue runs on an observed device's tx qdisc */
	HQ_H_DEQUEUE_EVENTS,     /* qdisc_dequeue runs that returned packets, observed */
	HQ_H_DROP_EVENTS,        /* kfree_skb runs on an observed skb */
	HQ_H_IF_UNTRACKED,       /* interface stats entry could not be created (map full) */
	HQ_H_DROP_UNTRACKED,     /* (interface, reason) drop entry could not be created */
	HQ_H_SOJOURN_LOST,       /* sojourn sample skb never seen dequeued (dropped/timed out) */
	HQ_H_BULK_TRUNCATED,     /* bulk dequeues longer than the walk bound (counted 1/skb) */
	HQ_H_MAX,
};

/* Interfaces are keyed by (netns, ifindex): ifindex is per namespace. */
struct hq_if_key {
	__u32 netns;
	__u32 ifindex;
};

/*
 * Per-CPU, per-interface state. Counters are cumulative (userspace computes
 * deltas); peaks live in two slots selected by the parity of `hq_epoch`, so
 * userspace can close an interval by bumping the epoch instead of writing to
 * the map (which would race with the counters).
 */
struct hq_if_stats {
	__u64 enqueued;          /* packets (gso segments) entering the tx qdisc */
	__u64 dequeued;          /* packets (gso segments) leaving it */
	__u64 enqueued_skbs;
	__u64 dequeued_skbs;
	__u64 sojourn_sum_ns;    /* over sampled packets, see hostq.bpf.c */
	__u64 sojourn_samples;
	/* Backlog of the tx qdisc after this CPU's latest event on it. */
	__u64 last_ns;
	__u32 last_qlen;
	__u32 last_backlog_bytes;
	/* Interval extremes, slot = epoch & 1, valid when peak_epoch[slot] == epoch. */
	__u64 peak_epoch[2];
	__u32 peak_qlen[2];
	__u32 peak_backlog_bytes[2];
	__u64 sojourn_max_ns[2];
};

/* Drops are keyed by (netns, ifindex, reason); ifindex 0: no device, by socket. */
struct hq_drop_key {
	__u32 netns;
	__u32 ifindex;
	__u32 reason;            /* enum skb_drop_reason value of the running kernel */
	__u32 pad;
};

/*
 * One sojourn measurement in progress on an interface: the packet enqueued at
 * `enq_ns` leaves a FIFO qdisc after `remaining` more packets are dequeued
 * from the same qdisc (its queue position at enqueue). Plain (not per-CPU)
 * hash: enqueue and dequeue of one qdisc run under its lock, on any CPU.
 */
struct hq_sojourn {
	__u64 qdisc;             /* kernel address of the sampled qdisc, as an id */
	__u64 enq_ns;
	__s64 remaining;         /* <= 0: no sample in progress */
};

#endif
