"""The Kafka listener at the byte level, against the real binary: request
framing, ApiVersions (including the answer to a version it does not know),
Fetch limits and waiting, ListOffsets, and bad input that must close only
the connection that sent it while the broker keeps serving."""
import struct
import threading
import time
import unittest

import confluent_kafka as ck
import kafka_wire
from kafka_wire import RawKafkaConnection, kbytes, kstr, record_batch
from magnetar_harness import Node, NodeTestCase, call_json, raw_exchange

TIMEOUT_S = 10.0


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def compact_str(s):
    b = s.encode()
    return uvarint(len(b) + 1) + b


class Reader(kafka_wire.Reader):
    """A classic (not flexible) response body."""

    def __init__(self, data):
        super().__init__(data, False)


class KafkaWire(RawKafkaConnection):
    """One raw connection; responses are read through Reader."""

    def __init__(self, port):
        super().__init__(port, "wire-test", timeout=TIMEOUT_S)

    def call(self, key, version, body, flexible=False):
        cid = self.send(key, version, body, flexible)
        r = Reader(self.receive())
        assert r.take(">i") == cid
        return r

    def fetch(self, topic, offset, max_bytes=1 << 20, max_wait_ms=0, min_bytes=0):
        # Fetch v4: replica, max wait, min bytes, max bytes, isolation, topics.
        body = struct.pack(">iiiib", -1, max_wait_ms, min_bytes, max_bytes, 0)
        body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1) + struct.pack(">iqi", 0, offset, max_bytes)
        r = self.call(1, 4, body)
        r.take(">i")  # throttle
        assert r.take(">i") == 1
        assert r.string() == topic
        assert r.take(">i") == 1
        partition, error, hw, _lso = r.take(">i"), r.take(">h"), r.take(">q"), r.take(">q")
        aborted = r.take(">i")
        assert aborted in (-1, 0)
        return error, hw, batches(r.bytes() or b"")

    def list_offset(self, topic, timestamp):
        body = struct.pack(">i", -1) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1)
        body += struct.pack(">iq", 0, timestamp)
        r = self.call(2, 1, body)
        assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
        r.take(">i")
        error = r.take(">h")
        r.take(">q")
        return error, r.take(">q")

    def produce_batch(self, topic, values):
        """`values` as one record batch (a client may split them), acks all;
        returns the base offset the broker answers."""
        body = kstr(None) + struct.pack(">hi", -1, int(TIMEOUT_S * 1000)) + struct.pack(">i", 1) + kstr(topic)
        body += struct.pack(">ii", 1, 0) + kbytes(record_batch(values))
        r = self.call(0, 3, body)
        assert r.take(">i") == 1 and r.string() == topic and r.take(">i") == 1
        partition, error, base = r.take(">i"), r.take(">h"), r.take(">q")
        assert (partition, error) == (0, 0), error
        return base


def framed(message):
    return struct.pack(">i", len(message)) + message


def batches(records):
    """(base offset, record count) of each record batch in a record set."""
    out, pos = [], 0
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        count = struct.unpack_from(">i", records, pos + 57)[0]
        out.append((base, count))
        pos += 12 + length
    return out


