"""Geo-replication across a cut link: two standalone nodes, each its own
cluster, each in a network namespace of its own on one bridge
(tests/utils/cluster_harness.py, Network). While the link between them is
cut (packets dropped silently, as by a broken cable) both sides take
messages; once it heals, everything produced on either side during the cut
is on the other, exactly once. Needs root: it fails, loudly, when it cannot
make the network. Every wait is bounded.
"""
import atexit
import unittest

from cluster_harness import Member, Network
from test_geo_replication import Site, link, payloads_of, produce, read_all, wait_until



class NetnsSite(Site):
    def __init__(self, name, network, index):
        self.name = name
        self.host = network.address(index)
        self.pulsar_port = 6650
        self.http_port = 8080
        self.node = Member("--cluster-name", name, "--bind", self.host, "--pulsar-port", "6650",
                           "--http-port", "8080", "--housekeeping-secs", "1",
                           host=self.host, netns=network.namespace(index))


class CutLinkTest(unittest.TestCase):
    def setUp(self):
        self.network = Network(2)
        atexit.register(self.network.teardown)
        self.network.setup()
        self.a = NetnsSite("a", self.network, 0).start()
        self.b = NetnsSite("b", self.network, 1).start()
        link(self.a, self.b)

    def tearDown(self):
        for s in (self.a, self.b):
            s.node.stop()
            s.node.close()
        self.network.teardown()

    def caught_up(self, site, topic, remote):
        r = site.replication(topic, remote)
        return r is not None and r["connected"] and r["replicationBacklog"] == 0

    def test_what_both_sides_took_during_a_cut_arrives_once_after_it_heals(self):
        before_a = [b"a-before-%d" % i for i in range(20)]
        before_b = [b"b-before-%d" % i for i in range(20)]
        produce(self.a, "cut", before_a)
        produce(self.b, "cut", before_b)
        wait_until(self, lambda: self.caught_up(self.a, "cut", "b"), "a replicated to b")
        wait_until(self, lambda: self.caught_up(self.b, "cut", "a"), "b replicated to a")

        self.network.cut([0], [1])
        during_a = [b"a-during-%d" % i for i in range(300)]
        during_b = [b"b-during-%d" % i for i in range(300)]
        produce(self.a, "cut", during_a)
        produce(self.b, "cut", during_b)
        # The replicators notice the silent link and say so.
        wait_until(self, lambda: not self.a.replication("cut", "b")["connected"], "a's link down", timeout=60)
        wait_until(self, lambda: not self.b.replication("cut", "a")["connected"], "b's link down", timeout=60)
        self.assertEqual(self.a.replication("cut", "b")["replicationBacklog"], len(during_a))
        self.assertEqual(self.b.replication("cut", "a")["replicationBacklog"], len(during_b))

        self.network.heal()
        wait_until(self, lambda: self.caught_up(self.a, "cut", "b"), "a caught up after the heal", timeout=90)
        wait_until(self, lambda: self.caught_up(self.b, "cut", "a"), "b caught up after the heal", timeout=90)
        everything = sorted(before_a + before_b + during_a + during_b)
        self.assertEqual(payloads_of(read_all(self.a, "cut", len(everything))), everything)
        self.assertEqual(payloads_of(read_all(self.b, "cut", len(everything))), everything)


if __name__ == "__main__":
    unittest.main()
