"""What AMQP queue arguments and flags do, with pika against the real
binary: dead-lettering (reject, nack, expiry, length) with x-death, message
TTL per queue and per message, x-max-length and x-max-length-bytes with
each x-overflow, x-queue-type, x-max-priority, x-single-active-consumer, x-expires,
auto-delete queues, and transient queues that do not survive a restart
while durable ones do."""
import time
import unittest

import pika

from amqp_pika import PikaTestCase, channel_refusal, connect, queue_exists, restartable_node, wait_for
from magnetar_harness import call_json


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

    def prioritized(self, name, priorities, **args):
        self.ch.queue_declare(name, arguments={"x-max-priority": 10, **args})
        for n, priority in enumerate(priorities):
            props = pika.BasicProperties(priority=priority) if priority is not None else None
            self.ch.basic_publish("", name, b"%s-%d" % (str(priority).encode(), n), props)

    def test_a_priority_queue_gives_the_highest_priority_first(self):
        # None is no priority (0); 200 is past the queue's 10 and counts as 10.
        priorities = [3, None, 9, 0, 200, 3, 10, 1, 9]
        self.prioritized("prio-get", priorities)
        self.assertEqual(self.count("prio-get"), len(priorities))
        got = [self.ch.basic_get("prio-get", auto_ack=True)[2] for _ in priorities]
        self.assertEqual(got, [b"200-4", b"10-6", b"9-2", b"9-8", b"3-0", b"3-5", b"1-7", b"None-1", b"0-3"])
        self.assertIsNone(self.ch.basic_get("prio-get")[0])

    def test_a_consumer_with_a_prefetch_gets_a_later_urgent_message_next(self):
        self.prioritized("prio-con", [1, 1, 1, 1])
        conn = connect(self.node)
        got = []
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=1)
            ch.basic_consume("prio-con", lambda c, m, p, b: got.append((b, m.delivery_tag)))
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or got, "the first message")
            # Behind three waiting messages of priority 1, one of 8 and one of 5.
            self.ch.basic_publish("", "prio-con", b"urgent", pika.BasicProperties(priority=8))
            self.ch.basic_publish("", "prio-con", b"soon", pika.BasicProperties(priority=5))

            def handed(level):
                topic = f"/admin/v2/persistent/public/default/prio-con-__priority-{level}/stats"
                _, stats = call_json(self.node, "GET", topic)
                return stats["subscriptions"]["amqp"]["unackedMessages"] == 1

            # Both reached the consumer's side while the prefetch holds them back.
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or (handed(8) and handed(5)), "both handed")
            self.assertEqual(len(got), 1)
            for _ in range(5):
                ch.basic_ack(got[-1][1])
                n = len(got)
                wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) > n or len(got) == 6, "next")
            self.assertEqual([b for b, _ in got], [b"1-0", b"urgent", b"soon", b"1-1", b"1-2", b"1-3"])
            # A requeued message goes back to its level and comes again.
            self.ch.basic_publish("", "prio-con", b"top", pika.BasicProperties(priority=10))
            ch.basic_ack(got[-1][1])
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) == 7, "the top one")
            ch.basic_nack(got[-1][1], requeue=True)
            wait_for(lambda: conn.process_data_events(time_limit=0.05) or len(got) == 8, "it again")
            self.assertEqual([b for b, _ in got[-2:]], [b"top", b"top"])
            self.ch.basic_publish("", "prio-con", b"low", pika.BasicProperties(priority=2))
        finally:
            conn.close()
        # Closing gave back what the consumer held: "top" again and "low".
        wait_for(lambda: self.count("prio-con") == 2, "two messages back")
        self.assertEqual([self.ch.basic_get("prio-con", auto_ack=True)[2] for _ in range(2)], [b"top", b"low"])

    def test_a_priority_queue_purges_deletes_and_refuses_as_a_whole(self):
        self.prioritized("prio-all", [0, 4, 7, 7, None])
        self.assertEqual(self.ch.queue_purge("prio-all").method.message_count, 5)
        self.assertEqual(self.count("prio-all"), 0)
        self.prioritized("prio-all", [2, 9])
        self.assertEqual(self.ch.queue_delete("prio-all").method.message_count, 2)
        status, body, _ = self.node.get("/admin/v2/persistent/public/default")
        self.assertEqual(status, 200)
        self.assertFalse([t for t in body.decode().split('"') if "prio-all" in t], body)
        for args in ({"x-max-priority": 0}, {"x-max-priority": 256}, {"x-max-priority": "high"},
                     {"x-max-priority": 5, "x-max-length": 10}):
            refusal = channel_refusal(connect(self.node), lambda ch: ch.queue_declare("prio-bad", arguments=args))
            self.assertEqual(getattr(refusal, "reply_code", None), 406, args)

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


class AmqpPriorityRestartTest(unittest.TestCase):
    def test_a_durable_priority_queue_keeps_its_levels_across_a_restart(self):
        with restartable_node() as node:
            conn = connect(node)
            ch = conn.channel()
            ch.confirm_delivery()
            ch.queue_declare("prio-durable", durable=True, arguments={"x-max-priority": 5})
            for body, priority in ((b"a", 1), (b"b", 5), (b"c", 3)):
                ch.basic_publish("", "prio-durable", body, pika.BasicProperties(priority=priority, delivery_mode=2))
            conn.close()
            node.stop()
            node.start()
            conn = connect(node)
            ch = conn.channel()
            self.assertEqual(ch.queue_declare("prio-durable", passive=True).method.message_count, 3)
            self.assertEqual([ch.basic_get("prio-durable", auto_ack=True)[2] for _ in range(3)], [b"b", b"c", b"a"])
            conn.close()


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
