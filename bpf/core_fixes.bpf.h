/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where kernels differ, in one place: each helper below hides one change of
 * a kernel structure or tracepoint, named with the release and the commit
 * that made it, so a reader of the programs sees what is read and a reader
 * of this file sees which kernels need what.
 *
 * Every check is CO-RE (a field or type existence, a type match), resolved
 * by libbpf at load time against the running kernel's BTF: the branch the
 * kernel does not need is dead code the verifier never walks. This matters
 * for tracepoint arguments, where reading one the kernel does not pass is a
 * rejection. Include after vmlinux.h, bpf_helpers.h and bpf_core_read.h.
 * All helpers are `static __always_inline`: no BPF-to-BPF call is added.
 */
#ifndef THROTTLESCOPE_CORE_FIXES_BPF_H
#define THROTTLESCOPE_CORE_FIXES_BPF_H

/*
 * 5.16, 0c0a5ef809f9 ("tcp: move inet->rx_dst_ifindex to
 * sk->sk_rx_dst_ifindex"): the interface a socket's segments last arrived
 * on moved from struct inet_sock to struct sock.
 */
struct inet_sock___pre_5_16 {
	int rx_dst_ifindex;
} __attribute__((preserve_access_index));

static __always_inline int sk_rx_ifindex(struct sock *sk, bool direct)
{
	if (bpf_core_field_exists(sk->sk_rx_dst_ifindex))
		return TS_READ(direct, sk, sk_rx_dst_ifindex);
	/* Always a checked read: a plain load past struct sock through a sock
	 * pointer is refused. */
	return BPF_CORE_READ((struct inet_sock___pre_5_16 *)sk, rx_dst_ifindex);
}

/*
 * 7.0, 4b78c9cbd8f1 ("tcp: move tp->chrono_type next tp->chrono_stat[]"):
 * chrono_type was a 2-bit field of struct tcp_sock and became a whole u8.
 * The CO-RE bitfield read (direct or probed: TS_READ_BITS) takes either. A macro, not an inline function:
 * as a function, clang 19 emitted the object's BTF in an order that changed
 * from one build to the next (the same source gave two different objects,
 * and the release's check that both architectures embed the same BPF
 * objects failed).
 */
#define tcp_chrono_type(tp, direct) TS_READ_BITS(direct, tp, chrono_type)

/*
 * 6.2 ("bpf: Add a kfunc for generic type cast"): bpf_rdonly_cast(), which
 * the verifier replaces by a register move, gives a read-only BTF view of a
 * kernel address (bpf_core_cast): plain, fault-safe loads, no helper call.
 * Where the kernel has no such kfunc, libbpf resolves the weak symbol to 0
 * and the verifier drops the branch that casts. Every program asks here:
 * tcp_sock_of below, the moved-set sweep's reads (flows.bpf.c, sweep_one),
 * the transmit queue's qdisc (hostq.bpf.c, tx_qdisc).
 */
#define has_rdonly_cast() bpf_ksym_exists(bpf_rdonly_cast)

/*
 * A tcp_sock view of a socket: from 6.2 the cast above; before it,
 * bpf_skc_to_tcp_sock(), a helper (a call and a return: tens of ns per
 * event on CPUs whose return-stack mitigation makes every return dear). For
 * a socket the tracepoint guarantees is a full TCP one (tcp_probe,
 * tcp_sendmsg_locked): the cast does not check, the helper did. The view is
 * read-only.
 */
static __always_inline struct tcp_sock *tcp_sock_of(struct sock *sk)
{
	if (has_rdonly_cast())
		return bpf_core_cast(sk, struct tcp_sock);
	return bpf_skc_to_tcp_sock(sk);
}

/*
 * 6.17, ad892e912b84 ("tcp: trace retransmit failures in
 * tcp_retransmit_skb"): the tracepoint gained a third argument, `err`, and
 * fires for failed retransmits too (err != 0). Before it, (sk, skb) only,
 * and only retransmits that went out. `ctx` is the tp_btf program's raw
 * context; 0 where the kernel has no `err`.
 */
typedef void (*btf_trace_tcp_retransmit_skb___err)(void *, const struct sock *,
						    const struct sk_buff *, int);

static __always_inline int tcp_retransmit_err(__u64 *ctx)
{
	if (bpf_core_type_matches(btf_trace_tcp_retransmit_skb___err))
		return (int)ctx[2];
	return 0;
}

/*
 * kfree_skb's arguments:
 *   before 5.17  (skb, location);
 *   5.17         + reason: c504e5c2f964 ("net: skb: introduce
 *                kfree_skb_reason()"); 6.1 passes (skb, location, reason);
 *   6.11         + rx_sk: c53795d48ee8 ("net: add rx_sk to trace_kfree_skb").
 * Stand-ins for enum skb_drop_reason, so that nothing here depends on the
 * enumerators of the build host's kernel: a type match on an enum needs every
 * local enumerator to exist in the running kernel, so the prototypes' stand-in
 * holds only the one every kernel with the enum has; SKB_CONSUMED (6.0-era)
 * has its own, used only by value relocation, and is found by name, not by
 * version.
 */
