"""Unit tests of capture_peaks.py (the capture's busiest window, the ground truth of
tests/lab/microburst.rs) and burst_traffic.py's write plan, without namespaces.

Run with `tools/lab unittest` or `python3 -m unittest discover -s tools/lab.d`.
"""
import os
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import burst_traffic  # noqa: E402
import capture_peaks  # noqa: E402

MS = 1_000_000


def pcap(packets, nanos=False):
    """A classic little-endian pcap of (unix_ns, orig_len) packets, 96-byte snaps."""
    magic = capture_peaks.MAGIC_NS if nanos else capture_peaks.MAGIC_US
    out = struct.pack("<IHHiIII", magic, 2, 4, 0, 0, 96, 1)
    for ns, length in packets:
        frac = ns % 1_000_000_000 if nanos else ns % 1_000_000_000 // 1000
        incl = min(length, 96)
        out += struct.pack("<IIII", ns // 1_000_000_000, frac, incl, length) + bytes(incl)
    return out


class CapturePeaks(unittest.TestCase):
    def test_reads_micro_and_nanosecond_stamps(self):
        pkts = [(5 * 10**9 + 1000, 1514), (5 * 10**9 + 3000, 66)]
        self.assertEqual(capture_peaks.read_pcap(pcap(pkts)), pkts)
        self.assertEqual(capture_peaks.read_pcap(pcap(pkts, nanos=True)), pkts)

    def test_busiest_window_slides_and_stays_in_its_interval(self):
        # 10 frames of 1500 B 1 ms apart from t=100 ms, and one at t=1.5 s.
        pkts = [((100 + i) * MS, 1500) for i in range(10)] + [(1500 * MS, 1500)]
        r = capture_peaks.peaks(pkts, [[0, 1000 * MS], [1000 * MS, 2000 * MS]], 12 * MS)
        # All ten fit in one 12 ms window: 15,000 B in 12 ms = 10 Mbit/s.
        self.assertEqual(r[0], {"peak_bps": 10_000_000, "mean_bps": 120_000, "packets": 10})
        self.assertEqual(r[1]["packets"], 1)
        # A 4 ms window holds 4 of them (t, t+1, t+2, t+3 ms).
        r = capture_peaks.peaks(pkts, [[0, 1000 * MS]], 4 * MS)
        self.assertEqual(r[0]["peak_bps"], 4 * 1500 * 8 * 250)


class BurstPlan(unittest.TestCase):
    def test_burst_is_one_write_smooth_spreads_the_same_bytes(self):
        self.assertEqual(burst_traffic.chunks(4_000_000, 0.5, "burst"), [(4_000_000, 0.0)])
        plan = burst_traffic.chunks(4_000_001, 0.5, "smooth")
        self.assertEqual(len(plan), 250)
        self.assertEqual(sum(b for b, _ in plan), 4_000_001)
        self.assertAlmostEqual(plan[1][1], 0.002)


if __name__ == "__main__":
    unittest.main()
