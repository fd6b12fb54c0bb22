"""Chunked messages, sent over the real Pulsar wire as the official clients
chunk them: every chunk a SEND with the message's sequence id, is_chunk,
and uuid / chunk_id / num_chunks_from_msg / total_chunk_msg_size in its
metadata. With deduplication on, an 8 MiB message is stored whole and its
resent last chunk is not; Pulsar consumers get every chunk, while Kafka and
AMQP consumers, which take whole messages only, never see a raw chunk and
still read on past them."""
import json
import os
import time
import unittest

import confluent_kafka as ck
import pika

import pulsar_api_pb2 as pb
from magnetar_harness import NodeTestCase, call_json
from pulsar_wire import PulsarWire

DUPLICATE = 2**64 - 1  # the (-1, -1) id of a send that was stored before
TIMEOUT_S = 20.0


def send_chunked(wire, producer_id, producer_name, sequence_id, message: bytes, chunk_size):
    """Sends `message` in chunks, without waiting; how many."""
    chunks = [message[i:i + chunk_size] for i in range(0, len(message), chunk_size)]
    for i, piece in enumerate(chunks):
        wire.send(producer_id, piece, sequence_id=sequence_id, wait=False, checksum=False,
                  send_fields={"is_chunk": True}, producer_name=producer_name,
                  uuid=f"{producer_name}-{sequence_id}", chunk_id=i, num_chunks_from_msg=len(chunks),
                  total_chunk_msg_size=len(message))
    return len(chunks)


def receipts(wire, count):
    """The next `count` SEND_RECEIPT or SEND_ERROR frames, in order."""
    return [wire.next(None, timeout=TIMEOUT_S, where=lambda f: f.type in (pb.BaseCommand.SEND_RECEIPT,
                                                                          pb.BaseCommand.SEND_ERROR))
            for _ in range(count)]


class ChunksWithDeduplicationTest(NodeTestCase):
    TOPIC = "persistent://public/chunked/big"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        for method, path, body in (("PUT", "/admin/v2/namespaces/public/chunked", {}),
                                   ("POST", "/admin/v2/namespaces/public/chunked/deduplication", True)):
            status, reply = call_json(cls.node, method, path, body)
            assert status in (200, 204), (status, reply)

    def test_an_8_mib_message_is_stored_whole_and_its_resent_last_chunk_is_not(self):
        message = os.urandom(8 << 20)
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.subscribe(self.TOPIC, "all", 1, initial="Earliest").type, pb.BaseCommand.SUCCESS)
            w.flow(1, 1000)
            ok = w.create_producer(self.TOPIC, 1, producer_name="chunker")
            self.assertEqual(ok.type, pb.BaseCommand.PRODUCER_SUCCESS, ok.cmd)
            count = send_chunked(w, 1, "chunker", 0, message, 1 << 20)
            self.assertEqual(count, 8)
            answers = receipts(w, count)
            self.assertEqual([a.type for a in answers], [pb.BaseCommand.SEND_RECEIPT] * count)
            self.assertNotIn(DUPLICATE, [a.cmd.send_receipt.message_id.ledgerId for a in answers])
            frames = w.receive(1, count, timeout=TIMEOUT_S)
            self.assertEqual([f.metadata.chunk_id for f in frames], list(range(count)))
            self.assertEqual({f.metadata.uuid for f in frames}, {"chunker-0"})
            self.assertEqual(b"".join(f.payload for f in frames), message)
            # The last chunk again (a client resending after a reconnect): a
            # duplicate, answered with (-1, -1) and not stored.
            last = message[7 << 20:]
            w.send(1, last, sequence_id=0, wait=False, checksum=False, send_fields={"is_chunk": True},
                   producer_name="chunker", uuid="chunker-0", chunk_id=7, num_chunks_from_msg=8,
                   total_chunk_msg_size=len(message))
            again = receipts(w, 1)[0]
            self.assertEqual(again.type, pb.BaseCommand.SEND_RECEIPT)
            self.assertEqual(again.cmd.send_receipt.message_id.ledgerId, DUPLICATE)
            # The next message is new.
            after = w.send(1, b"next", sequence_id=1, producer_name="chunker")
            self.assertNotEqual(after.cmd.send_receipt.message_id.ledgerId, DUPLICATE)
            self.assertEqual(w.receive(1, 1, timeout=TIMEOUT_S)[0].payload, b"next")

    def test_the_sequence_id_of_a_chunked_message_counts_once_its_last_chunk_is_stored(self):
        topic = "persistent://public/chunked/half"
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1, producer_name="halfway").type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertNotEqual(w.send(1, b"first", sequence_id=0, producer_name="halfway")
                                .cmd.send_receipt.message_id.ledgerId, DUPLICATE)
            # Two of three chunks: the message is not complete, so its
            # sequence id is not taken yet...
            def send_chunk(producer_id, i):
                """Chunk i of 3 of message "halfway-1" (sequence id 1); not refused as a duplicate."""
                r = w.send(producer_id, b"c%d" % i, sequence_id=1, checksum=False, send_fields={"is_chunk": True},
                           producer_name="halfway", uuid="halfway-1", chunk_id=i, num_chunks_from_msg=3,
                           total_chunk_msg_size=6)
                self.assertNotEqual(r.cmd.send_receipt.message_id.ledgerId, DUPLICATE)

            for i in range(2):
                send_chunk(1, i)
            w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=1)
            reopened = w.create_producer(topic, 2, producer_name="halfway")
            self.assertEqual(reopened.cmd.producer_success.last_sequence_id, 0)
            # ...and a client that sends the whole message again has it stored.
            for i in range(3):
                send_chunk(2, i)
            w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=2)
            self.assertEqual(w.create_producer(topic, 3, producer_name="halfway").cmd.producer_success
                             .last_sequence_id, 1)


