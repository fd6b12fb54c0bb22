"""Crash durability of the produce path: SIGKILL the broker while a producer
sends with fsync=always, restart it, and every message that got a
SEND_RECEIPT is there, in order, once. Then the producer resends every
sequence id after the restart and deduplication stores none of them twice.
And a namespace's persistence policy decides whether its writes wait for an
fdatasync, whatever the node's --fsync."""
import signal
import socket
import time
import unittest

from magnetar_harness import Node, call_json
from test_pulsar_producer import BC, DUPLICATE_ID, WAIT_S, Wire, create_namespace, restart, set_policy

TOPIC = "persistent://public/durable/ledger"
TOTAL = 3000
WINDOW = 64           # sends in flight
KILL_AFTER = 1500     # receipts before the SIGKILL: past the first deduplication snapshot (every 1000 entries)


def drain(wire, receipts, timeout):
    """Reads what the broker sent within `timeout`; records receipts
    (sequence id -> ledger id). False once the connection is gone."""
    try:
        cmd, _, _ = wire.read(timeout)
    except (socket.timeout, TimeoutError):
        return True
    except (ConnectionError, OSError):
        return False
    if cmd.type == BC.SEND_RECEIPT:
        receipts[cmd.send_receipt.sequence_id] = cmd.send_receipt.message_id.ledgerId
    return True


def send_all(wire, name, receipts, seqs, stop_when=None):
    """Sends `seqs` with at most WINDOW unanswered; stops early when
    stop_when() says so (then returns the seqs sent)."""
    sent = []
    for seq in seqs:
        while len(sent) - len(receipts) >= WINDOW:
            if not drain(wire, receipts, WAIT_S):
                return sent
        wire.send_message(1, name, seq, b"payload-%d" % seq)
        sent.append(seq)
        if stop_when is not None and stop_when():
            return sent
    deadline = time.monotonic() + WAIT_S
    while any(s not in receipts for s in sent) and time.monotonic() < deadline:
        if not drain(wire, receipts, 1.0):
            break
    return sent


class DurabilityTest(unittest.TestCase):
    def setUp(self):
        self.node = Node("--fsync", "always", keep_data=True).start()
        create_namespace(self.node, "public/durable")
        set_policy(self.node, "public/durable", "deduplication", True)
        restart(self.node)

    def tearDown(self):
        code = self.node.stop()
        self.node.keep_data = False
        self.node.close()
        self.assertEqual(code, 0)

    def consume(self, wire, at_least):
        got = wire.receive_all(1, quiet_s=1.5, at_least=at_least)
        return [s for s, _ in got], [p for _, p in got]

    def test_receipted_messages_survive_sigkill_and_resends_are_stored_once(self):
        port = self.node.ports["pulsar"]
        audit = Wire(port)
        audit.subscribe(TOPIC, "audit", 1, 1)  # keeps every entry for the check
        audit.close()

        producer = Wire(port)
        producer.open_producer(TOPIC, 1, 2, name="writer")
        receipts = {}
        send_all(producer, "writer", receipts, range(TOTAL), stop_when=lambda: len(receipts) >= KILL_AFTER)
        self.node.proc.send_signal(signal.SIGKILL)
        self.node.proc.wait(timeout=WAIT_S)
        self.node.log.close()
        while drain(producer, receipts, 0.2):  # answers already on the wire
            pass
        producer.close()
        receipted = sorted(receipts)
        self.assertGreaterEqual(len(receipted), KILL_AFTER)
        self.assertLess(len(receipted), TOTAL, "the kill came after everything was sent")

        self.node.start()
        port = self.node.ports["pulsar"]
        consumer = Wire(port)
        consumer.subscribe(TOPIC, "audit", 1, 1)
        seqs, payloads = self.consume(consumer, at_least=len(receipted))
        # What survived is a prefix of what was sent, in order, each once,
        # and it holds every receipted message.
        self.assertEqual(seqs, list(range(len(seqs))))
        self.assertTrue(set(receipted) <= set(seqs), set(receipted) - set(seqs))
        self.assertEqual(payloads[-1], b"payload-%d" % seqs[-1])

        # The producer comes back, is told where it was, and resends all.
        producer = Wire(port)
        ok = producer.open_producer(TOPIC, 1, 2, name="writer")
        self.assertEqual(ok.last_sequence_id, len(seqs) - 1)
        again = {}
        send_all(producer, "writer", again, range(TOTAL))
        self.assertEqual(len(again), TOTAL)
        duplicates = sorted(s for s, ledger in again.items() if ledger == DUPLICATE_ID)
        self.assertEqual(duplicates, seqs)
        rest, _ = self.consume(consumer, at_least=TOTAL - len(seqs))
        self.assertEqual(seqs + rest, list(range(TOTAL)))
        producer.close()
        consumer.close()


FSYNCS = "magnetar_storage_journal_fsync_seconds_count"


class NamespaceFsyncTest(unittest.TestCase):
    """A node started with --fsync never syncs no write of its own; a
    namespace whose persistence policy says fsyncMode always gets an
    fdatasync before each receipt, and taking the mode off again (the node's)
    stops them."""

    def setUp(self):
        self.node = Node("--fsync", "never").start()
        create_namespace(self.node, "public/synced")
        create_namespace(self.node, "public/fast")
        set_policy(self.node, "public/synced", "persistence",
                   {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1,
                    "fsyncMode": "always"})

    def tearDown(self):
        self.assertEqual(self.node.stop(), 0)
        self.node.close()

    def produce(self, topic, count):
        wire = Wire(self.node.ports["pulsar"])
        wire.open_producer(topic, 1, 2, name="p")
        receipts = {}
        send_all(wire, "p", receipts, range(count))
        wire.close()
        self.assertEqual(len(receipts), count)

    def test_the_namespace_policy_decides_the_fsync(self):
        before = self.node.metric(FSYNCS)
        self.produce("persistent://public/fast/t", 200)
        self.assertEqual(self.node.metric(FSYNCS), before, "a write of a --fsync never node was synced")
        self.produce("persistent://public/synced/t", 200)
        synced = self.node.metric(FSYNCS)
        self.assertGreaterEqual(synced - before, 1, "fsyncMode always sent receipts without an fdatasync")
        # The policy without fsyncMode: the node's --fsync again, on the loaded topic.
        set_policy(self.node, "public/synced", "persistence",
                   {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1})
        status, reply = call_json(self.node, "GET", "/admin/v2/namespaces/public/synced/persistence")
        self.assertEqual(status, 200)
        self.assertNotIn("fsyncMode", reply)
        self.produce("persistent://public/synced/t", 200)  # the change reaches the topic meanwhile
        settled = self.node.metric(FSYNCS)
        self.produce("persistent://public/synced/t", 200)
        self.assertEqual(self.node.metric(FSYNCS), settled)


if __name__ == "__main__":
    unittest.main()
