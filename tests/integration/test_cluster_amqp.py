"""AMQP 0-9-1 on a cluster of three real magnetar processes, driven by pika.

A client connected to any member declares, publishes to, purges and deletes
queues whatever member owns their topics: declarations reach every member,
and the copies of a published message go to the members that own the
queues' topics over the cluster port. Consumers read a queue on its owner.
"""
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

import pika
import pika.exceptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster import Cluster, make_secret, nodes_of, wait_for  # noqa: E402
from magnetar_harness import call_json  # noqa: E402
from memory_watch import metric_value as metric  # noqa: E402

TIMEOUT_S = 15.0


def connect(node):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", node.ports["amqp"], socket_timeout=TIMEOUT_S, blocked_connection_timeout=TIMEOUT_S))


def publish(node, queue, bodies, declare=False):
    """Publishes `bodies` to `queue` through `node`, each confirmed."""
    with connect(node) as conn:
        ch = conn.channel()
        ch.confirm_delivery()
        if declare:
            ch.queue_declare(queue, durable=True)
        for body in bodies:
            ch.basic_publish("", queue, body.encode())


def drain(node, queue, expected):
    """Every message of `queue`, read on `node` with basic.get, in order."""
    with connect(node) as conn:
        ch = conn.channel()
        got = []
        for _ in range(expected + 1):
            method, _, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                break
            got.append(body.decode())
        return got


def start_three():
    """(directory, cluster, members): three members joined by flag, each
    knowing every other's addresses (a member answers for queues another
    owns only once it knows where that one is)."""
    directory = tempfile.mkdtemp(prefix="magnetar-cluster-amqp-")
    cluster = Cluster(make_secret(directory))
    first = cluster.add()
    cluster.add(join=cluster.seed())
    cluster.add(join=cluster.seed())
    wait_for(lambda: sum(n["raftRole"] == "voter" and n["alive"] for n in nodes_of(first)) == 3,
             "three live voters")
    for member in cluster.members:
        wait_for(lambda: len(call_json(member, "GET", "/admin/v2/brokers/standalone")[1]) == 3,
                 "every member's addresses")
    return directory, cluster, list(cluster.members)


class ClusterAmqpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir, cls.cluster, cls.members = start_three()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def owner_of(self, queue):
        status, lookup = call_json(self.members[0], "GET", f"/lookup/v2/topic/persistent/public/default/{queue}")
        self.assertEqual(status, 200, lookup)
        owners = [m for m in self.members if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}")]
        self.assertEqual(len(owners), 1, lookup)
        return owners[0]

    def known_on(self, node, queue):
        """Whether `node` has heard of `queue` (a passive declare answers)."""
        with connect(node) as conn:
            try:
                return conn.channel().queue_declare(queue, passive=True)
            except pika.exceptions.ChannelClosedByBroker as e:
                if e.reply_code == 404:
                    return None
                raise

    def test_messages_published_through_one_member_reach_queues_every_member_owns(self):
        declarer, publisher, _ = self.members
        queues = [f"spread-{i}" for i in range(9)]
        with connect(declarer) as conn:
            ch = conn.channel()
            ch.exchange_declare("spread", "direct", durable=True)
            for q in queues:
                ch.queue_declare(q, durable=True)
                ch.queue_bind(q, "spread", routing_key="all")
            ch.queue_declare("spread-declared", durable=True)  # declared last: once seen, the rest is too
        owners = {q: self.owner_of(q) for q in queues}
        self.assertGreater(len({id(o) for o in owners.values()}), 1, "one member owns every queue")
        self.assertTrue(any(o is not publisher for o in owners.values()))
        wait_for(lambda: self.known_on(publisher, "spread-declared"), "the declarations on the publishing member")

        with connect(publisher) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            for i in range(40):
                # Confirmed (pika raises on a nack) only once every copy is stored at its owner.
                ch.basic_publish("spread", "all", f"m{i}".encode(), mandatory=True)
        for q in queues:
            self.assertEqual(drain(owners[q], q, 40), [f"m{i}" for i in range(40)], q)
        # The publishing member counted the messages whose copies it sent elsewhere.
        self.assertGreaterEqual(metric(publisher, "magnetar_amqp_forwarded_publishes_out_total"), 40)

    def test_queue_methods_work_on_a_member_that_does_not_own_the_queue(self):
        queue = next(q for q in (f"remote-{i}" for i in range(32)) if self.owner_of(q) is not self.members[0])
        owner = self.owner_of(queue)
        here = self.members[0]
        with connect(here) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare(queue, durable=True)
            for i in range(5):
                ch.basic_publish("", queue, f"first-{i}".encode())
            # The counts come from the owner.
            self.assertEqual(ch.queue_declare(queue, passive=True).method.message_count, 5)
            self.assertEqual(ch.queue_purge(queue).method.message_count, 5)
            for i in range(3):
                ch.basic_publish("", queue, f"second-{i}".encode())
            self.assertEqual(ch.queue_declare(queue, durable=True).method.message_count, 3)
        wait_for(lambda: self.known_on(owner, queue), "the queue on its owner")
        self.assertEqual(drain(owner, queue, 3), ["second-0", "second-1", "second-2"])
        with connect(here) as conn:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", queue, b"last")
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                ch.queue_delete(queue, if_empty=True)
            self.assertEqual(refused.exception.reply_code, 406)
        with connect(here) as conn:
            self.assertEqual(conn.channel().queue_delete(queue).method.message_count, 1)
        # Deleted through one member, it is gone on the others too.
        wait_for(lambda: self.known_on(owner, queue) is None, "the queue gone on its owner")

    def test_consumers_on_a_member_that_does_not_own_the_queue_read_it_there(self):
        here = self.members[1]
        queue = next(q for q in (f"far-{i}" for i in range(32)) if self.owner_of(q) is not here)
        owner = self.owner_of(queue)
        publisher = next(m for m in self.members if m is not here and m is not owner)
        with connect(here) as conn:
            conn.channel().queue_declare(queue, durable=True)
        wait_for(lambda: self.known_on(publisher, queue), "the queue on the publishing member")
        publish(publisher, queue, [f"m{i}" for i in range(30)])

        with connect(here) as conn:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=5)
            got = []
            redelivered = []

            def on_message(channel, method, properties, body):
                text = body.decode()
                if text == "m3" and not method.redelivered:
                    # Requeued once: it comes back, marked redelivered.
                    channel.basic_nack(method.delivery_tag, requeue=True)
                    return
                if method.redelivered:
                    redelivered.append(text)
                got.append(text)
                channel.basic_ack(method.delivery_tag)

            tag = ch.basic_consume(queue, on_message)
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 30 and time.monotonic() < deadline:
                conn.process_data_events(time_limit=0.2)
            ch.basic_cancel(tag)
        self.assertEqual(sorted(got, key=lambda t: int(t[1:])), [f"m{i}" for i in range(30)])
        self.assertEqual(redelivered, ["m3"])
        self.assertEqual([t for t in got if t != "m3"], [f"m{i}" for i in range(30) if i != 3])
        wait_for(lambda: self.counts_on(owner, queue) == 0, "every message acknowledged at the owner")

        # What a consumer elsewhere holds unacknowledged goes back to the queue when it goes.
        publish(publisher, queue, [f"held-{i}" for i in range(4)])
        conn = connect(here)
        ch = conn.channel()
        held = []
        ch.basic_qos(prefetch_count=10)
        ch.basic_consume(queue, lambda c, m, p, body: held.append(body.decode()))
        deadline = time.monotonic() + TIMEOUT_S
        while len(held) < 4 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.2)
        self.assertEqual(held, [f"held-{i}" for i in range(4)])
        conn.close()
        self.assertEqual(drain(owner, queue, 4), [f"held-{i}" for i in range(4)])

    def test_basic_get_on_a_member_that_does_not_own_the_queue_reads_it_there(self):
        here = self.members[1]
        queue = next(q for q in (f"got-{i}" for i in range(32)) if self.owner_of(q) is not here)
        publish(here, queue, ["g0", "g1", "g2"], declare=True)
        with connect(here) as conn:
            ch = conn.channel()
            method, _, body = ch.basic_get(queue)
            self.assertEqual(body, b"g0")
            self.assertEqual(method.message_count, 2)
            ch.basic_ack(method.delivery_tag)
            method, _, body = ch.basic_get(queue)
            self.assertEqual(body, b"g1")
            ch.basic_nack(method.delivery_tag, requeue=True)  # back to the queue at its owner
            got = []
            for _ in range(4):
                method, _, body = ch.basic_get(queue, auto_ack=True)
                if method is None:
                    break
                got.append(body.decode())
            self.assertEqual(sorted(got), ["g1", "g2"])
            self.assertEqual(ch.basic_get(queue), (None, None, None))
        self.assertEqual(self.counts_on(self.owner_of(queue), queue), 0)

    def test_stream_consumers_on_a_member_that_does_not_own_the_stream_read_it_there(self):
        here = self.members[1]
        stream = next(q for q in (f"log-{i}" for i in range(32)) if self.owner_of(q) is not here)
        with connect(here) as conn:
            conn.channel().queue_declare(stream, durable=True, arguments={"x-queue-type": "stream"})
        publish(here, stream, [f"e{i}" for i in range(5)])

        def read(offset, count):
            with connect(here) as conn:
                ch = conn.channel()
                ch.basic_qos(prefetch_count=10)
                got = []

                def on_message(channel, method, properties, body):
                    got.append((properties.headers["x-stream-offset"], body.decode()))
                    channel.basic_ack(method.delivery_tag)

                ch.basic_consume(stream, on_message, arguments={"x-stream-offset": offset})
                deadline = time.monotonic() + TIMEOUT_S
                while len(got) < count and time.monotonic() < deadline:
                    conn.process_data_events(time_limit=0.2)
                return got

        self.assertEqual(read("first", 5), [(i, f"e{i}") for i in range(5)])
        self.assertEqual(read(3, 2), [(3, "e3"), (4, "e4")])
        # Reading removes nothing: the stream keeps every message at its owner.
        self.assertEqual(read("first", 5), [(i, f"e{i}") for i in range(5)])

    def counts_on(self, node, queue):
        found = self.known_on(node, queue)
        return found.method.message_count if found else None

