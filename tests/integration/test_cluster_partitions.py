"""Network partitions between cluster members, each in a network namespace
of its own on one bridge (tests/utils/cluster_harness.py, Network): links
are cut by dropping packets where they arrive, both ways or one way; the
test process reaches every member throughout. Needs root: it fails, loudly,
when it cannot make the network. Every wait is bounded.
"""
import threading
import time
import unittest

from cluster_harness import (NetworkClusterCase, applied_index, create_tenant, leader_id, nodes_of, tenants_of,
                             wait_for)

# A write through a member that cannot reach a majority is answered (not
# acknowledged) within the store's 15 s retry deadline; this bounds the wait.
CUT_WRITE_TIMEOUT_S = 40.0


class Writes:
    """Tenants created through one member, one after another, each answer
    recorded: acknowledged (204), failed (an error answer) or unknown (no
    answer). Names are unique, so an acknowledged one must exist forever."""

    def __init__(self, node, prefix):
        self.node = node
        self.prefix = prefix
        self.acknowledged = []
        self.not_acknowledged = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.count = 0

    def one(self):
        name = f"{self.prefix}-{self.count}"
        self.count += 1
        try:
            status, answer = create_tenant(self.node, name, timeout=CUT_WRITE_TIMEOUT_S)
        except OSError as e:
            status, answer = 0, str(e)
        (self.acknowledged if status == 204 else self.not_acknowledged).append((name, status, answer))
        return status

    def run(self):
        while not self.stop.is_set():
            self.one()
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=CUT_WRITE_TIMEOUT_S + 10)

    def names(self):
        return [name for name, _, _ in self.acknowledged]


class PartitionTest(NetworkClusterCase):
    prefix = "magnetar-partitions-"

    def start(self, count):
        members = super().start(count)
        # Every member binds and advertises its own address, its cluster port included.
        for n in nodes_of(members[0]):
            member = self.cluster.member(n["id"])
            self.assertEqual(n["clusterAddress"], f"{member.host}:6660")
            self.assertTrue(n["httpUrl"].startswith(f"http://{member.host}:"), n)
        return members

    def index(self, node):
        return self.cluster.members.index(node)

    def assert_converged(self, acknowledged):
        """Every member follows one leader and has applied the log as far as
        the leader had when they agreed (reads go through the leader, so the
        applied index is what shows a member's own state caught up), and no
        acknowledged write is missing."""
        members = self.cluster.members
        leader = self.cluster.leader(timeout=60)
        target = applied_index(leader)
        for node in members:
            wait_for(lambda: applied_index(node) >= target, f"{node.http_url} applying up to {target}", timeout=60)
        for node in members:
            tenants = set(tenants_of(node))
            self.assertEqual([name for name in acknowledged if name not in tenants], [],
                             f"acknowledged writes lost, as {node.http_url} answers")
        return leader

    def test_the_majority_goes_on_and_the_minority_cannot_write(self):
        members = self.start(5)
        old_leader = self.cluster.leader()
        # The minority holds the leader and one follower; the majority the other three.
        minority = [old_leader, [n for n in members if n is not old_leader][0]]
        majority = [n for n in members if n not in minority]
        status, answer = create_tenant(majority[0], "before-split")
        self.assertEqual(status, 204, answer)

        self.network.cut([self.index(n) for n in minority], [self.index(n) for n in majority])
        new_leader = self.cluster.leader(among=majority, other_than=minority)
        self.assertIn(new_leader, majority)
        # The majority keeps writing, through each of its members; the
        # minority's writes are not acknowledged while it is cut off.
        minority_writes = [Writes(n, f"minority{i}") for i, n in enumerate(minority)]
        majority_writes = [Writes(n, f"majority{i}") for i, n in enumerate(majority)]
        for w in minority_writes:
            w.thread.start()
        for w in majority_writes:
            for _ in range(3):
                self.assertEqual(w.one(), 204, w.not_acknowledged)
        for w in minority_writes:
            wait_for(lambda: w.count >= 2 or w.stop.is_set(), "two writes through the minority answered",
                     timeout=2 * CUT_WRITE_TIMEOUT_S)
            w.stop.set()
        for w in minority_writes:
            w.thread.join(timeout=CUT_WRITE_TIMEOUT_S + 10)
            self.assertFalse(w.thread.is_alive())
            self.assertEqual(w.acknowledged, [], f"{w.node.http_url} acknowledged writes while in the minority")
            self.assertGreater(len(w.not_acknowledged), 0)
        # The old leader gave up leading: it cannot hear from a majority.
        wait_for(lambda: leader_id(old_leader) != old_leader.id, "the old leader stepping down")

        self.network.heal()
        acknowledged = ["before-split"] + [name for w in majority_writes for name in w.names()]
        self.assert_converged(acknowledged)
        # And the healed minority writes again.
        status, answer = create_tenant(minority[0], "after-heal", timeout=CUT_WRITE_TIMEOUT_S)
        self.assertEqual(status, 204, answer)

    def test_an_isolated_leader_is_replaced_and_steps_down(self):
        members = self.start(3)
        old_leader = self.cluster.leader()
        others = [n for n in members if n is not old_leader]
        with Writes(others[0], "steady") as steady:
            wait_for(lambda: len(steady.acknowledged) >= 3, "writes before the cut")
            self.network.cut([self.index(old_leader)], [self.index(n) for n in others])
            new_leader = self.cluster.leader(among=others, other_than=[old_leader])
            self.assertIn(new_leader, others)
            cut_at = len(steady.acknowledged)
            wait_for(lambda: len(steady.acknowledged) >= cut_at + 5, "writes acknowledged by the new leader",
                     timeout=CUT_WRITE_TIMEOUT_S)
        # Alone, the old leader does not go on believing it leads.
        wait_for(lambda: leader_id(old_leader) != old_leader.id, "the isolated leader stepping down")
        status, answer = create_tenant(old_leader, "isolated", timeout=CUT_WRITE_TIMEOUT_S)
        self.assertNotEqual(status, 204, answer)

        self.network.heal()
        self.assert_converged(steady.names())

    def test_a_link_cut_one_way_loses_no_acknowledged_write(self):
        members = self.start(3)
        leader = self.cluster.leader()
        follower, other = [n for n in members if n is not leader]
        # The leader's packets to one follower are dropped; that follower's
        # packets to the leader still arrive (so do the third member's, both
        # ways). The follower hears no heartbeat and will seek an election.
        with Writes(other, "one-way") as writes:
            wait_for(lambda: len(writes.acknowledged) >= 3, "writes before the cut")
            self.network.cut_one_way(self.index(leader), self.index(follower))
            cut_at = len(writes.acknowledged)
            time.sleep(6.0)  # past an election timeout and a lease
            # Through the member with both links whole, writes go on being
            # acknowledged, under whichever leader the cut leaves.
            wait_for(lambda: len(writes.acknowledged) >= cut_at + 5, "writes acknowledged with a link cut one way",
                     timeout=CUT_WRITE_TIMEOUT_S)
        self.network.heal()
        self.assert_converged(writes.names())


if __name__ == "__main__":
    unittest.main(verbosity=2)
