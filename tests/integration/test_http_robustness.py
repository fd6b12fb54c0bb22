"""Bad input on the HTTP port: clear errors, and the server keeps serving."""
import random
import socket
import time
import unittest

from magnetar_harness import Node, NodeTestCase, raw_exchange


class HttpRobustnessTest(NodeTestCase):
    def assert_serving(self):
        status, body, _ = self.node.get("/admin/v2/brokers/health")
        self.assertEqual((status, body), (200, b"ok"))

    def test_garbage_gets_400_and_close(self):
        port = self.node.ports["http"]
        reply = raw_exchange(port, b"GET / HTTP/9.9\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 505"), reply[:80])
        for payload in (b"GARBAGE\r\n\r\n", b"\x00\x01\x02\x03" * 64,
                        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(200),
                        b"GET /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
            reply = raw_exchange(port, payload)
            self.assertTrue(reply.startswith(b"HTTP/1.1 400"), (payload[:20], reply[:80]))
            self.assertIn(b'"reason"', reply)
        self.assert_serving()

    def test_random_bytes_never_take_it_down(self):
        rng = random.Random(7)
        port = self.node.ports["http"]
        for _ in range(50):
            payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4000)))
            try:
                raw_exchange(port, payload, timeout=2)
            except (ConnectionResetError, BrokenPipeError):
                pass
        self.assert_serving()

    def test_unknown_path_and_method(self):
        self.assertEqual(self.node.get("/no/such/thing")[0], 404)
        self.assertEqual(self.node.http("DELETE", "/admin/v2/brokers/health")[0], 405)
        self.assert_serving()

    def test_oversize_parts(self):
        port = self.node.ports["http"]
        reply = raw_exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 414"), reply[:60])
        reply = raw_exchange(port, b"PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:60])
        self.assert_serving()

    def test_abandoned_and_slow_connections(self):
        port = self.node.ports["http"]
        # Half a request, then gone; a connection that sends one byte at a time.
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /admin/v2/bro")
            s.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        for b in b"GET /admin/v2/brokers/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n":
            s.send(bytes([b]))
        reply = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
        s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 200"), reply)
        self.assertTrue(reply.endswith(b"ok"))
        self.assert_serving()

    def test_keep_alive_pipelining(self):
        port = self.node.ports["http"]
        req = b"GET /admin/v2/brokers/health HTTP/1.1\r\nHost: x\r\n\r\n" * 20
        req += b"GET /admin/v2/brokers/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        reply = raw_exchange(port, req)
        self.assertEqual(reply.count(b"HTTP/1.1 200 OK"), 21)


if __name__ == "__main__":
    unittest.main(verbosity=2)
