"""Unit tests of check.py, the judge of a kernel-matrix guest's serial log: canned logs
in, its table line and FAIL lines out. No qemu, no root.

Run by tools/test, or `python3 -m unittest discover -s tools/kernels.d`.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check.py")
SNMP_HEAD = "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens RetransSegs InErrs"


def snmp_body(retrans):
    return f"{SNMP_HEAD}\nTcp: 1 200 120000 -1 3 {retrans} 0"


def row(verdict, sent=1000, probes=10, waiting=9, busy=500, retrans=0, attached=True,
        seq=None, held=None, since=None, more_programs=()):
    """One `watch --json` interval with the fields check.py reads; held as its own
    verdict since this interval unless told (no seq: its position)."""
    held = {"verdict": held or verdict}
    if since is not None:
        held["since_seq"] = since
    analysis = {} if seq is None else {"seq": seq}
    return json.dumps({
        "health": {"programs": [{"name": "tcp_probe", "attached": True},
                                {"name": "tcp_sendmsg_locked", "attached": attached},
                                *more_programs]},
        "analysis": {**analysis,
                     "interfaces": [{"iface": "b0", "verdict": verdict, "held": held},
                                    {"iface": "lo", "verdict": "idle",
                                     "held": {"verdict": "idle"}}]},
        "flows": [{"delta": {"bytes_sent": sent, "probe_events": probes,
                             "waiting_events": waiting, "busy_us": busy,
                             "retrans_segs": retrans}}],
    })


def scenario(name, rows, retrans_before=100, retrans_after=110, rc=0):
    return "\n".join([
        f"=== SCENARIO {name}", f"=== WATCH_RC {rc}", "=== STDERR",
        "=== SNMP0", snmp_body(retrans_before), "=== SNMP1", snmp_body(retrans_after),
        "=== TC", "qdisc tbf 8001: root", "=== JSON", *rows])


MOVED_SET = "[ok]   flow dump: flows that moved, from the moved set (sweep_moved); every flow once a minute through the socket-storage map iterator"


POD_FLOW = {"local": "10.77.3.2:41000", "peer": "10.77.1.1:5202", "iface": "b0"}


def all_netns(rc=0, dev_xmit=True, flows=(POD_FLOW,)):
    """The guest's `watch --all-netns` sections: its exit and last interval, with the pod's
    flow given b0 unless told."""
    last = json.dumps({"health": {"programs": [{"name": "tcp_probe", "attached": True},
                                               {"name": "dev_xmit", "attached": dev_xmit}]},
                       "flows": list(flows)})
    return "\n".join([f"=== ALLNETNS_RC {rc}", "=== ALLNETNS_ERR",
                      "refused" if rc else "", "=== ALLNETNS", last if rc == 0 else ""])


def per_packet(rc=0, paused=True, again=True, why="bw_out_allowance_exceeded rose on b0"):
    """The guest's `watch --per-packet auto` sections: measured, paused twice, then running
    again with b0's peak once the counter moved, unless told."""
    def row(measured, attached, peak=None, why=why):
        return json.dumps({"health": {"per_packet": {"measured": measured, "attached": attached,
                                                     "why": why}},
                           "interfaces": [{"name": "b0", "tx_peak_bps": peak}]})
    rows = [row(True, not paused), row(not paused, not paused), row(not paused, True),
            row(True, True, 9e7 if again else None)]
    return "\n".join([f"=== PERPACKET_RC {rc}", "=== PERPACKET_ERR", "refused" if rc else "",
                      "=== PERPACKET", *(rows if rc == 0 else [])])


def log(*body, doctor="all programs attached\n" + MOVED_SET, doctor_rc=0, end=True, jail=None,
        allnetns=None, perpacket=None):
    parts = ["boot noise", "=== KERNEL 6.1.0-56-amd64"]
    if jail is not None:
        parts += ["=== JAIL", *jail]
    parts += ["=== VERSION", "throttlescope 0.9.0", "commit abc123", "=== VERSION_RC 0",
              "=== DOCTOR", doctor, f"=== DOCTOR_RC {doctor_rc}", *body,
              all_netns() if allnetns is None else allnetns,
              per_packet() if perpacket is None else perpacket]
    if end:
        parts.append("=== END")
    return "\n".join(parts) + "\n"


