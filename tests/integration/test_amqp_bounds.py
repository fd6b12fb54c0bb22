"""What an AMQP 0-9-1 client can make the node hold is bounded.

- A content header announcing a body larger than the largest message is
  refused at once (channel.close 406 PRECONDITION_FAILED): the body frames
  that follow are dropped, never gathered, however many the client sends.
- Methods and publishes that wait on a channel behind its publishes in
  flight count against the connection's bound with those publishes: a
  client that pipelines thousands of publishes behind one that a backlog
  quota holds is stopped (the node stops reading), and everything it sent
  is stored, in order, once the quota is lifted.
- Publishes and acknowledgements a transaction holds until tx.commit are
  bounded per connection, in count and in body bytes: past either the
  channel is closed (406 PRECONDITION_FAILED, the limit in its text),
  having held no more than the bound; the connection goes on, and a
  transaction within the bounds commits as before.

Raw frames (tests/utils/amqp_wire.py); a node of its own per test. The
bounds asserted are memory, never time; every wait is bounded."""
import struct
import sys
import time
import unittest

import pulsar_api_pb2 as pb
from amqp_wire import AmqpWire, frame, method, shortstr, table
from magnetar_harness import NodePerTestCase, push_until_stalled
from memory_watch import MB, RssWatch
from pulsar_wire import PulsarWire

GROWTH_BUDGET = 150 * MB  # how much the node's VmRSS may grow while one client sends
HARD_CAP = 1500 * MB
TIMEOUT_S = 60


def publish_frames(channel, key, body, frame_max=131072):
    """basic.publish to the default exchange with its content header and body frames."""
    out = method(channel, 60, 40, struct.pack(">H", 0) + shortstr("") + shortstr(key) + b"\x00")
    out += frame(2, channel, struct.pack(">HHQH", 60, 0, len(body), 0))
    chunk = frame_max - 8
    for i in range(0, len(body), chunk):
        out += frame(3, channel, body[i:i + chunk])
    return out


def declare_passive(w, queue):
    """The message count a passive queue.declare answers."""
    w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr(queue) + b"\x01" + table()))
    _, cls, mth, args = w.read_method(timeout=TIMEOUT_S)
    assert (cls, mth) == (50, 11), (cls, mth)
    return struct.unpack(">I", args[1 + args[0]:5 + args[0]])[0]


