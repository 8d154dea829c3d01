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
import time


def query(qid, name=b"\x07example\x03com\x00"):
    """A standard query for `name`, type A, class IN."""
    return struct.pack("!HHHHHH", qid & 0xFFFF, 0x0100, 1, 0, 0, 0) + name + b"\x00\x01\x00\x01"


def main(argv):
    addr, pps, secs = argv[0], float(argv[1]), float(argv[2])
    new = len(argv) > 3 and argv[3] == "new"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if len(argv) > 3 and not new:
        s.bind(("0.0.0.0", int(argv[3])))
    s.connect((addr, 53))
    s.setblocking(False)
    start = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic() - start
        if now >= secs:
            break
        due = int(now * pps) + 1
        while sent < due:
            if new:
                s.close()
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.connect((addr, 53))
                s.setblocking(False)
            try:
                s.send(query(sent))
                sent += 1
            except BlockingIOError:
                break
        try:
            while s.recv(2048):
                pass
        except (BlockingIOError, ConnectionRefusedError):
            pass
        time.sleep(0.005)
    print(sent, flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
