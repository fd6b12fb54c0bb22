"""Replicated ledgers under faults while real clients write: confluent-kafka
(acks=all, idempotent), pika (publisher confirms) and a Pulsar producer
that resends as the Java client does (same producer name and sequence ids
after a reconnect) each write a topic of one bundle, so that one owner
serves all three. In a cluster of five, a copy holder that is not the
owner, the owner, or the owner and a copy holder together are killed with
SIGKILL; in a cluster of three in network namespaces, the owner is cut off
from the other members while the clients still reach it. Once the faults
heal (the killed members restarted on their data, the links restored),
every acknowledged message is read back, in the order its producer sent
it; where the namespace's deduplication is on, none is stored twice, and
where it is off, duplicates are allowed. Every wait is bounded; nothing is
timed for speed.

pulsar-flex is not used here: it resends a message after a reconnect with
the sequence id the producer has then (`this._sequenceId` read when the
resend runs, node_modules/pulsar-flex/src/producer/index.js), so a message
stored before the cut is stored again under a new id that no broker can
recognise, and it only looks topics up through its first reachable
discovery server, which a restarted member no longer is (new ports).
"""
import logging
import struct
import sys
import threading
import time
import traceback
import unittest
from collections import Counter, deque

import pika
import pika.exceptions
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import pulsar_api_pb2 as pb
from cluster_harness import ClusterCase, NetworkClusterCase, nodes_of, request, wait_for
from kafka_wire import RawKafkaConnection
from memory_watch import metric_value
from pulsar_wire import PulsarWire

NS = "public/default"
WARM_ACKS = 100      # each client's acknowledgements before a fault
AFTER_ACKS = 30      # each client's acknowledgements after a fault, and after its heal
PHASE_S = 90.0       # bound on each phase's wait for those acknowledgements
FLUSH_S = 60.0       # how long a client told to stop may wait for answers to what it sent
RECEIPT_S = 10.0     # a Pulsar connection with no receipt for this long is given up (a cut-off owner)
WINDOW = 16          # Pulsar messages in flight
KAFKA_BACKLOG = 200  # Kafka messages sent and not yet answered
PACE_S = 0.01        # each client sends at most one message per PACE_S: CPU for the members, not the clients
CHANGES = "magnetar_replication_ensemble_changes_total"
RECOVERIES = "magnetar_replication_recoveries_total"


def live(members):
    return [m for m in members if m.proc is not None and m.proc.poll() is None]


def bootstrap(members):
    """Every running member's Kafka listener, by the address it binds (loopback or its namespace's)."""
    return ",".join(f"{m.host}:{m.ports['kafka']}" for m in live(members))


def owner_of(members, topic, among=None, other_than=()):
    """The member that `among` (default: the running members) name as
    `topic`'s owner, once they agree on one that is not in `other_than`."""
    def find():
        owners = set()
        for via in among or live(members):
            status, lookup = request(via, "GET", f"/lookup/v2/topic/persistent/{NS}/{topic}", timeout=5)
            if status != 200:
                return None
            owners |= {m for m in members if lookup["brokerUrl"].endswith(f"{m.host}:{m.ports['pulsar']}")}
        return owners.pop() if len(owners) == 1 and not owners & set(other_than) else None
    return wait_for(find, f"the members agreeing on an owner for {topic}", timeout=60)


def failover_moves(members):
    """Bundles the members moved away from owners they counted dead, all told."""
    return sum(metric_value(m, 'magnetar_bundle_moves_total{reason="failover"}') for m in members)


def one_bundle(member, prefix, kinds):
    """Topic names `prefix-<kind>-<n>`, one per kind, all in one bundle (so
    one member owns them all)."""
    def bundle(topic):
        status, answer = request(member, "GET", f"/admin/v2/persistent/{NS}/{topic}/bundle")
        if status != 200:
            raise ValueError(f"bundle of {topic} answered {status}: {answer}")
        return answer
    first = f"{prefix}-{kinds[0]}-0"
    wanted = bundle(first)
    names = [first]
    for kind in kinds[1:]:
        names.append(next(t for t in (f"{prefix}-{kind}-{n}" for n in range(200)) if bundle(t) == wanted))
    return names


