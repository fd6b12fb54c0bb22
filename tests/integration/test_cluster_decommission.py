"""Storage nodes leaving and roles, in clusters of real magnetar processes:
a storage node decommissioned with `magnetar admin cluster decommission`
gives up every ledger copy it holds (those of the ledger being written too)
and can then be stopped with nothing lost and nothing under-replicated; a
member with only the storage role serves no client and owns no bundle, and
one with only the broker role keeps no copy; copies spread across the zones
members declare. Every wait is bounded.
"""
import json
import signal
import subprocess
import unittest

from cluster_harness import ClusterCase, nodes_of, request, wait_for
from magnetar_harness import BIN
from test_cluster_storage import STORED, consume_all, kafka_owner, other_holders, produce

UNDERREPLICATED = "magnetar_replication_underreplicated_fragments"
MOVED = "magnetar_replication_moved_copies_total"


def admin_cli(member, *args):
    """`magnetar admin --json ...` against `member`: (exit code, parsed stdout or text)."""
    r = subprocess.run([BIN, "admin", "--url", member.http_url, "--json", *args], capture_output=True, text=True,
                       timeout=60)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, r.stdout + r.stderr


def decommission_status(member, node_id):
    status, answer = request(member, "GET", f"/admin/v2/cluster/nodes/{node_id}/decommission")
    if status != 200:
        raise ValueError(f"decommission status answered {status}: {answer}")
    return answer