class ClusterAmqpFailuresTest(unittest.TestCase):
    """A member of a remote consumer's pair goes away."""

    def setUp(self):
        self.dir, self.cluster, self.members = start_three()

    def tearDown(self):
        self.cluster.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def owner_of(self, queue):
        return ClusterAmqpTest.owner_of(self, queue)

    def test_a_consumer_whose_member_dies_gives_its_messages_back(self):
        # The consumer's member is not the first (it keeps the test's view of the cluster).
        consumer_member = self.members[2]
        queue = next(q for q in (f"orphan-{i}" for i in range(32)) if self.owner_of(q) is not consumer_member)
        owner = self.owner_of(queue)
        publish(owner, queue, [f"held-{i}" for i in range(3)], declare=True)
        conn = connect(consumer_member)
        ch = conn.channel()
        wait_for(lambda: ClusterAmqpTest.known_on(self, consumer_member, queue), "the queue on the consumer's member")
        held = []
        ch.basic_consume(queue, lambda c, m, p, body: held.append(body.decode()))
        deadline = time.monotonic() + TIMEOUT_S
        while len(held) < 3 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.2)
        self.assertEqual(held, ["held-0", "held-1", "held-2"])
        consumer_member.proc.send_signal(signal.SIGKILL)
        consumer_member.proc.wait(timeout=TIMEOUT_S)
        # Once the owner sees the member gone, the messages are ready again.
        wait_for(lambda: ClusterAmqpTest.known_on(self, owner, queue).method.message_count == 3,
                 "the held messages back in the queue", timeout=30)
        self.assertEqual(drain(owner, queue, 3), ["held-0", "held-1", "held-2"])

    def test_a_consumer_whose_queue_member_dies_is_cancelled(self):
        here = self.members[0]
        queue = next(q for q in (f"lost-{i}" for i in range(64))
                     if self.owner_of(q) is not here and self.owner_of(q) is not self.members[1])
        owner = self.owner_of(queue)
        with connect(here) as conn:
            conn.channel().queue_declare(queue, durable=True)
        conn = connect(here)
        ch = conn.channel()
        cancelled = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        tag = ch.basic_consume(queue, lambda *args: None)
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait(timeout=TIMEOUT_S)
        deadline = time.monotonic() + 30
        while not cancelled and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.2)
        self.assertEqual(cancelled, [tag])
        self.assertTrue(conn.is_open)
        conn.close()

    def test_publishes_through_a_live_member_go_on_once_a_killed_owner_bundle_moves(self):
        here = self.members[0]
        queue = next(q for q in (f"moved-{i}" for i in range(64))
                     if self.owner_of(q) is not here and self.owner_of(q) is not self.members[1])
        owner = self.owner_of(queue)
        publish(here, queue, [f"before-{i}" for i in range(20)], declare=True)
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait(timeout=TIMEOUT_S)
        killed_at = time.monotonic()
        # The client keeps publishing through its own member, reopening its
        # channel after a refusal, as an application with confirms does.
        confirmed, refusals = [], 0
        conn = connect(here)
        ch = conn.channel()
        ch.confirm_delivery()
        deadline = time.monotonic() + 60
        while len(confirmed) < 20 and time.monotonic() < deadline:
            body = f"after-{len(confirmed)}"
            try:
                ch.basic_publish("", queue, body.encode(), mandatory=True)
                confirmed.append(body)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError,
                    pika.exceptions.ChannelClosedByBroker, pika.exceptions.ChannelWrongStateError):
                refusals += 1
                time.sleep(0.2)
                if not ch.is_open:
                    ch = conn.channel()
                    ch.confirm_delivery()
        first = time.monotonic() - killed_at
        self.assertEqual(len(confirmed), 20, f"{refusals} refusals")
        print(f"amqp failover: {refusals} publishes refused, all 20 confirmed {first:.1f} s after kill -9 of the owner")
        self.assertTrue(conn.is_open)
        conn.close()
        # Nothing confirmed before or after the kill is missing, read through the same member.
        expected = [f"before-{i}" for i in range(20)] + confirmed
        self.assertEqual(drain(here, queue, len(expected)), expected)


if __name__ == "__main__":
    unittest.main()
