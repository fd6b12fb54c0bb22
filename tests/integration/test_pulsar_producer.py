"""The producer side over the real Pulsar wire: deduplication by producer
name and sequence id, access modes, backlog quotas and keep-alive PINGs.

Frames are built with the protobuf classes protoc generates from our own
pulsar_api.proto (python3-protobuf), so every field is the real one."""
import atexit
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from magnetar_harness import Node, call_json

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "src", "protocol", "pulsar")
WAIT_S = 20.0


def load_proto():
    out = tempfile.mkdtemp(prefix="magnetar-proto-")
    atexit.register(shutil.rmtree, out, True)
    subprocess.run(["protoc", f"--python_out={out}", f"-I{PROTO_DIR}", "pulsar_api.proto"], check=True)
    sys.path.insert(0, out)
    import pulsar_api_pb2  # noqa: E402
    return pulsar_api_pb2


pb = load_proto()
BC = pb.BaseCommand
DUPLICATE_ID = 2**64 - 1  # (-1, -1) on the wire


class Wire:
    """One Pulsar connection speaking frames; every read is bounded."""

    def __init__(self, port, answer_pings=True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.buf = b""
        self.answer_pings = answer_pings
        self.pings = 0
        self.backlog = []  # commands read while waiting for another type
        self.last_message_id = None  # of the last MESSAGE received
        c = BC(type=BC.CONNECT)
        c.connect.client_version = "producer-test"
        c.connect.protocol_version = 19
        self.send(c)
        self.expect(BC.CONNECTED)

    def close(self):
        self.sock.close()

    def send(self, cmd):
        body = cmd.SerializeToString()
        self.sock.sendall(struct.pack(">II", len(body) + 4, len(body)) + body)

    def send_payload(self, cmd, metadata, payload):
        body = cmd.SerializeToString()
        md = metadata.SerializeToString()
        rest = struct.pack(">I", len(md)) + md + payload  # no checksum magic: allowed
        self.sock.sendall(struct.pack(">II", len(body) + 4 + len(rest), len(body)) + body + rest)

    def _read_exact(self, n, deadline):
        while len(self.buf) < n:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed by the broker")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read(self, timeout=WAIT_S):
        """(BaseCommand, MessageMetadata or None, payload bytes or None)."""
        deadline = time.monotonic() + timeout
        total = struct.unpack(">I", self._read_exact(4, deadline))[0]
        frame = self._read_exact(total, deadline)
        size = struct.unpack(">I", frame[:4])[0]
        cmd = BC()
        cmd.ParseFromString(frame[4:4 + size])
        rest = frame[4 + size:]
        md = payload = None
        if rest:
            if rest[:2] == b"\x0e\x01":
                rest = rest[6:]
            md_size = struct.unpack(">I", rest[:4])[0]
            md = pb.MessageMetadata()
            md.ParseFromString(rest[4:4 + md_size])
            payload = rest[4 + md_size:]
        if cmd.type == BC.PING:
            self.pings += 1
            if self.answer_pings:
                self.send(BC(type=BC.PONG))
        return cmd, md, payload

    def expect(self, *types, timeout=WAIT_S):
        """The next command of one of `types` (earlier others are kept)."""
        for i, (cmd, md, payload) in enumerate(self.backlog):
            if cmd.type in types:
                del self.backlog[i]
                return cmd
        deadline = time.monotonic() + timeout
        while True:
            cmd, md, payload = self.read(max(0.01, deadline - time.monotonic()))
            if cmd.type in types:
                return cmd
            if cmd.type not in (BC.PING, BC.PONG):
                self.backlog.append((cmd, md, payload))

    # --- Producing.
    def producer(self, topic, producer_id, request_id, name=None, mode=None):
        c = BC(type=BC.PRODUCER)
        c.producer.topic = topic
        c.producer.producer_id = producer_id
        c.producer.request_id = request_id
        if name is not None:
            c.producer.producer_name = name
        if mode is not None:
            c.producer.producer_access_mode = mode
        self.send(c)

    def open_producer(self, topic, producer_id, request_id, name=None, mode=None):
        self.producer(topic, producer_id, request_id, name, mode)
        r = self.expect(BC.PRODUCER_SUCCESS, BC.ERROR)
        if r.type == BC.ERROR:
            raise AssertionError(f"PRODUCER refused: {r.error.message}")
        return r.producer_success

    def send_message(self, producer_id, name, sequence_id, payload, batch=0):
        """SEND of one message, or of a batch entry of `batch` messages with
        sequence ids sequence_id .. sequence_id + batch - 1."""
        c = BC(type=BC.SEND)
        c.send.producer_id = producer_id
        c.send.sequence_id = sequence_id
        md = pb.MessageMetadata(producer_name=name, sequence_id=sequence_id,
                                publish_time=int(time.time() * 1000))
        if batch:
            c.send.num_messages = batch
            c.send.highest_sequence_id = sequence_id + batch - 1
            md.num_messages_in_batch = batch
        self.send_payload(c, md, payload)

    def publish(self, producer_id, name, sequence_id, payload):
        """SEND, then its SEND_RECEIPT or SEND_ERROR."""
        self.send_message(producer_id, name, sequence_id, payload)
        return self.expect(BC.SEND_RECEIPT, BC.SEND_ERROR)

    def close_producer(self, producer_id, request_id):
        c = BC(type=BC.CLOSE_PRODUCER)
        c.close_producer.producer_id = producer_id
        c.close_producer.request_id = request_id
        self.send(c)
        self.expect(BC.SUCCESS)

    # --- Consuming.
    def subscribe(self, topic, sub, consumer_id, request_id):
        c = BC(type=BC.SUBSCRIBE)
        c.subscribe.topic = topic
        c.subscribe.subscription = sub
        c.subscribe.subType = pb.CommandSubscribe.Exclusive
        c.subscribe.consumer_id = consumer_id
        c.subscribe.request_id = request_id
        c.subscribe.initialPosition = pb.CommandSubscribe.Earliest
        self.send(c)
        r = self.expect(BC.SUCCESS, BC.ERROR)
        assert r.type == BC.SUCCESS, r

    def flow(self, consumer_id, permits):
        c = BC(type=BC.FLOW)
        c.flow.consumer_id = consumer_id
        c.flow.messagePermits = permits
        self.send(c)

    def receive_all(self, consumer_id, quiet_s=1.0, at_least=0, limit=100000):
        """(sequence id, payload) of every MESSAGE: at least `at_least` of
        them (each within WAIT_S), then until none comes for quiet_s. Other
        commands are kept for expect()."""
        got = []
        self.flow(consumer_id, limit)
        while True:
            try:
                cmd, md, payload = self.read(WAIT_S if len(got) < at_least else quiet_s)
            except (socket.timeout, TimeoutError):
                return got
            if cmd.type == BC.MESSAGE:
                got.append((md.sequence_id, payload))
                self.last_message_id = cmd.message.message_id
            elif cmd.type not in (BC.PING, BC.PONG):
                self.backlog.append((cmd, md, payload))


def set_policy(node, ns, path, body):
    status, reply = call_json(node, "POST", f"/admin/v2/namespaces/{ns}/{path}", body)
    assert status in (200, 204), (status, reply)


def create_namespace(node, ns):
    status, reply = call_json(node, "PUT", f"/admin/v2/namespaces/{ns}", {})
    assert status in (200, 204), (status, reply)


def restart(node):
    """A clean restart: policies are loaded before the first topic is."""
    assert node.stop() == 0
    node.log.close()
    node.start()


class ProducerTestBase(unittest.TestCase):
    node_args = ()

    def setUp(self):
        self.node = Node(*self.node_args, keep_data=True).start()
        self.wires = []

    def tearDown(self):
        for w in self.wires:
            w.close()
        code = self.node.stop()
        self.node.keep_data = False
        self.node.close()
        self.assertEqual(code, 0)

    def wire(self, **kw):
        w = Wire(self.node.ports["pulsar"], **kw)
        self.wires.append(w)
        return w


class DeduplicationTest(ProducerTestBase):
    TOPIC = "persistent://public/dedup/orders"

    def setUp(self):
        super().setUp()
        create_namespace(self.node, "public/dedup")
        set_policy(self.node, "public/dedup", "deduplication", True)
        restart(self.node)

    def test_a_resent_sequence_id_is_answered_minus_one_and_not_stored(self):
        w = self.wire()
        w.subscribe(self.TOPIC, "all", 1, 1)
        w.open_producer(self.TOPIC, 1, 2, name="app")
        for seq in range(3):
            r = w.publish(1, "app", seq, b"m%d" % seq)
            self.assertEqual(r.type, BC.SEND_RECEIPT)
            self.assertNotEqual(r.send_receipt.message_id.ledgerId, DUPLICATE_ID)
        again = w.publish(1, "app", 1, b"m1")
        self.assertEqual(again.type, BC.SEND_RECEIPT)
        self.assertEqual(again.send_receipt.sequence_id, 1)
        self.assertEqual(again.send_receipt.message_id.ledgerId, DUPLICATE_ID)
        self.assertEqual(again.send_receipt.message_id.entryId, DUPLICATE_ID)
        got = w.receive_all(1, at_least=3)
        self.assertEqual([s for s, _ in got], [0, 1, 2])

    def test_a_batch_counts_through_its_highest_sequence_id(self):
        w = self.wire()
        w.open_producer(self.TOPIC, 1, 1, name="batcher")
        w.send_message(1, "batcher", 10, b"batch of five", batch=5)
        r = w.expect(BC.SEND_RECEIPT, BC.SEND_ERROR)
        self.assertEqual(r.type, BC.SEND_RECEIPT)
        self.assertEqual(r.send_receipt.highest_sequence_id, 14)
        self.assertNotEqual(r.send_receipt.message_id.ledgerId, DUPLICATE_ID)
        again = w.publish(1, "batcher", 12, b"inside the batch")
        self.assertEqual(again.send_receipt.message_id.ledgerId, DUPLICATE_ID)
        after = w.publish(1, "batcher", 15, b"next")
        self.assertNotEqual(after.send_receipt.message_id.ledgerId, DUPLICATE_ID)
        w.close_producer(1, 2)
        self.assertEqual(w.open_producer(self.TOPIC, 1, 3, name="batcher").last_sequence_id, 15)

    def test_the_last_sequence_id_survives_a_restart(self):
        w = self.wire()
        w.open_producer(self.TOPIC, 1, 1, name="app")
        for seq in range(5):
            self.assertEqual(w.publish(1, "app", seq, b"x").type, BC.SEND_RECEIPT)
        w.close()
        self.wires.remove(w)
        restart(self.node)
        w = self.wire()
        ok = w.open_producer(self.TOPIC, 1, 1, name="app")
        self.assertEqual(ok.last_sequence_id, 4)
        other = w.open_producer(self.TOPIC, 2, 2, name="newcomer")
        self.assertEqual(other.last_sequence_id, -1)
        r = w.publish(1, "app", 4, b"x")
        self.assertEqual(r.send_receipt.message_id.ledgerId, DUPLICATE_ID)


class AccessModeTest(ProducerTestBase):
    TOPIC = "persistent://public/default/access"

    def test_exclusive_is_refused_beside_a_shared_producer_and_keeps_shared_ones_out(self):
        a, b = self.wire(), self.wire()
        a.open_producer(self.TOPIC, 1, 1, name="shared-a")
        b.producer(self.TOPIC, 1, 1, name="excl", mode=pb.Exclusive)
        err = b.expect(BC.ERROR)
        self.assertEqual(err.error.error, pb.ProducerFenced)
        a.close_producer(1, 2)
        b.open_producer(self.TOPIC, 2, 2, name="excl", mode=pb.Exclusive)
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/access/stats")
        self.assertEqual(status, 200, stats)
        self.assertEqual([(p["producerName"], p["accessMode"]) for p in stats["publishers"]], [("excl", "Exclusive")])
        a.producer(self.TOPIC, 3, 3, name="shared-b")
        err = a.expect(BC.ERROR)
        self.assertEqual(err.error.error, pb.ProducerBusy)

    def test_wait_for_exclusive_is_made_ready_when_the_holder_leaves(self):
        a, b = self.wire(), self.wire()
        first = a.open_producer(self.TOPIC, 1, 1, name="first", mode=pb.Exclusive)
        b.producer(self.TOPIC, 1, 7, name="second", mode=pb.WaitForExclusive)
        waiting = b.expect(BC.PRODUCER_SUCCESS)
        self.assertEqual(waiting.producer_success.request_id, 7)
        self.assertFalse(waiting.producer_success.producer_ready)
        a.close_producer(1, 2)
        ready = b.expect(BC.PRODUCER_SUCCESS)
        self.assertEqual(ready.producer_success.request_id, 7)
        self.assertTrue(ready.producer_success.producer_ready)
        self.assertGreater(ready.producer_success.topic_epoch, first.topic_epoch)
        self.assertEqual(b.publish(1, "second", 0, b"mine").type, BC.SEND_RECEIPT)

    def test_exclusive_with_fencing_closes_the_other_producers(self):
        a, b = self.wire(), self.wire()
        a.open_producer(self.TOPIC, 1, 1, name="old")
        b.open_producer(self.TOPIC, 1, 1, name="new", mode=pb.ExclusiveWithFencing)
        closed = a.expect(BC.CLOSE_PRODUCER)
        self.assertEqual(closed.close_producer.producer_id, 1)
        r = a.publish(1, "old", 0, b"too late")
        self.assertEqual(r.type, BC.SEND_ERROR)


class BacklogQuotaTest(ProducerTestBase):
    def quota(self, ns, policy, limit=2000):
        create_namespace(self.node, ns)
        set_policy(self.node, ns, "backlogQuota", {"limitSize": limit, "limitTime": -1, "policy": policy})
        restart(self.node)

    def fill(self, w, topic, name, count=40):
        """Sends 200-byte messages until one is refused; the last answer."""
        w.open_producer(topic, 1, 10, name=name)
        for seq in range(count):
            w.send_message(1, name, seq, b"x" * 200)
            r = w.expect(BC.SEND_RECEIPT, BC.SEND_ERROR, BC.CLOSE_PRODUCER)
            if r.type != BC.SEND_RECEIPT:
                return r
        return None

    def test_producer_exception_closes_the_producer_and_refuses_new_ones(self):
        self.quota("public/qexc", "producer_exception")
        topic = "persistent://public/qexc/t"
        w = self.wire()
        w.subscribe(topic, "slow", 1, 1)
        stop = self.fill(w, topic, "p")
        self.assertIsNotNone(stop, "the quota never acted")
        self.assertIn(stop.type, (BC.CLOSE_PRODUCER, BC.SEND_ERROR))
        w.producer(topic, 2, 20, name="q")
        err = w.expect(BC.ERROR)
        self.assertEqual(err.error.error, pb.ProducerBlockedQuotaExceededException)

    def test_producer_request_hold_refuses_new_producers_and_holds_sends(self):
        self.quota("public/qhold", "producer_request_hold")
        topic = "persistent://public/qhold/t"
        w, other = self.wire(), self.wire()
        w.subscribe(topic, "slow", 1, 1)
        w.open_producer(topic, 1, 10, name="p")
        # Fill the backlog until a new producer is refused: the quota holds.
        stored = 0
        for seq in range(40):
            r = w.publish(1, "p", seq, b"x" * 200)
            self.assertEqual(r.type, BC.SEND_RECEIPT)
            stored += 1
            other.producer(topic, 100 + seq, 100 + seq, name=f"q{seq}")
            answer = other.expect(BC.PRODUCER_SUCCESS, BC.ERROR)
            if answer.type == BC.ERROR:
                self.assertEqual(answer.error.error, pb.ProducerBlockedQuotaExceededError)
                break
            other.close_producer(100 + seq, 1000 + seq)
        else:
            self.fail("the quota never held")
        # A send now is held: no answer while the backlog stays.
        w.send_message(1, "p", stored, b"held")
        with self.assertRaises((socket.timeout, TimeoutError)):
            w.expect(BC.SEND_RECEIPT, BC.SEND_ERROR, timeout=1.0)
        # The consumer catches up and acknowledges: the held send is stored.
        got = w.receive_all(1, quiet_s=1.0, at_least=stored)
        self.assertEqual([s for s, _ in got], list(range(stored)))
        c = BC(type=BC.ACK)
        c.ack.consumer_id = 1
        c.ack.ack_type = pb.CommandAck.Cumulative
        c.ack.message_id.add().CopyFrom(w.last_message_id)
        w.send(c)
        r = w.expect(BC.SEND_RECEIPT, timeout=WAIT_S)
        self.assertEqual(r.send_receipt.sequence_id, stored)

    def test_consumer_backlog_eviction_keeps_producers_going(self):
        self.quota("public/qevict", "consumer_backlog_eviction")
        topic = "persistent://public/qevict/t"
        w = self.wire()
        w.subscribe(topic, "slow", 1, 1)
        self.assertIsNone(self.fill(w, topic, "p", count=40))
        got = w.receive_all(1)
        self.assertLess(len(got), 40)
        self.assertGreater(len(got), 0)
        # What is left is the newest messages, in order.
        seqs = [s for s, _ in got]
        self.assertEqual(seqs, list(range(40 - len(seqs), 40)))


class KeepAliveTest(ProducerTestBase):
    node_args = ("--keepalive-secs", "1")

    def test_a_silent_connection_is_pinged_then_closed(self):
        w = self.wire(answer_pings=False)
        closed = False
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                w.read(timeout=deadline - time.monotonic())
            except ConnectionError:
                closed = True
                break
        self.assertGreaterEqual(w.pings, 1)
        self.assertTrue(closed)

    def test_a_connection_that_answers_pings_stays_open(self):
        w = self.wire(answer_pings=True)
        deadline = time.monotonic() + 4.0
        while w.pings < 3 and time.monotonic() < deadline + WAIT_S:
            w.read(timeout=WAIT_S)
        self.assertGreaterEqual(w.pings, 3)
        w.open_producer("persistent://public/default/alive", 1, 1, name="still-here")


if __name__ == "__main__":
    unittest.main()
