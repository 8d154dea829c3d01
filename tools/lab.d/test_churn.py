"""Unit tests of churn_client.py and churn_server.py: the schedule and the
per-connection state machine with stand-in clocks, then both ends against each other
on 127.0.0.1 (loopback only; no namespaces, no root).

Run with `tools/lab unittest` or `python3 -m unittest discover -s tools/lab.d`.
"""
import os
import selectors
import socket
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import churn_client  # noqa: E402
import churn_server  # noqa: E402


class Schedule(unittest.TestCase):
    def test_due_is_a_steady_rate_starting_at_once(self):
        self.assertEqual(churn_client.due(0.0, 400), 1)
        self.assertEqual(churn_client.due(0.0024, 400), 1)
        self.assertEqual(churn_client.due(0.0025, 400), 2)
        self.assertEqual(churn_client.due(1.0, 400), 401)
        self.assertEqual(churn_client.due(7.999, 400), 3200)
        self.assertEqual(churn_client.due(2.5, 0.5), 2)


class Server(unittest.TestCase):
    def setUp(self):
        self.ls = churn_server.listener("127.0.0.1", 0)
        self.port = self.ls.getsockname()[1]
        self.stop = threading.Event()
        sel = selectors.DefaultSelector()
        sel.register(self.ls, selectors.EVENT_READ)

        def loop():
            while not self.stop.is_set():
                churn_server.step(sel, self.ls, timeout=0.02)
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()

    def tearDown(self):
        self.stop.set()
        self.thread.join(2)
        self.ls.close()


class ServerAnswers(Server):
    def test_one_answer_per_request_and_close_on_peer_close(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as c:
            c.sendall(b"req\n")
            self.assertEqual(c.recv(64), churn_server.ANSWER)
            c.sendall(b"again\n")
            self.assertEqual(c.recv(64), b"ok\n")
            c.shutdown(socket.SHUT_WR)
            # The server closes its end once the peer did: EOF.
            self.assertEqual(c.recv(64), b"")


class FakeSelector:
    """Records registrations; nothing is ever ready."""

    def __init__(self):
        self.registered = {}

    def register(self, s, events):
        self.registered[s] = events

    def modify(self, s, events):
        self.registered[s] = events

    def unregister(self, s):
        del self.registered[s]


class Deadlines(unittest.TestCase):
    def churn(self, **kw):
        args = dict(host="127.0.0.1", port=9, rate=10, hold=1.0, duration=5, max_open=100,
                    sel=FakeSelector())
        args.update(kw)
        return churn_client.Churn(**args)

    def test_connect_not_complete_in_time_is_a_timeout(self):
        c = self.churn()
        a, b = socket.socketpair()
        self.addCleanup(b.close)
        c.conns[a] = ["connecting", 10.0 + churn_client.TIMEOUT]
        c.sel.register(a, selectors.EVENT_WRITE)
        c.expire(11.0)
        self.assertEqual(c.st["timed_out"], 0)
        self.assertIn(a, c.conns)
        c.expire(10.0 + churn_client.TIMEOUT)
        self.assertEqual(c.st["timed_out"], 1)
        self.assertEqual(c.conns, {})
        self.assertEqual(c.sel.registered, {})
        self.assertEqual(a.fileno(), -1)  # closed

    def test_held_connection_closes_without_counting(self):
        c = self.churn()
        a, b = socket.socketpair()
        self.addCleanup(b.close)
        c.conns[a] = ["holding", 3.0]  # holding sockets are no longer in the selector
        c.expire(3.0)
        self.assertEqual(c.conns, {})
        self.assertEqual(c.st["timed_out"], 0)

    def test_answer_moves_waiting_to_holding(self):
        c = self.churn(hold=2.0)
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        c.conns[a] = ["waiting", 100.0]
        c.sel.register(a, selectors.EVENT_READ)
        b.sendall(b"ok\n")
        c.on_ready(a, 5.0)
        self.assertEqual(c.conns[a], ["holding", 7.0])
        self.assertEqual(c.st["answered"], 1)
        self.assertNotIn(a, c.sel.registered)

    def test_eof_while_waiting_is_an_error(self):
        c = self.churn()
        a, b = socket.socketpair()
        c.conns[a] = ["waiting", 100.0]
        c.sel.register(a, selectors.EVENT_READ)
        b.close()
        c.on_ready(a, 5.0)
        self.assertEqual(c.st["errors"], 1)
        self.assertEqual(c.conns, {})

    def test_fd_limit_skips_instead_of_opening(self):
        c = self.churn(max_open=0)
        c.start_due(0.35, 0.35)  # rate 10: 4 due
        self.assertEqual(c.started, 4)
        self.assertEqual(c.st["skipped_fd_limit"], 4)
        self.assertEqual(c.st["attempted"], 0)


class AgainstServer(Server):
    def test_every_connection_answered_and_closed(self):
        # 40/s for 0.5 s: due(elapsed) reaches 20 just before the end, 21 at most.
        c = churn_client.Churn("127.0.0.1", self.port, rate=40, hold=0.1, duration=0.5,
                               max_open=1000)
        st = c.run()
        self.assertIn(st["attempted"], (20, 21))
        self.assertEqual(st["established"], st["attempted"])
        self.assertEqual(st["answered"], st["attempted"])
        self.assertEqual((st["timed_out"], st["errors"], st["skipped_fd_limit"]), (0, 0, 0))
        # Held 0.1 s at 40/s: about 4-5 open at once, never all of them.
        self.assertGreaterEqual(st["peak_open"], 2)
        self.assertLess(st["peak_open"], st["attempted"])
        self.assertEqual(c.conns, {})

    def test_refused_connect_is_an_error(self):
        # A port nobody listens on (the listener's, closed): the connect fails at once.
        ls = churn_server.listener("127.0.0.1", 0)
        port = ls.getsockname()[1]
        ls.close()
        st = churn_client.Churn("127.0.0.1", port, rate=10, hold=0.1, duration=0.15,
                                max_open=1000).run()
        self.assertEqual(st["attempted"], 2)
        self.assertEqual(st["errors"], 2)
        self.assertEqual(st["established"], 0)


if __name__ == "__main__":
    unittest.main()
