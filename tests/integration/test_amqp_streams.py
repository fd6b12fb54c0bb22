"""AMQP stream queues (x-queue-type stream) and basic.qos global, with pika
against the real binary.

A stream is the queue's log read without removing: every consumer starts
where its x-stream-offset says and reads the same messages, each delivery
names its offset in header x-stream-offset (the Kafka offset of the same
message), and retention alone removes messages. The refusals are
RabbitMQ's: streams are durable and shared, their consumers acknowledge
and set a prefetch, basic.get and queue.purge are not served."""
import datetime
import time
import unittest

import pika
from confluent_kafka import Consumer, TopicPartition

from amqp_pika import PikaTestCase, channel_refusal, connect, restartable_node, wait_for
from magnetar_harness import call_json


def stream_args(**extra):
    return {"x-queue-type": "stream", **extra}


class AmqpStreamTest(PikaTestCase):
    def setUp(self):
        super().setUp()
        self.ch.confirm_delivery()

    def stream(self, name, count, prefix=b"m", **args):
        self.ch.queue_declare(name, durable=True, arguments=stream_args(**args))
        for i in range(count):
            self.ch.basic_publish("", name, b"%s%d" % (prefix, i))

    def read(self, name, offset, want, prefetch=10, then_publish=None):
        """The first `want` (body, x-stream-offset) a new consumer at `offset` gets, acknowledging each;
        `then_publish` is published once the consumer is attached."""
        conn = connect(self.node)
        got = []
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=prefetch)
            args = {} if offset is None else {"x-stream-offset": offset}

            def on_message(c, method, props, body):
                got.append((body, props.headers["x-stream-offset"]))
                c.basic_ack(method.delivery_tag)

            ch.basic_consume(name, on_message, arguments=args)
            if then_publish is not None:
                self.ch.basic_publish("", name, then_publish)
            deadline = time.monotonic() + 10
            while len(got) < want and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.05)
            return got
        finally:
            if conn.is_open:
                conn.close()

    def test_every_consumer_reads_the_whole_stream_and_nothing_is_removed(self):
        self.stream("st-all", 10)
        expected = [(b"m%d" % i, i) for i in range(10)]
        self.assertEqual(self.read("st-all", "first", 10), expected)
        # A second reader, with a prefetch smaller than the stream: the
        # acknowledgements are its credit.
        self.assertEqual(self.read("st-all", "first", 10, prefetch=2), expected)
        declared = self.ch.queue_declare("st-all", durable=True, arguments=stream_args(), passive=True)
        self.assertEqual(declared.method.message_count, 10)

    def test_x_stream_offset_places_a_consumer(self):
        self.stream("st-off", 6)
        self.assertEqual(self.read("st-off", 4, 2), [(b"m4", 4), (b"m5", 5)])
        # Past the end: the next message published.
        self.assertEqual(self.read("st-off", 1000, 1, then_publish=b"later"), [(b"later", 6)])
        # "last": the last message and what follows.
        self.assertEqual(self.read("st-off", "last", 1), [(b"later", 6)])
        # "next" (and no argument): only what is published after.
        self.assertEqual(self.read("st-off", "next", 1, then_publish=b"newer"), [(b"newer", 7)])
        self.assertEqual(self.read("st-off", None, 1, then_publish=b"newest"), [(b"newest", 8)])
        # An age reaches back over everything published in it.
        self.assertEqual([body for body, _ in self.read("st-off", "1h", 9)][:2], [b"m0", b"m1"])

    def test_a_timestamp_starts_at_the_first_message_published_from_then(self):
        self.stream("st-time", 3, prefix=b"old")
        time.sleep(2.1)  # the AMQP timestamp counts whole seconds
        since = datetime.datetime.fromtimestamp(int(time.time()), tz=datetime.timezone.utc)
        for i in range(2):
            self.ch.basic_publish("", "st-time", b"new%d" % i)
        self.assertEqual(self.read("st-time", since, 2), [(b"new0", 3), (b"new1", 4)])

    def test_requeue_and_reject_do_not_deliver_again_but_give_credit_back(self):
        self.stream("st-nack", 5)
        conn = connect(self.node)
        got = []
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=1)

            def on_message(c, method, props, body):
                got.append(body)
                if len(got) % 2:
                    c.basic_nack(method.delivery_tag, requeue=True)
                else:
                    c.basic_reject(method.delivery_tag, requeue=False)

            ch.basic_consume("st-nack", on_message, arguments={"x-stream-offset": "first"})
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) >= 5, "five deliveries")
            conn.process_data_events(time_limit=0.3)
        finally:
            conn.close()
        self.assertEqual(got, [b"m%d" % i for i in range(5)])
        # The stream still holds all five.
        self.assertEqual([b for b, _ in self.read("st-nack", "first", 5)], [b"m%d" % i for i in range(5)])

    def test_the_offset_is_the_kafka_offset_of_the_same_message(self):
        self.stream("st-kafka", 4)
        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}", "group.id": "st-kafka",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("st-kafka", 0, 2)])
            records = []
            deadline = time.monotonic() + 10
            while len(records) < 2 and time.monotonic() < deadline:
                r = consumer.poll(0.2)
                if r is not None and r.error() is None:
                    records.append((r.value(), r.offset()))
        finally:
            consumer.close()
        self.assertEqual(records, self.read("st-kafka", 2, 2))

    def test_retention_arguments_become_the_topic_retention(self):
        self.ch.queue_declare("st-kept", durable=True,
                              arguments=stream_args(**{"x-max-length-bytes": 5 * 1024 * 1024 + 1, "x-max-age": "2D",
                                                       "x-stream-max-segment-size-bytes": 1000000}))
        status, retention = call_json(self.node, "GET", "/admin/v2/persistent/public/default/st-kept/retention")
        self.assertEqual(status, 200, retention)
        self.assertEqual((retention["retentionSizeInMB"], retention["retentionTimeInMinutes"]), (6, 2 * 24 * 60))
        self.ch.queue_declare("st-forever", durable=True, arguments=stream_args())
        _, retention = call_json(self.node, "GET", "/admin/v2/persistent/public/default/st-forever/retention")
        self.assertEqual((retention["retentionSizeInMB"], retention["retentionTimeInMinutes"]), (-1, -1))
        # Deleting the stream drops its retention with its topic.
        self.ch.queue_delete("st-kept")
        status, _ = call_json(self.node, "GET", "/admin/v2/persistent/public/default/st-kept/retention")
        self.assertEqual(status, 404)

    def test_what_streams_refuse(self):
        self.stream("st-ref", 3)
        for kwargs in ({"durable": False}, {"durable": True, "exclusive": True}, {"durable": True, "auto_delete": True},
                       {"durable": True, "arguments": stream_args(**{"x-message-ttl": 1000})},
                       {"durable": True, "arguments": stream_args(**{"x-max-priority": 5})},
                       {"durable": True, "arguments": stream_args(**{"x-max-age": "7W"})}):
            args = kwargs.pop("arguments", stream_args())
            refusal = channel_refusal(connect(self.node), lambda ch: ch.queue_declare("st-bad", arguments=args,
                                                                                      **kwargs))
            self.assertEqual(getattr(refusal, "reply_code", None), 406, (kwargs, args))

        def consume(prefetch=10, global_qos=False, **kw):
            def action(ch):
                if prefetch:
                    ch.basic_qos(prefetch_count=prefetch, global_qos=global_qos)
                ch.basic_consume("st-ref", lambda *a: None, **kw)
            return action

        for action, why in ((consume(auto_ack=True), "automatic acknowledgement"),
                            (consume(prefetch=0), "prefetch count is not set"),
                            (consume(global_qos=True), "global qos"),
                            (consume(arguments={"x-stream-offset": "sideways"}), "x-stream-offset"),
                            (consume(arguments={"x-stream-offset": True}), "x-stream-offset"),
                            (lambda ch: ch.queue_purge("st-ref"), "purge")):
            refusal = channel_refusal(connect(self.node), action)
            self.assertEqual(getattr(refusal, "reply_code", None), 406, why)
            self.assertIn(why, refusal.reply_text)
        conn = connect(self.node)
        with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as closed:
            conn.channel().basic_get("st-ref")
        self.assertEqual(closed.exception.reply_code, 540)
        # The node still serves, and the stream is intact.
        self.assertEqual([b for b, _ in self.read("st-ref", "first", 3)], [b"m0", b"m1", b"m2"])


