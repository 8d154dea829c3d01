#!/usr/bin/env python3
"""A workload pinging in a loop (the lab's conntrack case for ICMP).

    ping_loop.py ADDR PPS SECONDS

Sends ICMP echo requests to ADDR at PPS a second for SECONDS, each from a new
raw ICMP socket (made, sent on and closed, as a health checker running
`ping -c 1` per check does) with a new echo identifier, so a new tracked flow
in a connection table per echo; reads no replies. Prints the echoes sent.
Needs root (a raw socket). PPS is kept by sending the ones due every 5 ms.
"""
import socket
import struct
import sys

from pace import paced


def checksum(data):
    """The Internet checksum (RFC 1071) of `data`."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def echo_request(ident, seq, payload=b"throttlescope lab"):
    """An ICMP echo request (type 8, code 0) with its checksum."""
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    csum = checksum(header + payload)
    return struct.pack("!BBHHH", 8, 0, csum, ident, seq) + payload


def main(argv):
    addr, pps, secs = argv[0], float(argv[1]), float(argv[2])

    def send_one(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        try:
            # Identifiers 1..65535, one per echo: each a new flow.
            s.sendto(echo_request(n % 65535 + 1, 1), (addr, 0))
        except BlockingIOError:
            return False
        finally:
            s.close()
        return True

    print(paced(pps, secs, send_one), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
