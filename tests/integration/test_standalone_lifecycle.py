"""`magnetar standalone`: start, health, metrics, ports.json, clean shutdown."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from magnetar_harness import BIN, Node

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def parse_metrics(text):
    """Parses the Prometheus text format strictly enough to catch mistakes:
    every sample belongs to a family declared by # TYPE, values are numbers."""
    families, samples = {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in families, f"family {name} declared twice"
            families[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, f"not a valid sample line: {line!r}"
        name = m.group(1)
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in families or base in families, f"sample {name} has no # TYPE"
        samples[(name, m.group(2) or "")] = float(m.group(3))
    return families, samples


class LifecycleTest(unittest.TestCase):
    def test_health_metrics_and_ports_file(self):
        with Node() as node:
            status, body, _ = node.get("/admin/v2/brokers/health")
            self.assertEqual(status, 200)
            self.assertEqual(body, b"ok")

            with open(os.path.join(node.data_dir, "ports.json")) as f:
                ports = json.load(f)
            self.assertEqual(ports["http"], node.ports["http"])
            self.assertNotEqual(ports["http"], 0)

            status, body, headers = node.get("/metrics")
            self.assertEqual(status, 200)
            self.assertIn("text/plain", headers["Content-Type"])
            families, samples = parse_metrics(body.decode())
            for family in ("process_resident_memory_bytes", "process_cpu_seconds_total",
                           "magnetar_uptime_seconds", "magnetar_reactor_loop_lag_seconds",
                           "process_start_time_seconds"):
                self.assertIn(family, families)
            self.assertGreater(samples[("process_resident_memory_bytes", "")], 1 << 20)
            self.assertGreater(samples[("magnetar_uptime_seconds", "")], 0)
            lag = [k for k in samples if k[0] == "magnetar_reactor_loop_lag_seconds"]
            self.assertGreaterEqual(len(lag), 1)
            self.assertEqual(families["process_cpu_seconds_total"], "counter")

            # The banner names the URL a user should open.
            time.sleep(0.05)
            self.assertIn(f"http://127.0.0.1:{node.ports['http']}/admin/v2", node.read_log())

    def test_sigterm_and_sigint_exit_zero(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with Node() as node:
                self.assertEqual(node.get("/admin/v2/brokers/health")[0], 200)
                self.assertEqual(node.stop(sig), 0, node.read_log())
                self.assertIn("stopped cleanly", node.read_log())

    def test_shutdown_with_open_connections(self):
        with Node() as node:
            port = node.ports["http"]
            idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(5)]
            # One connection mid-request: headers sent, body never finished.
            partial = socket.create_connection(("127.0.0.1", port), timeout=5)
            partial.sendall(b"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc")
            time.sleep(0.1)
            self.assertEqual(node.stop(signal.SIGTERM), 0, node.read_log())
            for s in idle + [partial]:
                s.settimeout(5)
                try:
                    self.assertEqual(s.recv(1024), b"")  # closed by the server
                except ConnectionResetError:
                    pass
                s.close()

    def test_second_process_on_same_data_dir_is_refused(self):
        with Node() as first:
            result = subprocess.run(
                [BIN, "standalone", "--data-dir", first.data_dir, "--http-port", "0"],
                capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 1)
            self.assertIn("in use by another magnetar process", result.stderr)
            # The first one is unharmed.
            self.assertEqual(first.get("/admin/v2/brokers/health")[0], 200)

    def test_busy_port_is_a_clear_error(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            port = taken.getsockname()[1]
            with tempfile.TemporaryDirectory() as d:
                result = subprocess.run([BIN, "standalone", "--data-dir", d, "--http-port", str(port)],
                                        capture_output=True, text=True, timeout=30)
            self.assertEqual(result.returncode, 1)
            self.assertIn("Address already in use", result.stderr)
            self.assertIn(str(port), result.stderr)

    def test_restart_on_same_data_dir(self):
        with tempfile.TemporaryDirectory() as d:
            for _ in range(2):
                node = Node(data_dir=d)
                try:
                    node.start()
                    self.assertEqual(node.get("/admin/v2/brokers/health")[0], 200)
                    self.assertEqual(node.stop(), 0)
                finally:
                    node.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
