"""Kafka's admin APIs, idempotent producers and SASL/PLAIN with a real
client (confluent-kafka, librdkafka) against the real binary."""
import time
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
from kafka_wire import KafkaNodeTestCase, RawKafkaConnection, kbytes, kstr, record_batch
from magnetar_harness import call_json

TIMEOUT_S = 20


class KafkaAdminTest(KafkaNodeTestCase):

    def wait_all(self, futures):
        """{name: None or the KafkaException's error} for each future."""
        out = {}
        for name, f in futures.items():
            try:
                f.result(timeout=TIMEOUT_S)
                out[name] = None
            except ck.KafkaException as e:
                out[name] = e.args[0]
        return out

    def produce(self, topic, values, partition=None, config=None):
        p = ck.Producer({"bootstrap.servers": self.bootstrap, **(config or {})})
        reports = []
        for v in values:
            kwargs = {"partition": partition} if partition is not None else {}
            p.produce(topic, value=v, on_delivery=lambda e, m: reports.append((e, m.partition(), m.offset())), **kwargs)
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertTrue(all(e is None for e, _, _ in reports), reports)
        return reports

    def test_create_topics_makes_partitioned_topics_pulsar_sees(self):
        result = self.wait_all(self.admin().create_topics([NewTopic("adm-orders", num_partitions=3, replication_factor=1),
                                                           NewTopic("adm-one", num_partitions=1)]))
        self.assertEqual(result, {"adm-orders": None, "adm-one": None})
        status, body = call_json(self.node, "GET", "/admin/v2/persistent/public/default/adm-orders/partitions")
        self.assertEqual((status, body), (200, {"partitions": 3}))
        md = self.admin().list_topics(timeout=TIMEOUT_S)
        self.assertEqual(len(md.topics["adm-orders"].partitions), 3)
        # Each partition takes records of its own.
        reports = self.produce("adm-orders", [b"p2"], partition=2)
        self.assertEqual(reports[0][1:], (2, 0))

    def test_create_topics_refuses_what_it_cannot_do(self):
        self.wait_all(self.admin().create_topics([NewTopic("adm-exists", num_partitions=1)]))
        result = self.wait_all(self.admin().create_topics([
            NewTopic("adm-exists", num_partitions=1),
            NewTopic("adm-rf3", num_partitions=1, replication_factor=3),
            NewTopic("adm-compact", num_partitions=1, config={"cleanup.policy": "shrink"}),
            NewTopic("bad name!", num_partitions=1),
        ]))
        self.assertEqual(result["adm-exists"].code(), ck.KafkaError.TOPIC_ALREADY_EXISTS)
        self.assertEqual(result["adm-rf3"].code(), ck.KafkaError.INVALID_REPLICATION_FACTOR)
        self.assertEqual(result["adm-compact"].code(), ck.KafkaError.INVALID_CONFIG)
        self.assertIn("cleanup.policy", result["adm-compact"].str())
        self.assertEqual(result["bad name!"].code(), ck.KafkaError.TOPIC_EXCEPTION)
        # Nothing was made for the refused ones.
        status, _ = call_json(self.node, "GET", "/admin/v2/persistent/public/default/adm-rf3/partitions")
        self.assertEqual(status, 200)
        self.assertNotIn("persistent://public/default/adm-rf3",
                         call_json(self.node, "GET", "/admin/v2/persistent/public/default/partitioned")[1])

    def test_validate_only_creates_nothing(self):
        futures = self.admin().create_topics([NewTopic("adm-dry", num_partitions=2)], validate_only=True)
        self.assertEqual(self.wait_all(futures), {"adm-dry": None})
        self.assertNotIn("persistent://public/default/adm-dry",
                         call_json(self.node, "GET", "/admin/v2/persistent/public/default/partitioned")[1])

    def test_retention_config_becomes_the_topic_policy_and_describe_configs_reads_it(self):
        self.wait_all(self.admin().create_topics([NewTopic("adm-ret", num_partitions=1,
                                                           config={"retention.ms": "7200000",
                                                                   "retention.bytes": "1073741824"})]))
        status, body = call_json(self.node, "GET", "/admin/v2/persistent/public/default/adm-ret/retention")
        self.assertEqual(status, 200)
        self.assertEqual(body, {"retentionTimeInMinutes": 120, "retentionSizeInMB": 1024})
        res = ConfigResource(ConfigResource.Type.TOPIC, "adm-ret")
        configs = self.admin().describe_configs([res])[res].result(timeout=TIMEOUT_S)
        self.assertEqual(configs["retention.ms"].value, "7200000")
        self.assertEqual(configs["retention.bytes"].value, "1073741824")
        self.assertEqual(configs["cleanup.policy"].value, "delete")
        self.assertEqual(configs["max.message.bytes"].value, str(5 * 1024 * 1024))
        missing = ConfigResource(ConfigResource.Type.TOPIC, "adm-no-such-topic")
        with self.assertRaises(ck.KafkaException) as e:
            self.admin().describe_configs([missing])[missing].result(timeout=TIMEOUT_S)
        self.assertEqual(e.exception.args[0].code(), ck.KafkaError.UNKNOWN_TOPIC_OR_PART)
        broker = ConfigResource(ConfigResource.Type.BROKER, "0")
        self.assertEqual(self.admin().describe_configs([broker])[broker].result(timeout=TIMEOUT_S)
                         ["default.namespace"].value, "public/default")

    def test_create_partitions_grows_a_topic_and_refuses_to_shrink_it(self):
        self.wait_all(self.admin().create_topics([NewTopic("adm-grow", num_partitions=2)]))
        self.assertEqual(self.wait_all(self.admin().create_partitions([NewPartitions("adm-grow", 4)])),
                         {"adm-grow": None})
        self.assertEqual(call_json(self.node, "GET", "/admin/v2/persistent/public/default/adm-grow/partitions")[1],
                         {"partitions": 4})
        self.assertEqual(self.produce("adm-grow", [b"x"], partition=3)[0][1:], (3, 0))
        shrink = self.wait_all(self.admin().create_partitions([NewPartitions("adm-grow", 3)]))
        self.assertEqual(shrink["adm-grow"].code(), ck.KafkaError.INVALID_PARTITIONS)
        # A topic made on first use is non-partitioned: Pulsar cannot grow it, and says why.
        self.produce("adm-auto", [b"a"])
        auto = self.wait_all(self.admin().create_partitions([NewPartitions("adm-auto", 2)]))
        self.assertEqual(auto["adm-auto"].code(), ck.KafkaError.INVALID_PARTITIONS)
        self.assertIn("non-partitioned", auto["adm-auto"].str())
        missing = self.wait_all(self.admin().create_partitions([NewPartitions("adm-none", 2)]))
        self.assertEqual(missing["adm-none"].code(), ck.KafkaError.UNKNOWN_TOPIC_OR_PART)

    def test_delete_topics_deletes_the_data_so_a_new_topic_starts_at_zero(self):
        self.wait_all(self.admin().create_topics([NewTopic("adm-del", num_partitions=2)]))
        self.produce("adm-del", [b"a", b"b"], partition=1)
        self.produce("adm-del-flat", [b"a", b"b", b"c"])  # non-partitioned, made on first use
        result = self.wait_all(self.admin().delete_topics(["adm-del", "adm-del-flat", "adm-never"]))
        self.assertIsNone(result["adm-del"])
        self.assertIsNone(result["adm-del-flat"])
        self.assertEqual(result["adm-never"].code(), ck.KafkaError.UNKNOWN_TOPIC_OR_PART)
        topics = call_json(self.node, "GET", "/admin/v2/persistent/public/default")[1]
        self.assertFalse([t for t in topics if "adm-del" in t], topics)
        # Re-created empty: the first record is at offset 0 again.
        self.assertEqual(self.produce("adm-del-flat", [b"new"])[0][2], 0)