class AmqpBoundsTest(NodePerTestCase):
    def setUp(self):
        super().setUp()
        self.port = self.node.ports["amqp"]

    def pushed_while_watched(self, w, data):
        """Sends `data` until all of it went or the node stopped reading,
        lets the node work on it for a second, all under a memory watch that
        must not have killed the node: (bytes sent, the watch, the node's
        memory before)."""
        with RssWatch(self.node, HARD_CAP) as watch:
            start = watch.peak
            sent = push_until_stalled(w.sock, data, timeout=TIMEOUT_S)
            time.sleep(1.0)
        print(f"{self.id()}: {watch.describe()}, from {start / MB:.0f} MB", file=sys.stderr)
        self.assertFalse(watch.killed, watch.describe())
        return sent, watch, start

    def test_a_body_over_the_largest_message_is_refused_at_its_header(self):
        chunk = frame(3, 1, b"b" * (131072 - 8))
        with AmqpWire(self.port) as w:
            w.handshake()
            w.open_channel(1)
            w.send(method(1, 60, 40, struct.pack(">H", 0) + shortstr("") + shortstr("q") + b"\x00"))
            w.send(frame(2, 1, struct.pack(">HHQH", 60, 0, 1 << 30, 0)))  # a 1 GiB body announced
            channel, cls, code, text = w.read_close(timeout=TIMEOUT_S)
            self.assertEqual((channel, cls, code), (1, 20, 406), text)
            with RssWatch(self.node, HARD_CAP) as watch:
                start = watch.peak
                for _ in range(256 * MB // len(chunk)):  # 256 MiB of it anyway
                    w.send(chunk)
            print(f"{self.id()}: {watch.describe()}, from {start / MB:.0f} MB", file=sys.stderr)
            self.assertLess(watch.peak - start, GROWTH_BUDGET, watch.describe())
            w.send(method(1, 20, 41))  # channel.close-ok
            # The connection goes on.
            w.open_channel(2)
            w.send(method(2, 50, 10, struct.pack(">H", 0) + shortstr("after") + b"\x00" + table()))
            self.assertEqual(w.read_method(timeout=TIMEOUT_S)[1:3], (50, 11))

    def test_work_waiting_behind_held_publishes_is_bounded(self):
        ns = "/admin/v2/namespaces/public/held"
        self.assertEqual(self.node.http("PUT", ns)[0], 204)
        topic = "persistent://public/held/q"
        count, body = 16000, b"p" * (16 * 1024)  # 250 MiB behind one held publish
        with AmqpWire(self.port) as w:
            w.handshake(vhost="public/held")
            w.open_channel(1)
            w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr("q") + b"\x00" + table()))
            self.assertEqual(w.read_method(timeout=TIMEOUT_S)[1:3], (50, 11))
            # Stored before the quota holds: a backlog over its limit, and
            # this connection the queue's producer.
            for _ in range(4):
                w.send(publish_frames(1, "q", b"b" * 600))
            self.assertEqual(declare_passive(w, "q"), 4)
            quota = {"limitSize": 1024, "limitTime": -1, "policy": "producer_request_hold"}
            self.assertEqual(self.node.http("POST", ns + "/backlogQuota", quota)[0], 204)
            with PulsarWire(self.node.ports["pulsar"]) as probe:
                deadline = time.monotonic() + TIMEOUT_S
                producer_id = 1
                while probe.create_producer(topic, producer_id).type != pb.BaseCommand.ERROR:
                    self.assertLess(time.monotonic(), deadline, "the backlog quota never held")
                    probe.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id)
                    producer_id += 1
                    time.sleep(0.05)
            # One publish held in flight, a method waiting behind it, and
            # thousands of publishes behind that.
            w.send(publish_frames(1, "q", body))
            w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr("q") + b"\x01" + table()))
            data = b"".join(publish_frames(1, "q", body) for _ in range(count))
            sent, watch, start = self.pushed_while_watched(w, data)
            self.assertLess(sent, len(data), "the node read everything the client pipelined")
            self.assertLess(watch.peak - start, GROWTH_BUDGET, watch.describe())
            # Lifted: the held publish is stored, then the declare that
            # waited behind it is answered, then the rest is stored.
            self.assertEqual(self.node.http("DELETE", ns + "/backlogQuota")[0], 204)
            w.sock.sendall(memoryview(data)[sent:])
            _, cls, mth, args = w.read_method(timeout=TIMEOUT_S)
            self.assertEqual((cls, mth), (50, 11))
            self.assertEqual(struct.unpack(">I", args[1 + args[0]:5 + args[0]])[0], 5)
            self.assertEqual(declare_passive(w, "q"), 5 + count)

    def declared(self, w, queue):
        """Handshakes and declares `queue` on channel 1."""
        w.handshake()
        w.open_channel(1)
        w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr(queue) + b"\x00" + table()))
        self.assertEqual(w.read_method(timeout=TIMEOUT_S)[1:3], (50, 11))

    def tx_channel(self, w, channel):
        """Opens `channel` and makes it transactional."""
        w.open_channel(channel)
        w.send(method(channel, 90, 10))  # tx.select
        self.assertEqual(w.read_method(timeout=TIMEOUT_S)[:3], (channel, 90, 11))

    def test_publishes_held_by_a_transaction_are_bounded(self):
        count, body = 20000, b"t" * (16 * 1024)  # 312 MiB, never committed
        with AmqpWire(self.port) as w:
            self.declared(w, "tx")
            self.tx_channel(w, 2)
            data = b"".join(publish_frames(2, "tx", body) for _ in range(count))
            sent, watch, start = self.pushed_while_watched(w, data)
            self.assertLess(watch.peak - start, GROWTH_BUDGET, watch.describe())
            channel, cls, code, text = w.read_close(timeout=TIMEOUT_S)
            self.assertEqual((channel, cls, code), (2, 20, 406), text)
            self.assertIn("transaction limit", text)
            self.assertIn(str(64 << 20), text)
            w.sock.sendall(memoryview(data)[sent:])
            w.send(method(2, 20, 41))  # channel.close-ok
            # Nothing of the closed transaction was stored; one within the
            # bounds commits.
            self.tx_channel(w, 3)
            w.send(b"".join(publish_frames(3, "tx", body) for _ in range(10)))
            w.send(method(3, 90, 20))  # tx.commit
            self.assertEqual(w.read_method(timeout=TIMEOUT_S)[:3], (3, 90, 21))
            self.assertEqual(declare_passive(w, "tx"), 10)

    def test_transaction_publish_count_is_bounded(self):
        limit = 10000
        with AmqpWire(self.port) as w:
            self.declared(w, "txn")
            self.tx_channel(w, 2)
            # The whole bound, held by one channel's transaction and rolled
            # back: the room is there again.
            w.send(b"".join(publish_frames(2, "txn", b"") for _ in range(limit)))
            w.send(method(2, 90, 30))  # tx.rollback
            self.assertEqual(w.read_method(timeout=TIMEOUT_S)[:3], (2, 90, 31))
            w.send(b"".join(publish_frames(2, "txn", b"") for _ in range(limit)))
            self.tx_channel(w, 3)
            w.send(publish_frames(3, "txn", b"one too many"))
            channel, cls, code, text = w.read_close(timeout=TIMEOUT_S)
            self.assertEqual((channel, cls, code), (3, 20, 406), text)
            self.assertIn(f"at most {limit} publishes and acknowledgements", text)
            w.send(method(3, 20, 41))  # channel.close-ok
            # Channel 2's transaction is intact and commits.
            w.send(method(2, 90, 20))
            self.assertEqual(w.read_method(timeout=TIMEOUT_S)[:3], (2, 90, 21))
            self.assertEqual(declare_passive(w, "txn"), limit)


if __name__ == "__main__":
    unittest.main()
