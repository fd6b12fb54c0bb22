"""Publish rate limits, enforced by back-pressure: a producer going flat out
against a namespace's or a topic's publishRate is slowed to that rate (the
broker stops reading its connection), within 10% over a 10 s window, and
nothing it sent is lost or refused. One real client per protocol: `magnetar
perf produce` (Pulsar), confluent-kafka (librdkafka), pika (AMQP 0-9-1)."""
import json
import subprocess
import threading
import time
import unittest

import confluent_kafka as ck

import pulsar_api_pb2 as pb
from amqp_pika import connect
from magnetar_harness import BIN, NodeTestCase, call_json, expect_call
from pulsar_wire import PulsarWire

WINDOW_S = 10.0
RATE = 1000  # messages per second


def run(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class RateLimitCase(NodeTestCase):
    """Helpers; a node per test class."""

    def expect(self, method, path, body=None, status=204):
        return expect_call(self, self.node, method, path, body, status)

    def namespace_with_rate(self, ns, topic, msgs=-1, byte_rate=-1):
        """A namespace with a publish rate, and its loaded `topic` once the
        limit is in effect there."""
        self.expect("PUT", f"/admin/v2/namespaces/public/{ns}")
        self.expect("PUT", f"/admin/v2/persistent/public/{ns}/{topic}")
        self.expect("POST", f"/admin/v2/namespaces/public/{ns}/publishRate",
                    {"publishThrottlingRateInMsg": msgs, "publishThrottlingRateInByte": byte_rate})
        got = self.expect("GET", f"/admin/v2/namespaces/public/{ns}/publishRate", status=200)
        self.assertEqual(got["publishThrottlingRateInMsg"], msgs)
        self.wait_for_limit(f"public/{ns}/{topic}", msgs, byte_rate)

    def wait_for_limit(self, topic_path, msgs, byte_rate):
        """Policies reach the broker a moment after the admin call returns."""
        want = {"publishThrottlingRateInMsg": msgs, "publishThrottlingRateInByte": byte_rate}
        deadline = time.monotonic() + 10
        def in_effect():
            limit = self.stats(topic_path)["publishRateLimit"]
            return all(limit[k] == v for k, v in want.items())

        while not in_effect():
            self.assertLess(time.monotonic(), deadline, f"the limit never reached {topic_path}")
            time.sleep(0.05)

    def stats(self, topic_path):
        return self.expect("GET", f"/admin/v2/persistent/{topic_path}/stats", status=200)

    def url(self):
        return f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"


class PublishRateTest(RateLimitCase):
    def assert_within_10_percent(self, achieved, configured, what):
        ratio = achieved / configured
        print(f"{what}: achieved {achieved:.1f}/s, configured {configured}/s, ratio {ratio:.3f}")
        self.assertGreaterEqual(ratio, 0.9, what)
        self.assertLessEqual(ratio, 1.1, what)

    def perf_produce(self, topic, *extra):
        r = run("perf", "produce", topic, "--url", self.url(), "--time", str(WINDOW_S), "--json",
                "--disk-dir", "", *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def drain(self, topic, subscription, expected):
        r = run("perf", "consume", topic, "--url", self.url(), "--subscription", subscription,
                "-n", str(expected), "--time", "60", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)["received"]

    def test_pulsar_producer_is_held_to_the_namespace_message_rate(self):
        self.namespace_with_rate("rl-pulsar", "flood", msgs=RATE)
        topic = "persistent://public/rl-pulsar/flood"
        self.expect("PUT", "/admin/v2/persistent/public/rl-pulsar/flood/subscription/count")
        f = self.perf_produce(topic, "--size", "100", "--batch-max-messages", "50")
        self.assertEqual(f["publish_latency_ms"]["count"], f["messages"])  # every send got its receipt
        self.assert_within_10_percent(f["messages"] / f["produce_seconds"], RATE, "pulsar msg/s")
        s = self.stats("public/rl-pulsar/flood")
        self.assertEqual(s["msgInCounter"], f["messages"])
        self.assertGreater(s["publishRateLimitedTimes"], 0)
        self.assertEqual(self.drain(topic, "count", f["messages"]), f["messages"])

    def test_pulsar_producer_is_held_to_a_byte_rate(self):
        byte_rate = 200_000
        self.namespace_with_rate("rl-bytes", "flood", byte_rate=byte_rate)
        topic = "persistent://public/rl-bytes/flood"
        self.expect("PUT", "/admin/v2/persistent/public/rl-bytes/flood/subscription/count")
        f = self.perf_produce(topic, "--size", "1000", "--batch-max-messages", "20")
        s = self.stats("public/rl-bytes/flood")
        # What the limit counts: the stored entries' bytes (metadata and payload).
        self.assert_within_10_percent(s["bytesInCounter"] / f["produce_seconds"], byte_rate, "pulsar bytes/s")
        self.assertEqual(self.drain(topic, "count", f["messages"]), f["messages"])

    def test_kafka_producer_is_held_to_the_topic_message_rate(self):
        # A topic-level policy (Pulsar's /admin/v2/persistent/{t}/{ns}/{topic}/publishRate).
        self.expect("PUT", "/admin/v2/persistent/public/default/rl-kafka")
        self.expect("POST", "/admin/v2/persistent/public/default/rl-kafka/publishRate",
                    {"publishThrottlingRateInMsg": RATE, "publishThrottlingRateInByte": -1})
        self.wait_for_limit("public/default/rl-kafka", RATE, -1)
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"
        delivered = []
        errors = []

        def on_delivery(err, msg):
            (errors if err else delivered).append(time.monotonic())

        p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50,
                         "queue.buffering.max.messages": 1000, "acks": 1})
        payload = b"k" * 100
        sent = 0
        start = time.monotonic()
        while time.monotonic() - start < WINDOW_S:
            try:
                p.produce("rl-kafka", payload, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        in_window = sum(1 for t in delivered if t - start <= WINDOW_S)
        self.assertEqual(p.flush(60), 0)
        self.assertEqual(errors, [])
        self.assertEqual(len(delivered), sent)
        self.assert_within_10_percent(in_window / WINDOW_S, RATE, "kafka msg/s")
        s = self.stats("public/default/rl-kafka")
        self.assertEqual(s["msgInCounter"], sent)
        self.assertGreater(s["publishRateLimitedTimes"], 0)
        c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "rl-count", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        c.subscribe(["rl-kafka"])
        got = 0
        deadline = time.monotonic() + 60
        while got < sent and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                self.assertIsNone(m.error())
                got += 1
        c.close()
        self.assertEqual(got, sent)

    def test_amqp_publisher_is_held_to_the_namespace_message_rate(self):
        self.namespace_with_rate("rl-amqp", "flood", msgs=RATE)
        conn = connect(self.node, virtual_host="public/rl-amqp")
        ch = conn.channel()
        ch.queue_declare("flood", durable=True)
        stop = threading.Event()
        sent = [0]

        def publish_flat_out():
            # Without confirms: basic_publish returns once the bytes are in
            # the socket, and blocks while the broker does not read them.
            while not stop.is_set():
                ch.basic_publish("", "flood", b"a" * 1000)
                sent[0] += 1

        publisher = threading.Thread(target=publish_flat_out)
        publisher.start()
        try:
            # The achieved rate is what the broker stored over the window.
            deadline = time.monotonic() + 10
            while self.stats("public/rl-amqp/flood")["msgInCounter"] == 0:
                self.assertLess(time.monotonic(), deadline, "nothing arrived")
                time.sleep(0.01)
            t0, c0 = time.monotonic(), self.stats("public/rl-amqp/flood")["msgInCounter"]
            time.sleep(WINDOW_S)
            t1, c1 = time.monotonic(), self.stats("public/rl-amqp/flood")["msgInCounter"]
            self.assert_within_10_percent((c1 - c0) / (t1 - t0), RATE, "amqp msg/s")
        finally:
            stop.set()
            publisher.join(120)
        self.assertFalse(publisher.is_alive())
        # Everything the client wrote arrives, at the limit's pace.
        deadline = time.monotonic() + 120
        while ch.queue_declare("flood", passive=True).method.message_count < sent[0]:
            self.assertLess(time.monotonic(), deadline, "messages went missing")
            time.sleep(0.2)
        self.assertEqual(ch.queue_declare("flood", passive=True).method.message_count, sent[0])
        self.assertGreater(self.stats("public/rl-amqp/flood")["publishRateLimitedTimes"], 0)
        conn.close()

    def produce_unlimited(self, topic, n):
        r = run("perf", "produce", topic, "--url", self.url(), "-n", str(n), "--batch", "false", "--size", "100",
                "--time", "120", "--json", "--disk-dir", "")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["messages"], n)

    def consume_for(self, topic, subscription, seconds):
        return subprocess.Popen([BIN, "perf", "consume", topic, "--url", self.url(), "--subscription", subscription,
                                 "--time", str(seconds), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, proc):
        out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)
        return json.loads(out)

    def test_dispatch_is_held_to_the_topic_and_subscription_rates(self):
        # dispatchRate (per topic, shared by its subscriptions) on one
        # namespace, subscriptionDispatchRate (each subscription) on another.
        for ns, policy, body in (
                ("rl-dispatch", "dispatchRate", {"dispatchThrottlingRateInMsg": RATE}),
                ("rl-subdispatch", "subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": RATE // 2})):
            self.expect("PUT", f"/admin/v2/namespaces/public/{ns}")
            self.expect("POST", f"/admin/v2/namespaces/public/{ns}/{policy}",
                        {**body, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1})
            self.expect("PUT", f"/admin/v2/persistent/public/{ns}/t")
        topic_path, sub_path = "public/rl-dispatch/t", "public/rl-subdispatch/t"
        self.expect("PUT", f"/admin/v2/persistent/{topic_path}/subscription/s?messageId=earliest")
        for sub in ("a", "b"):
            self.expect("PUT", f"/admin/v2/persistent/{sub_path}/subscription/{sub}?messageId=earliest")
        total = int(RATE * WINDOW_S * 1.5)
        self.produce_unlimited(f"persistent://{topic_path}", total)
        self.produce_unlimited(f"persistent://{sub_path}", total)
        consumers = {
            ("topic", "s"): self.consume_for(f"persistent://{topic_path}", "s", WINDOW_S),
            ("sub", "a"): self.consume_for(f"persistent://{sub_path}", "a", WINDOW_S),
            ("sub", "b"): self.consume_for(f"persistent://{sub_path}", "b", WINDOW_S),
        }
        got = {key: self.finish(p) for key, p in consumers.items()}
        for (scope, sub), f in got.items():
            limit = RATE if scope == "topic" else RATE // 2
            self.assert_within_10_percent(f["consume_msgs_per_s"], limit,
                                          f"{scope} dispatch, subscription {sub}")
        # The rest is delivered too, at the limit's pace.
        for path, sub in ((topic_path, "s"), (sub_path, "a"), (sub_path, "b")):
            stats = self.stats(path)["subscriptions"][sub]
            self.assertGreater(stats["dispatchRateLimitedTimes"], 0)
            left = stats["msgBacklog"]
            self.assertGreater(left, 0)
            r = run("perf", "consume", f"persistent://{path}", "--url", self.url(), "--subscription", sub,
                    "-n", str(left), "--time", "60", "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout)["received"], left)

    def test_a_removed_limit_stops_holding_and_garbage_is_refused(self):
        self.namespace_with_rate("rl-off", "t", msgs=10)
        self.expect("DELETE", "/admin/v2/namespaces/public/rl-off/publishRate")
        self.wait_for_limit("public/rl-off/t", -1, -1)
        # 2000 messages at 10/s would not fit in --time; without the limit nothing holds them.
        r = run("perf", "produce", "persistent://public/rl-off/t", "--url", self.url(), "-n", "2000",
                "--time", "60", "--json", "--disk-dir", "")
        self.assertEqual(r.returncode, 0, r.stderr)
        f = json.loads(r.stdout)
        self.assertEqual(f["messages"], 2000)
        self.assertEqual(self.stats("public/rl-off/t")["publishRateLimitedTimes"], 0)
        for bad in ({"publishThrottlingRateInMsg": -5}, {"publishThrottlingRateInMsg": "fast"}, "not json"):
            got, answer = call_json(self.node, "POST", "/admin/v2/namespaces/public/rl-off/publishRate", bad)
            self.assertEqual(got, 400, answer)
            self.assertIn("reason", answer)


class PolicyChangeTest(RateLimitCase):
    """A changed dispatch rate reaches a consumer already attached at once:
    the maintenance pass, which would also apply it, is an hour away here."""

    node_args = ("--housekeeping-secs", "3600")

    def test_a_changed_dispatch_rate_applies_to_an_attached_consumer(self):
        ns, topic_path = "/admin/v2/namespaces/public/rl-change", "public/rl-change/t"
        topic = "persistent://" + topic_path
        self.expect("PUT", ns)
        total = 200
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            for i in range(total):
                self.assertEqual(w.send(1, b"m%d" % i).type, pb.BaseCommand.SEND_RECEIPT)
            # Attached before any limit, with no permits yet.
            self.assertEqual(w.subscribe(topic, "s", 10, sub_type="Shared", initial="Earliest").type,
                             pb.BaseCommand.SUCCESS)
            self.expect("POST", ns + "/dispatchRate", {"dispatchThrottlingRateInMsg": 2,
                                                       "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1})
            # The same namespace record carries a publish rate: once the
            # topic shows it, the broker has the dispatch rate too.
            self.expect("POST", ns + "/publishRate", {"publishThrottlingRateInMsg": 1000000,
                                                      "publishThrottlingRateInByte": -1})
            self.wait_for_limit(topic_path, 1000000, -1)
            w.flow(10, 1000)
            deadline = time.monotonic() + 10
            while self.stats(topic_path)["subscriptions"]["s"]["dispatchRateLimitedTimes"] == 0:
                self.assertLess(time.monotonic(), deadline, "the new dispatch rate never held the consumer")
                time.sleep(0.1)
            sent = self.stats(topic_path)["subscriptions"]["s"]["msgOutCounter"]
            self.assertLess(sent, total // 2, "most of the backlog should wait at 2 msg/s")
            # Lifted: the rest comes now, not at 2 msg/s (which would take
            # over a minute and a half).
            self.expect("DELETE", ns + "/dispatchRate")
            got = w.receive(10, total, timeout=30)
            self.assertEqual([m.payload for m in got], [b"m%d" % i for i in range(total)])


if __name__ == "__main__":
    unittest.main()
