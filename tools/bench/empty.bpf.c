// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark's yardstick: an empty program on each tracepoint the
 * observer's per-event programs use, so tools/bench can report each
 * program's cost relative to the fixed cost of running any BPF program
 * there (the trampoline, and with kernel.bpf_stats_enabled its two clock
 * reads), over the same events. baseline-probe loads the ones whose
 * tracepoint the running kernel has.
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
