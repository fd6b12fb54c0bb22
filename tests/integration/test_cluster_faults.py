"""Faults in a cluster of real magnetar processes on loopback: members
killed with SIGKILL and restarted, a member paused with SIGSTOP past its
lease. Every wait is bounded; nothing is timed for speed.
"""
import http.client
import json
import signal
import threading
import time
import unittest

from confluent_kafka import Consumer, KafkaError, KafkaException

from cluster_harness import (ClusterCase, applied_index, create_tenant, kafka_bootstrap, nodes_of, request,
                             tenants_of,
                             wait_for)
from magnetar_harness import admin

LEASE_S = 5.0  # a member's metadata lease (src/cluster/node.cc, kLeaseMs)
LEASE_WAITS = "magnetar_cluster_lease_waits_total"
ACKS_HELD = "magnetar_cluster_acks_held_total"


def live_voters(node):
    return sum(n["raftRole"] == "voter" and n["alive"] for n in nodes_of(node))


def past_its_lease(leader, paused, meanwhile=None):
    """Returns once `paused` (just stopped with SIGSTOP) is well past its
    lease, wherever in its keepalive cycle it stopped, and `leader` counts it
    dead; runs `meanwhile` once it does."""
    stopped_at = time.monotonic()
    wait_for(lambda: not [n for n in nodes_of(leader) if n["id"] == paused.id][0]["alive"],
             "the leader counting the paused member dead", timeout=LEASE_S * 4)
    if meanwhile:
        meanwhile()
    time.sleep(max(0.0, stopped_at + LEASE_S + 2.0 - time.monotonic()))


def write_until_acknowledged(test, members, name, attempts=10):
    """Creates tenant `name` through `members` in turn until one answers 204.
    A member may answer 503 while a leader is elected (nothing was written);
    an earlier attempt whose outcome was unknown may have created it, so a
    409 after such an attempt counts as written. Returns the member that
    acknowledged it."""
    unknown = False
    for i in range(attempts):
        node = members[i % len(members)]
        try:
            status, answer = create_tenant(node, name)
        except OSError:
            status, answer = 0, "no answer"
        if status == 204 or (status == 409 and unknown):
            return node
        unknown = unknown or status not in (503, 400)
        test.assertIn(status, (0, 409, 500, 503), f"creating {name} through {node.http_url}: {answer}")
        time.sleep(0.5)
    test.fail(f"tenant {name} was not acknowledged in {attempts} attempts")


