/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * UDP datagrams sent to the instance's link-local services (the Amazon DNS
 * resolver, instance metadata, the Time Sync service; docs/architecture.md
 * "Link-local senders"), counted per sending socket: namespace, interface,
 * the socket's cgroup and inode, service and address family. TCP to those
 * services (instance metadata is HTTP) is seen by flows.bpf.c as any other
 * flow. Included by hostq.bpf.c only: the count is one more part of its
 * transmit program, on_dev_xmit (tp_btf/net_dev_start_xmit), so a packet
 * passes no program of its own for it (issue #47).
 *
 * At the driver's transmit the current task is not always the sender: a
 * qdisc run (the one that holds it, or a softirq after a timer) hands over
 * other sockets' packets. So the owner is the packet's socket (skb->sk):
 * its cgroup (the one it was made in) here, its process by its inode, which
 * user space resolves as for a flow (src/collect/owners.rs). Nothing is
 * read from `current`.
 *
 * Cost for every other packet (docs/performance.md): with `linklocal_on`
 * unset the verifier removes all of it. Set, a packet with no socket
 * (forwarded) or a socket that is not UDP returns after two direct loads and
 * a compare; a connected UDP socket's destination is its own (skc_daddr, a
 * direct load), compared; only an unconnected UDP socket's packet has its
 * IP header's destination read (one bpf_probe_read_kernel). No map is
 * touched before the destination is known to be a service.
 *
 * Pods (--all-netns, `linklocal_forwarded`): a pod's datagram leaves its
 * socket on the pod's own interface, and the node's interface, where the
 * allowance counts it, gets it forwarded with no socket. So the sender is
 * kept by skb at the first (ll_origin_note) and the datagram counted for it
 * at the second (ll_forwarded). That mode reads the IP header of every
 * socketless skb leaving through the observer's namespace (forwarded
 * traffic: on a node, the pods'); without --all-netns it is not in the
 * program.
 */
#ifndef THROTTLESCOPE_LINKLOCAL_BPF_H
#define THROTTLESCOPE_LINKLOCAL_BPF_H

#include <bpf/bpf_endian.h>
#include "linklocal.h"

#define LL_ETH_P_IP 0x0800
#define LL_ETH_P_IPV6 0x86DD

/* Set by the loader before load: count the UDP to the link-local services
 * (off: on_dev_xmit has none of this code). */
const volatile bool linklocal_on = false;
/* The VPC resolver (the VPC's base + 2), network order; 0: none known. */
const volatile __u32 vpc_dns_v4 = 0;
/* Set by the loader with --all-netns: datagrams sent from other namespaces
 * (pods) are kept by skb where they leave their socket, and counted for
 * that socket where they leave through `ll_node_netns` (the observer's),
 * forwarded. Off, the socketless path returns at once, as before. */
const volatile bool linklocal_forwarded = false;
const volatile __u32 ll_node_netns = 0;

struct ll_key _abi_ll_key = {};
struct ll_value _abi_ll_value = {};
enum ll_service _abi_ll_service = LL_OTHER;
enum ll_health_counter _abi_ll_health_counter = LL_H_MAX;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, LL_SENDERS);
	__type(key, struct ll_key);
	__type(value, struct ll_value);
} ll_senders SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LL_ORIGINS);
	__type(key, __u64); /* the skb's address */
	__type(value, struct ll_origin);
} ll_origins SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LL_H_MAX);
	__type(key, __u32);
	__type(value, __u64);
} ll_health SEC(".maps");

/* Wire packets of a UDP skb: its GSO segments when segmented (UDP GSO),
 * else 1. */
static __always_inline __u32 ll_skb_segs(const struct sk_buff *skb)
{
	struct skb_shared_info *shinfo;

	shinfo = (struct skb_shared_info *)(BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, end));
	if (!BPF_CORE_READ(shinfo, gso_size))
		return 1;
	return BPF_CORE_READ(shinfo, gso_segs) ?: 1;
}

/* 169.254.0.0/16, in network order as loaded on a little-endian host: the
 * first two bytes are the low 16 bits. */
static __always_inline __u8 ll_service_v4(__u32 daddr)
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
static __always_inline __u8 ll_service_v6(const __u32 *a)
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

/* `skb`'s datagram counted for `key`'s sender. */
static __always_inline void ll_add(const struct sk_buff *skb, const struct ll_key *key)
{
	struct ll_value init = {}, *v;

	v = map_lookup_or_init(&ll_senders, key, &init);
	if (!v) {
		health_inc(ll_health, LL_H_MAP_FULL);
		return;
	}
	v->packets += ll_skb_segs(skb);
	v->bytes += skb->len;
	v->last_jiffies = bpf_jiffies64();
}

/* The owner of a full socket: false for a TCP mini socket (a SYN-ACK's
 * request sock, a time-wait sock), which ends with struct sock_common: its
 * sk_protocol read before was past it, and so would its cgroup and socket
 * be. Asked here, on the rare path, so that every other packet does not
 * pay for it. */
static __always_inline bool ll_owner(struct sock *sk, __u64 *cgroup_id, __u64 *sock_ino)
{
	struct socket *sock;
	struct file *file;
	struct inode *inode;

	if ((1U << sk->__sk_common.skc_state) & ((1U << TCP_TIME_WAIT) | (1U << TCP_NEW_SYN_RECV)))
		return false;
	*cgroup_id = sk_cgroup_id(sk);
	sock = sk->sk_socket;
	file = sock ? sock->file : NULL;
	inode = file ? file->f_inode : NULL;
	*sock_ino = inode ? inode->i_ino : 0;
	return true;
}

