"""Unit tests of traffic_summary.py and ground_truth.py, the parsers behind the lab's
report, on canned iperf3, tc and nft JSON.

Run with `tools/lab unittest` or `python3 -m unittest discover -s tools/lab.d`.
"""
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ground_truth  # noqa: E402
import traffic_summary  # noqa: E402

IPERF3 = {
    "intervals": [{"sum": {"bits_per_second": 191.6e6}}, {"sum": {"bits_per_second": 189.4e6}}],
    "end": {"sum_sent": {"retransmits": 3},
            "sum_received": {"bits_per_second": 190.51e6, "seconds": 2.0004}},
}


class TrafficSummary(unittest.TestCase):
    def test_lines(self):
        self.assertEqual(traffic_summary.summary_lines(IPERF3), [
            "traffic: 190.5 Mbit/s received, 3 retransmits (iperf3 sender), 2.0 s",
            "traffic per second (Mbit/s): 192 189",
        ])

    def test_error_and_missing_fields(self):
        self.assertEqual(traffic_summary.summary_lines({"error": "unable to connect"}), [
            "traffic: iperf3 error: unable to connect",
            "traffic: 0.0 Mbit/s received, n/a retransmits (iperf3 sender), 0.0 s",
        ])

    def run_main(self, content):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "iperf3-client.json")
            with open(p, "w") as f:
                f.write(content)
            out = io.StringIO()
            with redirect_stdout(out):
                rc = traffic_summary.main([p])
        return rc, out.getvalue()

    def test_main_prints_and_survives_a_truncated_file(self):
        rc, out = self.run_main(json.dumps(IPERF3))
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith("traffic: 190.5 Mbit/s received"))
        rc, out = self.run_main('{"start": ')
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith("traffic: unreadable iperf3 result ("), out)


TC = json.dumps([
    {"kind": "clsact", "handle": "ffff:", "dev": "hc", "parent": "ffff:fff1",
     "packets": 1, "drops": 0, "overlimits": 0},
    {"kind": "tbf", "handle": "8001:", "dev": "hc", "root": True, "packets": 132513,
     "drops": 30745, "overlimits": 28116},
])


class GroundTruth(unittest.TestCase):
    def test_qdisc_line(self):
        self.assertEqual(ground_truth.qdisc_line(TC),
                         "tbf sent=132513 pkts dropped=30745 overlimits=28116")
        noqueue = json.dumps([{"kind": "noqueue", "root": True, "dev": "hb"}])
        self.assertEqual(ground_truth.qdisc_line(noqueue), "no shaper")
        self.assertEqual(ground_truth.qdisc_line(""), "no shaper")

    def test_qdisc_count(self):
        self.assertEqual(ground_truth.qdisc_count(TC), 132513 + 30745)
        self.assertEqual(ground_truth.qdisc_count(""), 0)

    def test_ct_dropped_sums_rule_counters(self):
        nft = json.dumps({"nftables": [
            {"metainfo": {}},
            {"rule": {"expr": [{"ct count": {"val": 1000}}, {"counter": {"packets": 959}},
                               {"drop": None}]}},
            {"rule": {"expr": [{"counter": {"packets": 41}}]}},
        ]})
        self.assertEqual(ground_truth.ct_dropped(nft), 1000)
        self.assertEqual(ground_truth.ct_dropped(""), 0)
        self.assertEqual(ground_truth.ct_dropped("{}"), 0)

    def test_main_reads_stdin(self):
        out = io.StringIO()
        old = sys.stdin
        sys.stdin = io.StringIO(TC)
        try:
            with redirect_stdout(out):
                self.assertEqual(ground_truth.main(["qdisc-count"]), 0)
        finally:
            sys.stdin = old
        self.assertEqual(out.getvalue(), "163258\n")


if __name__ == "__main__":
    unittest.main()
