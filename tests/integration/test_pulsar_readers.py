"""Readers and message ids over the real Pulsar wire, sent exactly as the
official clients send them: a Reader subscribes with durable false,
initialPosition Latest and start_message_id (MessageId.earliest, a message's
id, or one inside a batch), or start_message_rollback_duration_sec; a SEEK
inside a batch carries an ack_set; and every id a consumer of a partition
sees names that partition. And a message that is not a batch is never read
as one, whatever its payload looks like."""
import time
import unittest

import pulsar_api_pb2 as pb
from magnetar_harness import NodeTestCase, call_json
from pulsar_wire import PulsarWire, batch_payload

EARLIEST = pb.MessageIdData(ledgerId=2**64 - 1, entryId=2**64 - 1, partition=-1, batch_index=-1)  # (-1, -1, -1)
LATEST = pb.MessageIdData(ledgerId=2**63 - 1, entryId=2**63 - 1, partition=-1, batch_index=-1)
SILENCE_S = 1.0  # how long "nothing more arrives" is watched for


class WireTestCase(NodeTestCase):
    def setUp(self):
        self.wire = PulsarWire(self.node.ports["pulsar"])
        self.next_id = 100

    def tearDown(self):
        self.wire.close()

    def fresh_id(self):
        self.next_id += 1
        return self.next_id

    def produce(self, topic, payloads, **metadata):
        """Sends each payload as one message; their ids, in order."""
        w = self.wire
        pid = self.fresh_id()
        self.assertEqual(w.create_producer(topic, pid).type, pb.BaseCommand.PRODUCER_SUCCESS)
        ids = []
        for p in payloads:
            r = w.send(pid, p.encode() if isinstance(p, str) else p, **metadata)
            self.assertEqual(r.type, pb.BaseCommand.SEND_RECEIPT, r.cmd)
            ids.append(r.cmd.send_receipt.message_id)
        w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=pid)
        return ids

    def produce_batch(self, topic, payloads):
        """One batch entry of `payloads`; its id."""
        w = self.wire
        pid = self.fresh_id()
        self.assertEqual(w.create_producer(topic, pid).type, pb.BaseCommand.PRODUCER_SUCCESS)
        body = batch_payload([(p.encode(), {}) for p in payloads])
        r = w.send(pid, body, num_messages_in_batch=len(payloads), send_fields={"num_messages": len(payloads)})
        self.assertEqual(r.type, pb.BaseCommand.SEND_RECEIPT, r.cmd)
        w.request("CLOSE_PRODUCER", ["SUCCESS", "ERROR"], producer_id=pid)
        return r.cmd.send_receipt.message_id

    def reader(self, topic, start=None, initial="Latest", **fields):
        """SUBSCRIBE as the official clients open a Reader; its consumer id."""
        cid = self.fresh_id()
        if start is not None:
            fields["start_message_id"] = start
        answer = self.wire.subscribe(topic, f"reader-{cid}", cid, sub_type="Exclusive", initial=initial,
                                     durable=False, consumer_name=f"reader-{cid}", **fields)
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        self.wire.flow(cid, 1000)
        return cid

    def payloads(self, frames):
        return [f.payload.decode() for f in frames]

    def assert_silent(self, cid):
        with self.assertRaises(TimeoutError):
            self.wire.next("MESSAGE", timeout=SILENCE_S, where=lambda f: f.cmd.message.consumer_id == cid)