class AmqpStreamRestartTest(unittest.TestCase):
    def test_a_stream_and_its_messages_survive_a_restart(self):
        with restartable_node() as node:
            conn = connect(node)
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("st-durable", durable=True, arguments=stream_args())
            for i in range(3):
                ch.basic_publish("", "st-durable", b"d%d" % i)
            conn.close()
            node.stop()
            node.start()
            conn = connect(node)
            got = []
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5)
            ch.basic_consume("st-durable", lambda c, m, p, b: (got.append(b), c.basic_ack(m.delivery_tag)),
                             arguments={"x-stream-offset": "first"})
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) >= 3, "three messages")
            conn.close()
            self.assertEqual(got, [b"d0", b"d1", b"d2"])


class AmqpGlobalQosTest(PikaTestCase):
    def fill(self, name, count):
        self.ch.queue_declare(name)
        self.ch.confirm_delivery()
        for i in range(count):
            self.ch.basic_publish("", name, b"%d" % i)

    def test_a_global_prefetch_bounds_the_channels_unacknowledged_deliveries(self):
        self.fill("gq-a", 10)
        self.fill("gq-b", 10)
        conn = connect(self.node)
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=3, global_qos=True)
            got = []
            for queue in ("gq-a", "gq-b"):
                ch.basic_consume(queue, lambda c, m, p, b: got.append(m.delivery_tag))
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) >= 3, "three deliveries")
            conn.process_data_events(time_limit=0.5)
            self.assertEqual(len(got), 3)
            ch.basic_ack(got[0])
            ch.basic_ack(got[1])
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) >= 5, "two more")
            conn.process_data_events(time_limit=0.5)
            self.assertEqual(len(got), 5)
            # Lifting the limit lets the rest through.
            ch.basic_qos(prefetch_count=0, global_qos=True)
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) >= 20, "all twenty")
        finally:
            conn.close()
        # Closing the channel gave back what it held: 18 were never acknowledged.
        wait_for(lambda: self.ch.queue_declare("gq-a", passive=True).method.message_count
                 + self.ch.queue_declare("gq-b", passive=True).method.message_count == 18, "18 messages back")

    def test_per_consumer_and_global_limits_apply_together(self):
        for q in ("gq-c", "gq-d", "gq-e"):
            self.fill(q, 5)
        conn = connect(self.node)
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=2)
            ch.basic_qos(prefetch_count=5, global_qos=True)
            got = {}
            for queue in ("gq-c", "gq-d", "gq-e"):
                ch.basic_consume(queue, lambda c, m, p, b, q=queue: got.setdefault(q, []).append(b))
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or sum(map(len, got.values())) >= 5, "five")
            conn.process_data_events(time_limit=0.5)
            self.assertEqual(sum(map(len, got.values())), 5)
            self.assertTrue(all(len(v) <= 2 for v in got.values()), got)
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
