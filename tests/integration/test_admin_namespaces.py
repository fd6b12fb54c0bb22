"""REST admin API over real HTTP: namespaces, every namespace policy,
partitioned-topic metadata, their error codes and restart."""
import shutil
import unittest

from magnetar_harness import call_json as call, Node, NodeTestCase

NS = "/admin/v2/namespaces"

# (sub-path, value to POST, what GET answers afterwards)
POLICIES = [
    ("retention", {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024},
     {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024}),
    ("messageTTL", 3600, 3600),
    ("persistence",
     {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
      "managedLedgerMaxMarkDeleteRate": 1.5, "fsyncMode": "interval", "fsyncIntervalMs": 20},
     {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2,
      "managedLedgerMaxMarkDeleteRate": 1.5, "fsyncMode": "interval", "fsyncIntervalMs": 20}),
    ("deduplication", True, True),
    ("publishRate", {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": 1048576},
     {"publishThrottlingRateInMsg": 100, "publishThrottlingRateInByte": 1048576}),
    ("dispatchRate",
     {"dispatchThrottlingRateInMsg": 50, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 2,
      "relativeToPublishRate": True},
     {"dispatchThrottlingRateInMsg": 50, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 2,
      "relativeToPublishRate": True}),
    ("subscriptionDispatchRate", {"dispatchThrottlingRateInMsg": 10},
     {"dispatchThrottlingRateInMsg": 10, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1,
      "relativeToPublishRate": False}),
    ("maxProducersPerTopic", 5, 5),
    ("maxConsumersPerTopic", 6, 6),
    ("maxConsumersPerSubscription", 7, 7),
    ("maxSubscriptionsPerTopic", 8, 8),
    ("maxTopicsPerNamespace", 0, 0),
    ("subscriptionExpirationTime", 120, 120),
    ("maxUnackedMessagesPerConsumer", 1000, 1000),
    ("maxUnackedMessagesPerSubscription", 0, 0),
    ("autoTopicCreation", {"allowAutoTopicCreation": False},
     {"allowAutoTopicCreation": False, "topicType": "non-partitioned"}),
]

# (sub-path, bad body): each must be a 400 that changes nothing.
BAD_POLICIES = [
    ("retention", {"retentionTimeInMinutes": -5, "retentionSizeInMB": 10}),
    ("retention", {"retentionTimeInMinutes": 0, "retentionSizeInMB": 10}),
    ("retention", {"retentionTimeInMinutes": "60", "retentionSizeInMB": 10}),
    ("messageTTL", "abc"),
    ("messageTTL", -1),
    ("messageTTL", 1.5),
    ("messageTTL", 1 << 40),
    ("persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1}),
    ("persistence", {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1,
                     "fsyncMode": "sometimes"}),
    ("deduplication", "yes"),
    ("publishRate", {"publishThrottlingRateInMsg": -7}),
    ("dispatchRate", {"ratePeriodInSecond": 0}),
    ("dispatchRate", {"relativeToPublishRate": "true"}),
    ("maxProducersPerTopic", -3),
    ("autoTopicCreation", {"allowAutoTopicCreation": True, "topicType": "partitioned"}),
    ("autoTopicCreation", {"allowAutoTopicCreation": True, "topicType": "sharded"}),
]




class AdminNamespacesTest(NodeTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        assert call(cls.node, "PUT", "/admin/v2/tenants/acme", {"allowedClusters": ["standalone"]})[0] == 204

    def call(self, method, path, body=None):
        return call(self.node, method, path, body)

    def assert_error(self, expected, method, path, body=None):
        status, reply = self.call(method, path, body)
        self.assertEqual(status, expected, (method, path, body, reply))
        self.assertIsInstance(reply, dict, reply)
        self.assertTrue(reply.get("reason"), reply)

    def fresh_namespace(self, name):
        self.assertEqual(self.call("PUT", f"{NS}/acme/{name}"), (204, None))
        return f"{NS}/acme/{name}"

    def test_namespace_lifecycle(self):
        path = self.fresh_namespace("life")
        self.assertIn("acme/life", self.call("GET", f"{NS}/acme")[1])
        self.assert_error(409, "PUT", path)
        status, policies = self.call("GET", path)
        self.assertEqual(status, 200)
        self.assertEqual(policies["replication_clusters"], ["standalone"])
        for field in ("auth_policies", "backlog_quota_map", "retention_policies", "message_ttl_in_seconds",
                      "persistence", "deduplicationEnabled", "bundles"):
            self.assertIn(field, policies)
        self.assertEqual(self.call("GET", f"{path}/topics"), (200, []))
        self.assertEqual(self.call("DELETE", path), (204, None))
        self.assert_error(404, "DELETE", path)
        self.assert_error(404, "GET", path)
        self.assertNotIn("acme/life", self.call("GET", f"{NS}/acme")[1])

    def test_namespace_errors(self):
        self.assert_error(404, "PUT", f"{NS}/ghost/ns")
        self.assert_error(404, "GET", f"{NS}/ghost")
        self.assert_error(412, "PUT", f"{NS}/acme/bad%20name")  # as Pulsar: the name is not valid
        self.assert_error(400, "PUT", f"{NS}/acme/x", "{broken")
        self.assert_error(400, "PUT", f"{NS}/acme/x", {"retention_policies": {"retentionTimeInMinutes": -9}})
        self.assert_error(412, "PUT", f"{NS}/acme/x", {"replication_clusters": ["elsewhere"]})
        self.assert_error(404, "GET", f"{NS}/acme/x")
        self.assertNotIn("acme/x", self.call("GET", f"{NS}/acme")[1])

    def test_create_with_policies_body(self):
        body = {"retention_policies": {"retentionTimeInMinutes": 10, "retentionSizeInMB": 20},
                "message_ttl_in_seconds": 30,
                "auth_policies": {"namespace_auth": {"app": ["produce"]}},
                "backlog_quota_map": {"destination_storage": {"limitSize": 100, "policy": "producer_exception"}}}
        self.assertEqual(self.call("PUT", f"{NS}/acme/withbody", body), (204, None))
        status, p = self.call("GET", f"{NS}/acme/withbody")
        self.assertEqual(status, 200)
        self.assertEqual(p["retention_policies"], {"retentionTimeInMinutes": 10, "retentionSizeInMB": 20})
        self.assertEqual(p["message_ttl_in_seconds"], 30)
        self.assertEqual(p["auth_policies"]["namespace_auth"], {"app": ["produce"]})
        self.assertEqual(p["backlog_quota_map"]["destination_storage"]["policy"], "producer_exception")

    def test_every_policy_set_get_remove(self):
        path = self.fresh_namespace("policies")
        for sub, value, expected in POLICIES:
            with self.subTest(policy=sub):
                self.assertEqual(self.call("GET", f"{path}/{sub}"), (200, None))
                self.assertEqual(self.call("POST", f"{path}/{sub}", value), (204, None))
                self.assertEqual(self.call("GET", f"{path}/{sub}"), (200, expected))
                # Setting the same value again is fine and changes nothing.
                self.assertEqual(self.call("POST", f"{path}/{sub}", value), (204, None))
                self.assertEqual(self.call("GET", f"{path}/{sub}"), (200, expected))
        status, all_policies = self.call("GET", path)
        self.assertEqual(all_policies["message_ttl_in_seconds"], 3600)
        self.assertEqual(all_policies["deduplicationEnabled"], True)
        self.assertEqual(all_policies["max_producers_per_topic"], 5)
        self.assertEqual(all_policies["subscription_expiration_time_minutes"], 120)
        self.assertEqual(all_policies["publishMaxMessageRate"]["standalone"]["publishThrottlingRateInMsg"], 100)
        for sub, _, _ in POLICIES:
            with self.subTest(remove=sub):
                self.assertEqual(self.call("DELETE", f"{path}/{sub}"), (204, None))
                self.assertEqual(self.call("GET", f"{path}/{sub}"), (200, None))

    def test_bad_policy_values_change_nothing(self):
        path = self.fresh_namespace("strict")
        self.assertEqual(self.call("POST", f"{path}/messageTTL", 60), (204, None))
        before = self.call("GET", path)[1]
        for sub, body in BAD_POLICIES:
            with self.subTest(policy=sub, body=body):
                self.assert_error(400, "POST", f"{path}/{sub}", body)
        for sub in ("retention", "messageTTL", "persistence", "publishRate"):
            self.assert_error(400, "POST", f"{path}/{sub}", "{nope")
            self.assert_error(400, "POST", f"{path}/{sub}", "")
        # Deeply nested or unterminated JSON is refused without harm.
        self.assert_error(400, "POST", f"{path}/retention", "[" * 100000 + "]" * 100000)
        self.assert_error(400, "POST", f"{path}/retention", "{\"a\":" * 100000)
        self.assertEqual(self.call("GET", path)[1], before)
        self.assert_error(404, "POST", f"{NS}/acme/missing/messageTTL", 10)
        self.assert_error(404, "GET", f"{NS}/acme/missing/retention")
        self.assert_error(400, "GET", f"{NS}/acme/bad%20ns/retention")

    def test_backlog_quotas(self):
        path = self.fresh_namespace("quota")
        self.assertEqual(self.call("GET", f"{path}/backlogQuotaMap"), (200, {}))
        self.assertEqual(self.call("POST", f"{path}/backlogQuota",
                                   {"limitSize": 1 << 30, "limitTime": -1, "policy": "consumer_backlog_eviction"}),
                         (204, None))
        self.assertEqual(self.call("POST", f"{path}/backlogQuota?backlogQuotaType=message_age",
                                   {"limitTime": 3600, "policy": "producer_request_hold"}), (204, None))
        status, quotas = self.call("GET", f"{path}/backlogQuotaMap")
        self.assertEqual(status, 200)
        self.assertEqual(quotas["destination_storage"]["limitSize"], 1 << 30)
        self.assertEqual(quotas["destination_storage"]["policy"], "consumer_backlog_eviction")
        self.assertEqual(quotas["message_age"]["limitTime"], 3600)
        self.assert_error(400, "POST", f"{path}/backlogQuota", {"limitSize": 1, "policy": "drop"})
        self.assert_error(400, "POST", f"{path}/backlogQuota?backlogQuotaType=other", {"limitSize": 1})
        self.assertEqual(self.call("DELETE", f"{path}/backlogQuota?backlogQuotaType=message_age"), (204, None))
        self.assertEqual(list(self.call("GET", f"{path}/backlogQuotaMap")[1]), ["destination_storage"])

    def test_permissions(self):
        path = self.fresh_namespace("perms")
        self.assertEqual(self.call("GET", f"{path}/permissions"), (200, {}))
        self.assertEqual(self.call("POST", f"{path}/permissions/app", ["produce", "consume"]), (204, None))
        self.assertEqual(self.call("POST", f"{path}/permissions/reader", ["consume"]), (204, None))
        self.assertEqual(self.call("GET", f"{path}/permissions"),
                         (200, {"app": ["consume", "produce"], "reader": ["consume"]}))
        self.assert_error(400, "POST", f"{path}/permissions/app", ["fly"])
        self.assert_error(400, "POST", f"{path}/permissions/app", "produce")
        self.assertEqual(self.call("DELETE", f"{path}/permissions/app"), (204, None))
        self.assert_error(404, "DELETE", f"{path}/permissions/app")
        self.assertEqual(self.call("GET", f"{path}/permissions"), (200, {"reader": ["consume"]}))

    def test_replication_clusters(self):
        path = self.fresh_namespace("repl")
        self.assertEqual(self.call("GET", f"{path}/replication"), (200, ["standalone"]))
        self.assert_error(412, "POST", f"{path}/replication", ["mars"])
        self.assert_error(400, "POST", f"{path}/replication", "standalone")
        self.assertEqual(self.call("POST", f"{path}/replication", ["standalone"]), (204, None))

    def test_partitioned_topics(self):
        self.fresh_namespace("topics")
        base = "/admin/v2/persistent/acme/topics"
        self.assertEqual(self.call("PUT", f"{base}/orders/partitions", 3), (204, None))
        self.assert_error(409, "PUT", f"{base}/orders/partitions", 3)
        self.assertEqual(self.call("GET", f"{base}/orders/partitions"), (200, {"partitions": 3}))
        self.assertEqual(self.call("GET", f"{base}/plain/partitions"), (200, {"partitions": 0}))
        self.assertEqual(self.call("GET", f"{base}/partitioned"), (200, ["persistent://acme/topics/orders"]))
        self.assertEqual(self.call("GET", base),
                         (200, [f"persistent://acme/topics/orders-partition-{i}" for i in range(3)]))
        self.assertEqual(self.call("GET", f"{NS}/acme/topics/topics")[1],
                         [f"persistent://acme/topics/orders-partition-{i}" for i in range(3)])

        self.assertEqual(self.call("POST", f"{base}/orders/partitions", 5), (204, None))
        self.assert_error(400, "POST", f"{base}/orders/partitions", 2)
        self.assertEqual(self.call("GET", f"{base}/orders/partitions"), (200, {"partitions": 5}))

        for bad in (0, -1, "x", "three", 1.5, 100000):
            self.assert_error(400, "PUT", f"{base}/bad/partitions", bad)
        self.assert_error(400, "PUT", f"{base}/x-partition-1/partitions", 2)
        self.assert_error(404, "PUT", "/admin/v2/persistent/acme/nowhere/t/partitions", 2)
        self.assert_error(400, "PUT", "/admin/v2/persistent/acme/topics/bad%2Fname/partitions", 2)
        self.assertEqual(self.call("GET", f"{base}/partitioned"), (200, ["persistent://acme/topics/orders"]))

        # A namespace with topics cannot be deleted.
        self.assert_error(412, "DELETE", f"{NS}/acme/topics")
        self.assertEqual(self.call("DELETE", f"{base}/orders/partitions"), (204, None))
        self.assert_error(404, "DELETE", f"{base}/orders/partitions")
        self.assertEqual(self.call("GET", base), (200, []))

        np = "/admin/v2/non-persistent/acme/topics"
        self.assertEqual(self.call("PUT", f"{np}/ticks/partitions", 2), (204, None))
        self.assertEqual(self.call("GET", f"{np}/partitioned"), (200, ["non-persistent://acme/topics/ticks"]))
        self.assertEqual(self.call("GET", f"{base}/partitioned"), (200, []))
        self.assertEqual(self.call("DELETE", f"{np}/ticks/partitions"), (204, None))
        self.assertEqual(self.call("DELETE", f"{NS}/acme/topics"), (204, None))


class TopicPoliciesTest(NodeTestCase):
    """Topic-level overrides on /admin/v2/{domain}/{t}/{ns}/{topic}/<policy>."""

    # (sub-path, value, what GET answers)
    TOPIC_POLICIES = [
        ("retention", {"retentionTimeInMinutes": 5, "retentionSizeInMB": 6},
         {"retentionTimeInMinutes": 5, "retentionSizeInMB": 6}),
        ("messageTTL", 30, 30),
        ("deduplicationEnabled", False, False),
        ("maxProducers", 2, 2),
        ("maxConsumers", 3, 3),
        ("maxConsumersPerSubscription", 4, 4),
        ("maxSubscriptionsPerTopic", 5, 5),
        ("publishRate", {"publishThrottlingRateInMsg": 9},
         {"publishThrottlingRateInMsg": 9, "publishThrottlingRateInByte": -1}),
        ("dispatchRate", {"dispatchThrottlingRateInMsg": 8},
         {"dispatchThrottlingRateInMsg": 8, "dispatchThrottlingRateInByte": -1, "ratePeriodInSecond": 1,
          "relativeToPublishRate": False}),
        ("persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1},
         {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1,
          "managedLedgerMaxMarkDeleteRate": 0, "fsyncIntervalMs": 0}),  # no fsyncMode: the node's
    ]

    def call(self, method, path, body=None):
        return call(self.node, method, path, body)

    def test_overrides_set_get_remove(self):
        base = "/admin/v2/persistent/public/default/tp"
        self.assertEqual(self.call("PUT", f"{base}/partitions", 2), (204, None))
        for sub, value, expected in self.TOPIC_POLICIES:
            with self.subTest(policy=sub):
                self.assertEqual(self.call("GET", f"{base}/{sub}"), (200, None))
                self.assertEqual(self.call("POST", f"{base}/{sub}", value), (204, None))
                self.assertEqual(self.call("GET", f"{base}/{sub}"), (200, expected))
                self.assertEqual(self.call("DELETE", f"{base}/{sub}"), (204, None))
                self.assertEqual(self.call("GET", f"{base}/{sub}"), (200, None))
        # pulsar-admin sends a topic's TTL as a query parameter.
        self.assertEqual(self.call("POST", f"{base}/messageTTL?messageTTL=45"), (204, None))
        self.assertEqual(self.call("GET", f"{base}/messageTTL"), (200, 45))
        self.assertEqual(self.call("POST", f"{base}/messageTTL?messageTTL=abc")[0], 400)
        self.assertEqual(self.call("GET", f"{base}/messageTTL"), (200, 45))
        self.assertEqual(self.call("DELETE", f"{base}/messageTTL"), (204, None))
        # A partition has its own overrides.
        self.assertEqual(self.call("POST", f"{base}-partition-1/messageTTL", 11), (204, None))
        self.assertEqual(self.call("GET", f"{base}-partition-1/messageTTL"), (200, 11))
        self.assertEqual(self.call("GET", f"{base}/messageTTL"), (200, None))
        self.assertEqual(self.call("DELETE", f"{base}/partitions"), (204, None))

    def test_applied_falls_back_to_the_namespace(self):
        base = "/admin/v2/persistent/public/default/applied"
        self.assertEqual(self.call("PUT", f"{base}/partitions", 1), (204, None))
        self.assertEqual(self.call("POST", f"{NS}/public/default/messageTTL", 900), (204, None))
        self.assertEqual(self.call("GET", f"{base}/messageTTL"), (200, None))
        self.assertEqual(self.call("GET", f"{base}/messageTTL?applied=true"), (200, 900))
        self.assertEqual(self.call("POST", f"{base}/messageTTL", 60), (204, None))
        self.assertEqual(self.call("GET", f"{base}/messageTTL?applied=true"), (200, 60))
        self.assertEqual(self.call("POST", f"{NS}/public/default/backlogQuota", {"limitSize": 10}), (204, None))
        status, quotas = self.call("GET", f"{base}/backlogQuotaMap?applied=true")
        self.assertEqual((status, quotas["destination_storage"]["limitSize"]), (200, 10))
        self.assertEqual(self.call("GET", f"{base}/backlogQuotaMap"), (200, {}))
        self.assertEqual(self.call("DELETE", f"{NS}/public/default/messageTTL"), (204, None))
        self.assertEqual(self.call("DELETE", f"{NS}/public/default/backlogQuota"), (204, None))
        self.assertEqual(self.call("DELETE", f"{base}/partitions"), (204, None))

    def test_errors(self):
        missing = "/admin/v2/persistent/public/default/nothing-here"
        for method, body in (("GET", None), ("POST", 5), ("DELETE", None)):
            status, reply = self.call(method, f"{missing}/messageTTL", body)
            self.assertEqual(status, 404, reply)
            self.assertIn("reason", reply)
        base = "/admin/v2/non-persistent/public/default/np"
        self.assertEqual(self.call("PUT", f"{base}/partitions", 1), (204, None))
        self.assertEqual(self.call("GET", f"{base}/maxProducers"), (200, None))
        for sub, bad in (("maxProducers", -1), ("messageTTL", "x"), ("retention", {"retentionSizeInMB": "1"}),
                         ("persistence", {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 3})):
            status, reply = self.call("POST", f"{base}/{sub}", bad)
            self.assertEqual(status, 400, (sub, reply))
            self.assertEqual(self.call("GET", f"{base}/{sub}"), (200, None))
        self.assertEqual(self.call("GET", "/admin/v2/persistent/public/nons/t/retention")[0], 404)
        self.assertEqual(self.call("GET", "/admin/v2/persistent/public/default/bad%20topic%2F/retention")[0], 400)
        self.assertEqual(self.call("DELETE", f"{base}/partitions"), (204, None))


class NamespaceRestartTest(unittest.TestCase):
    def test_policies_and_partitions_survive_restart(self):
        node = Node(keep_data=True).start()
        data_dir = node.data_dir
        try:
            self.assertEqual(call(node, "POST", f"{NS}/public/default/retention",
                                  {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})[0], 204)
            self.assertEqual(call(node, "POST", f"{NS}/public/default/permissions/app", ["consume"])[0], 204)
            self.assertEqual(call(node, "PUT", "/admin/v2/persistent/public/default/kept/partitions", 4)[0], 204)
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()
        again = Node(data_dir=data_dir).start()
        try:
            self.assertEqual(call(again, "GET", f"{NS}/public/default/retention"),
                             (200, {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}))
            self.assertEqual(call(again, "GET", f"{NS}/public/default/permissions"), (200, {"app": ["consume"]}))
            self.assertEqual(call(again, "GET", "/admin/v2/persistent/public/default/kept/partitions"),
                             (200, {"partitions": 4}))
            self.assertEqual(again.stop(), 0)
        finally:
            again.close()
            shutil.rmtree(data_dir, ignore_errors=True)

    def test_split_bundles_survive_restart_and_go_with_their_namespace(self):
        node = Node(keep_data=True).start()
        data_dir = node.data_dir
        ns = f"{NS}/public/splits"
        try:
            self.assertEqual(call(node, "PUT", ns, {})[0], 204)
            for i in range(12):
                self.assertEqual(call(node, "PUT", f"/admin/v2/persistent/public/splits/t{i}")[0], 204)
            # Halves, at the median of the topics, at given hashes.
            self.assertEqual(call(node, "PUT", f"{ns}/0x00000000_0x40000000/split")[0], 204)
            status, reply = call(node, "PUT", f"{ns}/0x80000000_0xc0000000/split"
                                 "?splitAlgorithmName=specified_positions_divide", [0x90000000, 0xa0000000])
            self.assertEqual(status, 204, reply)
            status, bundles = call(node, "GET", f"{ns}/bundles")
            self.assertEqual(bundles, {"numBundles": 7, "boundaries": [
                "0x00000000", "0x20000000", "0x40000000", "0x80000000", "0x90000000", "0xa0000000", "0xc0000000",
                "0xffffffff"]})
            before = {i: call(node, "GET", f"/admin/v2/persistent/public/splits/t{i}/bundle")[1] for i in range(12)}
            owners = call(node, "GET", f"{ns}/bundle-owners")[1]
            self.assertEqual([b["bundle"] for b in owners],
                             [f"{a}_{b}" for a, b in zip(bundles["boundaries"], bundles["boundaries"][1:])])
            # Bad requests change nothing.
            for path, body, code in ((f"{ns}/0x00000000_0x40000000/split", None, 404),
                                     (f"{ns}/0x40000000_0x80000000/split?splitAlgorithmName=specified_positions_divide",
                                      "[\"x\"]", 400),
                                     (f"{ns}/0x40000000_0x80000000/split?splitAlgorithmName=specified_positions_divide",
                                      [0x10], 400),
                                     (f"{ns}/0x40000000_0x80000000/split?splitAlgorithmName=guess", None, 400),
                                     (f"{ns}/0x40000000/split", None, 400),
                                     (f"{NS}/public/nowhere/0x40000000_0x80000000/split", None, 404)):
                status, reply = call(node, "PUT", path, body)
                self.assertEqual(status, code, (path, reply))
                self.assertTrue(reply.get("reason"), reply)
            self.assertEqual(call(node, "GET", f"{ns}/bundles")[1], bundles)
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()
        again = Node(data_dir=data_dir, keep_data=True).start()
        try:
            self.assertEqual(call(again, "GET", f"{ns}/bundles")[1], bundles)
            self.assertEqual(call(again, "GET", ns)[1]["bundles"], bundles)
            after = {i: call(again, "GET", f"/admin/v2/persistent/public/splits/t{i}/bundle")[1] for i in range(12)}
            self.assertEqual(after, before)
            # topic_count_equally_divide: the topics of the bundle, half each side.
            # (Twelve topics in seven bundles: one bundle holds two or more.)
            crowded = max(set(after.values()), key=lambda b: list(after.values()).count(b))
            status, reply = call(again, "PUT", f"{ns}/{crowded}/split?splitAlgorithmName=topic_count_equally_divide")
            self.assertEqual(status, 204, reply)
            moved = [i for i in range(12) if after[i] == crowded]
            pieces = {call(again, "GET", f"/admin/v2/persistent/public/splits/t{i}/bundle")[1] for i in moved}
            self.assertEqual(len(pieces), 2, pieces)
            # A namespace deleted and made again starts with four bundles.
            for i in range(12):
                self.assertEqual(call(again, "DELETE", f"/admin/v2/persistent/public/splits/t{i}")[0], 204)
            self.assertEqual(call(again, "DELETE", ns)[0], 204)
            self.assertEqual(call(again, "PUT", ns, {})[0], 204)
            self.assertEqual(call(again, "GET", f"{ns}/bundles")[1]["numBundles"], 4)
            self.assertEqual(again.stop(), 0)
        finally:
            again.close()
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
