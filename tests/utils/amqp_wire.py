"""A raw AMQP 0-9-1 connection for protocol-level tests: frames built and
read by hand, so tests can send what no client library would (garbage,
oversized frames, unknown methods) and watch exactly what comes back.
Every read is bounded."""
import socket
import struct
import time

TIMEOUT_S = 10.0
HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = b"\xce"


def shortstr(s):
    s = s.encode() if isinstance(s, str) else s
    return bytes([len(s)]) + s


def longstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">I", len(s)) + s


def table(entries=()):
    """A field table of (name, tag, encoded value) entries."""
    body = b"".join(shortstr(k) + t + v for k, t, v in entries)
    return struct.pack(">I", len(body)) + body


def frame(frame_type, channel, payload):
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + FRAME_END


def method(channel, class_id, method_id, args=b""):
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


class AmqpWire:
    def __init__(self, port, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk

    def read_frame(self, timeout=TIMEOUT_S):
        """(type, channel, payload) of the next frame."""
        deadline = time.monotonic() + timeout
        self._fill(7, deadline)
        ftype, channel, size = struct.unpack(">BHI", self.buf[:7])
        self._fill(7 + size + 1, deadline)
        payload = self.buf[7:7 + size]
        assert self.buf[7 + size:8 + size] == FRAME_END, "frame-end missing"
        self.buf = self.buf[8 + size:]
        return ftype, channel, payload

    def read_method(self, timeout=TIMEOUT_S, skip_heartbeats=True):
        """(channel, class id, method id, argument bytes) of the next method frame."""
        while True:
            ftype, channel, payload = self.read_frame(timeout)
            if ftype == 8 and skip_heartbeats:
                continue
            assert ftype == 1, f"expected a method frame, got type {ftype}"
            class_id, method_id = struct.unpack(">HH", payload[:4])
            return channel, class_id, method_id, payload[4:]

    def read_close(self, timeout=TIMEOUT_S):
        """The reply code and text of the next connection.close or channel.close."""
        while True:
            channel, cls, mth, args = self.read_method(timeout)
            if (cls, mth) in ((10, 50), (20, 40)):
                code, = struct.unpack(">H", args[:2])
                text = args[3:3 + args[2]].decode()
                return channel, cls, code, text

    def at_eof(self, timeout=TIMEOUT_S):
        """True once the server closed the connection (reading past what it sent)."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(len(self.buf) + 1, deadline)
        except EOFError:
            return True
        except (TimeoutError, socket.timeout):
            return False
        except ConnectionResetError:
            return True

    def login(self, mechanism="PLAIN", response=b"\0guest\0guest"):
        """Sends the protocol header and start-ok; returns the server's tune
        arguments (channel-max, frame-max, heartbeat)."""
        self.send(HEADER)
        _, cls, mth, _ = self.read_method()
        assert (cls, mth) == (10, 10), (cls, mth)
        self.send(method(0, 10, 11, table() + shortstr(mechanism) + longstr(response) + shortstr("en_US")))
        _, cls, mth, args = self.read_method()
        assert (cls, mth) == (10, 30), (cls, mth)
        return struct.unpack(">HIH", args)

    def handshake(self, vhost="/", heartbeat=0, frame_max=131072, user="guest", password="guest"):
        """Runs start/tune/open; returns the server's tune arguments (channel-max, frame-max, heartbeat)."""
        tune = self.login(response=f"\0{user}\0{password}")
        self.send(method(0, 10, 31, struct.pack(">HIH", 0, frame_max, heartbeat)))
        self.send(method(0, 10, 40, shortstr(vhost) + shortstr("") + b"\x00"))
        _, cls, mth, _ = self.read_method()
        assert (cls, mth) == (10, 41), (cls, mth)
        return tune

    def open_channel(self, channel=1):
        self.send(method(channel, 20, 10, shortstr("")))
        ch, cls, mth, _ = self.read_method()
        assert (ch, cls, mth) == (channel, 20, 11), (ch, cls, mth)