class ReaderStartTest(WireTestCase):
    def test_earliest_reads_everything_though_the_initial_position_is_latest(self):
        topic = "persistent://public/default/reader-earliest"
        self.produce(topic, [f"m{i}" for i in range(10)])
        cid = self.reader(topic, EARLIEST)
        self.assertEqual(self.payloads(self.wire.receive(cid, 10)), [f"m{i}" for i in range(10)])
        self.assert_silent(cid)

    def test_a_message_id_is_delivered_itself_and_the_rest_after_it(self):
        # Pulsar's broker starts at the named entry; the client drops it
        # unless its reader is inclusive.
        topic = "persistent://public/default/reader-at-id"
        ids = self.produce(topic, [f"m{i}" for i in range(10)])
        start = pb.MessageIdData(ledgerId=ids[3].ledgerId, entryId=ids[3].entryId, partition=-1, batch_index=-1)
        cid = self.reader(topic, start)
        frames = self.wire.receive(cid, 7)
        self.assertEqual(self.payloads(frames), [f"m{i}" for i in range(3, 10)])
        self.assertEqual((frames[0].cmd.message.message_id.ledgerId, frames[0].cmd.message.message_id.entryId),
                         (ids[3].ledgerId, ids[3].entryId))
        self.assert_silent(cid)

    def test_an_id_inside_a_batch_delivers_that_batch_for_the_client_to_skip_in(self):
        topic = "persistent://public/default/reader-in-batch"
        self.produce(topic, ["before"])
        batch = self.produce_batch(topic, ["b0", "b1", "b2", "b3", "b4"])
        self.produce(topic, ["after"])
        start = pb.MessageIdData(ledgerId=batch.ledgerId, entryId=batch.entryId, partition=-1, batch_index=2)
        cid = self.reader(topic, start)
        first, second = self.wire.receive(cid, 2)
        self.assertEqual((first.cmd.message.message_id.ledgerId, first.cmd.message.message_id.entryId),
                         (batch.ledgerId, batch.entryId))
        self.assertEqual(first.metadata.num_messages_in_batch, 5)
        self.assertEqual(second.payload, b"after")
        self.assert_silent(cid)

    def test_latest_reads_only_what_comes_next(self):
        topic = "persistent://public/default/reader-latest"
        self.produce(topic, ["old"])
        cid = self.reader(topic, LATEST)
        self.assert_silent(cid)
        self.produce(topic, ["new"])
        self.assertEqual(self.payloads(self.wire.receive(cid, 1)), ["new"])

    def test_an_id_past_the_end_leaves_the_start_to_the_initial_position(self):
        topic = "persistent://public/default/reader-past-end"
        ids = self.produce(topic, ["a", "b"])
        past = pb.MessageIdData(ledgerId=ids[-1].ledgerId, entryId=ids[-1].entryId + 100)
        cid = self.reader(topic, past, initial="Earliest")
        self.assertEqual(self.payloads(self.wire.receive(cid, 2)), ["a", "b"])

    def test_a_rollback_duration_starts_at_the_messages_published_within_it(self):
        topic = "persistent://public/default/reader-rollback"
        now_ms = int(time.time() * 1000)
        self.produce(topic, ["old-1", "old-2"], publish_time=now_ms - 3_600_000)
        self.produce(topic, ["recent-1", "recent-2"], publish_time=now_ms)
        cid = self.reader(topic, None, start_message_rollback_duration_sec=600)
        self.assertEqual(self.payloads(self.wire.receive(cid, 2)), ["recent-1", "recent-2"])
        self.assert_silent(cid)

    def test_a_reader_subscription_goes_away_with_its_reader(self):
        topic = "persistent://public/default/reader-gone"
        self.produce(topic, ["x"])
        cid = self.reader(topic, EARLIEST)
        self.wire.receive(cid, 1)

        def subscriptions():
            status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/reader-gone/stats")
            self.assertEqual(status, 200, stats)
            return set(stats["subscriptions"])
        self.assertIn(f"reader-{cid}", subscriptions())
        answer = self.wire.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=cid)
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS)
        deadline = time.monotonic() + 10
        while f"reader-{cid}" in subscriptions():
            self.assertLess(time.monotonic(), deadline, "the reader's subscription outlived it")
            time.sleep(0.05)

    def test_a_reader_and_a_subscription_never_share_a_name(self):
        topic = "persistent://public/default/reader-name"
        self.produce(topic, ["x"])
        w = self.wire
        self.assertEqual(w.subscribe(topic, "shared-name", 1, initial="Earliest").type, pb.BaseCommand.SUCCESS)
        answer = w.subscribe(topic, "shared-name", 2, durable=False, start_message_id=EARLIEST)
        self.assertEqual(answer.type, pb.BaseCommand.ERROR)
        self.assertEqual(answer.cmd.error.error, pb.NotAllowedError)


class SeekInsideABatchTest(WireTestCase):
    def test_the_ack_set_of_a_seek_skips_the_batchs_earlier_messages(self):
        topic = "persistent://public/default/seek-in-batch"
        batch = self.produce_batch(topic, ["b0", "b1", "b2", "b3", "b4"])
        w = self.wire
        self.assertEqual(w.subscribe(topic, "s", 1, initial="Earliest").type, pb.BaseCommand.SUCCESS)
        w.flow(1, 100)
        self.assertEqual(w.receive(1, 1)[0].metadata.num_messages_in_batch, 5)
        # As the Java client seeks to (ledger, entry, batch index 2) of a
        # batch of 5: bits 2..4 set, the messages to deliver again.
        target = pb.MessageIdData(ledgerId=batch.ledgerId, entryId=batch.entryId, batch_index=2, ack_set=[0b11100])
        answer = w.request("SEEK", ["SUCCESS", "ERROR"], consumer_id=1, message_id=target)
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        w.next("CLOSE_CONSUMER")
        self.assertEqual(w.subscribe(topic, "s", 1, initial="Earliest").type, pb.BaseCommand.SUCCESS)
        w.flow(1, 100)
        again = w.receive(1, 1)[0]
        self.assertEqual((again.cmd.message.message_id.ledgerId, again.cmd.message.message_id.entryId),
                         (batch.ledgerId, batch.entryId))
        self.assertEqual(list(again.cmd.message.ack_set), [0b11100])


