#!/usr/bin/env python3
"""The lab's Amazon DNS resolver (`tools/lab shape linklocal_limit`).

    linklocal_resolver.py ADDR PORT

Runs in the hv namespace on ADDR (169.254.169.253): answers every datagram it
receives with a DNS-shaped reply (the query's id and question, flags "response,
no error", no answers), as the resolver would for a name that does not resolve.
What the hypervisor drops above the link-local limit never reaches it.
"""
import socket
import sys


def reply(query):
    """A response to `query`: its 12-byte header with QR set and the counts of a
    question-only answer, then the question as sent."""
    if len(query) < 12:
        return query
    return query[:2] + b"\x81\x80" + query[4:6] + b"\x00\x00\x00\x00\x00\x00" + query[12:]


def main(argv):
    addr, port = argv[0], int(argv[1])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(2048)
        try:
            s.sendto(reply(data), peer)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
