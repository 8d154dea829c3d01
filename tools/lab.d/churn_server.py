#!/usr/bin/env python3
"""The broker side of the lab's connection churn (`tools/lab traffic --churn`).

    churn_server.py HOST PORT

Runs in the lab's broker namespace for the conntrack_limit scenario: accepts every
connection, answers `ok` to each request it reads and closes a connection when its
peer does. One non-blocking selector loop, so thousands of short connections cost
one process, and the listener's backlog (4096) never refuses a SYN the hv's
conntrack rule let through: the only refusals are the ones under test.
"""
import selectors
import socket
import sys

ANSWER = b"ok\n"
BACKLOG = 4096


def listener(host, port):
    """A non-blocking listening socket on HOST:PORT (port 0 picks a free one)."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(BACKLOG)
    ls.setblocking(False)
    return ls


def step(sel, ls, timeout=None):
    """One round of the loop: accept what is pending on `ls`, answer what was received,
    close what the peers closed."""
    for key, _ in sel.select(timeout):
        s = key.fileobj
        if s is ls:
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
            continue
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if data:
            try:
                s.send(ANSWER)
            except OSError:
                pass
        else:
            sel.unregister(s)
            s.close()


def serve(ls):
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ)
    while True:
        step(sel, ls)


def main(argv):
    if len(argv) != 2:
        print("usage: churn_server.py HOST PORT", file=sys.stderr)
        return 2
    serve(listener(argv[0], int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
