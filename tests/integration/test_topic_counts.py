"""Topic creation limits on every path a topic is made by: the namespace's
autoTopicCreation for Pulsar clients (refused with TopicNotFound, or a
partitioned topic made on the partition-metadata request), and
maxTopicsPerNamespace and the tenant's maxTopics for the admin API, Pulsar
producers and consumers, Kafka (auto-creation and CreateTopics) and AMQP
queue.declare. What exists keeps working when a limit is reached."""
import time
import unittest

import confluent_kafka as ck
import confluent_kafka.admin as cka
import pika

import pulsar_api_pb2 as pb
from amqp_pika import channel_refusal, connect
from magnetar_harness import NodeTestCase, admin, call_json, expect_call
from pulsar_wire import PulsarWire

TIMEOUT_S = 10.0


def retry_until(check, what, timeout=TIMEOUT_S):
    """Policies reach the broker's cache a moment after the admin call
    returns: polls `check` until it answers something true (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("never happened: " + what)
        time.sleep(0.05)


def kafka_config(node, namespace):
    return {"bootstrap.servers": f"127.0.0.1:{node.ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": namespace, "sasl.password": "x"}


def kafka_create(node, namespace, name, partitions):
    """The error CreateTopics answers for `name` (None when created)."""
    client = cka.AdminClient(kafka_config(node, namespace))
    future = client.create_topics([cka.NewTopic(name, partitions, 1)], request_timeout=TIMEOUT_S)[name]
    try:
        future.result(timeout=TIMEOUT_S)
        return None
    except ck.KafkaException as e:
        return e.args[0]


def amqp_declare(node, vhost, queue):
    """The reply code queue.declare gets (None when declared)."""
    refusal = channel_refusal(connect(node, virtual_host=vhost, connection_attempts=1),
                              lambda ch: ch.queue_declare(queue, durable=True))
    return None if refusal is None else refusal.reply_code


class TopicCountsTest(NodeTestCase):
    def expect(self, method, path, body=None, status=204):
        return expect_call(self, self.node, method, path, body, status)

    def topics(self, namespace):
        return self.expect("GET", f"/admin/v2/namespaces/{namespace}/topics", status=200)

    def test_a_namespace_without_auto_creation_refuses_unknown_topics_to_pulsar_clients(self):
        self.expect("PUT", "/admin/v2/namespaces/public/manual")
        self.expect("POST", "/admin/v2/namespaces/public/manual/autoTopicCreation", {"allowAutoTopicCreation": False})
        topic = "persistent://public/manual/unknown"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            producer_id = [0]

            def refused():
                producer_id[0] += 1
                r = w.create_producer(topic, producer_id[0])
                if r.type == pb.BaseCommand.ERROR:
                    return r
                w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=producer_id[0])
                # Admitted before the policy applied: delete it and ask again.
                call_json(self.node, "DELETE", "/admin/v2/persistent/public/manual/unknown?force=true")
                return None

            r = retry_until(refused, "a producer refused for a topic that does not exist")
            self.assertEqual(r.cmd.error.error, pb.TopicNotFound)
            self.assertIn("does not create topics automatically", r.cmd.error.message)
            r = w.subscribe(topic, "s", 100)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.TopicNotFound)
            r = w.subscribe("non-persistent://public/manual/fleeting", "s", 101)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.TopicNotFound)
            self.assertNotIn(topic, self.topics("public/manual"))
            # Made explicitly (admin API, AMQP queue.declare), topics work.
            self.expect("PUT", "/admin/v2/persistent/public/manual/unknown")
            self.assertEqual(w.create_producer(topic, 200).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(200, b"made by hand").type, pb.BaseCommand.SEND_RECEIPT)
            self.assertIsNone(amqp_declare(self.node, "public/manual", "declared"))
            self.assertIn("persistent://public/manual/declared", self.topics("public/manual"))
            # A partitioned topic's partitions exist with it.
            self.expect("PUT", "/admin/v2/persistent/public/manual/parted/partitions", 2)
            self.assertEqual(w.create_producer("persistent://public/manual/parted-partition-1", 201).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            r = w.create_producer("persistent://public/manual/parted-partition-2", 202)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.TopicNotFound)

    def test_partition_metadata_creates_a_partitioned_topic_when_the_namespace_says_so(self):
        self.expect("PUT", "/admin/v2/namespaces/public/parts")
        self.expect("POST", "/admin/v2/namespaces/public/parts/autoTopicCreation",
                    {"allowAutoTopicCreation": True, "topicType": "partitioned", "defaultNumPartitions": 3})
        with PulsarWire(self.node.ports["pulsar"]) as w:
            asked = [0]

            def partitions():
                asked[0] += 1
                r = w.request("PARTITIONED_METADATA", ["PARTITIONED_METADATA_RESPONSE"],
                              topic=f"persistent://public/parts/p{asked[0]}")
                return r if r.cmd.partitionMetadataResponse.partitions == 3 else None

            r = retry_until(partitions, "a partitioned topic made on first lookup")
            made = f"persistent://public/parts/p{asked[0]}"
            self.assertEqual(self.expect("GET", f"/admin/v2/persistent/public/parts/p{asked[0]}/partitions",
                                         status=200)["partitions"], 3)
            # Asked again, the same answer; a client that does not let the
            # broker create gets 0 and nothing is made.
            again = w.request("PARTITIONED_METADATA", ["PARTITIONED_METADATA_RESPONSE"], topic=made)
            self.assertEqual(again.cmd.partitionMetadataResponse.partitions, 3)
            r = w.request("PARTITIONED_METADATA", ["PARTITIONED_METADATA_RESPONSE"],
                          topic="persistent://public/parts/not-asked", metadata_auto_creation_enabled=False)
            self.assertEqual(r.cmd.partitionMetadataResponse.partitions, 0)
            self.assertEqual(call_json(self.node, "GET", "/admin/v2/persistent/public/parts/not-asked/partitions")[1]
                             ["partitions"], 0)

    def test_max_topics_per_namespace_holds_on_every_creation_path(self):
        ns = "public/capped"
        self.expect("PUT", f"/admin/v2/namespaces/{ns}")
        self.expect("POST", f"/admin/v2/namespaces/{ns}/maxTopicsPerNamespace", 4)
        # Four topics, each made a different way: the admin API, a Pulsar
        # producer, AMQP queue.declare and Kafka auto-creation.
        self.expect("PUT", f"/admin/v2/persistent/{ns}/by-admin")
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(f"persistent://{ns}/by-pulsar", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertIsNone(amqp_declare(self.node, ns, "by-amqp"))
            p = ck.Producer({**kafka_config(self.node, ns), "message.timeout.ms": 5000})
            reports = []
            p.produce("by-kafka", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            self.assertEqual(reports, [None])
            self.assertEqual(len(self.topics(ns)), 4, self.topics(ns))

            # A fifth is refused on every path, in each protocol's words.
            r = w.create_producer(f"persistent://{ns}/fifth", 2)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.NotAllowedError)
            self.assertIn("Exceed maximum number of topics in namespace public/capped", r.cmd.error.message)
            r = w.subscribe(f"non-persistent://{ns}/fifth", "s", 3)
            self.assertEqual(r.cmd.error.error, pb.NotAllowedError)
            status, answer = call_json(self.node, "PUT", f"/admin/v2/persistent/{ns}/fifth")
            self.assertEqual(status, 412, answer)
            self.assertIn("Exceed maximum number of topics", answer["reason"])
            status, answer = call_json(self.node, "PUT", f"/admin/v2/persistent/{ns}/fifth/partitions", 2)
            self.assertEqual(status, 412, answer)
            self.assertEqual(amqp_declare(self.node, ns, "fifth"), 406)
            error = kafka_create(self.node, ns, "fifth", 1)
            self.assertIsNotNone(error)
            self.assertEqual(error.code(), ck.KafkaError.POLICY_VIOLATION)
            p.produce("fifth", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            self.assertEqual(len(reports), 2)
            self.assertIsNotNone(reports[1])
            self.assertEqual(sorted(self.topics(ns)),
                             sorted(f"persistent://{ns}/{t}" for t in ("by-admin", "by-pulsar", "by-amqp", "by-kafka")))
            # The refused queue was not declared either.
            conn = connect(self.node, virtual_host=ns)
            try:
                with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as missing:
                    conn.channel().queue_declare("fifth", passive=True)
                self.assertEqual(missing.exception.reply_code, 404)
            finally:
                if conn.is_open:
                    conn.close()

            # What exists keeps working.
            self.assertEqual(w.send(1, b"still").type, pb.BaseCommand.SEND_RECEIPT)
            self.assertEqual(w.create_producer(f"persistent://{ns}/by-admin", 4).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            # Deleting one makes room for one.
            self.expect("DELETE", f"/admin/v2/persistent/{ns}/by-admin?force=true")
            self.assertEqual(w.create_producer(f"persistent://{ns}/fifth", 5).type, pb.BaseCommand.PRODUCER_SUCCESS)
            r = w.create_producer(f"persistent://{ns}/sixth", 6)
            self.assertEqual(r.cmd.error.error, pb.NotAllowedError)
        stats = self.expect("GET", f"/admin/v2/persistent/{ns}/by-pulsar/stats", status=200)
        self.assertEqual(stats["msgInCounter"], 1)

    def test_a_tenant_max_topics_counts_all_its_namespaces_and_partitions(self):
        self.expect("PUT", "/admin/v2/tenants/few", {})
        self.expect("PUT", "/admin/v2/namespaces/few/a")
        self.expect("PUT", "/admin/v2/namespaces/few/b")
        code, _, err = admin(self.node, "tenants", "set-limits", "few", "--max-topics", "5")
        self.assertEqual(code, 0, err)
        # A partitioned topic of 3 counts 3.
        self.expect("PUT", "/admin/v2/persistent/few/a/parted/partitions", 3)
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer("persistent://few/b/one", 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertIsNone(kafka_create(self.node, "few/b", "two", 1))
            r = w.create_producer("persistent://few/a/three", 2)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.NotAllowedError)
            self.assertEqual(r.cmd.error.message, "Tenant few reached max topics limit (5)")
            status, answer = call_json(self.node, "POST", "/admin/v2/persistent/few/a/parted/partitions", 4)
            self.assertEqual(status, 412, answer)
            # Partitions that exist are no new topics.
            self.assertEqual(w.create_producer("persistent://few/a/parted-partition-2", 3).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            # Another tenant is not limited by this one.
            self.assertEqual(w.create_producer("persistent://public/default/not-few", 4).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            code, _, err = admin(self.node, "tenants", "remove-limits", "few")
            self.assertEqual(code, 0, err)
            retry_until(lambda: w.create_producer("persistent://few/a/three", 5).type == pb.BaseCommand.PRODUCER_SUCCESS
                        or None, "a topic admitted once the limit is gone")

    def test_a_tenant_max_subscriptions_counts_durable_subscriptions_of_all_its_topics(self):
        self.expect("PUT", "/admin/v2/tenants/subs", {})
        self.expect("PUT", "/admin/v2/namespaces/subs/a")
        self.expect("PUT", "/admin/v2/namespaces/subs/b")
        code, _, err = admin(self.node, "tenants", "set-limits", "subs", "--max-subscriptions", "3")
        self.assertEqual(code, 0, err)
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = w.subscribe("persistent://subs/a/t1", "s1", 1)
            self.assertEqual(r.type, pb.BaseCommand.SUCCESS, r.cmd)
            self.expect("PUT", "/admin/v2/persistent/subs/b/t2")
            self.expect("PUT", "/admin/v2/persistent/subs/b/t2/subscription/s2")
            self.assertIsNone(amqp_declare(self.node, "subs/b", "q"))  # a queue is a subscription too
            r = w.subscribe("persistent://subs/a/t1", "s4", 2, sub_type="Shared")
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            self.assertEqual(r.cmd.error.message, "Tenant subs reached max subscriptions limit (3)")
            status, answer = call_json(self.node, "PUT", "/admin/v2/persistent/subs/b/t2/subscription/s4")
            self.assertEqual(status, 412, answer)
            # A reader's subscription is not kept, and not counted.
            self.assertEqual(w.subscribe("persistent://subs/a/t1", "reader", 3, durable=False).type,
                             pb.BaseCommand.SUCCESS)
            # Existing subscriptions take new consumers.
            self.assertEqual(w.subscribe("persistent://subs/b/t2", "s2", 4).type, pb.BaseCommand.SUCCESS)
        # Unloaded topics' subscriptions still count.
        self.expect("PUT", "/admin/v2/persistent/subs/a/t1/unload")
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = w.subscribe("persistent://subs/a/t3", "s4", 1)
            self.assertEqual(r.cmd.error.error, pb.ConsumerBusy)
            # Deleting one makes room.
            self.expect("DELETE", "/admin/v2/persistent/subs/a/t1/subscription/s1")
            self.assertEqual(w.subscribe("persistent://subs/a/t3", "s4", 2).type, pb.BaseCommand.SUCCESS)


if __name__ == "__main__":
    unittest.main()
