"""Replicated ledgers in a cluster of real magnetar processes: every entry
a topic stores is kept on several members (storage nodes), a member that
dies mid-write is replaced without failing the producer, and a restarted
owner recovers its last ledger (fencing the copies) without losing an
acknowledged message. Every wait is bounded; nothing is timed for speed.
"""
import os
import shutil
import signal
import unittest

from magnetar_harness import admin
from cluster_harness import (ClusterCase, kafka_consume_all, kafka_owner, kafka_produce, nodes_of, request,
                             wait_for)

STORED = "magnetar_replica_entries_added_total"
WIPED_BELOW = "magnetar_storage_node_wiped_below"
FENCES = "magnetar_replica_fences_total"
CHANGES = "magnetar_replication_ensemble_changes_total"
RECOVERIES = "magnetar_replication_recoveries_total"
HEALED = "magnetar_replication_healed_fragments_total"
ORPHANS = "magnetar_storage_orphan_ledgers_deleted_total"


def live_members(node):
    return sum(n["alive"] for n in nodes_of(node))


def produce(member, topic, values, timeout=60):
    """Sends `values` with acks=all through `member` alone, no retries;
    returns the values the node acknowledged and the errors it reported."""
    return kafka_produce([member], topic, values, timeout, **{"message.timeout.ms": 45000, "retries": 0})


def consume_all(member, topic, expected, timeout=60):
    return kafka_consume_all([member], topic, expected, timeout)


def other_holders(members, owner, before):
    """The two members besides `owner` that stored copies since `before`
    (each member's STORED count then): a ledger's three copies are on the
    owner and two others. An add completes at two copies, so the third may
    follow the acknowledgement: waited for."""
    def found():
        holding = [m for m in members if m is not owner and m.metric(STORED) > before[m.id]]
        return holding if len(holding) == 2 else None
    return wait_for(found, "three copies of each entry, one on the owner")


