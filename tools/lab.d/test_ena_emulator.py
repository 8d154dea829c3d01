"""Unit tests of ena_emulator.py's pure logic: no namespaces, no tc, no root.

Run with `tools/lab unittest` or `python3 -m unittest discover -s tools/lab.d`.
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ena_emulator as emu  # noqa: E402

GUEST_EMULATOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels.d",
                              "ena-emulator")
BUSYBOX = shutil.which("busybox")


def qdisc(dev, packets, drops=0, backlog=0, qlen=0, handle="8001:", kind="tbf", root=True):
    """One entry of `tc -s -j qdisc show`, with the fields the emulator reads."""
    return {"kind": kind, "handle": handle, "dev": dev, "root": root, "packets": packets,
            "drops": drops, "backlog": backlog, "qlen": qlen, "overlimits": 0}


class ParseRootQdiscs(unittest.TestCase):
    def test_keeps_root_shapers_only(self):
        text = json.dumps([
            qdisc("hc", 10),
            qdisc("hb", 5, kind="noqueue"),
            qdisc("pp", 7, root=False),
            {"kind": "clsact", "handle": "ffff:", "dev": "hb", "parent": "ffff:fff1"},
        ])
        roots = emu.parse_root_qdiscs(text)
        self.assertEqual(list(roots), ["hc"])
        self.assertEqual(roots["hc"]["packets"], 10)

    def test_bad_json_raises_value_error(self):
        # The main loop counts a tc failure on ValueError and skips the period.
        with self.assertRaises(ValueError):
            emu.parse_root_qdiscs("[{")


class DirectionAccounting(unittest.TestCase):
    def test_first_sample_starts_at_zero(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 1000, drops=5, backlog=3000)}, first=True)
        self.assertEqual(d.count, 0)

    def test_standing_queue_counts_every_packet_sent(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 100, backlog=1500)}, first=True)
        d.sample({"hc": qdisc("hc", 180, backlog=3000)}, first=False)
        self.assertEqual(d.count, 80)

    def test_backlog_at_one_end_only_is_not_queued(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 100, backlog=1500)}, first=True)
        d.sample({"hc": qdisc("hc", 180, backlog=0)}, first=False)
        self.assertEqual(d.count, 0)
        d.sample({"hc": qdisc("hc", 250, backlog=0, qlen=2)}, first=False)
        self.assertEqual(d.count, 0)
        # qlen counts as backlog: both ends now hold packets.
        d.sample({"hc": qdisc("hc", 300, qlen=1)}, first=False)
        self.assertEqual(d.count, 50)

    def test_drops_count_and_make_the_period_queued(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 100)}, first=True)
        d.sample({"hc": qdisc("hc", 160, drops=4)}, first=False)
        self.assertEqual(d.count, 60 + 4)

    def test_drops_only_counts_the_drops(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 100, backlog=10)}, first=True)
        d.sample({"hc": qdisc("hc", 160, drops=4, backlog=10)}, first=False, drops_only=True)
        self.assertEqual(d.count, 4)

    def test_no_qdisc_counts_nothing_and_a_new_one_counts_from_zero(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 100, backlog=10)}, first=True)
        d.sample({}, first=False)
        self.assertEqual(d.count, 0)
        self.assertIsNone(d.prev)
        # A qdisc that appeared during the period: its own counters, from 0.
        d.sample({"hc": qdisc("hc", 30, drops=2, handle="8002:")}, first=False)
        self.assertEqual(d.count, 30 + 2)

    def test_replaced_qdisc_is_counted_from_zero(self):
        d = emu.Direction("hc")
        d.sample({"hc": qdisc("hc", 5000, backlog=10)}, first=True)
        d.sample({"hc": qdisc("hc", 40, backlog=10, handle="8002:")}, first=False)
        # prev reset to (handle, 0, 0, 0): no backlog at the start, no drops.
        self.assertEqual(d.count, 0)
        d.sample({"hc": qdisc("hc", 90, backlog=10, handle="8002:")}, first=False)
        self.assertEqual(d.count, 50)

    def test_other_devices_are_ignored(self):
        d = emu.Direction("hb")
        d.sample({"hc": qdisc("hc", 100, backlog=10)}, first=True)
        d.sample({"hc": qdisc("hc", 900, drops=9, backlog=10)}, first=False)
        self.assertEqual(d.count, 0)


# The rule's own cases, (input line, increment): ena_rule.awk's fields are
# PREV_HANDLE PREV_SENT PREV_DROPS PREV_BACKLOG HANDLE SENT DROPS BACKLOG DROPS_ONLY.
RULE_CASES = [
    ("8001: 100 0 1500 8001: 180 0 3000 0", 80),      # standing queue: every packet sent
    ("8001: 100 0 1500 8001: 180 0 0 0", 0),          # queue at the start only
    ("8001: 100 0 0 8001: 180 0 1500 0", 0),          # queue at the end only
    ("8001: 100 0 0 8001: 160 4 0 0", 64),            # drops: counted, and the period queued
    ("8001: 100 0 10 8001: 160 4 10 1", 4),           # drops only (hard_cap)
    ("8001: 100 0 10 8001: 160 0 10 1", 0),           # drops only, a standing queue, no drop
    ("8001: 5000 0 10 8002: 40 0 10 0", 0),           # replaced: from 0, no queue at its start
    ("8001: 5000 0 10 8002: 30 2 0 0", 32),           # replaced, dropping: all of its counters
    ("8001: 5000 9 10 8001: 40 0 10 0", 0),           # same handle, counters went back: from 0
    ("8001: 50 9 10 8001: 60 3 10 0", 63),            # same handle, drops went back: all 60 + 3
    ("- 0 0 0 8003: 30 2 0 0", 32),                   # a qdisc where there was none
    ("8001: 4000000000 0 1 8001: 4000000100 0 1 0", 100),  # past 32 bits
]


class CountingRule(unittest.TestCase):
    """ena_rule.awk, the one rule both emulators run: under the host's awk (tools/lab) and
    busybox's (the kernel matrix guest)."""

    def check(self, awk):
        lines = [line for line, _ in RULE_CASES]
        self.assertEqual(emu.rule_increments(lines, awk=awk), [inc for _, inc in RULE_CASES])

    def test_host_awk(self):
        self.check("awk")

    @unittest.skipUnless(BUSYBOX, "no busybox")
    def test_busybox_awk(self):
        with tempfile.TemporaryDirectory() as d:
            os.symlink(BUSYBOX, os.path.join(d, "awk"))
            self.check(os.path.join(d, "awk"))

    def test_no_line_no_run(self):
        self.assertEqual(emu.rule_increments([]), [])

    def test_period_lines(self):
        d = emu.Direction("hc")
        self.assertIsNone(d.period({"hc": qdisc("hc", 7, backlog=3)}, first=True))
        self.assertEqual(d.period({"hc": qdisc("hc", 9, drops=1, qlen=2)}, first=False,
                                  drops_only=True), "8001: 7 0 3 8001: 9 1 2 1")
        self.assertIsNone(d.period({}, first=False))
        self.assertEqual(d.period({"hc": qdisc("hc", 4)}, first=False), "- 0 0 0 8001: 4 0 0 0")


