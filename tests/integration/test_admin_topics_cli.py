"""`magnetar admin topics ...` verbs that need the broker: the real CLI
binary against a real server."""
import json
import subprocess
import unittest

from magnetar_harness import BIN, Node

CLI_TIMEOUT_S = 30
TOPIC = "persistent://public/default/cli-topic"


class AdminTopicsCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.node = Node().start()

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        assert code == 0, f"exit code {code}"

    def cli(self, *args):
        cmd = [BIN, "admin", "--url", self.node.http_url, *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args):
        code, out, err = self.cli(*args)
        self.assertEqual(code, 0, (args, out, err))
        return out

    def json(self, *args):
        return json.loads(self.ok("--json", *args))

    def refused(self, status, *args):
        code, out, err = self.cli(*args)
        self.assertEqual(code, 1, (args, out, err))
        self.assertIn(f"HTTP {status}", err)
        return err

    def test_topic_lifecycle(self):
        self.assertIn("Created " + TOPIC, self.ok("topics", "create", TOPIC))
        self.refused(409, "topics", "create", TOPIC)
        self.assertIn(TOPIC, self.json("topics", "list", "public/default"))
        self.assertIn("Created subscription audit",
                      self.ok("topics", "create-subscription", TOPIC, "-s", "audit", "-m", "earliest"))
        self.ok("topics", "create-subscription", TOPIC, "--subscription", "other")
        self.assertEqual(sorted(self.json("topics", "subscriptions", TOPIC)), ["audit", "other"])

        human = self.ok("topics", "stats", TOPIC)
        self.assertRegex(human, r"msgInCounter\s+0")
        self.assertRegex(human, r"audit\s+None\s+0\s+0")
        stats = self.json("topics", "stats", TOPIC)
        self.assertEqual(stats["subscriptions"]["audit"]["msgBacklog"], 0)
        internal = self.json("topics", "internal-stats", TOPIC)
        self.assertIn("audit", internal["cursors"])

        self.ok("topics", "skip-all", TOPIC, "-s", "audit")
        self.ok("topics", "skip", TOPIC, "-s", "audit", "-n", "3")
        self.ok("topics", "reset-cursor", TOPIC, "-s", "audit", "-t", "10m")
        self.ok("topics", "reset-cursor", TOPIC, "-s", "audit", "--timestamp", "0")
        ledger = internal["ledgers"][0]["ledgerId"]
        self.ok("topics", "reset-cursor", TOPIC, "-s", "audit", "-m", f"{ledger}:0")
        self.refused(404, "topics", "reset-cursor", TOPIC, "-s", "audit", "-m", f"{ledger + 1000}:0")
        self.ok("topics", "expire-messages", TOPIC, "-s", "audit", "-t", "1h")
        self.ok("topics", "expire-messages", TOPIC, "--all-subscriptions", "-t", "30s")
        self.refused(404, "topics", "peek-messages", TOPIC, "-s", "audit", "-n", "2")
        self.refused(404, "topics", "skip-all", TOPIC, "-s", "missing")

        self.assertIn("Deleted subscription other", self.ok("topics", "unsubscribe", TOPIC, "-s", "other"))
        self.refused(404, "topics", "unsubscribe", TOPIC, "-s", "other")
        self.assertIn("Unloaded", self.ok("topics", "unload", TOPIC))
        self.assertEqual(self.json("topics", "subscriptions", TOPIC), ["audit"])

        lookup = self.json("topics", "lookup", TOPIC)
        self.assertTrue(lookup["httpUrl"].endswith(":%d" % self.node.ports["http"]), lookup)

        self.assertIn("Deleted " + TOPIC, self.ok("topics", "delete", TOPIC))
        self.refused(404, "topics", "stats", TOPIC)
        self.assertNotIn(TOPIC, self.json("topics", "list", "public/default"))

    def test_partitioned_stats_and_usage_errors(self):
        self.ok("topics", "create-partitioned-topic", "cli-parted", "-p", "2")
        stats = self.json("topics", "partitioned-stats", "cli-parted")
        self.assertEqual(stats["metadata"]["partitions"], 2)
        self.assertRegex(self.ok("topics", "partitioned-stats", "cli-parted"), r"msgInCounter\s+0")
        # Usage errors exit 2 and send nothing.
        for args in (["topics", "create", "bad//name"],
                     ["topics", "reset-cursor", TOPIC, "-s", "x"],
                     ["topics", "reset-cursor", TOPIC, "-s", "x", "-m", "12"],
                     ["topics", "expire-messages", TOPIC, "-t", "1h"],
                     ["topics", "peek-messages", TOPIC, "-s", "x", "-n", "0"]):
            code, out, err = self.cli(*args)
            self.assertEqual(code, 2, (args, out, err))


if __name__ == "__main__":
    unittest.main()
