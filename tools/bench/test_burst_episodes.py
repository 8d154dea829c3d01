"""Unit tests of burst_episodes' checks: a run's b0 throughput and `report --json`
episodes in, its problems out (check), and the free-flow count over canned `watch --json`
lines (free_run, its lab run replaced). No lab, no root.

Run by tools/test, or `python3 -m unittest discover -s tools/bench`.
"""
import contextlib
import importlib.machinery
import importlib.util
import io
import json
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    """burst_episodes is a program without .py: loaded from its path."""
    loader = importlib.machinery.SourceFileLoader("burst_episodes",
                                                  os.path.join(HERE, "burst_episodes"))
    spec = importlib.util.spec_from_loader("burst_episodes", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


be = load()


def tx(dry_at=14, burst=300e6, base=96e6, n=25):
    """b0's tx throughput per interval: idle at 0, the burst, then the baseline from dry_at."""
    return [(0, 0.0)] + [(s, burst if s < dry_at else base) for s in range(1, n)]


def episode(verdict, start, end, **enforcement):
    e = {"iface": "b0", "verdict": verdict, "start_seq": start, "end_seq": end}
    if enforcement:
        e["enforcement"] = enforcement
    return e


def report(onset=14, ceiling=301e6, baseline=97e6, stepped=True, extra=()):
    return {"episodes": [
        episode("idle", 0, 0),
        episode("free_flow", 1, onset - 1),
        episode("hypervisor_queuing", onset, 24, stepped_down=stepped,
                burst_ceiling_bps=ceiling, baseline_bps=baseline),
        {"iface": "lo", "verdict": "free_flow", "start_seq": 0, "end_seq": 24},
        *extra]}


class Check(unittest.TestCase):
    def test_a_good_run(self):
        row = be.check(tx(), report())
        self.assertEqual(row["problems"], [])
        self.assertEqual((row["dry"], row["onset"]), (14, 14))
        self.assertEqual(row["episodes"],
                         "free_flow 1-13, hypervisor_queuing 14-24")

    def test_dry_is_the_first_interval_under_60_percent_of_the_burst(self):
        t = tx(dry_at=30)  # never dry by the baseline
        t[16] = (16, 0.59 * 300e6)
        self.assertEqual(be.check(t, report(onset=16))["dry"], 16)
        t[16] = (16, 0.61 * 300e6)
        self.assertIsNone(be.check(t, report(onset=16))["dry"])

    def test_onset_within_two_intervals_of_dry(self):
        self.assertEqual(be.check(tx(), report(onset=16))["problems"], [])
        problems = be.check(tx(), report(onset=17))["problems"]
        self.assertEqual(problems, ["onset 17 not within 2 of the bucket running dry (14)"])

    def test_ceiling_and_baseline_within_ten_percent(self):
        problems = be.check(tx(), report(ceiling=260e6, baseline=115e6))["problems"]
        self.assertEqual(problems, ["ceiling 260.0 not within 10% of 300",
                                    "baseline 115.0 not within 10% of 100"])

    def test_no_step_down(self):
        problems = be.check(tx(), report(stepped=False))["problems"]
        self.assertEqual(problems, ["no step down reported"])

    def test_episodes_other_than_free_flow_then_one_enforcement(self):
        extra = [episode("hypervisor_drop", 25, 26)]
        problems = be.check(tx(n=27), report(extra=extra))["problems"]
        self.assertIn("not free_flow then one enforcement", problems[0])


def watch_line(seq, pct, raw, held):
    return json.dumps({"seq": seq, "analysis": {"interfaces": [
        {"iface": "b0", "rates": {"bw_out_pct": pct}, "verdict": raw, "held": {"verdict": held}},
        {"iface": "lo", "rates": {}, "verdict": "hypervisor_drop",
         "held": {"verdict": "hypervisor_drop"}}]}})


class FreeRun(unittest.TestCase):
    def run_with(self, lines):
        saved = be.observe
        be.observe = lambda *a, **kw: "\n".join(lines)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = be.free_run("throttlescope", "tsbf1", 10)
        finally:
            be.observe = saved
        return rc, out.getvalue()

    def test_a_raw_hypervisor_verdict_alone_passes(self):
        lines = ["lab noise", watch_line(0, None, "idle", "idle"),
                 watch_line(1, 20.0, "free_flow", "free_flow"),
                 watch_line(2, 60.0, "hypervisor_queuing", "free_flow"),
                 watch_line(3, 30.0, "free_flow", "free_flow")]
        rc, out = self.run_with(lines)
        self.assertEqual(rc, 0)
        self.assertIn("free flow 4 intervals: bw_out per second 20.0-60.0% (median 30.0%), "
                      "1 at or past 50%; judged hypervisor alone 1, held hypervisor 0", out)

    def test_a_held_hypervisor_verdict_fails(self):
        lines = [watch_line(0, None, "idle", "idle"),
                 watch_line(1, 70.0, "hypervisor_queuing", "hypervisor_queuing")]
        rc, out = self.run_with(lines)
        self.assertEqual(rc, 1)
        self.assertIn("held hypervisor 1", out)


if __name__ == "__main__":
    unittest.main()
