"""Real Kafka clients against the real binary: kcat (metadata, produce,
consume) and confluent-kafka (librdkafka), and messages crossing between
the Kafka and Pulsar protocols with key, headers/properties and payload
intact."""
import struct
import subprocess
import time
import unittest
import zlib

import confluent_kafka as ck
import pulsar_api_pb2 as pb
from kafka_wire import KafkaNodeTestCase
from magnetar_harness import call_json
from pulsar_wire import PulsarWire

TIMEOUT_S = 20


def split_batch(payload: bytes, count: int):
    """The (SingleMessageMetadata, payload) pairs of a Pulsar batch."""
    out, pos = [], 0
    for _ in range(count):
        size = struct.unpack_from(">I", payload, pos)[0]
        pos += 4
        single = pb.SingleMessageMetadata.FromString(payload[pos:pos + size])
        pos += size
        out.append((single, payload[pos:pos + single.payload_size]))
        pos += single.payload_size
    return out


class KafkaClientsTest(KafkaNodeTestCase):
    def kcat_consume(self, topic, fmt="%k|%s|%h|%o\\n"):
        return self.kcat("-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", fmt.replace("\\n", "\n")).splitlines()

    def test_kcat_metadata_lists_this_broker_and_creates_a_topic_asked_for(self):
        out = self.kcat("-L", "-t", "kcat-meta")
        self.assertIn(f"broker 0 at {self.bootstrap}", out)
        self.assertIn('topic "kcat-meta" with 1 partitions', out)
        self.assertIn("partition 0, leader 0", out)
        # Created: it is listed in the namespace from now on.
        self.assertIn('topic "kcat-meta"', self.kcat("-L"))
        status, topics = call_json(self.node, "GET", "/admin/v2/persistent/public/default")
        self.assertEqual(status, 200)
        self.assertIn("persistent://public/default/kcat-meta", topics)

    def test_kcat_produce_then_consume_from_the_beginning(self):
        self.kcat("-P", "-t", "kcat-orders", "-K", ":", "-H", "source=kcat", stdin=b"k1:first\nk2:second\n")
        self.kcat("-P", "-t", "kcat-orders", "-K", ":", stdin=b"k3:third\n")
        self.assertEqual(self.kcat_consume("kcat-orders"),
                         ["k1|first|source=kcat|0", "k2|second|source=kcat|1", "k3|third||2"])

    def test_confluent_kafka_producer_and_assigned_consumer(self):
        topic = "ck-orders"
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all"})
        offsets = []
        for i in range(20):
            p.produce(topic, key=b"key-%d" % (i % 3), value=b"value-%d" % i, headers=[("n", str(i).encode())],
                      timestamp=1700000000000 + i, on_delivery=lambda e, m: offsets.append((e, m.offset())))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        self.assertEqual(sorted(o for _, o in offsets), list(range(20)))
        self.assertTrue(all(e is None for e, _ in offsets))

        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        try:
            self.assertEqual(c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=TIMEOUT_S), (0, 20))
            by_time = c.offsets_for_times([ck.TopicPartition(topic, 0, 0)], timeout=TIMEOUT_S)
            self.assertEqual(by_time[0].offset, 0)
            c.assign([ck.TopicPartition(topic, 0, 5)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 15 and time.monotonic() < deadline:
                m = c.poll(1.0)
                if m is None or m.error():
                    continue
                got.append(m)
            self.assertEqual([m.offset() for m in got], list(range(5, 20)))
            self.assertEqual(got[0].key(), b"key-2")
            self.assertEqual(got[0].value(), b"value-5")
            self.assertEqual(got[0].headers(), [("n", b"5")])
            self.assertEqual(got[0].timestamp(), (ck.TIMESTAMP_CREATE_TIME, 1700000000005))
        finally:
            c.close()

    def test_every_compression_codec_librdkafka_writes(self):
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            topic = f"ck-{codec}"
            p = ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "compression.type": codec,
                             "linger.ms": 50})
            errors = []
            for i in range(50):
                p.produce(topic, key=b"k", value=(b"%s-%d " % (codec.encode(), i)) * 20,
                          on_delivery=lambda e, m: errors.append(e))
            self.assertEqual(p.flush(TIMEOUT_S), 0)
            self.assertEqual(errors, [None] * 50, codec)
            lines = self.kcat_consume(topic, fmt="%o %s\\n")
            self.assertEqual(len(lines), 50, codec)
            self.assertEqual(lines[49], "49 " + f"{codec}-49 " * 20, codec)

    def test_compressed_pulsar_batches_are_served_to_kafka_decompressed(self):
        topic = "cross-zlib"
        batch = b""
        for value in (b"zipped-a", b"zipped-b"):
            single = pb.SingleMessageMetadata(payload_size=len(value), partition_key="z")
            raw = single.SerializeToString()
            batch += struct.pack(">I", len(raw)) + raw + value
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(f"persistent://public/default/{topic}", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            md = pb.MessageMetadata(producer_name="pulsar-side", sequence_id=0, publish_time=int(time.time() * 1000),
                                    num_messages_in_batch=2, compression=pb.ZLIB, uncompressed_size=len(batch))
            w.write(pb.BaseCommand(type=pb.BaseCommand.SEND,
                                   send=pb.CommandSend(producer_id=1, sequence_id=0, num_messages=2)),
                    md, zlib.compress(batch))
            self.assertEqual(w.next("SEND_RECEIPT").type, pb.BaseCommand.SEND_RECEIPT)
        self.assertEqual(self.kcat_consume(topic), ["z|zipped-a||0", "z|zipped-b||1"])

    def test_partitions_of_a_partitioned_topic_are_kafka_partitions(self):
        status, _ = call_json(self.node, "PUT", "/admin/v2/persistent/public/default/parts/partitions", 3)
        self.assertEqual(status, 204)
        out = self.kcat("-L", "-t", "parts")
        self.assertIn('topic "parts" with 3 partitions', out)
        for p in range(3):
            self.kcat("-P", "-t", "parts", "-p", str(p), "-K", ":", stdin=f"k{p}:to-{p}\n".encode())
        self.kcat("-P", "-t", "parts", "-p", "2", stdin=b"more\n")
        self.assertEqual(self.kcat("-C", "-t", "parts", "-p", "2", "-o", "beginning", "-e", "-q", "-f",
                                   "%p %o %s\n").splitlines(), ["2 0 to-2", "2 1 more"])
        # Partition 1 is the Pulsar topic parts-partition-1.
        with PulsarWire(self.node.ports["pulsar"]) as w:
            sub = w.subscribe("persistent://public/default/parts-partition-1", "s", 1, initial="Earliest")
            self.assertEqual(sub.type, pb.BaseCommand.SUCCESS)
            w.flow(1, 10)
            frame = w.receive(1, 1)[0]
        self.assertEqual(split_batch(frame.payload, 1)[0][1], b"to-1")
        # A partition the topic does not have.
        r = subprocess.run(["kcat", "-b", self.bootstrap, "-P", "-t", "parts", "-p", "7"], input=b"x\n",
                           capture_output=True, timeout=TIMEOUT_S)
        self.assertNotEqual(r.returncode, 0)

    def test_a_batch_larger_than_pulsars_largest_message_is_refused(self):
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "message.max.bytes": 8000000})
        errors = []
        p.produce("ck-large", value=b"z" * 6000000, on_delivery=lambda e, m: errors.append(e))
        p.produce("ck-large", value=b"fits", on_delivery=lambda e, m: errors.append(e))
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        codes = sorted(str(e.code()) if e else "ok" for e in errors)
        self.assertIn("ok", codes)
        self.assertIn(str(ck.KafkaError.MSG_SIZE_TOO_LARGE), codes)
        self.assertEqual(self.kcat_consume("ck-large", fmt="%s\\n"), ["fits"])

    def test_kafka_in_pulsar_out(self):
        topic = "cross-k2p"
        self.kcat("-P", "-t", topic, "-K", ":", "-H", "trace=t-1", "-H", "team=payments",
                  stdin=b"user-7:{\"amount\":12}\n")
        with PulsarWire(self.node.ports["pulsar"]) as w:
            sub = w.subscribe(f"persistent://public/default/{topic}", "from-kafka", 1, initial="Earliest")
            self.assertEqual(sub.type, pb.BaseCommand.SUCCESS)
            w.flow(1, 100)
            frame = w.receive(1, 1)[0]
        self.assertEqual(frame.metadata.num_messages_in_batch, 1)
        [(single, payload)] = split_batch(frame.payload, 1)
        self.assertEqual(single.partition_key, "user-7")
        self.assertEqual(payload, b'{"amount":12}')
        self.assertEqual([(p.key, p.value) for p in single.properties], [("trace", "t-1"), ("team", "payments")])

    def test_pulsar_in_kafka_out(self):
        topic = "cross-p2k"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(f"persistent://public/default/{topic}", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            # One message on its own, then a batch of two.
            md = pb.MessageMetadata(producer_name="pulsar-side", sequence_id=0, publish_time=int(time.time() * 1000),
                                    partition_key="order-1", event_time=1700000000042)
            md.properties.add(key="origin", value="pulsar")
            w.write(pb.BaseCommand(type=pb.BaseCommand.SEND, send=pb.CommandSend(producer_id=1, sequence_id=0)),
                    md, b"single")
            self.assertEqual(w.next("SEND_RECEIPT").type, pb.BaseCommand.SEND_RECEIPT)
            batch = b""
            for key, value in (("order-2", b"batched-a"), ("order-3", b"batched-b")):
                single = pb.SingleMessageMetadata(payload_size=len(value), partition_key=key)
                single.properties.add(key="origin", value="pulsar-batch")
                raw = single.SerializeToString()
                batch += struct.pack(">I", len(raw)) + raw + value
            md = pb.MessageMetadata(producer_name="pulsar-side", sequence_id=1, publish_time=int(time.time() * 1000),
                                    num_messages_in_batch=2)
            w.write(pb.BaseCommand(type=pb.BaseCommand.SEND,
                                   send=pb.CommandSend(producer_id=1, sequence_id=1, num_messages=2)), md, batch)
            self.assertEqual(w.next("SEND_RECEIPT").type, pb.BaseCommand.SEND_RECEIPT)
        self.assertEqual(self.kcat_consume(topic), [
            "order-1|single|origin=pulsar|0",
            "order-2|batched-a|origin=pulsar-batch|1",
            "order-3|batched-b|origin=pulsar-batch|2",
        ])
        out = self.kcat("-C", "-t", topic, "-o", "0", "-c", "1", "-e", "-q", "-f", "%T\n")
        self.assertEqual(out.strip(), "1700000000042")

    def test_an_entry_kafka_cannot_read_is_skipped_and_consumers_go_on(self):
        topic = "cross-unreadable"
        before = self.node.metric("magnetar_kafka_fetch_skipped_entries_total") or 0
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(f"persistent://public/default/{topic}", 1).type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(1, b"before").type, pb.BaseCommand.SEND_RECEIPT)
            # A batch of two that says it is zlib-compressed but is not:
            # offsets 1 and 2 hold nothing a Kafka client can read.
            self.assertEqual(w.send_unreadable(1, messages=2, sequence_id=1).type, pb.BaseCommand.SEND_RECEIPT)
            # kcat reads to the end of the partition (offset 3) past the
            # offsets it cannot be given: left out, they would keep it asking
            # for offset 1 forever.
            self.assertEqual(self.kcat_consume(topic, fmt="%o %s\\n"), ["0 before"])
            self.assertEqual(w.send(1, b"after", sequence_id=2).type, pb.BaseCommand.SEND_RECEIPT)
        # A consumer that starts on them goes on to what follows.
        c = ck.Consumer({"bootstrap.servers": self.bootstrap, "group.id": "unused", "enable.auto.commit": False})
        try:
            c.assign([ck.TopicPartition(topic, 0, 1)])
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while not got and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got.append((m.offset(), m.value()))
            self.assertEqual(got, [(3, b"after")])
        finally:
            c.close()
        self.assertGreater(self.node.metric("magnetar_kafka_fetch_skipped_entries_total") or 0, before)
        self.assertIn("(offsets 1..2) cannot be converted to records and is skipped", self.node.read_log())

if __name__ == "__main__":
    unittest.main()
