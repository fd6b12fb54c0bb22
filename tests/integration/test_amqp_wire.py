"""AMQP 0-9-1 at the protocol level, against the real binary: the handshake,
heartbeats both ways, bad input (a wrong protocol header, garbage frames,
frame-max violations, unknown classes and methods, frames out of order),
each answered with the protocol's own error while the broker keeps serving
and keeps what it stored; and messages crossing between AMQP and Pulsar."""
import json
import struct
import subprocess
import time
import unittest

import pika

import pulsar_api_pb2 as pb
from amqp_wire import HEADER, AmqpWire, frame, method, shortstr, table
from magnetar_harness import NodeTestCase
from pulsar_wire import PulsarWire

TIMEOUT_S = 10.0


def publish_frames(channel, exchange, key, body, frame_max=131072):
    """basic.publish with its content header and body frames."""
    out = method(channel, 60, 40, struct.pack(">H", 0) + shortstr(exchange) + shortstr(key) + b"\x00")
    out += frame(2, channel, struct.pack(">HHQH", 60, 0, len(body), 0))
    chunk = frame_max - 8
    for i in range(0, len(body), chunk):
        out += frame(3, channel, body[i:i + chunk])
    return out


def wait_for_get(ch, queue):
    """basic.get on `queue` until a message comes (bounded)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        got = ch.basic_get(queue, auto_ack=True)
        if got[0] is not None:
            return got
        time.sleep(0.05)
    raise AssertionError(f"nothing arrived in {queue}")


class AmqpWireTest(NodeTestCase):
    def setUp(self):
        self.port = self.node.ports["amqp"]

    def pika_channel(self):
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port, socket_timeout=TIMEOUT_S))
        self.addCleanup(lambda: conn.is_open and conn.close())
        return conn.channel()

    def assert_still_serving(self, queue):
        """A fresh client can still publish and read back through `queue`."""
        ch = self.pika_channel()
        ch.queue_declare(queue)
        ch.basic_publish("", queue, b"alive")
        self.assertEqual(ch.basic_get(queue, auto_ack=True)[2], b"alive")

    def test_handshake_offers_mechanisms_and_tunes(self):
        with AmqpWire(self.port) as w:
            w.send(HEADER)
            _, cls, mth, args = w.read_method()
            self.assertEqual((cls, mth), (10, 10))
            self.assertEqual(args[:2], b"\x00\x09")
            self.assertIn(b"PLAIN AMQPLAIN", args)
            self.assertIn(b"publisher_confirms", args)
            w.buf = b""
            w.close()
        with AmqpWire(self.port) as w:
            channel_max, frame_max, heartbeat = w.handshake()
            self.assertEqual((channel_max, frame_max, heartbeat), (2047, 131072, 60))
            w.open_channel(1)

    def test_amqplain_login(self):
        with AmqpWire(self.port) as w:
            response = table([("LOGIN", b"S", struct.pack(">I", 5) + b"guest"),
                              ("PASSWORD", b"S", struct.pack(">I", 5) + b"guest")])[4:]
            self.assertEqual(w.login("AMQPLAIN", response), (2047, 131072, 60))

    def test_unknown_vhost_is_refused(self):
        with AmqpWire(self.port) as w:
            w.login()
            w.send(method(0, 10, 31, struct.pack(">HIH", 0, 131072, 0)))
            w.send(method(0, 10, 40, shortstr("nobody/nothing") + shortstr("") + b"\x00"))
            _, cls, code, text = w.read_close()
            self.assertEqual((cls, code), (10, 530), text)

    def test_a_wrong_protocol_header_is_answered_with_ours(self):
        for header in (b"AMQP\x01\x01\x00\x0a", b"GET / HTTP/1.1\r\n\r\n"):
            with AmqpWire(self.port) as w:
                w.send(header)
                w._fill(8, time.monotonic() + TIMEOUT_S)
                self.assertEqual(w.buf[:8], HEADER)
                self.assertTrue(w.at_eof())
        self.assert_still_serving("after-header")

    def test_garbage_frames_close_the_connection_with_frame_error(self):
        garbage = [
            b"\x05\x00\x01\x00\x00\x00\x00\xce",            # unknown frame type
            b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x0aX",  # no frame-end
            bytes(range(256)) * 4,                          # noise
        ]
        for g in garbage:
            with AmqpWire(self.port) as w:
                w.handshake()
                w.send(g)
                channel, cls, code, text = w.read_close()
                self.assertEqual((channel, cls, code), (0, 10, 501), text)
                w.send(method(0, 10, 51))  # close-ok
                self.assertTrue(w.at_eof())
        self.assert_still_serving("after-garbage")

    def test_frame_max_is_enforced_both_at_tune_and_per_frame(self):
        with AmqpWire(self.port) as w:
            w.handshake(frame_max=4096)
            w.open_channel(1)
            w.send(frame(3, 1, b"x" * 5000))
            _, cls, code, text = w.read_close()
            self.assertEqual((cls, code), (10, 501), text)
        with AmqpWire(self.port) as w:
            w.login()
            w.send(method(0, 10, 31, struct.pack(">HIH", 0, 1 << 30, 0)))  # more than offered
            _, cls, code, text = w.read_close()
            self.assertEqual((cls, code), (10, 530), text)
        self.assert_still_serving("after-frame-max")

    def test_unknown_classes_methods_and_malformed_arguments(self):
        cases = [
            (method(1, 99, 10), 540),                       # unknown class
            (method(1, 60, 99), 540),                       # unknown method of basic
            (method(1, 50, 10, b"\x00"), 502),              # queue.declare cut short
            (method(1, 60, 60, b"\x00" * 12), 503),         # basic.deliver is the server's
            (frame(3, 1, b"body without a publish"), 505),  # content out of order
            (method(2, 50, 10, b"\x00" * 8), 504),         # a channel never opened
        ]
        for data, code in cases:
            with AmqpWire(self.port) as w:
                w.handshake()
                w.open_channel(1)
                w.send(data)
                _, cls, got, text = w.read_close()
                self.assertEqual((cls, got), (10, code), text)
        self.assert_still_serving("after-unknown")

    def test_bad_input_loses_nothing_stored(self):
        ch = self.pika_channel()
        ch.confirm_delivery()
        ch.queue_declare("kept")
        for i in range(3):
            ch.basic_publish("", "kept", b"k%d" % i)
        with AmqpWire(self.port) as w:
            w.handshake()
            w.open_channel(1)
            # Half a publish, then garbage in the middle of its body.
            w.send(publish_frames(1, "", "kept", b"y" * 100)[:-60] + b"\xff" * 64)
            _, cls, code, _ = w.read_close()
            self.assertEqual(cls, 10)
        self.assertEqual(ch.queue_declare("kept", passive=True).method.message_count, 3)
        self.assertEqual([ch.basic_get("kept", auto_ack=True)[2] for _ in range(3)], [b"k0", b"k1", b"k2"])

    def test_server_sends_heartbeats_and_closes_a_silent_client(self):
        with AmqpWire(self.port) as w:
            w.handshake(heartbeat=1)
            start = time.monotonic()
            ftype, channel, payload = w.read_frame(timeout=3)
            self.assertEqual((ftype, channel, payload), (8, 0, b""))
            # Say nothing more: the server gives up after two intervals.
            self.assertTrue(w.at_eof(timeout=6))
            self.assertLess(time.monotonic() - start, 6)

    def test_client_heartbeats_keep_the_connection(self):
        with AmqpWire(self.port) as w:
            w.handshake(heartbeat=1)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                w.send(frame(8, 0, b""))
                time.sleep(0.3)
            w.open_channel(1)  # still open

    def test_heartbeats_held_behind_stored_publishes_count_as_heard(self):
        # A backlog quota that holds producers keeps publishes in flight for
        # as long as the test wants; past 4096 in flight the connection stops
        # reading, the client's heartbeats among what waits.
        ns = "/admin/v2/namespaces/public/hb-hold"
        self.assertEqual(self.node.http("PUT", ns)[0], 204)
        quota = {"limitSize": 1024, "limitTime": -1, "policy": "producer_request_hold"}
        self.assertEqual(self.node.http("POST", ns + "/backlogQuota", quota)[0], 204)
        topic = "persistent://public/hb-hold/held"
        connections = self.node.metric("magnetar_amqp_connections")

        def declare_passive(w):
            """The message count of a passive queue.declare of "held"."""
            w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr("held") + b"\x01" + table()))
            _, cls, mth, args = w.read_method()
            self.assertEqual((cls, mth), (50, 11))
            return struct.unpack(">I", args[1 + args[0]:5 + args[0]])[0]

        with AmqpWire(self.port) as w:
            w.handshake(vhost="public/hb-hold", heartbeat=1)
            w.open_channel(1)
            w.send(method(1, 50, 10, struct.pack(">H", 0) + shortstr("held") + b"\x00" + table()))
            self.assertEqual(w.read_method()[1:3], (50, 11))
            # Below the quota: these are stored (and make this connection the
            # queue's producer before the quota holds).
            for _ in range(4):
                w.send(publish_frames(1, "", "held", b"b" * 600))
            self.assertEqual(declare_passive(w), 4)
            # A new producer is refused once the quota holds (the policy
            # reaches the broker a moment after the call).
            with PulsarWire(self.node.ports["pulsar"]) as pw:
                deadline = time.monotonic() + TIMEOUT_S
                producer_id = 1
                while pw.create_producer(topic, producer_id).type != pb.BaseCommand.ERROR:
                    self.assertLess(time.monotonic(), deadline, "the backlog quota never held")
                    pw.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id)
                    producer_id += 1
                    time.sleep(0.05)
                    w.send(frame(8, 0, b""))
            held = 4096  # what pauses reading; none more, so nothing is published after the release
            w.send(b"".join(publish_frames(1, "", "held", b"h") for _ in range(held)))
            # Five heartbeat intervals with the publishes held: the client
            # keeps sending heartbeats, which wait unread behind them.
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                w.send(frame(8, 0, b""))
                time.sleep(0.3)
            status, _, _ = self.node.http("POST", "/admin/v2/persistent/public/hb-hold/held/subscription/amqp/skip_all")
            self.assertEqual(status, 204)
            # The same connection goes on: its publishes are stored and its
            # next method answered.
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                w.send(frame(8, 0, b""))
                if declare_passive(w) == held:
                    break
                self.assertLess(time.monotonic(), deadline, "the held publishes were never stored")
                time.sleep(0.2)
        # And it goes away when the client does (the metrics test counts them).
        deadline = time.monotonic() + TIMEOUT_S
        while self.node.metric("magnetar_amqp_connections") != connections:
            self.assertLess(time.monotonic(), deadline, "the connection outlived its client")
            time.sleep(0.05)

    def test_amqp_in_pulsar_out_and_back(self):
        ch = self.pika_channel()
        ch.confirm_delivery()
        ch.queue_declare("cross")
        topic = "persistent://public/default/cross"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            sub = w.subscribe(topic, "pulsar-side", 1, initial="Earliest")
            self.assertEqual(sub.type, pb.BaseCommand.SUCCESS)
            w.flow(1, 10)
            ch.basic_publish("", "cross", b"from amqp",
                             pika.BasicProperties(headers={"trace": "t-1", "n": 7}, timestamp=1700000000))
            msg = w.receive(1, 1)[0]
            self.assertEqual(msg.payload, b"from amqp")
            self.assertEqual(msg.metadata.partition_key, "cross")
            props = {p.key: p.value for p in msg.metadata.properties}
            self.assertEqual(props["trace"], "t-1")
            self.assertEqual(props["n"], "7")
            self.assertEqual(msg.metadata.event_time, 1700000000000)
            # The queue's own copy is still there for AMQP.
            self.assertEqual(ch.basic_get("cross", auto_ack=True)[2], b"from amqp")
            # And back: a Pulsar producer writes to the queue's topic.
            self.assertEqual(w.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            kv = pb.KeyValue(key="origin", value="pulsar")
            receipt = w.send(1, b"from pulsar", partition_key="rk", properties=[kv], event_time=1700000001000)
            self.assertEqual(receipt.type, pb.BaseCommand.SEND_RECEIPT)
        method_, props, body = ch.basic_get("cross", auto_ack=True)
        self.assertEqual(body, b"from pulsar")
        self.assertEqual(method_.routing_key, "rk")
        self.assertEqual(props.headers, {"origin": "pulsar"})
        self.assertEqual(props.timestamp, 1700000001)

    def test_amqp_in_kafka_out_and_back(self):
        ch = self.pika_channel()
        ch.confirm_delivery()
        ch.queue_declare("cross-kafka")
        ch.basic_publish("", "cross-kafka", b"from amqp", pika.BasicProperties(headers={"trace": "t-2"}))
        kcat = ["kcat", "-b", f"127.0.0.1:{self.node.ports['kafka']}"]
        out = subprocess.run(kcat + ["-C", "-t", "cross-kafka", "-o", "beginning", "-e", "-q", "-f", "%k|%s|%h\n"],
                             capture_output=True, timeout=TIMEOUT_S, check=True).stdout.decode()
        line = out.splitlines()[0]
        key, value, headers = line.split("|", 2)
        self.assertEqual((key, value), ("cross-kafka", "from amqp"))
        self.assertIn("trace=t-2", headers)
        self.assertEqual(ch.basic_get("cross-kafka", auto_ack=True)[2], b"from amqp")
        subprocess.run(kcat + ["-P", "-t", "cross-kafka", "-K", ":", "-H", "origin=kafka"], input=b"k-1:from kafka\n",
                       timeout=TIMEOUT_S, check=True)
        method_, props, body = wait_for_get(ch, "cross-kafka")
        self.assertEqual((method_.routing_key, body), ("k-1", b"from kafka"))
        self.assertEqual(props.headers, {"origin": "kafka"})

    def test_pipelined_confirms_cover_every_publish_once_in_order(self):
        # Queues declared over pika: one that takes everything, one that
        # refuses every publish (x-max-length 0, reject-publish).
        ch = self.pika_channel()
        ch.queue_declare("conf-all")
        ch.queue_declare("conf-none", arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
        count, refused = 300, {100, 200, 201}
        with AmqpWire(self.port) as w:
            w.handshake()
            w.open_channel(1)
            w.send(method(1, 85, 10, b"\x00"))  # confirm.select
            self.assertEqual(w.read_method()[1:3], (85, 11))
            w.send(b"".join(publish_frames(1, "", "conf-none" if n in refused else "conf-all", b"c%d" % n)
                            for n in range(1, count + 1)))
            acked, nacked, frames, last = set(), set(), 0, 0
            while len(acked) + len(nacked) < count:
                _, cls, mth, args = w.read_method()
                self.assertEqual(cls, 60)
                tag, bits = struct.unpack(">QB", args[:9])
                self.assertGreater(tag, last, "confirms go out in publish order")
                covered = set(range(last + 1, tag + 1)) if bits & 1 else {tag}
                self.assertEqual(covered & (acked | nacked), set(), "a publish confirmed twice")
                (acked if mth == 80 else nacked).update(covered)
                self.assertIn(mth, (80, 120))
                frames += 1
                last = tag
            self.assertEqual(nacked, refused)
            self.assertEqual(acked, set(range(1, count + 1)) - refused)
            self.assertLessEqual(frames, count)
        self.assertEqual(ch.queue_declare("conf-all", passive=True).method.message_count, count - len(refused))

    def test_metrics_count_connections_channels_messages_and_errors(self):
        before = {m: self.node.metric(m) for m in ("magnetar_amqp_connections", "magnetar_amqp_channels",
                                                   "magnetar_amqp_messages_published_total",
                                                   "magnetar_amqp_messages_delivered_total",
                                                   'magnetar_amqp_errors_total{code="404"}')}
        with AmqpWire(self.port) as w:
            w.handshake()
            w.open_channel(1)
            w.open_channel(2)
            self.assertEqual(self.node.metric("magnetar_amqp_connections"), before["magnetar_amqp_connections"] + 1)
            self.assertEqual(self.node.metric("magnetar_amqp_channels"), before["magnetar_amqp_channels"] + 2)
        ch = self.pika_channel()
        ch.confirm_delivery()
        ch.queue_declare("metered")
        for _ in range(3):
            ch.basic_publish("", "metered", b"m")
        ch.basic_get("metered", auto_ack=True)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker):
            self.pika_channel().queue_declare("not-there", passive=True)
        self.assertEqual(self.node.metric("magnetar_amqp_messages_published_total"),
                         before["magnetar_amqp_messages_published_total"] + 3)
        self.assertEqual(self.node.metric("magnetar_amqp_messages_delivered_total"),
                         before["magnetar_amqp_messages_delivered_total"] + 1)
        self.assertEqual(self.node.metric('magnetar_amqp_errors_total{code="404"}'),
                         before['magnetar_amqp_errors_total{code="404"}'] + 1)

    def test_queue_shows_in_the_admin_stats(self):
        ch = self.pika_channel()
        ch.confirm_delivery()
        ch.queue_declare("in-stats")
        ch.basic_consume("in-stats", lambda *a: None)
        ch.basic_publish("", "in-stats", b"counted")
        status, body = self.node.get("/admin/v2/persistent/public/default/in-stats/stats")[:2]
        self.assertEqual(status, 200)
        stats = json.loads(body)
        self.assertIn("amqp", stats["subscriptions"])
        sub = stats["subscriptions"]["amqp"]
        self.assertEqual(sub["type"], "Shared")
        self.assertEqual(len(sub["consumers"]), 1)
        # Producers and consumers say who they are.
        self.assertEqual(sub["consumers"][0]["protocol"], "amqp")
        self.assertEqual(sub["consumers"][0]["clientVersion"], f"Pika Python Client Library {pika.__version__}")
        [publisher] = stats["publishers"]
        self.assertEqual(publisher["protocol"], "amqp")
        self.assertTrue(publisher["address"].startswith("127.0.0.1:"), publisher)


if __name__ == "__main__":
    unittest.main()
