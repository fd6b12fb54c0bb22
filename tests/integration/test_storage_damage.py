"""Bytes overwritten in a segment file cost the messages they touch, nothing
more: 3,000 acknowledged 1 KiB messages (one per entry, fsync always), a
clean stop, 16 bytes overwritten a third of the way into the segment, a
restart; a Pulsar subscription and a Kafka consumer get every other
message intact, the backlog drains, and the damage is counted."""
import json
import os
import time
import unittest
import urllib.request

from confluent_kafka import Consumer

import pulsar_api_pb2 as pb
from magnetar_harness import Node
from pulsar_wire import PulsarWire

TOPIC = "persistent://public/default/damaged"
TOTAL = 3000
SIZE = 1024
WINDOW = 200


def payload(i):
    head = b"message-%05d-" % i
    return head + bytes((i + k) % 251 for k in range(SIZE - len(head)))


def segment_files(node):
    seg_dir = os.path.join(node.data_dir, "storage", "segments")
    return [os.path.join(seg_dir, f) for f in sorted(os.listdir(seg_dir)) if f.endswith(".seg")]


class StorageDamageTest(unittest.TestCase):
    def setUp(self):
        self.node = Node("--fsync", "always", keep_data=True).start()

    def tearDown(self):
        self.node.keep_data = False
        self.node.close()

    def produce_all(self):
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            self.assertEqual(wire.create_producer(TOPIC, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            receipts = 0
            sent = 0
            while receipts < TOTAL:
                while sent < TOTAL and sent - receipts < WINDOW:
                    wire.send(1, payload(sent), wait=False)
                    sent += 1
                f = wire.next("SEND_RECEIPT", timeout=30)
                self.assertGreaterEqual(f.cmd.send_receipt.message_id.entryId, 0)
                receipts += 1

    def damage(self):
        """16 bytes overwritten a third of the way into the largest segment."""
        path = max(segment_files(self.node), key=os.path.getsize)
        size = os.path.getsize(path)
        self.assertGreater(size, TOTAL * SIZE)
        with open(path, "r+b") as f:
            f.seek(size // 3)
            f.write(b"\xde\xad\xbe\xef" * 4)

    def topic_stats(self):
        status, body, _ = self.node.get("/admin/v2/persistent/public/default/damaged/stats")
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def test_overwritten_bytes_cost_only_the_messages_they_touch(self):
        port = self.node.ports["pulsar"]
        with PulsarWire(port) as wire:  # a subscription that keeps everything for the check
            self.assertEqual(wire.subscribe(TOPIC, "audit", 1, initial="Earliest").type,
                             pb.BaseCommand.SUCCESS)
        self.produce_all()
        self.assertEqual(self.node.stop(), 0)
        self.damage()
        self.node.start()

        # Pulsar: the subscription gets every message the damage did not touch.
        got = {}
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            wire.subscribe(TOPIC, "audit", 1, initial="Earliest")
            wire.flow(1, TOTAL)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    f = wire.next("MESSAGE", timeout=3)
                except TimeoutError:
                    break
                i = int(f.payload[8:13])
                self.assertEqual(f.payload, payload(i), "message %d changed" % i)
                got[i] = f.cmd.message.message_id
            for mid in got.values():
                wire.ack(1, mid)
        lost = TOTAL - len(got)
        self.assertGreaterEqual(len(got), TOTAL - 2, "the damage cost more than the records it touched")
        self.assertGreaterEqual(lost, 1, "16 overwritten bytes went unnoticed")

        stats = self.topic_stats()
        self.assertEqual(stats["damagedEntries"], lost)
        # The damaged entries were acknowledged for the subscription: it drains.
        deadline = time.monotonic() + 10
        while self.topic_stats()["subscriptions"]["audit"]["msgBacklog"] != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(self.topic_stats()["subscriptions"]["audit"]["msgBacklog"], 0)
        with urllib.request.urlopen(self.node.http_url + "/metrics", timeout=10) as r:
            metrics = r.read().decode()
        self.assertIn("magnetar_ledger_damaged_entries_total %d" % lost, metrics)

        # Kafka: a consumer reading from the start gets the same messages.
        consumer = Consumer({"bootstrap.servers": "127.0.0.1:%d" % self.node.ports["kafka"],
                             "group.id": "damage-check", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["damaged"])
        seen = set()
        deadline = time.monotonic() + 60
        while len(seen) < len(got) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            i = int(msg.value()[8:13])
            self.assertEqual(msg.value(), payload(i))
            seen.add(i)
        consumer.close()
        self.assertEqual(seen, set(got))

        # The node still takes writes to the topic.
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            wire.create_producer(TOPIC, 1)
            self.assertEqual(wire.send(1, b"after").type, pb.BaseCommand.SEND_RECEIPT)


if __name__ == "__main__":
    unittest.main()