static __always_inline void ll_count(const struct sk_buff *skb, const struct net_device *dev,
				     struct sock *sk, __u8 service, __u8 family)
{
	struct ll_key key = {};

	if (!ll_owner(sk, &key.cgroup_id, &key.sock_ino))
		return;
	key.netns = dev_netns(dev);
	key.ifindex = dev->ifindex;
	key.service = service;
	key.family = family;
	ll_add(skb, &key);
}

/* A datagram to a service leaving its socket in another namespace than
 * the observer's (--all-netns): its sender kept by skb, for when it leaves
 * through the observer's namespace (ll_forwarded). */
static __always_inline void ll_origin_note(const struct sk_buff *skb, struct sock *sk, __u32 netns)
{
	struct ll_origin o = {};
	__u64 at = (__u64)skb;

	if (!ll_owner(sk, &o.cgroup_id, &o.sock_ino))
		return;
	o.netns = netns;
	o.seen_ns = bpf_ktime_get_ns();
	bpf_map_update_elem(&ll_origins, &at, &o, BPF_ANY);
}

/* A socketless skb (forwarded) handed to a device of the observer's
 * namespace: if it is a UDP datagram to a service, it is counted as
 * forwarded, for the sending socket ll_origin_note kept (the entry then
 * deleted: one skb, one send), or for no owner when none was kept (sent
 * from a namespace whose socket was not seen, or NAT made a new skb). Only
 * with linklocal_forwarded; each such skb has its IP header read. */
static __always_inline void ll_forwarded(const struct sk_buff *skb, const struct net_device *dev)
{
	struct ll_key key = {};
	struct ll_origin *o;
	__u64 at = (__u64)skb;
	void *nh;

	key.netns = dev_netns(dev);
	if (key.netns != ll_node_netns)
		return;
	nh = skb->head + skb->network_header;
	if (skb->protocol == bpf_htons(LL_ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_probe_read_kernel(&ip, sizeof(ip), nh) || ip.protocol != IPPROTO_UDP)
			return;
		key.service = ll_service_v4(ip.daddr);
		key.family = 4;
	} else if (skb->protocol == bpf_htons(LL_ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_probe_read_kernel(&ip6, sizeof(ip6), nh) || ip6.nexthdr != IPPROTO_UDP)
			return;
		key.service = ll_service_v6(ip6.daddr.in6_u.u6_addr32);
		key.family = 6;
	}
	if (!key.service)
		return;
	key.ifindex = dev->ifindex;
	key.forwarded = 1;
	o = bpf_map_lookup_elem(&ll_origins, &at);
	if (o) {
		if (bpf_ktime_get_ns() - o->seen_ns < LL_ORIGIN_MAX_AGE_NS) {
			key.cgroup_id = o->cgroup_id;
			key.sock_ino = o->sock_ino;
			key.origin_netns = o->netns;
		}
		bpf_map_delete_elem(&ll_origins, &at);
	}
	ll_add(skb, &key);
}

/* A datagram to `service` leaving its socket `sk` through `dev`: counted
 * where the observer watches; with linklocal_forwarded, a pod's is kept
 * for where it leaves the node (its own interface is not the node's). */
static __always_inline void ll_sent(const struct sk_buff *skb, const struct net_device *dev,
				    struct sock *sk, __u8 service, __u8 family,
				    __u32 target_netns, bool all_netns)
{
	__u32 netns = dev_netns(dev);

	if (linklocal_forwarded && netns != ll_node_netns)
		ll_origin_note(skb, sk, netns);
	else if (NETNS_OBSERVED(netns, target_netns, all_netns))
		ll_count(skb, dev, sk, service, family);
}

/*
 * The part of on_dev_xmit that counts the UDP to the link-local services:
 * `skb` handed to `dev`'s driver. Off (linklocal_on unset), nothing.
 */
static __always_inline void linklocal_note(const struct sk_buff *skb, const struct net_device *dev,
					   __u32 target_netns, bool all_netns)
{
	struct sock *sk;
	__u32 daddr, a[4];
	__u8 service;

	if (!linklocal_on)
		return;
	sk = skb->sk;
	if (!sk) {
		if (linklocal_forwarded)
			ll_forwarded(skb, dev);
		return;
	}
	if (sk->sk_protocol != IPPROTO_UDP)
		return;
	if (skb->protocol == bpf_htons(LL_ETH_P_IP)) {
		daddr = sk->__sk_common.skc_daddr;
		if (!daddr && bpf_probe_read_kernel(&daddr, sizeof(daddr),
						    skb->head + skb->network_header +
							offsetof(struct iphdr, daddr)))
			return;
		service = ll_service_v4(daddr);
		if (service)
			ll_sent(skb, dev, sk, service, 4, target_netns, all_netns);
	} else if (skb->protocol == bpf_htons(LL_ETH_P_IPV6)) {
		a[0] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[0];
		a[1] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[1];
		a[2] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[2];
		a[3] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[3];
		if (!(a[0] | a[1] | a[2] | a[3]) &&
		    bpf_probe_read_kernel(a, sizeof(a),
					  skb->head + skb->network_header +
					      offsetof(struct ipv6hdr, daddr)))
			return;
		service = ll_service_v6(a);
		if (service)
			ll_sent(skb, dev, sk, service, 6, target_netns, all_netns);
	}
}

#endif