enum skb_drop_reason___proto {
	SKB_DROP_REASON_NOT_SPECIFIED___proto = 2,
};
enum skb_drop_reason___ts {
	SKB_CONSUMED___ts = 1,
};
typedef void (*btf_trace_kfree_skb___reason)(void *, struct sk_buff *, void *,
					     enum skb_drop_reason___proto);
typedef void (*btf_trace_kfree_skb___rx_sk)(void *, struct sk_buff *, void *,
					    enum skb_drop_reason___proto, struct sock *);

/* The drop reason (0 where the kernel passes none) and the receiving socket
 * (NULL where it passes none, or none was known). */
static __always_inline void kfree_skb_args(__u64 *ctx, __u32 *reason, struct sock **rx_sk)
{
	*reason = 0;
	*rx_sk = NULL;
	if (bpf_core_type_matches(btf_trace_kfree_skb___rx_sk)) {
		*reason = (__u32)ctx[2];
		*rx_sk = (struct sock *)ctx[3];
	} else if (bpf_core_type_matches(btf_trace_kfree_skb___reason)) {
		*reason = (__u32)ctx[2];
	}
}

/* Kernels with SKB_CONSUMED traced frees that were not drops with it. */
static __always_inline bool drop_reason_is_consumed(__u32 reason)
{
	return bpf_core_enum_value_exists(enum skb_drop_reason___ts, SKB_CONSUMED___ts) &&
	       reason == bpf_core_enum_value(enum skb_drop_reason___ts, SKB_CONSUMED___ts);
}

/*
 * 5.15, 8520e224f547 ("bpf, cgroups: Fix cgroup v2 fallback on v1/v2 mixed
 * mode"): a socket's cgroup (the one it was made in, sk->sk_cgrp_data) was
 * a u64 holding the cgroup's address, or with bit 0 or 1 set (or 0) the
 * root's; since, a plain `struct cgroup *`. The cgroup v2 id, as
 * bpf_get_current_cgroup_id() gives a task's (its kernfs node id: the
 * directory's inode); 0 where the kernel keeps no socket cgroup
 * (CONFIG_SOCK_CGROUP_DATA unset). Before 5.15, checked reads (the address
 * is a plain number there).
 */
struct sock_cgroup_data___pre_5_15 {
	__u64 val;
} __attribute__((preserve_access_index));

struct sock___pre_5_15 {
	struct sock_cgroup_data___pre_5_15 sk_cgrp_data;
} __attribute__((preserve_access_index));

static __always_inline __u64 sk_cgroup_id(struct sock *sk)
{
	struct sock___pre_5_15 *old = (void *)sk;
	struct cgroup *cg;
	__u64 v;

	if (bpf_core_field_exists(sk->sk_cgrp_data.cgroup)) {
		cg = sk->sk_cgrp_data.cgroup;
		return cg ? cg->kn->id : 0;
	}
	if (!bpf_core_field_exists(old->sk_cgrp_data.val))
		return 0;
	v = BPF_CORE_READ(old, sk_cgrp_data.val);
	if (!v || (v & 3))
		return 1; /* the root cgroup's id */
	return BPF_CORE_READ((struct cgroup *)v, kn, id);
}

/*
 * 5.16, "net: sched: Merge Qdisc::bstats and Qdisc::cpu_bstats data types"
 * (Ahmed S. Darwish): a qdisc's sent bytes became a u64_stats_t in struct
 * gnet_stats_basic_sync; before, a plain __u64 in gnet_stats_basic_packed.
 * The bytes a qdisc has handed on since it was created (what `tc -s qdisc`
 * shows as Sent), as a direct load: on a qdisc that keeps per-CPU stats
 * (TCQ_F_CPUSTATS) they are elsewhere and this reads 0.
 */
struct gnet_stats_basic_packed___pre_5_16 {
	__u64 bytes;
	__u32 packets;
} __attribute__((preserve_access_index));

struct Qdisc___pre_5_16 {
	struct gnet_stats_basic_packed___pre_5_16 bstats;
} __attribute__((preserve_access_index));

static __always_inline __u64 qdisc_bytes_sent(struct Qdisc *q)
{
	if (bpf_core_field_exists(q->bstats.bytes.v))
		return q->bstats.bytes.v.a.a.counter;
	return ((struct Qdisc___pre_5_16 *)q)->bstats.bytes;
}

/* The packets (gso segments) a qdisc has handed on since it was created
 * (what `tc -s qdisc` shows as "Sent ... pkt"), as qdisc_bytes_sent reads
 * the bytes. */
static __always_inline __u64 qdisc_packets_sent(struct Qdisc *q)
{
	if (bpf_core_field_exists(q->bstats.packets.v))
		return q->bstats.packets.v.a.a.counter;
	return ((struct Qdisc___pre_5_16 *)q)->bstats.packets;
}

#endif /* THROTTLESCOPE_CORE_FIXES_BPF_H */
