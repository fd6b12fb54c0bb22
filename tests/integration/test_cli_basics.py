"""The command line: help, version, usage errors, config files."""
import json
import os
import subprocess
import tempfile
import unittest

from magnetar_harness import BIN, Node


def run(*args, timeout=30):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class CliBasicsTest(unittest.TestCase):
    def test_help_has_examples(self):
        r = run("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("standalone", r.stdout)
        self.assertIn("Examples:", r.stdout)
        r = run("standalone", "--help")
        self.assertEqual(r.returncode, 0)
        for flag in ("--data-dir", "--bind", "--advertised-address", "--http-port", "--pulsar-port",
                     "--kafka-port", "--amqp-port", "--cluster-name", "--log-level", "--config",
                     "--fsync", "--fsync-interval-ms", "--ephemeral", "--print-env", "--ports-file"):
            self.assertIn(flag, r.stdout)

    def test_version(self):
        r = run("version")
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^magnetar \d+\.\d+\.\d+")
        r = run("version", "--json")
        self.assertEqual(r.returncode, 0)
        self.assertIn("version", json.loads(r.stdout))

    def test_usage_errors_exit_2_with_one_line(self):
        for args in (["standalone", "--no-such-flag"], ["standalone", "--http-port", "70000"],
                     ["standalone", "--http-port", "eighty"], ["standalone", "--log-level", "loud"],
                     ["standalone", "--fsync", "sometimes"],
                     ["no-such-command"]):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            lines = [l for l in r.stderr.splitlines() if l.strip()]
            self.assertEqual(len(lines), 1, (args, r.stderr))
            self.assertTrue(lines[0].startswith("magnetar: "), lines[0])

    def test_config_file(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "magnetar.toml")
            with open(cfg, "w") as f:
                f.write('cluster-name = "from-file"\nlog-level = "warn"\n')
            node = Node("--config", cfg, data_dir=d)
            try:
                node.start()
                self.assertEqual(node.get("/admin/v2/brokers/health")[0], 200)
                self.assertEqual(node.stop(), 0)
                self.assertIn("cluster 'from-file'", node.read_log())
                self.assertNotIn(" info ", node.read_log())  # log level from the file
            finally:
                node.close()

    def test_command_line_overrides_config_file(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "magnetar.toml")
            with open(cfg, "w") as f:
                f.write('[standalone]\ncluster-name = "from-file"\n')
            node = Node("--config", cfg, "--cluster-name", "from-flag", data_dir=d)
            try:
                node.start()
                self.assertEqual(node.stop(), 0)
                self.assertIn("cluster 'from-flag'", node.read_log())
            finally:
                node.close()

    def test_unknown_setting_in_config_file(self):
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "magnetar.toml")
            with open(cfg, "w") as f:
                f.write('data-dir = "x"\nhttp-prot = 8081\n')
            r = run("standalone", "--config", cfg)
            self.assertEqual(r.returncode, 2)
            self.assertIn("unknown setting 'http-prot'", r.stderr)

    def test_missing_config_file(self):
        r = run("standalone", "--config", "/nonexistent/magnetar.toml")
        self.assertEqual(r.returncode, 2)
        self.assertIn("magnetar.toml", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
