"""Unit tests of ping_loop.py's echo request (no network, no root)."""
import importlib.util
import os
import struct
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("ping_loop", os.path.join(HERE, "ping_loop.py"))
ping_loop = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ping_loop)


class EchoRequestTest(unittest.TestCase):
    def test_its_checksum_verifies(self):
        # The checksum over a packet that carries its own is 0 (RFC 1071),
        # for even and odd payload lengths.
        for payload in (b"abcd", b"abc"):
            p = ping_loop.echo_request(0x1234, 7, payload)
            self.assertEqual(ping_loop.checksum(p), 0)

    def test_header_fields(self):
        p = ping_loop.echo_request(513, 1)
        kind, code, _, ident, seq = struct.unpack("!BBHHH", p[:8])
        self.assertEqual((kind, code, ident, seq), (8, 0, 513, 1))

    def test_known_checksum(self):
        # Type 8, code 0, id 1, seq 1, no payload: 0xffff - (0x0800 + 1 + 1).
        self.assertEqual(ping_loop.checksum(struct.pack("!BBHHH", 8, 0, 0, 1, 1)), 0xF7FD)


if __name__ == "__main__":
    unittest.main()
