"""A Kafka producer (confluent-kafka, librdkafka, linger 5 ms) sending one
100-byte message to each of 2000 topics that do not exist yet, created on
first use: every message is delivered, and the node's resident memory stays
within a budget the whole time.

A Metadata request for N new topics once held a copy of the whole request
per topic to create, N copies of N names, and librdkafka sends many such
requests: memory grew with the square of the topic count (2000 topics took
13.6 GB). The bound asserted here is memory, never time; every wait is
bounded."""
import sys
import time
import unittest

from confluent_kafka import Producer

from magnetar_harness import NodeTestCase
from memory_watch import MB, RssWatch

TOPICS = 2000
BUDGET = 400 * MB      # the peak resident memory the node may reach
HARD_CAP = 1500 * MB   # past this the watch kills the node: the test fails, the machine lives
DELIVERY_TIMEOUT_S = 240


class KafkaManyTopicsTest(NodeTestCase):
    def test_one_message_to_each_of_many_new_topics(self):
        producer = Producer({
            "bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}",
            "linger.ms": 5,
            "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
        })
        delivered, failed = [], []

        def on_delivery(err, msg):
            if err is None:
                delivered.append((msg.topic(), msg.partition(), msg.offset()))
            else:
                failed.append((msg.topic(), str(err)))

        value = b"v" * 100
        with RssWatch(self.node, HARD_CAP) as watch:
            deadline = time.monotonic() + DELIVERY_TIMEOUT_S
            for i in range(TOPICS):
                while True:
                    try:
                        producer.produce(f"many-{i:05d}", value=value, on_delivery=on_delivery)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.1)
                        self.assertLess(time.monotonic(), deadline, "the producer's queue never drained")
                producer.poll(0)
            while len(delivered) + len(failed) < TOPICS and time.monotonic() < deadline and not watch.killed:
                producer.poll(0.2)
        self.assertFalse(watch.killed, watch.describe())
        self.assertEqual(failed, [])
        self.assertEqual(len(delivered), TOPICS, f"{len(delivered)} of {TOPICS} delivered in time")
        self.assertEqual(sorted(t for t, _, _ in delivered), [f"many-{i:05d}" for i in range(TOPICS)])
        self.assertTrue(all(p == 0 and o == 0 for _, p, o in delivered))
        self.assertLess(watch.peak, BUDGET, watch.describe())
        print(f"{TOPICS} topics: {watch.describe()}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