class KafkaWireTest(NodeTestCase):
    def setUp(self):
        self.port = self.node.ports["kafka"]
        self.wire = KafkaWire(self.port)

    def tearDown(self):
        self.wire.close()

    def produce(self, topic, values, port=None):
        """Each value in its own batch, through a real client."""
        port = port or self.port
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "linger.ms": 0})
        errors = []
        for v in values:
            p.produce(topic, value=v, on_delivery=lambda e, m: errors.append(e))
            self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(errors, [None] * len(values))

    def test_api_versions_v3_lists_the_served_apis(self):
        r = self.wire.call(18, 3, compact_str("wire-test") + compact_str("1.0") + b"\x00", flexible=True)
        self.assertEqual(r.take(">h"), 0)
        count = r.uvarint() - 1
        apis = {}
        for _ in range(count):
            key, lo, hi = r.take(">h"), r.take(">h"), r.take(">h")
            self.assertEqual(r.uvarint(), 0)  # no tagged fields
            apis[key] = (lo, hi)
        self.assertEqual(apis[18], (0, 3))
        for key in (0, 1, 2, 3):
            self.assertIn(key, apis)
        self.assertEqual(r.take(">i"), 0)  # throttle

    def test_api_versions_at_an_unknown_version_answers_unsupported_in_v0_layout(self):
        r = self.wire.call(18, 77, b"garbage the broker cannot know how to read")
        self.assertEqual(r.take(">h"), 35)  # UNSUPPORTED_VERSION
        count = r.take(">i")
        keys = [struct.unpack_from(">hhh", r.data, r.pos + 6 * i)[0] for i in range(count)]
        self.assertIn(18, keys)
        # The connection stays usable.
        self.assertEqual(self.wire.call(18, 0, b"").take(">h"), 0)

    def test_metadata_v1_and_v9_agree(self):
        self.produce("wire-meta", [b"x"])
        r1 = self.wire.call(3, 1, struct.pack(">i", 1) + kstr("wire-meta"))
        brokers = r1.take(">i")
        self.assertEqual(brokers, 1)
        self.assertEqual(r1.take(">i"), 0)
        r1.string()
        self.assertEqual(r1.take(">i"), self.port)
        body9 = uvarint(2) + compact_str("wire-meta") + b"\x00" + b"\x00\x00\x00" + b"\x00"
        r9 = self.wire.call(3, 9, body9, flexible=True)
        self.assertEqual(r9.uvarint(), 0)  # response header v1: tagged fields
        r9.take(">i")  # throttle
        self.assertEqual(r9.uvarint() - 1, 1)  # brokers
        self.assertEqual(r9.take(">i"), 0)
        host_length = r9.uvarint() - 1  # compact string
        self.assertEqual(r9.data[r9.pos:r9.pos + host_length], b"127.0.0.1")
        r9.pos += host_length
        self.assertEqual(r9.take(">i"), self.port)

    def test_offsets_are_message_indexes_and_fetch_honours_max_bytes(self):
        topic = "wire-fetch"
        self.produce(topic, [b"a", b"b", b"c"])
        error, hw, got = self.wire.fetch(topic, 0)
        self.assertEqual((error, hw), (0, 3))
        self.assertEqual(got, [(0, 1), (1, 1), (2, 1)])
        # At most max bytes, but always the first batch whole.
        error, hw, got = self.wire.fetch(topic, 1, max_bytes=1)
        self.assertEqual(got, [(1, 1)])
        self.assertEqual(self.wire.list_offset(topic, -2), (0, 0))
        self.assertEqual(self.wire.list_offset(topic, -1), (0, 3))
        error, _, got = self.wire.fetch(topic, 3)
        self.assertEqual((error, got), (0, []))
        self.assertEqual(self.wire.fetch(topic, 4)[0], 1)  # OFFSET_OUT_OF_RANGE

    def test_the_response_max_bytes_spans_partitions_in_request_order(self):
        for t in ("span-a", "span-b"):
            self.produce(t, [b"x" * 100, b"y" * 100])

        def fetch_both(max_bytes):
            body = struct.pack(">iiiib", -1, 0, 0, max_bytes, 0) + struct.pack(">i", 2)
            for t in ("span-a", "span-b"):
                body += kstr(t) + struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
            r = self.wire.call(1, 4, body)
            r.take(">i")
            got = {}
            for _ in range(r.take(">i")):
                name = r.string()
                r.take(">i"), r.take(">i"), r.take(">h"), r.take(">q"), r.take(">q"), r.take(">i")
                got[name] = batches(r.bytes() or b"")
            return got

        self.assertEqual(fetch_both(1 << 20), {"span-a": [(0, 1), (1, 1)], "span-b": [(0, 1), (1, 1)]})
        # One batch fits: the first partition's first batch, whole; nothing more.
        self.assertEqual(fetch_both(1), {"span-a": [(0, 1)], "span-b": []})

    def test_a_batch_keeps_its_offsets_and_fetch_inside_it_returns_it_whole(self):
        topic = "wire-batch"
        self.produce(topic, [b"one"])
        self.assertEqual(self.wire.produce_batch(topic, [b"b%d" % i for i in range(5)]), 1)
        error, hw, got = self.wire.fetch(topic, 3)
        self.assertEqual(hw, 6)
        self.assertEqual(got[0][0] + got[0][1], 6)  # the batch holding offset 3 ends at 6
        self.assertLessEqual(got[0][0], 3)

    def test_fetch_waits_for_data_until_it_arrives(self):
        topic = "wire-wait"
        self.produce(topic, [b"first"])
        threading.Timer(0.3, lambda: self.produce(topic, [b"second"])).start()
        error, hw, got = self.wire.fetch(topic, 1, max_wait_ms=int(TIMEOUT_S * 1000), min_bytes=1)
        self.assertEqual(error, 0)
        self.assertEqual(got, [(1, 1)])

    def test_flexible_produce_v9_and_fetch_v12(self):
        topic = "wire-flex"
        self.produce(topic, [b"seed"])
        # The stored batch as Fetch v4 returns it, produced again over v9.
        body = struct.pack(">iiiib", -1, 0, 0, 1 << 20, 0) + struct.pack(">i", 1) + kstr(topic)
        body += struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, 1 << 20)
        r = self.wire.call(1, 4, body)
        r.take(">i"), r.take(">i"), r.string(), r.take(">i"), r.take(">i"), r.take(">h")
        r.take(">q"), r.take(">q"), r.take(">i")
        batch = r.bytes()
        self.assertEqual(batches(batch), [(0, 1)])
        produce = b"\x00" + struct.pack(">hi", -1, 1000) + uvarint(2) + compact_str(topic) + uvarint(2)
        produce += struct.pack(">i", 0) + uvarint(len(batch) + 1) + batch + b"\x00\x00\x00"
        r = self.wire.call(0, 9, produce, flexible=True)
        self.assertEqual(r.uvarint(), 0)  # response header v1
        self.assertEqual(r.uvarint() - 1, 1)
        name_length = r.uvarint() - 1
        self.assertEqual(r.data[r.pos:r.pos + name_length], topic.encode())
        r.pos += name_length
        self.assertEqual(r.uvarint() - 1, 1)
        self.assertEqual((r.take(">i"), r.take(">h"), r.take(">q")), (0, 0, 1))  # partition, error, base offset
        fetch = struct.pack(">iiiibii", -1, 0, 0, 1 << 20, 0, 0, -1) + uvarint(2) + compact_str(topic) + uvarint(2)
        fetch += struct.pack(">iiqiqi", 0, -1, 0, -1, -1, 1 << 20) + b"\x00\x00" + uvarint(1) + uvarint(1) + b"\x00"
        r = self.wire.call(1, 12, fetch, flexible=True)
        self.assertEqual(r.uvarint(), 0)
        self.assertEqual((r.take(">i"), r.take(">h"), r.take(">i")), (0, 0, 0))
        self.assertEqual(r.uvarint() - 1, 1)
        name_length = r.uvarint() - 1
        self.assertEqual(r.data[r.pos:r.pos + name_length], topic.encode())
        r.pos += name_length
        self.assertEqual(r.uvarint() - 1, 1)
        self.assertEqual((r.take(">i"), r.take(">h"), r.take(">q")), (0, 0, 2))  # partition, error, high watermark
        r.take(">q"), r.take(">q")
        self.assertIn(r.uvarint(), (0, 1))  # aborted transactions: null or empty
        r.take(">i")  # preferred read replica
        records_length = r.uvarint() - 1
        records = r.data[r.pos:r.pos + records_length]
        self.assertEqual(batches(records), [(0, 1), (1, 1)])

    def test_bad_input_closes_that_connection_only_and_data_stays_intact(self):
        topic = "wire-bad"
        self.produce(topic, [b"keep-1", b"keep-2"])
        bad = [
            b"\xde\xad\xbe\xef" * 8,                                # garbage as a size
            struct.pack(">i", -5) + b"x" * 8,                       # negative size
            struct.pack(">i", 3) + b"abc",                          # shorter than any header
            struct.pack(">i", 0x7FFFFFFF) + b"x" * 64,             # far past the limit
            framed(struct.pack(">hhi", 9999, 0, 1) + kstr("x")),   # unknown API key
            framed(struct.pack(">hhi", 0, 99, 1) + kstr("")),      # Produce v99
            # Metadata v1 claiming 5 topics but holding one.
            framed(struct.pack(">hhi", 3, 1, 1) + kstr("x") + struct.pack(">i", 5) + kstr("a")),
        ]
        for payload in bad:
            self.assertEqual(raw_exchange(self.port, payload, timeout=TIMEOUT_S), b"", payload[:16])
        # Garbage records are answered CORRUPT_MESSAGE and stored nowhere.
        body = kstr(None) + struct.pack(">hi", -1, 1000) + struct.pack(">i", 1) + kstr(topic)
        body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 70) + bytes(range(70))
        r = self.wire.call(0, 3, body)
        self.assertEqual(r.take(">i"), 1)
        self.assertEqual(r.string(), topic)
        self.assertEqual(r.take(">i"), 1)
        self.assertEqual(r.take(">i"), 0)
        self.assertEqual(r.take(">h"), 2)  # CORRUPT_MESSAGE
        # The broker still serves, and what was stored is intact.
        error, hw, got = self.wire.fetch(topic, 0)
        self.assertEqual((error, hw), (0, 2))
        self.assertEqual(got, [(0, 1), (1, 1)])


