"""A client that pipelines thousands of requests on one connection without
reading a single answer cannot make the node hold more than a bounded
amount for it: past the connection's bound on requests awaiting an answer
the node stops decoding and reading (back-pressure), so its resident memory
stays within a budget however much the client sends or asks for. Once the
client reads, every answer is there, in order, the node still serves a new
client and what was stored is intact.

Raw sockets, per protocol: Kafka Produce requests (responses in
correlation-id order), Fetch requests whose responses are large and
Metadata requests for a namespace of 200,000 partitions; Pulsar SENDs
(receipts in sequence order), GET_SCHEMAs whose answers are large and
GET_TOPICS_OF_NAMESPACE for that namespace;
HTTP keep-alive requests answered on the metadata thread and at once, and
requests for the console's largest file (answers in request order).
The publishes are held unstored by a producer_request_hold backlog quota
while the client sends, so nothing completes that the bound does not let
in; the quota is lifted before the answers are read. The bounds asserted
are memory, never time; every wait is bounded."""
import re
import socket
import struct
import sys
import time
import unittest

from confluent_kafka import Consumer, TopicPartition

import pulsar_api_pb2 as pb
from kafka_wire import RawKafkaConnection, kbytes, kstr, record_batch
from magnetar_harness import NodePerTestCase, push_until_stalled
from memory_watch import MB, RssWatch, metric_value
from pulsar_wire import PulsarWire, command, decode, encode

BUDGET = 300 * MB     # the node's peak resident memory while one client pipelines
HTTP_BUDGET = 100 * MB  # the same for HTTP clients
METADATA_BUDGET = 150 * MB  # the same for Kafka clients asking for every topic
HARD_CAP = 1500 * MB  # past this the watch kills the node (the test fails, the machine lives)
SETTLE_S = 1.0        # the node's memory has settled once it did not grow for this long
SETTLE_MAX_S = 20.0
TIMEOUT_S = 60


def recv_exact(sock, n):
    """Exactly `n` bytes from `sock` (its timeout bounds each wait)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("the node closed the connection")
        got += k
    return bytes(buf)


def http_answer(reader):
    """(status, headers with lower-case names, body) of one HTTP/1.1 answer
    from `reader`, a socket's buffered file."""
    status = int(reader.readline().split()[1])
    headers = {}
    while (line := reader.readline().decode()) not in ("\r\n", ""):
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    size = int(headers.get("content-length", "0"))
    body = reader.read(size)
    if len(body) != size:
        raise ConnectionError("the node closed the connection")
    return status, headers, body


def kafka_response(sock):
    """One whole Kafka response, correlation id first."""
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, size)


def pulsar_frame(sock):
    """One whole Pulsar frame, decoded."""
    head = recv_exact(sock, 4)
    frame, _ = decode(head + recv_exact(sock, struct.unpack(">I", head)[0]))
    return frame


def pulsar_answer(wire):
    """The next Pulsar frame on `wire` that is not a PING; PINGs met on the
    way are answered (the node would close a connection that ignores them)."""
    f = pulsar_frame(wire.sock)
    while f.type == pb.BaseCommand.PING:
        wire.write(pb.BaseCommand(type=pb.BaseCommand.PONG, pong=pb.CommandPong()))
        f = pulsar_frame(wire.sock)
    return f


def produce_request(correlation, topic, value=None, batch=None):
    """Produce v3, acks=1: one batch (of one record `value`) to partition 0."""
    body = kstr(None) + struct.pack(">hi", 1, 30000) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">ii", 1, 0) + kbytes(batch if batch is not None else record_batch([value]))
    header = struct.pack(">hhi", 0, 3, correlation) + kstr("pipeliner")
    return struct.pack(">i", len(header) + len(body)) + header + body


