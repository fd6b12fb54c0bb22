"""Dispatch limits over every protocol. A tenant's dispatchRate
(/admin/v2/tenants/{t}/limits) is one budget for everything its consumers
receive: a Pulsar subscription, an AMQP queue and a Kafka group on
different topics of the tenant, each consumed flat out at once, are held together to the limit
(within 10% over a 10 s window), each gets its turn, nothing is lost, and
another tenant's consumer is not slowed. Kafka fetches answer with fewer
records under a topic's dispatchRate and a group's
subscriptionDispatchRate. Real clients: `magnetar perf consume` (Pulsar),
pika (AMQP 0-9-1), confluent-kafka (librdkafka)."""
import json
import subprocess
import threading
import time
import unittest

import confluent_kafka as ck
from amqp_pika import connect
from magnetar_harness import BIN, NodeTestCase, expect_call

WINDOW_S = 10.0
TENANT_RATE = 1000  # messages per second over the whole tenant
BACKLOG = 16000     # per topic: more than the window can deliver at the limit


def run(*args, timeout=180):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class DispatchLimitsTest(NodeTestCase):
    def expect(self, method, path, body=None, status=204):
        return expect_call(self, self.node, method, path, body, status)

    def url(self):
        return f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"

    def bootstrap(self):
        return f"127.0.0.1:{self.node.ports['kafka']}"

    def stats(self, topic_path):
        return self.expect("GET", f"/admin/v2/persistent/{topic_path}/stats", status=200)

    def assert_within_10_percent(self, achieved, configured, what):
        ratio = achieved / configured
        print(f"{what}: achieved {achieved:.1f}/s, configured {configured}/s, ratio {ratio:.3f}")
        self.assertGreaterEqual(ratio, 0.9, what)
        self.assertLessEqual(ratio, 1.1, what)

    def produce(self, topic, n):
        r = run("perf", "produce", topic, "--url", self.url(), "-n", str(n), "--batch", "false", "--size", "100",
                "--time", "120", "--json", "--disk-dir", "")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["messages"], n)

    def perf_consume(self, topic, subscription, *limit):
        return subprocess.Popen([BIN, "perf", "consume", topic, "--url", self.url(), "--subscription", subscription,
                                 "--json", *limit], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(self, proc):
        out, err = proc.communicate(timeout=180)
        self.assertEqual(proc.returncode, 0, err)
        return json.loads(out)

    def tenant_with_dispatch_rate(self, tenant, rate):
        self.expect("PUT", f"/admin/v2/tenants/{tenant}", {})
        self.expect("PUT", f"/admin/v2/namespaces/{tenant}/ns")
        self.expect("POST", f"/admin/v2/tenants/{tenant}/limits",
                    {"dispatchRate": {"dispatchThrottlingRateInMsg": rate, "dispatchThrottlingRateInByte": -1}})
        got = self.expect("GET", f"/admin/v2/tenants/{tenant}/limits", status=200)
        self.assertEqual(got["dispatchRate"]["dispatchThrottlingRateInMsg"], rate)

    def amqp_backlog(self, vhost, queue, n):
        conn = connect(self.node, virtual_host=vhost)
        ch = conn.channel()
        ch.queue_declare(queue, durable=True)
        ch.confirm_delivery()
        for i in range(n):
            ch.basic_publish("", queue, b"q" * 100)
        self.assertEqual(ch.queue_declare(queue, passive=True).method.message_count, n)
        conn.close()

    def amqp_consume_for(self, vhost, queue, seconds, into):
        """Consumes flat out for `seconds` (acking each), then counts what it got."""
        conn = connect(self.node, virtual_host=vhost)
        ch = conn.channel()
        ch.basic_qos(prefetch_count=1000)
        got = [0]

        def on_message(channel, method, properties, body):
            got[0] += 1
            channel.basic_ack(method.delivery_tag)

        ch.basic_consume(queue, on_message)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            conn.process_data_events(time_limit=0.1)
        into["amqp"] = got[0] / (time.monotonic() - start)
        conn.close()

    def test_a_tenant_dispatch_rate_holds_pulsar_amqp_and_kafka_together(self):
        self.tenant_with_dispatch_rate("dt", TENANT_RATE)
        self.expect("PUT", "/admin/v2/namespaces/public/dt-free")
        self.expect("PUT", "/admin/v2/persistent/dt/ns/a")
        self.expect("PUT", "/admin/v2/persistent/dt/ns/a/subscription/s?messageId=earliest")
        self.expect("PUT", "/admin/v2/persistent/public/dt-free/f")
        self.expect("PUT", "/admin/v2/persistent/public/dt-free/f/subscription/s?messageId=earliest")
        self.expect("PUT", "/admin/v2/persistent/dt/ns/k")
        self.produce("persistent://dt/ns/a", BACKLOG)
        self.produce("persistent://dt/ns/k", BACKLOG)
        self.produce("persistent://public/dt-free/f", BACKLOG)
        self.amqp_backlog("dt/ns", "q", BACKLOG // 2)

        rates = {}
        pulsar = self.perf_consume("persistent://dt/ns/a", "s", "--time", str(WINDOW_S))
        free = self.perf_consume("persistent://public/dt-free/f", "s", "-n", str(BACKLOG), "--time", "120")
        amqp = threading.Thread(target=self.amqp_consume_for, args=("dt/ns", "q", WINDOW_S, rates))
        kafka = threading.Thread(target=self.kafka_consume_for, args=("dt/ns", "k", "dg", WINDOW_S, rates, "kafka"))
        amqp.start()
        kafka.start()
        rates["pulsar"] = self.finish(pulsar)["consume_msgs_per_s"]
        for t in (amqp, kafka):
            t.join(120)
            self.assertFalse(t.is_alive())
        self.assertEqual(rates["kafka-errors"], [])
        other = self.finish(free)

        # Each of the tenant's consumers had its turn; together they got the tenant's rate.
        mine = ("pulsar", "amqp", "kafka")
        print("tenant dt: " + ", ".join(f"{k} {rates[k]:.1f}/s" for k in mine))
        for k in mine:
            self.assertGreater(rates[k], TENANT_RATE * 0.1, k)
        self.assert_within_10_percent(sum(rates[k] for k in mine), TENANT_RATE, "tenant dispatch msg/s")
        self.assertGreater(self.stats("dt/ns/a")["subscriptions"]["s"]["dispatchRateLimitedTimes"], 0)
        # Another tenant's consumer drains its whole backlog meanwhile, well above dt's limit.
        self.assertEqual(other["received"], BACKLOG)
        print(f"tenant public: {other['consume_msgs_per_s']:.1f}/s")
        self.assertGreater(other["consume_msgs_per_s"], TENANT_RATE * 3)

        # Nothing is lost: the rest arrives at the limit's pace.
        left = self.stats("dt/ns/a")["subscriptions"]["s"]["msgBacklog"]
        self.assertGreater(left, 0)
        r = run("perf", "consume", "persistent://dt/ns/a", "--url", self.url(), "--subscription", "s",
                "-n", str(left), "--time", "60", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["received"], left)

    def kafka_consumer(self, namespace, group, stats=None):
        """A confluent-kafka consumer in `namespace` (SASL/PLAIN's user name
        chooses it). Its client id is its own: a Fetch names no group, and
        the broker knows the fetching connection's group by client id and host."""
        conf = {"bootstrap.servers": self.bootstrap(), "group.id": group, "auto.offset.reset": "earliest",
                "client.id": f"{group}-consumer",
                "enable.auto.commit": False, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": namespace, "sasl.password": "any"}
        if stats is not None:
            conf["statistics.interval.ms"] = 1000
            conf["stats_cb"] = stats.append
        return ck.Consumer(conf)

    def kafka_consume_for(self, namespace, topic, group, seconds, into, key, stats=None):
        """Consumes for `seconds` from the first message on; into[key] = msg/s."""
        c = self.kafka_consumer(namespace, group, stats)
        c.subscribe([topic])
        got, first, errors = 0, None, []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (first is None or time.monotonic() - first < seconds):
            for m in c.consume(100, 0.2):
                if m.error():
                    errors.append(m.error())
                    continue
                if first is None:
                    first = time.monotonic()
                got += 1
        into[key] = got / (time.monotonic() - first) if first is not None else 0.0
        into[key + "-errors"] = errors
        c.close()

    def test_kafka_fetches_are_held_to_the_topic_and_group_rates(self):
        # dispatchRate (per topic) on one namespace, subscriptionDispatchRate
        # (each group on its own) on another.
        rate = 1000
        for ns, policy, msgs in (("public/dk-topic", "dispatchRate", rate),
                                 ("public/dk-group", "subscriptionDispatchRate", rate // 2)):
            self.expect("PUT", f"/admin/v2/namespaces/{ns}")
            self.expect("POST", f"/admin/v2/namespaces/{ns}/{policy}",
                        {"dispatchThrottlingRateInMsg": msgs, "dispatchThrottlingRateInByte": -1,
                         "ratePeriodInSecond": 1})
            self.expect("PUT", f"/admin/v2/persistent/{ns}/t")
            self.produce(f"persistent://{ns}/t", BACKLOG)
        got, stats = {}, []
        threads = [threading.Thread(target=self.kafka_consume_for,
                                    args=("public/dk-topic", "t", "g", WINDOW_S, got, "topic", stats))]
        threads += [threading.Thread(target=self.kafka_consume_for,
                                     args=("public/dk-group", "t", g, WINDOW_S, got, g)) for g in ("ga", "gb")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            self.assertFalse(t.is_alive())
        for key in ("topic", "ga", "gb"):
            self.assertEqual(got[key + "-errors"], [])
        self.assert_within_10_percent(got["topic"], rate, "kafka fetch, topic dispatchRate")
        for g in ("ga", "gb"):
            self.assert_within_10_percent(got[g], rate // 2, f"kafka fetch, group {g} subscriptionDispatchRate")
        # The broker told the client it was throttled (ThrottleTimeMs, in librdkafka's statistics).
        throttled = [b["throttle"]["max"] for s in stats for b in json.loads(s)["brokers"].values()
                     if b.get("throttle")]
        self.assertTrue(throttled and max(throttled) > 0, "no fetch answered with a throttle time")

        # Nothing is lost: a fresh group reads the whole topic, at the limit's pace.
        c = self.kafka_consumer("public/dk-group", "all")
        c.subscribe(["t"])
        total, deadline = 0, time.monotonic() + 120
        while total < BACKLOG and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                self.assertIsNone(m.error())
                total += 1
        c.close()
        self.assertEqual(total, BACKLOG)


if __name__ == "__main__":
    unittest.main()