class ChunksOverOtherProtocolsTest(NodeTestCase):
    CHUNKS = 3

    def publish(self, topic, name):
        """'before', a chunked message, then nothing: the chunks end the topic."""
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1, producer_name=name).type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(1, b"before", sequence_id=0, producer_name=name).type,
                             pb.BaseCommand.SEND_RECEIPT)
            count = send_chunked(w, 1, name, 1, b"C" * 3000, 1000)
            self.assertEqual(count, self.CHUNKS)
            self.assertEqual([r.type for r in receipts(w, count)], [pb.BaseCommand.SEND_RECEIPT] * count)

    def publish_after(self, topic, name):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(topic, 1, producer_name=name + "-2").type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(1, b"after", producer_name=name + "-2").type, pb.BaseCommand.SEND_RECEIPT)

    def test_kafka_skips_chunks_and_reads_on_past_them(self):
        self.publish("persistent://public/default/chunky", "kafka-side")
        skipped_before = self.node.metric("magnetar_kafka_chunks_skipped_total")
        fetching = {}  # librdkafka's statistics: the offset it fetches next

        def stats(raw):
            partition = json.loads(raw)["topics"].get("chunky", {}).get("partitions", {}).get("0")
            if partition:
                fetching["next"] = partition["next_offset"]
        c = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}", "group.id": "chunk-readers",
                         "enable.auto.commit": False, "statistics.interval.ms": 100, "stats_cb": stats})
        try:
            tp = ck.TopicPartition("chunky", 0, ck.OFFSET_BEGINNING)
            c.assign([tp])
            _, high = c.get_watermark_offsets(ck.TopicPartition("chunky", 0), timeout=TIMEOUT_S)
            self.assertEqual(high, 1 + self.CHUNKS)
            values = []
            deadline = time.monotonic() + TIMEOUT_S
            # The consumer fetches on past the chunks, though no record
            # follows them (its application position stays after 'before').
            while fetching.get("next") != high:
                self.assertLess(time.monotonic(), deadline,
                                f"the consumer stopped at the chunks ({fetching}); got {values}")
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    values.append(m.value())
            self.assertEqual(values, [b"before"])
            self.assertGreaterEqual(self.node.metric("magnetar_kafka_chunks_skipped_total") - skipped_before, self.CHUNKS)
            self.publish_after("persistent://public/default/chunky", "kafka-side")
            deadline = time.monotonic() + TIMEOUT_S
            while True:
                self.assertLess(time.monotonic(), deadline, f"'after' never came; got {values}")
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    values.append(m.value())
                    break
            self.assertEqual(values, [b"before", b"after"])
        finally:
            c.close()

    def test_kafka_skips_an_unreadable_entry_and_chunks_each_as_its_own(self):
        topic = "chunky-unreadable"
        chunks_before = self.node.metric("magnetar_kafka_chunks_skipped_total")
        unreadable_before = self.node.metric("magnetar_kafka_fetch_skipped_entries_total")
        with PulsarWire(self.node.ports["pulsar"]) as w:
            self.assertEqual(w.create_producer(f"persistent://public/default/{topic}", 1, producer_name="mixed").type,
                             pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertEqual(w.send(1, b"before", sequence_id=0, producer_name="mixed").type,
                             pb.BaseCommand.SEND_RECEIPT)
            # Offsets 1 and 2: a batch of two that says it is zlib-compressed
            # but is not; then the chunks of a message end the topic.
            self.assertEqual(w.send_unreadable(1, messages=2, sequence_id=1, producer_name="mixed").type,
                             pb.BaseCommand.SEND_RECEIPT)
            count = send_chunked(w, 1, "mixed", 2, b"C" * 3000, 1000)
            self.assertEqual([r.type for r in receipts(w, count)], [pb.BaseCommand.SEND_RECEIPT] * count)
        fetching = {}

        def stats(raw):
            partition = json.loads(raw)["topics"].get(topic, {}).get("partitions", {}).get("0")
            if partition:
                fetching["next"] = partition["next_offset"]
        c = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}", "group.id": "mixed-readers",
                         "enable.auto.commit": False, "statistics.interval.ms": 100, "stats_cb": stats})
        try:
            c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
            _, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=TIMEOUT_S)
            self.assertEqual(high, 3 + self.CHUNKS)
            values = []
            deadline = time.monotonic() + TIMEOUT_S
            # Past the marker of the unreadable entry and the batch without
            # records that covers the chunks after it.
            while fetching.get("next") != high:
                self.assertLess(time.monotonic(), deadline, f"the consumer stopped ({fetching}); got {values}")
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    values.append(m.value())
            self.assertEqual(values, [b"before"])
        finally:
            c.close()
        self.assertGreaterEqual(self.node.metric("magnetar_kafka_chunks_skipped_total") - chunks_before, self.CHUNKS)
        self.assertGreaterEqual(self.node.metric("magnetar_kafka_fetch_skipped_entries_total") - unreadable_before, 1)
        log = self.node.read_log()
        self.assertIn("(offsets 1..2) cannot be converted to records and is skipped", log)
        self.assertIn("of Pulsar message mixed-2", log)

    def test_amqp_skips_chunks_and_delivers_on_past_them(self):
        conn = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.node.ports["amqp"], socket_timeout=TIMEOUT_S, blocked_connection_timeout=TIMEOUT_S))
        try:
            ch = conn.channel()
            ch.queue_declare("chunky-q")
            skipped_before = self.node.metric("magnetar_amqp_chunks_skipped_total")
            undeliverable_before = self.node.metric("magnetar_amqp_entries_undeliverable_total")
            self.publish("persistent://public/default/chunky-q", "amqp-side")
            self.publish_after("persistent://public/default/chunky-q", "amqp-side")
            # One message in flight at a time: a skipped chunk must give its
            # place back, or nothing after it comes.
            ch.basic_qos(prefetch_count=1)
            bodies = []
            for method_, _, body in ch.consume("chunky-q", inactivity_timeout=TIMEOUT_S):
                if method_ is None:
                    break
                bodies.append(body)
                ch.basic_ack(method_.delivery_tag)
                if len(bodies) == 2:
                    break
            ch.cancel()
            self.assertEqual(bodies, [b"before", b"after"])
            self.assertEqual(self.node.metric("magnetar_amqp_chunks_skipped_total") - skipped_before, self.CHUNKS)
            # A chunk is skipped on purpose, not an entry no message can be made of.
            self.assertEqual(self.node.metric("magnetar_amqp_entries_undeliverable_total"), undeliverable_before)
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
