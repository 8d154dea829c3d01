"""summary.py's arithmetic on canned arm records (no lab, no broker): run by tools/test."""

import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import summary  # noqa: E402


def metrics(list_groups, describe, requests, bytes_in, bytes_out, conns):
    return {
        "requests": {"ListGroups": list_groups, "DescribeGroups": describe, "Heartbeat": 0},
        "request_bytes": {},
        "listeners": {
            "CLIENT": {
                "incoming_byte_total": bytes_in,
                "outgoing_byte_total": bytes_out,
                "request_total": requests,
                "connection_creation_total": conns,
            }
        },
    }


def kafka(ok, requests, sent, received):
    return {
        "lookups_ok": ok,
        "lookups_failed": 0,
        "requests": requests,
        "bytes_sent": sent,
        "bytes_received": received,
        "groups": 1000,
        "groups_not_described": 0,
        "members": 0,
    }


class Summary(unittest.TestCase):
    def arms(self):
        # `on`: 10 lookups in a 50 s window, 13 requests, 500 B out and 40,000 B in each;
        # the broker saw 11 lookups over the arm (the first one too), plus 2 requests and
        # 100 B each way of members' heartbeats, which the `off` arm (half as long) saw half of.
        on = {
            "arm": "on",
            "groups": 1000,
            "round": 1,
            "created": "groups 1000 created 1000 in 3.0 s",
            "start": {"t": 100.0, "ticks": 1000, "thread_ns": 5_000_000, "kafka": kafka(1, 13, 500, 40_000)},
            "end": {"t": 150.0, "ticks": 1100, "thread_ns": 55_000_000, "kafka": kafka(11, 143, 5500, 440_000)},
            "broker_before": metrics(0, 0, 0, 0, 0, 0),
            "broker_after": metrics(11, 110, 11 * 13 + 2, 11 * 500 + 100, 11 * 40_000 + 100, 11),
            "broker_ticks": 660,
            "arm_s": 60.0,
            "lookup_ms": [40, 30, 35],
            "last": kafka(11, 143, 5500, 440_000),
        }
        off = {
            "arm": "off",
            "groups": 1000,
            "round": 1,
            "created": on["created"],
            "start": {"t": 200.0, "ticks": 2000, "thread_ns": 0, "kafka": None},
            "end": {"t": 250.0, "ticks": 2050, "thread_ns": 0, "kafka": None},
            "broker_before": metrics(0, 0, 0, 0, 0, 0),
            "broker_after": metrics(0, 0, 1, 50, 50, 0),
            "broker_ticks": 300,
            "arm_s": 30.0,
            "lookup_ms": [],
            "last": None,
        }
        return on, off

    def test_one_round(self):
        on, off = self.arms()
        r = summary.one_round(on, off, 100)
        self.assertEqual(r["lookups"], 10)
        self.assertEqual(r["ours"], {"requests": 13, "bytes_sent": 500, "bytes_received": 40_000})
        self.assertAlmostEqual(r["lookup_thread_ms"], 5.0)
        # 1 s of CPU in 50 s on, 0.5 s in 50 s off: 10 ms/s more, 50 ms per lookup.
        self.assertAlmostEqual(r["observer_cpu_ms_per_s"]["on"], 20.0)
        self.assertAlmostEqual(r["observer_cpu_ms_per_s"]["off"], 10.0)
        self.assertAlmostEqual(r["observer_cpu_ms_per_lookup"], 50.0)
        # The members' share taken off: the broker's figures are the lookup's, per lookup.
        self.assertEqual(r["broker_lookups"], 11)
        self.assertAlmostEqual(r["broker"]["request_total"], 13)
        self.assertAlmostEqual(r["broker"]["incoming_byte_total"], 500)
        self.assertAlmostEqual(r["broker"]["outgoing_byte_total"], 40_000)
        self.assertAlmostEqual(r["broker"]["requests_DescribeGroups"], 10)
        self.assertAlmostEqual(r["broker"]["connection_creation_total"], 1)
        # 110 ms/s on, 100 ms/s off: 10 ms/s over 60 s for 11 lookups.
        self.assertAlmostEqual(r["broker_cpu_ms_per_lookup"], 600 / 11)

    def test_main_writes_json_and_table(self):
        on, off = self.arms()
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps(on) + "\n" + json.dumps(off) + "\n")
        out, err = io.StringIO(), io.StringIO()
        argv = sys.argv
        try:
            sys.argv = ["summary.py", f.name, "--config", '{"clk_tck": 100, "period_s": 5}']
            with redirect_stdout(out), redirect_stderr(err):
                summary.main()
        finally:
            sys.argv = argv
            os.unlink(f.name)
        doc = json.loads(out.getvalue())
        c = doc["counts"][0]
        self.assertEqual(c["groups"], 1000)
        self.assertEqual(c["lookup_ms"], {"n": 3, "min": 30, "median": 35, "max": 40})
        self.assertIn("1000 groups", err.getvalue())
        self.assertIn("1000 / 0", err.getvalue())


if __name__ == "__main__":
    unittest.main()
