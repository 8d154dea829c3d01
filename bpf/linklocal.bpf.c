// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * UDP datagrams sent to the instance's link-local services (the Amazon DNS
 * resolver, instance metadata, the Time Sync service; docs/architecture.md
 * "Link-local senders"), counted per sender: namespace, interface, cgroup,
 * process, service and address family. TCP to those services (instance
 * metadata is HTTP) is seen by flows.bpf.c as any other flow.
 *
 * Hook: tp_btf/net_dev_queue, in __dev_queue_xmit, before any qdisc: each
 * skb a device is given, with its interface at hand (skb->dev), once per
 * skb whatever the qdisc does after, and for a UDP send in the sender's own
 * context (udp_sendmsg reaches it synchronously), so the current task is
 * the sender. fexit on udp_sendmsg would see the sender too, but not the
 * interface, and trampolines are refused where the kernel is locked down.
 *
 * Cost for every other packet (docs/performance.md): a packet with no
 * socket (forwarded) or a socket that is not UDP returns after two direct
 * loads and a compare; a connected UDP socket's destination is its own
 * (skc_daddr, a direct load), compared; only an unconnected UDP socket's
 * packet has its IP header's destination read (one bpf_probe_read_kernel).
 * No map is touched before the destination is known to be a service.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "linklocal.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD

/* Wire packets of a UDP skb: its GSO segments when segmented (UDP GSO),
 * else 1. */
static __always_inline __u32 skb_segs_udp(const struct sk_buff *skb)
{
	struct skb_shared_info *shinfo;

	shinfo = (struct skb_shared_info *)(BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, end));
	if (!BPF_CORE_READ(shinfo, gso_size))
		return 1;
	return BPF_CORE_READ(shinfo, gso_segs) ?: 1;
}

/* Filters, set by the loader before load (same meaning as in flows.bpf.c). */
const volatile __u32 target_netns = 0;
const volatile bool all_netns = false;
/* The VPC resolver (the VPC's base + 2), network order; 0: none known. */
const volatile __u32 vpc_dns_v4 = 0;

/* TEST ONLY (THROTTLESCOPE_TEST_FAIL_PROGRAM): see common.bpf.h. */
const volatile __u32 test_reject = 0;

struct ll_key _abi_key = {};
struct ll_value _abi_value = {};
enum ll_service _abi_service = LL_OTHER;
enum ll_health_counter _abi_health_counter = LL_H_MAX;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, LL_SENDERS);
	__type(key, struct ll_key);
	__type(value, struct ll_value);
} ll_senders SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LL_H_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ll_health SEC(".maps");

/* 169.254.0.0/16, in network order as loaded on a little-endian host: the
 * first two bytes are the low 16 bits. */
static __always_inline __u8 service_v4(__u32 daddr)
{
	const __u8 *b = (const __u8 *)&daddr;

	if (vpc_dns_v4 && daddr == vpc_dns_v4)
		return LL_DNS;
	if (b[0] != 169 || b[1] != 254)
		return 0;
	if (b[2] == 169 && b[3] == 253)
		return LL_DNS;
	if (b[2] == 169 && b[3] == 254)
		return LL_METADATA;
	if (b[2] == 169 && b[3] == 123)
		return LL_TIME;
	return LL_OTHER;
}

/* fd00:ec2::/32, and ::253, ::254, ::123 in it (the last 16 bits, the
 * 64 before them zero). */
static __always_inline __u8 service_v6(const __u32 *a)
{
	const __u8 *b = (const __u8 *)a;
	__u16 last;

	if (b[0] != 0xfd || b[1] != 0x00 || b[2] != 0x0e || b[3] != 0xc2)
		return 0;
	if (a[1] || a[2] || (a[3] & 0xffff))
		return LL_OTHER;
	last = (__u16)b[14] << 8 | b[15];
	if (last == 0x253)
		return LL_DNS;
	if (last == 0x254)
		return LL_METADATA;
	if (last == 0x123)
		return LL_TIME;
	return LL_OTHER;
}

static __always_inline void count(const struct sk_buff *skb, const struct net_device *dev,
				  __u8 service, __u8 family)
{
	struct ll_value init = {}, *v;
	struct ll_key key = {};
	struct task_struct *task;

	health_inc(ll_health, family == 6 ? LL_H_UDP6_EVENTS : LL_H_UDP4_EVENTS);
	key.cgroup_id = bpf_get_current_cgroup_id();
	key.netns = dev_netns(dev);
	key.ifindex = dev->ifindex;
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	key.service = service;
	key.family = family;
	v = map_lookup_or_init(&ll_senders, &key, &init);
	if (!v) {
		health_inc(ll_health, LL_H_MAP_FULL);
		return;
	}
	v->packets += skb_segs_udp(skb);
	v->bytes += skb->len;
	v->last_jiffies = bpf_jiffies64();
	if (!v->comm[0]) {
		task = bpf_get_current_task_btf();
		bpf_probe_read_kernel_str(v->comm, sizeof(v->comm), task->group_leader->comm);
	}
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(on_dev_queue, struct sk_buff *skb)
{
	struct net_device *dev = skb->dev;
	struct sock *sk = skb->sk;
	__u32 daddr, a[4];
	__u8 service;

	TEST_REJECT(test_reject, LL_H_UDP4_EVENTS);
	if (!sk || !dev || sk->sk_protocol != IPPROTO_UDP)
		return 0;
	if (!NETNS_OBSERVED(dev_netns(dev), target_netns, all_netns))
		return 0;
	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		daddr = sk->__sk_common.skc_daddr;
		if (!daddr && bpf_probe_read_kernel(&daddr, sizeof(daddr),
						    skb->head + skb->network_header +
							offsetof(struct iphdr, daddr)))
			return 0;
		service = service_v4(daddr);
		if (service)
			count(skb, dev, service, 4);
	} else if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		a[0] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[0];
		a[1] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[1];
		a[2] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[2];
		a[3] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[3];
		if (!(a[0] | a[1] | a[2] | a[3]) &&
		    bpf_probe_read_kernel(a, sizeof(a),
					  skb->head + skb->network_header +
					      offsetof(struct ipv6hdr, daddr)))
			return 0;
		service = service_v6(a);
		if (service)
			count(skb, dev, service, 6);
	}
	return 0;
}
