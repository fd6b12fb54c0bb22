"""What AMQP queue arguments and flags do, with pika against the real
binary: dead-lettering (reject, nack, expiry, length) with x-death, message
TTL per queue and per message, x-max-length and x-max-length-bytes with
each x-overflow, x-queue-type, x-single-active-consumer, x-expires,
auto-delete queues, and transient queues that do not survive a restart
while durable ones do."""
import time
import unittest

import pika

from amqp_pika import PikaTestCase, channel_refusal, connect, queue_exists, restartable_node, wait_for


def death(props):
    return props.headers["x-death"][0]


class AmqpQueueArgumentsTest(PikaTestCase):
    def setUp(self):
        super().setUp()
        self.ch.confirm_delivery()

    def count(self, queue):
        return self.ch.queue_declare(queue, passive=True).method.message_count

    def dead_letter_pair(self, name, **args):
        """Queue `name` dead-lettering through direct exchange `name`-dlx into `name`-dead."""
        self.ch.exchange_declare(f"{name}-dlx", "direct")
        self.ch.queue_declare(f"{name}-dead")
        self.ch.queue_bind(f"{name}-dead", f"{name}-dlx", "dead")
        arguments = {"x-dead-letter-exchange": f"{name}-dlx", "x-dead-letter-routing-key": "dead", **args}
        self.ch.queue_declare(name, arguments=arguments)

    def test_nack_without_requeue_dead_letters_through_the_default_exchange(self):
        self.ch.queue_declare("nk-dead")
        self.ch.queue_declare("nk", arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "nk-dead"})
        self.ch.basic_publish("", "nk", b"n1", pika.BasicProperties(headers={"keep": "me"}))
        method, _, _ = self.ch.basic_get("nk")
        self.ch.basic_nack(method.delivery_tag, requeue=False)
        wait_for(lambda: self.count("nk-dead") == 1, "one dead letter")
        method, props, body = self.ch.basic_get("nk-dead", auto_ack=True)
        self.assertEqual((method.exchange, method.routing_key, body), ("", "nk-dead", b"n1"))
        self.assertEqual(props.headers["keep"], "me")
        self.assertEqual(death(props)["reason"], "rejected")

    def test_rejected_message_arrives_in_the_dead_letter_queue(self):
        self.dead_letter_pair("rj2")
        self.ch.basic_publish("", "rj2", b"bad order", pika.BasicProperties(headers={"id": "o-1"}))
        method, _, _ = self.ch.basic_get("rj2")
        self.ch.basic_reject(method.delivery_tag, requeue=False)
        wait_for(lambda: self.count("rj2-dead") == 1, "one dead letter")
        method, props, body = self.ch.basic_get("rj2-dead", auto_ack=True)
        self.assertEqual(body, b"bad order")
        self.assertEqual(method.routing_key, "dead")
        self.assertEqual(method.exchange, "rj2-dlx")
        self.assertEqual(props.headers["id"], "o-1")
        d = death(props)
        self.assertEqual((d["reason"], d["queue"], d["exchange"], d["routing-keys"], d["count"]),
                         ("rejected", "rj2", "", ["rj2"], 1))
        self.assertEqual(props.headers["x-first-death-reason"], "rejected")
        self.assertEqual(self.count("rj2"), 0)

    def test_queue_ttl_expires_messages_into_the_dead_letter_queue(self):
        self.dead_letter_pair("ttl", **{"x-message-ttl": 200})
        self.ch.basic_publish("", "ttl", b"late", pika.BasicProperties(expiration="60000"))
        wait_for(lambda: self.count("ttl-dead") == 1, "the expired message")
        self.assertEqual(self.count("ttl"), 0)
        _, props, body = self.ch.basic_get("ttl-dead", auto_ack=True)
        self.assertEqual(body, b"late")
        self.assertEqual(death(props)["reason"], "expired")
        self.assertEqual(death(props)["original-expiration"], "60000")
        self.assertIsNone(props.expiration)

    def test_per_message_expiration(self):
        self.dead_letter_pair("msgttl")
        self.ch.basic_publish("", "msgttl", b"short", pika.BasicProperties(expiration="100"))
        self.ch.basic_publish("", "msgttl", b"long", pika.BasicProperties(expiration="600000"))
        wait_for(lambda: self.count("msgttl-dead") == 1, "the short-lived message")
        self.assertEqual(self.ch.basic_get("msgttl-dead", auto_ack=True)[2], b"short")
        self.assertEqual(self.ch.basic_get("msgttl", auto_ack=True)[2], b"long")

    def test_expired_messages_are_not_delivered_to_a_consumer(self):
        self.dead_letter_pair("held", **{"x-message-ttl": 300})
        self.ch.basic_qos(prefetch_count=1)
        got = []
        self.ch.basic_consume("held", lambda c, m, p, b: got.append((m, b)))
        self.ch.basic_publish("", "held", b"first")
        self.ch.basic_publish("", "held", b"second")  # waits behind the unacknowledged first
        wait_for(lambda: self.conn.process_data_events(0.05) or got, "the first delivery")
        time.sleep(0.5)  # the second one's TTL passes while it waits
        self.ch.basic_ack(got[0][0].delivery_tag)
        wait_for(lambda: self.conn.process_data_events(0.05) or self.count("held-dead") == 1, "the dead letter")
        self.assertEqual([b for _, b in got], [b"first"])
        self.assertEqual(self.ch.basic_get("held-dead", auto_ack=True)[2], b"second")

    def test_max_length_drops_the_oldest_and_dead_letters_them(self):
        self.dead_letter_pair("capped", **{"x-max-length": 3})
        for i in range(5):
            self.ch.basic_publish("", "capped", b"m%d" % i)
        self.assertEqual(self.count("capped"), 3)
        self.assertEqual([self.ch.basic_get("capped", auto_ack=True)[2] for _ in range(3)], [b"m2", b"m3", b"m4"])
        wait_for(lambda: self.count("capped-dead") == 2, "two dead letters")
        got = [self.ch.basic_get("capped-dead", auto_ack=True) for _ in range(2)]
        self.assertEqual([b for _, _, b in got], [b"m0", b"m1"])
        self.assertEqual(death(got[0][1])["reason"], "maxlen")

    def test_max_length_without_dead_lettering_just_drops(self):
        self.ch.queue_declare("capped-plain", arguments={"x-max-length": 1})
        for i in range(3):
            self.ch.basic_publish("", "capped-plain", b"p%d" % i)
        self.assertEqual(self.count("capped-plain"), 1)
        self.assertEqual(self.ch.basic_get("capped-plain", auto_ack=True)[2], b"p2")

    def test_max_length_bytes_drops_the_oldest_past_the_bytes(self):
        self.ch.queue_declare("capped-bytes", arguments={"x-max-length-bytes": 1000})
        for i in range(10):
            self.ch.basic_publish("", "capped-bytes", b"%d" % i + b"." * 299)
        kept = self.count("capped-bytes")
        self.assertTrue(1 <= kept <= 3, kept)  # 300-byte bodies, counted with their properties as stored
        got = [self.ch.basic_get("capped-bytes", auto_ack=True)[2][:1] for _ in range(kept)]
        self.assertEqual(got, [b"%d" % i for i in range(10 - kept, 10)])

    def test_reject_publish_nacks_what_does_not_fit_and_keeps_what_does(self):
        self.ch.queue_declare("full", arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
        before = self.node.metric("magnetar_amqp_overflow_rejected_total")
        self.ch.basic_publish("", "full", b"f1")
        self.ch.basic_publish("", "full", b"f2")
        with self.assertRaises(pika.exceptions.NackError):
            self.ch.basic_publish("", "full", b"f3")
        self.assertEqual(self.node.metric("magnetar_amqp_overflow_rejected_total"), before + 1)
        self.assertEqual(self.count("full"), 2)
        self.assertEqual(self.ch.basic_get("full", auto_ack=True)[2], b"f1")
        self.ch.basic_publish("", "full", b"f4")  # room again
        self.assertEqual([self.ch.basic_get("full", auto_ack=True)[2] for _ in range(2)], [b"f2", b"f4"])

    def test_reject_publish_dlx_dead_letters_what_it_refuses(self):
        self.dead_letter_pair("full-dlx", **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
        self.ch.basic_publish("", "full-dlx", b"kept")
        with self.assertRaises(pika.exceptions.NackError):
            self.ch.basic_publish("", "full-dlx", b"refused")
        wait_for(lambda: self.count("full-dlx-dead") == 1, "the refused message dead-lettered")
        _, props, body = self.ch.basic_get("full-dlx-dead", auto_ack=True)
        self.assertEqual((body, death(props)["reason"]), (b"refused", "maxlen"))
        self.assertEqual(self.ch.basic_get("full-dlx", auto_ack=True)[2], b"kept")

    def test_queue_types_and_overflow_modes_that_are_not_served_are_refused(self):
        for name, args in (("typed-classic", {"x-queue-type": "classic"}), ("typed-quorum", {"x-queue-type": "quorum"})):
            self.ch.queue_declare(name, durable=True, arguments=args)
            self.ch.basic_publish("", name, b"x")
            self.assertEqual(self.count(name), 1)
        for args in ({"x-queue-type": "lazy-ish"}, {"x-overflow": "drop-tail"},
                     {"x-single-active-consumer": "yes"}, {"x-max-length-bytes": -1}):
            refusal = channel_refusal(connect(self.node), lambda ch: ch.queue_declare("typed-bad", arguments=args))
            self.assertIsNotNone(refusal, args)
            self.assertEqual(refusal.reply_code, 406, args)
        # The broker still serves, and the queues it took are intact.
        self.assertEqual(self.count("typed-quorum"), 1)
        # Priorities are taken but not served: said in the log, delivered in publish order.
        self.ch.queue_declare("prioritized", arguments={"x-max-priority": 10})
        for priority in (1, 9):
            self.ch.basic_publish("", "prioritized", b"p%d" % priority, pika.BasicProperties(priority=priority))
        self.assertEqual([self.ch.basic_get("prioritized", auto_ack=True)[2] for _ in range(2)], [b"p1", b"p9"])
        wait_for(lambda: "x-max-priority; priorities are not served" in self.node.read_log(), "the warning")

    def test_a_single_active_consumer_gets_everything_until_it_goes(self):
        self.ch.queue_declare("sac", arguments={"x-single-active-consumer": True})
        conns = [connect(self.node) for _ in range(2)]
        got = [[], []]
        tags = []
        try:
            for k, conn in enumerate(conns):
                ch = conn.channel()
                ch.basic_qos(prefetch_count=100)
                tags.append((ch, ch.basic_consume("sac", lambda c, m, p, b, k=k: got[k].append(b), auto_ack=True)))

            def pump(until):
                def step():
                    for conn in conns:
                        conn.process_data_events(time_limit=0.05)
                    return until()
                return step

            for i in range(5):
                self.ch.basic_publish("", "sac", b"a%d" % i)
            wait_for(pump(lambda: len(got[0]) == 5), "the first consumer takes all five")
            self.assertEqual(got[1], [])
            ch, tag = tags[0]
            ch.basic_cancel(tag)
            for i in range(5):
                self.ch.basic_publish("", "sac", b"b%d" % i)
            wait_for(pump(lambda: len(got[1]) == 5), "the second consumer takes over")
            self.assertEqual(got, [[b"a%d" % i for i in range(5)], [b"b%d" % i for i in range(5)]])
        finally:
            for conn in conns:
                if conn.is_open:
                    conn.close()

    def test_x_expires_deletes_an_unused_queue(self):
        self.ch.queue_declare("short-lived", arguments={"x-expires": 300})
        wait_for(lambda: not queue_exists(self.conn, "short-lived"), "the queue to expire")

    def test_auto_delete_queue_goes_with_its_last_consumer(self):
        self.ch.queue_declare("auto", auto_delete=True)
        tag = self.ch.basic_consume("auto", lambda *a: None)
        self.ch.basic_publish("", "auto", b"x")
        self.assertEqual(self.ch.queue_declare("auto", passive=True).method.consumer_count, 1)
        self.ch.basic_cancel(tag)
        wait_for(lambda: not queue_exists(self.conn, "auto"), "the auto-delete queue to go")


    def test_auto_delete_exchange_goes_with_its_last_binding(self):
        self.ch.exchange_declare("auto-x", "fanout", auto_delete=True)
        self.ch.queue_declare("auto-x-q1")
        self.ch.queue_declare("auto-x-q2")
        self.ch.queue_bind("auto-x-q1", "auto-x")
        self.ch.queue_bind("auto-x-q2", "auto-x")
        self.ch.queue_unbind("auto-x-q1", "auto-x")
        self.ch.exchange_declare("auto-x", "fanout", passive=True)  # one binding left
        self.ch.queue_delete("auto-x-q2")
        with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as e:
            self.ch.exchange_declare("auto-x", "fanout", passive=True)
        self.assertEqual(e.exception.reply_code, 404)


class AmqpTransientQueuesTest(unittest.TestCase):
    def test_transient_queues_and_their_topics_do_not_survive_a_restart(self):
        with restartable_node() as node:
            conn = connect(node)
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("transient-q")
            ch.queue_declare("durable-q", durable=True)
            for q in ("transient-q", "durable-q"):
                ch.basic_publish("", q, b"kept?")
            conn.close()
            self.assertEqual(node.stop(), 0)
            node.start()
            self.assertEqual(node.get("/admin/v2/persistent/public/default/durable-q/stats")[0], 200)
            wait_for(lambda: node.get("/admin/v2/persistent/public/default/transient-q/stats")[0] == 404,
                     "the transient queue's topic to go")
            conn = connect(node)
            self.assertFalse(queue_exists(conn, "transient-q"))
            ch = conn.channel()
            self.assertEqual(ch.queue_declare("transient-q").method.message_count, 0)
            self.assertEqual(ch.queue_declare("durable-q", durable=True).method.message_count, 1)
            conn.close()
            self.assertEqual(node.stop(), 0)


if __name__ == "__main__":
    unittest.main()
