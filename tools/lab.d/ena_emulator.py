#!/usr/bin/env python3
"""The lab's ENA counter emulator (`tools/lab emulator start`).

    ena_emulator.py COUNTERS_FILE STATUS_FILE OUT_DEV IN_DEV PPS_DEV

Runs inside the lab's hv namespace, where the shapers live. A guest on EC2 never
sees the hypervisor's shaper, only the ENA allowance counters of `ethtool -S`;
this program gives the lab's broker the same view. Every 100 ms it reads hv's
root qdiscs (`tc -s -j qdisc show`), hv's conntrack state and the lab's nftables
rule, and atomically replaces COUNTERS_FILE with the text `ethtool -S b0` prints
on an ENA device. STATUS_FILE gets a JSON line of its own health (samples, read
failures, late ticks, resets). SIGUSR1 zeroes the counters (a driver reset),
SIGTERM stops it.

ENA counts the packets the shaper "queued or dropped"; tbf's overlimits is not
that, so per period and per shaping qdisc it counts the new drops plus every
packet sent in the period when the queue stood at both ends of it or dropped in
it (docs/lab.md explains why both ends). That rule is ena_rule.awk beside this
file, run by awk once per period for every qdisc: the kernel matrix guest
(tools/kernels.d/ena-emulator) has no python and runs the same file. OUT_DEV's qdisc feeds
bw_out_allowance_exceeded, IN_DEV's bw_in_allowance_exceeded, PPS_DEV's (the
shared pps shaper) pps_allowance_exceeded; the linklocal_limit scenario's nftables rule
(link-local packets over 1,024 a second, dropped at hv's input) linklocal_allowance_exceeded.

The pure parts (parsing tc, /proc and nft output, the accounting, the file
format) are functions tested by test_ena_emulator.py without namespaces.
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time

PERIOD = 0.1
# Gauge reported when the hv namespace has no conntrack table to measure.
CONNTRACK_AVAILABLE_DEFAULT = 2_000_000


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} emulator: {msg}", file=sys.stderr, flush=True)


def parse_root_qdiscs(text):
    """Root qdisc stats per device from the JSON of `tc -s -j qdisc show`. A device
    without a root shaper (none, or `noqueue`) is absent: it counts nothing."""
    roots = {}
    for q in json.loads(text):
        if q.get("root") and q.get("kind") not in ("noqueue", None):
            roots[q["dev"]] = q
    return roots


def root_qdiscs():
    """Root qdisc stats per device from one `tc -s -j qdisc show` call."""
    out = subprocess.run(["tc", "-s", "-j", "qdisc", "show"], capture_output=True,
                         text=True, timeout=2, check=True).stdout
    return parse_root_qdiscs(out)


def dev_stat(dev, name):
    try:
        with open(f"/sys/class/net/{dev}/statistics/{name}") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def parse_conntrack_drops(text):
    """Sum of drop + early_drop + insert_failed over the CPUs of /proc/net/stat/nf_conntrack
    (a header row, then one row of hex columns per CPU)."""
    rows = [line.split() for line in text.splitlines()]
    if not rows:
        return 0
    head = rows[0]
    cols = [head.index(c) for c in ("drop", "early_drop", "insert_failed") if c in head]
    return sum(int(r[i], 16) for r in rows[1:] for i in cols)


def conntrack_drops():
    """Conntrack drops in this namespace, 0 without a conntrack table."""
    try:
        with open("/proc/net/stat/nf_conntrack") as f:
            text = f.read()
    except OSError:
        return 0
    return parse_conntrack_drops(text)


def current_scenario(lab_dir):
    """The scenario `tools/lab shape` installed last, "" when none."""
    try:
        with open(os.path.join(lab_dir, "scenario")) as f:
            return f.read().strip()
    except OSError:
        return ""


def parse_ct_count_rule(text):
    """(N, packets dropped) of the first `ct count over N ... counter` rule in the JSON of
    `nft -j list table inet lab_ct`, or None when there is no such rule."""
    for item in json.loads(text).get("nftables", []):
        exprs = item.get("rule", {}).get("expr", [])
        limit = next((e["ct count"]["val"] for e in exprs if "ct count" in e), None)
        dropped = next((e["counter"]["packets"] for e in exprs if "counter" in e), None)
        if limit is not None and dropped is not None:
            return limit, dropped
    return None


def conntrack_limit(scenario):
    """(limit, packets dropped, entries available) of the conntrack_limit scenario's
    `ct count over N` rule in table inet lab_ct, or None when that scenario is not installed
    (`nft` is only asked then: one process per period is enough for tc)."""
    if scenario != "conntrack_limit":
        return None
    out = subprocess.run(["nft", "-j", "list", "table", "inet", "lab_ct"], capture_output=True,
                         text=True, timeout=2)
    if out.returncode != 0:
        return None
    rule = parse_ct_count_rule(out.stdout)
    if rule is None:
        return None
    limit, dropped = rule
    return limit, dropped, max(limit - conntrack_count(), 0)


def parse_limit_rule(text):
    """Packets dropped by the first `limit rate over ... counter drop` rule in the JSON of
    `nft -j list table inet lab_ll`, or None when there is no such rule."""
    for item in json.loads(text).get("nftables", []):
        exprs = item.get("rule", {}).get("expr", [])
        over = any(e.get("limit", {}).get("inv") for e in exprs if isinstance(e, dict))
        dropped = next((e["counter"]["packets"] for e in exprs if "counter" in e), None)
        if over and dropped is not None:
            return dropped
    return None


def linklocal_dropped(scenario):
    """Packets the linklocal_limit scenario's rule (table inet lab_ll: link-local packets
    over the limit, dropped at hv's input) dropped, or None when that scenario is not
    installed."""
    if scenario != "linklocal_limit":
        return None
    out = subprocess.run(["nft", "-j", "list", "table", "inet", "lab_ll"], capture_output=True,
                         text=True, timeout=2)
    if out.returncode != 0:
        return None
    return parse_limit_rule(out.stdout)


NETLINK_NETFILTER = 12
CT_GET_DUMP = (1 << 8) | 1  # NFNL_SUBSYS_CTNETLINK << 8 | IPCTNL_MSG_CT_GET
NLM_F_REQUEST_DUMP = 0x1 | 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
CTA_PROTOINFO, CTA_PROTOINFO_TCP, CTA_PROTOINFO_TCP_STATE = 4, 1, 1
TCP_CONNTRACK_TIME_WAIT, TCP_CONNTRACK_CLOSE = 7, 8


def nl_attrs(buf, off, end):
    """(type, payload offset, payload end) of each netlink attribute in buf[off:end]."""
    while off + 4 <= end:
        ln, typ = struct.unpack_from("=HH", buf, off)
        if ln < 4:
            break
        yield typ & 0x3FFF, off + 4, off + ln
        off += (ln + 3) & ~3


def tcp_state(buf, off, end):
    """The TCP conntrack state in a conntrack entry's attributes, None when not TCP."""
    for t, o, e in nl_attrs(buf, off, end):
        if t == CTA_PROTOINFO:
            for t2, o2, e2 in nl_attrs(buf, o, e):
                if t2 == CTA_PROTOINFO_TCP:
                    for t3, o3, _ in nl_attrs(buf, o2, e2):
                        if t3 == CTA_PROTOINFO_TCP_STATE:
                            return buf[o3]
    return None


