"""Subscription dispatch against the real binary, spoken as Pulsar frames
built from our own pulsar_api.proto: Key_Shared keeps every key in order
while consumers join and leave, sticky hash ranges that overlap are refused,
delayed messages wait for their time across a broker restart, redelivery
counts grow with each negative acknowledgement, and batch-index
acknowledgements are honoured on redelivery."""
import importlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

from magnetar_harness import Node, NodeTestCase, call_json

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "src", "protocol", "pulsar")
WAIT_S = 20.0


def load_proto():
    """pulsar_api_pb2 generated from the schema the broker is built from."""
    out = tempfile.mkdtemp(prefix="magnetar-pb-")
    subprocess.run(["protoc", f"--python_out={out}", f"-I{PROTO_DIR}", os.path.join(PROTO_DIR, "pulsar_api.proto")],
                   check=True)
    sys.path.insert(0, out)
    return importlib.import_module("pulsar_api_pb2")


pb = load_proto()


class ServerError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{pb.ServerError.Name(code)}: {message}")
        self.code = code


class Message:
    def __init__(self, consumer_id, cmd, metadata, payload):
        self.consumer_id = consumer_id
        self.ledger = cmd.message_id.ledgerId
        self.entry = cmd.message_id.entryId
        self.redelivery_count = cmd.redelivery_count
        self.ack_set = list(cmd.ack_set)
        self.metadata = metadata
        self.key = metadata.partition_key
        self.payload = payload
        self.received_ms = int(time.time() * 1000)

    @property
    def id(self):
        return (self.ledger, self.entry)


