// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark's yardstick: an empty program on the same tracepoint as
 * on_tcp_probe, so tools/bench can report the probe's cost relative to the
 * fixed cost of running any BPF program there.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/tcp_probe")
int BPF_PROG(empty_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	return 0;
}
