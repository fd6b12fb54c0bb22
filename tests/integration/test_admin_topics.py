"""Topics the broker serves, over real HTTP against the real binary:
create / delete / list, stats, partitioned-stats, internalStats,
subscriptions and their cursors, unload, lookup, per-topic metrics, and
what survives a restart."""
import json
import shutil
import subprocess
import tempfile
import unittest

from magnetar_harness import Node, NodeTestCase

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
P = "/admin/v2/persistent/public/default"
NP = "/admin/v2/non-persistent/public/default"


class AdminTopicsTest(NodeTestCase):

    def call(self, method, path, body=None):
        if body is not None and not isinstance(body, (str, bytes, dict, list)):
            body = json.dumps(body)
        elif isinstance(body, str) and not body.startswith("{"):
            body = json.dumps(body)  # a JSON string
        status, data, headers = self.node.http(method, path, body)
        return status, data

    def expect(self, method, path, status, body=None):
        got, data = self.call(method, path, body)
        self.assertEqual(got, status, (method, path, data))
        if status >= 400:
            self.assertIn("reason", json.loads(data), data)
        return json.loads(data) if data and got == 200 else None

    def test_create_list_delete(self):
        self.expect("PUT", P + "/t-basic", 204)
        self.expect("PUT", P + "/t-basic", 409)
        self.assertIn("persistent://public/default/t-basic", self.expect("GET", P, 200))
        # A partitioned topic's name is taken, and so are its partitions.
        self.expect("PUT", P + "/t-parted/partitions", 204, 2)
        self.expect("PUT", P + "/t-parted", 409)
        self.expect("PUT", P + "/t-parted-partition-1", 409)
        self.expect("PUT", P + "/t-lone-partition-3", 412)
        # Missing namespace / tenant, invalid names.
        self.expect("PUT", "/admin/v2/persistent/public/nope/t", 404)
        self.expect("PUT", "/admin/v2/persistent/nope/default/t", 404)
        self.expect("PUT", "/admin/v2/persistent/public/default/bad%00name", 400)
        self.expect("PUT", "/admin/v2/persistent/bad%20tenant/default/t", 400)
        self.expect("DELETE", P + "/t-basic", 204)
        self.expect("DELETE", P + "/t-basic", 404)
        self.assertNotIn("persistent://public/default/t-basic", self.expect("GET", P, 200))
        self.expect("DELETE", P + "/t-parted", 409)  # use /partitions for that
        self.expect("DELETE", P + "/never-created", 404)
        # Deleting takes the topic's policy overrides with it.
        self.expect("PUT", P + "/t-basic", 204)
        self.expect("POST", P + "/t-basic/messageTTL", 204, 60)
        self.expect("DELETE", P + "/t-basic", 204)
        self.expect("PUT", P + "/t-basic", 204)
        self.assertIsNone(self.expect("GET", P + "/t-basic/messageTTL", 200))

    def test_max_topics_per_namespace(self):
        self.expect("PUT", "/admin/v2/namespaces/public/capped", 204)
        self.expect("POST", "/admin/v2/namespaces/public/capped/maxTopicsPerNamespace", 204, 2)
        base = "/admin/v2/persistent/public/capped"
        self.expect("PUT", base + "/one", 204)
        self.expect("PUT", "/admin/v2/non-persistent/public/capped/two", 204)
        self.expect("PUT", base + "/three", 412)
        self.expect("DELETE", base + "/one", 204)
        self.expect("PUT", base + "/three", 204)

    def test_non_persistent_topics(self):
        self.expect("PUT", NP + "/np-t", 204)
        self.expect("PUT", NP + "/np-t", 409)
        self.assertIn("non-persistent://public/default/np-t", self.expect("GET", NP, 200))
        self.assertNotIn("non-persistent://public/default/np-t", self.expect("GET", P, 200))
        self.assertIn("non-persistent://public/default/np-t",
                      self.expect("GET", "/admin/v2/namespaces/public/default/topics", 200))
        stats = self.expect("GET", NP + "/np-t/stats", 200)
        self.assertEqual(stats["msgInCounter"], 0)
        self.expect("PUT", NP + "/np-t/subscription/s", 204)
        self.expect("POST", NP + "/np-t/subscription/s/resetcursor/0", 405)
        self.expect("DELETE", NP + "/np-t", 204)
        self.expect("GET", NP + "/np-t/stats", 404)

    def test_stats_and_internal_stats(self):
        self.expect("PUT", P + "/t-stats", 204)
        self.expect("PUT", P + "/t-stats/subscription/sub-a", 204)
        stats = self.expect("GET", P + "/t-stats/stats", 200)
        for field in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "msgInCounter",
                      "bytesInCounter", "msgOutCounter", "bytesOutCounter", "averageMsgSize", "storageSize",
                      "backlogSize", "publishers", "subscriptions"):
            self.assertIn(field, stats)
        self.assertEqual(stats["msgInCounter"], 0)
        self.assertEqual(stats["publishers"], [])
        sub = stats["subscriptions"]["sub-a"]
        self.assertEqual(sub["msgBacklog"], 0)
        self.assertEqual(sub["consumers"], [])
        self.assertEqual(sub["type"], "None")
        self.assertTrue(sub["isDurable"])
        for field in ("msgRateOut", "msgThroughputOut", "msgOutCounter", "bytesOutCounter", "unackedMessages"):
            self.assertIn(field, sub)

        internal = self.expect("GET", P + "/t-stats/internalStats", 200)
        for field in ("entriesAddedCounter", "numberOfEntries", "totalSize", "currentLedgerEntries",
                      "lastConfirmedEntry", "ledgers", "cursors"):
            self.assertIn(field, internal)
        self.assertEqual(internal["numberOfEntries"], 0)
        self.assertGreaterEqual(len(internal["ledgers"]), 1)
        self.assertEqual(set(internal["ledgers"][0]), {"ledgerId", "entries", "size", "offloaded",
                                                        "underReplicated"})
        cursor = internal["cursors"]["sub-a"]
        self.assertRegex(cursor["markDeletePosition"], r"^\d+:-?\d+$")
        self.assertEqual(cursor["individuallyDeletedMessages"], "[]")
        self.assertIn("messagesConsumedCounter", cursor)
        self.assertIn("readPosition", cursor)

        self.expect("GET", P + "/no-such-topic/stats", 404)
        self.expect("GET", P + "/no-such-topic/internalStats", 404)
        # Asking for stats never creates the topic.
        self.assertNotIn("persistent://public/default/no-such-topic", self.expect("GET", P, 200))

    def test_partitioned_stats(self):
        self.expect("PUT", P + "/t-ps/partitions", 204, 3)
        self.expect("PUT", P + "/t-ps-partition-0/subscription/s", 204)
        self.expect("PUT", P + "/t-ps-partition-2/subscription/s", 204)
        stats = self.expect("GET", P + "/t-ps/partitioned-stats", 200)
        self.assertEqual(stats["metadata"], {"partitions": 3})
        self.assertEqual(sorted(stats["partitions"]),
                         [f"persistent://public/default/t-ps-partition-{i}" for i in range(3)])
        self.assertEqual(list(stats["subscriptions"]), ["s"])
        self.assertEqual(stats["msgInCounter"], 0)
        brief = self.expect("GET", P + "/t-ps/partitioned-stats?perPartition=false", 200)
        self.assertEqual(brief["partitions"], {})
        self.expect("GET", P + "/t-ps/stats", 404)  # the partitioned topic itself is not a topic
        self.expect("GET", P + "/t-ps-partition-1/stats", 200)
        self.expect("GET", P + "/not-parted/partitioned-stats", 404)

    def test_subscriptions(self):
        t = P + "/t-subs"
        self.expect("GET", t + "/subscriptions", 404)
        self.expect("PUT", t, 204)
        self.assertEqual(self.expect("GET", t + "/subscriptions", 200), [])
        self.expect("PUT", t + "/subscription/s1", 204)
        self.expect("PUT", t + "/subscription/s1", 409)
        self.expect("PUT", t + "/subscription/s2?messageId=earliest", 204)
        self.expect("PUT", t + "/subscription/s3", 204, "latest")
        self.expect("PUT", t + "/subscription/s4", 204, {"ledgerId": -1, "entryId": -1})
        self.expect("PUT", t + "/subscription/s5?messageId=sideways", 400)
        self.expect("PUT", t + "/subscription/s5", 400, "{not json")
        self.assertEqual(sorted(self.expect("GET", t + "/subscriptions", 200)), ["s1", "s2", "s3", "s4"])

        self.expect("POST", t + "/subscription/s1/skip_all", 204)
        self.expect("POST", t + "/subscription/s1/skip/5", 204)
        self.expect("POST", t + "/subscription/s1/skip/-1", 400)
        self.expect("POST", t + "/subscription/s1/skip/x", 400)
        self.expect("POST", t + "/subscription/s1/resetcursor/0", 204)
        self.expect("POST", t + "/subscription/s1/resetcursor/soon", 400)
        self.expect("POST", t + "/subscription/s1/expireMessages/10", 204)
        self.expect("POST", t + "/all_subscription/expireMessages/10", 204)
        self.expect("POST", t + "/all_subscription/expireMessages/-3", 400)
        self.expect("GET", t + "/subscription/s1/position/1", 404)  # nothing to peek
        self.expect("GET", t + "/subscription/s1/position/0", 412)
        for missing in ("/subscription/zz/skip_all", "/subscription/zz/skip/1", "/subscription/zz/resetcursor/0",
                        "/subscription/zz/expireMessages/1"):
            self.expect("POST", t + missing, 404)
        self.expect("GET", t + "/subscription/zz/position/1", 404)
        stats = self.expect("GET", t + "/stats", 200)
        self.assertEqual(stats["subscriptions"]["s1"]["msgBacklog"], 0)

        self.expect("DELETE", t + "/subscription/s2", 204)
        self.expect("DELETE", t + "/subscription/s2", 404)
        self.expect("DELETE", t + "/subscription/s3?force=true", 204)
        self.assertEqual(sorted(self.expect("GET", t + "/subscriptions", 200)), ["s1", "s4"])

    def test_unload_keeps_the_topic(self):
        t = P + "/t-unload"
        self.expect("PUT", t + "/unload", 404)
        self.expect("PUT", t, 204)
        self.expect("PUT", t + "/subscription/kept", 204)
        self.expect("PUT", t + "/unload", 204)
        self.expect("PUT", t + "/unload", 204)
        self.assertEqual(self.expect("GET", t + "/subscriptions", 200), ["kept"])

    def test_lookup(self):
        got = self.expect("GET", "/lookup/v2/topic/persistent/public/default/anything", 200)
        self.assertRegex(got["httpUrl"], r"^http://[^:]+:%d$" % self.node.ports["http"])
        for field in ("brokerUrl", "brokerUrlTls", "httpUrlTls", "nativeUrl"):
            self.assertIn(field, got)
        self.expect("GET", "/lookup/v2/topic/persistent/public/nope/anything", 404)
        self.expect("GET", "/lookup/v2/topic/persistent/bad%20t/default/x", 400)
        self.expect("GET", "/lookup/v2/topic/non-persistent/public/default/anything", 200)

    def test_topic_metrics(self):
        self.expect("PUT", P + "/t-metrics", 204)
        self.expect("PUT", P + "/t-metrics/subscription/m", 204)
        status, body, headers = self.node.get("/metrics")
        self.assertEqual(status, 200)
        text = body.decode()
        labels = 'cluster="standalone",namespace="public/default",topic="persistent://public/default/t-metrics"'
        for family in ("pulsar_rate_in", "pulsar_rate_out", "pulsar_throughput_in", "pulsar_throughput_out",
                       "pulsar_in_messages_total", "pulsar_out_messages_total", "pulsar_msg_backlog",
                       "pulsar_storage_size", "pulsar_producers_count", "pulsar_consumers_count"):
            self.assertIn(f"{family}{{{labels}}} 0", text)
        self.assertIn(f"pulsar_subscriptions_count{{{labels}}} 1", text)
        check = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
        self.assertEqual(check.returncode, 0, (check.stdout, check.stderr))


