"""Kafka consumer groups against the real binary: kcat -G and confluent-kafka
group consumers, committed offsets kept as durable Pulsar subscriptions
(visible with their backlog in the admin stats), partitions split between
members and moved on a rebalance, and malformed group requests."""
import struct
import time
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from kafka_wire import KafkaNodeTestCase, RawKafkaConnection, kbytes, kstr
from magnetar_harness import Node, call_json

TIMEOUT_S = 30

# Error codes.
NONE, INVALID_GROUP_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION = 0, 24, 25, 22
INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL = 26, 23


class Wire(RawKafkaConnection):
    """One raw connection speaking non-flexible request versions."""

    def __init__(self, port):
        super().__init__(port, "group-test")

    def call(self, key, version, body):
        cid = self.send(key, version, body)
        data = self.receive()
        assert struct.unpack_from(">i", data)[0] == cid
        return data[4:]

    def join(self, group, member="", session_ms=10000, protocol_type="consumer", protocols=(("range", b"m"),)):
        # JoinGroup v1: group, session, rebalance timeout, member, type, protocols.
        body = kstr(group) + struct.pack(">ii", session_ms, session_ms) + kstr(member) + kstr(protocol_type)
        body += struct.pack(">i", len(protocols))
        for name, meta in protocols:
            body += kstr(name) + kbytes(meta)
        r = self.call(11, 1, body)
        error, generation = struct.unpack_from(">hi", r)
        pos = 6
        fields = []
        for _ in range(3):  # protocol, leader, member id
            n = struct.unpack_from(">h", r, pos)[0]
            fields.append(r[pos + 2:pos + 2 + max(n, 0)].decode())
            pos += 2 + max(n, 0)
        members = struct.unpack_from(">i", r, pos)[0]
        return error, generation, fields[1], fields[2], members

    def heartbeat(self, group, generation, member):
        r = self.call(12, 0, kstr(group) + struct.pack(">i", generation) + kstr(member))
        return struct.unpack_from(">h", r)[0]

    def sync(self, group, generation, member, assignments=()):
        body = kstr(group) + struct.pack(">i", generation) + kstr(member) + struct.pack(">i", len(assignments))
        for m, a in assignments:
            body += kstr(m) + kbytes(a)
        r = self.call(14, 0, body)
        error = struct.unpack_from(">h", r)[0]
        n = struct.unpack_from(">i", r, 2)[0]
        return error, r[6:6 + max(n, 0)]

    def leave(self, group, member):
        return struct.unpack_from(">h", self.call(13, 0, kstr(group) + kstr(member)))[0]

    def commit(self, group, topic, offset, generation=-1, member=""):
        # OffsetCommit v2: group, generation, member, retention, topics.
        body = kstr(group) + struct.pack(">i", generation) + kstr(member) + struct.pack(">q", -1)
        body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", 1) + struct.pack(">iq", 0, offset) + kstr("")
        r = self.call(8, 2, body)
        # topics(1) name partitions(1) partition error
        pos = 4
        n = struct.unpack_from(">h", r, pos)[0]
        pos += 2 + n + 4 + 4
        return struct.unpack_from(">h", r, pos)[0]