def tc_text(handle, sent, drops=0, backlog=0, qlen=0, kind="tbf"):
    """`tc -s qdisc show dev h1` as iproute2 prints it for a root qdisc."""
    return (f"qdisc {kind} {handle} root refcnt 2 rate 20Mbit burst 32Kb lat 800ms \n"
            f" Sent {sent * 1000} bytes {sent} pkt (dropped {drops}, overlimits 0 requeues 0) \n"
            f" backlog {backlog}b {qlen}p requeues 0\n")


# The guest emulator's tc samples, one per period: (handle, sent, drops, backlog, qlen), None
# for a device without a shaper (`noqueue`).
GUEST_SAMPLES = [
    ("8001:", 100, 0, 1500, 1),
    ("8001:", 180, 0, 3000, 2),   # standing queue: +80
    ("8001:", 240, 4, 0, 0),      # drops: +60 +4
    ("8002:", 30, 2, 0, 0),       # replaced, dropping: +32
    ("8002:", 10, 0, 0, 0),       # counters went back: from 0, no queue at the start: 0
    None,                         # no shaper
    ("8003:", 50, 0, 1514, 1),    # appeared: from 0, no queue at the start: 0
    ("8003:", 90, 0, 1514, 1),    # standing queue: +40
]


@unittest.skipUnless(BUSYBOX, "no busybox: the guest's sh and awk")
class GuestEmulator(unittest.TestCase):
    """tools/kernels.d/ena-emulator under busybox sh and awk, as in the guest, against a fake
    tc: it counts what tools/lab's emulator counts for the same samples."""

    def run_guest(self, drops_only):
        with tempfile.TemporaryDirectory() as d:
            for i, smp in enumerate(GUEST_SAMPLES):
                with open(os.path.join(d, f"s{i}"), "w") as f:
                    f.write(tc_text(*smp) if smp else tc_text("0:", 0, kind="noqueue"))
            # Each call prints the next sample, then the last one again (nothing changes).
            # The first call past the samples makes `done`, the next one `after`: the
            # emulator calls tc at the start of a period, after the previous period wrote
            # its file, so once `after` exists the file holds the repeated sample's count
            # (a fixed wait after `done` read the file early on a loaded machine).
            fake = os.path.join(d, "tc")
            with open(fake, "w") as f:
                f.write(f'#!/bin/sh\nn=$(cat {d}/n 2>/dev/null || echo 0)\n'
                        f'if [ -f {d}/s$n ]; then echo $((n + 1)) > {d}/n; cat {d}/s$n; '
                        f'elif [ -f {d}/done ]; then touch {d}/after; '
                        f'cat {d}/s{len(GUEST_SAMPLES) - 1}; '
                        f'else touch {d}/done; cat {d}/s{len(GUEST_SAMPLES) - 1}; fi\n')
            os.chmod(fake, 0o755)
            bindir = os.path.join(d, "bin")
            os.mkdir(bindir)
            for applet in ("sh", "awk", "sleep", "mv", "dirname", "cat", "touch"):
                os.symlink(BUSYBOX, os.path.join(bindir, applet))
            out = os.path.join(d, "ethtool.txt")
            env = dict(os.environ, PATH=bindir, TC=fake)
            args = [BUSYBOX, "sh", GUEST_EMULATOR, "h1", out] + (["--drops-only"] if drops_only
                                                                    else [])
            # A group of its own: the period's tc, awk or sleep must end with it, before the
            # directory they write in is removed.
            p = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
            try:
                deadline = time.monotonic() + 10
                while not os.path.exists(os.path.join(d, "after")):
                    self.assertIsNone(p.poll(), p.stderr.read() if p.poll() is not None else "")
                    self.assertLess(time.monotonic(), deadline, "the guest emulator is stuck")
                    time.sleep(0.05)
                with open(out) as f:
                    text = f.read()
            finally:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
                p.stderr.close()
        return int(re.search(r"bw_out_allowance_exceeded: (\d+)", text).group(1))

    def lab_count(self, drops_only):
        d = emu.Direction("h1")
        for i, smp in enumerate(GUEST_SAMPLES):
            roots = {} if smp is None else {"h1": qdisc("h1", smp[1], drops=smp[2],
                                                       backlog=smp[3], qlen=smp[4],
                                                       handle=smp[0])}
            d.sample(roots, first=i == 0, drops_only=drops_only)
        return d.count

    def test_same_count_as_the_lab(self):
        self.assertEqual(self.lab_count(False), 80 + 64 + 32 + 40)
        self.assertEqual(self.run_guest(False), self.lab_count(False))

    def test_drops_only_same_as_the_lab(self):
        self.assertEqual(self.lab_count(True), 4 + 2)
        self.assertEqual(self.run_guest(True), self.lab_count(True))


