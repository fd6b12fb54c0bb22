"""Namespace deduplication judges the producers that choose their own
sequence ids (Pulsar's). A Kafka or AMQP publish carries the connection's
own count, which starts again at 0 on every connection and after every
restart: judged, the first publishes of a new connection would be taken
for duplicates of the last one's, acknowledged and dropped. Each test
publishes, restarts the node, publishes again, and reads every message
back. Every wait is bounded.
"""
import time
import unittest

import pika
from confluent_kafka import Consumer, Producer, TopicPartition

from magnetar_harness import NodePerTestCase, call_json


def kafka_produce(node, topic, values):
    delivered, failed = [], []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{node.ports['kafka']}", "acks": "all",
                         "linger.ms": 20, "message.timeout.ms": 20000})
    for v in values:
        producer.produce(topic, v.encode(),
                         on_delivery=lambda err, msg: (failed if err else delivered).append(msg.value().decode()))
    producer.flush(30)
    return delivered, failed


def kafka_read(node, topic, expected, timeout=30):
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{node.ports['kafka']}", "group.id": "reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    consumer.close()
    return got


def amqp_publish(node, queue, bodies):
    """Publishes with confirms; basic_publish raises on a nack."""
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.ports["amqp"], socket_timeout=10))
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue, durable=True)
        for b in bodies:
            ch.basic_publish("", queue, b.encode())
    finally:
        conn.close()


def amqp_read(node, queue, expected, timeout=30):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.ports["amqp"], socket_timeout=10))
    got = []
    try:
        ch = conn.channel()
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            method, _, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                time.sleep(0.05)
                continue
            got.append(body.decode())
    finally:
        conn.close()
    return got


class DeduplicationAcrossProtocolsTest(NodePerTestCase):
    def setUp(self):
        super().setUp()
        status, answer = call_json(self.node, "POST", "/admin/v2/namespaces/public/default/deduplication", True)
        self.assertEqual(status, 204, answer)

    def test_kafka_publishes_after_a_restart_are_stored(self):
        first, failed = kafka_produce(self.node, "kafka-dedup", [f"a{i}" for i in range(100)])
        self.assertEqual((len(first), failed), (100, []))
        self.node.stop()
        self.node.start()
        second, failed = kafka_produce(self.node, "kafka-dedup", [f"b{i}" for i in range(20)])
        self.assertEqual((len(second), failed), (20, []))
        self.assertEqual(kafka_read(self.node, "kafka-dedup", 120), first + second)

    def test_amqp_confirmed_publishes_after_a_restart_are_stored(self):
        amqp_publish(self.node, "amqp-dedup", [f"a{i}" for i in range(100)])
        self.node.stop()
        self.node.start()
        amqp_publish(self.node, "amqp-dedup", [f"b{i}" for i in range(20)])
        got = amqp_read(self.node, "amqp-dedup", 120)
        self.assertEqual(got, [f"a{i}" for i in range(100)] + [f"b{i}" for i in range(20)])


if __name__ == "__main__":
    unittest.main()
