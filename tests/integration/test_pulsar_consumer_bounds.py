"""A Pulsar consumer that grants permits and does not read its socket
cannot make the node hold more than a bounded amount for it: the broker
hands the consumer no more bytes than its delivery credit, which the
connection gives back only as deliveries reach it and while it is
writable, so the node's resident memory stays within a budget however many
permits the client grants and however large the messages are, even when
they grow from small batched ones to large ones. Once the client reads,
every message is there, exactly once and in order; the permits granted
keep working for new messages, and redelivery and close behave as before.

Raw frames (tests/utils/pulsar_wire.py) for the consumer; `magnetar perf
produce` writes the backlog. The bounds asserted are memory, never time;
every wait is bounded."""
import json
import subprocess
import sys
import time
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import BIN, NodePerTestCase
from memory_watch import MB, RssWatch
from pulsar_wire import PulsarWire, command

BUDGET = 150 * MB     # the node's peak resident memory while the consumer does not read
HARD_CAP = 1500 * MB  # past this the watch kills the node (the test fails, the machine lives)
SETTLE_S = 1.0        # the node's memory has settled once it did not grow for this long
SETTLE_MAX_S = 20.0
TIMEOUT_S = 120


class PulsarConsumerBoundsTest(NodePerTestCase):
    def produce(self, topic, count, size, batch=False):
        r = subprocess.run([BIN, "perf", "produce", topic, "--url", f"pulsar://127.0.0.1:{self.node.ports['pulsar']}",
                            "-n", str(count), "-s", str(size), "--batch", "true" if batch else "false", "--json"],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stderr)

    def restart(self):
        """Stops the node and starts it again on its data, so the memory
        measured next is what the consumer costs, not what producing the
        backlog left behind."""
        self.assertEqual(self.node.stop(), 0, "the node's exit code")
        self.node.start()

    def grant_and_stop_reading(self, wire, topic, permits):
        """Subscribes consumer 1 ("slow", from the earliest message) to
        `topic`, grants it `permits` and lets the node run while nothing is
        read (not_reading)."""
        answer = wire.subscribe(f"persistent://public/default/{topic}", "slow", 1, initial="Earliest")
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        wire.flow(1, permits)
        self.not_reading()

    def subscription_stats(self, topic, subscription):
        status, body, _ = self.node.get(f"/admin/v2/persistent/public/default/{topic}/stats")
        self.assertEqual(status, 200, body)
        return json.loads(body)["subscriptions"][subscription]

    def not_reading(self):
        """Waits, not reading, until the node's memory stopped growing (it
        did what it will do for the consumer), within SETTLE_MAX_S, and
        checks it stayed within the budget meanwhile."""
        with RssWatch(self.node, HARD_CAP) as watch:
            watch.settle(SETTLE_S, SETTLE_MAX_S)
        print(f"{self.id()}: {watch.describe()}", file=sys.stderr)
        self.killed = watch.killed
        self.assertFalse(watch.killed, watch.describe())
        self.assertLess(watch.peak, BUDGET, watch.describe())

    def receive_in_order(self, wire, count, size, redelivery_count=0, after=None):
        """`count` MESSAGEs for consumer 1, each `size` bytes, at strictly
        growing positions (after `after`), delivered `redelivery_count`
        times before (None: not checked); returns the last position."""
        previous = after
        for i, f in enumerate(wire.receive(1, count, timeout=TIMEOUT_S)):
            m = f.cmd.message
            position = (m.message_id.ledgerId, m.message_id.entryId)
            if previous is not None:
                self.assertGreater(position, previous, f"message {i}")
            previous = position
            self.assertEqual(len(f.payload), size, f"message {i}")
            if redelivery_count is not None:
                self.assertEqual(m.redelivery_count, redelivery_count, f"message {i}")
        return previous

    def assert_nothing_more(self, wire):
        with self.assertRaises(TimeoutError):
            wire.next("MESSAGE", timeout=0.5)

    def test_ten_million_permits_granted_and_nothing_read(self):
        topic, count, size = "flow-unread", 20000, 16 * 1024
        self.produce(topic, count, size)
        self.restart()
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            self.grant_and_stop_reading(wire, topic, 10_000_000)
            # The broker handed out a window's worth (and what the sockets
            # took), not the backlog.
            sent = self.subscription_stats(topic, "slow")["msgOutCounter"]
            self.assertLess(sent, count // 2)

            last = self.receive_in_order(wire, count, size)
            self.assert_nothing_more(wire)
            # The permits left take new messages.
            self.produce(topic, 100, size)
            self.receive_in_order(wire, 100, size, after=last)
            self.assert_nothing_more(wire)
            # Everything unacknowledged comes again, once, in order.
            wire.write(command("REDELIVER_UNACKNOWLEDGED_MESSAGES", consumer_id=1))
            last = self.receive_in_order(wire, count + 100, size, redelivery_count=1)
            self.assert_nothing_more(wire)
            wire.write(command("ACK", consumer_id=1, ack_type=pb.CommandAck.Cumulative,
                               message_id=[pb.MessageIdData(ledgerId=last[0], entryId=last[1])]))
            closed = wire.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=1)
            self.assertEqual(closed.type, pb.BaseCommand.SUCCESS, closed.cmd)
        deadline = time.monotonic() + TIMEOUT_S
        while self.subscription_stats(topic, "slow")["msgBacklog"] != 0:
            self.assertLess(time.monotonic(), deadline, "the cumulative ack never showed")
            time.sleep(0.05)

    def test_large_messages_and_a_receiver_queue_grant_nothing_read(self):
        topic, count, size = "large-unread", 300, 1 << 20
        self.produce(topic, count, size)
        self.restart()
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            self.grant_and_stop_reading(wire, topic, 1000)  # a Pulsar client's default receiver queue
            self.receive_in_order(wire, count, size)
            self.assert_nothing_more(wire)
            # A consumer closed while its permits were banked and
            # outstanding, then subscribed again, gets everything again.
            closed = wire.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=1)
            self.assertEqual(closed.type, pb.BaseCommand.SUCCESS, closed.cmd)
            answer = wire.subscribe(f"persistent://public/default/{topic}", "slow", 1, initial="Earliest")
            self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
            wire.flow(1, count)
            self.receive_in_order(wire, count, size, redelivery_count=None)
            self.assert_nothing_more(wire)

    def test_small_batched_messages_then_large_ones_nothing_read(self):
        """What a consumer's recent messages cost tells nothing of the next:
        batches of small messages, then 1 MiB ones."""
        topic, small, large, size = "growing-unread", 100_000, 300, 1 << 20
        self.produce(topic, small, 100, batch=True)
        self.produce(topic, large, size)
        self.restart()
        with PulsarWire(self.node.ports["pulsar"]) as wire:
            self.grant_and_stop_reading(wire, topic, 10_000_000)
            frames, messages = [], 0
            while messages < small + large:
                f = wire.next("MESSAGE", timeout=TIMEOUT_S)
                frames.append(f)
                messages += f.metadata.num_messages_in_batch if f.metadata.HasField("num_messages_in_batch") else 1
            self.assertEqual(messages, small + large)
            self.assertGreater(len(frames), large + 1, "the small messages came in batches")
            positions = [(f.cmd.message.message_id.ledgerId, f.cmd.message.message_id.entryId) for f in frames]
            self.assertEqual(positions, sorted(set(positions)))
            self.assertEqual([len(f.payload) for f in frames[-large:]], [size] * large)
            self.assert_nothing_more(wire)


if __name__ == "__main__":
    unittest.main()