class ReplicatedStorageTest(ClusterCase):
    prefix = "magnetar-storage-"

    def start(self, count, extra=()):
        self.add_members(count, extra)
        for node in self.cluster.members:
            wait_for(lambda: live_members(node) == count, f"{node.http_url} seeing {count} live members", timeout=60)
        return list(self.cluster.members)

    def create_topic(self, member, topic):
        status, answer = request(member, "PUT", f"/admin/v2/persistent/public/default/{topic}")
        self.assertIn(status, (204, 307, 409), answer)

    def test_every_entry_is_kept_on_three_members(self):
        members = self.start(3)
        before = [m.metric(STORED) for m in members]
        owner = kafka_owner(members, "copies")
        acked, errors = produce(owner, "copies", [f"m{i}" for i in range(200)])
        self.assertEqual(errors, [])
        self.assertEqual(len(acked), 200)
        # Each of the three members stored the topic's entries (an entry holds a batch of messages).
        for m, b in zip(members, before):
            wait_for(lambda: m.metric(STORED) > b, f"{m.http_url} storing copies")
        got = consume_all(members[0], "copies", 200)
        self.assertEqual(got, [f"m{i}" for i in range(200)])

    def test_a_member_killed_mid_write_is_replaced_without_failing_the_producer(self):
        members = self.start(4)
        owner = kafka_owner(members, "survives")
        changes = owner.metric(CHANGES)
        before = {m.id: m.metric(STORED) for m in members}
        acked, errors = produce(owner, "survives", [f"a{i}" for i in range(100)])
        self.assertEqual(errors, [])
        # The ledger's three copies are on the owner and two of the other
        # three: kill one of those two, and the fourth member takes its place.
        holders = other_holders(members, owner, before)
        holders[0].stop(signal.SIGKILL)
        more, errors = produce(owner, "survives", [f"b{i}" for i in range(300)])
        self.assertEqual(errors, [], "a dead storage node failed the producer")
        self.assertEqual(len(more), 300)
        self.assertGreater(owner.metric(CHANGES), changes)
        spare = [m for m in members if m is not owner and m not in holders][0]
        # Acknowledged at two copies: the third, on the spare, may follow the acks.
        wait_for(lambda: spare.metric(STORED) > before[spare.id], "the spare member taking the dead one's place")
        got = consume_all(owner, "survives", 400)
        self.assertEqual(got, [f"a{i}" for i in range(100)] + [f"b{i}" for i in range(300)])

    def test_a_restarted_owner_recovers_its_open_ledger_and_loses_nothing_acknowledged(self):
        members = self.start(3)
        owner = kafka_owner(members, "recovers")
        acked, errors = produce(owner, "recovers", [f"r{i}" for i in range(500)])
        self.assertEqual(errors, [])
        owner.stop(signal.SIGKILL)
        fenced_before = sum(m.metric(FENCES) for m in members if m is not owner)
        owner.start()
        # Back, it owns the topic again: opening it fences and closes the
        # ledger it was writing, on the other members too.
        got = consume_all(owner, "recovers", 500, timeout=90)
        self.assertEqual(got, acked)
        self.assertGreaterEqual(owner.metric(RECOVERIES), 1)
        self.assertGreater(sum(m.metric(FENCES) for m in members if m is not owner), fenced_before)
        # It writes a new ledger and goes on.
        more, errors = produce(owner, "recovers", [f"s{i}" for i in range(50)])
        self.assertEqual(errors, [])
        self.assertEqual(consume_all(owner, "recovers", 550)[500:], more)

    def test_the_copies_a_lost_member_held_are_made_again_on_another(self):
        members = self.start(4, extra=("--storage-heal-grace-secs", "1"))
        owner = kafka_owner(members, "heals")
        before = {m.id: m.metric(STORED) for m in members}
        acked, errors = produce(owner, "heals", [f"h{i}" for i in range(200)])
        self.assertEqual(errors, [])
        holders = other_holders(members, owner, before)
        spare = [m for m in members if m is not owner and m not in holders][0]
        status, view = request(spare, "GET", "/admin/v2/cluster/storage")
        self.assertEqual(status, 200, view)
        self.assertEqual(sorted(n["id"] for n in view["storageNodes"]), sorted(m.id for m in members))
        self.assertEqual(view["underReplicatedFragments"], 0)
        self.assertGreaterEqual(view["ledgers"], 1)
        # Unloading closes the topic's ledger: a closed ledger is healed.
        status, answer = request(owner, "PUT", "/admin/v2/persistent/public/default/heals/unload")
        self.assertIn(status, (200, 204), answer)
        spare_before = spare.metric(STORED)
        holders[0].stop(signal.SIGKILL)
        live = [m for m in members if m is not holders[0]]
        wait_for(lambda: sum(m.metric(HEALED) for m in live) >= 1, "a member healing the lost copies", timeout=90)
        self.assertGreater(spare.metric(STORED), spare_before)
        # Every member shows what the healer did and that nothing is short any more.
        def healed_view():
            status, view = request(spare, "GET", "/admin/v2/cluster/storage")
            healing = view.get("healing") if status == 200 else None
            done = healing and healing["healedFragments"] >= 1 and view["underReplicatedFragments"] == 0
            return view if done else None
        view = wait_for(healed_view, "the storage view showing the lost copies healed", timeout=60)
        self.assertGreater(view["healing"]["healedBytes"], 0)
        self.assertEqual(view["healing"]["rateLimitBytesPerSecond"], 100 << 20)
        lost = [n for n in view["storageNodes"] if n["id"] == holders[0].id][0]
        self.assertEqual((lost["alive"], lost["fragments"]), (False, 0))
        code, out, err = admin(spare, "cluster", "storage")
        self.assertEqual(code, 0, err)
        self.assertIn("0 copies under-replicated", out)
        self.assertIn(f"self-healing on node {view['healing']['healer']}", out)
        # The second original copy gone too: the owner's and the healed one remain.
        holders[1].stop(signal.SIGKILL)
        self.assertEqual(consume_all(owner, "heals", 200, timeout=90), acked)

    def test_a_copy_whose_ledger_was_deleted_while_its_member_was_down_is_deleted_at_its_restart(self):
        members = self.start(4)
        owner = kafka_owner(members, "orphans")
        before = {m.id: m.metric(STORED) for m in members}
        acked, errors = produce(owner, "orphans", [f"o{i}" for i in range(100)])
        self.assertEqual(errors, [])
        holder = other_holders(members, owner, before)[0]
        holder.stop(signal.SIGKILL)
        # The ledger's record and the live members' copies go; the one on the member that is down stays.
        status, answer = request(owner, "DELETE", "/admin/v2/persistent/public/default/orphans?force=true")
        self.assertIn(status, (200, 204), answer)
        live = [m for m in members if m is not holder]
        wait_for(lambda: request(live[0], "GET", "/admin/v2/cluster/storage")[1].get("ledgers") == 0,
                 "the topic's ledger records gone")
        # At its restart the member's first reconcile pass finds the copy no topic names and deletes it.
        holder.start()
        wait_for(lambda: holder.metric(ORPHANS) >= 1, "the restarted member deleting its orphan copy", timeout=60)
        # A topic of the same name starts empty: nothing of the deleted one comes back.
        again, errors = produce(owner, "orphans", ["fresh"])
        self.assertEqual(errors, [])
        self.assertEqual(consume_all(owner, "orphans", 1), again)

    def test_a_striped_namespace_spreads_each_entry_over_two_of_three_members(self):
        members = self.start(3)
        status, answer = request(members[0], "POST", "/admin/v2/namespaces/public/default/persistence",
                                 {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2})
        self.assertEqual(status, 204, answer)
        owner = kafka_owner(members, "striped")
        before = {m.id: m.metric(STORED) for m in members}
        acked = []
        for round in range(6):  # six producers: at least six entries
            got, errors = produce(owner, "striped", [f"s{round}-{i}" for i in range(50)])
            self.assertEqual(errors, [])
            acked += got
        self.assertEqual(len(acked), 300)
        status, stats = request(owner, "GET", "/admin/v2/persistent/public/default/striped/internalStats")
        self.assertEqual(status, 200, stats)
        entries = stats["numberOfEntries"]
        self.assertGreaterEqual(entries, 6)
        # Two copies of each entry, on two of the three members in turn: each
        # member holds about two thirds of the entries, none all of them.
        stored = lambda: {m.id: m.metric(STORED) - before[m.id] for m in members}
        wait_for(lambda: sum(stored().values()) == 2 * entries, f"two copies of each of {entries} entries")
        for member_id, count in stored().items():
            self.assertGreater(count, 0, f"member {member_id} holds none")
            self.assertLess(count, entries, f"member {member_id} holds every entry")
        # The owner killed, another member recovers the ledger from the two
        # left (each entry has a copy on one of them) and serves every message.
        owner.stop(signal.SIGKILL)
        left = [m for m in members if m is not owner]
        try:
            got = kafka_consume_all(left, "striped", 300, timeout=60)
        except AssertionError:
            for m in left:
                print(m.read_log()[-6000:])
            raise
        self.assertEqual(got, acked)

    def test_a_namespaces_bookie_affinity_group_keeps_its_copies_on_its_storage_group(self):
        # Four members; two of them in storage group "tenant-a".
        first = self.cluster.add()
        grouped = [self.cluster.add(join=self.cluster.seed(), extra=("--storage-group", "tenant-a"))
                   for _ in range(2)]
        self.cluster.add(join=self.cluster.seed())
        members = list(self.cluster.members)
        for node in members:
            wait_for(lambda: live_members(node) == 4, f"{node.http_url} seeing 4 live members", timeout=60)
        base = "/admin/v2/namespaces/public/default"
        status, answer = request(first, "POST", f"{base}/persistence/bookieAffinity",
                                 {"bookkeeperAffinityGroupPrimary": "tenant a"})
        self.assertEqual(status, 400, answer)  # not a group name
        status, answer = request(first, "POST", f"{base}/persistence/bookieAffinity",
                                 {"bookkeeperAffinityGroupPrimary": "tenant-a"})
        self.assertEqual(status, 204, answer)
        status, answer = request(first, "POST", f"{base}/persistence",
                                 {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2})
        self.assertEqual(status, 204, answer)
        code, out, err = admin(members[3], "namespaces", "get-bookie-affinity-group", "public/default")
        self.assertEqual(code, 0, err)
        self.assertIn("tenant-a", out)
        owner = kafka_owner(members, "isolated")
        acked, errors = produce(owner, "isolated", [f"i{i}" for i in range(100)])
        self.assertEqual(errors, [])
        # Every copy of the topic's ledgers is on the two members of the group, the owner's own node aside.
        status, view = request(first, "GET", "/admin/v2/cluster/storage")
        self.assertEqual(status, 200, view)
        holding = {n["id"] for n in view["storageNodes"] if n["fragments"] > 0}
        self.assertEqual(holding, {m.id for m in grouped})
        self.assertEqual(consume_all(owner, "isolated", 100), acked)

    def test_a_member_whose_storage_was_wiped_knows_it(self):
        members = self.start(3)
        owner = kafka_owner(members, "wiped")
        acked, errors = produce(owner, "wiped", [f"w{i}" for i in range(100)])
        self.assertEqual(errors, [])
        other = [m for m in members if m is not owner][0]
        self.assertEqual(other.metric(WIPED_BELOW), 0)
        self.assertEqual(other.stop(), 0)
        shutil.rmtree(os.path.join(other.data_dir, "storage"))
        other.start()
        # It may have held copies of every ledger made so far: it says so,
        # and answers errors rather than "absent" for them.
        self.assertGreater(other.metric(WIPED_BELOW), 0)
        more, errors = produce(owner, "wiped", [f"x{i}" for i in range(100)])
        self.assertEqual(errors, [])
        self.assertEqual(consume_all(owner, "wiped", 200), acked + more)
        # A second restart is not another wipe.
        self.assertEqual(other.stop(), 0)
        other.start()
        wiped = other.metric(WIPED_BELOW)
        self.assertGreater(wiped, 0)


if __name__ == "__main__":
    unittest.main()
