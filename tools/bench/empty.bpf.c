// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark's yardstick: an empty program on each tracepoint the
 * observer's per-event programs use, so tools/bench can report each
 * program's cost relative to the fixed cost of running any BPF program
 * there (the trampoline, and with kernel.bpf_stats_enabled its two clock
 * reads), over the same events. baseline-probe loads the ones whose
 * tracepoint the running kernel has.
 *
 * Beside them, the floor of any program that counts per packet: one
 * increment of a per-CPU array element (count_TP), the cheapest per-CPU
 * memory a program can write on 6.1 and 6.12 (per-CPU global variables are
 * newer). A host-queue program has to find its queue's slot before it counts,
 * so it cannot cost less than this; tools/bench/small-packets reports each
 * against it (x count) as well as against the empty program.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* An empty program named empty_TP on tp_btf/TP. */
#define EMPTY_ON(tp)                                                           \
	SEC("tp_btf/" #tp)                                                     \
	int BPF_PROG(empty_##tp)                                               \
	{                                                                      \
		return 0;                                                      \
	}

EMPTY_ON(tcp_probe)
EMPTY_ON(tcp_sendmsg_locked)
EMPTY_ON(qdisc_enqueue)
EMPTY_ON(qdisc_dequeue)
EMPTY_ON(kfree_skb)
EMPTY_ON(net_dev_start_xmit)
EMPTY_ON(netif_receive_skb)

/*
 * The calibration's program (baseline-probe --dispatch-cost): task_rename
 * fires on every prctl(PR_SET_NAME), a syscall the probe can make in a
 * loop, so the loop's own CPU time with the program attached and detached
 * gives what a run costs whole, including the tracepoint's call into BPF,
 * which kernel.bpf_stats_enabled does not time (it times the program
 * between two clock reads).
 */
EMPTY_ON(task_rename)

/* One counter per count_ program, each in a cache line of its own (as the
 * observer's programs write lines of their own), so that the programs on
 * the same packet do not hand each other a line already warm. */
struct count_line {
	__u64 n;
	__u64 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct count_line);
} counts SEC(".maps");

/* A program named count_TP on tp_btf/TP: adds one to element KEY of this
 * CPU's `counts`, and nothing else. */
#define COUNT_ON(tp, key)                                                      \
	SEC("tp_btf/" #tp)                                                     \
	int BPF_PROG(count_##tp)                                               \
	{                                                                      \
		__u32 k = (key);                                               \
		struct count_line *c = bpf_map_lookup_elem(&counts, &k);       \
									       \
		if (c)                                                         \
			c->n++;                                                \
		return 0;                                                      \
	}

COUNT_ON(qdisc_enqueue, 0)
COUNT_ON(qdisc_dequeue, 1)
COUNT_ON(net_dev_start_xmit, 2)