class KafkaIdempotenceTest(KafkaNodeTestCase):
    def test_idempotent_producer_writes_every_record_once_in_order(self):
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 2})
        reports = []
        for i in range(500):
            p.produce("idem-orders", key=b"k%d" % (i % 7), value=b"v%d" % i,
                      on_delivery=lambda e, m: reports.append((e, m.offset())))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertTrue(all(e is None for e, _ in reports), reports[:3])
        self.assertEqual(sorted(o for _, o in reports), list(range(500)))
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/idem-orders/stats")
        self.assertEqual(status, 200)
        self.assertEqual(stats["msgInCounter"], 500)

    def raw_produce(self, conn, pid, epoch, seq, values):
        """A Produce v3 request with one idempotent batch; (error, base offset)."""
        batch = record_batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        body = kstr(None) + (1).to_bytes(2, "big", signed=True) + (10000).to_bytes(4, "big")
        body += (1).to_bytes(4, "big") + kstr("idem-raw") + (1).to_bytes(4, "big")
        body += (0).to_bytes(4, "big") + kbytes(batch)
        conn.send(0, 3, body)
        resp = conn.receive()
        # correlation id, topics (1): name, partitions (1): index, error, base offset
        pos = 8
        pos += 2 + int.from_bytes(resp[pos:pos + 2], "big") + 4
        error = int.from_bytes(resp[pos + 4:pos + 6], "big", signed=True)
        base = int.from_bytes(resp[pos + 6:pos + 14], "big", signed=True)
        return error, base

    def test_a_retried_batch_is_answered_with_its_first_offset_and_a_gap_is_refused(self):
        conn = RawKafkaConnection(self.node.ports["kafka"], "idem-raw")
        try:
            conn.send(22, 1, kstr(None) + (60000).to_bytes(4, "big"))  # InitProducerId v1
            resp = conn.receive()
            # correlation id, throttle time, error, producer id, epoch
            error = int.from_bytes(resp[8:10], "big", signed=True)
            pid = int.from_bytes(resp[10:18], "big", signed=True)
            epoch = int.from_bytes(resp[18:20], "big", signed=True)
            self.assertEqual((error, epoch), (0, 0))
            self.assertGreater(pid, 0)
            self.assertEqual(self.raw_produce(conn, pid, 0, 0, [b"a", b"b"]), (0, 0))
            self.assertEqual(self.raw_produce(conn, pid, 0, 2, [b"c"]), (0, 2))
            # The same batch again (a retry): same offset, nothing written.
            self.assertEqual(self.raw_produce(conn, pid, 0, 2, [b"c"]), (0, 2))
            # A gap: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
            self.assertEqual(self.raw_produce(conn, pid, 0, 9, [b"z"])[0], 45)
            # An older epoch after a newer one: INVALID_PRODUCER_EPOCH (47).
            self.assertEqual(self.raw_produce(conn, pid, 1, 0, [b"d"]), (0, 3))
            self.assertEqual(self.raw_produce(conn, pid, 0, 3, [b"e"])[0], 47)
        finally:
            conn.close()
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/idem-raw/stats")
        self.assertEqual(stats["msgInCounter"], 4)

    def test_a_producer_naming_the_id_it_had_gets_a_new_id_at_epoch_zero(self):
        conn = RawKafkaConnection(self.node.ports["kafka"], "idem-reset")
        try:
            conn.send(22, 1, kstr(None) + (60000).to_bytes(4, "big"))  # InitProducerId v1
            resp = conn.receive()
            self.assertEqual(int.from_bytes(resp[8:10], "big", signed=True), 0)
            pid = int.from_bytes(resp[10:18], "big", signed=True)
            # v3 (flexible, KIP-360): a producer resetting after an error
            # names its id and epoch. Without a transactional id Kafka hands
            # out a new id at epoch 0 instead of bumping the old one's epoch.
            body = b"\x00" + (60000).to_bytes(4, "big") + pid.to_bytes(8, "big") + (0).to_bytes(2, "big") + b"\x00"
            conn.send(22, 3, body, flexible=True)
            resp = conn.receive()
            # correlation id, header tags, throttle time, error, producer id, epoch
            self.assertEqual(int.from_bytes(resp[9:11], "big", signed=True), 0)
            new_pid = int.from_bytes(resp[11:19], "big", signed=True)
            self.assertEqual(int.from_bytes(resp[19:21], "big", signed=True), 0)
            self.assertGreater(new_pid, 0)
            self.assertNotEqual(new_pid, pid)
        finally:
            conn.close()

    def test_transactional_producers_are_refused_clearly(self):
        conn = RawKafkaConnection(self.node.ports["kafka"], "txn")
        try:
            conn.send(22, 1, kstr("my-txn") + (60000).to_bytes(4, "big"))
            resp = conn.receive()
            self.assertEqual(int.from_bytes(resp[8:10], "big", signed=True), 53)
        finally:
            conn.close()


