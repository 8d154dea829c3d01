#!/usr/bin/env python3
"""An application that sends in bursts, or smoothly at the same mean
(`tools/lab traffic --bursts SIZE/PERIOD [--smooth]`, the microburst scenario).

    burst_traffic.py serve HOST PORT SIZE_BYTES[,SIZE_BYTES...] PERIOD_S burst|smooth
    burst_traffic.py fetch HOST PORT SECONDS OUT_JSON

`serve` runs in the broker namespace: to each connection it writes SIZE_BYTES
at once every PERIOD_S (burst: the socket takes them as fast as TCP lets it,
so the interface's busiest few ms run far above the mean), or the same bytes
spread in writes every TICK_S (smooth: the control, at the same mean). A list
of sizes is taken in turn, one a period (every third burst larger: 3M,3M,9M).
`fetch` runs in the client namespace: it reads and discards for SECONDS, then
writes {"bytes": N, "seconds": S} to OUT_JSON.
"""
import json
import socket
import sys
import threading
import time

# The smooth sender's write period: far under the peak window (10 ms), so
# any window holds several writes and reads the mean.
TICK_S = 0.002


def chunks(size, period, mode):
    """(bytes, seconds after the start) of each write in one period."""
    if mode == "burst":
        return [(size, 0.0)]
    n = max(1, round(period / TICK_S))
    return [(size // n + (1 if i < size % n else 0), i * period / n) for i in range(n)]


def send_loop(conn, sizes, period, mode):
    """Writes `sizes[k % len(sizes)]` bytes in period k, as `mode` says, until
    the peer goes away."""
    plans = [chunks(size, period, mode) for size in sizes]
    buf = bytearray(max(b for plan in plans for b, _ in plan))
    start = time.monotonic()
    k = 0
    try:
        while True:
            base = start + k * period
            for nbytes, at in plans[k % len(plans)]:
                delay = base + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif mode == "smooth" and delay < -TICK_S:
                    # Woken late (a busy machine): the schedule moves on
                    # instead of catching up, which would be a burst.
                    start -= delay
                    base -= delay
                conn.sendall(memoryview(buf)[:nbytes])
            k += 1
    except OSError:
        pass
    finally:
        conn.close()


def serve(host, port, sizes, period, mode):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, port))
    ls.listen(16)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=send_loop, args=(conn, sizes, period, mode), daemon=True).start()


def fetch(host, port, seconds, out):
    s = socket.create_connection((host, port), timeout=10)
    s.settimeout(1.0)
    total = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            data = s.recv(1 << 20)
        except socket.timeout:
            continue
        if not data:
            break
        total += len(data)
    elapsed = time.monotonic() - start
    s.close()
    with open(out, "w") as f:
        json.dump({"bytes": total, "seconds": round(elapsed, 3)}, f)


def main(argv):
    if len(argv) == 6 and argv[0] == "serve":
        sizes = [int(x) for x in argv[3].split(",")]
        serve(argv[1], int(argv[2]), sizes, float(argv[4]), argv[5])
    elif len(argv) == 5 and argv[0] == "fetch":
        fetch(argv[1], int(argv[2]), float(argv[3]), argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
