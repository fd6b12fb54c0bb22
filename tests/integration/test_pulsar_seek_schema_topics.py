"""SEEK, GET_SCHEMA / GET_OR_CREATE_SCHEMA and GET_TOPICS_OF_NAMESPACE over
the Pulsar protocol, against the real binary, with every field of the
answers checked as a client library reads them."""
import struct
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import Node, NodeTestCase, call_json
from pulsar_wire import PulsarWire, command

NS = "public/default"


def version_number(raw: bytes) -> int:
    return struct.unpack(">q", raw)[0]


def avro(definition: str) -> pb.Schema:
    s = pb.Schema(name="user", schema_data=definition.encode(), type=pb.Schema.Avro)
    s.properties.add(key="owner", value="team-a")
    return s


class SeekTest(NodeTestCase):
    def setUp(self):
        self.wire = PulsarWire(self.node.ports["pulsar"])

    def tearDown(self):
        self.wire.close()

    def produce(self, topic, count, publish_time=None):
        w = self.wire
        pid = w.request_id()
        self.assertEqual(w.create_producer(topic, pid).type, pb.BaseCommand.PRODUCER_SUCCESS)
        ids = []
        for i in range(count):
            extra = {} if publish_time is None else {"publish_time": publish_time + i}
            r = w.send(pid, f"m{i}".encode(), **extra)
            self.assertEqual(r.type, pb.BaseCommand.SEND_RECEIPT)
            ids.append(r.cmd.send_receipt.message_id)
        return ids

    def consume(self, topic, sub, cid, count, initial="Earliest"):
        w = self.wire
        self.assertEqual(w.subscribe(topic, sub, cid, initial=initial).type, pb.BaseCommand.SUCCESS)
        w.flow(cid, 1000)
        return [m.payload.decode() for m in w.receive(cid, count)]

    def seek(self, cid, **where):
        w = self.wire
        answer = w.request("SEEK", ["SUCCESS", "ERROR"], consumer_id=cid, **where)
        return answer

    def test_seek_to_a_message_id_replays_from_it(self):
        topic = "persistent://public/default/seek-by-id"
        ids = self.produce(topic, 10)
        self.assertEqual(self.consume(topic, "s", 1, 10), [f"m{i}" for i in range(10)])
        for mid in ids:
            self.wire.ack(1, mid)
        answer = self.seek(1, message_id=ids[3])
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        # As in Pulsar, the consumer is detached and subscribes again.
        closed = self.wire.next("CLOSE_CONSUMER")
        self.assertEqual(closed.cmd.close_consumer.consumer_id, 1)
        self.assertEqual(self.consume(topic, "s", 1, 7), [f"m{i}" for i in range(3, 10)])

    def test_seek_to_earliest_and_latest(self):
        topic = "persistent://public/default/seek-ends"
        self.produce(topic, 4)
        self.assertEqual(self.consume(topic, "s", 1, 4), ["m0", "m1", "m2", "m3"])
        earliest = pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1)
        self.assertEqual(self.seek(1, message_id=earliest).type, pb.BaseCommand.SUCCESS)
        self.wire.next("CLOSE_CONSUMER")
        self.assertEqual(self.consume(topic, "s", 1, 4), ["m0", "m1", "m2", "m3"])
        latest = pb.MessageIdData(ledgerId=2**63 - 1, entryId=2**63 - 1)
        self.assertEqual(self.seek(1, message_id=latest).type, pb.BaseCommand.SUCCESS)
        self.wire.next("CLOSE_CONSUMER")
        self.assertEqual(self.wire.subscribe(topic, "s", 1).type, pb.BaseCommand.SUCCESS)
        self.wire.flow(1, 100)
        # Nothing is left before the latest: the next message is a new one.
        pid = self.wire.request_id()
        self.wire.create_producer(topic, pid)
        self.wire.send(pid, b"after")
        self.assertEqual(self.wire.receive(1, 1)[0].payload, b"after")

    def test_seek_by_publish_time(self):
        topic = "persistent://public/default/seek-by-time"
        self.produce(topic, 10, publish_time=1_700_000_000_000)
        self.assertEqual(len(self.consume(topic, "s", 1, 10)), 10)
        answer = self.seek(1, message_publish_time=1_700_000_000_006)
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        self.wire.next("CLOSE_CONSUMER")
        self.assertEqual(self.consume(topic, "s", 1, 4), ["m6", "m7", "m8", "m9"])

    def test_seek_errors_keep_the_connection(self):
        answer = self.seek(99, message_publish_time=1)
        self.assertEqual(answer.type, pb.BaseCommand.ERROR)
        self.assertEqual(answer.cmd.error.error, pb.ConsumerNotFound)
        topic = "persistent://public/default/seek-errors"
        self.produce(topic, 1)
        self.assertEqual(self.consume(topic, "s", 1, 1), ["m0"])
        answer = self.seek(1)  # neither a message id nor a time
        self.assertEqual(answer.type, pb.BaseCommand.ERROR)
        # Still serving.
        self.assertEqual(self.wire.request("GET_LAST_MESSAGE_ID", ["GET_LAST_MESSAGE_ID_RESPONSE", "ERROR"],
                                           consumer_id=1).type, pb.BaseCommand.GET_LAST_MESSAGE_ID_RESPONSE)