class ClusterFaultTest(ClusterCase):
    prefix = "magnetar-faults-"

    def start(self, count, extra=()):
        members = self.add_members(count, extra)
        wait_for(lambda: live_voters(members[0]) == min(count, 5), f"{count} live voters", timeout=60)
        return members

    def test_five_members_survive_two_killed_and_catch_up(self):
        members = self.start(5)
        # Every member sees five live voters, and agrees on one leader.
        for node in members:
            wait_for(lambda: live_voters(node) == 5, f"{node.http_url} seeing five live voters")
        leader = self.cluster.leader()

        # Written through one member with the command-line client, read through all five.
        code, _, err = admin(members[3], "tenants", "create", "five")
        self.assertEqual(code, 0, err)
        code, _, err = admin(members[4], "namespaces", "create", "five/orders")
        self.assertEqual(code, 0, err)
        for node in members:
            code, out, err = admin(node, "namespaces", "list", "five")
            self.assertEqual(code, 0, err)
            self.assertIn("five/orders", out.split())

        # Two of five killed, the leader among them: a majority is left.
        killed = [leader, [n for n in members if n is not leader][0]]
        survivors = [n for n in members if n not in killed]
        for node in killed:
            node.stop(sig=signal.SIGKILL)
        new_leader = self.cluster.leader(among=survivors, other_than=killed)
        self.assertNotIn(new_leader, killed)
        # A new leader has heard from no one yet: the members still keeping
        # alive with the old one are not reported dead meanwhile (ownership
        # would move their bundles). Watched for a few keepalive periods.
        survivor_ids = {n.id for n in survivors}
        seen_dead = set()
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            for node in survivors:
                try:
                    view = nodes_of(node, timeout=2.0)
                except (ValueError, OSError):
                    continue
                seen_dead |= {(node.id, n["id"]) for n in view if n["id"] in survivor_ids and not n["alive"]}
            time.sleep(0.05)
        self.assertEqual(seen_dead, set(), "(observer, member) pairs where a live member was reported dead")
        written = [f"after-kill-{i}" for i in range(6)]
        for name in written:
            write_until_acknowledged(self, survivors, name)
        for node in survivors:
            self.assertTrue(set(written) <= set(tenants_of(node)), node.http_url)

        # Restarted without --join, each finds the others in its own log and
        # applies everything it missed.
        for node in killed:
            self.assertNotIn("--join", node.extra_args)
            node.start()
        for node in members:
            wait_for(lambda: live_voters(node) == 5, f"{node.http_url} seeing five live voters again", timeout=60)
        target = applied_index(new_leader)
        for node in killed:
            wait_for(lambda: applied_index(node) >= target, f"{node.http_url} applying up to {target}")
            self.assertTrue(set(written) <= set(tenants_of(node)), node.http_url)
            code, out, err = admin(node, "namespaces", "list", "five")
            self.assertEqual(code, 0, err)
            self.assertIn("five/orders", out.split())

    def test_a_member_without_a_majority_answers_kafka_metadata_from_what_it_knows(self):
        # Without a leader a metadata read waits up to 15 s
        # (ClusterStore::kCallDeadlineMs) and a listing makes several, longer
        # than a Kafka client waits for an answer. A member that cannot read
        # the metadata store (two of three killed) answers within the
        # client's default request timeout from what it knows: the topics it
        # last listed, their leaders as far as it knows them alive, and a
        # retriable error for a topic it cannot find, never "unknown" (a
        # client keeps that for minutes).
        members = self.start(3)
        first = members[0]

        def make():
            # Made where its bundle is served (the others redirect: 307),
            # once the new cluster has settled on an owner.
            statuses = [request(m, "PUT", "/admin/v2/persistent/public/default/kept")[0] for m in members]
            return 204 in statuses or 409 in statuses
        wait_for(make, "kept made")
        # Kafka's own default request timeout (request.timeout.ms, 30 s).
        config = {"bootstrap.servers": kafka_bootstrap([first]), "socket.timeout.ms": 30000}
        consumers = [Consumer(dict(config, **{"group.id": f"majority-check-{i}"})) for i in range(8)]
        consumer = consumers[0]

        def metadata(topic=None, of=consumer):
            try:
                return of.list_topics(topic=topic, timeout=30)
            except KafkaException as e:
                raise ValueError(str(e))  # no answer in time: asked again
        try:
            wait_for(lambda: metadata("kept").topics["kept"].error is None, "kept listed with every member up")
            for node in members[1:]:
                node.stop(sig=signal.SIGKILL)
            # Eight clients at once, each answered in its request timeout
            # (every answer waits for the same listing, not one after another).
            answers = [None] * len(consumers)

            def ask(i):
                try:
                    answers[i] = consumers[i].list_topics(topic="kept", timeout=30)
                except KafkaException as e:
                    answers[i] = e
            askers = [threading.Thread(target=ask, args=(i,)) for i in range(len(consumers))]
            for t in askers:
                t.start()
            for t in askers:
                t.join(timeout=60)
            for i, md in enumerate(answers):
                self.assertNotIsInstance(md, KafkaException, f"client {i}: {md}")
                self.assertIsNotNone(md, f"client {i} got no answer")
                kept = md.topics["kept"]
                # Led by the member still up, or by one this member cannot
                # reach: then not available as a whole (no partition of it
                # led), retriable, for the client to ask again.
                if kept.error is None:
                    self.assertEqual(list(kept.partitions), [0])
                    self.assertIsNone(kept.partitions[0].error, f"client {i}")
                    self.assertEqual(kept.partitions[0].leader, md.orig_broker_id)
                else:
                    self.assertEqual(kept.error.code(), KafkaError.LEADER_NOT_AVAILABLE, f"client {i}: {kept.error}")
                    self.assertEqual(list(kept.partitions), [])
            err = metadata("never-made").topics["never-made"].error
            self.assertIsNotNone(err)
            self.assertEqual(err.code(), KafkaError.LEADER_NOT_AVAILABLE, str(err))
            # Every topic: the ones it last listed.
            self.assertIn("kept", metadata().topics)
            for node in members[1:]:
                node.start()
            def led():
                kept = metadata("kept").topics["kept"]
                return kept.error is None and kept.partitions[0].error is None
            wait_for(led, "kept led again with a majority", timeout=60)
        finally:
            for c in consumers:
                c.close()

    def test_a_member_paused_past_its_lease_waits_for_a_new_one_before_writing(self):
        members = self.start(3)
        leader = self.cluster.leader()
        paused = [n for n in members if n is not leader][0]
        others = [n for n in members if n is not paused]
        waits_before = paused.metric(LEASE_WAITS)

        paused.pause()
        try:
            def meanwhile():
                # The others go on: writes through either of them are
                # acknowledged while it sleeps.
                for i in range(4):
                    status, answer = create_tenant(others[i % 2], f"while-paused-{i}")
                    self.assertEqual(status, 204, answer)

            past_its_lease(leader, paused, meanwhile)
            # The write is waiting in its socket when it wakes. The leader is
            # paused as it wakes, so nobody can renew its lease until the
            # other two elect a new leader (an election timeout at least):
            # the write reaches the lease check with the lease lapsed,
            # however the machine schedules the member's threads.
            conn = http.client.HTTPConnection(paused.host, paused.ports["http"], timeout=30)
            conn.request("PUT", "/admin/v2/tenants/after-pause", json.dumps({"allowedClusters": [], "adminRoles": []}),
                         {"Content-Type": "application/json"})
            leader.pause()
        finally:
            paused.resume()
        try:
            answer = conn.getresponse()
        finally:
            leader.resume()
        body = answer.read()
        conn.close()
        self.assertEqual(answer.status, 204, body)
        self.assertGreater(paused.metric(LEASE_WAITS), waits_before,
                           "the write went out with a lapsed lease, before the cluster renewed it")
        self.assertIn("lease has lapsed", paused.read_log())
        for node in members:
            self.assertIn("after-pause", tenants_of(node), node.http_url)
            for i in range(4):
                self.assertIn(f"while-paused-{i}", tenants_of(node), node.http_url)
        # Renewed, its next write does not wait.
        waits = paused.metric(LEASE_WAITS)
        status, answer = create_tenant(paused, "renewed")
        self.assertEqual(status, 204, answer)
        self.assertEqual(paused.metric(LEASE_WAITS), waits)


    def owner_by_lookup(self, members, asked, local):
        """The member that `asked` names the owner of public/default/`local`."""
        status, lookup = request(asked, "GET", f"/lookup/v2/topic/persistent/public/default/{local}")
        self.assertEqual(status, 200, lookup)
        owner = [m for m in members if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}")]
        return owner[0] if owner else None

    def topic_of_a_follower(self, members, leader, prefix):
        """A topic (and its owner) that a member other than the leader owns."""
        for i in range(64):
            owner = self.owner_by_lookup(members, leader, f"{prefix}-{i}")
            if owner is not None and owner is not leader:
                return f"{prefix}-{i}", owner
        self.fail("the leader owns every topic tried")

    def follower_topic_with_a_producer(self, failover_after_secs, prefix):
        """Three members, and a topic a follower owns with producer 1 on it
        through that owner, `before` stored. Returns the members, the leader,
        the topic's local name and full name, the owner and the open wire."""
        import pulsar_api_pb2 as pb
        from pulsar_wire import PulsarWire
        members = self.start(3, extra=("--failover-after-secs", str(failover_after_secs)))
        leader = self.cluster.leader()
        local, owner = self.topic_of_a_follower(members, leader, prefix)
        topic = f"persistent://public/default/{local}"
        # Its ledger gets a copy on each of the three only if the owner sees
        # all three alive when it opens the topic. With two copies (itself
        # and the leader) a publish would wait on a paused leader until the
        # leader is replaced as a storage node, past a new lease.
        wait_for(lambda: sum(n["alive"] for n in nodes_of(owner)) == 3, "the owner seeing three live members")
        wire = PulsarWire(owner.ports["pulsar"], host=owner.host)
        answer = wire.create_producer(topic, 1)
        self.assertEqual(answer.type, pb.BaseCommand.PRODUCER_SUCCESS, answer.cmd)
        self.assertEqual(wire.send(1, b"before").type, pb.BaseCommand.SEND_RECEIPT)
        return members, leader, local, topic, owner, wire

    def test_a_member_paused_past_its_lease_holds_publish_acknowledgements(self):
        import pulsar_api_pb2 as pb
        # The paused owner keeps its bundles (failover would move them once
        # it is counted dead): what is tested is its own acknowledgements.
        members, leader, local, topic, paused, wire = self.follower_topic_with_a_producer(600, "held")
        with wire:
            held_before = paused.metric(ACKS_HELD)
            paused.pause()
            try:
                past_its_lease(leader, paused)
                # Waiting in its socket as it wakes, with the leader paused: the
                # member stores it, but nobody can renew its lease before the
                # other two elect a new leader.
                seq = wire.send(1, b"while-paused", wait=False)
                leader.pause()
            finally:
                paused.resume()
            try:
                receipt = wire.next(None, timeout=30, where=lambda f: f.type in (
                    pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR))
            finally:
                leader.resume()
            self.assertEqual(receipt.type, pb.BaseCommand.SEND_RECEIPT, receipt.cmd)
            self.assertEqual(receipt.cmd.send_receipt.sequence_id, seq)
            self.assertGreater(paused.metric(ACKS_HELD), held_before,
                               "the publish was acknowledged with a lapsed lease, before the cluster renewed it")
            self.assertIn("publish acknowledgements wait", paused.read_log())
            # Renewed, the next publish is acknowledged without waiting.
            held = paused.metric(ACKS_HELD)
            self.assertEqual(wire.send(1, b"after").type, pb.BaseCommand.SEND_RECEIPT)
            self.assertEqual(paused.metric(ACKS_HELD), held)

    def test_a_member_that_wakes_after_its_bundle_moved_acknowledges_nothing_more(self):
        """Paused past its lease, the owner's bundle moves and the new owner
        opens the topic, fencing the ledger the paused one was writing. When
        it wakes, the publish waiting in its socket must not be acknowledged,
        its producer is told to go, and the log holds exactly what was
        acknowledged."""
        import pulsar_api_pb2 as pb
        from pulsar_wire import PulsarWire
        members, leader, local, topic, paused, old = self.follower_topic_with_a_producer(0, "woken")
        with old:
            paused.pause()
            try:
                past_its_lease(leader, paused)
                # A lookup moves the bundle of a dead owner; the new owner's
                # first publish opens the log there, fencing the old ledger.
                new_owner = wait_for(lambda: (lambda o: o if o not in (None, paused) else None)(
                    self.owner_by_lookup(members, leader, local)), "the bundle moving to a live member")

                def published():
                    with PulsarWire(new_owner.ports["pulsar"], host=new_owner.host) as new:
                        if new.create_producer(topic, 2).type != pb.BaseCommand.PRODUCER_SUCCESS:
                            return False
                        return new.send(2, b"during").type == pb.BaseCommand.SEND_RECEIPT
                wait_for(published, "a publish through the new owner")
                # Waiting in the old owner's socket as it wakes.
                old.send(1, b"stale", wait=False)
            finally:
                paused.resume()
            try:
                answer = old.next(None, timeout=30, where=lambda f: f.type in (
                    pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR, pb.BaseCommand.CLOSE_PRODUCER)).type
            except ConnectionError:
                answer = None  # closed: nothing acknowledged either
            self.assertNotEqual(answer, pb.BaseCommand.SEND_RECEIPT,
                                "the old owner acknowledged a publish after its bundle moved")
        # Every member names the new owner, and the log holds what was acknowledged.
        for m in members:
            wait_for(lambda: self.owner_by_lookup(members, m, local) is new_owner, f"{m.http_url} naming the new owner")
        with PulsarWire(new_owner.ports["pulsar"], host=new_owner.host) as reader:
            self.assertEqual(reader.subscribe(topic, "check", 3, initial="Earliest").type, pb.BaseCommand.SUCCESS)
            reader.flow(3, 10)
            got = [m.payload for m in reader.receive(3, 2)]
            self.assertEqual(got, [b"before", b"during"])
            with self.assertRaises(TimeoutError):
                reader.receive(3, 1, timeout=2)
        log = paused.read_log()
        said = "the connection closed" if answer is None else pb.BaseCommand.Type.Name(answer)
        print(f"\n{self.id()}: the woken owner answered {said}; its logs fenced "
              f"by the new owner: {paused.metric('magnetar_ledger_taken_over_total'):.0f}; learned of the move "
              f"from the watch: {'belongs to another node' in log}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
