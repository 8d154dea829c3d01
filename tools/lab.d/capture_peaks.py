#!/usr/bin/env python3
"""The busiest window of a packet capture, per interval: the ground truth for the
peak rates throttlescope measures in the kernel (tests/lab/microburst.rs).

    capture_peaks.py PCAP WINDOW_US < intervals.json

PCAP is a classic pcap file (`tcpdump -w`, microsecond or nanosecond stamps) of
one interface in one direction (`tcpdump -Q out`); stdin is a JSON list of
[start_unix_ns, end_unix_ns] intervals. Prints a JSON list: per interval
{"peak_bps": B, "mean_bps": M, "packets": N}, where B is the most frame bytes
(the captured packets' original lengths, as the kernel counts them) in any
window of WINDOW_US that starts at a packet inside the interval, times 8 over
the window, and M the interval's bytes times 8 over its length.
"""
import json
import struct
import sys

MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D


def read_pcap(data):
    """[(unix_ns, orig_len)] of every packet in a classic pcap file."""
    if len(data) < 24:
        return []
    for endian in ("<", ">"):
        (magic,) = struct.unpack(endian + "I", data[:4])
        if magic in (MAGIC_US, MAGIC_NS):
            break
    else:
        raise ValueError("not a classic pcap file")
    scale = 1000 if magic == MAGIC_US else 1
    out = []
    off = 24
    rec = struct.Struct(endian + "IIII")
    while off + 16 <= len(data):
        sec, frac, incl, orig = rec.unpack_from(data, off)
        off += 16 + incl
        out.append((sec * 1_000_000_000 + frac * scale, orig))
    return out


def peaks(packets, intervals, window_ns):
    """Per interval, the busiest window of `window_ns` starting at one of its
    packets (a sliding window over the stamps), and the interval's mean."""
    packets = sorted(packets)
    result = []
    for start, end in intervals:
        inside = [p for p in packets if start <= p[0] < end]
        best = 0
        j = 0
        run = 0
        # Two pointers: the window [inside[i], inside[i] + window) grows at j.
        for i in range(len(inside)):
            while j < len(inside) and inside[j][0] < inside[i][0] + window_ns:
                run += inside[j][1]
                j += 1
            best = max(best, run)
            run -= inside[i][1]
        total = sum(b for _, b in inside)
        secs = (end - start) / 1e9
        result.append({
            "peak_bps": round(best * 8 * 1e9 / window_ns),
            "mean_bps": round(total * 8 / secs) if secs > 0 else 0,
            "packets": len(inside),
        })
    return result


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    with open(argv[0], "rb") as f:
        packets = read_pcap(f.read())
    intervals = json.load(sys.stdin)
    print(json.dumps(peaks(packets, intervals, int(argv[1]) * 1000)))


if __name__ == "__main__":
    main(sys.argv[1:])
