"""`magnetar admin ...`: the real CLI binary against a real server."""
import json
import socket
import subprocess
import unittest

from magnetar_harness import BIN, Node, NodeTestCase

CLI_TIMEOUT_S = 30


class AdminCliTest(NodeTestCase):
    def cli(self, *args, url=None):
        """(exit code, stdout, stderr) of `magnetar admin --url <node> args...`."""
        cmd = [BIN, "admin", "--url", url or self.node.http_url, *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args):
        code, out, err = self.cli(*args)
        self.assertEqual(code, 0, (args, out, err))
        return out

    def json(self, *args):
        return json.loads(self.ok("--json", *args))

    def test_tenants(self):
        self.assertIn("public", self.ok("tenants", "list").split())
        self.assertEqual(self.json("tenants", "list")[:2], ["public", "pulsar"])
        self.assertIn("Created tenant cli-t", self.ok("tenants", "create", "cli-t", "--admin-roles", "ops,dev"))
        self.assertEqual(self.json("tenants", "get", "cli-t"),
                         {"adminRoles": ["dev", "ops"], "allowedClusters": ["standalone"]})
        human = self.ok("tenants", "get", "cli-t")
        self.assertRegex(human, r"adminRoles\s+dev,ops")
        self.assertRegex(human, r"allowedClusters\s+standalone")

        code, out, err = self.cli("tenants", "create", "cli-t")
        self.assertEqual(code, 1)
        self.assertIn("already exists", err)
        self.assertIn("409", err)

        self.ok("tenants", "update", "cli-t", "--admin-roles", "ops", "--allowed-clusters", "standalone")
        self.assertEqual(self.json("tenants", "get", "cli-t")["adminRoles"], ["ops"])
        self.ok("tenants", "delete", "cli-t")
        code, _, err = self.cli("tenants", "get", "cli-t")
        self.assertEqual(code, 1)
        self.assertIn("does not exist", err)

        code, _, err = self.cli("tenants", "create", "bad name")
        self.assertEqual(code, 1)
        self.assertIn("412", err)  # as Pulsar answers an invalid tenant name
        self.assertIn("invalid tenant name", err)

    def test_healthcheck(self):
        self.assertEqual(self.ok("brokers", "healthcheck").strip(), "ok")

    def test_clusters(self):
        self.assertEqual(self.json("clusters", "list"), ["standalone"])
        self.ok("clusters", "create", "cli-east", "--service-url", "http://east:8080")
        self.assertEqual(self.json("clusters", "get", "cli-east")["serviceUrl"], "http://east:8080")
        self.ok("clusters", "delete", "cli-east")

    def test_namespaces_and_policies(self):
        self.ok("tenants", "create", "cli-ns")
        self.ok("namespaces", "create", "cli-ns/app")
        self.assertEqual(self.json("namespaces", "list", "cli-ns"), ["cli-ns/app"])

        self.ok("namespaces", "set-retention", "cli-ns/app", "--time", "3h", "--size", "2G")
        self.assertEqual(self.json("namespaces", "get-retention", "cli-ns/app"),
                         {"retentionTimeInMinutes": 180, "retentionSizeInMB": 2048})
        self.ok("namespaces", "set-message-ttl", "cli-ns/app", "--ttl", "10m")
        self.assertEqual(self.json("namespaces", "get-message-ttl", "cli-ns/app"), 600)
        self.ok("namespaces", "set-backlog-quota", "cli-ns/app", "--limit", "1G", "--policy", "producer_exception")
        quota = self.json("namespaces", "get-backlog-quotas", "cli-ns/app")["destination_storage"]
        self.assertEqual((quota["limitSize"], quota["policy"]), (1 << 30, "producer_exception"))
        self.ok("namespaces", "set-persistence", "cli-ns/app", "-e", "3", "-w", "3", "-a", "2",
                "--fsync-mode", "never")
        persistence = self.json("namespaces", "get-persistence", "cli-ns/app")
        self.assertEqual((persistence["bookkeeperEnsemble"], persistence["bookkeeperAckQuorum"],
                          persistence["fsyncMode"]), (3, 2, "never"))
        self.ok("namespaces", "set-deduplication", "cli-ns/app", "--enable")
        self.assertIs(self.json("namespaces", "get-deduplication", "cli-ns/app"), True)
        self.ok("namespaces", "grant-permission", "cli-ns/app", "--role", "app", "--actions", "produce,consume")
        self.assertEqual(self.json("namespaces", "permissions", "cli-ns/app"), {"app": ["consume", "produce"]})
        self.ok("namespaces", "set-publish-rate", "cli-ns/app", "-m", "100")
        self.assertEqual(self.json("namespaces", "get-publish-rate", "cli-ns/app")["publishThrottlingRateInMsg"], 100)
        self.ok("namespaces", "set-dispatch-rate", "cli-ns/app", "--msg-dispatch-rate", "50")
        self.assertEqual(self.json("namespaces", "get-dispatch-rate", "cli-ns/app")["dispatchThrottlingRateInMsg"], 50)
        self.ok("namespaces", "set-max-producers-per-topic", "cli-ns/app", "-p", "4")
        self.assertEqual(self.json("namespaces", "get-max-producers-per-topic", "cli-ns/app"), 4)
        self.ok("namespaces", "set-auto-topic-creation", "cli-ns/app", "--disable")
        self.assertEqual(self.json("namespaces", "get-auto-topic-creation", "cli-ns/app")["allowAutoTopicCreation"],
                         False)
        self.assertRegex(self.ok("namespaces", "policies", "cli-ns/app"), r"message_ttl_in_seconds\s+600")

        # A refused value exits 1 with the server's reason and changes nothing.
        code, _, err = self.cli("namespaces", "set-persistence", "cli-ns/app", "-e", "1", "-w", "2", "-a", "1")
        self.assertEqual(code, 1)
        self.assertIn("400", err)
        self.assertEqual(self.json("namespaces", "get-persistence", "cli-ns/app")["bookkeeperEnsemble"], 3)

        self.ok("namespaces", "remove-message-ttl", "cli-ns/app")
        self.assertIsNone(self.json("namespaces", "get-message-ttl", "cli-ns/app"))
        self.assertEqual(self.ok("namespaces", "get-message-ttl", "cli-ns/app").strip(), "-")
        self.ok("namespaces", "revoke-permission", "cli-ns/app", "--role", "app")

        code, _, err = self.cli("tenants", "delete", "cli-ns")
        self.assertEqual(code, 1)
        self.assertIn("412", err)
        self.ok("namespaces", "delete", "cli-ns/app")
        self.ok("tenants", "delete", "cli-ns")

    def test_partitioned_topics(self):
        self.ok("topics", "create-partitioned-topic", "persistent://public/default/cli-orders", "-p", "3")
        self.assertEqual(self.json("topics", "get-partitioned-topic-metadata", "cli-orders"), {"partitions": 3})
        self.ok("topics", "update-partitioned-topic", "public/default/cli-orders", "-p", "4")
        self.assertIn("persistent://public/default/cli-orders",
                      self.json("topics", "list-partitioned-topics", "public/default"))
        listed = self.ok("topics", "list", "public/default").split()
        self.assertIn("persistent://public/default/cli-orders-partition-3", listed)
        self.ok("topics", "delete-partitioned-topic", "cli-orders")
        code, _, err = self.cli("topics", "delete-partitioned-topic", "cli-orders")
        self.assertEqual(code, 1)
        self.assertIn("404", err)

    def test_topic_policy_overrides(self):
        self.ok("topics", "create-partitioned-topic", "cli-tp", "-p", "1")
        self.ok("namespaces", "set-message-ttl", "public/default", "-t", "2h")
        self.assertIsNone(self.json("topics", "get-message-ttl", "cli-tp"))
        self.assertEqual(self.json("topics", "get-message-ttl", "cli-tp", "--applied"), 7200)
        self.ok("topics", "set-message-ttl", "cli-tp", "-t", "90")
        self.assertEqual(self.json("topics", "get-message-ttl", "cli-tp", "--applied"), 90)
        self.ok("topics", "set-max-producers", "persistent://public/default/cli-tp", "-p", "3")
        self.assertEqual(self.json("topics", "get-max-producers", "cli-tp"), 3)
        self.ok("topics", "set-retention", "cli-tp", "-t", "1h", "-s", "-1")
        self.assertEqual(self.json("topics", "get-retention", "cli-tp"),
                         {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1})
        self.ok("topics", "set-deduplication", "cli-tp", "--disable")
        self.assertIs(self.json("topics", "get-deduplication", "cli-tp"), False)
        self.ok("topics", "set-backlog-quota", "cli-tp", "-l", "1M", "-p", "producer_exception")
        self.assertEqual(self.json("topics", "get-backlog-quotas", "cli-tp")["destination_storage"]["limitSize"],
                         1 << 20)
        self.ok("topics", "remove-message-ttl", "cli-tp")
        self.assertIsNone(self.json("topics", "get-message-ttl", "cli-tp"))
        code, _, err = self.cli("topics", "set-message-ttl", "no-such-topic", "-t", "1")
        self.assertEqual(code, 1)
        self.assertIn("404", err)
        self.ok("namespaces", "remove-message-ttl", "public/default")
        self.ok("topics", "delete-partitioned-topic", "cli-tp")

    def test_usage_errors_exit_2(self):
        code, _, err = self.cli("namespaces", "get-retention", "not-a-namespace")
        self.assertEqual(code, 2, err)
        self.assertIn("tenant/namespace", err)
        code, _, err = self.cli("namespaces", "set-retention", "public/default", "--time", "3x", "--size", "1G")
        self.assertEqual(code, 2, err)
        code, _, _ = self.cli("tenants", "list", url="ftp://nowhere")
        self.assertEqual(code, 2)
        code, _, _ = self.cli("tenants", "frobnicate")
        self.assertEqual(code, 2)

    def test_unreachable_server_exits_1(self):
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        code, out, err = self.cli("tenants", "list", url=f"http://127.0.0.1:{port}")
        self.assertEqual(code, 1)
        self.assertIn("cannot reach", err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    unittest.main()