def good_observe(**kw):
    # The first interval is the observer's start: not judged. Retransmits 5 + 5 = 10, as
    # RetransSegs went 100 -> 110.
    q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5) for _ in range(2)]
    d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
    return log(scenario("hv_queuing", q), scenario("hv_drop", d), **kw)


class Sections(unittest.TestCase):
    def test_markers_split_the_log_and_nothing_before_the_first_counts(self):
        secs = check.sections("noise\n=== A 1\nx\ny\n=== B\n=== C\nz")
        self.assertEqual(secs, [("A 1", "x\ny"), ("B", ""), ("C", "z")])

    def test_snmp_pairs_the_header_and_values(self):
        self.assertEqual(check.snmp(snmp_body(7))["RetransSegs"], "7")
        self.assertIsNone(check.snmp("Tcp: only a header"))


class Judge(unittest.TestCase):
    def judge(self, text, expect="observe", mode="dynamic"):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "serial.log")
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run([sys.executable, CHECK, path, expect, "6.1", mode],
                               capture_output=True, text=True, timeout=30)
        self.assertEqual(p.stderr, "")
        return p.returncode, p.stdout

    def test_observe_passes_with_the_table_line(self):
        rc, out = self.judge(good_observe())
        self.assertEqual(rc, 0, out)
        cols = out.splitlines()[0].split("\t")
        self.assertEqual(cols[:2], ["6.1", "6.1.0-56-amd64"])
        self.assertIn("programs attached 2/2", cols[2])
        self.assertIn("hv_queuing held 2/2 hypervisor_queuing", cols[3])
        self.assertIn("hv_queuing data waiting 90%", cols[3])
        self.assertEqual(cols[4], "hv_queuing 10/10; hv_drop 10/10")

    def test_all_netns_gives_the_pods_flow_b0(self):
        rc, out = self.judge(good_observe())
        self.assertEqual(rc, 0, out)
        self.assertIn("a pod's flow on b0 (1 of 1)", out)
        for flows, said in [((), "none seen"),
                            (({**POD_FLOW, "iface": None, "unrouted": True},), "['none']"),
                            (({**POD_FLOW, "iface": "pv0"},), "['pv0']")]:
            rc, out = self.judge(good_observe(allnetns=all_netns(flows=flows)))
            self.assertEqual(rc, 1, out)
            self.assertIn(f"the pod's flows on {said}, not b0", out)

    def test_per_packet_auto_must_pause_and_run_again(self):
        rc, out = self.judge(good_observe())
        self.assertEqual(rc, 0, out)
        self.assertIn("--per-packet auto paused 2, ran again from interval 3", out)
        for pp, said in [(per_packet(rc=1), "watch --per-packet auto exit 1: refused"),
                         (per_packet(paused=False), "never paused in 4 intervals"),
                         (per_packet(again=False), "paused from interval 1, never measured again"),
                         (per_packet(why="x; but attaching on_netif_receive again after a pause: "
                                         "Operation not permitted: paused"),
                          "attaching again failed: x; but attaching on_netif_receive")]:
            rc, out = self.judge(good_observe(perpacket=pp))
            self.assertEqual(rc, 1, out)
            self.assertIn(said, out)

    def test_all_netns_must_load_with_dev_xmit_attached(self):
        rc, out = self.judge(good_observe())
        self.assertIn("--all-netns dev_xmit attached", out)
        rc, out = self.judge(good_observe(allnetns=all_netns(rc=1)))
        self.assertEqual(rc, 1, out)
        self.assertIn("watch --all-netns exit 1: refused", out)
        rc, out = self.judge(good_observe(allnetns=all_netns(dev_xmit=False)))
        self.assertEqual(rc, 1, out)
        self.assertIn("dev_xmit not attached", out)

    def test_held_verdicts_below_the_share_fail(self):
        q = [row("free_flow"), row("hypervisor_queuing", retrans=10), row("free_flow"),
             row("free_flow")]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q), scenario("hv_drop", d)))
        self.assertEqual(rc, 1)
        self.assertIn("hv_queuing: held hypervisor_queuing in 1 of 3 busy intervals", out)

    def test_the_held_verdict_is_judged_not_the_intervals_own(self):
        # Every interval judged hypervisor_queuing on its own, but held as
        # free flow (the hold never started): fails.
        q = [row("free_flow", seq=0)] + [row("hypervisor_queuing", retrans=5, seq=s,
                                             held="free_flow", since=0) for s in (1, 2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q), scenario("hv_drop", d)))
        self.assertEqual(rc, 1, out)
        self.assertIn("held hypervisor_queuing in 0 of 2 busy intervals", out)
        self.assertIn("hypervisor_queuing->free_flow", out)

    def test_a_held_onset_dated_back_covers_the_intervals_before_it(self):
        # Intervals 1-3 judged queuing on their own; the hold starts at 3,
        # dated back to 1: all three count, as the report's episode does.
        q = [row("free_flow", seq=0),
             row("hypervisor_queuing", retrans=3, seq=1, held="free_flow", since=0),
             row("hypervisor_queuing", retrans=3, seq=2, held="free_flow", since=0),
             row("hypervisor_queuing", retrans=4, seq=3, since=1),
             row("free_flow", seq=4, held="hypervisor_queuing", since=1)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q), scenario("hv_drop", d)))
        self.assertEqual(rc, 0, out)
        self.assertIn("hv_queuing held 4/4 hypervisor_queuing", out)
        self.assertEqual(check.held_as([json.loads(r) for r in q[1:]], "b0")[0],
                         (1, "hypervisor_queuing", "hypervisor_queuing"))

    def test_retransmits_apart_by_more_than_five_percent_fail(self):
        q = [row("free_flow")] + [row("hypervisor_queuing", retrans=30) for _ in range(2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        # 60 counted per flow, 100 by the kernel: 40% apart.
        rc, out = self.judge(log(scenario("hv_queuing", q, 0, 100), scenario("hv_drop", d)))
        self.assertEqual(rc, 1)
        self.assertIn("hv_queuing: per-flow retransmits 60, RetransSegs 100", out)

    def test_one_retransmit_apart_is_tolerated(self):
        q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5) for _ in range(2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q, 100, 111), scenario("hv_drop", d)))
        self.assertEqual(rc, 0, out)

    def test_too_little_data_waiting_fails(self):
        q = [row("free_flow")] + [row("hypervisor_queuing", waiting=2, retrans=5)
                                  for _ in range(2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q), scenario("hv_drop", d)))
        self.assertEqual(rc, 1)
        self.assertIn("hv_queuing: data waiting in 4/20 segments", out)

    def test_a_program_not_attached_needs_a_lost_line(self):
        q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5, attached=False)
                                  for _ in range(2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5, attached=False)
                                  for _ in range(2)]
        body = (scenario("hv_queuing", q), scenario("hv_drop", d))
        rc, out = self.judge(log(*body))
        self.assertEqual(rc, 1)
        self.assertIn("tcp_sendmsg_locked is not attached, and doctor has no [lost] line", out)
        rc, out = self.judge(log(*body, doctor="[lost] tcp_sendmsg_locked (tracepoint)\n" + MOVED_SET))
        self.assertEqual(rc, 0, out)
        self.assertIn("programs attached 1/2, doctor names as lost: tcp_sendmsg_locked", out)

    def test_a_program_the_kernel_has_left_out_fails_even_when_named(self):
        # dump_flows refused by 6.1's verifier (a change it does not take):
        # doctor names it and the TCP iterator stands in, but 6.1 has what
        # it needs, so the matrix must not pass.
        progs = ({"name": "dump_flows", "attached": False,
                  "not_attached": "rejected by the kernel: R2 type=buf"},)
        q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5, more_programs=progs)
                                  for _ in range(2)]
        d = [row("free_flow")] + [row("hypervisor_drop", retrans=5, more_programs=progs)
                                  for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q), scenario("hv_drop", d),
                                 doctor="[lost] dump_flows (refused)\n" + MOVED_SET))
        self.assertEqual(rc, 1, out)
        self.assertIn("dump_flows is not attached on 6.1, where it should be: rejected by the kernel", out)

    def test_a_program_whose_work_another_does_needs_that_one_attached(self):
        def body(dev_xmit_attached):
            progs = ({"name": "qdisc_dequeue", "attached": False, "done_by": "dev_xmit"},
                     {"name": "dev_xmit", "attached": dev_xmit_attached})
            q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5, more_programs=progs)
                                      for _ in range(2)]
            d = [row("free_flow")] + [row("hypervisor_drop", retrans=5, more_programs=progs)
                                      for _ in range(2)]
            return (scenario("hv_queuing", q), scenario("hv_drop", d))
        rc, out = self.judge(log(*body(True)))
        self.assertEqual(rc, 0, out)
        self.assertIn("doctor names as lost: nothing (done by another: qdisc_dequeue by dev_xmit)", out)
        rc, out = self.judge(log(*body(False)))
        self.assertEqual(rc, 1)
        self.assertIn("qdisc_dequeue is done by dev_xmit, which is not attached", out)

    def test_flows_read_otherwise_than_from_the_moved_set_fail(self):
        walk = "[ok]   flow dump: every flow each interval through the TCP socket iterator"
        rc, out = self.judge(good_observe(doctor="all programs attached\n" + walk))
        self.assertEqual(rc, 1, out)
        self.assertIn("flows read from NOT the moved set", out)
        self.assertIn("flow dump is not the moved set: 'every flow each interval", out)
        rc, out = self.judge(good_observe())
        self.assertEqual(rc, 0, out)
        self.assertIn("flows read from the moved set", out)

    def test_a_missing_scenario_and_end_fail(self):
        q = [row("free_flow")] + [row("hypervisor_queuing", retrans=5) for _ in range(2)]
        rc, out = self.judge(log(scenario("hv_queuing", q, 100, 105), end=False))
        self.assertEqual(rc, 1)
        self.assertIn("hv_drop: not run", out)
        self.assertIn("no END marker", out)
        self.assertNotIn("its kernel died", out)
        # A guest whose kernel died: its first oops line is said.
        oops = "[   56.197087] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI"
        text = log(scenario("hv_queuing", q, 100, 105), end=False) + "\n" + oops + "\n"
        rc, out = self.judge(text)
        self.assertEqual(rc, 1)
        self.assertIn("its kernel died: '[   56.197087] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI'",
                      out)

    def test_refuse_names_the_floor_and_the_feature(self):
        err = "kernel 5.10 is below the floor 5.12: no bpf_sk_storage_get"
        text = log("=== WATCH_ERR", err, "=== WATCH_RC 1", doctor=err, doctor_rc=1)
        rc, out = self.judge(text, "refuse")
        self.assertEqual(rc, 0, out)
        self.assertIn("doctor exit 1, watch exit 1: refused (floor 5.12)", out)
        # libbpf's own noise, and a refusal that does not say why, fail.
        text = log("=== WATCH_ERR", "libbpf: failed", "=== WATCH_RC 1", doctor=err, doctor_rc=1)
        rc, out = self.judge(text, "refuse")
        self.assertEqual(rc, 1)
        self.assertIn("watch printed libbpf noise", out)
        self.assertIn("watch does not name the floor", out)

    def test_refuse_fails_when_doctor_passes(self):
        err = "below the floor 5.12: bpf_get_socket_cookie"
        rc, out = self.judge(log("=== WATCH_ERR", err, "=== WATCH_RC 1", doctor=err), "refuse")
        self.assertEqual(rc, 1)
        self.assertIn("doctor did not refuse (exit 0)", out)

    def test_doctor_only_lists_the_lost_subjects(self):
        rc, out = self.judge(log(doctor="[lost] tracepoint tcp_sendmsg_locked (6.1)\n"
                                        "2 lost"), "doctor")
        self.assertEqual(rc, 0, out)
        self.assertIn("throttlescope 0.9.0 (commit abc123); doctor exit 0, lost: "
                      "tracepoint tcp_sendmsg_locked", out)

    def test_static_binary_runs_alone_in_the_chroot(self):
        jail = [".", "./dev", "./proc", "./sys", "./throttlescope", "./tmp"]
        rc, out = self.judge(good_observe(jail=jail), mode="static")
        self.assertEqual(rc, 0, out)
        self.assertIn(", static, alone in a chroot", out)
        rc, out = self.judge(good_observe(jail=jail + ["./lib/libc.so.6"]), mode="static")
        self.assertEqual(rc, 1)
        self.assertIn("the chroot should hold only the binary", out)
        rc, out = self.judge(good_observe(jail=jail))
        self.assertEqual(rc, 1)
        self.assertIn("a chroot for a binary that is not static", out)


if __name__ == "__main__":
    unittest.main()
