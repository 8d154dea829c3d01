#!/usr/bin/env python3
"""The client side of the lab's connection churn (`tools/lab traffic --churn`).

    churn_client.py HOST PORT RATE HOLD DURATION OUT_JSON

Runs in the lab's client namespace for the conntrack_limit scenario, where the
allowance under test is the number of connections tracked at once, not bytes or
packets. It opens RATE new TCP connections a second for DURATION seconds; each
sends one request, waits for churn_server.py's answer, is held open HOLD seconds
and closed, so about RATE x HOLD connections are wanted at once. A connect not
complete within TIMEOUT seconds (its SYNs dropped by the full allowance) is
abandoned and counted as timed out. The counts (attempted, established, answered,
timed_out, errors, skipped_fd_limit, peak_open) are written to OUT_JSON for the
lab's report and the tests.
"""
import errno
import json
import resource
import selectors
import socket
import sys
import time

TIMEOUT = 1.5


def new_stats():
    return {"attempted": 0, "established": 0, "answered": 0, "timed_out": 0, "errors": 0,
            "skipped_fd_limit": 0, "peak_open": 0}


def due(elapsed, rate):
    """Connections that should have been started `elapsed` seconds in at `rate` a second:
    the first at once, then one every 1/rate seconds (a steady rate, no bursts)."""
    return int(elapsed * rate) + 1


def raise_fd_limit():
    """Raise the open-file limit to its hard maximum; returns how many connections may be
    open at once (a margin left for the process's other files)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return max(64, hard - 64)


class Churn:
    """The connections in flight, each in one state with a deadline:
    connecting (until TIMEOUT), waiting for the answer (until TIMEOUT + hold), holding
    (until hold has passed)."""

    def __init__(self, host, port, rate, hold, duration, max_open, sel=None):
        self.addr = (host, port)
        self.rate, self.hold, self.duration, self.max_open = rate, hold, duration, max_open
        self.sel = sel or selectors.DefaultSelector()
        self.st = new_stats()
        self.conns = {}  # socket -> [state, deadline]
        self.started = 0

    def finish(self, s):
        if self.conns[s][0] != "holding":
            self.sel.unregister(s)
        del self.conns[s]
        s.close()

    def start_due(self, elapsed, now):
        """Start every connection due by `elapsed`, unless too many are open."""
        target = due(elapsed, self.rate)
        while self.started < target:
            self.started += 1
            if len(self.conns) >= self.max_open:
                self.st["skipped_fd_limit"] += 1
                continue
            s = socket.socket()
            s.setblocking(False)
            self.st["attempted"] += 1
            rc = s.connect_ex(self.addr)
            if rc not in (0, errno.EINPROGRESS):
                self.st["errors"] += 1
                s.close()
                continue
            self.conns[s] = ["connecting", now + TIMEOUT]
            self.sel.register(s, selectors.EVENT_WRITE)

    def on_ready(self, s, now):
        """`s` is writable (connecting) or readable (waiting for the answer)."""
        state = self.conns[s][0]
        if state == "connecting":
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.st["errors"] += 1
                self.finish(s)
                return
            self.st["established"] += 1
            try:
                s.send(b"req\n")
            except OSError:
                self.st["errors"] += 1
                self.finish(s)
                return
            self.conns[s] = ["waiting", now + TIMEOUT + self.hold]
            self.sel.modify(s, selectors.EVENT_READ)
        elif state == "waiting":
            try:
                ok = s.recv(64)
            except OSError:
                ok = b""
            if ok:
                self.st["answered"] += 1
                self.sel.unregister(s)  # nothing more to read: the server answers once
                self.conns[s] = ["holding", now + self.hold]
            else:
                self.st["errors"] += 1
                self.finish(s)

    def expire(self, now):
        """Close the connections whose deadline passed; a connect that never completed
        is a timeout, the others ended normally (held) or already counted."""
        for s, (state, deadline) in list(self.conns.items()):
            if now >= deadline:
                if state == "connecting":
                    self.st["timed_out"] += 1
                self.finish(s)

    def run(self, clock=time.monotonic):
        start = clock()
        while True:
            now = clock()
            elapsed = now - start
            if elapsed < self.duration:
                self.start_due(elapsed, now)
            elif not self.conns:
                break
            self.st["peak_open"] = max(self.st["peak_open"], len(self.conns))
            for key, _ in self.sel.select(timeout=0.005):
                self.on_ready(key.fileobj, now)
            self.expire(clock())
        return self.st


def main(argv):
    if len(argv) != 6:
        print("usage: churn_client.py HOST PORT RATE HOLD DURATION OUT_JSON", file=sys.stderr)
        return 2
    host, port, rate, hold, duration, out = (argv[0], int(argv[1]), float(argv[2]),
                                             float(argv[3]), float(argv[4]), argv[5])
    st = Churn(host, port, rate, hold, duration, raise_fd_limit()).run()
    with open(out, "w") as f:
        json.dump(st, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