class PartitionIdTest(WireTestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        status, body = call_json(cls.node, "PUT", "/admin/v2/persistent/public/default/parts/partitions", 3)
        assert status in (200, 204), (status, body)

    def last_message_id(self, cid):
        answer = self.wire.request("GET_LAST_MESSAGE_ID", ["GET_LAST_MESSAGE_ID_RESPONSE", "ERROR"], consumer_id=cid)
        self.assertEqual(answer.type, pb.BaseCommand.GET_LAST_MESSAGE_ID_RESPONSE, answer.cmd)
        return answer.cmd.getLastMessageIdResponse

    def test_messages_and_the_last_id_name_the_partition(self):
        for index in (0, 2):
            topic = f"persistent://public/default/parts-partition-{index}"
            ids = self.produce(topic, [f"p{index}-{i}" for i in range(3)])
            cid = self.fresh_id()
            self.assertEqual(self.wire.subscribe(topic, "by-partition", cid, initial="Earliest").type,
                             pb.BaseCommand.SUCCESS)
            self.wire.flow(cid, 100)
            frames = self.wire.receive(cid, 3)
            self.assertEqual(self.payloads(frames), [f"p{index}-{i}" for i in range(3)])
            self.assertEqual([f.cmd.message.message_id.partition for f in frames], [index] * 3)
            last = self.last_message_id(cid).last_message_id
            self.assertEqual((last.ledgerId, last.entryId, last.partition),
                             (ids[-1].ledgerId, ids[-1].entryId, index))

    def test_a_topic_that_is_no_partition_names_none(self):
        topic = "persistent://public/default/not-partitioned"
        self.produce(topic, ["x"])
        cid = self.reader(topic, EARLIEST)
        frame = self.wire.receive(cid, 1)[0]
        self.assertEqual(frame.cmd.message.message_id.partition, -1)
        self.assertEqual(self.last_message_id(cid).last_message_id.partition, -1)

    def test_readers_and_seeks_on_a_partition(self):
        topic = "persistent://public/default/parts-partition-1"
        ids = self.produce(topic, [f"r{i}" for i in range(5)])
        start = pb.MessageIdData(ledgerId=ids[2].ledgerId, entryId=ids[2].entryId, partition=1, batch_index=-1)
        cid = self.reader(topic, start)
        frames = self.wire.receive(cid, 3)
        self.assertEqual(self.payloads(frames), ["r2", "r3", "r4"])
        self.assertEqual({f.cmd.message.message_id.partition for f in frames}, {1})
        w = self.wire
        self.assertEqual(w.subscribe(topic, "seeker", 7, initial="Earliest").type, pb.BaseCommand.SUCCESS)
        w.flow(7, 100)
        self.assertEqual(len(w.receive(7, 5)), 5)
        answer = w.request("SEEK", ["SUCCESS", "ERROR"], consumer_id=7, message_id=ids[3])
        self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
        w.next("CLOSE_CONSUMER", where=lambda f: f.cmd.close_consumer.consumer_id == 7)
        self.assertEqual(w.subscribe(topic, "seeker", 7, initial="Earliest").type, pb.BaseCommand.SUCCESS)
        w.flow(7, 100)
        again = w.receive(7, 2)
        self.assertEqual(self.payloads(again), ["r3", "r4"])
        self.assertEqual({f.cmd.message.message_id.partition for f in again}, {1})

    def test_the_last_id_of_a_batch_names_its_last_message(self):
        topic = "persistent://public/default/parts-partition-0"
        batch = self.produce_batch(topic, ["a", "b", "c", "d"])
        cid = self.reader(topic, LATEST)
        last = self.last_message_id(cid).last_message_id
        self.assertEqual((last.ledgerId, last.entryId, last.batch_index, last.partition),
                         (batch.ledgerId, batch.entryId, 3, 0))


class UnbatchedKeyTest(WireTestCase):
    def test_a_single_message_is_not_read_as_a_batch_for_its_key(self):
        # Key_Shared orders by an entry's key; an unkeyed single message has
        # none, even when its payload happens to look like a keyed batch.
        topic = "persistent://public/default/unbatched-key"
        w = self.wire
        halves = {1: pb.IntRange(start=0, end=32767), 2: pb.IntRange(start=32768, end=65535)}
        for cid, r in halves.items():
            meta = pb.KeySharedMeta(keySharedMode=pb.STICKY, hashRanges=[r])
            answer = w.subscribe(topic, "ks", cid, sub_type="Key_Shared", keySharedMeta=meta)
            self.assertEqual(answer.type, pb.BaseCommand.SUCCESS, answer.cmd)
            w.flow(cid, 1000)
        pid = self.fresh_id()
        self.assertEqual(w.create_producer(topic, pid).type, pb.BaseCommand.PRODUCER_SUCCESS)

        def owner(**metadata):
            w.send(pid, b"probe", **metadata)
            return w.next("MESSAGE").cmd.message.consumer_id
        unkeyed = owner()
        other = next(k for k in (f"k{i}" for i in range(64)) if owner(partition_key=k) != unkeyed)
        disguised = batch_payload([(b"inner", {"partition_key": other})])
        self.assertEqual(owner(), unkeyed)
        w.send(pid, disguised)
        got = w.next("MESSAGE")
        self.assertEqual(got.payload, disguised)
        self.assertEqual(got.cmd.message.consumer_id, unkeyed)


if __name__ == "__main__":
    unittest.main()