class KafkaOffsetsAcrossRestartTest(unittest.TestCase):
    def test_offsets_survive_a_restart_and_continue(self):
        with Node() as node:
            node.keep_data = True
            data_dir = node.data_dir
            KafkaWireTest.produce(self, "restart", [b"a", b"b"], port=node.ports["kafka"])
            wire = KafkaWire(node.ports["kafka"])
            try:
                self.assertEqual(wire.produce_batch("restart", [b"c%d" % i for i in range(3)]), 2)
            finally:
                wire.close()
            self.assertEqual(node.stop(), 0)
        with Node(data_dir=data_dir) as node:
            node.owns_dir = True  # removed when this one closes
            wire = KafkaWire(node.ports["kafka"])
            try:
                self.assertEqual(wire.list_offset("restart", -1), (0, 5))
                # The batch holding offset 3 is found again from the
                # recovered ledger's message runs.
                error, hw, got = wire.fetch("restart", 3)
                self.assertEqual((error, hw), (0, 5))
                self.assertEqual(got, [(2, 3)])
                KafkaWireTest.produce(self, "restart", [b"after"], port=node.ports["kafka"])
                self.assertEqual(wire.fetch("restart", 5)[2], [(5, 1)])
            finally:
                wire.close()
            self.assertEqual(node.stop(), 0)


