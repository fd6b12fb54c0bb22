"""Kafka users keep their data: a topic made through Kafka keeps what was
produced for retention.ms (7 days by default) whatever consumers do, while a
topic made through Pulsar keeps Pulsar's rule (a ledger goes once every
subscription has acknowledged it). Real clients (confluent-kafka, librdkafka;
`magnetar consume` for Pulsar) against the real binary.

Ledgers are closed every 10 entries and housekeeping runs every second, so
retention gets its chance within the test; every wait is bounded, and no
assertion is about time."""
import contextlib
import subprocess
import time
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from magnetar_harness import BIN, NodeTestCase, call_json

TIMEOUT_S = 30
FAST_LEDGERS = ("--managed-ledger-max-entries-per-ledger", "10", "--housekeeping-secs", "1")


def produce(bootstrap, topic, count, size=100):
    """`count` messages in batches of 50 (one stored entry each); their offsets."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 50})
    failed = []
    for i in range(count):
        while True:
            try:
                p.produce(topic, value=(b"%08d" % i).ljust(size, b"."),
                          on_delivery=lambda e, m: failed.append(e) if e else None)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50 == 49:
            p.poll(0)
    assert p.flush(TIMEOUT_S) == 0, "undelivered messages"
    assert not failed, failed[:3]


def read_from_beginning(bootstrap, topic, group, expected):
    """What a new group with auto.offset.reset=earliest reads, until
    `expected` messages or the timeout; offsets committed."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        got = [value for _, value in take(c, expected)]
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def take(consumer, expected):
    """(offset, number) of the records `consumer` gets, until `expected`
    or the timeout."""
    got = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < expected and time.monotonic() < deadline:
        for m in consumer.consume(500, timeout=0.5):
            if m.error() is None:
                got.append((m.offset(), int(m.value()[:8])))
    return got


def ledger_count(node, topic):
    status, stats = call_json(node, "GET", f"/admin/v2/persistent/public/default/{topic}/internalStats")
    assert status == 200, stats
    return len(stats["ledgers"])


def watermarks_once_trimmed(consumer, topic):
    """Partition 0's (low, high) watermarks once retention moved the low one."""
    tp = ck.TopicPartition(topic, 0)
    wait_for(lambda: consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)[0] > 0, "the low watermark moves")
    return consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)


@contextlib.contextmanager
def trimmed(node, topic, count, conf):
    """Produces `count` messages to `topic` and waits until retention moved
    its low watermark; gives (consumer, low, high) with a consumer made
    from `conf`, closed afterwards."""
    bootstrap = f"127.0.0.1:{node.ports['kafka']}"
    produce(bootstrap, topic, count)
    c = ck.Consumer({"bootstrap.servers": bootstrap, **conf})
    try:
        low, high = watermarks_once_trimmed(c, topic)
        yield c, low, high
    finally:
        c.close()


def wait_for(predicate, what):
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {TIMEOUT_S}s: {what}")