class SchemaTest(unittest.TestCase):
    def test_versions_survive_a_restart(self):
        topic = "persistent://public/default/users"
        with Node(keep_data=True) as node:
            with PulsarWire(node.ports["pulsar"]) as w:
                missing = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic)
                self.assertEqual(missing.cmd.getSchemaResponse.error_code, pb.TopicNotFound)

                def register(schema):
                    r = w.request("GET_OR_CREATE_SCHEMA", ["GET_OR_CREATE_SCHEMA_RESPONSE"], topic=topic,
                                  schema=schema).cmd.getOrCreateSchemaResponse
                    self.assertFalse(r.HasField("error_code"), r)
                    return version_number(r.schema_version)

                self.assertEqual(register(avro('{"v":1}')), 0)
                self.assertEqual(register(avro('{"v":1}')), 0)
                self.assertEqual(register(avro('{"v":2}')), 1)
                # A producer bringing the schema gets its version too.
            node.stop()
            node.log.close()
            node.start()
            with PulsarWire(node.ports["pulsar"]) as w:
                latest = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic).cmd.getSchemaResponse
                self.assertFalse(latest.HasField("error_code"), latest)
                self.assertEqual(version_number(latest.schema_version), 1)
                self.assertEqual(latest.schema.schema_data, b'{"v":2}')
                self.assertEqual(latest.schema.type, pb.Schema.Avro)
                self.assertEqual([(p.key, p.value) for p in latest.schema.properties], [("owner", "team-a")])
                first = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic,
                                  schema_version=struct.pack(">q", 0)).cmd.getSchemaResponse
                self.assertEqual(first.schema.schema_data, b'{"v":1}')
                # Partitions share their topic's schema.
                part = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"],
                                 topic=topic + "-partition-2").cmd.getSchemaResponse
                self.assertEqual(part.schema.schema_data, b'{"v":2}')
            node.stop()

    def test_producers_register_their_schema(self):
        topic = "persistent://public/default/orders-with-schema"
        with Node() as node, PulsarWire(node.ports["pulsar"]) as w:
            first = w.create_producer(topic, 1, schema=avro('{"v":1}'))
            self.assertEqual(first.type, pb.BaseCommand.PRODUCER_SUCCESS, first.cmd)
            self.assertEqual(version_number(first.cmd.producer_success.schema_version), 0)
            same = w.create_producer(topic, 2, schema=avro('{"v":1}'))
            self.assertEqual(version_number(same.cmd.producer_success.schema_version), 0)
            newer = w.create_producer(topic, 3, schema=avro('{"v":2}'))
            self.assertEqual(version_number(newer.cmd.producer_success.schema_version), 1)
            plain = w.create_producer(topic, 4)
            self.assertFalse(plain.cmd.producer_success.HasField("schema_version"))
            bad = w.create_producer(topic, 5, schema=pb.Schema(name="x", schema_data=b"", type=pb.Schema.AutoConsume))
            self.assertEqual(bad.type, pb.BaseCommand.ERROR)
            self.assertEqual(bad.cmd.error.error, pb.IncompatibleSchema)
            # The refused producer does not exist; the others still send.
            self.assertEqual(w.send(5, b"x").type, pb.BaseCommand.SEND_ERROR)
            self.assertEqual(w.send(3, b"x").type, pb.BaseCommand.SEND_RECEIPT)
            node.stop()

    def test_typed_consumers_register_their_schema(self):
        topic = "persistent://public/default/read-typed"
        with Node() as node, PulsarWire(node.ports["pulsar"]) as w:
            auto = pb.Schema(name="auto", schema_data=b"", type=pb.Schema.AutoConsume)
            self.assertEqual(w.subscribe(topic, "auto", 1, schema=auto).type, pb.BaseCommand.SUCCESS)
            none = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic).cmd.getSchemaResponse
            self.assertEqual(none.error_code, pb.TopicNotFound)  # AUTO_CONSUME only reads
            self.assertEqual(w.subscribe(topic, "typed", 2, schema=avro('{"v":1}')).type, pb.BaseCommand.SUCCESS)
            got = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic).cmd.getSchemaResponse
            self.assertEqual(got.schema.schema_data, b'{"v":1}')
            self.assertEqual(version_number(got.schema_version), 0)
            # The consumer is attached: a message produced now reaches it.
            w.create_producer(topic, 7, schema=avro('{"v":1}'))
            w.send(7, b"typed message")
            w.flow(2, 10)
            self.assertEqual(w.receive(2, 1)[0].payload, b"typed message")
            node.stop()

    def test_bad_requests_are_answered(self):
        with Node() as node, PulsarWire(node.ports["pulsar"]) as w:
            bad_topic = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic="persistent://no/such/ns/x")
            self.assertEqual(bad_topic.cmd.getSchemaResponse.error_code, pb.InvalidTopicName)
            bad_version = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic="t", schema_version=b"xyz")
            self.assertTrue(bad_version.cmd.getSchemaResponse.HasField("error_code"))
            bad_type = w.request("GET_OR_CREATE_SCHEMA", ["GET_OR_CREATE_SCHEMA_RESPONSE"], topic="t",
                                 schema=pb.Schema(name="x", schema_data=b"", type=pb.Schema.AutoConsume))
            self.assertEqual(bad_type.cmd.getOrCreateSchemaResponse.error_code, pb.IncompatibleSchema)
            # Nothing was stored, and the connection still serves.
            self.assertEqual(w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic="t")
                             .cmd.getSchemaResponse.error_code, pb.TopicNotFound)
            node.stop()