class DecommissionTest(ClusterCase):
    prefix = "magnetar-decommission-"

    def start(self, count, extra=(), per_member=None):
        """Founds a cluster of `count` members (member i also gets per_member[i]) and waits until each sees all live."""
        per_member = per_member or [()] * count
        self.cluster.add(extra=list(extra) + list(per_member[0]))
        for i in range(1, count):
            self.cluster.add(join=self.cluster.seed(), extra=list(extra) + list(per_member[i]))
        members = list(self.cluster.members)
        for node in members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(node)) == count,
                     f"{node.http_url} seeing {count} live members", timeout=60)
        return members

    def test_a_decommissioned_storage_node_drains_and_can_be_stopped_losing_nothing(self):
        members = self.start(4)
        owner = kafka_owner(members, "drains")
        first, errors = produce(owner, "drains", [f"a{i}" for i in range(200)])
        self.assertEqual(errors, [])
        # Unloading closes that ledger; the next produce opens another: the
        # node that leaves holds a copy of the one being written.
        status, answer = request(owner, "PUT", "/admin/v2/persistent/public/default/drains/unload")
        self.assertIn(status, (200, 204), answer)
        before = {m.id: m.metric(STORED) for m in members}
        second, errors = produce(owner, "drains", [f"b{i}" for i in range(200)])
        self.assertEqual(errors, [])
        leaving = other_holders(members, owner, before)[0]
        survivors = [m for m in members if m is not leaving]
        self.assertEqual(decommission_status(owner, leaving.id)["state"], "active")
        self.assertGreater(decommission_status(owner, leaving.id)["fragments"], 0)

        # Bad requests get clear errors and change nothing.
        self.assertEqual(request(owner, "POST", "/admin/v2/cluster/nodes/abc/decommission")[0], 400)
        self.assertEqual(request(owner, "POST", "/admin/v2/cluster/nodes/12345/decommission")[0], 404)
        code, out = admin_cli(owner, "cluster", "decommission", str(leaving.id))
        self.assertEqual(code, 0, out)
        self.assertIn(out["state"], ("draining", "drained"))
        # Writing goes on while it drains.
        third, errors = produce(owner, "drains", [f"c{i}" for i in range(200)])
        self.assertEqual(errors, [])

        def drained():
            s = decommission_status(survivors[0], leaving.id)
            return s if s["state"] == "drained" else None
        done = wait_for(drained, "the decommissioned node drained", timeout=120, interval=0.5)
        self.assertEqual(done["fragments"], 0)
        self.assertEqual(done["ledgers"], 0)
        self.assertGreaterEqual(owner.metric(MOVED), 1, "the open ledger's copy was not moved by its writer")
        listed = {n["id"]: n for n in nodes_of(owner)}
        self.assertEqual(listed[leaving.id]["storageState"], "decommissioned")
        self.assertEqual(listed[owner.id]["storageState"], "active")
        code, out = admin_cli(owner, "cluster", "decommission-status", str(leaving.id))
        self.assertEqual((code, out["state"]), (0, "drained"), out)

        # Stopped for good: nothing under-replicated, every acknowledged message reads back.
        leaving.stop(signal.SIGKILL)
        after = decommission_status(owner, leaving.id)
        self.assertEqual(after["fragments"], 0)
        self.assertEqual(after["underReplicatedFragments"], 0)
        fourth, errors = produce(owner, "drains", [f"d{i}" for i in range(100)])
        self.assertEqual(errors, [])
        self.assertEqual(consume_all(owner, "drains", 700, timeout=90), first + second + third + fourth)
        # The healer's own count, on the leader, comes to 0 too (it runs every 10 s).
        wait_for(lambda: max(m.metric(UNDERREPLICATED) for m in survivors) == 0,
                 "no under-replicated fragment on the healer", timeout=60, interval=1)

    def test_storage_only_members_serve_no_client_and_a_broker_only_member_keeps_no_copy(self):
        storage = ("--roles", "storage")
        members = self.start(4, per_member=[storage, storage, storage, ("--roles", "broker")])
        keepers, broker = members[:3], members[3]
        for m in keepers:
            self.assertEqual((m.ports["pulsar"], m.ports["kafka"], m.ports["amqp"]), (0, 0, 0),
                             "a storage-only member opened a client listener")
        self.assertNotEqual(broker.ports["kafka"], 0)
        # Every bundle goes to the one member that serves topics, whoever is asked.
        self.assertIs(kafka_owner(members, "roles"), broker)
        before = {m.id: m.metric(STORED) for m in members}
        acked, errors = produce(broker, "roles", [f"r{i}" for i in range(200)])
        self.assertEqual(errors, [])
        self.assertEqual(len(acked), 200)
        for m in keepers:
            wait_for(lambda: m.metric(STORED) > before[m.id], f"{m.http_url} storing copies")
        self.assertEqual(broker.metric(STORED), before[broker.id], "the broker-only member stored a copy")
        self.assertEqual(consume_all(broker, "roles", 200), acked)
        for n in nodes_of(broker):
            if n["id"] != broker.id:
                self.assertEqual(n["ownedBundles"], [], f"storage-only member {n['id']} owns bundles")
            self.assertEqual(n["roles"], ["broker"] if n["id"] == broker.id else ["storage"])
        # Two of the three storage members may leave; the last may not.
        for m in keepers[:2]:
            self.assertEqual(request(broker, "POST", f"/admin/v2/cluster/nodes/{m.id}/decommission")[0], 200)
        status, answer = request(broker, "POST", f"/admin/v2/cluster/nodes/{keepers[2].id}/decommission")
        self.assertEqual(status, 412, answer)
        self.assertIn("last storage node", json.dumps(answer))
        self.assertEqual(decommission_status(broker, keepers[2].id)["state"], "active")

    def test_copies_spread_across_zones(self):
        zones = [("--zone", "a"), ("--zone", "a"), ("--zone", "b"), ("--zone", "c")]
        members = self.start(4, per_member=zones)
        listed = {n["id"]: n.get("zone") for n in nodes_of(members[0])}
        self.assertEqual([listed[m.id] for m in members], ["a", "a", "b", "c"])
        owner = kafka_owner(members, "zoned")
        before = {m.id: m.metric(STORED) for m in members}
        acked, errors = produce(owner, "zoned", [f"z{i}" for i in range(100)])
        self.assertEqual(errors, [])
        # Three copies on three zones: b and c hold one each, zone a one at most.
        holding = other_holders(members, owner, before) + [owner]
        self.assertIn(members[2], holding)
        self.assertIn(members[3], holding)
        self.assertFalse(members[0] in holding and members[1] in holding, "two copies in zone a")
        self.assertEqual(consume_all(owner, "zoned", 100), acked)


if __name__ == "__main__":
    unittest.main()
