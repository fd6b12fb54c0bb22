"""Idle topics leave memory and come back on use: a persistent topic with no
producer or consumer, unused for --topic-idle-unload-secs, is unloaded at
the next housekeeping run; its messages, subscriptions and positions are
all there when a client next uses it, and a topic with a client attached
stays loaded."""
import re
import time
import unittest
import urllib.request

import pulsar_api_pb2 as pb
from magnetar_harness import Node
from pulsar_wire import PulsarWire

WAIT_S = 20


def metrics(node):
    with urllib.request.urlopen(node.http_url + "/metrics", timeout=10) as r:
        return r.read().decode()


def unloaded_count(node):
    m = re.search(r"^magnetar_topics_unloaded_idle_total (\d+)", metrics(node), re.M)
    return int(m.group(1)) if m else 0


def loaded(node, topic):
    """Whether `topic` is loaded: its per-topic series are in /metrics."""
    return ('topic="%s"' % topic) in metrics(node)


class TopicUnloadTest(unittest.TestCase):
    def setUp(self):
        self.node = Node("--housekeeping-secs", "1", "--topic-idle-unload-secs", "1").start()

    def tearDown(self):
        code = self.node.stop()
        self.node.close()
        self.assertEqual(code, 0)

    def wait_until(self, cond, what):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if cond():
                return
            time.sleep(0.2)
        self.fail("timed out waiting until " + what)

    def test_an_idle_topic_leaves_memory_and_comes_back_whole(self):
        topic = "persistent://public/default/comes-and-goes"
        port = self.node.ports["pulsar"]
        with PulsarWire(port) as wire:
            self.assertEqual(wire.subscribe(topic, "sub", 1, initial="Earliest").type, pb.BaseCommand.SUCCESS)
            self.assertEqual(wire.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            for i in range(10):
                self.assertEqual(wire.send(1, b"m%d" % i).type, pb.BaseCommand.SEND_RECEIPT)
            wire.flow(1, 4)
            got = wire.receive(1, 4)
            for f in got:
                wire.ack(1, f.cmd.message.message_id)
        self.wait_until(lambda: not loaded(self.node, topic), "the idle topic left memory")
        self.assertGreaterEqual(unloaded_count(self.node), 1)

        # Back on use: the subscription goes on after the 4 acknowledged.
        with PulsarWire(port) as wire:
            self.assertEqual(wire.subscribe(topic, "sub", 1).type, pb.BaseCommand.SUCCESS)
            wire.flow(1, 100)
            rest = [f.payload for f in wire.receive(1, 6)]
            self.assertEqual(rest, [b"m%d" % i for i in range(4, 10)])
            self.assertTrue(loaded(self.node, topic))
            # While a consumer is attached the topic stays loaded.
            time.sleep(3)
            self.assertTrue(loaded(self.node, topic))
            self.assertEqual(wire.create_producer(topic, 2).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(wire.send(2, b"after").type, pb.BaseCommand.SEND_RECEIPT)
            self.assertEqual(wire.receive(1, 1)[0].payload, b"after")

    def test_admin_stats_of_an_unloaded_topic_load_it_again(self):
        topic = "persistent://public/default/stats-after-unload"
        status, _, _ = self.node.http("PUT", "/admin/v2/persistent/public/default/stats-after-unload")
        self.assertIn(status, (204, 200))
        status, _, _ = self.node.http(
            "PUT", "/admin/v2/persistent/public/default/stats-after-unload/subscription/s")
        self.assertIn(status, (204, 200))
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            wire.create_producer(topic, 1)
            for i in range(5):
                wire.send(1, b"x")
        self.wait_until(lambda: not loaded(self.node, topic), "the idle topic left memory")
        status, body, _ = self.node.get("/admin/v2/persistent/public/default/stats-after-unload/stats")
        self.assertEqual(status, 200, body)
        self.assertIn(b'"msgBacklog":5', body)


if __name__ == "__main__":
    unittest.main()
