/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of the kernel/user ABI of linklocal.bpf.c (UDP sent to
 * the instance's link-local services, by sender). The Rust loader never
 * re-declares these structs: libbpf-cargo generates them from this object's
 * BTF (see the `_abi_*` globals in linklocal.bpf.c).
 */
#ifndef THROTTLESCOPE_LINKLOCAL_H
#define THROTTLESCOPE_LINKLOCAL_H

/* Senders (namespace, interface, cgroup, process, service, family) kept at
 * once: a per-CPU hash of 24-byte keys and 40-byte values, 4096 x 40 bytes =
 * 160 KiB per CPU. User space deletes a sender idle for a minute; a new sender that
 * finds the map full is counted in LL_H_MAP_FULL (its packets are lost to the
 * attribution, not to the totals the allowance counters keep). */
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
	LL_H_UDP4_EVENTS = 0, /* UDP over IPv4 skbs to a link-local service (on_dev_queue) */
	LL_H_UDP6_EVENTS,     /* UDP over IPv6 skbs to a link-local service */
	LL_H_MAP_FULL,        /* sends not attributed: a new sender found the map full */
	LL_H_MAX,
};

struct ll_key {
	__u64 cgroup_id; /* cgroup v2 id of the sending task */
	__u32 netns;     /* network namespace inode of the device */
	__u32 ifindex;   /* the device the skb was queued to */
	__u32 tgid;      /* process id */
	__u8 service;    /* enum ll_service */
	__u8 family;     /* 4 or 6: the destination's */
	__u8 _pad[2];
};

struct ll_value {
	__u64 packets; /* wire packets (an skb's GSO segments, else 1) */
	__u64 bytes;   /* skb bytes from the IP header on (skb->len) */
	char comm[16]; /* the process's name (its thread group leader's) */
	__u64 last_jiffies; /* bpf_jiffies64 of the latest send on this CPU */
};

#endif
