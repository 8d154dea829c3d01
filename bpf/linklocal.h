/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of the kernel/user ABI of linklocal.bpf.h (UDP sent to
 * the instance's link-local services, by sending socket), a part of
 * hostq.bpf.c's on_dev_xmit. The Rust loader never re-declares these
 * structs: libbpf-cargo generates them from hostq.bpf.o's BTF (see the
 * `_abi_ll_*` globals in linklocal.bpf.h).
 */
#ifndef THROTTLESCOPE_LINKLOCAL_H
#define THROTTLESCOPE_LINKLOCAL_H

/* Sending sockets (namespace, interface, cgroup, socket, service, family)
 * kept at once: a per-CPU hash of 32-byte keys and 24-byte values, 4096 x 24
 * bytes = 96 KiB per CPU. User space deletes a socket's entry once it sent
 * nothing for a whole interval (its last growth already reported): a
 * resolver that opens a socket per query leaves one entry per query for an
 * interval or two. A new socket that finds the map full is counted in
 * LL_H_MAP_FULL (its packets are lost to the attribution, not to the totals
 * the allowance counters keep). */
#define LL_SENDERS 4096

/* The services, as the key's `service`. */
enum ll_service {
	LL_DNS = 1,      /* 169.254.169.253, fd00:ec2::253, the VPC resolver (base + 2) */
	LL_METADATA = 2, /* 169.254.169.254, fd00:ec2::254 */
	LL_TIME = 3,     /* 169.254.169.123, fd00:ec2::123 */
	LL_OTHER = 4,    /* the rest of 169.254.0.0/16 and fd00:ec2::/32 */
};

/* Indexes into the per-CPU `ll_health` array. Every one is shown to the user. */
enum ll_health_counter {
	LL_H_MAP_FULL = 0, /* sends not attributed: a new socket found the map full */
	LL_H_MAX,
};

struct ll_key {
	__u64 cgroup_id; /* cgroup v2 id of the socket (the one it was made in) */
	__u64 sock_ino;  /* inode of the socket's struct socket (0: none); its
			  * process is found from it in user space, as a flow's */
	__u32 netns;     /* network namespace inode of the device */
	__u32 ifindex;   /* the device the skb was handed to */
	__u8 service;    /* enum ll_service */
	__u8 family;     /* 4 or 6: the destination's */
	__u8 forwarded;  /* 1: forwarded from another namespace (a pod's), the
			  * owner that of its sending socket there when seen
			  * (origin_netns set), none when not (all zero) */
	__u8 _pad;
	__u32 origin_netns; /* the sending socket's namespace, for a forwarded one */
};

/* Datagrams to the services seen leaving a socket in another namespace
 * (--all-netns: a pod's), kept by skb until it leaves through the
 * observer's namespace, forwarded and socketless: a veth hands the same skb
 * on, as do forwarding and NAT. An LRU hash: an skb dropped on the way
 * leaves an entry that newer ones push out; an entry older than
 * LL_ORIGIN_MAX_AGE_NS is not trusted (the skb's memory may be another's). */
#define LL_ORIGINS 4096
#define LL_ORIGIN_MAX_AGE_NS 1000000000ULL

struct ll_origin {
	__u64 cgroup_id; /* the sending socket's, as ll_key's */
	__u64 sock_ino;
	__u64 seen_ns;   /* bpf_ktime_get_ns at the send */
	__u32 netns;     /* the sending socket's device's namespace */
	__u32 _pad;
};

struct ll_value {
	__u64 packets; /* wire packets (an skb's GSO segments, else 1) */
	__u64 bytes;   /* skb bytes from the IP header on (skb->len) */
	__u64 last_jiffies; /* bpf_jiffies64 of the latest send on this CPU */
};

#endif
