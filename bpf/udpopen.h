/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The one definition of the kernel/user ABI of udpopen.bpf.h (new UDP
 * sockets, by owner), a part of flows.bpf.c. The Rust loader
 * never re-declares these structs: libbpf-cargo generates them from
 * flows.bpf.o's BTF (see the `_abi_uo_*` globals in udpopen.bpf.h).
 */
#ifndef THROTTLESCOPE_UDPOPEN_H
#define THROTTLESCOPE_UDPOPEN_H

/* Owners (namespace, process, cgroup, family, protocol) kept at once: a hash of 24-byte keys
 * and 40-byte values, 4096 of them ~0.5 MiB with the hash's overhead. User
 * space deletes an owner's entry once it made no socket for a whole interval
 * (its last growth already reported), so the map holds the owners of about
 * one interval. A socket made by an owner that finds the map full is counted
 * in UO_H_MAP_FULL: in the interval's total, in no owner. */
#define UO_OWNERS 4096

/* Indexes into the per-CPU `uo_health` array. Every one is shown to the user. */
enum uo_health_counter {
	UO_H_PORTS = 0,         /* UDP sockets made in an observed namespace (the program's events) */
	UO_H_MAP_FULL = 1,      /* of those, sockets whose owner found the map full: not attributed */
	UO_H_ICMP = 2,          /* ICMP sockets (ping, raw ICMP) made in an observed namespace */
	UO_H_ICMP_MAP_FULL = 3, /* of those, sockets whose owner found the map full */
	UO_H_MAX,
};

/* struct uo_key's proto: the protocol family of the sockets counted. */
enum uo_proto {
	UO_PROTO_UDP = 0,  /* UDP and UDP-Lite */
	UO_PROTO_ICMP = 1, /* ICMP and ICMPv6: datagram (ping) and raw sockets */
};

/* The bit of flows.bpf.c's `test_reject` that rejects on_udp_socket (tests
 * only, THROTTLESCOPE_TEST_FAIL_PROGRAM): past every ts_health_counter. */
#define UO_TEST_REJECT_BIT 31

struct uo_key {
	__u64 cgroup_id; /* cgroup v2 id of the task that made the socket */
	__u32 tgid;      /* its process */
	__u32 netns;     /* network namespace inode of the socket (the task's) */
	__u8 family;     /* 4 or 6: the socket's (an IPv6 socket may send IPv4) */
	__u8 proto;      /* enum uo_proto */
	__u8 _pad[6];
};

struct uo_value {
	__u64 ports;        /* sockets made (a UDP one a new local port once it sends, an ICMP
			     * one a new echo identifier) */
	__u64 last_jiffies; /* bpf_jiffies64 of the latest */
	char comm[16];      /* the process's name (its group leader's comm) when first seen */
};

#endif
