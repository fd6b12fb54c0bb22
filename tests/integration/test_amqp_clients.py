"""Real AMQP 0-9-1 clients against the real binary: pika (python3-pika) and
amqp-tools (amqp-publish, amqp-consume). Publish and consume, each exchange
type, prefetch, ack/nack/reject/requeue, confirms, mandatory returns,
basic.get, channel errors that leave the connection serving, and durable
queues across a restart."""
import struct
import subprocess
import time
import unittest

import pika

from amqp_wire import AmqpWire, method, shortstr, table
from amqp_pika import PikaTestCase, TIMEOUT_S, connect, queue_exists, restartable_node, wait_for


def drain(channel, queue, count, auto_ack=True):
    """`count` messages from `queue` through basic.consume, as (method, properties, body)."""
    got = []

    def on_message(ch, method, props, body):
        got.append((method, props, body))
        if len(got) == count:
            ch.stop_consuming()

    tag = channel.basic_consume(queue, on_message, auto_ack=auto_ack)
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < count and time.monotonic() < deadline:
        channel.connection.process_data_events(time_limit=0.1)
    channel.basic_cancel(tag)
    assert len(got) == count, f"got {len(got)} of {count} messages from {queue}"
    return got


def bodies(messages):
    return sorted(body for _, _, body in messages)


