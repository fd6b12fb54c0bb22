"""Count limits from namespace and topic policies: maxProducersPerTopic,
maxConsumersPerTopic, maxConsumersPerSubscription and maxSubscriptionsPerTopic
refuse what goes over them with the errors Pulsar sends (ProducerBusy,
ConsumerBusy and Pulsar's messages) for every subscription type, with
POLICY_VIOLATION to Kafka clients and with channel.close 403 ACCESS_REFUSED
to AMQP clients; what was admitted keeps working."""
import time
import unittest

import confluent_kafka as ck

import pulsar_api_pb2 as pb
from amqp_pika import channel_refusal, connect
from magnetar_harness import NodeTestCase, expect_call
from pulsar_wire import PulsarWire

POLICY_WAIT_S = 10.0


def until_refused(attempt, what):
    """Calls `attempt()` until it returns a refusal (anything but None):
    policies reach the broker a moment after the admin call returns."""
    deadline = time.monotonic() + POLICY_WAIT_S
    while True:
        refusal = attempt()
        if refusal is not None:
            return refusal
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never applied")
        time.sleep(0.05)

TOPIC = "persistent://public/counted/t"


class CountLimitsTest(NodeTestCase):
    def expect(self, method, path, body=None, status=204):
        return expect_call(self, self.node, method, path, body, status)

    def test_producers_and_consumers_over_the_limits_are_refused_as_pulsar_does(self):
        self.expect("PUT", "/admin/v2/namespaces/public/counted")
        self.expect("POST", "/admin/v2/namespaces/public/counted/maxProducersPerTopic", 1)
        self.expect("POST", "/admin/v2/namespaces/public/counted/maxConsumersPerTopic", 2)
        self.expect("POST", "/admin/v2/namespaces/public/counted/maxConsumersPerSubscription", 1)
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(TOPIC, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            # Policies reach the broker a moment after the admin calls return:
            # a second producer is admitted (and closed again) until then.
            deadline = time.monotonic() + 10
            producer_id = 2
            while True:
                r = w.create_producer(TOPIC, producer_id)
                if r.type == pb.BaseCommand.ERROR:
                    break
                self.assertLess(time.monotonic(), deadline, "the producer limit never applied")
                w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id)
                producer_id += 1
                time.sleep(0.05)
            self.assertEqual(r.cmd.error.error, pb.ProducerBusy)
            self.assertEqual(r.cmd.error.message, "Topic reached max producers limit")
            # The admitted producer still publishes.
            self.assertEqual(w.send(1, b"kept").type, pb.BaseCommand.SEND_RECEIPT)

            self.assertEqual(w.subscribe(TOPIC, "a", 10, sub_type="Shared").type, pb.BaseCommand.SUCCESS)
            r = w.subscribe(TOPIC, "a", 11, sub_type="Shared")
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            self.assertEqual(r.cmd.error.message, "Subscription reached max consumers limit")
            self.assertEqual(w.subscribe(TOPIC, "b", 12).type, pb.BaseCommand.SUCCESS)
            r = w.subscribe(TOPIC, "c", 13)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            self.assertEqual(r.cmd.error.message, "Topic reached max consumers limit")
            # Closing one makes room again.
            w.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=12)
            self.assertEqual(w.subscribe(TOPIC, "c", 14).type, pb.BaseCommand.SUCCESS)
        stats = self.expect("GET", "/admin/v2/persistent/public/counted/t/stats", status=200)
        self.assertEqual(stats["msgInCounter"], 1)

    def test_subscriptions_over_the_limit_are_refused_on_every_path(self):
        self.expect("PUT", "/admin/v2/namespaces/public/subcount")
        self.expect("POST", "/admin/v2/namespaces/public/subcount/maxSubscriptionsPerTopic", 2)
        topic = "persistent://public/subcount/t"
        rest_sub = "/admin/v2/persistent/public/subcount/t/subscription/"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.subscribe(topic, "one", 10).type, pb.BaseCommand.SUCCESS)
            # The policy applies a moment after the call returns: retry "two" and
            # "three" until the third is refused.
            deadline = time.monotonic() + 10
            consumer_id = 11
            while True:
                self.assertEqual(w.subscribe(topic, "two", consumer_id).type, pb.BaseCommand.SUCCESS)
                r = w.subscribe(topic, "three", consumer_id + 1)
                if r.type == pb.BaseCommand.ERROR:
                    break
                self.assertLess(time.monotonic(), deadline, "the subscription limit never applied")
                w.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=consumer_id)
                w.request("UNSUBSCRIBE", ["SUCCESS", "ERROR"], consumer_id=consumer_id + 1)
                consumer_id += 2
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            self.assertIn("Exceed the maximum number of subscriptions of the topic", r.cmd.error.message)
            # At the limit, an existing subscription still takes a consumer.
            w.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=10)
            self.assertEqual(w.subscribe(topic, "one", 50).type, pb.BaseCommand.SUCCESS)
        # REST cannot add a third either.
        status, _, _ = self.node.http("PUT", rest_sub + "by-rest", b"")
        self.assertEqual(status, 412)
        stats = self.expect("GET", "/admin/v2/persistent/public/subcount/t/stats", status=200)
        self.assertEqual(sorted(stats["subscriptions"]), ["one", "two"])
        # Removing one makes room.
        self.expect("DELETE", rest_sub + "two?force=true")
        self.expect("PUT", rest_sub + "by-rest")
        stats = self.expect("GET", "/admin/v2/persistent/public/subcount/t/stats", status=200)
        self.assertEqual(sorted(stats["subscriptions"]), ["by-rest", "one"])

    def test_key_shared_consumers_over_a_count_limit_get_consumer_busy(self):
        self.expect("PUT", "/admin/v2/namespaces/public/keycount")
        self.expect("POST", "/admin/v2/namespaces/public/keycount/maxConsumersPerSubscription", 1)
        topic = "persistent://public/keycount/t"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.subscribe(topic, "ks", 1, sub_type="Key_Shared").type, pb.BaseCommand.SUCCESS)
            ids = iter(range(2, 1000))

            def second():
                cid = next(ids)
                r = w.subscribe(topic, "ks", cid, sub_type="Key_Shared")
                if r.type == pb.BaseCommand.ERROR:
                    return r
                w.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=cid)
                return None

            r = until_refused(second, "maxConsumersPerSubscription")
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            self.assertEqual(r.cmd.error.message, "Subscription reached max consumers limit")
        # The selector's own refusal (overlapping sticky ranges) is still
        # ConsumerAssignError, where no count limit applies.
        free = "persistent://public/default/key-ranges"
        meta = pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[pb.IntRange(start=0, end=100)])
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.subscribe(free, "ks", 1, sub_type="Key_Shared", keySharedMeta=meta).type,
                             pb.BaseCommand.SUCCESS)
            r = w.subscribe(free, "ks", 2, sub_type="Key_Shared", keySharedMeta=meta)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ConsumerAssignError)

    def test_kafka_clients_over_a_limit_get_policy_violation(self):
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"
        topic = "kafka-counted"
        admin_topic = "/admin/v2/persistent/public/default/" + topic

        def producer():
            return ck.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, "linger.ms": 0})

        def produce(p, value):
            """The delivery report's error (None: stored)."""
            reports = []
            p.produce(topic, value, on_delivery=lambda err, msg: reports.append(err))
            self.assertEqual(p.flush(15), 0, "the delivery report never came")
            return reports[0]

        first = producer()
        self.assertIsNone(produce(first, b"first"))
        self.expect("POST", admin_topic + "/maxProducers", 1)
        self.expect("POST", admin_topic + "/maxSubscriptionsPerTopic", 1)
        stored = 1

        def second():
            nonlocal stored
            err = produce(producer(), b"second")  # a connection of its own: another producer
            if err is None:
                stored += 1
            return err

        err = until_refused(second, "maxProducers")
        self.assertEqual(err.code(), ck.KafkaError.POLICY_VIOLATION, err)
        self.assertFalse(err.retriable())
        # The admitted producer still produces.
        self.assertIsNone(produce(first, b"kept"))
        stored += 1

        # A consumer group is a subscription: the second group's first commit
        # is refused, the first group's offsets are kept.
        def group(name):
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": name, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
            try:
                c.subscribe([topic])
                m = c.poll(15)
                self.assertIsNotNone(m, "nothing fetched")
                self.assertIsNone(m.error())
                try:
                    c.commit(message=m, asynchronous=False)
                    return None
                except ck.KafkaException as e:
                    return e.args[0]
            finally:
                c.close()

        self.assertIsNone(group("counted-1"))
        err = group("counted-2")
        self.assertIsNotNone(err, "a second group committed past maxSubscriptionsPerTopic")
        self.assertEqual(err.code(), ck.KafkaError.POLICY_VIOLATION, err)
        stats = self.expect("GET", admin_topic + "/stats", status=200)
        self.assertEqual(stats["msgInCounter"], stored)
        self.assertEqual(sorted(stats["subscriptions"]), ["counted-1"])

    def test_amqp_clients_over_a_limit_get_access_refused(self):
        self.expect("PUT", "/admin/v2/namespaces/public/amqpcount")
        vhost = "public/amqpcount"
        first = connect(self.node, virtual_host=vhost)
        ch = first.channel()
        ch.queue_declare("q")
        ch.confirm_delivery()
        ch.basic_publish("", "q", b"first")  # the queue's one producer
        self.expect("POST", "/admin/v2/namespaces/public/amqpcount/maxProducersPerTopic", 1)
        self.expect("POST", "/admin/v2/namespaces/public/amqpcount/maxConsumersPerTopic", 1)
        stored = 1

        def publish_elsewhere(confirms):
            """The broker's channel.close for a publish from another
            connection (None: stored)."""
            nonlocal stored

            def publish(other):
                if confirms:
                    other.confirm_delivery()
                other.basic_publish("", "q", b"second")
                other.queue_declare("q", passive=True)  # surfaces a refusal without confirms

            refusal = channel_refusal(connect(self.node, virtual_host=vhost), publish)
            if refusal is None:
                stored += 1
            return refusal

        refusal = until_refused(lambda: publish_elsewhere(False), "maxProducersPerTopic")
        self.assertEqual(refusal.reply_code, 403)
        self.assertIn("Topic reached max producers limit", refusal.reply_text)
        refusal = publish_elsewhere(True)
        self.assertIsNotNone(refusal, "a publish with confirms went past maxProducersPerTopic")
        self.assertEqual(refusal.reply_code, 403)

        consumer = connect(self.node, virtual_host=vhost)
        got = []
        consumer.channel().basic_consume("q", lambda c, m, p, body: got.append(body), auto_ack=True)

        def consume_elsewhere():
            return channel_refusal(connect(self.node, virtual_host=vhost),
                                   lambda ch: ch.basic_consume("q", lambda *a: None))

        refusal = until_refused(consume_elsewhere, "maxConsumersPerTopic")
        self.assertEqual(refusal.reply_code, 403)
        self.assertIn("Topic reached max consumers limit", refusal.reply_text)
        # What was admitted still works: the first connection publishes, the
        # consumer receives everything that was stored.
        ch.basic_publish("", "q", b"kept")
        stored += 1
        deadline = time.monotonic() + POLICY_WAIT_S
        while len(got) < stored and time.monotonic() < deadline:
            consumer.process_data_events(time_limit=0.1)
        self.assertEqual(len(got), stored)
        self.assertEqual(got[0], b"first")
        self.assertEqual(got[-1], b"kept")
        consumer.close()
        first.close()


if __name__ == "__main__":
    unittest.main()
