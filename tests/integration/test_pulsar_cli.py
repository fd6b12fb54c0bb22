"""`magnetar produce` and `magnetar consume`: our own Pulsar client on the
command line, against the real server."""
import json
import subprocess
import unittest

from magnetar_harness import BIN, NodeTestCase


def run(*args, timeout=60):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


class PulsarCliTest(NodeTestCase):
    def url(self):
        return f"pulsar://127.0.0.1:{self.node.ports['pulsar']}"

    def test_round_trip_with_properties_keys_and_ids(self):
        r = run("produce", "cli-orders", "-m", "one", "-m", "two", "-n", "2", "-p", "source=test", "-k", "k1",
                "--json", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        produced = json.loads(r.stdout)
        self.assertEqual(produced["produced"], 4)
        self.assertEqual(len(set(produced["messageIds"])), 4)

        r = run("consume", "persistent://public/default/cli-orders", "-s", "reader", "-P", "Earliest", "-n", "4",
                "--json", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [json.loads(line) for line in r.stdout.splitlines()]
        self.assertEqual([m["payload"] for m in got], ["one", "two", "one", "two"])
        self.assertEqual([m["messageId"] for m in got], produced["messageIds"])
        self.assertTrue(all(m["properties"] == {"source": "test"} and m["key"] == "k1" for m in got))

        # Acknowledged: the same subscription has nothing left.
        r = run("consume", "cli-orders", "-s", "reader", "-n", "0", "--timeout", "0.5", "--url", self.url())
        self.assertEqual((r.returncode, r.stdout), (0, ""))

    def test_choices_are_taken_in_any_case(self):
        r = run("produce", "cli-any-case", "-m", "hello", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run("consume", "cli-any-case", "-s", "lower", "-P", "earliest", "-t", "key_shared", "-n", "1",
                "--timeout", "10", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["hello"])
        # Anything else is still refused, naming what is allowed.
        r = run("consume", "cli-any-case", "-s", "lower", "-P", "oldest", "--url", self.url())
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Earliest", r.stderr)

    def test_shared_subscription_from_two_processes(self):
        r = run("produce", "cli-jobs", "-m", "job", "-n", "20", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        procs = [subprocess.Popen([BIN, "consume", "cli-jobs", "-s", "workers", "-t", "Shared", "-P", "Earliest",
                                   "-n", "0", "--timeout", "2", "--url", self.url()],
                                  stdout=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        self.assertEqual(sum(len(o.splitlines()) for o in outs), 20)

    def test_perf_reports_every_figure(self):
        r = run("perf", "--url", self.url(), "-n", "3000", "-s", "200", "-w", "100", "--topic", "perf-test",
                "--disk-dir", self.node.data_dir, "--json", timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        figures = json.loads(r.stdout)
        self.assertEqual(figures["messages"], 3000)
        for key in ("produce_msgs_per_s", "produce_bytes_per_s", "consume_msgs_per_s",
                    "disk_fdatasync_bytes_per_s", "produce_vs_disk"):
            self.assertGreater(figures[key], 0, key)
        # The run's messages are really in the topic: a new reader sees all of them.
        r = run("consume", "perf-test", "-s", "check", "-P", "Earliest", "-n", "0", "--timeout", "1",
                "--url", self.url())
        self.assertEqual(len(r.stdout.splitlines()), 3000)

    def test_a_reader_reads_without_consuming(self):
        r = run("produce", "cli-reader", "-m", "a", "-m", "b", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        for _ in range(2):  # non-durable: a second reader starts over
            r = run("consume", "cli-reader", "--reader", "-P", "Earliest", "-n", "2", "--url", self.url())
            self.assertEqual((r.returncode, r.stdout), (0, "a\nb\n"), r.stderr)
        # Nothing was acknowledged for anyone: a subscription still gets both.
        r = run("consume", "cli-reader", "-s", "later", "-P", "Earliest", "-n", "2", "--url", self.url())
        self.assertEqual((r.returncode, r.stdout), (0, "a\nb\n"), r.stderr)
        r = run("consume", "cli-reader", "--url", self.url(), "-n", "1")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--subscription (or --reader)", r.stderr)

    def test_a_reader_starts_after_a_message_id_or_at_it(self):
        r = run("produce", "cli-start", *[a for i in range(5) for a in ("-m", f"m{i}")], "--json", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = json.loads(r.stdout)["messageIds"]
        r = run("consume", "cli-start", "--reader", "--start-message-id", ids[1], "-n", "3", "--timeout", "5",
                "--url", self.url())
        self.assertEqual((r.returncode, r.stdout), (0, "m2\nm3\nm4\n"), r.stderr)
        r = run("consume", "cli-start", "--reader", "--start-message-id", ids[1], "--inclusive", "-n", "4",
                "--timeout", "5", "--url", self.url())
        self.assertEqual((r.returncode, r.stdout), (0, "m1\nm2\nm3\nm4\n"), r.stderr)
        r = run("consume", "cli-start", "--reader", "--start-message-id", "nine", "--url", self.url())
        self.assertEqual(r.returncode, 1)
        self.assertIn("ledger:entry", r.stderr)

    def test_a_reader_starting_deep_in_a_batch_reads_on_past_it(self):
        """The messages a reader drops before its start took permits too: it
        asks for more, or it would wait forever once the broker has none left."""
        msgs = [a for i in range(1000) for a in ("-m", f"m{i}")]
        r = run("produce", "cli-deep", *msgs, "--batch", "--json", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        ids = json.loads(r.stdout)["messageIds"]
        # Deep inside the largest batch (the client closes a batch on a timer
        # too, so a loaded machine may send the 1000 as more than one).
        batches = {}
        for i, message_id in enumerate(ids):
            batches.setdefault(message_id.rsplit(":", 1)[0], []).append(i)
        largest = max(batches.values(), key=len)
        self.assertGreaterEqual(len(largest), 100, "batches of at least 100")
        start = largest[len(largest) * 7 // 10]
        self.assertEqual(run("produce", "cli-deep", "-m", "after", "--url", self.url()).returncode, 0)
        r = run("consume", "cli-deep", "--reader", "--start-message-id", ids[start], "-n", str(1000 - start),
                "--timeout", "5", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [f"m{i}" for i in range(start + 1, 1000)] + ["after"])

    def test_a_partitions_messages_name_it(self):
        status, _, _ = self.node.http("PUT", "/admin/v2/persistent/public/default/cli-parts/partitions", "2",
                                      headers={"Content-Type": "application/json"})
        self.assertIn(status, (200, 204))
        topic = "persistent://public/default/cli-parts-partition-1"
        self.assertEqual(run("produce", topic, "-m", "x", "--url", self.url()).returncode, 0)
        r = run("consume", topic, "--reader", "-P", "Earliest", "--json", "--timeout", "5", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["partition"], 1)
        self.assertEqual(run("produce", "cli-whole", "-m", "y", "--url", self.url()).returncode, 0)
        r = run("consume", "cli-whole", "--reader", "-P", "Earliest", "--json", "--timeout", "5", "--url", self.url())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["partition"], -1)  # no partition

    def test_errors_are_clear(self):
        r = run("produce", "x", "-m", "m", "--url", "pulsar://127.0.0.1:1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot connect", r.stderr)
        r = run("consume", "empty-topic", "-s", "s", "-n", "1", "--timeout", "0.3", "--url", self.url())
        self.assertEqual(r.returncode, 1)
        self.assertIn("received 0 of 1", r.stderr)
        r = run("produce", "no-such-tenant/ns/t", "-m", "m", "--url", self.url())
        self.assertEqual(r.returncode, 1)
        self.assertIn("does not exist", r.stderr)
        r = run("consume", "t", "--url", self.url())  # no subscription
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
