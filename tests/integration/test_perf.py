"""`magnetar perf` against a real node, and compressed batches through
`magnetar produce` / `magnetar consume`: the output is complete and sane (no
speed thresholds: the machine is shared)."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from magnetar_harness import BIN, NodeTestCase, call_json


def run(*args, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class PerfTest(NodeTestCase):
    def url(self):
        return f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"

    def check_percentiles(self, p):
        for key in ("p50", "p95", "p99", "p99_9", "max", "mean"):
            self.assertGreaterEqual(p[key], 0, key)
        self.assertLessEqual(p["p50"], p["p95"])
        self.assertLessEqual(p["p95"], p["p99"])
        self.assertLessEqual(p["p99"], p["p99_9"])
        self.assertLessEqual(p["p99_9"], p["max"] * 1.01)

    def test_end_to_end_at_a_rate_with_batching_and_compression(self):
        r = run("perf", "--url", self.url(), "--topic", "perf-rate", "-n", "2000", "--rate", "2000", "-s", "300",
                "--compression", "lz4", "--disk-dir", "", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        f = json.loads(r.stdout)
        self.assertEqual(f["messages"], 2000)
        self.assertEqual(f["received"], 2000)
        self.assertEqual(f["compression"], "lz4")
        self.assertGreater(f["produce_msgs_per_s"], 0)
        self.check_percentiles(f["publish_latency_ms"])
        self.check_percentiles(f["end_to_end_latency_ms"])
        self.assertEqual(f["publish_latency_ms"]["count"], 2000)
        self.assertEqual(f["end_to_end_latency_ms"]["count"], 2000)
        # The publish latency split: the sender's lag per message, the round
        # trip per batch (batches of at most 1000 here).
        self.check_percentiles(f["sender_lag_ms"])
        self.check_percentiles(f["round_trip_ms"])
        self.assertEqual(f["sender_lag_ms"]["count"], 2000)
        self.assertGreaterEqual(f["round_trip_ms"]["count"], 2)
        self.assertLessEqual(f["round_trip_ms"]["count"], 2000)
        # At a fixed rate 2000 messages take about a second: the run paced itself.
        self.assertGreater(f["produce_seconds"], 0.9)

    def test_produce_and_consume_roles_print_progress_and_a_summary(self):
        consumer = subprocess.Popen([BIN, "perf", "consume", "perf-roles", "--url", self.url(), "-n", "3000",
                                     "--time", "60", "--interval", "0.5"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # The consumer subscribes at the end of the topic: wait until it has.
            self.wait_for_subscription("perf-roles")
            r = run("perf", "produce", "perf-roles", "--url", self.url(), "-n", "3000", "--rate", "3000",
                    "--size", "100", "--batch", "false", "--interval", "0.5")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"\[\s*[\d.]+s\] produce\s+\d+ msg/s")
            self.assertIn("produced 3000", r.stdout)
            self.assertRegex(r.stdout, r"publish latency ms\s+p50 [\d.]+\s+p95 [\d.]+\s+p99 [\d.]+\s+p99\.9 [\d.]+\s+max [\d.]+")
            out, err = consumer.communicate(timeout=60)
        finally:
            if consumer.poll() is None:
                consumer.kill()
                consumer.communicate()
        self.assertEqual(consumer.returncode, 0, err)
        self.assertIn("consumed 3000", out)
        self.assertRegex(out, r"end-to-end latency ms\s+p50 [\d.]+")

    def wait_for_subscription(self, topic):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status, subs = call_json(self.node, "GET", f"/admin/v2/persistent/public/default/{topic}/subscriptions")
            if status == 200 and any(s.startswith("perf-") for s in subs or []):
                return
            time.sleep(0.05)
        self.fail("the perf consumer never subscribed")

    def test_compressed_batches_round_trip_through_the_cli(self):
        for codec in ("lz4", "zlib", "zstd", "snappy"):
            topic = f"compressed-{codec}"
            payloads = [f"{codec} message {i} " + "x" * 200 for i in range(5)]
            args = ["produce", topic, "--batch", "--compression", codec, "--url", self.url(), "--json"]
            for p in payloads:
                args += ["-m", p]
            r = run(*args)
            self.assertEqual(r.returncode, 0, r.stderr)
            ids = json.loads(r.stdout)["messageIds"]
            self.assertEqual(len(ids), 5)
            r = run("consume", topic, "-s", "check", "-P", "Earliest", "-n", "5", "--json", "--url", self.url())
            self.assertEqual(r.returncode, 0, r.stderr)
            got = [json.loads(line) for line in r.stdout.splitlines()]
            self.assertEqual([m["payload"] for m in got], payloads, codec)
            self.assertEqual([m["messageId"] for m in got], ids, codec)

    def test_the_node_reports_where_publish_time_went(self):
        r = run("perf", "produce", "perf-stages", "--url", self.url(), "-n", "3000", "--rate", "3000",
                "--disk-dir", "", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        status, body, _ = self.node.get("/metrics")
        self.assertEqual(status, 200)
        text = body.decode()

        def count(family, **labels):
            want = "".join(f'{k}="{v}"' for k, v in labels.items())
            for line in text.splitlines():
                if line.startswith(family + "_count{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
                    return float(line.rsplit(" ", 1)[1])
            self.fail(f"no {family} {want} in /metrics")

        for stage in ("to_topic", "ledger", "storage", "answer", "broker", "total"):
            self.assertGreater(count("magnetar_publish_stage_seconds", protocol="pulsar", stage=stage), 0, stage)
        # Every reactor ran loop iterations; the publishes' hops waited in mailboxes.
        reactors = {line.split('reactor="')[1].split('"')[0] for line in text.splitlines()
                    if line.startswith("magnetar_reactor_busy_seconds_count")}
        self.assertGreaterEqual(len(reactors), 1)
        for reactor in reactors:
            self.assertGreater(count("magnetar_reactor_busy_seconds", reactor=reactor), 0, reactor)
        waits = sum(count("magnetar_reactor_mailbox_wait_seconds", reactor=reactor) for reactor in reactors)
        self.assertGreater(waits, 0)
        self.assertIn("magnetar_reactor_slow_callbacks_total", text)

    def test_amqp_confirms_are_timed_by_stage_too(self):
        import amqp_pika

        def stage_counts():
            status, body, _ = self.node.get("/metrics")
            self.assertEqual(status, 200)
            counts = {}
            for line in body.decode().splitlines():
                if line.startswith("magnetar_publish_stage_seconds_count{") and 'protocol="amqp"' in line:
                    counts[line.split('stage="')[1].split('"')[0]] = float(line.rsplit(" ", 1)[1])
            return counts

        before = stage_counts()
        conn = amqp_pika.connect(self.node)
        try:
            ch = conn.channel()
            ch.queue_declare("stages", durable=True)
            ch.confirm_delivery()
            for i in range(50):
                ch.basic_publish("", "stages", b"m%d" % i)
            after = stage_counts()
            for stage in ("to_topic", "ledger", "storage", "answer", "broker", "total"):
                self.assertEqual(after.get(stage, 0) - before.get(stage, 0), 50, stage)
            # One publish stored in two queues is not one path: not timed.
            ch.exchange_declare("stages-fan", "fanout")
            for q in ("stages-1", "stages-2"):
                ch.queue_declare(q)
                ch.queue_bind(q, "stages-fan")
            ch.basic_publish("stages-fan", "", b"twice")
            self.assertEqual(stage_counts().get("total", 0), after["total"])
        finally:
            conn.close()

    def test_the_node_reports_time_it_was_not_run(self):
        def over(part, bound):
            # Wakes of the stall probe later than `bound` seconds.
            status, body, _ = self.node.get("/metrics")
            self.assertEqual(status, 200)
            total = at_bound = None
            for line in body.decode().splitlines():
                if not line.startswith("magnetar_node_stall_seconds_bucket{") or f'part="{part}"' not in line:
                    continue
                le = line.split('le="')[1].split('"')[0]
                if le == "+Inf":
                    total = float(line.rsplit(" ", 1)[1])
                elif abs(float(le) - bound) / bound < 0.2 and at_bound is None:
                    at_bound = float(line.rsplit(" ", 1)[1])
            self.assertIsNotNone(total, f"no magnetar_node_stall_seconds{{part={part}}} in /metrics")
            self.assertIsNotNone(at_bound, bound)
            return total - at_bound

        before = over("absent", 0.2)
        # The whole process paused, as a paused VM or an overcommitted host
        # would: its threads are not run and not waiting for a core here.
        # An idle node's probe wakes once a second: 2.5 s holds a wake at
        # least 1.5 s before the end.
        self.node.proc.send_signal(signal.SIGSTOP)
        time.sleep(2.5)
        self.node.proc.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 10
        while over("absent", 0.2) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertGreaterEqual(over("absent", 0.2), before + 1)
        self.assertGreater(over("late", 0.2), 0)
        deadline = time.monotonic() + 10
        while "node stalled" not in self.node.read_log() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertIn("node stalled: a thread ready to run waited", self.node.read_log())
        # Still serving.
        r = run("perf", "--url", self.url(), "--topic", "perf-after-stall", "-n", "100", "--disk-dir", "", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_the_disk_alone_under_a_group_commit(self):
        d = tempfile.mkdtemp(prefix="perf-disk-")
        try:
            for mode in ([], ["--overlap"]):
                r = run("perf", "disk", d, "--rate-mib", "8", "--write-kib", "64", "-t", "1", "--json", *mode)
                self.assertEqual(r.returncode, 0, r.stderr)
                f = json.loads(r.stdout)
                self.assertEqual(f["overlap"], bool(mode))
                self.assertEqual(f["write_bytes"], 65536)
                # 8 MiB/s of 64 KiB writes for 1 s: 128 writes, each covered by a sync.
                self.assertEqual(f["writes"], 128)
                self.assertEqual(f["write_to_durable_ms"]["count"], 128)
                self.assertGreaterEqual(f["fdatasync_ms"]["count"], 1)
                self.assertLessEqual(f["fdatasync_ms"]["count"], 128)
                self.assertLessEqual(f["write_to_durable_ms"]["p50"], f["write_to_durable_ms"]["p99"])
                self.assertLessEqual(f["write_to_durable_ms"]["p99"], f["write_to_durable_ms"]["max"])
            # Human output: progress lines, then the summary; nothing left behind.
            r = run("perf", "disk", d, "--rate-mib", "4", "--write-kib", "16", "-t", "1.2", "--interval", "0.5")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertGreaterEqual(r.stdout.count("] disk "), 2, r.stdout)
            self.assertIn("write -> durable ms", r.stdout)
            self.assertEqual(os.listdir(d), [])
        finally:
            shutil.rmtree(d, ignore_errors=True)
        r = run("perf", "disk", "/nonexistent-dir-for-perf-disk", "-t", "1")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("nonexistent-dir-for-perf-disk", r.stderr)

    def test_bad_options_are_refused(self):
        r = run("perf", "produce", "t", "--url", self.url(), "--compression", "brotli", "-n", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown compression", r.stderr)


if __name__ == "__main__":
    unittest.main()