class TopicsAcrossRestartTest(unittest.TestCase):
    def test_topics_and_subscriptions_survive_a_restart(self):
        data_dir = tempfile.mkdtemp(prefix="magnetar-topics-")
        try:
            with Node(data_dir=data_dir, keep_data=True) as node:
                for path, status in ((P + "/durable", 204), (P + "/durable/subscription/audit", 204),
                                     (P + "/durable/subscription/gone", 204), (NP + "/fleeting", 204)):
                    self.assertEqual(node.http("PUT", path)[0], status, path)
                self.assertEqual(node.http("DELETE", P + "/durable/subscription/gone")[0], 204)
                self.assertEqual(node.http("PUT", P + "/dropped")[0], 204)
                self.assertEqual(node.http("DELETE", P + "/dropped")[0], 204)
                self.assertEqual(node.stop(), 0)
            with Node(data_dir=data_dir, keep_data=True) as node:
                listed = json.loads(node.get(P)[1])
                self.assertIn("persistent://public/default/durable", listed)
                self.assertNotIn("persistent://public/default/dropped", listed)
                self.assertEqual(json.loads(node.get(P + "/durable/subscriptions")[1]), ["audit"])
                self.assertEqual(node.http("PUT", P + "/durable")[0], 409)
                # Non-persistent topics keep nothing across a restart.
                self.assertNotIn("non-persistent://public/default/fleeting", json.loads(node.get(NP)[1]))
                stats = json.loads(node.get(P + "/durable/stats")[1])
                self.assertEqual(list(stats["subscriptions"]), ["audit"])
                self.assertEqual(node.stop(), 0)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
