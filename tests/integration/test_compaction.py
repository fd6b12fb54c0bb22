"""Topic compaction: the latest value per key, read back the same through
Kafka (confluent-kafka, KafkaJS) and a Pulsar read_compacted reader (our
own client, `magnetar consume --read-compacted`), before and after a
restart; compaction while producers go on; the REST calls and CLI verbs
that start it and report on it; and the clear errors bad input gets.

Ledgers are closed every 20 entries and housekeeping runs every second, so
a compact topic's history is dropped behind its compacted view within the
test. Every wait is bounded; no assertion is about time."""
import json
import os
import subprocess
import threading
import time
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from cluster_harness import wait_for
from magnetar_harness import BIN, Node, admin, call_json, expect_call

TIMEOUT_S = 60
NODE_ARGS = ("--managed-ledger-max-entries-per-ledger", "20", "--housekeeping-secs", "1")
KAFKAJS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafkajs")
KEYS = 100
VERSIONS = 10
DELETED = range(0, 100, 10)  # keys that end with a tombstone


def produce_versions(bootstrap, topic, keys=KEYS, versions=VERSIONS, deleted=DELETED):
    """keys x versions values ("k<key>" -> "v<version>-k<key>"), one key's
    versions spread over the log, then a tombstone for each key in `deleted`.
    Batches of 50 records (one stored entry each). The live latest values."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    failed = []
    report = lambda e, m: failed.append(e) if e else None  # noqa: E731
    for v in range(versions):
        for k in range(keys):
            p.produce(topic, key=f"k{k}", value=f"v{v}-k{k}", on_delivery=report)
        p.poll(0)
    for k in deleted:
        p.produce(topic, key=f"k{k}", value=None, on_delivery=report)
    assert p.flush(TIMEOUT_S) == 0, "undelivered records"
    assert not failed, failed[:3]
    return {f"k{k}": f"v{versions - 1}-k{k}" for k in range(keys) if k not in deleted}


def confluent_read(bootstrap, topic, expected):
    """[(offset, key, value)] a new group reads from the beginning, until
    `expected` records or 3 s without one."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    last = time.monotonic()
    try:
        while len(got) < expected and time.monotonic() < deadline and time.monotonic() - last < 3:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got.append((m.offset(), m.key().decode() if m.key() is not None else None,
                                m.value().decode() if m.value() is not None else None))
                    last = time.monotonic()
    finally:
        c.close()
    return got


