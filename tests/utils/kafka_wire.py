"""What the Kafka integration tests share: Kafka's primitive encodings for
hand-made requests (classic and compact), a reader of responses, and a
NodeTestCase whose tests run kcat against the node's Kafka port. Every wait
is bounded."""
import socket
import struct
import subprocess

from magnetar_harness import NodeTestCase
from pulsar_wire import crc32c

KCAT_TIMEOUT_S = 30


def kstr(s):
    """A Kafka STRING (int16 length; -1 for null)."""
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def kbytes(b):
    """Kafka BYTES (int32 length)."""
    return struct.pack(">i", len(b)) + b


def zigzag_varint(n):
    """A zigzag varint, as records encode their fields."""
    return uvarint((n << 1) ^ (n >> 63))


def record_batch(values, producer_id=-1, producer_epoch=-1, base_sequence=-1, timestamp=1700000000000):
    """One uncompressed record batch (magic 2) of null-key records."""
    records = b""
    for i, v in enumerate(values):
        body = b"\x00" + zigzag_varint(0) + zigzag_varint(i) + zigzag_varint(-1)
        body += zigzag_varint(len(v)) + v + zigzag_varint(0)
        records += zigzag_varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, timestamp, timestamp, producer_id, producer_epoch,
                            base_sequence, len(values)) + records
    tail = struct.pack(">ib", -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(tail)) + tail


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def cstr(s):
    """A COMPACT_STRING (null: 0)."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return uvarint(len(b) + 1) + b


def carray(items):
    """A COMPACT_ARRAY of already encoded elements."""
    return uvarint(len(items) + 1) + b"".join(items)


def cbytes(b):
    """COMPACT_BYTES."""
    return uvarint(len(b) + 1) + b


def cints(values):
    """A COMPACT_ARRAY of int32."""
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def classic_array(items):
    return struct.pack(">i", len(items)) + b"".join(items)


TAGS = b"\x00"  # no tagged fields


class Reader:
    """Reads a response body, classic or flexible."""

    def __init__(self, data, flexible):
        self.data, self.pos, self.flexible = data, 0, flexible

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    def i8(self):
        return self.take(">b")

    def i16(self):
        return self.take(">h")

    def i32(self):
        return self.take(">i")

    def i64(self):
        return self.take(">q")

    def string(self):
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        s = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def array(self, element):
        n = self.uvarint() - 1 if self.flexible else self.i32()
        out = []
        for _ in range(max(n, 0)):
            out.append(element(self))
            self.tags()
        return out

    def bytes(self):
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return None
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def tags(self):
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.pos += self.uvarint()


class RawKafkaConnection:
    """One raw Kafka connection: requests with header v1 (v2 when flexible)
    and whole responses back as bytes."""

    def __init__(self, port, client_id, timeout=10, host="127.0.0.1"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.correlation = 0

    def close(self):
        self.sock.close()

    def send(self, key, version, body, flexible=False):
        """Sends one request; returns its correlation id."""
        self.correlation += 1
        header = struct.pack(">hhi", key, version, self.correlation) + kstr(self.client_id)
        if flexible:
            header += b"\x00"  # no tagged fields
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        return self.correlation

    def receive(self):
        """One whole response (correlation id first)."""
        size = struct.unpack(">i", self.recv_exact(4))[0]
        return self.recv_exact(size)

    def call(self, key, version, body, flexible=False):
        """Sends one request and reads its response: a Reader at the start
        of the response body (past the correlation id and, when flexible,
        the header's tagged fields)."""
        corr = self.send(key, version, body, flexible=flexible)
        resp = self.receive()
        if struct.unpack(">i", resp[:4])[0] != corr:
            raise AssertionError(f"response to request {struct.unpack('>i', resp[:4])[0]}, expected {corr}")
        r = Reader(resp[4:], flexible)
        r.tags()
        return r

    def metadata_v1(self, topics):
        """Metadata v1 for `topics` (names): (brokers as (id, host, port,
        rack), topics as (error, name, internal, partitions as (error,
        index, leader, replicas, isr)))."""
        r = self.call(3, 1, struct.pack(">i", len(topics)) + b"".join(kstr(t) for t in topics))
        brokers = r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string()))
        r.i32()  # the controller
        partition = (lambda r: (r.i16(), r.i32(), r.i32(), r.array(Reader.i32), r.array(Reader.i32)))
        return brokers, r.array(lambda r: (r.i16(), r.string(), r.i8(), r.array(partition)))

    def recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            buf += chunk
        return buf


class KafkaNodeTestCase(NodeTestCase):
    """A shared node; `self.bootstrap` is its Kafka address."""

    def setUp(self):
        self.bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"

    def admin(self):
        """confluent-kafka's AdminClient of the node, one per test: futures
        fail with _DESTROY once their client is gone."""
        if getattr(self, "_admin", None) is None:
            from confluent_kafka.admin import AdminClient
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def tearDown(self):
        self._admin = None

    def kcat(self, *args, stdin=None):
        """kcat's stdout; the test fails when kcat does."""
        r = subprocess.run(["kcat", "-b", self.bootstrap, *args], input=stdin, capture_output=True,
                           timeout=KCAT_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        return r.stdout.decode()
