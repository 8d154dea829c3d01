"""Sending at a steady rate, for the lab's workloads (dns_loop.py,
ping_loop.py): what is due is sent every 5 ms."""
import time


def paced(pps, secs, send_one, each_tick=None):
    """Calls send_one(n) for the n-th item (from 0) as it falls due at PPS a
    second, for SECS seconds, then returns how many were sent. send_one
    returns False when it could not send (tried again at the next tick);
    each_tick(), if given, runs once a tick after the sends."""
    start = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic() - start
        if now >= secs:
            break
        due = int(now * pps) + 1
        while sent < due:
            if send_one(sent) is False:
                break
            sent += 1
        if each_tick is not None:
            each_tick()
        time.sleep(0.005)
    return sent