class KafkaGroupsTest(KafkaNodeTestCase):
    def stats(self, topic):
        status, stats = call_json(self.node, "GET", f"/admin/v2/persistent/public/default/{topic}/stats")
        self.assertEqual(status, 200, stats)
        return stats

    def produce_each(self, topic, values, partition=0):
        """One entry per message (flushed one by one, so none are batched)."""
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0})
        for v in values:
            p.produce(topic, value=v, partition=partition)
            self.assertEqual(p.flush(TIMEOUT_S), 0)

    def consumer(self, group, **extra):
        conf = {"bootstrap.servers": self.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
        conf.update(extra)
        return ck.Consumer(conf)

    def poll_values(self, c, count):
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                got.append(m)
        return got

    def test_kcat_group_consumer_gets_everything_once(self):
        topic = "grp-kcat"
        self.kcat("-P", "-t", topic, stdin=b"one\ntwo\nthree\n")
        # No -o: kcat would apply it to every assigned partition, over the
        # committed offsets; a new group starts at the beginning instead.
        group_args = ("-G", "kcat-group", topic, "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n")
        first = self.kcat(*group_args).splitlines()
        self.assertEqual(first, ["one", "two", "three"])
        self.kcat("-P", "-t", topic, stdin=b"four\nfive\n")
        second = self.kcat(*group_args).splitlines()
        self.assertEqual(second, ["four", "five"])
        # The group is a durable subscription; what it consumed is not backlog,
        # what was produced since is.
        sub = self.stats(topic)["subscriptions"]["kcat-group"]
        self.assertTrue(sub["isDurable"])
        self.assertEqual(sub["msgBacklog"], 0)
        self.kcat("-P", "-t", topic, stdin=b"six\nseven\n")
        self.assertEqual(self.stats(topic)["subscriptions"]["kcat-group"]["msgBacklog"], 2)

    def test_second_consumer_resumes_from_the_committed_offset(self):
        topic = "grp-resume"
        self.produce_each(topic, [b"v%d" % i for i in range(10)])
        c1 = self.consumer("resume-group")
        c1.subscribe([topic])
        got = self.poll_values(c1, 4)
        self.assertEqual([m.value() for m in got[:4]], [b"v0", b"v1", b"v2", b"v3"])
        c1.commit(message=got[3], asynchronous=False)  # commits offset 4
        c1.close()
        self.assertEqual(self.stats(topic)["subscriptions"]["resume-group"]["msgBacklog"], 6)

        c2 = self.consumer("resume-group")
        c2.subscribe([topic])
        rest = self.poll_values(c2, 6)
        self.assertEqual([m.offset() for m in rest], list(range(4, 10)))
        self.assertEqual(c2.committed([ck.TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset, 4)
        c2.commit(asynchronous=False)
        c2.close()
        self.assertEqual(self.stats(topic)["subscriptions"]["resume-group"]["msgBacklog"], 0)

    def test_commit_inside_a_batch_is_read_back_exactly(self):
        topic = "grp-batch"
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 100})
        for i in range(10):
            p.produce(topic, value=b"b%d" % i)
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        c1 = self.consumer("batch-group")
        c1.commit(offsets=[ck.TopicPartition(topic, 0, 7)], asynchronous=False)
        self.assertEqual(c1.committed([ck.TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset, 7)
        c1.close()
        c2 = self.consumer("batch-group")
        c2.subscribe([topic])
        rest = self.poll_values(c2, 3)
        self.assertEqual([m.value() for m in rest], [b"b7", b"b8", b"b9"])
        c2.close()
        # A batch entry is acknowledged only once all of it is below the
        # committed offset, so the backlog still holds the entry with 7..9.
        self.assertGreaterEqual(self.stats(topic)["subscriptions"]["batch-group"]["msgBacklog"], 3)

    def test_two_members_split_partitions_and_one_takes_all_when_the_other_leaves(self):
        topic = "grp-split"
        status, _ = call_json(self.node, "PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", 2)
        self.assertIn(status, (200, 204))
        assigned = {"a": set(), "b": set()}

        def track(name):
            def on_assign(_c, parts):
                assigned[name] = {p.partition for p in parts}

            def on_revoke(_c, parts):
                assigned[name] = set()
            return on_assign, on_revoke

        a, b = self.consumer("split-group"), self.consumer("split-group")
        a_assign, a_revoke = track("a")
        b_assign, b_revoke = track("b")
        a.subscribe([topic], on_assign=a_assign, on_revoke=a_revoke)
        deadline = time.monotonic() + TIMEOUT_S
        while assigned["a"] != {0, 1} and time.monotonic() < deadline:
            a.poll(0.1)
        self.assertEqual(assigned["a"], {0, 1})

        b.subscribe([topic], on_assign=b_assign, on_revoke=b_revoke)
        deadline = time.monotonic() + TIMEOUT_S
        while not (len(assigned["a"]) == 1 and len(assigned["b"]) == 1) and time.monotonic() < deadline:
            a.poll(0.1)
            b.poll(0.1)
        self.assertEqual(len(assigned["a"]), 1)
        self.assertEqual(assigned["a"] | assigned["b"], {0, 1})

        b.close()  # leaves the group: a gets both partitions
        deadline = time.monotonic() + TIMEOUT_S
        while assigned["a"] != {0, 1} and time.monotonic() < deadline:
            a.poll(0.1)
        self.assertEqual(assigned["a"], {0, 1})
        for partition in (0, 1):
            self.produce_each(topic, [b"p%d" % partition], partition=partition)
        got = self.poll_values(a, 2)
        self.assertEqual(sorted(m.value() for m in got), [b"p0", b"p1"])
        a.close()

    def test_list_and_describe_groups_show_the_members_and_their_assignment(self):
        topic = "grp-describe"
        self.produce_each(topic, [b"x"])
        c = self.consumer("describe-group", **{"client.id": "describer"})
        c.subscribe([topic])
        self.assertEqual(len(self.poll_values(c, 1)), 1)  # joined and assigned
        try:
            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            groups = admin.list_groups("describe-group", timeout=TIMEOUT_S)
            self.assertEqual(len(groups), 1)
            g = groups[0]
            self.assertEqual((g.id, g.state, g.protocol_type, g.protocol),
                             ("describe-group", "Stable", "consumer", "range"))
            self.assertEqual(len(g.members), 1)
            self.assertEqual(g.members[0].client_id, "describer")
            self.assertTrue(g.members[0].client_host.startswith("/127.0.0.1"))
            self.assertIn(topic.encode(), g.members[0].assignment)
            self.assertIn("describe-group", [x.id for x in admin.list_groups(timeout=TIMEOUT_S)])
        finally:
            c.close()

    def test_a_member_that_stops_heartbeating_is_expired(self):
        w1, w2 = Wire(self.node.ports["kafka"]), Wire(self.node.ports["kafka"])
        try:
            error, gen, leader, m1, _ = w1.join("expiry-group", session_ms=1000)
            self.assertEqual((error, leader), (NONE, m1))
            self.assertEqual(w1.sync("expiry-group", gen, m1, [(m1, b"x")]), (NONE, b"x"))
            # m1 never heartbeats again: a new member ends up alone in a
            # later generation once m1's session has run out.
            error, gen2, leader2, m2, members = w2.join("expiry-group", session_ms=10000)
            self.assertEqual(error, NONE)
            self.assertGreater(gen2, gen)
            self.assertEqual((leader2, members), (m2, 1))
            self.assertEqual(w1.heartbeat("expiry-group", gen, m1), UNKNOWN_MEMBER_ID)
        finally:
            w1.close()
            w2.close()

    def test_malformed_group_requests_get_error_codes_and_the_broker_keeps_serving(self):
        w = Wire(self.node.ports["kafka"])
        try:
            self.assertEqual(w.join("")[0], INVALID_GROUP_ID)
            self.assertEqual(w.join("bad-group", session_ms=10)[0], INVALID_SESSION_TIMEOUT)
            self.assertEqual(w.join("bad-group", protocols=())[0], INCONSISTENT_GROUP_PROTOCOL)
            self.assertEqual(w.join("bad-group", member="nobody")[0], UNKNOWN_MEMBER_ID)
            self.assertEqual(w.heartbeat("bad-group", 1, "nobody"), UNKNOWN_MEMBER_ID)
            self.assertEqual(w.sync("bad-group", 1, "nobody")[0], UNKNOWN_MEMBER_ID)
            self.assertEqual(w.leave("bad-group", "nobody"), UNKNOWN_MEMBER_ID)
            self.assertEqual(w.commit("", "grp-bad", 0), INVALID_GROUP_ID)
            error, gen, _, member, _ = w.join("bad-group")
            self.assertEqual(error, NONE)
            self.assertEqual(w.heartbeat("bad-group", gen + 5, member), ILLEGAL_GENERATION)
            self.assertEqual(w.commit("bad-group", "grp-bad", 0, generation=gen + 5, member=member),
                             ILLEGAL_GENERATION)
            self.assertEqual(w.join("bad-group", protocol_type="connect")[0], INCONSISTENT_GROUP_PROTOCOL)
            self.assertEqual(w.leave("bad-group", member), NONE)
        finally:
            w.close()
        # A truncated JoinGroup closes only its connection.
        w = Wire(self.node.ports["kafka"])
        try:
            msg = struct.pack(">hhi", 11, 1, 1) + kstr("group-test") + kstr("cut") + b"\x00\x00"
            w.sock.sendall(struct.pack(">i", len(msg)) + msg)
            with self.assertRaises(ConnectionError):
                w.recv_exact(4)
        finally:
            w.close()
        self.kcat("-P", "-t", "grp-bad", stdin=b"still\n")
        out = self.kcat("-G", "after-bad", "grp-bad", "-X", "auto.offset.reset=earliest", "-e", "-q", "-f", "%s\n")
        self.assertEqual(out, "still\n")


class KafkaGroupOffsetsRestartTest(unittest.TestCase):
    def test_committed_offsets_survive_a_restart(self):
        with Node() as node:
            node.keep_data = True
            data_dir = node.data_dir
            bootstrap = f"127.0.0.1:{node.ports['kafka']}"
            p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
            for i in range(6):
                p.produce("grp-restart", value=b"s%d" % i)
                self.assertEqual(p.flush(TIMEOUT_S), 0)
            p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 100})
            for i in range(6, 10):
                p.produce("grp-restart", value=b"s%d" % i)
            self.assertEqual(p.flush(TIMEOUT_S), 0)
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "aligned", "enable.auto.commit": False})
            c.commit(offsets=[ck.TopicPartition("grp-restart", 0, 4)], asynchronous=False)
            c.close()
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "in-batch", "enable.auto.commit": False})
            c.commit(offsets=[ck.TopicPartition("grp-restart", 0, 8)], asynchronous=False)
            c.close()
            del p  # disconnects before the node stops
            self.assertEqual(node.stop(), 0)
        with Node(data_dir=data_dir) as node:
            node.owns_dir = True
            bootstrap = f"127.0.0.1:{node.ports['kafka']}"

            def committed(group):
                c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
                try:
                    return c.committed([ck.TopicPartition("grp-restart", 0)], timeout=TIMEOUT_S)[0].offset
                finally:
                    c.close()

            # An offset between entries is kept exactly; one inside a batch
            # comes back as the first offset of its batch (offsets 6..9 were
            # sent as one or more batches).
            self.assertEqual(committed("aligned"), 4)
            in_batch = committed("in-batch")
            self.assertGreaterEqual(in_batch, 6)
            self.assertLessEqual(in_batch, 8)
            c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "aligned", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
            c.subscribe(["grp-restart"])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 6 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append(m.offset())
            c.close()
            self.assertEqual(got, list(range(4, 10)))
            self.assertEqual(node.stop(), 0)


if __name__ == "__main__":
    unittest.main()