def ledgers_held(member, node_id):
    """How many ledgers name `node_id` in a fragment (the decommission status scans every record)."""
    status, answer = request(member, "GET", f"/admin/v2/cluster/nodes/{node_id}/decommission")
    if status != 200:
        raise ValueError(f"decommission status answered {status}: {answer}")
    return answer["ledgers"]


class _ClientLog(logging.Handler):
    """A client's first and last debug lines, kept to be printed when a
    check fails."""

    def __init__(self, keep=200):
        super().__init__()
        self.first = []
        self.last = deque(maxlen=keep)
        self.keep = keep

    def emit(self, record):
        line = f"{time.strftime('%H:%M:%S')} {record.getMessage()}"
        (self.first if len(self.first) < self.keep else self.last).append(line)

    def text(self):
        return "\n".join(self.first + (["..."] if self.last else []) + list(self.last))


def read_topic(members, topic, timeout=90):
    """Every record of `topic` (partition 0: a Pulsar topic that is not
    partitioned) from offset 0 to its high watermark, in order, read with
    confluent-kafka through the running members. When that fails, the
    consumer's first and last metadata debug lines go to stderr: which
    member's answer it cached."""
    client_log = _ClientLog()
    logger = logging.getLogger(f"read-{topic}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(client_log)
    consumer = Consumer({"bootstrap.servers": bootstrap(members), "group.id": "faults-check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "debug": "metadata,topic"}, logger=logger)
    part = TopicPartition(topic, 0)

    def high_watermark():
        try:
            return consumer.get_watermark_offsets(part, timeout=5)[1]
        except KafkaException as e:
            raise ValueError(str(e))  # no leader yet: asked again
    try:
        high = wait_for(high_watermark, f"the high watermark of {topic}", timeout=timeout)
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []

        def done():
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
            return consumer.position([part])[0].offset >= high
        wait_for(done, f"{topic} read up to offset {high}", timeout=timeout, interval=0)
    except Exception:
        consumer.poll(0)  # the client hands its log lines over when polled
        sys.stderr.write(f"read_topic({topic}): the consumer's first and last debug lines:\n" +
                         client_log.text() + "\n")
        raise
    finally:
        consumer.close()
        logger.removeHandler(client_log)
    return got


def amqp_connect(member):
    return pika.BlockingConnection(pika.ConnectionParameters(
        member.host, member.ports["amqp"], socket_timeout=10, blocked_connection_timeout=10,
        connection_attempts=1))


def drain_queue(members, queue, expected, timeout=30):
    """Every message of `queue`, taken with basic.get through the running
    members, until none is left and each of `expected` was among them (a
    member may answer get-empty while the queue's owner is still opening
    it: asked again). Returns what came, in order."""
    got = []

    def more():
        for member in live(members):
            try:
                with amqp_connect(member) as conn:
                    ch = conn.channel()
                    while True:
                        method, _, body = ch.basic_get(queue, auto_ack=True)
                        if method is None:
                            break
                        got.append(body.decode())
                    return set(expected) <= set(got)
            except pika.exceptions.AMQPError:
                continue
        return False
    try:
        wait_for(more, f"every confirmed message of {queue}", timeout=timeout, interval=1.0)
    except AssertionError:
        pass  # what is missing is reported by the caller, with the rest of the evidence
    return got


class Client(threading.Thread):
    """A producer in a thread of its own: sends <prefix>0, <prefix>1, ...
    until told to stop, and records each acknowledgement (the value, when,
    from which member when the protocol says) and each failure. A value
    whose outcome was not known (no answer) may be sent again: at least
    once, in order."""

    def __init__(self, name, members, topic, prefix):
        super().__init__(name=name, daemon=True)
        self.members = members
        self.topic = topic
        self.prefix = prefix
        self.acked = []
        self.ack_times = []
        self.errors = []
        self.halt = threading.Event()
        self.crash = None

    def run(self):
        try:
            self.produce()
        except BaseException:  # a bug of the client: the test reports it rather than hang on it
            self.crash = traceback.format_exc()

    def acknowledged(self, value):
        self.acked.append(value)
        self.ack_times.append(time.monotonic())

    def acks_after(self, moment):
        return sum(1 for t in self.ack_times if t > moment)

    def finish(self):
        self.halt.set()
        self.join(FLUSH_S + 30)
        return not self.is_alive()

    def status(self):
        last = f", last {self.errors[-1]}" if self.errors else ""
        crash = f", crashed: {self.crash}" if self.crash else ""
        return f"{self.name}: {len(self.acked)} acknowledged, {len(self.errors)} failures{last}{crash}"


class KafkaClient(Client):
    """confluent-kafka with acks=all and enable.idempotence, which is what
    keeps a producer's messages in order across retries and leader changes
    in librdkafka (with idempotence off, even one request in flight, a
    batch retried after a leader change can go after newer messages). The
    broker keeps idempotent producers' sequences in memory only
    (docs/protocol-kafka.md), so a batch retried at a topic's next owner
    may be stored twice. At most KAFKA_BACKLOG messages wait for an answer,
    as an application that does not buffer without bound. A cut-off owner
    holds its answers, and once its lease lapsed closes the producer's
    connection (docs/protocol-kafka.md), so that the client looks for the
    new owner through another member; a request held elsewhere meanwhile is
    given up on after request.timeout.ms, 10 s here instead of 30."""

    def __init__(self, name, members, topic, prefix):
        super().__init__(name, members, topic, prefix)
        self.offsets = {}  # value: the offset its acknowledgement named

    def produce(self):
        producer = Producer({"bootstrap.servers": bootstrap(self.members), "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True, "message.timeout.ms": int(FLUSH_S * 1000),
                             "request.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 1000})

        def report(err, msg):
            if err:
                self.errors.append(f"{msg.value().decode()}: {err}")
            else:
                self.acknowledged(msg.value().decode())
                self.offsets[msg.value().decode()] = msg.offset()
        i = 0
        while not self.halt.is_set():
            if len(producer) < KAFKA_BACKLOG:
                try:
                    producer.produce(self.topic, f"{self.prefix}{i}".encode(), on_delivery=report)
                    i += 1
                except BufferError:
                    pass
            producer.poll(PACE_S)
        producer.flush(FLUSH_S)


class AmqpClient(Client):
    """pika with publisher confirms, one message at a time; a nack, a
    closed channel or a lost connection sends the same message again,
    through the next member of the list on a lost connection (AMQP has no
    redirect: any member takes a publish and forwards it to the owner)."""

    def __init__(self, name, members, queue, prefix, first):
        super().__init__(name, members, queue, prefix)
        self.turn = members.index(first)

    def produce(self):
        conn = ch = None
        i = 0
        while not self.halt.is_set():
            body = f"{self.prefix}{i}"
            try:
                if conn is None or not conn.is_open:
                    conn = amqp_connect(self.members[self.turn % len(self.members)])
                    ch = None
                if ch is None or not ch.is_open:
                    ch = conn.channel()
                    ch.confirm_delivery()
                    ch.queue_declare(self.topic, durable=True)
                ch.basic_publish("", self.topic, body.encode(), mandatory=True)
                self.acknowledged(body)
                i += 1
                time.sleep(PACE_S)
            except (pika.exceptions.NackError, pika.exceptions.UnroutableError) as e:
                self.errors.append(f"{body}: {e!r}")
                time.sleep(0.2)
            except pika.exceptions.AMQPChannelError as e:
                self.errors.append(f"{body}: {e!r}")
                ch = None
                time.sleep(0.2)
            except (pika.exceptions.AMQPError, OSError) as e:
                self.errors.append(f"{body}: {e!r}")
                self.turn += 1
                try:
                    if conn is not None and conn.is_open:
                        conn.close()
                except (pika.exceptions.AMQPError, OSError):
                    pass
                conn = ch = None
                time.sleep(0.2)
        if conn is not None and conn.is_open:
            try:
                conn.close()
            except (pika.exceptions.AMQPError, OSError):
                pass


class ProducerRefused(Exception):
    pass


class PulsarClient(Client):
    """The Pulsar protocol spoken as the Java client speaks it: a producer
    name of its own, sequence ids 0, 1, ..., up to WINDOW messages in
    flight, receipts in order. After a lost connection, a SEND_ERROR, a
    CLOSE_PRODUCER or RECEIPT_S without a receipt, it looks the topic up
    again (through the members in turn, as a client with every member in
    its service URL), creates the producer under the same name and sends
    every unacknowledged message again, in order, with its sequence id.
    `ackers` says which member acknowledged each value, and `sends` where
    and when each value was last sent."""

    def __init__(self, name, members, topic, prefix):
        super().__init__(name, members, topic, prefix)
        self.ackers = {}
        self.sends = {}
        self.turn = 0
        self.wire = None
        self.at = None

    def open(self):
        member = self.members[self.turn % len(self.members)]
        self.turn += 1
        status, lookup = request(member, "GET", f"/lookup/v2/topic/persistent/{NS}/{self.topic}", timeout=5)
        if status != 200:
            raise ProducerRefused(f"lookup through {member.http_url} answered {status}: {lookup}")
        host, port = lookup["brokerUrl"].split("://")[1].rsplit(":", 1)
        owner = [m for m in self.members if m.host == host and m.ports["pulsar"] == int(port)]
        wire = PulsarWire(int(port), host=host)
        try:
            answer = wire.create_producer(f"persistent://{NS}/{self.topic}", 1, producer_name=self.name)
        except BaseException:
            wire.close()
            raise
        if answer.type != pb.BaseCommand.PRODUCER_SUCCESS:
            wire.close()
            raise ProducerRefused(f"{lookup['brokerUrl']}: {answer.cmd.error.message}")
        self.wire, self.at = wire, owner[0] if owner else None

    def send(self, seq, value):
        self.sends[value] = (self.at, time.monotonic())
        self.wire.send(1, value.encode(), sequence_id=seq, wait=False, producer_name=self.name)

    def answer(self, pending):
        f = self.wire.next(None, timeout=RECEIPT_S, where=lambda f: f.type in (
            pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR, pb.BaseCommand.CLOSE_PRODUCER))
        if f.type == pb.BaseCommand.SEND_ERROR:
            raise ProducerRefused(f"send error: {f.cmd.send_error.message}")
        if f.type == pb.BaseCommand.CLOSE_PRODUCER:
            raise ProducerRefused("closed by the broker")
        seq = f.cmd.send_receipt.sequence_id
        if pending and pending[0][0] != seq and seq in {s for s, _ in pending}:
            self.errors.append(f"receipt for {seq} before {pending[0][0]}")  # out of order: the test fails on it
        for i, (s, value) in enumerate(pending):
            if s == seq:
                del pending[i]
                self.acknowledged(value)
                self.ackers[value] = self.at
                break

    def produce(self):
        pending = []  # (sequence id, value) sent and not acknowledged, in order
        seq = 0
        give_up = None
        while True:
            if self.halt.is_set():
                give_up = give_up or time.monotonic() + FLUSH_S
                if not pending or time.monotonic() > give_up:
                    break
            try:
                if self.wire is None:
                    self.open()
                    for s, value in pending:
                        self.send(s, value)
                while not self.halt.is_set() and len(pending) < WINDOW:
                    # Pending before it is sent: a send that fails is sent again after the reconnect.
                    pending.append((seq, f"{self.prefix}{seq}"))
                    seq += 1
                    self.send(*pending[-1])
                    time.sleep(PACE_S)
                self.answer(pending)
            except (OSError, ConnectionError, TimeoutError, ValueError, KeyError, ProducerRefused) as e:
                self.errors.append(repr(e))
                if self.wire is not None:
                    self.wire.close()
                self.wire = None
                time.sleep(0.2)
        if self.wire is not None:
            self.wire.close()


class SelfNamedLeader(threading.Thread):
    """Asks `member` which broker leads partition 0 of Kafka topic `topic`
    (Metadata v1 on a connection of its own) every 50 ms until stopped, and
    `other`, another member, the same; keeps the times of the answers in
    which each names `member` the leader."""

    def __init__(self, member, topic, other):
        super().__init__(daemon=True)
        self.member, self.topic, self.other = member, topic, other
        self.named, self.other_named, self.answers = [], [], 0
        self.done = threading.Event()

    def names_member(self, wire):
        brokers, topics = wire.metadata_v1([self.topic])
        ids = [b[0] for b in brokers if b[2] == self.member.ports["kafka"] and b[1] == self.member.host]
        return any(p[1] == 0 and p[2] in ids for t in topics for p in t[3])

    def run(self):
        wires = {}
        while not self.done.wait(0.05):
            for who, times in ((self.member, self.named), (self.other, self.other_named)):
                try:
                    if who.id not in wires:
                        wires[who.id] = RawKafkaConnection(who.ports["kafka"], "leader-watch", timeout=5,
                                                           host=who.host)
                    named = self.names_member(wires[who.id])
                    if who is self.member:
                        self.answers += 1
                    if named:
                        times.append(time.monotonic())
                except (OSError, ConnectionError, struct.error, IndexError):
                    wire = wires.pop(who.id, None)
                    if wire is not None:
                        wire.close()
        for wire in wires.values():
            wire.close()

    def finish(self):
        self.done.set()
        self.join(10)

    def unowned(self, agree_within=2.0):
        """The times `member` named itself while the other member did not
        name it then or within `agree_within` seconds after: a member the
        cluster gave the bundle back to names itself first, and the other
        learns of it moments later."""
        return [t for t in self.named
                if not any(t - 0.5 <= o <= t + agree_within for o in self.other_named)]


class StorageFaultCase:
    """What the fault tests share: the clients, their waits and the read-back checks."""

    def start_clients(self, members, prefix, amqp_through_owner=True):
        """The three clients on topics `prefix-*` of one bundle, once each
        was acknowledged WARM_ACKS times; returns the bundle's owner. The
        AMQP client publishes through the owner, or another member."""
        kafka_topic, amqp_queue, pulsar_topic = one_bundle(members[0], prefix, ["kafka", "amqp", "pulsar"])
        owner = owner_of(members, kafka_topic)
        for topic in (amqp_queue, pulsar_topic):
            self.assertIs(owner_of(members, topic), owner, "topics of one bundle with different owners")
        through = owner if amqp_through_owner else [m for m in members if m is not owner][0]
        self.clients = [KafkaClient("kafka", members, kafka_topic, "k"),
                        AmqpClient("amqp", members, amqp_queue, "a", through),
                        PulsarClient("pulsar", members, pulsar_topic, "p")]
        for c in self.clients:
            c.start()
        self.wait_acks(0, WARM_ACKS, "the clients under way")
        return owner

    def stop_clients(self):
        for c in self.clients:
            self.assertTrue(c.finish(), f"{c.name} did not stop")

    def wait_acks(self, since, count, what):
        try:
            wait_for(lambda: all(c.acks_after(since) >= count for c in self.clients), what, timeout=PHASE_S)
        except AssertionError:
            raise AssertionError(f"timed out waiting for {what}: " + "; ".join(c.status() for c in self.clients))

    def set_policies(self, member, deduplicated):
        """Keeps every message (a topic without subscriptions keeps none
        past its current ledger otherwise, and the read-back reads them
        all), and turns the namespace's deduplication on when asked."""
        status, answer = request(member, "POST", f"/admin/v2/namespaces/{NS}/retention",
                                 {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1})
        self.assertEqual(status, 204, answer)
        if deduplicated:
            status, answer = request(member, "POST", f"/admin/v2/namespaces/{NS}/deduplication", True)
            self.assertEqual(status, 204, answer)

    def check_log(self, client, got, deduplicated):
        """Every value `client` had acknowledged is in `got`, the values of
        `client` come in the order it sent them (the first time each came),
        and, when `deduplicated`, each only once."""
        have = set(got)
        lost = [v for v in client.acked if v not in have]
        self.assertEqual(lost, [], f"{client.name}: {len(lost)} of {len(client.acked)} acknowledged messages lost "
                                   f"(first {lost[:10]})")
        firsts = [int(v[len(client.prefix):]) for v in dict.fromkeys(got)]
        wrong = [(a, b) for a, b in zip(firsts, firsts[1:]) if b < a]
        if wrong:
            at = got.index(f"{client.prefix}{wrong[0][0]}")
            acked = set(client.acked)
            offsets = getattr(client, "offsets", {})
            window = [(v, v in acked, offsets.get(v)) for v in got[max(0, at - 3):at + 4]]
            self.fail(f"{client.name}: messages out of the order they were sent in: {wrong[:5]}; at {at} of "
                      f"{len(got)} read back: (value, acknowledged, acknowledged offset) {window}")
        if deduplicated:
            repeated = sorted((v for v, n in Counter(got).items() if n > 1), key=lambda v: int(v[len(client.prefix):]))
            self.assertEqual(repeated, [], f"{client.name}: stored more than once with deduplication on")

    def read_back(self, members, deduplicated):
        """Reads each client's topic through the running members and checks
        it (check_log); one client's failure does not hide another's."""
        kafka, amqp, pulsar = self.clients
        self.assertEqual([c.crash for c in self.clients], [None] * 3)
        self.assertEqual([e for e in pulsar.errors if e.startswith("receipt for")], [], "receipts out of order")
        logs = {kafka.name: read_topic(members, kafka.topic), pulsar.name: read_topic(members, pulsar.topic),
                amqp.name: drain_queue(members, amqp.topic, amqp.acked)}
        failures = []
        for c in self.clients:
            print(f"  {c.status()}; {len(logs[c.name])} read back, "
                  f"{len(logs[c.name]) - len(set(logs[c.name]))} duplicates")
            try:
                self.check_log(c, logs[c.name], deduplicated and c is pulsar)
            except AssertionError as e:
                failures.append(str(e))
        if failures:
            raise AssertionError("\n".join(failures))

    def report_failure(self, members):
        """Stops the clients and prints what each saw and the members' logs."""
        for c in self.clients:
            c.halt.set()
        print("\n" + "; ".join(c.status() for c in self.clients))
        self.dump_logs(members)

    def dump_logs(self, members):
        for m in members:
            print(f"---- {m.log_path} (member {getattr(m, 'id', '?')}), last lines:\n{m.read_log()[-3000:]}")


class StorageFaultTest(StorageFaultCase, ClusterCase):
    prefix = "magnetar-storage-faults-"

    def start(self, count):
        members = self.add_members(count)
        for node in members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(node)) == count,
                     f"{node.http_url} seeing {count} live members", timeout=60)
        return members

    def restart(self, members, victims):
        for m in victims:
            m.start()
        for node in members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(node)) == len(members),
                     f"{node.http_url} seeing every member back", timeout=60)

    def run_fault(self, prefix, choose_victims, deduplicated, persistence=None, acks_before_restart=True):
        """Five members, the three clients on one owner, then the members
        `choose_victims(members, owner)` names killed with SIGKILL; with
        `acks_before_restart`, every client is acknowledged again before
        they are restarted on their data. Then more acknowledgements, and
        everything read back."""
        members = self.start(5)
        self.set_policies(members[0], deduplicated)
        if persistence:
            status, answer = request(members[0], "POST", f"/admin/v2/namespaces/{NS}/persistence", persistence)
            self.assertEqual(status, 204, answer)
        began = time.monotonic()
        owner = self.start_clients(members, prefix)
        try:
            victims = choose_victims(members, owner)
            changes = owner.metric(CHANGES)
            for m in victims:
                m.proc.kill()
            for m in victims:
                m.proc.wait(timeout=10)
            killed_at = time.monotonic()
            survivors = [m for m in members if m not in victims]
            if acks_before_restart:
                self.wait_acks(killed_at, AFTER_ACKS, "acknowledgements with the victims dead")
            if owner not in victims:
                # The owner replaced the dead copy holder in the ledgers it writes.
                wait_for(lambda: owner.metric(CHANGES) > changes, "an ensemble change on the owner")
                self.assertEqual([c.errors for c in self.clients], [[]] * 3, "a dead copy holder failed a client")
            else:
                # The bundle moves all the same, and its new owner tries to
                # recover the ledgers; restarted only then.
                new_owner = owner_of(members, self.clients[0].topic, among=survivors, other_than=victims)
                wait_for(lambda: new_owner.metric(RECOVERIES) > 0, "the new owner recovering the ledgers")
            acked_dead = [len(c.acked) for c in self.clients]
            self.restart(members, victims)
            restarted_at = time.monotonic()
            self.wait_acks(restarted_at, AFTER_ACKS, "acknowledgements with the victims back")
            self.stop_clients()
            print(f"\n{self.id()}: victims {[m.id for m in victims]} (owner {owner.id}); acknowledged while they "
                  f"were dead: {dict(zip([c.name for c in self.clients], acked_dead))}")
            self.read_back(members, deduplicated)
            print(f"  {time.monotonic() - began:.0f} s from the first message to the last check")
        except BaseException:
            self.report_failure(members)
            raise

    def test_a_copy_holder_that_is_not_the_owner_killed_under_load_loses_nothing_acknowledged(self):
        def holder(members, owner):
            counts = {m.id: ledgers_held(owner, m.id) for m in members if m is not owner}
            busiest = max(counts, key=counts.get)
            self.assertGreater(counts[busiest], 0, f"no member but the owner holds a copy: {counts}")
            return [self.cluster.member(busiest)]
        self.run_fault("holder", holder, deduplicated=True)

    def test_the_owner_killed_under_load_loses_nothing_acknowledged(self):
        self.run_fault("owner", lambda members, owner: [owner], deduplicated=True)

    def test_the_owner_and_a_copy_holder_killed_at_once_lose_nothing_acknowledged(self):
        # Three copies acknowledged at two: a ledger with copies on both
        # victims cannot be recovered by the one copy left (closing it needs
        # two fenced copies, else an acknowledged entry could be cut), so
        # its topic may wait for the victims to come back.
        def owner_and_holder(members, owner):
            counts = {m.id: ledgers_held(owner, m.id) for m in members if m is not owner}
            busiest = max(counts, key=counts.get)
            self.assertGreater(counts[busiest], 0, f"no member but the owner holds a copy: {counts}")
            return [owner, self.cluster.member(busiest)]
        self.run_fault("two", owner_and_holder, deduplicated=False, acks_before_restart=False)

    def test_with_five_copies_acknowledged_at_three_the_survivors_go_on_without_the_killed(self):
        # Every member holds a copy and an entry is acknowledged at three:
        # with two copies gone, three are left, enough to fence (5 - 3 + 1)
        # and to acknowledge, so the survivors recover every ledger at once.
        persistence = {"bookkeeperEnsemble": 5, "bookkeeperWriteQuorum": 5, "bookkeeperAckQuorum": 3,
                       "managedLedgerMaxMarkDeleteRate": 0}

        def owner_and_another(members, owner):
            return [owner, [m for m in members if m is not owner][0]]
        self.run_fault("five", owner_and_another, deduplicated=False, persistence=persistence)


class CutOffOwnerTest(StorageFaultCase, NetworkClusterCase):
    """Members in network namespaces (tests/utils/cluster_harness.py,
    Network); needs root, and fails, not skips, without it."""
    prefix = "magnetar-storage-cut-"

    def test_an_owner_cut_off_from_the_members_stops_acknowledging_and_loses_nothing(self):
        members = self.start(3)
        self.set_policies(members[0], deduplicated=False)
        began = time.monotonic()
        # The AMQP client publishes through a member that is not the owner:
        # a connection to the cut-off owner would hold its confirm until the
        # heal (pika's blocking publish has no deadline of its own).
        owner = self.start_clients(members, "cut", amqp_through_owner=False)
        others = [m for m in members if m is not owner]
        pulsar = self.clients[2]
        # A client left unacknowledged is noted and the test goes on, so that
        # what the heal must keep (every acknowledged message) is checked too.
        stalled = []
        watch = None
        try:
            self.network.cut([members.index(owner)], [members.index(m) for m in others])
            cut_at = time.monotonic()
            # The others count it dead and one of them takes the bundle over:
            # clients that look again find it there and are acknowledged.
            new_owner = owner_of(members, pulsar.topic, among=others, other_than=[owner])
            # Taken over, the old owner must not name itself the Kafka
            # leader again: not while cut off (its lease lapsed), nor once
            # healed (its view is the cluster's before its lease is renewed).
            watch = SelfNamedLeader(owner, self.clients[0].topic, new_owner)
            watch.start()
            try:
                self.wait_acks(cut_at, AFTER_ACKS, "acknowledgements with the owner cut off")
                self.assertTrue(any(pulsar.ackers[v] is new_owner for v in pulsar.acked[-AFTER_ACKS:]))
            except AssertionError as e:
                stalled.append(str(e))
            self.network.heal()
            healed_at = time.monotonic()
            held = owner.metric("magnetar_cluster_acks_held_total")
            moved_at_heal = failover_moves(members)
            # Healed, the old owner learns where its bundle went (all three
            # name one owner, not it), and the clients go on.
            settled = owner_of(members, pulsar.topic, other_than=[owner])
            try:
                self.wait_acks(healed_at, AFTER_ACKS, "acknowledgements after the heal")
            except AssertionError as e:
                stalled.append(str(e))
            self.stop_clients()
            watch.finish()
            self.assertGreater(watch.answers, 0)
            # Healed, every member is alive: none may count another dead and
            # move its bundles (a member that had just stopped leading once
            # judged by a view from before it led, and took every bundle).
            self.assertEqual(failover_moves(members), moved_at_heal, "bundles moved as if a member died after the heal")
            self.assertEqual([round(t - healed_at, 2) for t in watch.unowned()], [],
                             "the taken-over owner named itself leader (seconds after the heal) while the "
                             "bundle was another's")
            # Until the heal, nothing sent to the cut-off owner after the cut
            # was acknowledged by it: it reached no other copy, and its lease
            # lapsed. (What it acknowledged after the heal must be kept, as
            # everything acknowledged: read_back.)
            late = [v for v, t in zip(pulsar.acked, pulsar.ack_times)
                    if t < healed_at and pulsar.ackers[v] is owner and pulsar.sends[v][1] > cut_at]
            self.assertEqual(late, [], "acknowledged by the cut-off owner, sent to it after the cut")
            taken = owner.metric("magnetar_ledger_taken_over_total")
            print(f"\n{self.id()}: owner {owner.id} cut off, {new_owner.id} took over, {settled.id} owns it after "
                  f"the heal; acknowledgements the old owner held: {held:.0f}; its logs fenced by the new owner: "
                  f"{taken:.0f}; the old owner named itself the "
                  f"Kafka leader in {len(watch.named)} of {watch.answers} answers, {len(watch.other_named)} of "
                  f"the new owner's named it")
            self.read_back(members, deduplicated=False)
            print(f"  {time.monotonic() - began:.0f} s from the first message to the last check")
            self.assertEqual(stalled, [])
        except BaseException:
            if watch is not None:
                watch.finish()
            self.report_failure(members)
            raise


if __name__ == "__main__":
    unittest.main(verbosity=2)