def send_frame(producer_id, sequence_id, payload):
    """A SEND without the optional checksum (a checksum computed in Python
    over hundreds of MiB would take most of the test's time)."""
    cmd = pb.BaseCommand(type=pb.BaseCommand.SEND,
                         send=pb.CommandSend(producer_id=producer_id, sequence_id=sequence_id, num_messages=1))
    md = pb.MessageMetadata(producer_name="pipeliner", sequence_id=sequence_id, publish_time=1700000000000)
    body, meta = cmd.SerializeToString(), md.SerializeToString()
    tail = struct.pack(">I", len(meta)) + meta + payload
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def fetch_request(correlation, topic, max_bytes):
    """Fetch v4 of partition 0 from offset 0, answered at once."""
    body = struct.pack(">iiiib", -1, 0, 0, max_bytes, 0) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iqi", 0, 0, max_bytes)
    header = struct.pack(">hhi", 1, 4, correlation) + kstr("pipeliner")
    return struct.pack(">i", len(header) + len(body)) + header + body


def metadata_request(correlation):
    """Metadata v1 for every topic (a null topic array)."""
    header = struct.pack(">hhi", 3, 1, correlation) + kstr("pipeliner")
    body = struct.pack(">i", -1)
    return struct.pack(">i", len(header) + len(body)) + header + body


def parse_metadata_response(response):
    """(correlation id, {topic: partitions}) of a Metadata v1 response, each
    topic's partitions without error."""
    correlation, brokers = struct.unpack_from(">ii", response, 0)
    pos = 8

    def string():
        nonlocal pos
        size = struct.unpack_from(">h", response, pos)[0]
        pos += 2
        value = response[pos:pos + max(0, size)].decode()
        pos += max(0, size)
        return value

    for _ in range(brokers):
        pos += 4  # node id
        string()  # host
        pos += 4  # port
        string()  # rack
    pos += 4  # controller id
    topics = {}
    count = struct.unpack_from(">i", response, pos)[0]
    pos += 4
    for _ in range(count):
        error = struct.unpack_from(">h", response, pos)[0]
        pos += 2
        name = string()
        pos += 1  # is internal
        partitions = struct.unpack_from(">i", response, pos)[0]
        pos += 4
        good = 0
        for _ in range(partitions):
            perror, _index, _leader = struct.unpack_from(">hii", response, pos)
            pos += 10
            for _ in range(2):  # replicas, isr
                pos += 4 + 4 * struct.unpack_from(">i", response, pos)[0]
            good += perror == 0
        topics[name] = good if error == 0 else -1
    return correlation, topics


def parse_fetch_response(response):
    """(correlation id, error, high watermark, records bytes) of a one-partition Fetch v4 response."""
    correlation, _throttle, _topics = struct.unpack_from(">iii", response, 0)
    pos = 12
    pos += 2 + struct.unpack_from(">h", response, pos)[0] + 4  # the name, then the partition count
    _partition, error, high_watermark, _last_stable = struct.unpack_from(">ihqq", response, pos)
    pos += 22
    aborted = struct.unpack_from(">i", response, pos)[0]
    pos += 4 + max(0, aborted) * 16
    size = struct.unpack_from(">i", response, pos)[0]
    return correlation, error, high_watermark, response[pos + 4:pos + 4 + max(0, size)]