class WireClient:
    """One Pulsar connection driven by the test's thread; every wait is bounded."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        self.buf = b""
        self.next_request = 1
        self.next_id = 1
        self.sequence = {}
        self.answers = {}    # request id -> BaseCommand
        self.receipts = {}   # (producer id, sequence id) -> BaseCommand
        self.inbox = {}      # consumer id -> [Message]
        connect = pb.BaseCommand(type=pb.BaseCommand.CONNECT)
        connect.connect.client_version = "dispatch-test"
        connect.connect.protocol_version = 19
        self.write(connect)
        self.wait(lambda: self.connected, "CONNECTED")

    connected = False

    def close(self):
        self.sock.close()

    def write(self, cmd, metadata=None, payload=b""):
        body = cmd.SerializeToString()
        frame = struct.pack(">I", len(body)) + body
        if metadata is not None:
            md = metadata.SerializeToString()
            frame += struct.pack(">I", len(md)) + md + payload  # no checksum, as pre-v6 clients send
        self.sock.sendall(struct.pack(">I", len(frame)) + frame)

    def pump(self, timeout):
        """Reads what arrives within `timeout` seconds and files it."""
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            return
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        self.buf += chunk
        while len(self.buf) >= 4:
            total = struct.unpack(">I", self.buf[:4])[0]
            if len(self.buf) < 4 + total:
                break
            frame, self.buf = self.buf[4:4 + total], self.buf[4 + total:]
            self.on_frame(frame)

    def on_frame(self, frame):
        size = struct.unpack(">I", frame[:4])[0]
        cmd = pb.BaseCommand()
        cmd.ParseFromString(frame[4:4 + size])
        rest = frame[4 + size:]
        t = cmd.type
        if t == pb.BaseCommand.CONNECTED:
            self.connected = True
        elif t == pb.BaseCommand.PING:
            self.write(pb.BaseCommand(type=pb.BaseCommand.PONG, pong=pb.CommandPong()))
        elif t == pb.BaseCommand.SUCCESS:
            self.answers[cmd.success.request_id] = cmd
        elif t == pb.BaseCommand.ERROR:
            self.answers[cmd.error.request_id] = cmd
        elif t == pb.BaseCommand.PRODUCER_SUCCESS:
            self.answers[cmd.producer_success.request_id] = cmd
        elif t == pb.BaseCommand.ACK_RESPONSE:
            self.answers[cmd.ackResponse.request_id] = cmd
        elif t in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR):
            body = cmd.send_receipt if t == pb.BaseCommand.SEND_RECEIPT else cmd.send_error
            self.receipts[(body.producer_id, body.sequence_id)] = cmd
        elif t == pb.BaseCommand.MESSAGE:
            if rest[:2] == b"\x0e\x02":  # broker entry metadata
                n = struct.unpack(">I", rest[2:6])[0]
                rest = rest[6 + n:]
            if rest[:2] == b"\x0e\x01":  # checksum
                rest = rest[6:]
            n = struct.unpack(">I", rest[:4])[0]
            md = pb.MessageMetadata()
            md.ParseFromString(rest[4:4 + n])
            msg = Message(cmd.message.consumer_id, cmd.message, md, rest[4 + n:])
            self.inbox.setdefault(msg.consumer_id, []).append(msg)

    def wait(self, ready, what, timeout=WAIT_S):
        deadline = time.monotonic() + timeout
        while True:
            v = ready()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {what} within {timeout}s")
            self.pump(min(left, 0.2))

    def request(self, cmd, body):
        rid = self.next_request
        self.next_request += 1
        body.request_id = rid
        self.write(cmd)
        answer = self.wait(lambda: self.answers.pop(rid, None), f"answer to request {rid}")
        if answer.type == pb.BaseCommand.ERROR:
            raise ServerError(answer.error.error, answer.error.message)
        return answer

    # --- Producing.

    def producer(self, topic):
        pid = self.next_id
        self.next_id += 1
        cmd = pb.BaseCommand(type=pb.BaseCommand.PRODUCER)
        cmd.producer.topic = topic
        cmd.producer.producer_id = pid
        answer = self.request(cmd, cmd.producer)
        self.sequence[pid] = (answer.producer_success.producer_name, 0)
        return pid

    def send(self, pid, payload=b"", key=None, deliver_at_ms=None, batch=None):
        """Sends one entry (a batch when `batch` lists payloads) and returns its (ledger, entry)."""
        name, seq = self.sequence[pid]
        self.sequence[pid] = (name, seq + 1)
        md = pb.MessageMetadata(producer_name=name, sequence_id=seq, publish_time=int(time.time() * 1000))
        if key is not None:
            md.partition_key = key
        if deliver_at_ms is not None:
            md.deliver_at_time = deliver_at_ms
        if batch is not None:
            payload = b""
            for p in batch:  # a payload, or (payload, key)
                p, k = p if isinstance(p, tuple) else (p, None)
                single = pb.SingleMessageMetadata(payload_size=len(p))
                if k is not None:
                    single.partition_key = k
                single = single.SerializeToString()
                payload += struct.pack(">I", len(single)) + single + p
            md.num_messages_in_batch = len(batch)
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND)
        cmd.send.producer_id = pid
        cmd.send.sequence_id = seq
        cmd.send.num_messages = len(batch) if batch is not None else 1
        self.write(cmd, md, payload)
        answer = self.wait(lambda: self.receipts.pop((pid, seq), None), f"receipt of {seq}")
        if answer.type == pb.BaseCommand.SEND_ERROR:
            raise ServerError(answer.send_error.error, answer.send_error.message)
        mid = answer.send_receipt.message_id
        return (mid.ledgerId, mid.entryId)

    # --- Consuming.

    def subscribe(self, topic, subscription, subtype, name="", sticky_ranges=None, permits=1000):
        cid = self.next_id
        self.next_id += 1
        cmd = pb.BaseCommand(type=pb.BaseCommand.SUBSCRIBE)
        s = cmd.subscribe
        s.topic, s.subscription, s.subType, s.consumer_id = topic, subscription, subtype, cid
        s.consumer_name = name or f"consumer-{cid}"
        s.initialPosition = pb.CommandSubscribe.Earliest
        if sticky_ranges is not None:
            s.keySharedMeta.keySharedMode = pb.STICKY
            for lo, hi in sticky_ranges:
                s.keySharedMeta.hashRanges.add(start=lo, end=hi)
        self.request(cmd, s)
        if permits:
            self.flow(cid, permits)
        return cid

    def flow(self, cid, permits):
        cmd = pb.BaseCommand(type=pb.BaseCommand.FLOW)
        cmd.flow.consumer_id = cid
        cmd.flow.messagePermits = permits
        self.write(cmd)

    def take(self, cid, count=1, timeout=WAIT_S):
        """Waits for `count` messages for consumer `cid` and returns them."""
        box = self.inbox.setdefault(cid, [])
        self.wait(lambda: len(box) >= count, f"{count} messages for consumer {cid}", timeout)
        out = box[:count]
        del box[:count]
        return out

    def nothing_for(self, cid, seconds):
        """Listens for `seconds`; true when consumer `cid` got nothing."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.pump(0.05)
        return not self.inbox.get(cid)

    def ack(self, cid, msg_id, ack_set=None, batch_size=None):
        cmd = pb.BaseCommand(type=pb.BaseCommand.ACK)
        cmd.ack.consumer_id = cid
        cmd.ack.ack_type = pb.CommandAck.Individual
        mid = cmd.ack.message_id.add(ledgerId=msg_id[0], entryId=msg_id[1])
        if ack_set is not None:
            mid.ack_set.extend(ack_set)
            mid.batch_size = batch_size
        self.request(cmd, cmd.ack)

    def redeliver(self, cid, ids=()):
        cmd = pb.BaseCommand(type=pb.BaseCommand.REDELIVER_UNACKNOWLEDGED_MESSAGES)
        cmd.redeliverUnacknowledgedMessages.consumer_id = cid
        for ledger, entry in ids:
            cmd.redeliverUnacknowledgedMessages.message_ids.add(ledgerId=ledger, entryId=entry)
        self.write(cmd)

    def close_consumer(self, cid):
        cmd = pb.BaseCommand(type=pb.BaseCommand.CLOSE_CONSUMER)
        cmd.close_consumer.consumer_id = cid
        self.request(cmd, cmd.close_consumer)