class AmqpPikaTest(PikaTestCase):
    def test_default_exchange_carries_properties_and_headers_intact(self):
        self.ch.queue_declare("props")
        props = pika.BasicProperties(
            content_type="application/json", content_encoding="utf-8", delivery_mode=2, priority=3,
            correlation_id="c-1", reply_to="replies", expiration="60000", message_id="m-1",
            timestamp=1700000000, type="order.created", user_id="guest", app_id="shop",
            headers={"n": 5, "s": "text", "b": True, "nested": {"k": "v"}, "list": [1, "two"]})
        self.ch.basic_publish("", "props", b'{"id": 1}', props)
        [(method, got, body)] = drain(self.ch, "props", 1)
        self.assertEqual(body, b'{"id": 1}')
        self.assertEqual(method.routing_key, "props")
        self.assertEqual(method.exchange, "")
        self.assertFalse(method.redelivered)
        for field in ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
                      "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id"):
            self.assertEqual(getattr(got, field), getattr(props, field), field)
        self.assertEqual(got.headers, props.headers)

    def test_empty_and_large_bodies(self):
        self.ch.queue_declare("sizes")
        big = bytes(range(256)) * 4000  # ~1 MB: many body frames
        self.ch.basic_publish("", "sizes", b"")
        self.ch.basic_publish("", "sizes", big)
        got = drain(self.ch, "sizes", 2)
        self.assertEqual([b for _, _, b in got], [b"", big])

    def test_direct_fanout_topic_and_headers_exchanges(self):
        ch = self.ch
        for q in ("d1", "d2", "f1", "f2", "t-star", "t-hash", "h-all", "h-any"):
            ch.queue_declare(q)
        ch.exchange_declare("x-direct", "direct")
        ch.queue_bind("d1", "x-direct", "red")
        ch.queue_bind("d2", "x-direct", "blue")
        ch.exchange_declare("x-fanout", "fanout")
        ch.queue_bind("f1", "x-fanout")
        ch.queue_bind("f2", "x-fanout", "ignored")
        ch.exchange_declare("x-topic", "topic")
        ch.queue_bind("t-star", "x-topic", "order.*.eu")
        ch.queue_bind("t-hash", "x-topic", "order.#")
        ch.exchange_declare("x-headers", "headers")
        ch.queue_bind("h-all", "x-headers", arguments={"x-match": "all", "kind": "a", "size": 2})
        ch.queue_bind("h-any", "x-headers", arguments={"x-match": "any", "kind": "a", "size": 2})

        ch.basic_publish("x-direct", "red", b"r")
        ch.basic_publish("x-direct", "blue", b"b")
        ch.basic_publish("x-direct", "green", b"g")
        ch.basic_publish("x-fanout", "whatever", b"all")
        ch.basic_publish("x-topic", "order.created.eu", b"oce")
        ch.basic_publish("x-topic", "order", b"o")
        ch.basic_publish("x-topic", "order.created.us", b"ocu")
        ch.basic_publish("x-topic", "invoice.created.eu", b"ice")
        ch.basic_publish("x-headers", "", b"both", pika.BasicProperties(headers={"kind": "a", "size": 2}))
        ch.basic_publish("x-headers", "", b"kind-only", pika.BasicProperties(headers={"kind": "a"}))
        ch.basic_publish("x-headers", "", b"none", pika.BasicProperties(headers={"kind": "z"}))

        self.assertEqual(bodies(drain(ch, "d1", 1)), [b"r"])
        self.assertEqual(bodies(drain(ch, "d2", 1)), [b"b"])
        self.assertEqual(bodies(drain(ch, "f1", 1)), [b"all"])
        self.assertEqual(bodies(drain(ch, "f2", 1)), [b"all"])
        self.assertEqual(bodies(drain(ch, "t-star", 1)), [b"oce"])
        self.assertEqual(bodies(drain(ch, "t-hash", 3)), [b"o", b"oce", b"ocu"])
        self.assertEqual(bodies(drain(ch, "h-all", 1)), [b"both"])
        self.assertEqual(bodies(drain(ch, "h-any", 2)), [b"both", b"kind-only"])
        for q in ("d1", "d2", "f1", "t-star", "t-hash", "h-all", "h-any"):
            self.assertEqual(ch.queue_declare(q, passive=True).method.message_count, 0, q)

    def test_exchange_to_exchange_bindings_and_unbind(self):
        ch = self.ch
        ch.exchange_declare("e2e-src", "topic")
        ch.exchange_declare("e2e-dst", "fanout")
        ch.queue_declare("e2e-q")
        ch.exchange_bind("e2e-dst", "e2e-src", "audit.#")
        ch.queue_bind("e2e-q", "e2e-dst")
        ch.basic_publish("e2e-src", "audit.login", b"in")
        ch.basic_publish("e2e-src", "metrics.cpu", b"out")
        self.assertEqual(bodies(drain(ch, "e2e-q", 1)), [b"in"])
        ch.exchange_unbind("e2e-dst", "e2e-src", "audit.#")
        ch.queue_unbind("e2e-q", "e2e-dst")
        ch.basic_publish("e2e-src", "audit.logout", b"gone")
        self.assertEqual(ch.queue_declare("e2e-q", passive=True).method.message_count, 0)

    def test_prefetch_limits_unacknowledged_deliveries(self):
        ch = self.ch
        ch.queue_declare("prefetch")
        for i in range(6):
            ch.basic_publish("", "prefetch", b"m%d" % i)
        ch.basic_qos(prefetch_count=2)
        got = []
        ch.basic_consume("prefetch", lambda c, m, p, b: got.append(m), auto_ack=False)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(len(got), 2)  # no more until acknowledged
        ch.basic_ack(got[1].delivery_tag, multiple=True)
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 4 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(len(got), 4)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(len(got), 4)

    def test_nack_requeue_reject_and_recover(self):
        ch = self.ch
        ch.queue_declare("settle")
        ch.basic_publish("", "settle", b"again")
        ch.basic_publish("", "settle", b"drop")
        m1 = ch.basic_get("settle")
        m2 = ch.basic_get("settle")
        self.assertEqual((m1[2], m2[2]), (b"again", b"drop"))
        self.assertFalse(m1[0].redelivered)
        ch.basic_nack(m1[0].delivery_tag, requeue=True)
        ch.basic_reject(m2[0].delivery_tag, requeue=False)
        again = ch.basic_get("settle")
        self.assertEqual(again[2], b"again")
        self.assertTrue(again[0].redelivered)
        # basic.recover puts it back once more.
        ch.basic_recover(requeue=True)
        third = ch.basic_get("settle")
        self.assertEqual(third[2], b"again")
        self.assertTrue(third[0].redelivered)
        ch.basic_ack(third[0].delivery_tag)
        self.assertEqual(ch.basic_get("settle"), (None, None, None))
        self.assertEqual(ch.queue_declare("settle", passive=True).method.message_count, 0)

    def test_get_reports_empty_and_the_messages_left(self):
        ch = self.ch
        ch.queue_declare("getter")
        self.assertEqual(ch.basic_get("getter"), (None, None, None))
        for body in (b"one", b"two", b"three"):
            ch.basic_publish("", "getter", body)
        method, _, body = ch.basic_get("getter", auto_ack=True)
        self.assertEqual((body, method.message_count), (b"one", 2))
        method, _, body = ch.basic_get("getter", auto_ack=True)
        self.assertEqual((body, method.message_count), (b"two", 1))
        method, _, body = ch.basic_get("getter", auto_ack=True)
        self.assertEqual((body, method.message_count), (b"three", 0))
        self.assertEqual(ch.basic_get("getter"), (None, None, None))

    def test_channel_flow_holds_deliveries(self):
        ch = self.ch
        ch.queue_declare("flowing")
        for i in range(3):
            ch.basic_publish("", "flowing", b"f%d" % i)
        self.assertFalse(ch.flow(False))
        got = []
        ch.basic_consume("flowing", lambda c, m, p, b: got.append(b), auto_ack=True)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(got, [])
        self.assertTrue(ch.flow(True))
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 3 and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(got, [b"f0", b"f1", b"f2"])

    def test_exclusive_consumers(self):
        self.ch.queue_declare("single")
        tag = self.ch.basic_consume("single", lambda *a: None, exclusive=True)
        for exclusive in (False, True):
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
                self.conn.channel().basic_consume("single", lambda *a: None, exclusive=exclusive)
            self.assertEqual(e.exception.reply_code, 403)
        self.ch.basic_cancel(tag)
        self.conn.channel().basic_consume("single", lambda *a: None)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
            self.conn.channel().basic_consume("single", lambda *a: None, exclusive=True)
        self.assertEqual(e.exception.reply_code, 403)

    def test_confirms_and_mandatory_returns(self):
        ch = self.ch
        ch.confirm_delivery()
        ch.queue_declare("confirmed")
        for i in range(20):
            ch.basic_publish("", "confirmed", b"c%d" % i)  # raises unless acked
        with self.assertRaises(pika.exceptions.UnroutableError):
            ch.basic_publish("", "no-such-queue", b"lost", mandatory=True)
        ch.basic_publish("", "no-such-queue", b"dropped silently")  # not mandatory: confirmed, dropped
        self.assertEqual(ch.queue_declare("confirmed", passive=True).method.message_count, 20)

    def test_transactions_publish_and_acknowledge_at_commit(self):
        ch = self.ch
        ch.queue_declare("tx-q")
        ch.tx_select()
        ch.basic_publish("", "tx-q", b"t1")
        ch.basic_publish("", "tx-q", b"t2")
        other = self.conn.channel()
        self.assertEqual(other.queue_declare("tx-q", passive=True).method.message_count, 0)
        ch.tx_rollback()
        self.assertEqual(other.queue_declare("tx-q", passive=True).method.message_count, 0)
        ch.basic_publish("", "tx-q", b"t3")
        ch.tx_commit()
        self.assertEqual(other.queue_declare("tx-q", passive=True).method.message_count, 1)
        # An acknowledgement inside a transaction takes effect at commit.
        method, _, body = ch.basic_get("tx-q")
        self.assertEqual(body, b"t3")
        ch.basic_ack(method.delivery_tag)
        ch.tx_rollback()
        ch.basic_recover(requeue=True)  # the rolled-back ack left it unacknowledged
        method, _, body = ch.basic_get("tx-q")
        self.assertEqual(body, b"t3")
        self.assertTrue(method.redelivered)
        ch.basic_ack(method.delivery_tag)
        ch.tx_commit()
        self.assertEqual(other.queue_declare("tx-q", passive=True).method.message_count, 0)
        self.assertEqual(other.basic_get("tx-q"), (None, None, None))

    def test_purge_and_delete_report_counts(self):
        ch = self.ch
        ch.queue_declare("purged")
        for i in range(3):
            ch.basic_publish("", "purged", b"p")
        self.assertEqual(ch.queue_purge("purged").method.message_count, 3)
        self.assertEqual(ch.queue_declare("purged", passive=True).method.message_count, 0)
        ch.basic_publish("", "purged", b"after")
        self.assertEqual(ch.queue_delete("purged").method.message_count, 1)
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
            ch.queue_declare("purged", passive=True)
        self.assertEqual(e.exception.reply_code, 404)

    def test_server_named_and_exclusive_queues(self):
        q = self.ch.queue_declare("", exclusive=True).method.queue
        self.assertTrue(q.startswith("amq.gen-"), q)
        other = connect(self.node)
        try:
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
                other.channel().basic_consume(q, lambda *a: None)
            self.assertEqual(e.exception.reply_code, 405)
        finally:
            other.close()
        self.conn.close()
        # Gone with its connection.
        again = connect(self.node)
        try:
            self.assertFalse(queue_exists(again, q))
        finally:
            again.close()

    def test_channel_errors_close_the_channel_and_the_connection_keeps_serving(self):
        cases = [
            (lambda c: c.queue_declare("missing", passive=True), 404),
            (lambda c: c.exchange_declare("missing-x", passive=True), 404),
            (lambda c: c.basic_publish("missing-x", "k", b"x") or c.queue_declare("sync", passive=True), 404),
            (lambda c: c.queue_bind("nowhere", "amq.direct", "k"), 404),
            (lambda c: c.exchange_declare("amq.custom", "direct"), 403),
            (lambda c: c.basic_ack(99), 406),
        ]
        self.ch.queue_declare("sync")
        self.ch.queue_declare("typed", durable=False)
        cases.append((lambda c: c.queue_declare("typed", durable=True), 406))
        self.ch.exchange_declare("typed-x", "direct")
        cases.append((lambda c: c.exchange_declare("typed-x", "fanout"), 406))
        for action, code in cases:
            ch = self.conn.channel()
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
                action(ch)
                ch.queue_declare("sync", passive=True)  # the error arrives by now
            self.assertEqual(e.exception.reply_code, code, e.exception.reply_text)
        # The connection and its first channel still work.
        self.ch.basic_publish("", "sync", b"still here")
        self.assertEqual(self.ch.basic_get("sync", auto_ack=True)[2], b"still here")

    def test_amqp_tools_publish_and_consume(self):
        self.ch.queue_declare("tools")
        url = f"amqp://guest:guest@127.0.0.1:{self.node.ports['amqp']}/"
        for body in (b"first", b"second"):
            subprocess.run(["amqp-publish", "--url", url, "-r", "tools", "-p", "-C", "text/plain", "-b",
                            body.decode()], check=True, timeout=TIMEOUT_S)
        self.assertEqual(self.ch.queue_declare("tools", passive=True).method.message_count, 2)
        out = subprocess.run(["amqp-consume", "--url", url, "-q", "tools", "-c", "2", "cat"],
                             check=True, timeout=TIMEOUT_S, capture_output=True)
        self.assertEqual(out.stdout, b"firstsecond")
        self.assertEqual(self.ch.queue_declare("tools", passive=True).method.message_count, 0)


