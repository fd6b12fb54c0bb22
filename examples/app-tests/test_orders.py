"""An application's tests against a throwaway Magnetar node.

One node for the whole module: `magnetar start --ephemeral` picks free
ports, prints them as one JSON line once it is ready, and removes
everything it wrote when it gets SIGTERM. Needs python3-confluent-kafka and
python3-pika; runs with `python3 -m unittest test_orders.py` (pytest
collects it unchanged). MAGNETAR names the binary if it is not on PATH.
"""
import json
import os
import subprocess
import unittest

import confluent_kafka
import pika

node = None
urls = {}  # pulsarUrl, httpUrl, kafkaBootstrap, amqpUrl, ports, pid, dataDir


def setUpModule():
    global node, urls
    node = subprocess.Popen([os.environ.get("MAGNETAR", "magnetar"), "start", "--ephemeral"],
                            stdout=subprocess.PIPE, text=True)
    urls = json.loads(node.stdout.readline())  # written once every listener accepts


def tearDownModule():
    node.terminate()  # SIGTERM: the node stops and deletes its temporary directory
    node.wait(timeout=30)
    node.stdout.close()


class OrdersTest(unittest.TestCase):
    def test_an_order_published_over_kafka_is_read_back(self):
        producer = confluent_kafka.Producer({"bootstrap.servers": urls["kafkaBootstrap"]})
        producer.produce("orders", key=b"order-7", value=b'{"total": 42}')
        self.assertEqual(producer.flush(10), 0)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": urls["kafkaBootstrap"], "group.id": "billing",
                                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        message = consumer.poll(10)
        consumer.close()
        self.assertEqual(message.value(), b'{"total": 42}')

    def test_a_job_queued_over_amqp_is_taken(self):
        connection = pika.BlockingConnection(pika.URLParameters(urls["amqpUrl"]))
        channel = connection.channel()
        channel.queue_declare("jobs", durable=True)
        channel.basic_publish("", "jobs", b"resize image 1")
        _, _, body = channel.basic_get("jobs", auto_ack=True)
        connection.close()
        self.assertEqual(body, b"resize image 1")


if __name__ == "__main__":
    unittest.main()
