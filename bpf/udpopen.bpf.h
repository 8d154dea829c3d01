/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * New UDP and ICMP sockets, by owner: the new UDP 5-tuples and ICMP echo
 * flows the hypervisor's connection tracking allowance counts
 * (docs/verdicts.md, "Who fills the connection table"). A resolver that
 * opens a socket per query (glibc's does, per lookup) makes a new source
 * port, so a new tracked flow, per query: a DNS retry storm fills the
 * table this way. A ping is a socket too (an ICMP datagram socket, or a
 * raw one when run as root), and its echo identifier a new tracked flow:
 * a health checker pinging in a loop is the ICMP case. Included by
 * flows.bpf.c: its namespace filter and its test switch apply.
 *
 * The hook: cgroup/sock_create (BPF_CGROUP_INET_SOCK_CREATE), attached to
 * the root of the cgroup v2 hierarchy, so that it runs in inet_create() for
 * every IPv4 and IPv6 socket any process makes, once per socket, never per
 * packet: a busy UDP sender pays nothing (docs/performance.md). It exists
 * on every kernel since 4.10 and on every architecture, needs no symbol to
 * trace and no BPF trampoline. Better in principle is where a UDP socket
 * takes its local port, udp_lib_get_port() (bind, or autobind on the first
 * connect or sendto), but that is a function, not a tracepoint: reached by
 * fentry/fexit (BPF trampolines) or a kprobe, and this lab's 6.18 VM has
 * neither (fentry/fexit refused with EPERM at load, CONFIG_KPROBES off),
 * where raw tracepoints and cgroup programs load; no tracepoint marks a UDP
 * port (sock:inet_sock_set_state is TCP's, DCCP's and SCTP's). What that
 * costs: a UDP socket made and closed without sending is counted (rare),
 * and one socket that sends to many peers from one port is one here, as
 * many flows as peers in the table.
 *
 * The program must let every socket be made: it returns 1 on every path
 * (0 would refuse the socket(2) call). Where it cannot be attached (no
 * cgroup v2 mount, a policy), the program is left out and the rest of the
 * probes run (src/collect/probes/flows.rs, optional).
 *
 * At that moment the task is the one calling socket(2), so the owner is
 * `current`: its process, its cgroup, its group leader's name, as
 * flows.bpf.c's on_tcp_sendmsg_locked names a flow's owner; the socket's
 * namespace is the task's (inet_create makes it there).
 */
#ifndef THROTTLESCOPE_UDPOPEN_BPF_H
#define THROTTLESCOPE_UDPOPEN_BPF_H

#include "udpopen.h"

struct uo_key _abi_uo_key = {};
struct uo_value _abi_uo_value = {};
enum uo_health_counter _abi_uo_health_counter = UO_H_MAX;
enum uo_proto _abi_uo_proto = UO_PROTO_UDP;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, UO_OWNERS);
	__type(key, struct uo_key);
	__type(value, struct uo_value);
} uo_owners SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, UO_H_MAX);
	__type(key, __u32);
	__type(value, __u64);
} uo_health SEC(".maps");

#define UO_IPPROTO_ICMP 1
#define UO_IPPROTO_UDP 17
#define UO_IPPROTO_ICMPV6 58
#define UO_IPPROTO_UDPLITE 136

SEC("cgroup/sock_create")
int on_udp_socket(struct bpf_sock *ctx)
{
	struct uo_value init = {}, *v;
	struct uo_key key = {};
	struct task_struct *task;
	__u32 netns;

	TEST_REJECT(test_reject, UO_TEST_REJECT_BIT);
	if (ctx->protocol == UO_IPPROTO_UDP || ctx->protocol == UO_IPPROTO_UDPLITE)
		key.proto = UO_PROTO_UDP;
	else if (ctx->protocol == UO_IPPROTO_ICMP || ctx->protocol == UO_IPPROTO_ICMPV6)
		key.proto = UO_PROTO_ICMP;
	else
		return 1;
	task = (struct task_struct *)bpf_get_current_task();
	netns = BPF_CORE_READ(task, nsproxy, net_ns, ns.inum);
	if (!NETNS_OBSERVED(netns, target_netns, all_netns))
		return 1;
	health_inc(uo_health, key.proto == UO_PROTO_ICMP ? UO_H_ICMP : UO_H_PORTS);
	key.cgroup_id = bpf_get_current_cgroup_id();
	key.tgid = bpf_get_current_pid_tgid() >> 32;
	key.netns = netns;
	key.family = ctx->family == AF_INET6 ? 6 : 4;
	v = bpf_map_lookup_elem(&uo_owners, &key);
	if (!v) {
		BPF_CORE_READ_STR_INTO(&init.comm, task, group_leader, comm);
		v = map_lookup_or_init(&uo_owners, &key, &init);
		if (!v) {
			health_inc(uo_health, key.proto == UO_PROTO_ICMP ? UO_H_ICMP_MAP_FULL
									 : UO_H_MAP_FULL);
			return 1;
		}
	}
	__sync_fetch_and_add(&v->ports, 1);
	v->last_jiffies = bpf_jiffies64();
	return 1;
}

#endif
