"""Geo-replication into a cluster of several members: a standalone node
(cluster a) replicates to a three-member cluster (cluster b) registered by
one member's URL, and the replicator finds the member that serves each
topic by a Pulsar lookup there, whichever member that is. Every wait is
bounded."""
import unittest

from cluster_harness import ClusterCase, kafka_consume_all, nodes_of, request, wait_for
from test_geo_replication import NS, Site, produce


class ReplicationIntoAClusterTest(ClusterCase):
    prefix = "magnetar-geo-cluster-"

    def setUp(self):
        super().setUp()
        self.a = None

    def tearDown(self):
        if self.a is not None:
            self.a.node.close()
        super().tearDown()

    def test_a_topic_served_by_another_member_than_the_registered_one_is_replicated(self):
        members = self.add_members(3, extra=("--cluster-name", "b"))
        for node in members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(node)) == 3, f"{node.http_url} seeing 3 live members",
                     timeout=60)
        self.a = Site("a").start()
        registered = members[0]
        # Each side knows the other; public/default replicates to both.
        self.a.call("PUT", "/admin/v2/clusters/b",
                    {"serviceUrl": registered.http_url,
                     "brokerServiceUrl": f"pulsar://127.0.0.1:{registered.ports['pulsar']}"})
        status, answer = request(registered, "PUT", "/admin/v2/clusters/a",
                                 {"serviceUrl": f"http://127.0.0.1:{self.a.http_port}",
                                  "brokerServiceUrl": f"pulsar://127.0.0.1:{self.a.pulsar_port}"})
        self.assertIn(status, (200, 204), answer)
        for call in (lambda m, p, b: self.a.call(m, p, b),
                     lambda m, p, b: request(registered, m, p, b)):
            call("POST", "/admin/v2/tenants/public", {"allowedClusters": ["a", "b"]})
            call("POST", f"/admin/v2/namespaces/{NS}/replication", ["a", "b"])

        # A topic the registered member does not serve.
        def elsewhere():
            for i in range(100):
                status, lookup = request(registered, "GET", f"/lookup/v2/topic/persistent/{NS}/far-{i}")
                if status == 200 and not lookup["brokerUrl"].endswith(f":{registered.ports['pulsar']}"):
                    return f"far-{i}"
            return None
        topic = wait_for(elsewhere, "a topic served by another member")
        payloads = [f"east-{i}".encode() for i in range(50)]
        produce(self.a, topic, payloads, window=10)
        got = kafka_consume_all(members, topic, 50, timeout=60)
        self.assertEqual(got, [p.decode() for p in payloads])
        replication = self.a.replication(topic, "b")
        self.assertTrue(replication["connected"], replication)


if __name__ == "__main__":
    unittest.main()
