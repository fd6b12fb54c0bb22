"""Message tracing against the real binary with real clients: pulsar-flex
(Node), kcat and pika (AMQP) produce, our Pulsar client, pulsar-flex and a kcat group
consume, one message is negatively acknowledged, one expires by TTL; the
trace shows every stage in order with the right subscriptions and clients,
look-ups by id, key and property find it (REST and `magnetar trace`), and a
message never produced is answered with a clear 404."""
import json
import os
import subprocess
import time
import unittest
import urllib.parse

import pika
from amqp_pika import connect
from magnetar_harness import BIN, NodeTestCase, call_json

TIMEOUT_S = 30
FLEX_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pulsar_client")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class TracingTest(NodeTestCase):
    node_args = ("--housekeeping-secs", "1")

    def run_ok(self, *args, stdin=None, timeout=TIMEOUT_S):
        r = subprocess.run(list(args), input=stdin, capture_output=True, text=True, timeout=timeout)
        self.assertEqual(r.returncode, 0, f"{args}: {r.stderr}")
        return r.stdout

    def cli(self, *args):
        return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=TIMEOUT_S)

    def trace(self, topic, **query):
        path = f"/admin/v2/persistent/{topic}/trace?" + urllib.parse.urlencode(query)
        return call_json(self.node, "GET", path)

    def wait_for_trace(self, topic, ready, **query):
        """The first message of the look-up once `ready(message)` holds
        (events reach the trace topic in the background); bounded."""
        deadline = time.monotonic() + TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            status, body = self.trace(topic, **query)
            if status == 200:
                last = body["messages"][0]
                if ready(last):
                    return last
            time.sleep(0.1)
        self.fail(f"trace of {query} not ready: {json.dumps(last, indent=1)}")

    @staticmethod
    def stages(message, subscription=None):
        return [s["stage"] for s in message["stages"]
                if subscription is None or s.get("subscription") == subscription]

    def assert_in_time_order(self, message):
        times = [s["time"] for s in message["stages"]]
        self.assertEqual(times, sorted(times), message)
        self.assertEqual(self.stages(message)[:2], ["received", "persisted"])
        # What the storage did, as the node is configured (--fsync always).
        self.assertEqual(message["stages"][1].get("detail"), "1 copy on this node, fsync always", message)
        for s in message["stages"]:
            self.assertEqual(s["latencyMs"], s["time"] - message["stages"][0]["time"])

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        r = subprocess.run([BIN, "admin", "--url", cls.node.http_url, "namespaces", "set-tracing", "public/default",
                            "--mode", "all"], capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr

    def test_the_policy_reads_back_and_is_validated(self):
        status, body = call_json(self.node, "GET", "/admin/v2/namespaces/public/default/tracing")
        self.assertEqual(status, 200)
        self.assertEqual(body["mode"], "all")
        for bad in ({"mode": "sometimes"}, {"mode": "sampled", "rate": 0}, {"mode": "sampled", "rate": 2},
                    {"mode": "all", "retentionTimeInMinutes": 0}, "not json"):
            status, body = call_json(self.node, "POST", "/admin/v2/namespaces/public/default/tracing", bad)
            self.assertEqual(status, 400, bad)
            self.assertIn("reason", body)
        status, body = call_json(self.node, "GET", "/admin/v2/namespaces/public/default/tracing")
        self.assertEqual(body["mode"], "all")  # a refused change changed nothing
        status, topics = call_json(self.node, "GET", "/admin/v2/persistent/public/default")
        self.assertEqual(status, 200)
        self.assertFalse([t for t in topics if t.endswith("/__trace")], topics)

    def test_where_did_my_message_go(self):
        topic = "public/default/orders"
        messages = [
            {"payload": "order-1", "properties": {"order-id": "A-1", "traceparent": TRACEPARENT}},
            {"payload": "order-2", "properties": {"order-id": "A-2"}, "nack": True},
        ]
        out = self.run_ok("node", os.path.join(FLEX_DIR, "trace_flow.js"), f"127.0.0.1:{self.node.ports['pulsar']}",
                          f"persistent://{topic}", "billing", json.dumps(messages))
        seen = json.loads(out)
        self.assertEqual([m["payload"] for m in seen if m["payload"] == "order-2"], ["order-2", "order-2"])
        # Kafka produces a third one, with a key; our Pulsar client and a
        # Kafka group consume all three.
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"
        self.run_ok("kcat", "-b", bootstrap, "-P", "-t", "orders", "-K:", "-H", "order-id=K-1",
                    stdin="user-7:order-3\n")
        consumed = self.run_ok(BIN, "consume", "orders", "--url", f"pulsar://127.0.0.1:{self.node.ports['pulsar']}",
                               "-s", "audit", "-t", "Shared", "-P", "Earliest", "-n", "3")
        self.assertEqual(consumed.split(), ["order-1", "order-2", "order-3"])
        self.run_ok("kcat", "-b", bootstrap, "-G", "kafka-reporting", "orders", "-X", "auto.offset.reset=earliest",
                    "-e", "-q")

        # The first: received over Pulsar with its traceparent, then every
        # subscription's dispatch and ack, in time order.
        first = self.wait_for_trace(topic, lambda m: self.stages(m, "billing") == ["dispatched", "acked"]
                                    and self.stages(m, "audit") == ["dispatched", "acked"]
                                    and self.stages(m, "kafka-reporting") == ["acked"], property="order-id:A-1")
        self.assert_in_time_order(first)
        self.assertEqual(first["traceparent"], TRACEPARENT)
        received = first["stages"][0]
        self.assertEqual(received["protocol"], "pulsar")
        self.assertTrue(received["clientAddress"].startswith("127.0.0.1:"))
        # The kcat group's fetch is a dispatch over Kafka (a fetch names no
        # group, so no subscription), before the group's ack.
        fetched = [s for s in first["stages"] if s["stage"] == "dispatched" and s.get("protocol") == "kafka"]
        self.assertEqual(len(fetched), 1, first["stages"])
        self.assertIsNone(fetched[0].get("subscription"))
        self.assertTrue(fetched[0]["clientAddress"].startswith("127.0.0.1:"))
        self.assertLessEqual(fetched[0]["time"],
                             [s for s in first["stages"] if s.get("subscription") == "kafka-reporting"][0]["time"])
        billing = [s for s in first["stages"] if s.get("subscription") == "billing"]
        self.assertEqual(billing[0]["consumer"], "flex-worker")
        self.assertEqual(billing[0]["protocol"], "pulsar")

        # The second: negatively acknowledged once, sent again, then acknowledged.
        second = self.wait_for_trace(topic, lambda m: self.stages(m, "billing")[-1:] == ["acked"],
                                     property="order-id:A-2")
        self.assert_in_time_order(second)
        self.assertEqual(self.stages(second, "billing"), ["dispatched", "nacked", "dispatched", "acked"])
        dispatches = [s for s in second["stages"] if s.get("subscription") == "billing" and s["stage"] == "dispatched"]
        self.assertEqual([d["redeliveryCount"] for d in dispatches], [0, 1])
        self.assertIsNone(second["traceparent"])

        # The Kafka one, by key, then by its message id: the same timeline.
        kafka = self.wait_for_trace(topic, lambda m: self.stages(m, "audit") == ["dispatched", "acked"]
                                    and self.stages(m, "kafka-reporting") == ["acked"], key="user-7")
        self.assert_in_time_order(kafka)
        self.assertEqual(kafka["messages"][0]["properties"], {"order-id": "K-1"})
        self.assertEqual(kafka["stages"][0]["protocol"], "kafka")
        self.assertTrue(kafka["stages"][0]["clientAddress"].startswith("127.0.0.1:"))
        status, by_id = self.trace(topic, messageId=kafka["messageId"])
        self.assertEqual(status, 200)
        self.assertEqual(by_id["messages"][0]["stages"], kafka["stages"])
        self.assertNotEqual(kafka["messageId"], first["messageId"])

        # The command line shows the same timeline.
        r = self.cli("trace", "orders", "--url", self.node.http_url, "--key", "user-7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"message {kafka['messageId']}", r.stdout)
        self.assertEqual([line.split()[3] for line in r.stdout.splitlines()[1:]], self.stages(kafka))
        r = self.cli("trace", "orders", "--url", self.node.http_url, "--property", "order-id=A-1", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["messages"][0]["messageId"], first["messageId"])

    def test_an_amqp_message_is_traced_through_its_queue(self):
        conn = connect(self.node)
        try:
            ch = conn.channel()
            ch.queue_declare("amqp-orders")
            ch.basic_publish("", "amqp-orders", b"order-9",
                             pika.BasicProperties(headers={"order-id": "Q-1", "traceparent": TRACEPARENT}))
            method, _, body = None, None, None
            deadline = time.monotonic() + TIMEOUT_S
            while method is None and time.monotonic() < deadline:
                method, _, body = ch.basic_get("amqp-orders")
                if method is None:
                    time.sleep(0.05)
            self.assertEqual(body, b"order-9")
            ch.basic_ack(method.delivery_tag)
        finally:
            conn.close()
        message = self.wait_for_trace("public/default/amqp-orders",
                                      lambda m: self.stages(m, "amqp") == ["dispatched", "acked"],
                                      property="order-id:Q-1")
        self.assert_in_time_order(message)
        self.assertEqual(message["stages"][0]["protocol"], "amqp")
        self.assertEqual(message["traceparent"], TRACEPARENT)
        dispatched = [s for s in message["stages"] if s["stage"] == "dispatched"][0]
        self.assertEqual(dispatched["protocol"], "amqp")

    def test_a_message_never_produced_says_so(self):
        status, body = self.trace("public/default/orders", key="never-sent")
        self.assertEqual(status, 404)
        self.assertIn("never produced", body["reason"])
        self.assertIn("key 'never-sent'", body["reason"])
        r = self.cli("trace", "orders", "--url", self.node.http_url, "--key", "never-sent")
        self.assertEqual(r.returncode, 1)
        self.assertIn("never produced", r.stderr)
        status, body = self.trace("public/nowhere/orders", messageId="1:2")
        self.assertEqual(status, 404)
        # Bad look-ups are refused and the node still serves.
        for bad in ({"messageId": "one:two"}, {"property": "no-separator"}, {"from": "yesterday", "producer": "p"}, {}):
            status, body = self.trace("public/default/orders", **bad)
            self.assertEqual(status, 400, bad)
            self.assertIn("reason", body)
        self.assertEqual(self.cli("trace", "orders", "--url", self.node.http_url).returncode, 2)
        status, _ = call_json(self.node, "GET", "/admin/v2/namespaces/public/default/tracing")
        self.assertEqual(status, 200)

    def test_a_message_past_its_ttl_shows_as_expired(self):
        ns = "public/expiring"
        self.assertEqual(call_json(self.node, "PUT", f"/admin/v2/namespaces/{ns}")[0], 204)
        self.assertEqual(call_json(self.node, "POST", f"/admin/v2/namespaces/{ns}/tracing", {"mode": "all"})[0], 204)
        self.assertEqual(call_json(self.node, "POST", f"/admin/v2/namespaces/{ns}/messageTTL", 1)[0], 204)
        self.assertEqual(call_json(self.node, "PUT", f"/admin/v2/persistent/{ns}/stale")[0], 204)
        self.assertEqual(call_json(self.node, "PUT", f"/admin/v2/persistent/{ns}/stale/subscription/late")[0], 204)
        self.run_ok(BIN, "produce", f"persistent://{ns}/stale", "--url",
                    f"pulsar://127.0.0.1:{self.node.ports['pulsar']}", "-m", "too-late", "-k", "slow-key")
        message = self.wait_for_trace(f"{ns}/stale", lambda m: "expired" in self.stages(m), key="slow-key")
        self.assertEqual(self.stages(message), ["received", "persisted", "expired"])
        expired = message["stages"][2]
        self.assertEqual(expired["subscription"], "late")
        self.assertGreaterEqual(expired["latencyMs"], 1000)


if __name__ == "__main__":
    unittest.main()
