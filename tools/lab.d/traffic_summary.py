#!/usr/bin/env python3
"""Summarises the lab's last iperf3 run for its report (`tools/lab traffic --wait`, `run`).

    traffic_summary.py IPERF3_JSON

Prints the received throughput, the sender's retransmits and the length of the run,
then the throughput of each second, from the JSON iperf3 -J wrote. The lab's report
puts this next to the shaper's and the broker's own counters, so a reader sees what
the application got under each scenario. An unreadable file or an iperf3 error is
printed, never raised: the report goes on.
"""
import json
import sys


def summary_lines(r):
    """The report's traffic lines for one parsed iperf3 result."""
    lines = []
    if "error" in r:
        lines.append(f"traffic: iperf3 error: {r['error']}")
    end = r.get("end", {})
    sent, recv = end.get("sum_sent", {}), end.get("sum_received", {})
    lines.append(f"traffic: {recv.get('bits_per_second', 0)/1e6:.1f} Mbit/s received, "
                 f"{sent.get('retransmits', 'n/a')} retransmits (iperf3 sender), "
                 f"{recv.get('seconds', 0):.1f} s")
    per_s = [iv.get("sum", {}).get("bits_per_second", 0) / 1e6
             for iv in r.get("intervals", [])]
    if per_s:
        lines.append("traffic per second (Mbit/s): " + " ".join(f"{v:.0f}" for v in per_s))
    return lines


def main(argv):
    if len(argv) != 1:
        print("usage: traffic_summary.py IPERF3_JSON", file=sys.stderr)
        return 2
    try:
        with open(argv[0]) as f:
            r = json.load(f)
    except ValueError as e:
        print(f"traffic: unreadable iperf3 result ({e})")
        return 0
    for line in summary_lines(r):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