def count_open_entries(buf):
    """(entries `ct count` counts, dump finished) in one recv() of a ctnetlink dump: every
    entry but TCP in TIME_WAIT or CLOSE. Raises OSError on a netlink error message."""
    count = 0
    off = 0
    while off + 16 <= len(buf):
        ln, typ = struct.unpack_from("=IH", buf, off)
        if typ == NLMSG_DONE:
            return count, True
        if typ == NLMSG_ERROR:
            err = struct.unpack_from("=i", buf, off + 16)[0]
            raise OSError(-err, f"ctnetlink dump: {os.strerror(-err)}")
        # nlmsghdr (16) + nfgenmsg (4), then the entry's attributes.
        if tcp_state(buf, off + 20, off + ln) not in (TCP_CONNTRACK_TIME_WAIT,
                                                      TCP_CONNTRACK_CLOSE):
            count += 1
        off += (ln + 3) & ~3
    return count, False


def conntrack_count():
    """Connections in this namespace's conntrack table that `ct count` counts: every entry
    but TCP in TIME_WAIT or CLOSE (nf_conncount's already_closed). A ctnetlink dump, as
    `conntrack -L` does; nf_conntrack_count would also count the closed ones."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    try:
        s.settimeout(2)
        body = struct.pack("=BBH", socket.AF_INET, 0, 0)  # nfgenmsg: family, version, res_id
        s.send(struct.pack("=IHHII", 16 + len(body), CT_GET_DUMP, NLM_F_REQUEST_DUMP, 1, 0) + body)
        count = 0
        while True:
            n, done = count_open_entries(s.recv(1 << 20))
            count += n
            if done:
                return count
    finally:
        s.close()


def conntrack_available():
    try:
        with open("/proc/sys/net/netfilter/nf_conntrack_max") as f:
            mx = int(f.read())
        with open("/proc/sys/net/netfilter/nf_conntrack_count") as f:
            return max(mx - int(f.read()), 0)
    except (OSError, ValueError):
        return CONNTRACK_AVAILABLE_DEFAULT


# The counting rule itself is tools/lab.d/ena_rule.awk, shared with the kernel matrix guest's
# emulator (tools/kernels.d/ena-emulator), which has no python: one rule, run by awk in both.
RULE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ena_rule.awk")


def rule_increments(lines, awk="awk"):
    """The rule's increment for each input line (ena_rule.awk describes the fields), in one awk
    run: an emulator gives all its qdiscs of a period at once."""
    if not lines:
        return []
    out = subprocess.run([awk, "-f", RULE], input="".join(line + "\n" for line in lines),
                         capture_output=True, text=True, timeout=2, check=True).stdout
    incs = [int(v) for v in out.split()]
    if len(incs) != len(lines):
        raise ValueError(f"ena_rule.awk gave {len(incs)} values for {len(lines)} lines")
    return incs


class Direction:
    """Queued-or-dropped accounting for one shaping qdisc (hv egress device): the previous
    sample and the count; the rule (ena_rule.awk) decides each period's increment."""

    def __init__(self, dev):
        self.dev = dev
        self.prev = None  # (handle, packets, drops, backlog) of the last sample
        self.count = 0

    def period(self, roots, first, drops_only=False):
        """Takes this period's sample; returns the rule's input line for the period, None when
        there is nothing to count (the first sample, or no shaping qdisc on the device)."""
        q = roots.get(self.dev)
        if q is None:
            self.prev = None
            return None
        cur = (q.get("handle") or "?", q.get("packets", 0), q.get("drops", 0),
               q.get("backlog", 0) + q.get("qlen", 0))
        prev = self.prev
        self.prev = cur
        if first:
            return None  # counters start at emulator start
        if prev is None:
            prev = ("-", 0, 0, 0)  # a new qdisc appeared during the period
        return " ".join(str(v) for v in prev + cur + (1 if drops_only else 0,))

    def sample(self, roots, first, drops_only=False):
        """One period of this qdisc alone (Emulator.sample_shapers batches its three)."""
        line = self.period(roots, first, drops_only)
        if line is not None:
            self.count += rule_increments([line])[0]


