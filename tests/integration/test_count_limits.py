"""Count limits from namespace policies: maxProducersPerTopic,
maxConsumersPerTopic and maxConsumersPerSubscription refuse what goes over
them with the errors Pulsar sends (ProducerBusy, ConsumerBusy and Pulsar's
messages), and what was admitted keeps working."""
import time
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import NodeTestCase, expect_call
from pulsar_wire import PulsarWire

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


if __name__ == "__main__":
    unittest.main()
