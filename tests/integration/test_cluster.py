"""Clusters of real magnetar processes on loopback, joined by flag.

Each member gets a fixed cluster port (members know each other by address,
so it must survive restarts), port 0 for everything else, and its own data
directory. Every wait is bounded.
"""
import http.client
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

from cluster_harness import leader_id, make_secret, nodes_of, wait_for
from magnetar_harness import BIN, Node, admin, call_json, free_port

WAIT_S = 30.0


class Cluster:
    """Members started with `magnetar start --cluster-port`."""

    def __init__(self, secret):
        self.secret = secret
        self.members = []

    def add(self, join=None, data_dir=None):
        port = free_port()
        args = ["--cluster-port", str(port), "--cluster-secret-file", self.secret, "--reactors", "1"]
        if join:
            args += ["--join", ",".join(join)]
        node = Node(*args, data_dir=data_dir, command="start")
        node.cluster_port = port
        node.start()
        self.members.append(node)
        return node

    def seed(self):
        return [f"127.0.0.1:{self.members[0].cluster_port}"]

    def close(self):
        for node in self.members:
            node.close()


class ClusterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="magnetar-cluster-")
        self.secret = make_secret(self.dir)
        self.cluster = Cluster(self.secret)

    def tearDown(self):
        self.cluster.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start_three(self):
        first = self.cluster.add()
        second = self.cluster.add(join=self.cluster.seed())
        third = self.cluster.add(join=self.cluster.seed())
        # Each member's own view: a member learns who is alive from the leader's keepalive answers.
        for node in (first, second, third):
            wait_for(lambda: sum(n["raftRole"] == "voter" and n["alive"] for n in nodes_of(node)) == 3,
                     f"{node.http_url} seeing three live voters")
        return first, second, third

    def test_secret_file_is_private_and_never_overwritten(self):
        mode = os.stat(self.secret).st_mode & 0o777
        self.assertEqual(mode, 0o600)
        r = subprocess.run([BIN, "cluster", "create-secret", "--output", self.secret], capture_output=True,
                           text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("exists", r.stderr)

    def test_three_members_share_metadata(self):
        first, second, third = self.start_three()
        nodes = nodes_of(third)
        self.assertEqual(len(nodes), 3)
        self.assertEqual(sum(n["leader"] for n in nodes), 1)
        for n in nodes:
            self.assertTrue(n["httpUrl"].startswith("http://"), n)
            self.assertTrue(n["brokerServiceUrl"].startswith("pulsar://"), n)
        # A write through any member is seen through every other.
        status, answer = call_json(second, "PUT", "/admin/v2/tenants/acme",
                                   {"allowedClusters": ["standalone"], "adminRoles": []})
        self.assertEqual(status, 204, answer)
        status, answer = call_json(third, "PUT", "/admin/v2/namespaces/acme/orders", {})
        self.assertEqual(status, 204, answer)
        for node in (first, second, third):
            status, namespaces = call_json(node, "GET", "/admin/v2/namespaces/acme")
            self.assertEqual(status, 200)
            self.assertIn("acme/orders", namespaces)
        # Pulsar's broker listing names every live member's web service.
        status, brokers = call_json(first, "GET", "/admin/v2/brokers/standalone")
        self.assertEqual(status, 200, brokers)
        self.assertEqual(len(brokers), 3, brokers)
        status, leader = call_json(second, "GET", "/admin/v2/brokers/leaderBroker")
        self.assertEqual(status, 200, leader)
        self.assertIn(leader["brokerId"], brokers)
        # The same for people: one row per member, one of them the leader.
        code, out, err = admin(first, "cluster", "nodes")
        self.assertEqual(code, 0, err)
        rows = out.strip().splitlines()[1:]
        self.assertEqual(len(rows), 3, out)
        self.assertEqual(sum(" yes " in f" {row} " and "voter" in row for row in rows), 3, out)

    def test_a_stranger_without_the_secret_cannot_join(self):
        first = self.cluster.add()
        other_dir = tempfile.mkdtemp(prefix="magnetar-other-", dir=self.dir)
        wrong = make_secret(other_dir)
        port = free_port()
        stranger = Node("--cluster-port", str(port), "--cluster-secret-file", wrong, "--join",
                        self.cluster.seed()[0], command="start")
        try:
            with self.assertRaises(RuntimeError) as refused:
                stranger.start()
            self.assertIn("secret", str(refused.exception))
        finally:
            stranger.close()
        self.assertEqual(len(nodes_of(first)), 1)

    def test_kill_the_leader_while_writing(self):
        first, second, third = self.start_three()
        by_id = {}
        for node in (first, second, third):
            me = [n for n in nodes_of(node) if n["httpUrl"] == node.http_url]
            by_id[me[0]["id"]] = node
        leader = by_id[leader_id(first)]
        survivors = [n for n in (first, second, third) if n is not leader]
        status, answer = call_json(survivors[0], "PUT", "/admin/v2/tenants/load",
                                   {"allowedClusters": ["standalone"], "adminRoles": []})
        self.assertEqual(status, 204, answer)

        acknowledged = []
        failures = []
        stop = threading.Event()

        def writer():
            i = 0
            while not stop.is_set():
                name = f"ns{i}"
                try:
                    status, answer = call_json(survivors[i % 2], "PUT", f"/admin/v2/namespaces/load/{name}", {})
                except OSError as e:
                    status, answer = 0, str(e)
                if status == 204:
                    acknowledged.append(name)
                else:
                    failures.append((name, status, answer))
                i += 1
                time.sleep(0.02)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            wait_for(lambda: len(acknowledged) >= 20, "writes before the kill")
            leader.stop(sig=signal.SIGKILL)
            killed_at = len(acknowledged)
            wait_for(lambda: len(acknowledged) >= killed_at + 20, "writes after the kill")
        finally:
            stop.set()
            thread.join(timeout=60)
        # Every acknowledged write survived the leader's death.
        status, namespaces = call_json(survivors[1], "GET", "/admin/v2/namespaces/load")
        self.assertEqual(status, 200, namespaces)
        missing = [n for n in acknowledged if f"load/{n}" not in namespaces]
        self.assertEqual(missing, [], f"acknowledged but lost; failures: {failures[:5]}")
        # A member's view of the leader is refreshed each second: wait for it to move.
        old = [i for i, n in by_id.items() if n is leader]
        wait_for(lambda: leader_id(survivors[0]) not in [None] + old, "a new leader")

        # The killed member restarts without --join and catches up.
        leader.start()
        wait_for(lambda: all(n["alive"] for n in nodes_of(survivors[0])), "the restarted member alive")
        status, namespaces = call_json(leader, "GET", "/admin/v2/namespaces/load")
        self.assertEqual(status, 200)
        self.assertEqual([n for n in acknowledged if f"load/{n}" not in namespaces], [])

        def caught_up():
            nodes = {n["id"]: n for n in nodes_of(leader)}
            mine = [n for n in nodes.values() if n["httpUrl"] == leader.http_url][0]
            status, theirs = call_json(survivors[0], "GET", "/admin/v2/cluster/nodes")
            reference = [n for n in theirs if n["httpUrl"] == survivors[0].http_url][0]
            return mine["appliedIndex"] >= reference["appliedIndex"] - 5 and mine["appliedIndex"] > 0
        wait_for(caught_up, "the restarted member's log caught up")

    def test_kafka_partitions_are_led_by_different_members(self):
        from confluent_kafka import Consumer, Producer
        from confluent_kafka.admin import AdminClient
        first, second, third = self.start_three()
        status, answer = call_json(first, "PUT", "/admin/v2/persistent/public/default/spread/partitions", 6)
        self.assertEqual(status, 204, answer)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{first.ports['kafka']}"})
        metadata = admin.list_topics("spread", timeout=15)
        self.assertEqual(len(metadata.brokers), 3, metadata.brokers)
        self.assertEqual(sorted(b.port for b in metadata.brokers.values()),
                         sorted(n.ports["kafka"] for n in (first, second, third)))
        partitions = metadata.topics["spread"].partitions
        self.assertEqual(len(partitions), 6)
        leaders = {p.id: p.leader for p in partitions.values()}
        self.assertTrue(all(leader in metadata.brokers for leader in leaders.values()), leaders)
        self.assertGreater(len(set(leaders.values())), 1, f"one member leads every partition: {leaders}")
        # Each member's bundles, as the admin API shows them, account for the leaders. The
        # assignments the metadata call made reach a follower with the leader's next append.
        def accounted():
            owned = {n["brokerId"]: n["ownedBundles"] for n in nodes_of(third)}
            return all(owned[leader] for leader in set(leaders.values())) and owned
        wait_for(accounted, "the third member's view of the bundles accounting for the leaders")

        producer = Producer({"bootstrap.servers": f"127.0.0.1:{second.ports['kafka']}", "acks": "all"})
        failures = []
        for i in range(60):
            producer.produce("spread", value=f"v{i}".encode(), partition=i % 6,
                             on_delivery=lambda err, msg: err and failures.append(err))
        self.assertEqual(producer.flush(30), 0)
        self.assertEqual(failures, [])

        consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{third.ports['kafka']}", "group.id": "readers",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            consumer.subscribe(["spread"])
            got = set()
            deadline = time.monotonic() + WAIT_S
            while len(got) < 60 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    got.add(msg.value().decode())
            self.assertEqual(got, {f"v{i}" for i in range(60)})
            # The group's offsets live with each partition's owner, whichever member coordinates it.
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()
        for i in range(60, 66):
            producer.produce("spread", value=f"v{i}".encode(), partition=i % 6)
        self.assertEqual(producer.flush(30), 0)
        resumed = Consumer({"bootstrap.servers": f"127.0.0.1:{first.ports['kafka']}", "group.id": "readers",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
        try:
            resumed.subscribe(["spread"])
            later = []
            deadline = time.monotonic() + WAIT_S
            while len(later) < 6 and time.monotonic() < deadline:
                msg = resumed.poll(0.5)
                if msg is not None and not msg.error():
                    later.append(msg.value().decode())
            extra = resumed.poll(1.0)
            self.assertEqual(sorted(later), sorted(f"v{i}" for i in range(60, 66)))
            self.assertTrue(extra is None or extra.error(), "a committed message came again")
        finally:
            resumed.close()

    def test_a_producer_on_a_member_that_does_not_own_the_topic_is_told_to_look_again(self):
        import pulsar_api_pb2 as pb
        from pulsar_wire import PulsarWire
        first, second, third = self.start_three()
        members = (first, second, third)
        status, lookup = call_json(first, "GET", "/lookup/v2/topic/persistent/public/default/owned")
        self.assertEqual(status, 200, lookup)
        owner = [n for n in members if lookup["brokerUrl"].endswith(f":{n.ports['pulsar']}")]
        self.assertEqual(len(owner), 1, lookup)
        other = [n for n in members if n is not owner[0]][0]
        with PulsarWire(other.ports["pulsar"]) as wire:
            answer = wire.create_producer("persistent://public/default/owned", 1)
            self.assertEqual(answer.type, pb.BaseCommand.ERROR, answer.cmd)
            self.assertEqual(answer.cmd.error.error, pb.ServiceNotReady)
        with PulsarWire(owner[0].ports["pulsar"]) as wire:
            answer = wire.create_producer("persistent://public/default/owned", 1)
            self.assertEqual(answer.type, pb.BaseCommand.PRODUCER_SUCCESS, answer.cmd)
        # Lookups of namespaces nobody made are refused and assign nothing.
        bundles = sum(len(n["ownedBundles"]) for n in nodes_of(first))
        with PulsarWire(other.ports["pulsar"]) as wire:
            for i in range(5):
                answer = wire.request("LOOKUP", ["LOOKUP_RESPONSE"], topic=f"persistent://public/invented-{i}/t")
                self.assertEqual(answer.cmd.lookupTopicResponse.response, pb.CommandLookupTopicResponse.Failed)
                self.assertEqual(answer.cmd.lookupTopicResponse.error, pb.TopicNotFound)
        self.assertEqual(sum(len(n["ownedBundles"]) for n in nodes_of(first)), bundles)

    def test_the_command_line_client_finds_the_owner_from_any_member(self):
        members = self.start_three()
        topic = "persistent://public/default/cli-anywhere"
        status, lookup = call_json(members[0], "GET", "/lookup/v2/topic/persistent/public/default/cli-anywhere")
        self.assertEqual(status, 200, lookup)
        others = [n for n in members if not lookup["brokerUrl"].endswith(f":{n.ports['pulsar']}")]
        self.assertEqual(len(others), 2, lookup)
        for name, flags in (("true", ["--batch"]), ("false", [])):
            r = subprocess.run([BIN, "produce", topic, "-m", f"via-{name}", *flags, "--url",
                                f"pulsar://127.0.0.1:{others[0].ports['pulsar']}"], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run([BIN, "consume", topic, "--reader", "-P", "Earliest", "-n", "2", "--timeout", "10",
                            "--url", f"pulsar://127.0.0.1:{others[1].ports['pulsar']}"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["via-true", "via-false"])

    def test_topic_admin_calls_on_any_member_reach_the_owner(self):
        members = self.start_three()
        status, lookup = call_json(members[0], "GET", "/lookup/v2/topic/persistent/public/default/admin-anywhere")
        self.assertEqual(status, 200, lookup)
        owner = [n for n in members if lookup["brokerUrl"].endswith(f":{n.ports['pulsar']}")][0]
        other = [n for n in members if n is not owner][0]
        # Created through a member that does not own it: sent on to the owner.
        code, out, err = admin(other, "topics", "create", "persistent://public/default/admin-anywhere")
        self.assertEqual(code, 0, err)
        status, _, headers = other.http("GET", "/admin/v2/persistent/public/default/admin-anywhere/stats")
        self.assertEqual(status, 200)  # urllib followed the 307
        plain = http.client.HTTPConnection("127.0.0.1", other.ports["http"], timeout=30)  # follows nothing
        plain.request("GET", "/admin/v2/persistent/public/default/admin-anywhere/stats")
        moved = plain.getresponse()
        self.assertEqual(moved.status, 307)
        self.assertTrue(moved.getheader("Location").startswith(owner.http_url + "/admin/v2/"), moved.getheaders())
        plain.close()
        code, out, err = admin(other, "--json", "topics", "stats", "persistent://public/default/admin-anywhere")
        self.assertEqual(code, 0, err)
        self.assertIn("publishers", out)

    def test_group_calls_on_a_member_that_does_not_coordinate_the_group_are_refused(self):
        import struct
        from kafka_wire import RawKafkaConnection, kstr
        members = self.start_three()
        codes = []
        for node in members:
            wire = RawKafkaConnection(node.ports["kafka"], "probe")
            try:
                # Heartbeat v0: GroupId, GenerationId, MemberId -> ErrorCode.
                wire.send(12, 0, kstr("orders-app") + struct.pack(">i", 1) + kstr("nobody"))
                codes.append(struct.unpack(">h", wire.receive()[4:6])[0])
            finally:
                wire.close()
        # One coordinator (which knows no such member); the others send the client to it.
        self.assertEqual(sorted(codes)[:2], [16, 16], codes)
        self.assertNotEqual(sorted(codes)[2], 16, codes)

    def test_kafka_admin_apis_answer_for_the_partitions_each_member_owns(self):
        import struct
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient
        from kafka_wire import TAGS, RawKafkaConnection, carray, cints, cstr
        members = self.start_three()
        status, answer = call_json(members[0], "PUT", "/admin/v2/persistent/public/default/owned-adm/partitions", 6)
        self.assertEqual(status, 204, answer)
        metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{members[0].ports['kafka']}"}).list_topics(
            "owned-adm", timeout=15)
        leaders = {p.id: p.leader for p in metadata.topics["owned-adm"].partitions.values()}
        port_of = {b.id: b.port for b in metadata.brokers.values()}
        self.assertGreater(len(set(leaders.values())), 1, f"one member leads every partition: {leaders}")
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{members[1].ports['kafka']}", "acks": "all"})
        for k in range(6):
            producer.produce("owned-adm", value=b"x", partition=k)
        self.assertEqual(producer.flush(30), 0)
        for node in members:
            wire = RawKafkaConnection(node.ports["kafka"], "admin-probe")
            try:
                owned = sorted(k for k, leader in leaders.items() if port_of[leader] == node.ports["kafka"])
                expected = {k: 0 if k in owned else 6 for k in range(6)}  # else NOT_LEADER_OR_FOLLOWER
                # DescribeCluster v1: every member, from any member.
                r = wire.call(60, 1, b"\x00\x01" + TAGS, flexible=True)
                r.i32()
                self.assertEqual((r.i16(), r.string(), r.i8()), (0, None, 1))
                r.string()
                r.i32()
                brokers = r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))
                self.assertEqual(sorted(b[2] for b in brokers), sorted(n.ports["kafka"] for n in members))
                # OffsetForLeaderEpoch v4: the owner answers, the others send the client on.
                parts = [struct.pack(">iii", k, -1, 0) + TAGS for k in range(6)]
                r = wire.call(23, 4, struct.pack(">i", -1) + carray([cstr("owned-adm") + carray(parts) + TAGS]) + TAGS,
                              flexible=True)
                r.i32()
                [(_, answers)] = r.array(
                    lambda x: (x.string(), x.array(lambda y: (y.i16(), y.i32(), y.i32(), y.i64()))))
                self.assertEqual({a[1]: a[0] for a in answers}, expected)
                self.assertTrue(all(a[3] == 1 for a in answers if a[0] == 0), answers)
                # DescribeProducers v0 the same way.
                r = wire.call(61, 0, carray([cstr("owned-adm") + cints(list(range(6))) + TAGS]) + TAGS, flexible=True)
                r.i32()
                [(_, answers)] = r.array(lambda x: (x.string(), x.array(
                    lambda y: (y.i32(), y.i16(), y.string(), y.array(lambda z: z)))))
                self.assertEqual({a[0]: a[1] for a in answers}, expected)
                # DeleteRecords v2: only the owner deletes (nothing here: one ledger each).
                parts = [struct.pack(">iq", k, 1) + TAGS for k in range(6)]
                body = carray([cstr("owned-adm") + carray(parts) + TAGS]) + struct.pack(">i", 5000) + TAGS
                r = wire.call(21, 2, body, flexible=True)
                r.i32()
                [(_, answers)] = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i16()))))
                self.assertEqual({a[0]: a[2] for a in answers}, expected)
                self.assertTrue(all(a[1] == 0 for a in answers if a[2] == 0), answers)
                # DescribeLogDirs v4 lists only the partitions this member holds.
                r = wire.call(35, 4, carray([cstr("owned-adm") + cints(list(range(6))) + TAGS]) + TAGS, flexible=True)
                r.i32()
                r.i16()
                [(_, _, topics, _, _)] = r.array(lambda x: (x.i16(), x.string(), x.array(
                    lambda t: (t.string(), t.array(lambda p: (p.i32(), p.i64(), p.i64(), p.i8())))), x.i64(), x.i64()))
                held = sorted(p[0] for t in topics for p in t[1])
                self.assertEqual(held, owned)
            finally:
                wire.close()

    def test_a_stopping_leader_hands_leadership_over(self):
        first, second, third = self.start_three()
        by_url = {n.http_url: n for n in (first, second, third)}
        leader = [n for n in nodes_of(first) if n["leader"]][0]
        stopping = by_url[leader["httpUrl"]]
        others = [n for n in (first, second, third) if n is not stopping]
        self.assertEqual(stopping.stop(), 0)
        self.assertIn("handed leadership over", stopping.read_log())
        # A member's view of the leader is refreshed each second: wait for it to move.
        wait_for(lambda: leader_id(others[0]) not in (None, leader["id"]), "a new leader")
        status, answer = call_json(others[1], "PUT", "/admin/v2/tenants/after",
                                   {"allowedClusters": ["standalone"], "adminRoles": []})
        self.assertEqual(status, 204, answer)
        for node in others:
            self.assertEqual(node.stop(), 0)

    def test_a_standalone_node_grows_into_the_first_member(self):
        data = tempfile.mkdtemp(prefix="magnetar-grow-", dir=self.dir)
        alone = Node("--reactors", "1", data_dir=data)
        alone.start()
        status, answer = call_json(alone, "PUT", "/admin/v2/tenants/laptop",
                                   {"allowedClusters": ["standalone"], "adminRoles": []})
        self.assertEqual(status, 204, answer)
        status, answer = call_json(alone, "PUT", "/admin/v2/namespaces/laptop/dev", {})
        self.assertEqual(status, 204, answer)
        self.assertEqual(alone.stop(), 0)
        alone.close()

        first = self.cluster.add(data_dir=data)
        status, namespaces = call_json(first, "GET", "/admin/v2/namespaces/laptop")
        self.assertEqual(status, 200, namespaces)
        self.assertIn("laptop/dev", namespaces)
        self.assertTrue(os.path.isdir(os.path.join(data, "metadata.standalone")))
        second = self.cluster.add(join=self.cluster.seed())
        status, namespaces = call_json(second, "GET", "/admin/v2/namespaces/laptop")
        self.assertEqual(status, 200, namespaces)
        self.assertIn("laptop/dev", namespaces)
        # A restart keeps it: the member replays its log, it does not import again.
        self.assertEqual(first.stop(), 0)
        first.start()
        status, namespaces = call_json(first, "GET", "/admin/v2/namespaces/laptop")
        self.assertEqual(status, 200, namespaces)
        self.assertIn("laptop/dev", namespaces)


if __name__ == "__main__":
    unittest.main(verbosity=2)
