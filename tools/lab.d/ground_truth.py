#!/usr/bin/env python3
"""Reads the lab's ground truth for its report (`tools/lab run`), from JSON on stdin.

    tc -s -j qdisc show dev DEV | ground_truth.py qdisc-line
        one line: the root qdisc's kind, packets sent, dropped and overlimits,
        or `no shaper`
    tc -s -j qdisc show dev DEV | ground_truth.py qdisc-count
        packets the root qdisc sent plus dropped (0 without one): the pps
        shaper's own count, to set against pps_allowance_exceeded
    nft -j list table inet lab_ct | ground_truth.py ct-dropped
        packets the conntrack_limit rule dropped (0 without the rule), to set
        against conntrack_allowance_exceeded

The report compares the emulated ENA counters with what the shapers themselves
did; empty or unreadable input (no such device or table) reads as no shaper.
"""
import json
import sys


def load(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


def qdisc_line(text):
    for q in load(text) or []:
        if q.get("root") and q["kind"] != "noqueue":
            return "%s sent=%d pkts dropped=%d overlimits=%d" % (
                q["kind"], q["packets"], q["drops"], q["overlimits"])
    return "no shaper"


def qdisc_count(text):
    return next((q["packets"] + q["drops"] for q in load(text) or [] if q.get("root")), 0)


def ct_dropped(text):
    doc = load(text)
    items = doc.get("nftables", []) if isinstance(doc, dict) else []
    return sum(e["counter"]["packets"] for i in items for e in i.get("rule", {}).get("expr", [])
               if "counter" in e)


COMMANDS = {"qdisc-line": qdisc_line, "qdisc-count": qdisc_count, "ct-dropped": ct_dropped}


def main(argv):
    if len(argv) != 1 or argv[0] not in COMMANDS:
        print("usage: ground_truth.py qdisc-line|qdisc-count|ct-dropped < JSON", file=sys.stderr)
        return 2
    print(COMMANDS[argv[0]](sys.stdin.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
