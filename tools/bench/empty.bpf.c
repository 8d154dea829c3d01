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

SEC("tp_btf/tcp_probe")
int BPF_PROG(empty_tcp_probe)
{
	return 0;
}

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(empty_tcp_sendmsg_locked)
{
	return 0;
}

SEC("tp_btf/qdisc_enqueue")
int BPF_PROG(empty_qdisc_enqueue)
{
	return 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(empty_qdisc_dequeue)
{
	return 0;
}

SEC("tp_btf/kfree_skb")
int BPF_PROG(empty_kfree_skb)
{
	return 0;
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(empty_net_dev_start_xmit)
{
	return 0;
}

SEC("tp_btf/netif_receive_skb")
int BPF_PROG(empty_netif_receive_skb)
{
	return 0;
}
