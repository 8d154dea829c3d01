/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Helpers shared by flows.bpf.c and hostq.bpf.c. Include it after vmlinux.h
 * and libbpf's bpf_helpers.h and bpf_core_read.h.
 *
 * Every helper is `static __always_inline` (or a macro), so a use compiles
 * to the code that was written in place before this header, with no
 * BPF-to-BPF call on the hot paths: when it was introduced, flows.bpf.c's
 * programs came out instruction for instruction the same.
 *
 * The helpers name no map or global of either object: each object has its own
 * health map and its own `.rodata` filter (the loader sets them separately),
 * so those are parameters.
 */
#ifndef THROTTLESCOPE_COMMON_BPF_H
#define THROTTLESCOPE_COMMON_BPF_H

/*
 * TEST ONLY (THROTTLESCOPE_TEST_FAIL_PROGRAM): when bit `bit` of `mask` (the
 * object's `const volatile __u32 test_reject`) is set, the program loads from
 * a scalar, an access the verifier rejects, as an older kernel would reject a
 * program it cannot run. `mask` is 0 outside tests, and the verifier prunes the
 * branch at load. A macro, not a function: it returns from the program.
 */
#define TEST_REJECT(mask, bit)                                                 \
	do {                                                                   \
		if ((mask) & (1U << (bit)))                                    \
			return *(volatile int *)(long)bpf_ktime_get_ns();      \
	} while (0)

/*
 * A field of a kernel object, read one of two ways, chosen by `direct`, a
 * constant at every use (so each inlined copy keeps one way):
 *   direct: a plain load through a BTF pointer (a program's trusted
 *     argument, or a bpf_core_cast() view), which the verifier turns into a
 *     fault-safe load: no helper call;
 *   else: BPF_CORE_READ, a bpf_probe_read_kernel() call per field, for an
 *     address the verifier knows nothing of (the moved-set sweep on kernels
 *     without bpf_rdonly_cast, before 6.2).
 * Both are CO-RE relocated. Where every return costs tens of ns (the
 * "Safe RET" mitigation), a record of ~50 fields was ~2 us of helper calls.
 * `field` is one member path (a.b.c or a[1]), not a chain of pointers.
 */
#define TS_READ(direct, p, field) ((direct) ? (p)->field : BPF_CORE_READ(p, field))
#define TS_READ_BITS(direct, p, field)                                           \
	((direct) ? BPF_CORE_READ_BITFIELD(p, field) : BPF_CORE_READ_BITFIELD_PROBED(p, field))

/*
 * Network namespace inodes. Plain dereferences, not BPF_CORE_READ: `sk` and
 * `dev` are BTF pointers in every program that calls these, so the verifier
 * turns them into direct loads, where BPF_CORE_READ would make two
 * bpf_probe_read_kernel calls. This runs on every event of every namespace
 * (tools/bench measured the helper version of the socket read at ~100 ns
 * over an empty program). CO-RE still relocates the offsets.
 */
static __always_inline __u32 sk_netns(const struct sock *sk)
{
	return sk->__sk_common.skc_net.net->ns.inum;
}

static __always_inline __u32 dev_netns(const struct net_device *dev)
{
	return dev->nd_net.net->ns.inum;
}

/*
 * The namespace filter every program applies first: the object's `all_netns`,
 * or `netns` equal to its `target_netns` (both `const volatile`, set by the
 * loader). A macro, not a function, so that `netns` is evaluated only when
 * `all_netns` is false, as written: a function's argument is computed before
 * its body, and clang then hoisted the namespace loads above the flag test
 * (same instruction count, measured), which the verifier cannot remove under
 * --all-netns as it removes code behind a known `.rodata` value.
 */
#define NETNS_OBSERVED(netns, target_netns, all_netns)                        \
	((all_netns) || (netns) == (target_netns))

/*
 * Adds one to slot `idx` of a __u64 array map (the per-CPU health counters:
 * no atomics needed, user space sums the CPUs). A macro around a function so
 * that the map's value type is checked at compile time: the function takes
 * the map as `void *` (all bpf_map_lookup_elem knows), and a map declared
 * with a narrower value would be written 8 bytes wide (refused by the
 * verifier at load; this refuses it at build).
 */
static __always_inline void counter_inc_u64(void *map, __u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(map, &idx);

	if (v)
		*v += 1;
}

#define health_inc(map, idx)                                                   \
	do {                                                                   \
		_Static_assert(__builtin_types_compatible_p(typeof(*(map).value), \
							    __u64),            \
			       "health_inc: the map's values must be __u64"); \
		counter_inc_u64(&(map), (idx));                                \
	} while (0)

/*
 * The entry under `key`, created from `init` when absent. For hash maps
 * shared by CPUs that may create the same key at once: BPF_NOEXIST so a
 * racing CPU's entry is never overwritten (its -EEXIST is ignored), then a
 * second lookup finds whichever entry won. NULL only when the entry cannot be
 * created (the map is full). On a per-CPU hash `init` fills this CPU's slot
 * and the others start zeroed, so counters are initialised with 0 and then
 * incremented by the caller like any other hit.
 */
static __always_inline void *map_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/*
 * Wire packets (gso segments) in an skb, from its skb_shared_info: at
 * head + end, `end` being an offset on 64-bit kernels (the only targets,
 * build.rs). A gso_segs of 0 counts as 1: the skb is one packet.
 *
 * For a TCP skb just transmitted only: __tcp_transmit_skb() set gso_segs to
 * tcp_skb_pcount() (1, with gso_size 0, for a single segment), so gso_size
 * need not be read. Any other skb (a qdisc's) must check gso_size first; the
 * host-queue probes count theirs with skb_segs() (hostq.bpf.c), from direct
 * loads.
 */
static __always_inline __u32 skb_gso_segs(const struct sk_buff *skb)
{
	struct skb_shared_info *shinfo;
	__u16 segs;

	shinfo = (struct skb_shared_info *)(BPF_CORE_READ(skb, head) + BPF_CORE_READ(skb, end));
	segs = BPF_CORE_READ(shinfo, gso_segs);
	return segs ? segs : 1;
}

#endif
