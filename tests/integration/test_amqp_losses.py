"""What AMQP cannot hand on is never lost without a trace, with pika against
the real binary: a stored entry a consumer cannot be given, a dead-lettered
copy that cannot be stored, and a publish without confirms that cannot be
stored are each logged at warn and counted in /metrics, and the client's
channel goes on serving."""
import time
import unittest


import pulsar_api_pb2 as pb
from amqp_pika import PikaTestCase, connect, wait_for
from pulsar_wire import PulsarWire

TIMEOUT_S = 10.0


class AmqpLossesTest(PikaTestCase):
    def count(self, queue):
        return self.ch.queue_declare(queue, passive=True).method.message_count

    def namespace_refusing_producers(self, ns):
        """Namespace public/`ns` whose topics refuse producers past 1 KiB of backlog."""
        path = f"/admin/v2/namespaces/public/{ns}"
        self.assertEqual(self.node.http("PUT", path)[0], 204)
        quota = {"limitSize": 1024, "limitTime": -1, "policy": "producer_exception"}
        self.assertEqual(self.node.http("POST", path + "/backlogQuota", quota)[0], 204)

    def test_an_entry_a_consumer_cannot_be_given_is_skipped_with_a_warning_and_counted(self):
        self.ch.queue_declare("unreadable")
        before = self.node.metric("magnetar_amqp_entries_undeliverable_total") or 0
        # A Pulsar client stores an entry that says it is zlib-compressed
        # but is not: no AMQP message can be made of it.
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer("persistent://public/default/unreadable", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send_unreadable(1, sequence_id=0, producer_name="pulsar-side").type,
                             pb.BaseCommand.SEND_RECEIPT)
        self.ch.basic_publish("", "unreadable", b"readable")
        got = []
        self.ch.basic_consume("unreadable", lambda ch, m, p, body: got.append(body), auto_ack=True)
        deadline = time.monotonic() + TIMEOUT_S
        while not got and time.monotonic() < deadline:
            self.conn.process_data_events(time_limit=0.1)
        self.assertEqual(got, [b"readable"])
        self.assertEqual(self.node.metric("magnetar_amqp_entries_undeliverable_total"), before + 1)
        self.assertIn("cannot be delivered and is skipped", self.node.read_log())

    def test_a_dead_letter_that_cannot_be_stored_is_counted_and_the_original_settled(self):
        self.namespace_refusing_producers("dlx-full")
        conn = connect(self.node, virtual_host="public/dlx-full")
        self.addCleanup(lambda: conn.is_open and conn.close())
        ch = conn.channel()
        ch.confirm_delivery()
        # The dead-letter queue is over its backlog quota: it takes no more
        # (once the quota reached the broker, which a new producer shows).
        ch.queue_declare("full-dead")
        for _ in range(2):
            ch.basic_publish("", "full-dead", b"d" * 600)
        with PulsarWire(self.node.ports["pulsar"]) as w:
            deadline = time.monotonic() + TIMEOUT_S
            producer_id = 1
            while w.create_producer("persistent://public/dlx-full/full-dead", producer_id).type != pb.BaseCommand.ERROR:
                self.assertLess(time.monotonic(), deadline, "the backlog quota never refused producers")
                w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id)
                producer_id += 1
                time.sleep(0.05)
        ch.queue_declare("rejects", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "full-dead"})
        ch.basic_publish("", "rejects", b"turned down")
        before = self.node.metric("magnetar_amqp_dead_letter_failures_total") or 0
        method, _, body = ch.basic_get("rejects")
        self.assertEqual(body, b"turned down")
        ch.basic_reject(method.delivery_tag, requeue=False)
        wait_for(lambda: (self.node.metric("magnetar_amqp_dead_letter_failures_total") or 0) > before,
                 "the failed dead letter counted")
        self.assertIn("was not dead-lettered to exchange ''", self.node.read_log())
        # The original is settled all the same, and nothing was added.
        wait_for(lambda: ch.queue_declare("rejects", passive=True).method.message_count == 0, "rejects empty")
        self.assertEqual(ch.queue_declare("full-dead", passive=True).method.message_count, 2)

    def test_a_publish_without_confirms_that_cannot_be_stored_is_counted_and_the_channel_goes_on(self):
        self.namespace_refusing_producers("unconfirmed-full")
        conn = connect(self.node, virtual_host="public/unconfirmed-full")
        self.addCleanup(lambda: conn.is_open and conn.close())
        ch = conn.channel()  # no confirms
        ch.queue_declare("over")
        before = self.node.metric("magnetar_amqp_unconfirmed_publish_failures_total") or 0
        # Past 1 KiB of backlog the topic refuses this publisher: later
        # publishes are not stored.
        deadline = time.monotonic() + TIMEOUT_S
        sent = 0
        while (self.node.metric("magnetar_amqp_unconfirmed_publish_failures_total") or 0) <= before:
            self.assertLess(time.monotonic(), deadline, "no failed publish was counted")
            ch.basic_publish("", "over", b"o" * 600)
            sent += 1
            conn.process_data_events(time_limit=0.05)
        stored = ch.queue_declare("over", passive=True).method.message_count
        self.assertLess(stored, sent)
        self.assertIn("was not stored (", self.node.read_log())
        # The channel is still open and serving.
        self.assertTrue(ch.is_open)
        ch.queue_declare("still-serving")
        ch.basic_publish("", "still-serving", b"alive")
        wait_for(lambda: ch.queue_declare("still-serving", passive=True).method.message_count == 1, "stored")


if __name__ == "__main__":
    unittest.main()
