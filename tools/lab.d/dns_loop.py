#!/usr/bin/env python3
"""A workload resolving a name in a loop (the lab's link-local scenario).

    dns_loop.py ADDR PPS SECONDS [SOURCE_PORT | new]

Sends DNS queries for one name to ADDR:53 at PPS a second for SECONDS from a
connected UDP socket (as glibc's resolver does), reading any replies without
waiting for them, and prints the queries sent. PPS is kept by sending the ones
due every 5 ms. With `new` (a retry storm, the conntrack case), each query
goes from a new socket, connected, sent on and closed: a new source port, so a
new tracked flow, per query, as glibc's resolver makes one socket per lookup.
"""
import socket
import struct
import sys

from pace import paced


def query(qid, name=b"\x07example\x03com\x00"):
    """A standard query for `name`, type A, class IN."""
    return struct.pack("!HHHHHH", qid & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + b"\x00\x01\x00\x01"


def main(argv):
    addr, pps, secs = argv[0], float(argv[1]), float(argv[2])
    new = len(argv) > 3 and argv[3] == "new"
    state = {"s": socket.socket(socket.AF_INET, socket.SOCK_DGRAM)}
    if len(argv) > 3 and not new:
        state["s"].bind(("0.0.0.0", int(argv[3])))
    state["s"].connect((addr, 53))
    state["s"].setblocking(False)

    def send_one(n):
        if new:
            state["s"].close()
            state["s"] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            state["s"].connect((addr, 53))
            state["s"].setblocking(False)
        try:
            state["s"].send(query(n))
        except BlockingIOError:
            return False
        return True

    def read_replies():
        try:
            while state["s"].recv(2048):
                pass
        except (BlockingIOError, ConnectionRefusedError):
            pass

    print(paced(pps, secs, send_one, read_replies), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