def kafkajs_read(bootstrap, topic, expected):
    r = subprocess.run(["node", "read_topic.js", bootstrap, topic, str(expected)], cwd=KAFKAJS_DIR,
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr
    return [tuple(x) for x in json.loads(r.stdout)]


def pulsar_read_compacted(node, topic, *extra):
    """(key, payload) of every message a read_compacted reader gets from the earliest."""
    r = subprocess.run([BIN, "consume", topic, "--reader", "-P", "Earliest", "--read-compacted", "--json", "-n", "0",
                        "--timeout", "3", "--url", f"pulsar://127.0.0.1:{node.ports['pulsar']}", *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [(m["key"], m["payload"]) for m in map(json.loads, r.stdout.splitlines())]


def latest(records):
    """key -> value of the last record of each key (a tombstone removes it)."""
    out = {}
    for _, key, value in records:
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def topic_path(topic):
    return f"/admin/v2/persistent/public/default/{topic}"


def compact(test, node, topic):
    """Starts a pass and waits for it to succeed; its status."""
    expect_call(test, node, "PUT", topic_path(topic) + "/compaction")
    status = wait_for(lambda: (lambda s: s if s["status"] != "RUNNING" else None)(
        call_json(node, "GET", topic_path(topic) + "/compaction")[1]), f"the compaction of {topic} ends")
    test.assertEqual(status["status"], "SUCCESS", status)
    return status


class CompactionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = Node(*NODE_ARGS).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        assert code == 0, f"exit code {code}"

    def bootstrap(self):
        return f"127.0.0.1:{self.node.ports['kafka']}"

    def create_kafka_topic(self, topic, config):
        a = AdminClient({"bootstrap.servers": self.bootstrap()})
        a.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=TIMEOUT_S)

    def describe(self, topic):
        a = AdminClient({"bootstrap.servers": self.bootstrap()})
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        return {k: v.value for k, v in a.describe_configs([res])[res].result(timeout=TIMEOUT_S).items()}

    def check_compacted_view(self, topic, partition, want):
        got = confluent_read(self.bootstrap(), topic, len(want))
        self.assertEqual(len(got), len(want), got[:5])
        self.assertEqual({k: v for _, k, v in got}, want)
        offsets = [o for o, _, _ in got]
        self.assertEqual(offsets, sorted(offsets))
        self.assertEqual(latest(kafkajs_read(self.bootstrap(), topic, len(want))), want)
        js = kafkajs_read(self.bootstrap(), topic, len(want))
        self.assertEqual(len(js), len(want))
        pulsar = pulsar_read_compacted(self.node, f"persistent://public/default/{partition}")
        self.assertEqual(len(pulsar), len(want))
        self.assertEqual(dict(pulsar), want)

    def test_a_compacted_kafka_topic_reads_the_latest_values_everywhere_and_after_a_restart(self):
        topic, partition = "cmp-orders", "cmp-orders-partition-0"
        self.create_kafka_topic(topic, {"cleanup.policy": "compact", "delete.retention.ms": "0"})
        configs = self.describe(topic)
        self.assertEqual(configs["cleanup.policy"], "compact")
        self.assertEqual(configs["delete.retention.ms"], "0")
        want = produce_versions(self.bootstrap(), topic)
        status = compact(self, self.node, partition)
        run = status["lastRun"]
        self.assertEqual(run["liveKeys"], len(want))
        self.assertLess(run["bytesAfter"], run["bytesBefore"])
        self.check_compacted_view(topic, partition, want)
        # Offsets keep their values: the first live record of the view is
        # at the offset it was written at, with gaps before it.
        low, high = ck.Consumer({"bootstrap.servers": self.bootstrap(), "group.id": "wm"}).get_watermark_offsets(
            ck.TopicPartition(topic, 0), timeout=TIMEOUT_S)
        self.assertEqual(high, KEYS * VERSIONS + len(DELETED))
        self.assertGreaterEqual(low, 0)
        # The view survives a restart, and so does what follows it.
        code = self.node.stop()
        self.assertEqual(code, 0)
        self.node.start()
        self.check_compacted_view(topic, partition, want)
        p = ck.Producer({"bootstrap.servers": self.bootstrap()})
        p.produce(topic, key="k1", value="after-restart")
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        want["k1"] = "after-restart"
        # Until the next pass, the older k1 in the view and the newer after
        # the horizon are both read (as from a Kafka log not cleaned yet).
        self.assertEqual(latest(confluent_read(self.bootstrap(), topic, len(want) + 1)), want)
        compact(self, self.node, partition)
        self.check_compacted_view(topic, partition, want)
        # A durable read_compacted subscription acknowledges what it read;
        # a seek back to the start (resetcursor by time) reads the view again.
        full = f"persistent://public/default/{partition}"

        def consume_subscription():
            url = f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"
            r = subprocess.run([BIN, "consume", full, "-s", "cmp-sub", "-P", "Earliest", "--read-compacted", "--json",
                                "-n", "0", "--timeout", "3", "--url", url], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            return [(m["key"], m["payload"]) for m in map(json.loads, r.stdout.splitlines())]

        self.assertEqual(dict(consume_subscription()), want)
        self.assertEqual(consume_subscription(), [])
        expect_call(self, self.node, "POST", topic_path(partition) + "/subscription/cmp-sub/resetcursor/0")
        again = consume_subscription()
        self.assertEqual(len(again), len(want))
        self.assertEqual(dict(again), want)

    def test_b_compaction_under_concurrent_produce_loses_nothing_after_the_horizon(self):
        topic, partition = "cmp-busy", "cmp-busy-partition-0"
        self.create_kafka_topic(topic, {"cleanup.policy": "compact", "delete.retention.ms": "0"})
        produce_versions(self.bootstrap(), topic, deleted=())
        final = {}
        stop = threading.Event()
        errors = []

        def keep_producing():
            p = ck.Producer({"bootstrap.servers": self.bootstrap(), "linger.ms": 2})
            n = 0
            while not stop.is_set():
                key = f"k{n % KEYS}"
                value = f"live-{n}"
                p.produce(topic, key=key, value=value,
                          on_delivery=lambda e, m: errors.append(e) if e else None)
                final[key] = value
                n += 1
                p.poll(0)
                if n % 200 == 0:
                    time.sleep(0.01)
            if p.flush(TIMEOUT_S) != 0:
                errors.append("undelivered")

        t = threading.Thread(target=keep_producing)
        t.start()
        try:
            time.sleep(0.5)
            compact(self, self.node, partition)
            time.sleep(0.5)
        finally:
            stop.set()
            t.join(TIMEOUT_S)
        self.assertEqual(errors, [])
        want = {f"k{k}": f"v{VERSIONS - 1}-k{k}" for k in range(KEYS)}
        want.update(final)
        got = confluent_read(self.bootstrap(), topic, 10 ** 9)
        self.assertEqual(latest(got), want)
        # A second pass folds in what came after the first.
        compact(self, self.node, partition)
        got = confluent_read(self.bootstrap(), topic, len(want))
        self.assertEqual(len(got), len(want))
        self.assertEqual(latest(got), want)

    def test_c_pulsar_topic_rest_cli_and_threshold(self):
        url = f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"
        topic = "persistent://public/default/cmp-pulsar"

        def produce(key, value):
            r = subprocess.run([BIN, "produce", topic, "-k", key, "-m", value, "--url", url],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)

        for v in range(3):
            for k in range(5):
                produce(f"p{k}", f"v{v}")
        produce("p0", "")  # an empty payload with a key: a tombstone
        code, out, err = admin(self.node, "--json", "topics", "compaction-status", topic)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["status"], "NOT_RUN")
        code, out, err = admin(self.node, "topics", "compact", topic)
        self.assertEqual(code, 0, err)
        status = lambda: json.loads(admin(self.node, "--json", "topics", "compaction-status", topic)[1])  # noqa: E731
        wait_for(lambda: status()["status"] == "SUCCESS",
                 "the CLI's compaction succeeds")
        # A Pulsar topic keeps a tombstone for delete.retention.ms (0 unless set): p0 is gone.
        self.assertEqual(dict(pulsar_read_compacted(self.node, topic)), {f"p{k}": "v2" for k in range(1, 5)})
        # Without read_compacted the whole history is still there.
        r = subprocess.run([BIN, "consume", topic, "--reader", "-P", "Earliest", "-n", "0", "--timeout", "2",
                            "--url", url], capture_output=True, text=True, timeout=60)
        self.assertEqual(len(r.stdout.splitlines()), 16)

        # compactionThreshold, namespace and topic, as Pulsar's REST API has them.
        ns = "/admin/v2/namespaces/public/default/compactionThreshold"
        expect_call(self, self.node, "POST", ns, 1 << 30)
        self.assertEqual(expect_call(self, self.node, "GET", ns, status=200), 1 << 30)
        auto = "persistent://public/default/cmp-auto"
        expect_call(self, self.node, "PUT", topic_path("cmp-auto"))
        expect_call(self, self.node, "POST", topic_path("cmp-auto") + "/compactionThreshold", 200)
        self.assertEqual(expect_call(self, self.node, "GET", topic_path("cmp-auto") + "/compactionThreshold",
                                     status=200), 200)
        for k in range(10):
            r = subprocess.run([BIN, "produce", auto, "-k", "same", "-m", f"value-{k}", "--url", url],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
        wait_for(lambda: call_json(self.node, "GET", topic_path("cmp-auto") + "/compaction")[1]["status"] == "SUCCESS",
                 "the threshold starts a pass")
        # Passes started by the threshold as the values came: what a
        # compacted reader gets ends with the latest and skips older ones.
        wait_for(lambda: pulsar_read_compacted(self.node, auto)[-1] == ("same", "value-9"), "the latest value reads")
        self.assertLess(len(pulsar_read_compacted(self.node, auto)), 10)
        expect_call(self, self.node, "DELETE", ns)
        code, out, err = admin(self.node, "namespaces", "set-compaction-threshold", "public/default", "-t", "1000")
        self.assertEqual(code, 0, err)
        self.assertEqual(expect_call(self, self.node, "GET", ns, status=200), 1000)
        expect_call(self, self.node, "DELETE", ns)

    def test_d_bad_input_gets_clear_errors(self):
        status, body = call_json(self.node, "PUT", "/admin/v2/non-persistent/public/default/np/compaction")
        self.assertEqual(status, 412)
        self.assertIn("persistent topics only", json.dumps(body))
        status, body = call_json(self.node, "PUT", topic_path("no-such-topic") + "/compaction")
        self.assertEqual(status, 404, body)
        status, body = call_json(self.node, "GET", topic_path("no-such-topic") + "/compaction")
        self.assertEqual(status, 404, body)
        for bad in (-1, "\"ten\"", 1.5):
            status, body = call_json(self.node, "POST", "/admin/v2/namespaces/public/default/compactionThreshold",
                                     bad if not isinstance(bad, str) else bad)
            self.assertEqual(status, 400, (bad, body))
        a = AdminClient({"bootstrap.servers": self.bootstrap()})
        for config, why in (({"cleanup.policy": "shrink"}, "cleanup.policy"),
                            ({"delete.retention.ms": "-5"}, "delete.retention.ms"),
                            ({"min.compaction.lag.ms": "soon"}, "min.compaction.lag.ms")):
            f = a.create_topics([NewTopic("cmp-bad", 1, 1, config=config)])["cmp-bad"]
            with self.assertRaises(ck.KafkaException) as e:
                f.result(timeout=TIMEOUT_S)
            self.assertEqual(e.exception.args[0].code(), ck.KafkaError.INVALID_CONFIG)
            self.assertIn(why, e.exception.args[0].str())
        # read_compacted is for Exclusive and Failover subscriptions only.
        r = subprocess.run([BIN, "consume", "persistent://public/default/cmp-shared", "-s", "s", "-t", "Shared",
                            "--read-compacted", "-n", "1", "--timeout", "1",
                            "--url", f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exclusive or failover", r.stderr)
        # A compact topic refuses records without a key, as Kafka does.
        self.create_kafka_topic("cmp-keyless", {"cleanup.policy": "compact"})
        p = ck.Producer({"bootstrap.servers": self.bootstrap(), "retries": 0})
        reports = []
        # One batch each: Kafka refuses a batch with any record without a key.
        p.produce("cmp-keyless", value="no key", on_delivery=lambda e, m: reports.append(e))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        p.produce("cmp-keyless", key="k", value="keyed", on_delivery=lambda e, m: reports.append(e))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(reports[0].code(), ck.KafkaError.INVALID_RECORD)
        self.assertIsNone(reports[1])
        # Altering the policy of an existing topic: APPEND compact, then SUBTRACT it.
        self.create_kafka_topic("cmp-alter", {})
        res = ConfigResource(ConfigResource.Type.TOPIC, "cmp-alter", set_config={"cleanup.policy": "compact,delete"})
        a.alter_configs([res])[res].result(timeout=TIMEOUT_S)
        self.assertEqual(self.describe("cmp-alter")["cleanup.policy"], "compact,delete")


class CompactDeleteRetentionTest(unittest.TestCase):
    """A `compact,delete` topic's compacted view ages out by its retention
    time, as Kafka deletes a compacted log's old segments."""

    def test_the_view_of_a_compact_delete_topic_ages_out_by_retention(self):
        node = Node(*NODE_ARGS, "--kafka-default-retention-ms", "1000").start()
        try:
            bootstrap = f"127.0.0.1:{node.ports['kafka']}"
            a = AdminClient({"bootstrap.servers": bootstrap})
            topic = "cmp-aging"
            a.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact,delete", "retention.ms": "-1"})])[
                topic].result(timeout=TIMEOUT_S)
            live = produce_versions(bootstrap, topic, keys=20, versions=3, deleted=[])
            compact(self, node, topic + "-partition-0")
            # Retention forever: the view keeps every key.
            self.assertEqual({k: v for _, k, v in confluent_read(bootstrap, topic, len(live))}, live)
            # Its retention falls back to the node's (1 s): the view ages out.
            res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"cleanup.policy": "compact,delete"})
            a.alter_configs([res])[res].result(timeout=TIMEOUT_S)
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "aging"})
            try:
                tp = ck.TopicPartition(topic, 0)
                wait_for(lambda: (lambda w: w[0] == w[1] == 60)(c.get_watermark_offsets(tp, timeout=TIMEOUT_S)),
                         "every key aged out of the view")
            finally:
                c.close()
            self.assertEqual(confluent_read(bootstrap, topic, 1), [])
            # The topic goes on after it.
            p = ck.Producer({"bootstrap.servers": bootstrap})
            p.produce(topic, key="fresh", value="v")
            self.assertEqual(p.flush(TIMEOUT_S), 0)
            self.assertEqual(confluent_read(bootstrap, topic, 1), [(60, "fresh", "v")])
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()


if __name__ == "__main__":
    unittest.main()
