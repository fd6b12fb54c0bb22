"""Storage ledgers that no topic names are deleted by the node's reconcile
pass, and a storage whose metadata was lost is not swept.

A real node writes a few topics, stops, and loses its metadata directory
(what a crash between a topic's metadata delete and its storage delete
does to one topic, done here to all of them, which the node cannot tell
apart): with a couple of topics their ledgers are deleted at the second
pass; with many, the node deletes none and says why."""
import shutil
import os
import time
import unittest

from magnetar_harness import Node
from test_pulsar_producer import Wire
from test_pulsar_durability import send_all

DELETED = "magnetar_storage_orphan_ledgers_deleted_total"
WAIT_S = 30


def write_topics(node, count):
    wire = Wire(node.ports["pulsar"])
    for i in range(count):
        topic = f"persistent://public/default/reconcile-{i}"
        wire.open_producer(topic, i + 1, 100 + i, name="p")
        receipts = {}
        sent = send_all(wire, "p", receipts, range(20))
        assert len(receipts) == len(sent) == 20, (topic, len(receipts))
    wire.close()


class ReconcileTest(unittest.TestCase):
    def setUp(self):
        self.node = Node("--fsync", "always", keep_data=True).start()

    def tearDown(self):
        self.node.stop()
        self.node.keep_data = False
        self.node.close()

    def restart_without_metadata(self):
        self.assertEqual(self.node.stop(), 0)
        self.node.log.close()
        shutil.rmtree(os.path.join(self.node.data_dir, "metadata"))
        self.node.extra_args += ["--ledger-reconcile-secs", "1"]
        self.node.start()

    def test_unnamed_ledgers_are_deleted(self):
        write_topics(self.node, 2)
        self.assertEqual(self.node.metric(DELETED), 0)
        self.restart_without_metadata()
        deadline = time.monotonic() + WAIT_S
        while self.node.metric(DELETED) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertGreaterEqual(self.node.metric(DELETED), 2, self.node.read_log()[-2000:])
        self.assertIn("belonged to no topic", self.node.read_log())
        # The node goes on serving.
        write_topics(self.node, 1)

    def test_a_storage_most_of_which_no_topic_names_is_not_swept(self):
        write_topics(self.node, 8)
        self.restart_without_metadata()
        deadline = time.monotonic() + WAIT_S
        while "deleting none" not in self.node.read_log() and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertIn("deleting none", self.node.read_log())
        time.sleep(2.5)  # two more passes
        self.assertEqual(self.node.metric(DELETED), 0)


if __name__ == "__main__":
    unittest.main()