class PipeliningBoundsTest(NodePerTestCase):
    def held_back(self, sock, data, metric=None, budget=BUDGET):
        """Sends `data` without reading anything until all of it went or the
        node stopped reading, lets the node work on what it read, and checks
        its memory stayed within the budget meanwhile (and, given `metric`,
        that the connection paused). Returns how many bytes went."""
        return self.all_held_back([(sock, data)], metric, budget)[0]

    def all_held_back(self, pushes, metric=None, budget=BUDGET):
        """held_back for several (socket, data) pairs, one after the other,
        all unread; returns how many bytes went on each."""
        with RssWatch(self.node, HARD_CAP) as watch:
            sent = [push_until_stalled(sock, data) for sock, data in pushes]
            # Until the node's memory stopped growing (it did what it will
            # do with what it read), within SETTLE_MAX_S.
            watch.settle(SETTLE_S, SETTLE_MAX_S)
        print(f"{self.id()}: {watch.describe()}", file=sys.stderr)
        self.killed = watch.killed
        self.assertFalse(watch.killed, watch.describe())
        self.assertLess(watch.peak, budget, watch.describe())
        if metric is not None:
            self.assertGreater(metric_value(self.node, metric), 0, f"{metric} did not move")
        return sent

    def hold_publishes(self, topic, subscription):
        """Makes the backlog quota of public/default hold publishes to
        `topic` (whose producers are registered, and whose durable
        `subscription` has a backlog over 1 KiB); returns once a new
        producer is refused, so the hold is in force."""
        quota = {"limitSize": 1024, "limitTime": -1, "policy": "producer_request_hold"}
        self.assertEqual(self.node.http("POST", "/admin/v2/namespaces/public/default/backlogQuota", quota)[0], 204)
        deadline = time.monotonic() + TIMEOUT_S
        with PulsarWire(self.node.ports["pulsar"]) as probe:
            producer_id = 1
            while probe.create_producer(topic, producer_id).type != pb.BaseCommand.ERROR:
                self.assertLess(time.monotonic(), deadline, "the backlog quota never held")
                probe.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id)
                producer_id += 1
                time.sleep(0.05)

    def release_publishes(self, topic, subscription):
        """Lifts the hold: the subscription whose backlog made it goes."""
        path = f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[-1]}/subscription/{subscription}"
        self.assertEqual(self.node.http("DELETE", path + "?force=true")[0], 204)

    def add_subscription(self, topic, subscription):
        path = f"/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[-1]}/subscription/{subscription}"
        self.assertEqual(self.node.http("PUT", path + "?messageId=earliest")[0], 204)

    def consumer(self):
        return Consumer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}", "group.id": "check",
                         "enable.auto.commit": False})

    def test_kafka_produce_requests_pipelined_without_reading(self):
        topic, count, first, kinds = "pipelined-produce", 4000, 4, 61

        def value(i):
            """One of `kinds` values, 64 KiB each: their batches (and their
            checksums, slow in Python) are made once; a record out of place
            still shows unless it moved by a multiple of `kinds`."""
            return f"{i % kinds:08d}".encode() * (8 * 1024)

        batches = [record_batch([value(k)]) for k in range(kinds)]

        def produce_answer(response):
            """(correlation id, partition, error, base offset) of a one-partition Produce v3 response."""
            pos = 8 + 2 + struct.unpack_from(">h", response, 8)[0] + 4
            return (struct.unpack_from(">i", response, 0)[0],) + struct.unpack_from(">ihq", response, pos)

        client = RawKafkaConnection(self.node.ports["kafka"], "pipeliner", timeout=TIMEOUT_S)
        try:
            # The connection's producer is registered, and a backlog built,
            # before the quota holds its publishes.
            for i in range(first):
                client.sock.sendall(produce_request(i + 1, topic, value(i)))
                self.assertEqual(produce_answer(kafka_response(client.sock)), (i + 1, 0, 0, i))
                if i == 0:
                    self.add_subscription(topic, "hold")
            self.hold_publishes(topic, "hold")
            data = b"".join(produce_request(i + 1, topic, batch=batches[i % kinds]) for i in range(first, count))
            sent = self.held_back(client.sock, data, "magnetar_kafka_connection_pauses_total")
            self.assertLess(sent, len(data), "the node read everything the client pipelined")
            self.release_publishes(topic, "hold")
            client.sock.sendall(memoryview(data)[sent:])
            # In order; the base offsets of requests answered after a hold are
            # not checked here (the stored offsets are, below).
            for i in range(first, count):
                self.assertEqual(produce_answer(kafka_response(client.sock))[:3], (i + 1, 0, 0), f"response {i + 1}")
        finally:
            client.close()

        fresh = RawKafkaConnection(self.node.ports["kafka"], "fresh", timeout=TIMEOUT_S)
        try:
            correlation = fresh.send(18, 0, b"")  # ApiVersions v0
            self.assertEqual(struct.unpack_from(">ih", fresh.receive(), 0), (correlation, 0))
        finally:
            fresh.close()

        consumer = self.consumer()
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = 0
            deadline = time.monotonic() + TIMEOUT_S
            while got < count and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                self.assertIsNone(msg.error(), msg.error())
                self.assertEqual((msg.offset(), msg.value()), (got, value(got)), f"message {got}")
                got += 1
            self.assertEqual(got, count)
        finally:
            consumer.close()

    def test_kafka_fetch_requests_with_large_responses_pipelined_without_reading(self):
        topic, count, records = "pipelined-fetch", 300, 64
        values = [bytes([48 + i]) * (64 * 1024) for i in range(records)]  # 4 MiB to read back each time
        client = RawKafkaConnection(self.node.ports["kafka"], "pipeliner", timeout=TIMEOUT_S)
        try:
            for i, v in enumerate(values):
                client.sock.sendall(produce_request(i + 1, topic, v))
                response = kafka_response(client.sock)
                self.assertEqual(struct.unpack_from(">h", response, 8 + 2 + len(topic) + 4 + 4)[0], 0)
            data = b"".join(fetch_request(1000 + i, topic, 5 << 20) for i in range(count))
            self.held_back(client.sock, data)
            first = None
            for i in range(count):
                correlation, error, high_watermark, batches = parse_fetch_response(kafka_response(client.sock))
                self.assertEqual((correlation, error, high_watermark), (1000 + i, 0, records), f"response {i}")
                if first is None:
                    first = batches
                    self.assertGreater(len(first), records * 64 * 1024)
                self.assertEqual(batches, first, f"response {i}")
        finally:
            client.close()

        consumer = self.consumer()
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < records and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is not None:
                    self.assertIsNone(msg.error(), msg.error())
                    got.append(msg.value())
            self.assertEqual(got, values)
        finally:
            consumer.close()

    def test_pulsar_sends_pipelined_without_reading(self):
        topic, count, first = "persistent://public/default/pipelined-send", 6000, 4

        def payload(i):
            return f"{i:08d}".encode() * (8 * 1024)  # 64 KiB

        with PulsarWire(self.node.ports["pulsar"]) as client:
            # The producer is registered, and a backlog built, before the
            # quota holds its publishes.
            self.assertEqual(client.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.add_subscription(topic, "hold")
            for i in range(first):
                self.assertEqual(client.send(1, payload(i), sequence_id=i).type, pb.BaseCommand.SEND_RECEIPT)
            self.hold_publishes(topic, "hold")
            self.assertEqual((client.buf, client.pending), (b"", []))
            client.sock.settimeout(TIMEOUT_S)
            data = b"".join(send_frame(1, i, payload(i)) for i in range(first, count))
            sent = self.held_back(client.sock, data, "magnetar_pulsar_connection_pauses_total")
            self.assertLess(sent, len(data), "the node read everything the client pipelined")
            self.release_publishes(topic, "hold")
            client.sock.sendall(memoryview(data)[sent:])
            previous = None
            for i in range(first, count):
                f = pulsar_answer(client)
                self.assertEqual(f.type, pb.BaseCommand.SEND_RECEIPT, f"answer {i}: {f.cmd}")
                receipt = f.cmd.send_receipt
                self.assertEqual(receipt.sequence_id, i)
                position = (receipt.message_id.ledgerId, receipt.message_id.entryId)
                if previous is not None:
                    self.assertGreater(position, previous)
                previous = position

        with PulsarWire(self.node.ports["pulsar"]) as reader:
            answer = reader.subscribe(topic, "check", 1, initial="Earliest")
            self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
            got = 0
            while got < count:
                n = min(1000, count - got)
                reader.flow(1, n)
                for f in reader.receive(1, n, timeout=TIMEOUT_S):
                    self.assertEqual(f.payload, payload(got), f"message {got}")
                    got += 1

    def test_pulsar_schema_requests_with_large_answers_pipelined_without_reading(self):
        topic, count = "persistent://public/default/pipelined-schema", 3000
        definition = b"{" + b"x" * (512 * 1024) + b"}"  # half the largest schema
        with PulsarWire(self.node.ports["pulsar"]) as client:
            created = client.request("GET_OR_CREATE_SCHEMA", ["GET_OR_CREATE_SCHEMA_RESPONSE"], topic=topic,
                                     schema=pb.Schema(name="big", schema_data=definition, type=pb.Schema.Json))
            self.assertFalse(created.cmd.getOrCreateSchemaResponse.HasField("error_code"), created.cmd)
            self.assertEqual((client.buf, client.pending), (b"", []))
            client.sock.settimeout(TIMEOUT_S)
            data = b"".join(encode(command("GET_SCHEMA", request_id=1000 + i, topic=topic)) for i in range(count))
            self.held_back(client.sock, data)
            answered = set()
            while len(answered) < count:
                f = pulsar_answer(client)
                self.assertEqual(f.type, pb.BaseCommand.GET_SCHEMA_RESPONSE, f.cmd.type)
                answer = f.cmd.getSchemaResponse
                self.assertFalse(answer.HasField("error_code"), answer.error_message)
                self.assertEqual(answer.schema.schema_data, definition)
                answered.add(answer.request_id)
            self.assertEqual(answered, set(range(1000, 1000 + count)))

        with PulsarWire(self.node.ports["pulsar"]) as fresh:
            self.assertEqual(fresh.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic)
                             .cmd.getSchemaResponse.schema.schema_data, definition)

    def wide_namespace(self, topics=20, partitions=10000):
        """Makes public/default hold `topics` partitioned topics of
        `partitions` partitions each (metadata only: a partition gets its
        log on first use); returns {local name: partitions}."""
        for i in range(topics):
            status, body, _ = self.node.http("PUT", f"/admin/v2/persistent/public/default/wide-{i}/partitions",
                                             str(partitions), headers={"Content-Type": "application/json"})
            self.assertEqual(status, 204, body)
        return {f"wide-{i}": partitions for i in range(topics)}

    def test_kafka_metadata_requests_for_a_large_namespace_pipelined_without_reading(self):
        """Metadata for every topic is a small request whose response grows
        with the namespace: 200,000 partitions make each one about 5 MB."""
        expected = self.wide_namespace()
        clients, count = 2, 40
        conns = [RawKafkaConnection(self.node.ports["kafka"], "pipeliner", timeout=TIMEOUT_S) for _ in range(clients)]
        try:
            data = b"".join(metadata_request(1000 + i) for i in range(count))
            self.all_held_back([(c.sock, data) for c in conns], budget=METADATA_BUDGET)
            for k, c in enumerate(conns):
                first = None
                for i in range(count):
                    response = kafka_response(c.sock)
                    if first is None:
                        self.assertEqual(parse_metadata_response(response), (1000, expected), f"client {k}")
                        first = response[4:]
                    self.assertEqual(struct.unpack_from(">i", response)[0], 1000 + i, f"client {k}, response {i}")
                    self.assertEqual(response[4:], first, f"client {k}, response {i}")
        finally:
            for c in conns:
                c.close()

    def test_pulsar_topic_lists_of_a_large_namespace_pipelined_without_reading(self):
        """GET_TOPICS_OF_NAMESPACE is a small request whose answer grows
        with the namespace: 200,000 partitions make each one about 9 MB."""
        wide = self.wide_namespace()
        expected = sorted(f"persistent://public/default/{name}-partition-{k}"
                          for name, partitions in wide.items() for k in range(partitions))
        clients, count = 2, 40
        wires = [PulsarWire(self.node.ports["pulsar"]) for _ in range(clients)]
        try:
            for w in wires:
                self.assertEqual((w.buf, w.pending), (b"", []))
                w.sock.settimeout(TIMEOUT_S)
            data = b"".join(encode(command("GET_TOPICS_OF_NAMESPACE", request_id=1000 + i, namespace="public/default",
                                           mode=pb.CommandGetTopicsOfNamespace.PERSISTENT)) for i in range(count))
            self.all_held_back([(w.sock, data) for w in wires])
            for k, w in enumerate(wires):
                answered = set()
                while len(answered) < count:
                    f = pulsar_answer(w)
                    self.assertEqual(f.type, pb.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE, f"client {k}: {f.cmd}")
                    answer = f.cmd.getTopicsOfNamespaceResponse
                    self.assertEqual(sorted(answer.topics), expected, f"client {k}, request {answer.request_id}")
                    answered.add(answer.request_id)
                self.assertEqual(answered, set(range(1000, 1000 + count)), f"client {k}")
        finally:
            for w in wires:
                w.close()

    def http_clients(self, count):
        return [socket.create_connection(("127.0.0.1", self.node.ports["http"]), timeout=TIMEOUT_S)
                for _ in range(count)]

    def pipelined_http(self, clients, data, count):
        """`clients` keep-alive connections each send `data` (`count`
        requests) without reading until the node stops reading them, within
        the HTTP budget; then each sends the rest and reads its answers in
        order. Yields (request index, status, body) for every answer."""
        socks = self.http_clients(clients)
        try:
            sent = self.all_held_back([(sock, data) for sock in socks], budget=HTTP_BUDGET)
            for sock, went in zip(socks, sent):
                sock.sendall(memoryview(data)[went:])
                reader = sock.makefile("rb")
                for i in range(count):
                    status, _, body = http_answer(reader)
                    yield i, status, body
        finally:
            for sock in socks:
                sock.close()

    def test_http_requests_pipelined_without_reading(self):
        """Keep-alive requests, each waiting for the metadata thread
        (/admin/v2/tenants) or answered at once (health), 4 KiB of headers
        each: the session stops reading while one is being answered."""
        clients, count = 8, 8000
        padding = "X-Padding: " + "p" * 4096 + "\r\n"
        paths = ["/admin/v2/tenants", "/admin/v2/brokers/health"]
        data = "".join(f"GET {paths[i % 2]} HTTP/1.1\r\nHost: node\r\n{padding}\r\n" for i in range(count)).encode()
        expected = [self.node.get(path)[1] for path in paths]
        for i, status, body in self.pipelined_http(clients, data, count):
            self.assertEqual((status, body), (200, expected[i % 2]), f"answer {i}")
        self.assertEqual(self.node.get("/admin/v2/brokers/health")[:2], (200, b"ok"))

    def test_http_large_answers_pipelined_without_reading(self):
        """Requests for the console's script, each answered at once with
        about 100 KiB: the session stops decoding while its output is over
        the connection's high watermark."""
        clients, count = 4, 2000
        status, index, _ = self.node.get("/")
        self.assertEqual(status, 200)
        script = re.search(rb'src="(/assets/[^"]+\.js)"', index).group(1).decode()
        status, expected, _ = self.node.get(script)
        self.assertEqual(status, 200)
        self.assertGreater(len(expected), 32 * 1024)
        data = f"GET {script} HTTP/1.1\r\nHost: node\r\n\r\n".encode() * count
        for i, status, body in self.pipelined_http(clients, data, count):
            self.assertEqual(status, 200, f"answer {i}")
            self.assertEqual(body, expected, f"answer {i}")


if __name__ == "__main__":
    unittest.main()