class KafkaRetentionTest(NodeTestCase):
    node_args = FAST_LEDGERS

    def setUp(self):
        self.bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"
        self.url = f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"

    def pulsar_drain(self, topic, subscription, count):
        r = subprocess.run([BIN, "consume", topic, "-s", subscription, "-P", "Earliest", "-n", str(count),
                            "--timeout", "10", "--url", self.url], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return len(r.stdout.splitlines())

    def describe(self, topic):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([res])[res].result(timeout=TIMEOUT_S)
        return {k: (v.value, v.source) for k, v in configs.items()}

    def test_a_pulsar_subscription_reading_a_kafka_topic_deletes_nothing(self):
        count = 5000
        produce(self.bootstrap, "kret-orders", count)
        self.assertGreaterEqual(ledger_count(self.node, "kret-orders"), 5)
        self.assertEqual(self.pulsar_drain("kret-orders", "pre", count), count)
        # A topic Pulsar made, drained the same way, loses its consumed
        # ledgers at housekeeping: once that happened, housekeeping has also
        # been past the Kafka topic with its subscription at the end.
        # Its subscription first: without one, housekeeping may drop what it
        # stores before a consumer subscribes (no retention on this topic).
        for path in ("/admin/v2/persistent/public/default/kret-pulsar",
                     "/admin/v2/persistent/public/default/kret-pulsar/subscription/pre"):
            status, body, _ = self.node.http("PUT", path)
            self.assertIn(status, (200, 204), body)
        r = subprocess.run([BIN, "produce", "kret-pulsar", "-m", "x", "-n", "200", "--url", self.url],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        made = ledger_count(self.node, "kret-pulsar")
        self.assertGreaterEqual(made, 2)
        self.assertEqual(self.pulsar_drain("kret-pulsar", "pre", 200), 200)
        wait_for(lambda: ledger_count(self.node, "kret-pulsar") < made, "the Pulsar topic's consumed ledgers go")
        got = read_from_beginning(self.bootstrap, "kret-orders", "first", count)
        self.assertEqual(got, list(range(count)))
        # A second group, after the first committed the end, reads it all too.
        self.assertEqual(read_from_beginning(self.bootstrap, "kret-orders", "second", count), list(range(count)))
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "marks"})
        try:
            self.assertEqual(c.get_watermark_offsets(ck.TopicPartition("kret-orders", 0), timeout=TIMEOUT_S),
                             (0, count))
        finally:
            c.close()

    def test_describe_configs_says_what_retention_is_in_effect_and_where_it_comes_from(self):
        produce(self.bootstrap, "kret-described", 1)
        got = self.describe("kret-described")
        self.assertEqual(got["retention.ms"], (str(7 * 24 * 3600 * 1000), ck.admin.ConfigSource.DEFAULT_CONFIG.value))
        self.assertEqual(got["retention.bytes"][0], "-1")
        self.assertEqual(got["magnetar.retention.source"][0], "kafka-default")
        path = "/admin/v2/persistent/public/default/kret-described/retention"
        self.assertEqual(call_json(self.node, "GET", path), (200, None))  # nothing set on the topic
        self.assertEqual(call_json(self.node, "GET", path + "?applied=true"),
                         (200, {"retentionTimeInMinutes": 7 * 24 * 60, "retentionSizeInMB": -1,
                                "source": "kafka-default"}))
        # A topic Pulsar made: Pulsar's default.
        r = subprocess.run([BIN, "produce", "kret-from-pulsar", "-m", "x", "--url", self.url],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = self.describe("kret-from-pulsar")
        self.assertEqual(got["retention.ms"][0], "0")
        self.assertEqual(got["magnetar.retention.source"][0], "pulsar-default")
        self.assertEqual(call_json(self.node, "GET", "/admin/v2/persistent/public/default/kret-from-pulsar/retention"
                                   "?applied=true"),
                         (200, {"retentionTimeInMinutes": 0, "retentionSizeInMB": 0, "source": "pulsar-default"}))
        # The topic's own policy wins.
        status, _ = call_json(self.node, "POST", "/admin/v2/persistent/public/default/kret-described/retention",
                              {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5})
        self.assertEqual(status, 204)
        deadline = time.monotonic() + TIMEOUT_S
        while self.describe("kret-described")["retention.ms"][0] != "3600000" and time.monotonic() < deadline:
            time.sleep(0.1)
        got = self.describe("kret-described")
        self.assertEqual(got["retention.ms"], ("3600000", ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value))
        self.assertEqual(got["retention.bytes"][0], str(5 << 20))
        self.assertEqual(got["magnetar.retention.source"][0], "topic")
        self.assertEqual(call_json(self.node, "GET", path + "?applied=true"),
                         (200, {"retentionTimeInMinutes": 60, "retentionSizeInMB": 5, "source": "topic"}))

    def test_partitions_made_by_create_topics_keep_kafkas_retention_whoever_reads_first(self):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic("kret-parts", num_partitions=3, replication_factor=1)])
        futures["kret-parts"].result(timeout=TIMEOUT_S)
        # A Pulsar consumer is the first to use a partition.
        r = subprocess.run([BIN, "consume", "kret-parts-partition-2", "-s", "first", "-n", "0", "--timeout", "0.3",
                            "--url", self.url], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.describe("kret-parts")["magnetar.retention.source"][0], "kafka-default")
        status, applied = call_json(self.node, "GET", "/admin/v2/persistent/public/default/kret-parts-partition-2/"
                                    "retention?applied=true")
        self.assertEqual((status, applied["source"]), (200, "kafka-default"))


class KafkaRetentionByTimeTest(NodeTestCase):
    node_args = FAST_LEDGERS + ("--kafka-default-retention-ms", "500")

    def test_data_past_retention_goes_and_asking_for_it_is_out_of_range(self):
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"
        count = 2000
        conf = {"group.id": "time", "auto.offset.reset": "error", "enable.auto.commit": False}
        with trimmed(self.node, "kret-time", count, conf) as (c, low, high):
            self.assertEqual(high, count)
            self.assertLessEqual(low, high)
            # Asking for a deleted offset is OFFSET_OUT_OF_RANGE, never a silent jump.
            c.assign([ck.TopicPartition("kret-time", 0, 0)])
            errors = []
            deadline = time.monotonic() + TIMEOUT_S
            while not errors and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None:
                    self.assertIsNotNone(m.error(), "a record from a deleted offset")
                    errors.append(m.error().code())
            self.assertEqual(errors, [ck.KafkaError._AUTO_OFFSET_RESET])
            # The topic goes on where it was.
            produce(bootstrap, "kret-time", 10)
            c.assign([ck.TopicPartition("kret-time", 0, count)])
            self.assertEqual(take(c, 10), [(count + i, i) for i in range(10)])


class KafkaRetentionBySizeTest(NodeTestCase):
    node_args = FAST_LEDGERS + ("--kafka-default-retention-bytes", "250000")

    def test_data_past_the_size_goes_oldest_first(self):
        count = 10000
        with trimmed(self.node, "kret-size", count, {"group.id": "size"}) as (_, low, high):
            self.assertEqual(high, count)
            # At least retention.bytes of the newest data stays: 100-byte
            # values, under 200 bytes each as stored.
            self.assertGreaterEqual(high - low, 250000 // 200)


if __name__ == "__main__":
    unittest.main()