class Accumulator:
    """A cumulative count from a raw counter that can restart at 0 (a rule re-created)."""

    def __init__(self):
        self.prev = None
        self.count = 0

    def sample(self, cur, first):
        if cur is None:
            self.prev = None
            return
        if not first:
            self.count += cur - self.prev if self.prev is not None and cur >= self.prev else cur
        self.prev = cur


def ena_stats(bw_in, bw_out, pps, conntrack_exceeded, conntrack_avail, rel, samples, writes,
              linklocal=0):
    """The (name, value) pairs `ethtool -S` prints on an ENA device, in its order: the
    allowance counters among the ordinary ENA stats, so a parser must find them by name.
    `rel` holds hv's device and conntrack counters since emulator start (or reset)."""
    return [
        ("tx_timeout", 0), ("suspend", 0), ("resume", 0), ("wd_expired", 0),
        ("interface_up", 1), ("interface_down", 0), ("admin_q_pause", 0),
        ("bw_in_allowance_exceeded", bw_in),
        ("bw_out_allowance_exceeded", bw_out),
        ("pps_allowance_exceeded", pps),
        ("conntrack_allowance_exceeded", conntrack_exceeded),
        ("linklocal_allowance_exceeded", linklocal),
        ("conntrack_allowance_available", conntrack_avail),
        ("queue_0_tx_cnt", rel["q_tx_cnt"]), ("queue_0_tx_bytes", rel["q_tx_bytes"]),
        ("queue_0_tx_queue_stop", 0), ("queue_0_tx_queue_wakeup", 0),
        ("queue_0_tx_dma_mapping_err", 0), ("queue_0_tx_linearize", 0),
        ("queue_0_tx_linearize_failed", 0), ("queue_0_tx_napi_comp", samples),
        ("queue_0_tx_tx_poll", samples), ("queue_0_tx_doorbells", rel["q_tx_cnt"]),
        ("queue_0_tx_prepare_ctx_err", 0), ("queue_0_tx_bad_req_id", 0),
        ("queue_0_tx_llq_buffer_copy", 0), ("queue_0_tx_missed_tx", 0),
        ("queue_0_tx_unmask_interrupt", samples),
        ("queue_0_rx_cnt", rel["q_rx_cnt"]), ("queue_0_rx_bytes", rel["q_rx_bytes"]),
        ("queue_0_rx_rx_copybreak_pkt", 0), ("queue_0_rx_csum_good", rel["q_rx_cnt"]),
        ("queue_0_rx_refil_partial", 0), ("queue_0_rx_csum_bad", 0),
        ("queue_0_rx_page_alloc_fail", 0), ("queue_0_rx_skb_alloc_fail", 0),
        ("queue_0_rx_dma_mapping_err", 0), ("queue_0_rx_bad_desc_num", 0),
        ("queue_0_rx_bad_req_id", 0), ("queue_0_rx_empty_rx_ring", 0),
        ("queue_0_rx_csum_unchecked", 0), ("queue_0_rx_xdp_aborted", 0),
        ("queue_0_rx_xdp_drop", 0), ("queue_0_rx_xdp_pass", 0), ("queue_0_rx_xdp_tx", 0),
        ("queue_0_rx_xdp_invalid", 0), ("queue_0_rx_xdp_redirect", 0),
        ("ena_admin_q_aborted_cmd", 0), ("ena_admin_q_submitted_cmd", writes),
        ("ena_admin_q_completed_cmd", writes), ("ena_admin_q_out_of_space", 0),
        ("ena_admin_q_no_completion", 0),
    ]


