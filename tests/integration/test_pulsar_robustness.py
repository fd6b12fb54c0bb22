"""Bad input on the Pulsar port: the connection is closed, the server keeps
serving everyone else, and nothing stored is touched."""
import random
import socket
import struct
import unittest

from magnetar_harness import NodeTestCase, raw_exchange


def frame(command: bytes) -> bytes:
    """A simple Pulsar frame: totalSize, commandSize, BaseCommand."""
    return struct.pack(">II", len(command) + 4, len(command)) + command


def varint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num: int, payload: bytes) -> bytes:  # length-delimited protobuf field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


# BaseCommand{type: CONNECT(2), connect{client_version: "robustness-test", protocol_version: 19}}
CONNECT = frame(b"\x08\x02" + field(2, field(1, b"robustness-test") + b"\x20\x13"))
PING = frame(b"\x08\x12" + field(18, b""))


def producer(topic: str, producer_id: int, request_id: int) -> bytes:
    # BaseCommand{type: PRODUCER(5), producer{topic, producer_id, request_id}}
    body = field(1, topic.encode()) + b"\x10" + varint(producer_id) + b"\x18" + varint(request_id)
    return frame(b"\x08\x05" + field(5, body))


def read_frames(sock, count):
    """Reads `count` whole frames; returns each BaseCommand's type number."""
    data, types = b"", []
    while len(types) < count:
        while len(data) < 4 or len(data) < 4 + struct.unpack(">I", data[:4])[0]:
            chunk = sock.recv(4096)
            if not chunk:
                return types
            data += chunk
        size = struct.unpack(">I", data[:4])[0]
        command = data[8:4 + size]
        types.append(command[1])  # field 1 (type) is first: 0x08 <type>
        data = data[4 + size:]
    return types


class PulsarRobustnessTest(NodeTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.port = cls.node.ports["pulsar"]

    def handshake_works(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(CONNECT + PING)
            data = b""
            while len(data) < 8 or len(data) < 4 + struct.unpack(">I", data[:4])[0] + 4:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        # CONNECTED (type 3) first, then PONG (type 19).
        self.assertEqual(data[8:10], b"\x08\x03", data[:20])
        return data

    def test_handshake_and_ping(self):
        data = self.handshake_works()
        self.assertIn(b"Magnetar", data)

    def test_producers_need_an_existing_namespace(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(CONNECT + producer("persistent://no-such-tenant/ns/t", 1, 1)
                      + producer("persistent://public/default/fine", 2, 2))
            types = read_frames(s, 3)
        # CONNECTED, then ERROR and PRODUCER_SUCCESS in whichever order the
        # two topics' reactors answer.
        self.assertEqual(types[0], 3)
        self.assertEqual(sorted(types[1:]), [14, 17])

    def test_garbage_closes_only_that_connection(self):
        for payload in (b"GET / HTTP/1.1\r\n\r\n", b"\xff" * 64, b"\x00\x00\x00\x02\x00\x00",
                        struct.pack(">II", 0x7FFFFFFF, 4) + b"abcd",  # oversize frame
                        struct.pack(">II", 8, 100) + b"\x08\x02\x00\x00",  # command longer than frame
                        frame(b"\x08\x05")):  # PRODUCER before CONNECT
            reply = raw_exchange(self.port, payload, timeout=5)
            self.assertNotIn(b"\x08\x03", reply[:12])  # never "connected"
        self.handshake_works()
        self.assertEqual(self.node.get("/admin/v2/brokers/health")[0], 200)

    def test_random_bytes_after_a_good_handshake(self):
        rng = random.Random(11)
        for _ in range(30):
            noise = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
            try:
                raw_exchange(self.port, CONNECT + noise, timeout=2)
            except (ConnectionResetError, BrokenPipeError):
                pass
        self.handshake_works()


if __name__ == "__main__":
    unittest.main(verbosity=2)
