"""/metrics is valid Prometheus text, checked by Prometheus' own promtool,
after the admin API has exercised the metadata store."""
import json
import shutil
import subprocess
import unittest

from magnetar_harness import Node

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


class AdminMetricsTest(unittest.TestCase):
    def test_promtool_accepts_metrics(self):
        with Node() as node:
            # Successful and refused metadata writes, so every series has samples.
            self.assertEqual(node.http("PUT", "/admin/v2/tenants/metrics-t")[0], 204)
            self.assertEqual(node.http("PUT", "/admin/v2/tenants/metrics-t")[0], 409)
            self.assertEqual(node.http("PUT", "/admin/v2/namespaces/metrics-t/ns")[0], 204)
            status, body, headers = node.get("/metrics")
            self.assertEqual(status, 200)
            self.assertTrue(headers.get("Content-Type", "").startswith("text/plain"), headers)
            text = body.decode()
            for family in ("magnetar_metadata_writes_total", "magnetar_metadata_write_failures_total",
                           "magnetar_metadata_reads_total", "magnetar_metadata_write_latency_seconds_bucket"):
                self.assertIn(family, text)
            writes = [l for l in text.splitlines() if l.startswith("magnetar_metadata_writes_total")]
            self.assertGreaterEqual(float(writes[0].split()[-1]), 2)

            check = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, timeout=60)
            self.assertEqual(check.returncode, 0, (check.stdout, check.stderr))
            self.assertEqual(node.stop(), 0)


if __name__ == "__main__":
    unittest.main()