class KafkaRefusedBatchTest(KafkaNodeTestCase):
    """An idempotent producer's batch the node refuses, between two it
    takes. Its own node: the test limits the public tenant's message size."""

    def test_a_refused_batch_is_reported_failed_and_the_batches_around_it_are_stored(self):
        status, _ = call_json(self.node, "POST", "/admin/v2/tenants/public/limits", {"maxMessageSize": 1000})
        self.assertEqual(status, 204)
        topic = "idem-refused"
        # One message per request, all three in flight at once: the third
        # reaches the node right after the second was refused. A success for
        # the third acknowledges the second too in librdkafka's eyes (its
        # sequence comes before), so the node must not take the third while
        # the second is not stored.
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 0,
                         "batch.num.messages": 1, "message.timeout.ms": 15000})
        reports = {}
        for name, size in (("m0", 100), ("big", 2000), ("m2", 100)):
            p.produce(topic, key=name.encode(), value=b"x" * size,
                      on_delivery=lambda e, m: reports.__setitem__(m.key().decode(), e))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(set(reports), {"m0", "big", "m2"})
        self.assertIsNone(reports["m0"])
        self.assertIsNotNone(reports["big"], "a message over the tenant's limit was acknowledged")
        self.assertEqual(reports["big"].code(), ck.KafkaError.MSG_SIZE_TOO_LARGE, reports["big"])
        self.assertIsNone(reports["m2"])
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "refused-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            c.assign([ck.TopicPartition(topic, 0, 0)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 2 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.key().decode())
        finally:
            c.close()
        self.assertEqual(got, ["m0", "m2"])


