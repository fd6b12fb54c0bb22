"""The Kafka admin APIs tools call: DescribeCluster, AlterConfigs,
IncrementalAlterConfigs, DeleteRecords, OffsetDelete, OffsetForLeaderEpoch,
DescribeLogDirs and DescribeProducers. confluent-kafka where its admin
client has the call (alter_configs), else at the byte level; malformed
bodies of each close only their connection."""
import os
import struct
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import ConfigResource, NewTopic
from kafka_wire import (TAGS, KafkaNodeTestCase, RawKafkaConnection, Reader, carray, cbytes, cints, classic_array,
                        cstr, kstr)

TIMEOUT_S = 20
# Ledgers of 10 entries, so that DeleteRecords has closed ledgers to drop.
FAST_LEDGERS = ("--managed-ledger-max-entries-per-ledger", "10")

DELETE_RECORDS, OFFSET_FOR_LEADER_EPOCH, ALTER_CONFIGS = 21, 23, 33
DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS, OFFSET_DELETE = 35, 44, 47
DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS = 60, 61


class KafkaAdminApisTest(KafkaNodeTestCase):
    node_args = FAST_LEDGERS

    def call(self, key, version, body, flexible=False):
        """The response body (after the correlation id and header tags)."""
        conn = RawKafkaConnection(self.node.ports["kafka"], "admin-apis")
        try:
            corr = conn.send(key, version, body, flexible=flexible)
            resp = conn.receive()
        finally:
            conn.close()
        self.assertEqual(struct.unpack(">i", resp[:4])[0], corr)
        r = Reader(resp[4:], flexible)
        r.tags()  # response header v1
        return r

    def produce_each(self, topic, count, start=0, config=None):
        """`count` records, one batch (one entry) each."""
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, **(config or {})})
        for i in range(start, start + count):
            p.produce(topic, value=f"v{i}".encode(), partition=0)
            self.assertEqual(p.flush(TIMEOUT_S), 0)

    def read_values(self, topic, start, count):
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "reader", "enable.auto.commit": False})
        try:
            c.assign([ck.TopicPartition(topic, 0, start)])
            out = []
            while len(out) < count:
                m = c.poll(TIMEOUT_S)
                self.assertIsNotNone(m, f"only {out} of {topic}")
                self.assertIsNone(m.error())
                out.append((m.offset(), m.value().decode()))
            return out
        finally:
            c.close()

    def watermarks(self, topic):
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "wm"})
        try:
            return c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=TIMEOUT_S)
        finally:
            c.close()


    def create(self, *topics):
        futures = self.admin().create_topics([NewTopic(t, num_partitions=1) for t in topics])
        for f in futures.values():
            f.result(timeout=TIMEOUT_S)

    def describe_retention(self, topic):
        res = ConfigResource("topic", topic)
        configs = self.admin().describe_configs([res])[res].result(timeout=TIMEOUT_S)
        return {k: (configs[k].value, configs[k].source) for k in ("retention.ms", "retention.bytes", "cleanup.policy")}

    # --- ApiVersions

    def test_api_versions_lists_the_new_apis(self):
        r = self.call(18, 0, b"")
        self.assertEqual(r.i16(), 0)
        served = {k: (lo, hi) for k, lo, hi in r.array(lambda x: (x.i16(), x.i16(), x.i16()))}
        self.assertEqual(served[DELETE_RECORDS], (0, 2))
        self.assertEqual(served[OFFSET_FOR_LEADER_EPOCH], (0, 4))
        self.assertEqual(served[ALTER_CONFIGS], (0, 2))
        self.assertEqual(served[DESCRIBE_LOG_DIRS], (0, 4))
        self.assertEqual(served[INCREMENTAL_ALTER_CONFIGS], (0, 1))
        self.assertEqual(served[OFFSET_DELETE], (0, 0))
        self.assertEqual(served[DESCRIBE_CLUSTER], (0, 1))
        self.assertEqual(served[DESCRIBE_PRODUCERS], (0, 0))

    # --- DescribeCluster

    def test_describe_cluster_names_this_broker_as_metadata_does(self):
        md = self.admin().list_topics(timeout=TIMEOUT_S)
        r = self.call(DESCRIBE_CLUSTER, 1, b"\x00" + b"\x01" + TAGS, flexible=True)
        self.assertEqual(r.i32(), 0)  # throttle
        self.assertEqual(r.i16(), 0)
        self.assertIsNone(r.string())
        self.assertEqual(r.i8(), 1)
        cluster_id, controller = r.string(), r.i32()
        brokers = r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))
        self.assertEqual(cluster_id, md.cluster_id)
        self.assertEqual(controller, md.controller_id)
        self.assertEqual([(b[0], b[2]) for b in brokers], [(b.id, b.port) for b in md.brokers.values()])
        self.assertEqual(brokers[0][2], self.node.ports["kafka"])
        # Controllers (EndpointType 2) are not described.
        r = self.call(DESCRIBE_CLUSTER, 1, b"\x00" + b"\x02" + TAGS, flexible=True)
        r.i32()
        self.assertEqual(r.i16(), 120)

    # --- AlterConfigs / IncrementalAlterConfigs

    def test_alter_configs_sets_the_topic_retention(self):
        self.create("cfg-alter")
        res = ConfigResource("topic", "cfg-alter", set_config={"retention.ms": "7200000", "segment.bytes": "1000"})
        self.admin().alter_configs([res])[res].result(timeout=TIMEOUT_S)
        got = self.describe_retention("cfg-alter")
        self.assertEqual(got["retention.ms"][0], "7200000")
        self.assertEqual(got["retention.ms"][1], ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        # AlterConfigs replaces the whole set: without retention.ms it goes back to the default.
        res = ConfigResource("topic", "cfg-alter", set_config={"cleanup.policy": "delete"})
        self.admin().alter_configs([res])[res].result(timeout=TIMEOUT_S)
        got = self.describe_retention("cfg-alter")
        self.assertEqual(got["retention.ms"][0], str(7 * 24 * 3600 * 1000))
        self.assertNotEqual(got["retention.ms"][1], ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        # Refusals: a bad cleanup policy, an unknown config, a missing topic; validate_only writes nothing.
        for config in ({"cleanup.policy": "shrink"}, {"no.such.config": "1"}):
            res = ConfigResource("topic", "cfg-alter", set_config=config)
            with self.assertRaises(ck.KafkaException) as e:
                self.admin().alter_configs([res])[res].result(timeout=TIMEOUT_S)
            self.assertEqual(e.exception.args[0].code(), ck.KafkaError.INVALID_CONFIG)
        res = ConfigResource("topic", "cfg-missing", set_config={"retention.ms": "1000"})
        with self.assertRaises(ck.KafkaException) as e:
            self.admin().alter_configs([res])[res].result(timeout=TIMEOUT_S)
        self.assertEqual(e.exception.args[0].code(), ck.KafkaError.UNKNOWN_TOPIC_OR_PART)
        res = ConfigResource("topic", "cfg-alter", set_config={"retention.ms": "60000"})
        self.admin().alter_configs([res], validate_only=True)[res].result(timeout=TIMEOUT_S)
        self.assertEqual(self.describe_retention("cfg-alter")["retention.ms"][0], str(7 * 24 * 3600 * 1000))

    def incremental(self, topic, ops):
        """IncrementalAlterConfigs v1 on one topic: (error, message)."""
        configs = [cstr(name) + struct.pack(">b", op) + cstr(value) + TAGS for name, op, value in ops]
        resource = struct.pack(">b", 2) + cstr(topic) + carray(configs) + TAGS
        r = self.call(INCREMENTAL_ALTER_CONFIGS, 1, carray([resource]) + b"\x00" + TAGS, flexible=True)
        r.i32()
        [(error, message, rtype, name)] = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))
        self.assertEqual((rtype, name), (2, topic))
        return error, message

    def test_incremental_alter_configs_changes_only_what_it_names(self):
        self.create("cfg-incr")
        self.assertEqual(self.incremental("cfg-incr", [("retention.ms", 0, "3600000")]), (0, None))
        self.assertEqual(self.incremental("cfg-incr", [("retention.bytes", 0, str(5 << 20))]), (0, None))
        got = self.describe_retention("cfg-incr")
        self.assertEqual(got["retention.ms"][0], "3600000")  # kept
        self.assertEqual(got["retention.bytes"][0], str(5 << 20))
        # DELETE of both: the topic's own policy goes.
        self.assertEqual(self.incremental("cfg-incr", [("retention.ms", 1, None), ("retention.bytes", 1, None)]),
                         (0, None))
        got = self.describe_retention("cfg-incr")
        self.assertEqual(got["retention.ms"][0], str(7 * 24 * 3600 * 1000))
        self.assertNotEqual(got["retention.ms"][1], ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        # APPEND and SUBTRACT edit cleanup.policy's items.
        self.assertEqual(self.incremental("cfg-incr", [("cleanup.policy", 2, "compact")]), (0, None))
        self.assertEqual(self.describe_retention("cfg-incr")["cleanup.policy"][0], "compact,delete")
        self.assertEqual(self.incremental("cfg-incr", [("cleanup.policy", 3, "delete")]), (0, None))
        self.assertEqual(self.describe_retention("cfg-incr")["cleanup.policy"][0], "compact")
        error, message = self.incremental("cfg-incr", [("cleanup.policy", 3, "compact")])
        self.assertEqual(error, 40)  # INVALID_CONFIG: it cannot be left empty
        self.assertIn("cleanup.policy", message)
        error, message = self.incremental("cfg-incr", [("cleanup.policy", 2, "shrink")])
        self.assertEqual(error, 40)
        self.assertIn("shrink", message)
        self.assertEqual(self.incremental("cfg-incr", [("retention.ms", 2, "5")])[0], 40)  # not a list
        self.assertEqual(self.incremental("cfg-missing", [("retention.ms", 0, "5")])[0], 3)

    # --- DeleteRecords

    def delete_records(self, topic, offset, partition=0):
        body = carray([cstr(topic) + carray([struct.pack(">iq", partition, offset) + TAGS]) + TAGS])
        r = self.call(DELETE_RECORDS, 2, body + struct.pack(">i", 5000) + TAGS, flexible=True)
        r.i32()
        [(name, [(index, low, error)])] = r.array(
            lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i16()))))
        self.assertEqual((name, index), (topic, partition))
        return error, low

    def test_delete_records_drops_whole_closed_ledgers_below_the_offset(self):
        self.create("del-recs")
        self.produce_each("del-recs", 35)
        self.assertEqual(self.watermarks("del-recs"), (0, 35))
        # Ledgers hold 10 entries: 25 drops [0, 20) and says the log starts at 20.
        self.assertEqual(self.delete_records("del-recs", 25), (0, 20))
        self.assertEqual(self.watermarks("del-recs"), (20, 35))
        self.assertEqual(self.read_values("del-recs", 20, 15), [(i, f"v{i}") for i in range(20, 35)])
        # Below the start: nothing more goes. Past the end: OFFSET_OUT_OF_RANGE.
        self.assertEqual(self.delete_records("del-recs", 5), (0, 20))
        self.assertEqual(self.delete_records("del-recs", 36)[0], 1)
        # -1: up to the high watermark; the ledger being written stays.
        error, low = self.delete_records("del-recs", -1)
        self.assertEqual(error, 0)
        self.assertEqual(self.watermarks("del-recs"), (low, 35))
        self.assertGreaterEqual(low, 30)
        self.produce_each("del-recs", 1, start=35)
        self.assertEqual(self.read_values("del-recs", 35, 1), [(35, "v35")])

    def test_delete_records_refuses_what_it_cannot_do(self):
        self.assertEqual(self.delete_records("del-nothing", 0)[0], 3)  # UNKNOWN_TOPIC_OR_PARTITION
        self.assertNotIn("del-nothing", self.admin().list_topics(timeout=TIMEOUT_S).topics)
        self.create("del-one")
        self.assertEqual(self.delete_records("del-one", 0, partition=4)[0], 3)

    # --- OffsetDelete

    def offset_delete(self, group, topic, partitions):
        body = kstr(group) + classic_array([kstr(topic) + classic_array([struct.pack(">i", p) for p in partitions])])
        r = self.call(OFFSET_DELETE, 0, body)
        error = r.i16()
        r.i32()
        return error, r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))

    def test_offset_delete_removes_the_group_offset(self):
        self.create("od-topic")
        self.produce_each("od-topic", 3)
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "od-group", "enable.auto.commit": False})
        try:
            c.commit(offsets=[ck.TopicPartition("od-topic", 0, 2)], asynchronous=False)
            self.assertEqual(c.committed([ck.TopicPartition("od-topic", 0)], timeout=TIMEOUT_S)[0].offset, 2)
            self.assertEqual(self.offset_delete("od-group", "od-topic", [0]), (0, [("od-topic", [(0, 0)])]))
            self.assertEqual(c.committed([ck.TopicPartition("od-topic", 0)], timeout=TIMEOUT_S)[0].offset,
                             ck.OFFSET_INVALID)
        finally:
            c.close()
        # A group that has no offset there and no members: GROUP_ID_NOT_FOUND; no group id: INVALID_GROUP_ID.
        self.assertEqual(self.offset_delete("od-group", "od-topic", [0])[0], 69)
        self.assertEqual(self.offset_delete("", "od-topic", [0])[0], 24)

    def test_offset_delete_refuses_a_topic_the_group_consumes(self):
        self.create("od-live")
        self.produce_each("od-live", 1)
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "od-live-group",
                         "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["od-live"])
            m = c.poll(TIMEOUT_S)
            self.assertIsNotNone(m)
            c.commit(message=m, asynchronous=False)
            self.assertEqual(self.offset_delete("od-live-group", "od-live", [0]), (0, [("od-live", [(0, 86)])]))
            self.assertEqual(c.committed([ck.TopicPartition("od-live", 0)], timeout=TIMEOUT_S)[0].offset, 1)
        finally:
            c.close()

    # --- OffsetForLeaderEpoch

    def test_offset_for_leader_epoch_answers_the_one_epoch(self):
        self.create("ofle")
        self.produce_each("ofle", 4)

        def ask(current, epoch, topic="ofle"):
            part = struct.pack(">iii", 0, current, epoch) + TAGS
            body = struct.pack(">i", -1) + carray([cstr(topic) + carray([part]) + TAGS]) + TAGS
            r = self.call(OFFSET_FOR_LEADER_EPOCH, 4, body, flexible=True)
            r.i32()
            [(_, [answer])] = r.array(lambda x: (x.string(), x.array(lambda y: (y.i16(), y.i32(), y.i32(), y.i64()))))
            return answer

        self.assertEqual(ask(-1, 0), (0, 0, 0, 4))
        self.assertEqual(ask(0, 0), (0, 0, 0, 4))
        self.assertEqual(ask(-1, 3), (0, 0, -1, -1))
        self.assertEqual(ask(2, 0)[0], 75)  # UNKNOWN_LEADER_EPOCH
        self.assertEqual(ask(-1, 0, topic="ofle-missing")[0], 3)

    # --- DescribeLogDirs

    def test_describe_log_dirs_names_the_data_dir_and_sizes(self):
        self.create("dirs-a")
        self.produce_each("dirs-a", 3)
        body = carray([cstr("dirs-a") + carray([struct.pack(">i", 0)]) + TAGS]) + TAGS
        r = self.call(DESCRIBE_LOG_DIRS, 4, body, flexible=True)
        r.i32()
        self.assertEqual(r.i16(), 0)

        def partition(x):
            return (x.i32(), x.i64(), x.i64(), x.i8())

        [(error, log_dir, topics, total, usable)] = r.array(
            lambda x: (x.i16(), x.string(), x.array(lambda t: (t.string(), t.array(partition))), x.i64(), x.i64()))
        self.assertEqual(error, 0)
        self.assertEqual(log_dir, os.path.realpath(self.node.data_dir))
        [(name, [(index, size, lag, future)])] = topics
        self.assertEqual((name, index, lag, future), ("dirs-a", 0, 0, 0))
        self.assertGreater(size, 0)
        self.assertGreater(total, 0)
        self.assertGreaterEqual(total, usable)
        # A null topic list: every partition, this one among them.
        r = self.call(DESCRIBE_LOG_DIRS, 4, b"\x00" + TAGS, flexible=True)
        r.i32()
        r.i16()
        [(_, _, topics, _, _)] = r.array(
            lambda x: (x.i16(), x.string(), x.array(lambda t: (t.string(), t.array(partition))), x.i64(), x.i64()))
        self.assertIn("dirs-a", [t[0] for t in topics])

    # --- DescribeProducers

    def test_describe_producers_lists_idempotent_producers(self):
        self.create("prods")
        self.produce_each("prods", 5, config={"enable.idempotence": True})
        body = carray([cstr("prods") + carray([struct.pack(">i", 0)]) + TAGS]) + TAGS
        r = self.call(DESCRIBE_PRODUCERS, 0, body, flexible=True)
        r.i32()
        [(name, [(index, error, message, producers)])] = r.array(lambda x: (x.string(), x.array(
            lambda p: (p.i32(), p.i16(), p.string(), p.array(lambda s: (s.i64(), s.i32(), s.i32(), s.i64(), s.i64())))))
        )
        self.assertEqual((name, index, error, message), ("prods", 0, 0, None))
        self.assertEqual(len(producers), 1)
        pid, epoch, last_sequence, last_ts, txn = producers[0]
        self.assertGreaterEqual(pid, 0)
        self.assertEqual((epoch, last_sequence, txn), (0, 4, -1))
        self.assertGreater(last_ts, 0)

    # --- Flexible versions of the group and admin APIs

    def flexible_caller(self, client_id):
        """call(key, version, body): one flexible request on a connection of
        its own, the response read past its header tags and throttle time."""
        conn = RawKafkaConnection(self.node.ports["kafka"], client_id)
        self.addCleanup(conn.close)

        def call(key, version, body):
            corr = conn.send(key, version, body, flexible=True)
            resp = conn.receive()
            self.assertEqual(struct.unpack(">i", resp[:4])[0], corr)
            r = Reader(resp[4:], True)
            r.tags()
            self.assertEqual(r.i32(), 0)  # throttle time, first in each of these responses
            return r

        return call

    def test_a_group_lives_through_the_flexible_versions(self):
        self.create("flex-g")
        self.produce_each("flex-g", 3)
        call = self.flexible_caller("flex")

        group = "flex-group"
        # FindCoordinator v3.
        r = call(10, 3, cstr(group) + b"\x00" + TAGS)
        self.assertEqual((r.i16(), r.string()), (0, None))
        r.i32()
        r.string()
        self.assertEqual(r.i32(), self.node.ports["kafka"])
        # JoinGroup v9: the consumer protocol's subscription (version 0, one topic, no user data).
        subscription = struct.pack(">hi", 0, 1) + kstr("flex-g") + struct.pack(">i", -1)
        body = (cstr(group) + struct.pack(">ii", 10000, 10000) + cstr("") + cstr(None) + cstr("consumer")
                + carray([cstr("range") + cbytes(subscription) + TAGS]) + cstr("first join") + TAGS)
        r = call(11, 9, body)
        error, generation = r.i16(), r.i32()
        protocol_type, protocol, leader, skip, member = r.string(), r.string(), r.string(), r.i8(), r.string()
        members = r.array(lambda x: (x.string(), x.string(), x.bytes()))
        self.assertEqual((error, protocol_type, protocol, skip), (0, "consumer", "range", 0))
        self.assertEqual(leader, member)
        self.assertEqual(members, [(member, None, subscription)])
        # SyncGroup v5: the leader's assignment comes back.
        body = (cstr(group) + struct.pack(">i", generation) + cstr(member) + cstr(None) + cstr("consumer")
                + cstr("range") + carray([cstr(member) + cbytes(b"assigned") + TAGS]) + TAGS)
        r = call(14, 5, body)
        self.assertEqual(r.i16(), 0)
        r.string()
        r.string()
        self.assertEqual(r.bytes(), b"assigned")
        # Heartbeat v4.
        r = call(12, 4, cstr(group) + struct.pack(">i", generation) + cstr(member) + cstr(None) + TAGS)
        self.assertEqual(r.i16(), 0)
        # OffsetCommit v8, then OffsetFetch v7 reads it back.
        part = struct.pack(">iqi", 0, 2, -1) + cstr("meta") + TAGS
        body = (cstr(group) + struct.pack(">i", generation) + cstr(member) + cstr(None)
                + carray([cstr("flex-g") + carray([part]) + TAGS]) + TAGS)
        r = call(8, 8, body)
        self.assertEqual(r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16())))),
                         [("flex-g", [(0, 0)])])
        body = cstr(group) + carray([cstr("flex-g") + cints([0]) + TAGS]) + b"\x01" + TAGS
        r = call(9, 7, body)
        fetched = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i32(), y.string(), y.i16()))))
        self.assertEqual([(t, [(p[0], p[1], p[4]) for p in ps]) for t, ps in fetched], [("flex-g", [(0, 2, 0)])])
        self.assertEqual(r.i16(), 0)
        # DescribeGroups v5.
        r = call(15, 5, carray([cstr(group)]) + b"\x00" + TAGS)
        [described] = r.array(lambda x: (x.i16(), x.string(), x.string(), x.string(), x.string(), x.array(
            lambda m: (m.string(), m.string(), m.string(), m.string(), m.bytes(), m.bytes())), x.i32()))
        self.assertEqual(described[:5], (0, group, "Stable", "consumer", "range"))
        self.assertEqual([(m[0], m[2], m[5]) for m in described[5]], [(member, "flex", b"assigned")])
        # ListGroups v4, by state.
        for states, listed in (([], True), (["Stable"], True), (["Empty", "PreparingRebalance"], False)):
            r = call(16, 4, carray([cstr(x) for x in states]) + TAGS)
            self.assertEqual(r.i16(), 0)
            groups = r.array(lambda x: (x.string(), x.string(), x.string()))
            self.assertEqual((group, "consumer", "Stable") in groups, listed, (states, groups))
        # LeaveGroup v5: members leave in a batch, each answered.
        leaving = [cstr(member) + cstr(None) + cstr("done") + TAGS, cstr("nobody") + cstr(None) + cstr(None) + TAGS]
        r = call(13, 5, cstr(group) + carray(leaving) + TAGS)
        self.assertEqual(r.i16(), 0)
        self.assertEqual(r.array(lambda x: (x.string(), x.string(), x.i16())),
                         [(member, None, 0), ("nobody", None, 25)])
        # DeleteGroups v2: the group (now without members) and its offsets go.
        r = call(42, 2, carray([cstr(group)]) + TAGS)
        self.assertEqual(r.array(lambda x: (x.string(), x.i16())), [(group, 0)])

    def test_topic_admin_in_the_flexible_versions(self):
        call = self.flexible_caller("flex-admin")

        # CreateTopics v6 answers what it made.
        topic = cstr("flex-t") + struct.pack(">ih", 2, 1) + carray([]) + carray(
            [cstr("retention.ms") + cstr("600000") + TAGS]) + TAGS
        r = call(19, 6, carray([topic]) + struct.pack(">i", 5000) + b"\x00" + TAGS)
        [created] = r.array(lambda x: (x.string(), x.i16(), x.string(), x.i32(), x.i16(), x.array(lambda c: c)))
        self.assertEqual(created, ("flex-t", 0, None, 2, 1, []))
        # CreatePartitions v3 grows it.
        r = call(37, 3, carray([cstr("flex-t") + struct.pack(">i", 3) + b"\x00" + TAGS]) + struct.pack(">i", 5000)
                 + b"\x00" + TAGS)
        self.assertEqual(r.array(lambda x: (x.string(), x.i16(), x.string())), [("flex-t", 0, None)])
        self.assertEqual(len(self.admin().list_topics(timeout=TIMEOUT_S).topics["flex-t"].partitions), 3)
        # DescribeConfigs v4: the value and its type (LONG is 5).
        resource = struct.pack(">b", 2) + cstr("flex-t") + carray([cstr("retention.ms")]) + TAGS
        r = call(32, 4, carray([resource]) + b"\x00\x00" + TAGS)

        def config(c):
            return (c.string(), c.string(), c.i8(), c.i8(), c.i8(), c.array(lambda y: y), c.i8(), c.string())

        [(error, _, rtype, name, configs)] = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string(),
                                                                x.array(config)))
        self.assertEqual((error, rtype, name), (0, 2, "flex-t"))
        self.assertEqual([(c[0], c[1], c[6]) for c in configs], [("retention.ms", "600000", 5)])
        # DeleteTopics v5: deleted, and a missing one answered with its reason.
        r = call(20, 5, carray([cstr("flex-t"), cstr("flex-none")]) + struct.pack(">i", 5000) + TAGS)
        results = r.array(lambda x: (x.string(), x.i16(), x.string()))
        self.assertEqual([(n, e) for n, e, _ in results], [("flex-t", 0), ("flex-none", 3)])
        self.assertIsNone(results[0][2])
        self.assertIn("flex-none", results[1][2])
        self.assertNotIn("flex-t", self.admin().list_topics(timeout=TIMEOUT_S).topics)

    # --- Malformed bodies

    def test_malformed_bodies_close_only_their_connection(self):
        self.create("mal-keep")
        self.produce_each("mal-keep", 3)
        cases = [(DELETE_RECORDS, 2, True), (OFFSET_FOR_LEADER_EPOCH, 4, True), (ALTER_CONFIGS, 1, False),
                 (DESCRIBE_LOG_DIRS, 4, True), (INCREMENTAL_ALTER_CONFIGS, 1, True), (OFFSET_DELETE, 0, False),
                 (DESCRIBE_CLUSTER, 1, True), (DESCRIBE_PRODUCERS, 0, True)]
        # Truncated bodies do not decode: the connection closes. Garbage may
        # happen to decode (then it is answered, in order); either way the
        # node goes on.
        truncated = [b"", b"\xff" * 7]
        garbage = [b"\x00\x00\x7f\xff\xff\xff" + b"\x01" * 5, b"\x05\x01\x02", b"\x02\x04\x00\x00\x00" * 3]
        for key, version, flexible in cases:
            for body in truncated + garbage:
                conn = RawKafkaConnection(self.node.ports["kafka"], "malformed")
                try:
                    corr = conn.send(key, version, body, flexible=flexible)
                    if body in truncated:
                        with self.assertRaises((ConnectionError, OSError), msg=f"key {key} body {body!r}"):
                            conn.receive()
                        continue
                    try:
                        resp = conn.receive()
                    except (ConnectionError, OSError):
                        continue
                    self.assertEqual(struct.unpack(">i", resp[:4])[0], corr)
                finally:
                    conn.close()
        # The node still serves, and what it stored is intact.
        self.assertEqual(self.read_values("mal-keep", 0, 3), [(0, "v0"), (1, "v1"), (2, "v2")])
        self.assertEqual(self.delete_records("mal-keep", 0), (0, 0))


if __name__ == "__main__":
    unittest.main()