class AccumulatorCounts(unittest.TestCase):
    def test_cumulative_across_a_counter_restart(self):
        a = emu.Accumulator()
        a.sample(10, first=True)
        self.assertEqual(a.count, 0)
        a.sample(25, first=False)
        self.assertEqual(a.count, 15)
        a.sample(4, first=False)  # the rule was re-created: its counter restarted
        self.assertEqual(a.count, 19)
        a.sample(None, first=False)  # rule gone
        a.sample(7, first=False)  # back: counted from 0
        self.assertEqual(a.count, 26)


class ProcAndNftParsing(unittest.TestCase):
    def test_conntrack_drops_sums_hex_columns_over_cpus(self):
        text = ("entries clashres found new invalid ignore delete delete_list insert "
                "insert_failed drop early_drop error\n"
                "00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 "
                "00000000 00000001 0000000a 00000002 00000000\n"
                "00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 "
                "00000000 00000000 00000010 00000000 00000000\n")
        # insert_failed 1 + drop 10 + early_drop 2, then drop 16.
        self.assertEqual(emu.parse_conntrack_drops(text), 1 + 10 + 2 + 16)
        self.assertEqual(emu.parse_conntrack_drops(""), 0)

    def test_ct_count_rule(self):
        text = json.dumps({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "inet", "name": "lab_ct"}},
            {"rule": {"expr": [
                {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "new"}},
                {"ct count": {"val": 1000, "inv": True}},
                {"counter": {"packets": 959, "bytes": 57540}},
                {"drop": None},
            ]}},
        ]})
        self.assertEqual(emu.parse_ct_count_rule(text), (1000, 959))
        self.assertIsNone(emu.parse_ct_count_rule(json.dumps({"nftables": []})))

    def test_scenario_file(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(emu.current_scenario(d), "")
            with open(os.path.join(d, "scenario"), "w") as f:
                f.write("conntrack_limit\n")
            self.assertEqual(emu.current_scenario(d), "conntrack_limit")


def nlattr(typ, payload):
    """One netlink attribute, padded to 4 bytes."""
    raw = struct.pack("=HH", 4 + len(payload), typ) + payload
    return raw + b"\0" * (-len(raw) % 4)


def ct_entry(state=None):
    """One ctnetlink message: nlmsghdr, nfgenmsg, then CTA_PROTOINFO/TCP/STATE if a state."""
    attrs = b""
    if state is not None:
        attrs = nlattr(emu.CTA_PROTOINFO | 0x8000, nlattr(
            emu.CTA_PROTOINFO_TCP | 0x8000, nlattr(emu.CTA_PROTOINFO_TCP_STATE, bytes([state]))))
    body = struct.pack("=BBH", 2, 0, 0) + attrs
    return struct.pack("=IHHII", 16 + len(body), 0x100, 2, 1, 0) + body


def nl_done():
    return struct.pack("=IHHII", 20, emu.NLMSG_DONE, 2, 1, 0) + struct.pack("=i", 0)


class CtnetlinkDump(unittest.TestCase):
    ESTABLISHED = 3

    def test_counts_all_but_closed_tcp(self):
        buf = (ct_entry(self.ESTABLISHED) + ct_entry(emu.TCP_CONNTRACK_TIME_WAIT)
               + ct_entry(None) + ct_entry(emu.TCP_CONNTRACK_CLOSE) + ct_entry(self.ESTABLISHED))
        self.assertEqual(emu.count_open_entries(buf), (3, False))
        self.assertEqual(emu.count_open_entries(ct_entry(1) + nl_done()), (1, True))

    def test_tcp_state_found_nested(self):
        msg = ct_entry(emu.TCP_CONNTRACK_TIME_WAIT)
        self.assertEqual(emu.tcp_state(msg, 20, len(msg)), emu.TCP_CONNTRACK_TIME_WAIT)
        msg = ct_entry(None)
        self.assertIsNone(emu.tcp_state(msg, 20, len(msg)))

    def test_error_message_raises(self):
        err = struct.pack("=IHHII", 20, emu.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1)
        with self.assertRaises(OSError) as cm:
            emu.count_open_entries(err)
        self.assertEqual(cm.exception.errno, 1)


RAW = {"q_tx_cnt": 0, "q_tx_bytes": 0, "q_rx_cnt": 0, "q_rx_bytes": 0, "conntrack": 0}
LINE = re.compile(r"^     [a-z0-9_]+: [0-9]+$")


def parse_ethtool(text):
    lines = text.splitlines()
    assert lines[0] == "NIC statistics:", lines[0]
    out = {}
    for line in lines[1:]:
        assert LINE.match(line), line
        k, v = line.strip().split(": ")
        out[k] = int(v)
    return out


class CountersFile(unittest.TestCase):
    def emulator(self, d):
        return emu.Emulator(os.path.join(d, "ethtool-S-b0.txt"), os.path.join(d, "emulator.status"),
                            "hc", "hb", "pp")

    def test_format_is_ethtool_s(self):
        text = emu.ethtool_text([("tx_timeout", 0), ("bw_out_allowance_exceeded", 42)])
        self.assertEqual(text, "NIC statistics:\n     tx_timeout: 0\n"
                               "     bw_out_allowance_exceeded: 42\n")

    def test_linklocal_limit_rule_counter(self):
        # `nft -j list table inet lab_ll` with the linklocal_limit rule (as nft 1.0.6 prints it).
        text = json.dumps({"nftables": [
            {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
            {"table": {"family": "inet", "name": "lab_ll", "handle": 1}},
            {"chain": {"family": "inet", "table": "lab_ll", "name": "input", "handle": 1}},
            {"rule": {"family": "inet", "table": "lab_ll", "chain": "input", "handle": 2,
                      "expr": [{"match": {"op": "==", "left": {"payload": {
                          "protocol": "ip", "field": "daddr"}}, "right": "169.254.169.253"}},
                               {"limit": {"rate": 1024, "burst": 64, "per": "second",
                                          "inv": True}},
                               {"counter": {"packets": 317, "bytes": 25360}},
                               {"drop": None}]}}]})
        self.assertEqual(emu.parse_limit_rule(text), 317)
        # A limit that is not "over" (accepting under the rate) is not the rule.
        self.assertIsNone(emu.parse_limit_rule(text.replace('"inv": true', '"inv": false')))
        self.assertIsNone(emu.parse_limit_rule('{"nftables": []}'))
        self.assertIsNone(emu.linklocal_dropped("pps_limit"))
        stats = dict(emu.ena_stats(bw_in=0, bw_out=0, pps=0, conntrack_exceeded=0,
                                   conntrack_avail=0, rel=dict.fromkeys(
                                       ["q_tx_cnt", "q_tx_bytes", "q_rx_cnt", "q_rx_bytes"], 0),
                                   samples=0, writes=0, linklocal=317))
        self.assertEqual(stats["linklocal_allowance_exceeded"], 317)

    def test_ena_stats_names_and_allowance_values(self):
        rel = {"q_tx_cnt": 11, "q_tx_bytes": 12, "q_rx_cnt": 13, "q_rx_bytes": 14}
        stats = emu.ena_stats(bw_in=1, bw_out=2, pps=3, conntrack_exceeded=4,
                              conntrack_avail=5, rel=rel, samples=6, writes=7)
        names = [k for k, _ in stats]
        self.assertEqual(len(names), 52)
        self.assertEqual(len(set(names)), 52)
        d = dict(stats)
        self.assertEqual((d["bw_in_allowance_exceeded"], d["bw_out_allowance_exceeded"],
                          d["pps_allowance_exceeded"], d["conntrack_allowance_exceeded"],
                          d["conntrack_allowance_available"],
                          d["linklocal_allowance_exceeded"]), (1, 2, 3, 4, 5, 0))
        self.assertEqual((d["queue_0_tx_cnt"], d["queue_0_tx_bytes"], d["queue_0_rx_cnt"],
                          d["queue_0_rx_bytes"]), (11, 12, 13, 14))
        self.assertEqual(d["queue_0_tx_napi_comp"], 6)
        self.assertEqual(d["ena_admin_q_completed_cmd"], 7)
        self.assertEqual(names[0], "tx_timeout")
        self.assertEqual(names[-1], "ena_admin_q_no_completion")

    def test_write_is_atomic_and_parses(self):
        with tempfile.TemporaryDirectory() as d:
            e = self.emulator(d)
            e.sample_shapers({"hc": qdisc("hc", 100, backlog=9)}, "hv_queuing", first=True)
            e.sample_shapers({"hc": qdisc("hc", 300, backlog=9)}, "hv_queuing", first=False)
            e.base = dict(RAW)
            # Without a conntrack_limit rule the gauge comes from hv's table (stubbed).
            e.write_counters(dict(RAW, q_tx_cnt=50, conntrack=3), None, lambda: 2_000_000)
            self.assertEqual(e.stats["writes"], 1)
            self.assertEqual(os.listdir(d), ["ethtool-S-b0.txt"])  # no temp file left
            with open(e.out_path) as f:
                c = parse_ethtool(f.read())
            self.assertEqual(c["bw_out_allowance_exceeded"], 200)
            self.assertEqual(c["bw_in_allowance_exceeded"], 0)
            self.assertEqual(c["conntrack_allowance_exceeded"], 3)
            self.assertEqual(c["conntrack_allowance_available"], 2_000_000)
            self.assertEqual(c["queue_0_tx_cnt"], 50)
            self.assertEqual(c["queue_0_tx_napi_comp"], 2)

    def test_conntrack_rule_state_feeds_the_gauge_and_drops(self):
        with tempfile.TemporaryDirectory() as d:
            e = self.emulator(d)
            e.base = dict(RAW, conntrack=10)
            e.ct_dropped.sample(100, first=True)
            e.ct_dropped.sample(160, first=False)

            def no_table():
                raise AssertionError("the gauge must come from the rule's state")
            c = dict(e.stats_for(dict(RAW, conntrack=12), (1000, 160, 37), no_table))
            self.assertEqual(c["conntrack_allowance_exceeded"], 2 + 60)
            self.assertEqual(c["conntrack_allowance_available"], 37)

    def test_hard_cap_counts_drops_only_and_pps_is_separate(self):
        with tempfile.TemporaryDirectory() as d:
            e = self.emulator(d)
            first = {"hc": qdisc("hc", 0, backlog=5), "pp": qdisc("pp", 0, backlog=5)}
            e.sample_shapers(first, "hard_cap", first=True)
            e.sample_shapers({"hc": qdisc("hc", 500, drops=7, backlog=5),
                              "pp": qdisc("pp", 40, drops=1, backlog=5)}, "hard_cap", first=False)
            self.assertEqual(e.out_dir.count, 7)
            self.assertEqual(e.pps_dir.count, 41)  # the pps shaper is never drops-only
            e.sample_shapers(None, "hard_cap", first=False)  # a failed tc read
            self.assertEqual(e.stats["samples"], 2)

    def test_reset_zeroes_counters_and_rebases(self):
        with tempfile.TemporaryDirectory() as d:
            e = self.emulator(d)
            e.out_dir.count, e.in_dir.count, e.pps_dir.count, e.ct_dropped.count = 1, 2, 3, 4
            e.reset(dict(RAW, q_tx_cnt=500))
            c = dict(e.stats_for(dict(RAW, q_tx_cnt=520), None, lambda: 9))
            self.assertEqual([c["bw_out_allowance_exceeded"], c["bw_in_allowance_exceeded"],
                              c["pps_allowance_exceeded"], c["conntrack_allowance_exceeded"],
                              c["queue_0_tx_cnt"]], [0, 0, 0, 0, 20])
            self.assertEqual(e.stats["resets"], 1)

    def test_status_file(self):
        with tempfile.TemporaryDirectory() as d:
            e = self.emulator(d)
            e.out_dir.count = 12
            e.write_status()
            with open(e.status_path) as f:
                s = json.load(f)
            self.assertEqual((s["bw_out"], s["resets"], s["pid"]), (12, 0, os.getpid()))


if __name__ == "__main__":
    unittest.main()