class KafkaSaslTest(KafkaNodeTestCase):
    def sasl_config(self, user, password="any-token"):
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}

    def test_the_sasl_user_name_chooses_the_namespace(self):
        self.assertEqual(call_json(self.node, "PUT", "/admin/v2/tenants/acme",
                                   {"allowedClusters": ["standalone"]})[0], 204)
        self.assertEqual(call_json(self.node, "PUT", "/admin/v2/namespaces/acme/billing", {})[0], 204)
        p = ck.Producer(self.sasl_config("acme/billing"))
        reports = []
        p.produce("invoices", key=b"k", value=b"hello", on_delivery=lambda e, m: reports.append(e))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(reports, [None])
        topics = call_json(self.node, "GET", "/admin/v2/persistent/acme/billing")[1]
        self.assertIn("persistent://acme/billing/invoices", topics)
        self.assertNotIn("persistent://public/default/invoices",
                         call_json(self.node, "GET", "/admin/v2/persistent/public/default")[1])
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/acme/billing/invoices/stats")
        self.assertEqual((status, stats["msgInCounter"]), (200, 1))
        # The stats say who wrote it, and over which protocol.
        [publisher] = stats["publishers"]
        self.assertEqual(publisher["protocol"], "kafka")
        self.assertEqual(publisher["clientVersion"], "rdkafka")
        self.assertTrue(publisher["address"].startswith("127.0.0.1:"), publisher)

    def test_a_namespace_that_does_not_exist_fails_authentication(self):
        p = ck.Producer({**self.sasl_config("acme/nowhere"), "message.timeout.ms": 3000})
        errors = []
        p.produce("t", value=b"x", on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
        self.assertEqual(len(errors), 1)
        self.assertIsNotNone(errors[0])


if __name__ == "__main__":
    unittest.main()
