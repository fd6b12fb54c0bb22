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


if __name__ == "__main__":
    unittest.main()