class AmqpDurabilityTest(unittest.TestCase):
    def test_durable_queues_exchanges_and_bindings_survive_a_restart(self):
        with restartable_node() as node:
            conn = connect(node)
            ch = conn.channel()
            ch.confirm_delivery()
            ch.exchange_declare("orders-x", "topic", durable=True)
            ch.queue_declare("orders-durable", durable=True, arguments={"x-max-length": 1000})
            ch.queue_bind("orders-durable", "orders-x", "order.#")
            ch.queue_declare("transient")
            ch.queue_declare("reloaded", durable=True)
            ch.basic_publish("", "reloaded", b"still mine", pika.BasicProperties(delivery_mode=2))
            for i in range(5):
                ch.basic_publish("orders-x", "order.created", b"o%d" % i, pika.BasicProperties(delivery_mode=2))
            # Two taken before the restart (a consumer without a prefetch
            # limit would be sent all five at once).
            self.assertEqual([ch.basic_get("orders-durable", auto_ack=True)[2] for _ in range(2)], [b"o0", b"o1"])
            conn.close()
            self.assertEqual(node.stop(), 0)
            node.start()
            # A consumer whose channel closes before its queue's topic has
            # even loaded (nothing touched it since the restart) leaves
            # nothing behind: its message goes to the next reader.
            with AmqpWire(node.ports["amqp"]) as w:
                w.handshake()
                w.open_channel(1)
                consume = struct.pack(">H", 0) + shortstr("reloaded") + shortstr("gone") + b"\x00" + table()
                w.send(method(1, 60, 20, consume) + method(1, 20, 40, struct.pack(">H", 200) + shortstr("") +
                                                            struct.pack(">HH", 0, 0)))
                while w.read_method()[1:3] != (20, 41):
                    pass
            conn = connect(node)
            ch = conn.channel()
            self.assertEqual(wait_for(lambda: ch.basic_get("reloaded", auto_ack=True)[2], "the message"),
                             b"still mine")
            self.assertEqual(ch.queue_declare("orders-durable", passive=True).method.message_count, 3)
            ch.basic_publish("orders-x", "order.shipped", b"after")  # the binding came back too
            got = drain(ch, "orders-durable", 4, auto_ack=True)
            self.assertEqual([b for _, _, b in got], [b"o2", b"o3", b"o4", b"after"])
            self.assertFalse(queue_exists(conn, "transient"))
            conn.close()
            self.assertEqual(node.stop(), 0)


if __name__ == "__main__":
    unittest.main()