class KafkaAutoCreationPolicyTest(unittest.TestCase):
    def test_a_namespace_that_forbids_auto_creation_gets_unknown_topic(self):
        with Node() as node:
            status, _ = call_json(node, "POST", "/admin/v2/namespaces/public/default/autoTopicCreation",
                                  {"allowAutoTopicCreation": False})
            self.assertEqual(status, 204)
            wire = KafkaWire(node.ports["kafka"])
            try:
                # The policy reaches the broker's cache after the write: ask
                # until it applies (bounded).
                deadline = time.monotonic() + TIMEOUT_S
                while True:
                    r = wire.call(3, 4, struct.pack(">i", 1) + kstr("not-made") + b"\x01")
                    r.take(">i")  # throttle
                    for _ in range(r.take(">i")):
                        r.take(">i"), r.string(), r.take(">i"), r.string()
                    r.string()  # cluster id
                    r.take(">i")  # controller
                    self.assertEqual(r.take(">i"), 1)
                    error = r.take(">h")
                    if error == 3 or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                self.assertEqual(error, 3)  # UNKNOWN_TOPIC_OR_PARTITION
                self.assertEqual(wire.fetch("not-made", 0)[0], 3)
            finally:
                wire.close()
            status, topics = call_json(node, "GET", "/admin/v2/persistent/public/default")
            self.assertNotIn("persistent://public/default/not-made", topics)
            self.assertEqual(node.stop(), 0)

    def test_a_namespace_that_creates_partitioned_topics_gets_them_over_kafka(self):
        with Node() as node:
            status, _ = call_json(node, "POST", "/admin/v2/namespaces/public/default/autoTopicCreation",
                                  {"allowAutoTopicCreation": True, "topicType": "partitioned",
                                   "defaultNumPartitions": 3})
            self.assertEqual(status, 204)
            wire = KafkaWire(node.ports["kafka"])
            try:
                deadline = time.monotonic() + TIMEOUT_S
                name = 0
                while True:  # until the policy reached the broker's cache (bounded)
                    name += 1
                    topic = f"auto-parts-{name}"
                    r = wire.call(3, 4, struct.pack(">i", 1) + kstr(topic) + b"\x01")
                    r.take(">i")
                    for _ in range(r.take(">i")):
                        r.take(">i"), r.string(), r.take(">i"), r.string()
                    r.string()
                    r.take(">i")
                    self.assertEqual(r.take(">i"), 1)
                    self.assertEqual(r.take(">h"), 0)
                    self.assertEqual(r.string(), topic)
                    r.take(">b")
                    partitions = r.take(">i")
                    if partitions == 3 or time.monotonic() > deadline:
                        break
                self.assertEqual(partitions, 3)
            finally:
                wire.close()
            status, body = call_json(node, "GET", f"/admin/v2/persistent/public/default/{topic}/partitions")
            self.assertEqual(status, 200)
            self.assertEqual(body["partitions"], 3)
            self.assertEqual(node.stop(), 0)

    def test_acks_zero_gets_no_response_and_the_next_request_is_answered_in_order(self):
        with Node() as node:
            wire = KafkaWire(node.ports["kafka"])
            try:
                self.assertEqual(wire.fetch("acks0", 0)[1], 0)
                body = kstr(None) + struct.pack(">hi", 0, 1000) + struct.pack(">i", 1) + kstr("acks0")
                body += struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 70) + bytes(70)
                wire.send(0, 3, body)  # garbage records with acks=0: nothing comes back
                cid = wire.send(18, 0, b"")
                r = Reader(wire.receive())
                self.assertEqual(r.take(">i"), cid)
            finally:
                wire.close()
            self.assertEqual(node.stop(), 0)


if __name__ == "__main__":
    unittest.main()
