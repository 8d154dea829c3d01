#!/usr/bin/env python3
"""Many mostly idle TCP connections, for tools/bench/scale.

server PORT: accepts every connection and reads (discards) whatever comes.
client ADDR PORT N ACTIVE: opens N connections to ADDR:PORT, then every second
writes a few bytes on ACTIVE of them (the rest stay idle) until killed. Prints
"ready N" on stdout once all N are established.

One process and one epoll each, so 10,000 sockets cost little CPU of their own
(the rig measures the observer, not this). Needs `ulimit -n` above N; where the
limit is lower, the rig runs several servers on one port (SO_REUSEPORT) and several
clients, each with its share of N and ACTIVE.
"""
import selectors
import socket
import sys
import time


def server(port):
    sel = selectors.DefaultSelector()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Several servers share the port when one process may not hold every
    # connection (RLIMIT_NOFILE): the kernel spreads them.
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    lsock.bind(("0.0.0.0", port))
    lsock.listen(4096)
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is lsock:
                try:
                    while True:
                        c, _ = lsock.accept()
                        c.setblocking(False)
                        sel.register(c, selectors.EVENT_READ)
                except BlockingIOError:
                    pass
            else:
                try:
                    data = key.fileobj.recv(65536)
                except (BlockingIOError, ConnectionError):
                    data = b"x"
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()


def client(addr, port, n, active):
    socks = []
    for i in range(n):
        s = socket.create_connection((addr, port))
        socks.append(s)
        # Paced so the listener's backlog never overflows (SYN retries would
        # take seconds).
        if i % 500 == 499:
            time.sleep(0.05)
    print(f"ready {len(socks)}", flush=True)
    payload = b"trickle\n"
    while True:
        t0 = time.monotonic()
        for s in socks[:active]:
            s.send(payload)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]))
    elif sys.argv[1] == "client":
        client(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        sys.exit("usage: scale_conns.py server PORT | client ADDR PORT N ACTIVE")