class ConnectTest(NodeTestCase):
    def test_credentials_go_to_the_authentication_hook(self):
        # The default hook accepts every client, with or without credentials.
        with PulsarWire(self.node.ports["pulsar"]) as plain:
            self.assertEqual(plain.connected.type, pb.BaseCommand.CONNECTED)
        with PulsarWire(self.node.ports["pulsar"], protocol_version=21, auth_method_name="token",
                        auth_data=b"eyJhbGciOiJIUzI1NiJ9.e30.sig") as w:
            self.assertEqual(w.connected.cmd.connected.protocol_version, 21)
            self.assertEqual(w.create_producer("persistent://public/default/with-token", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)


class ClientInStatsTest(NodeTestCase):
    def test_stats_say_who_the_clients_are(self):
        topic = "persistent://public/default/who"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.subscribe(topic, "s", 2).type, pb.BaseCommand.SUCCESS)
            local = "127.0.0.1:%d" % w.sock.getsockname()[1]
            status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/who/stats")
            self.assertEqual(status, 200, stats)
            for client in (stats["publishers"][0], stats["subscriptions"]["s"]["consumers"][0]):
                self.assertEqual(client["protocol"], "pulsar")
                self.assertEqual(client["clientVersion"], "pulsar-wire-test")
                self.assertEqual(client["address"], local)
                self.assertRegex(client["connectedSince"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


class ConsumerStatsAndRefusalsTest(NodeTestCase):
    def test_consumer_stats(self):
        topic = "persistent://public/default/consumer-stats"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            w.create_producer(topic, 1)
            for i in range(5):
                w.send(1, b"m%d" % i)
            self.assertEqual(w.subscribe(topic, "s", 2, sub_type="Shared", initial="Earliest",
                                         consumer_name="reader-1").type, pb.BaseCommand.SUCCESS)
            w.flow(2, 3)
            w.receive(2, 3)
            r = w.request("CONSUMER_STATS", ["CONSUMER_STATS_RESPONSE"], consumer_id=2).cmd.consumerStatsResponse
            self.assertFalse(r.HasField("error_code"), r)
            self.assertEqual(r.consumerName, "reader-1")
            self.assertEqual(r.type, "Shared")
            self.assertEqual(r.availablePermits, 0)
            self.assertEqual(r.unackedMessages, 3)
            self.assertEqual(r.msgBacklog, 5)
            self.assertEqual(r.address, "127.0.0.1:%d" % w.sock.getsockname()[1])
            self.assertTrue(r.connectedSince.endswith("Z"))
            missing = w.request("CONSUMER_STATS", ["CONSUMER_STATS_RESPONSE"], consumer_id=99)
            self.assertEqual(missing.cmd.consumerStatsResponse.error_code, pb.ConsumerNotFound)

    def test_transactions_and_watches_are_refused_with_an_answer(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            txn = w.request("NEW_TXN", ["ERROR"], txn_ttl_seconds=60)
            self.assertEqual(txn.cmd.error.error, pb.NotAllowedError)
            watch = w.request("WATCH_TOPIC_LIST", ["ERROR"], watcher_id=1, namespace="public/default",
                              topics_pattern="persistent://public/default/.*")
            self.assertEqual(watch.cmd.error.error, pb.NotAllowedError)
            # The connection still serves.
            self.assertEqual(w.create_producer("persistent://public/default/after-refusals", 5).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)


class TopicsOfNamespaceTest(NodeTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with PulsarWire(cls.node.ports["pulsar"]) as w:
            for i, name in enumerate(["orders-eu", "orders-us", "billing"]):
                w.create_producer(f"persistent://{NS}/{name}", i + 1)
        status, _ = call_json(cls.node, "PUT", f"/admin/v2/persistent/{NS}/clicks/partitions", 2)
        assert status == 204, status

    def topics(self, w, **fields):
        return w.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                         namespace=NS, **fields)

    def test_lists_topics_and_partitions(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = self.topics(w).cmd.getTopicsOfNamespaceResponse
            names = set(r.topics)
            for t in ["orders-eu", "orders-us", "billing", "clicks-partition-0", "clicks-partition-1"]:
                self.assertIn(f"persistent://{NS}/{t}", names)
            self.assertFalse(r.filtered)
            none = self.topics(w, mode=pb.CommandGetTopicsOfNamespace.NON_PERSISTENT).cmd
            self.assertEqual(list(none.getTopicsOfNamespaceResponse.topics), [])

    def test_pattern_and_hash(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            r = self.topics(w, topics_pattern=f"persistent://{NS}/orders-.*").cmd.getTopicsOfNamespaceResponse
            self.assertEqual(sorted(r.topics), [f"persistent://{NS}/orders-eu", f"persistent://{NS}/orders-us"])
            self.assertTrue(r.filtered)
            self.assertTrue(r.topics_hash)
            again = self.topics(w, topics_pattern=f"persistent://{NS}/orders-.*",
                                topics_hash=r.topics_hash).cmd.getTopicsOfNamespaceResponse
            self.assertFalse(again.changed)
            self.assertEqual(list(again.topics), [])
            w.create_producer(f"persistent://{NS}/orders-apac", 10)
            grown = self.topics(w, topics_pattern=f"persistent://{NS}/orders-.*",
                                topics_hash=r.topics_hash).cmd.getTopicsOfNamespaceResponse
            self.assertTrue(grown.changed)
            self.assertEqual(len(grown.topics), 3)

    def test_partitioned_metadata(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            def partitions(topic):
                r = w.request("PARTITIONED_METADATA", ["PARTITIONED_METADATA_RESPONSE"], topic=topic)
                return r.cmd.partitionMetadataResponse.partitions
            self.assertEqual(partitions(f"persistent://{NS}/clicks"), 2)
            self.assertEqual(partitions(f"persistent://{NS}/orders-eu"), 0)
            self.assertEqual(partitions(f"persistent://{NS}/never-used"), 0)

    def test_a_hostile_pattern_is_answered_at_once_and_holds_no_one_up(self):
        # "(a*)*b" against a long run of a's: a backtracking engine tries
        # every way to split the run before it gives up, 2^64 of them here.
        ns = "public/patterns"
        self.assertEqual(call_json(self.node, "PUT", f"/admin/v2/namespaces/{ns}")[0], 204)
        with PulsarWire(self.node.ports["pulsar"]) as w, PulsarWire(self.node.ports["pulsar"]) as other:
            self.assertEqual(w.create_producer(f"persistent://{ns}/{'a' * 64}", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            hostile_id = w.request_id()
            w.write(command("GET_TOPICS_OF_NAMESPACE", request_id=hostile_id, namespace=ns,
                            topics_pattern=f"persistent://{ns}/(a*)*b"))
            # Another client's metadata request goes through.
            listed = other.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                                   namespace=ns)
            self.assertEqual(list(listed.cmd.getTopicsOfNamespaceResponse.topics), [f"persistent://{ns}/{'a' * 64}"])
            # And the hostile one is answered: nothing matches.
            hostile = w.next("GET_TOPICS_OF_NAMESPACE_RESPONSE",
                             where=lambda f: f.cmd.getTopicsOfNamespaceResponse.request_id == hostile_id)
            self.assertEqual(list(hostile.cmd.getTopicsOfNamespaceResponse.topics), [])
            self.assertTrue(hostile.cmd.getTopicsOfNamespaceResponse.filtered)
            # A pattern over the largest is refused, as is what RE2 cannot
            # match in linear time (a backreference).
            too_long = self.topics(w, topics_pattern="a" * 5000)
            self.assertEqual(too_long.type, pb.BaseCommand.ERROR)
            self.assertIn("over the largest", too_long.cmd.error.message)
            self.assertEqual(self.topics(w, topics_pattern=r"(a)\1").type, pb.BaseCommand.ERROR)

    def test_bad_input_is_an_error(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(self.topics(w, topics_pattern="(unclosed").type, pb.BaseCommand.ERROR)
            bad_ns = w.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                               namespace="no-slash")
            self.assertEqual(bad_ns.type, pb.BaseCommand.ERROR)
            missing = w.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                                namespace="public/nope")
            self.assertEqual(missing.type, pb.BaseCommand.ERROR)
            self.assertEqual(self.topics(w).type, pb.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE)


if __name__ == "__main__":
    unittest.main()