def topic(name):
    return f"persistent://public/default/{name}"


class KeySharedTest(NodeTestCase):
    def client(self):
        c = WireClient(self.node.ports["pulsar"])
        self.addCleanup(c.close)
        return c

    def test_every_key_stays_in_order_while_consumers_join_and_leave(self):
        t = topic("ks-order")
        producer_conn = self.client()
        pid = producer_conn.producer(t)
        keys = [f"key-{k}" for k in range(20)]
        sent = {k: 0 for k in keys}

        def send(n):
            for _ in range(n):
                k = keys[sum(sent.values()) % len(keys)]
                producer_conn.send(pid, f"{k}:{sent[k]}".encode(), key=k)
                sent[k] += 1

        processed = {k: [] for k in keys}  # per key, the sequence numbers in the order consumers took them
        consumers = {}                     # name -> (client, consumer id, unacked messages held back)

        def join(name):
            c = self.client()
            consumers[name] = (c, c.subscribe(t, "orders", pb.CommandSubscribe.Key_Shared, name), [])

        def poll(hold=()):
            """Takes what arrived; acknowledges at once unless the consumer is in `hold`."""
            for name, (c, cid, held) in consumers.items():
                c.pump(0.02)
                for m in c.inbox.pop(cid, []):
                    k, seq = m.payload.decode().split(":")
                    self.assertEqual(k, m.key)
                    if name in hold:
                        held.append((k, int(seq), m))
                    else:
                        processed[k].append(int(seq))
                        c.ack(cid, m.id)

        def release(name):
            """Acknowledges, in the order it took them, what `name` held back and what it takes meanwhile."""
            c, cid, held = consumers[name]
            while held:
                k, seq, m = held.pop(0)
                processed[k].append(seq)
                c.ack(cid, m.id)
                poll(hold=(name,))

        def poll_until(total, hold=()):
            deadline = time.monotonic() + WAIT_S
            while sum(len(v) for v in processed.values()) + sum(len(h) for _, _, h in consumers.values()) < total:
                self.assertLess(time.monotonic(), deadline, f"stuck at {processed}")
                poll(hold)

        join("c1")
        send(100)
        poll_until(100, hold=("c1",))           # c1 holds all 100 unacknowledged
        join("c2")                               # takes half of the keys from c1
        send(100)
        poll_until(100 + 100 // 2 - 10, hold=("c1",))  # c1 takes its own keys; c2 must wait
        c2, c2_id, _ = consumers["c2"]
        self.assertTrue(c2.nothing_for(c2_id, 0.3), "c2 got a moved key while c1 held earlier ones")
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/ks-order/stats")
        ranges = sorted(c["keyHashRanges"] for c in stats["subscriptions"]["orders"]["consumers"])
        self.assertEqual(ranges, [["[0, 32767]"], ["[32768, 65535]"]])
        release("c1")
        poll_until(200)
        join("c3")
        send(100)
        poll_until(300, hold=("c1",))
        # c1 leaves holding what it took since c3 joined: those go to the new owners first.
        c1, c1_id, held = consumers.pop("c1")
        dropped = len(held)
        self.assertGreater(dropped, 0)
        c1.close_consumer(c1_id)
        send(100)
        deadline = time.monotonic() + WAIT_S
        while sum(len(v) for v in processed.values()) < 400:
            self.assertLess(time.monotonic(), deadline, f"stuck at {processed}")
            poll()
        for k in keys:
            self.assertEqual(processed[k], list(range(sent[k])), f"{k} out of order")

    def test_sticky_ranges_that_overlap_are_refused(self):
        t = topic("ks-sticky")
        a, b = self.client(), self.client()
        low = a.subscribe(t, "sticky", pb.CommandSubscribe.Key_Shared, sticky_ranges=[(0, 32767)])
        with self.assertRaises(ServerError) as err:
            b.subscribe(t, "sticky", pb.CommandSubscribe.Key_Shared, sticky_ranges=[(30000, 40000)])
        self.assertEqual(err.exception.code, pb.ConsumerAssignError)
        with self.assertRaises(ServerError):
            b.subscribe(t, "sticky", pb.CommandSubscribe.Key_Shared)  # AUTO_SPLIT into a STICKY subscription
        high = b.subscribe(t, "sticky", pb.CommandSubscribe.Key_Shared, sticky_ranges=[(32768, 65535)])
        pid = a.producer(t)
        for i in range(20):
            a.send(pid, str(i).encode(), key=f"k{i}")
        deadline = time.monotonic() + WAIT_S
        while len(a.inbox.get(low, [])) + len(b.inbox.get(high, [])) < 20:
            self.assertLess(time.monotonic(), deadline)
            a.pump(0.05)
            b.pump(0.05)
        # Twenty keys land in both halves; each consumer got only its own half's keys.
        self.assertTrue(a.inbox[low] and b.inbox[high])
        low_keys = set(m.key for m in a.inbox.pop(low))
        high_keys = set(m.key for m in b.inbox.pop(high))
        self.assertTrue(low_keys.isdisjoint(high_keys))
        # A batch with no key of its own goes where its first message's key does.
        a.send(pid, batch=[(b"x", sorted(high_keys)[0]), (b"y", sorted(low_keys)[0])])
        (m,) = b.take(high)
        self.assertEqual(m.metadata.num_messages_in_batch, 2)
        self.assertTrue(a.nothing_for(low, 0.2))


class RedeliveryTest(NodeTestCase):
    def client(self):
        c = WireClient(self.node.ports["pulsar"])
        self.addCleanup(c.close)
        return c

    def test_redelivery_count_grows_with_each_negative_ack(self):
        t = topic("nack")
        c = self.client()
        cid = c.subscribe(t, "work", pb.CommandSubscribe.Shared)
        pid = c.producer(t)
        poison = c.send(pid, b"poison")
        c.send(pid, b"fine")
        first = c.take(cid, 2)
        self.assertEqual([m.redelivery_count for m in first], [0, 0])
        c.ack(cid, first[1].id)
        for expected in (1, 2, 3):
            c.redeliver(cid, [poison])          # what a client's negative ack sends
            (m,) = c.take(cid)
            self.assertEqual((m.id, m.redelivery_count), (poison, expected))
        c.redeliver(cid)                         # an ack timeout: everything unacknowledged
        (m,) = c.take(cid)
        self.assertEqual((m.id, m.redelivery_count), (poison, 4))
        c.ack(cid, poison)
        self.assertTrue(c.nothing_for(cid, 0.3))

    def test_batch_index_acks_are_skipped_on_redelivery(self):
        t = topic("batch")
        c = self.client()
        cid = c.subscribe(t, "work", pb.CommandSubscribe.Shared)
        pid = c.producer(t)
        entry = c.send(pid, batch=[b"m0", b"m1", b"m2", b"m3"])
        (m,) = c.take(cid)
        self.assertEqual(m.metadata.num_messages_in_batch, 4)
        self.assertEqual(m.ack_set, [])
        # Messages 0 and 2 acknowledged: ack_set keeps 1 and 3 (still unacknowledged).
        c.ack(cid, entry, ack_set=[0b1010], batch_size=4)
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/batch/stats")
        self.assertEqual(status, 200)
        self.assertEqual(stats["subscriptions"]["work"]["msgBacklog"], 2)
        c.redeliver(cid, [entry])
        (m,) = c.take(cid)
        self.assertEqual((m.id, m.redelivery_count, m.ack_set), (entry, 1, [0b1010]))
        c.ack(cid, entry, ack_set=[0], batch_size=4)
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/default/batch/stats")
        self.assertEqual(stats["subscriptions"]["work"]["msgBacklog"], 0)


class UnackedLimitTest(NodeTestCase):
    def test_the_namespace_limit_holds_a_consumer_until_acks_bring_it_to_half(self):
        self.assertEqual(call_json(self.node, "PUT", "/admin/v2/namespaces/public/limited")[0], 204)
        status, _ = call_json(self.node, "POST", "/admin/v2/namespaces/public/limited/maxUnackedMessagesPerConsumer", 4)
        self.assertEqual(status, 204)
        self.assertEqual(call_json(self.node, "GET", "/admin/v2/namespaces/public/limited/maxUnackedMessagesPerConsumer"),
                         (200, 4))
        t = "persistent://public/limited/work"
        c = WireClient(self.node.ports["pulsar"])
        self.addCleanup(c.close)
        cid = c.subscribe(t, "work", pb.CommandSubscribe.Shared)
        pid = c.producer(t)
        for i in range(10):
            c.send(pid, str(i).encode())
        got = c.take(cid, 4)
        self.assertTrue(c.nothing_for(cid, 0.3))
        status, stats = call_json(self.node, "GET", "/admin/v2/persistent/public/limited/work/stats")
        consumer = stats["subscriptions"]["work"]["consumers"][0]
        self.assertEqual((consumer["unackedMessages"], consumer["blockedConsumerOnUnackedMsgs"]), (4, True))
        c.ack(cid, got[0].id)
        self.assertTrue(c.nothing_for(cid, 0.3))  # 3 unacknowledged: over half of 4
        c.ack(cid, got[1].id)
        more = c.take(cid, 2)                       # 2 unacknowledged: room for 2 more
        self.assertEqual([m.payload for m in got + more], [str(i).encode() for i in range(6)])
        self.assertTrue(c.nothing_for(cid, 0.3))


class DelayedDeliveryTest(unittest.TestCase):
    def test_a_delayed_message_waits_for_its_time_across_a_restart(self):
        data_dir = tempfile.mkdtemp(prefix="magnetar-delayed-")
        node = Node(data_dir=data_dir, keep_data=True).start()
        try:
            c = WireClient(node.ports["pulsar"])
            t = topic("delayed")
            cid = c.subscribe(t, "work", pb.CommandSubscribe.Shared)
            pid = c.producer(t)
            due = int(time.time() * 1000) + 5000
            c.send(pid, b"later", deliver_at_ms=due)
            c.send(pid, b"now")
            (m,) = c.take(cid)
            self.assertEqual(m.payload, b"now")
            c.ack(cid, m.id)
            self.assertTrue(c.nothing_for(cid, 0.3))
            status, stats = call_json(node, "GET", "/admin/v2/persistent/public/default/delayed/stats")
            self.assertEqual(stats["subscriptions"]["work"]["msgDelayed"], 1)
            c.close()
            self.assertEqual(node.stop(), 0)
            node.close()
            node = Node(data_dir=data_dir, keep_data=True).start()
            c = WireClient(node.ports["pulsar"])
            cid = c.subscribe(t, "work", pb.CommandSubscribe.Shared)
            (m,) = c.take(cid)
            self.assertEqual(m.payload, b"later")
            self.assertGreaterEqual(m.received_ms, due)
            self.assertEqual(m.redelivery_count, 0)
            c.ack(cid, m.id)
            self.assertTrue(c.nothing_for(cid, 0.3))
            c.close()
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()
            shutil.rmtree(data_dir, ignore_errors=True)

    def test_exclusive_subscriptions_do_not_hold_delayed_messages(self):
        with Node() as node:
            c = WireClient(node.ports["pulsar"])
            t = topic("delayed-exclusive")
            cid = c.subscribe(t, "mine", pb.CommandSubscribe.Exclusive)
            pid = c.producer(t)
            c.send(pid, b"in-an-hour", deliver_at_ms=int(time.time() * 1000) + 3600 * 1000)
            (m,) = c.take(cid)
            self.assertEqual(m.payload, b"in-an-hour")
            c.close()


if __name__ == "__main__":
    unittest.main()