def ethtool_text(stats):
    """`ethtool -S` text: a header line, then `     name: value` per stat."""
    return "NIC statistics:\n" + "".join(f"     {k}: {v}\n" for k, v in stats)


def write_atomically(path, text):
    """Replace `path` in one rename, so a reader never sees a half-written file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


class Emulator:
    """The counters of one lab: the shaping qdiscs' accounting, the conntrack rule's drops,
    and hv's device counters relative to emulator start (or the last reset)."""

    def __init__(self, out_path, status_path, out_dev, in_dev, pps_dev):
        self.out_path = out_path
        self.status_path = status_path
        self.lab_dir = os.path.dirname(status_path)
        self.in_dev = in_dev
        self.out_dir = Direction(out_dev)
        self.in_dir = Direction(in_dev)
        # The pps shaper (ifb fed by both directions): its queued-or-dropped packets are
        # pps_allowance_exceeded, never bw_*.
        self.pps_dir = Direction(pps_dev)
        self.ct_dropped = Accumulator()
        # linklocal_allowance_exceeded: the linklocal_limit rule's drops.
        self.ll_dropped = Accumulator()
        # Base values so every counter is cumulative from emulator start (or the last reset).
        self.base = {}
        self.reset_requested = False
        self.stopping = False
        self.stats = {"samples": 0, "tc_failures": 0, "rule_failures": 0, "ct_failures": 0,
                      "late_ticks": 0, "resets": 0, "writes": 0}

    def raw_counters(self):
        return {
            "q_tx_cnt": dev_stat(self.in_dev, "rx_packets"),   # what the broker sent arrives on hb
            "q_tx_bytes": dev_stat(self.in_dev, "rx_bytes"),
            "q_rx_cnt": dev_stat(self.in_dev, "tx_packets"),   # what hv delivers to the broker
            "q_rx_bytes": dev_stat(self.in_dev, "tx_bytes"),
            "conntrack": conntrack_drops(),
        }

    def stats_for(self, raw, ct_state, conntrack_avail):
        """The ENA stats from this period's raw counters and conntrack rule state
        (`conntrack_avail` is called only when no conntrack_limit rule was read)."""
        rel = {k: v - self.base.get(k, 0) for k, v in raw.items()}
        return ena_stats(
            bw_in=self.in_dir.count,
            bw_out=self.out_dir.count,
            pps=self.pps_dir.count,
            conntrack_exceeded=max(rel["conntrack"], 0) + self.ct_dropped.count,
            conntrack_avail=conntrack_avail() if ct_state is None else ct_state[2],
            rel=rel,
            samples=self.stats["samples"],
            writes=self.stats["writes"],
            linklocal=self.ll_dropped.count,
        )

    def write_counters(self, raw, ct_state, conntrack_avail=conntrack_available):
        write_atomically(self.out_path,
                         ethtool_text(self.stats_for(raw, ct_state, conntrack_avail)))
        self.stats["writes"] += 1

    def write_status(self):
        tmp = f"{self.status_path}.tmp"
        with open(tmp, "w") as f:
            json.dump(dict(self.stats, bw_out=self.out_dir.count, bw_in=self.in_dir.count,
                           pps=self.pps_dir.count, conntrack_limit_dropped=self.ct_dropped.count,
                           linklocal_dropped=self.ll_dropped.count,
                           pid=os.getpid()), f)
        os.replace(tmp, self.status_path)

    def sample_shapers(self, roots, scenario, first):
        """Account one period of the shaping qdiscs (`roots`, None when tc failed)."""
        if roots is None:
            return
        # A hard cap is counted like a policer (ena_rule.awk); the pps shaper never is.
        drops_only = scenario == "hard_cap"
        dirs = [(self.out_dir, drops_only), (self.in_dir, drops_only), (self.pps_dir, False)]
        lines = [(d, d.period(roots, first, only)) for d, only in dirs]
        lines = [(d, line) for d, line in lines if line is not None]
        for (d, _), inc in zip(lines, rule_increments([line for _, line in lines])):
            d.count += inc
        self.stats["samples"] += 1

    def reset(self, raw):
        """A driver reset: every counter restarts at 0."""
        self.out_dir.count = self.in_dir.count = self.pps_dir.count = 0
        self.ct_dropped.count = 0
        self.ll_dropped.count = 0
        self.base = raw
        self.stats["resets"] += 1

    def run(self):
        first = True
        ct_state = None  # (limit, dropped, available) of the last good conntrack limit read
        next_tick = time.monotonic()
        while not self.stopping:
            try:
                roots = root_qdiscs()
            except (subprocess.SubprocessError, OSError, ValueError) as e:
                self.stats["tc_failures"] += 1
                log(f"tc read failed ({e}); period skipped")
                roots = None
            # Read once per period: it decides what is counted and what is asked.
            scenario = current_scenario(self.lab_dir)
            try:
                self.sample_shapers(roots, scenario, first)
            except (subprocess.SubprocessError, OSError, ValueError) as e:
                # The period's increments are lost (the samples were taken): the counters
                # undercount one period rather than the emulator stopping.
                self.stats["rule_failures"] += 1
                log(f"ena_rule.awk failed ({e}); period not counted")
            try:
                ct_state = conntrack_limit(scenario)
            except (subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
                # ct_state keeps the last good read: the gauge holds, drops are caught up
                # next time.
                self.stats["ct_failures"] += 1
                log(f"conntrack limit read failed ({e}); not sampled this period")
            else:
                self.ct_dropped.sample(None if ct_state is None else ct_state[1], first)
            try:
                self.ll_dropped.sample(linklocal_dropped(scenario), first)
            except (subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
                self.stats["ct_failures"] += 1
                log(f"link-local limit read failed ({e}); not sampled this period")
            raw = self.raw_counters()
            if first:
                self.base = raw
                first = False
            if self.reset_requested:
                self.reset_requested = False
                self.reset(raw)
                log("counters reset")
            self.write_counters(raw, ct_state)
            self.write_status()
            next_tick += PERIOD
            delay = next_tick - time.monotonic()
            if delay < 0:
                self.stats["late_ticks"] += 1
                next_tick = time.monotonic()
            else:
                time.sleep(delay)
        log("stopped")


def main(argv):
    if len(argv) != 5:
        print("usage: ena_emulator.py COUNTERS_FILE STATUS_FILE OUT_DEV IN_DEV PPS_DEV",
              file=sys.stderr)
        return 2
    emu = Emulator(*argv)

    def on_usr1(*_):
        emu.reset_requested = True

    def on_term(*_):
        emu.stopping = True

    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    emu.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
