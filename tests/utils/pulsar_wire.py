"""A small synchronous Pulsar protocol client for protocol-level tests.

It speaks the binary protocol with the messages protoc generates from our
own src/protocol/pulsar/pulsar_api.proto (module pulsar_api_pb2, built into
the build tree), so a test can send any command, exactly as a client library
would, and look at every field of every answer. Every wait is bounded.
"""
import socket
import struct
import time

import pulsar_api_pb2 as pb

TIMEOUT_S = 10.0

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def encode(cmd, metadata=None, payload=b"", checksum=True):
    """One frame: a simple command, or a payload command when `metadata` is
    given, with its CRC32C unless `checksum` is false (the protocol allows
    frames without one; this pure-Python CRC is slow for megabytes)."""
    body = cmd.SerializeToString()
    if metadata is None:
        return struct.pack(">II", 4 + len(body), len(body)) + body
    md = metadata.SerializeToString()
    checked = struct.pack(">I", len(md)) + md + payload
    tail = b"\x0e\x01" + struct.pack(">I", crc32c(checked)) + checked if checksum else checked
    return struct.pack(">II", 4 + len(body) + len(tail), len(body)) + body + tail


def batch_payload(messages):
    """A batch's payload from (payload bytes, SingleMessageMetadata fields) pairs."""
    out = b""
    for payload, fields in messages:
        single = pb.SingleMessageMetadata(payload_size=len(payload), **fields).SerializeToString()
        out += struct.pack(">I", len(single)) + single + payload
    return out


class Frame:
    def __init__(self, cmd, metadata=None, payload=b""):
        self.cmd, self.metadata, self.payload = cmd, metadata, payload

    @property
    def type(self):
        return self.cmd.type


def decode(data: bytes):
    """(Frame, bytes used) or (None, 0) when `data` holds no whole frame."""
    if len(data) < 4:
        return None, 0
    total = struct.unpack(">I", data[:4])[0]
    if len(data) < 4 + total:
        return None, 0
    size = struct.unpack(">I", data[4:8])[0]
    cmd = pb.BaseCommand()
    cmd.ParseFromString(data[8:8 + size])
    rest = data[8 + size:4 + total]
    frame = Frame(cmd)
    if rest:
        if rest[:2] == b"\x0e\x02":  # broker entry metadata: skip it
            n = struct.unpack(">I", rest[2:6])[0]
            rest = rest[6 + n:]
        if rest[:2] == b"\x0e\x01":
            rest = rest[6:]
        n = struct.unpack(">I", rest[:4])[0]
        frame.metadata = pb.MessageMetadata()
        frame.metadata.ParseFromString(rest[4:4 + n])
        frame.payload = rest[4 + n:]
    return frame, 4 + total


def command(type_name, **fields):
    """BaseCommand of `type_name` ("PRODUCER", ...) with its body's fields set."""
    cmd = pb.BaseCommand()
    cmd.type = getattr(pb.BaseCommand, type_name)
    body_field = {
        "CONNECT": "connect", "PRODUCER": "producer", "SEND": "send", "SUBSCRIBE": "subscribe",
        "FLOW": "flow", "ACK": "ack", "SEEK": "seek", "GET_SCHEMA": "getSchema",
        "GET_OR_CREATE_SCHEMA": "getOrCreateSchema", "GET_TOPICS_OF_NAMESPACE": "getTopicsOfNamespace",
        "CLOSE_CONSUMER": "close_consumer", "CLOSE_PRODUCER": "close_producer",
        "GET_LAST_MESSAGE_ID": "getLastMessageId", "UNSUBSCRIBE": "unsubscribe",
        "REDELIVER_UNACKNOWLEDGED_MESSAGES": "redeliverUnacknowledgedMessages", "PING": "ping",
        "LOOKUP": "lookupTopic", "PARTITIONED_METADATA": "partitionMetadata",
        "CONSUMER_STATS": "consumerStats", "NEW_TXN": "newTxn", "WATCH_TOPIC_LIST": "watchTopicList",
    }[type_name]
    body = getattr(cmd, body_field)
    body.SetInParent()
    for k, v in fields.items():
        target = getattr(body, k)
        if hasattr(target, "CopyFrom") and not isinstance(v, (int, str, bytes, bool)):
            target.CopyFrom(v)
        elif isinstance(target, (int, str, bytes, bool, float)) or target is None:
            setattr(body, k, v)
        else:
            target.extend(v)
    return cmd


class PulsarWire:
    """One connection. Frames that are not the answer being waited for are
    kept in arrival order for later next() calls."""

    def __init__(self, port, host="127.0.0.1", protocol_version=19, **connect_fields):
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)
        self.buf = b""
        self.pending = []
        self.next_request = 1
        self.sequence = {}
        self.write(command("CONNECT", client_version="pulsar-wire-test", protocol_version=protocol_version,
                           **connect_fields))
        self.connected = self.next("CONNECTED")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def write(self, cmd, metadata=None, payload=b"", checksum=True):
        self.sock.sendall(encode(cmd, metadata, payload, checksum))

    def _read_frame(self, deadline):
        while True:
            frame, used = decode(self.buf)
            if frame is not None:
                self.buf = self.buf[used:]
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from the broker in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk

    def next(self, type_name=None, timeout=TIMEOUT_S, where=None):
        """The next frame (of `type_name`, matching `where`); others stay queued."""
        want = None if type_name is None else getattr(pb.BaseCommand, type_name)
        ok = lambda f: (want is None or f.type == want) and (where is None or where(f))
        for i, f in enumerate(self.pending):
            if ok(f):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            f = self._read_frame(deadline)
            if f.type == pb.BaseCommand.PING:
                self.write(pb.BaseCommand(type=pb.BaseCommand.PONG, pong=pb.CommandPong()))
                continue
            if ok(f):
                return f
            self.pending.append(f)

    def request_id(self):
        self.next_request += 1
        return self.next_request

    def request(self, type_name, answer_types, **fields):
        """Sends a command with a fresh request_id; returns the answer frame."""
        rid = self.request_id()
        self.write(command(type_name, request_id=rid, **fields))

        def matches(f):
            for name in ("success", "error", "producer_success", "getSchemaResponse",
                         "getOrCreateSchemaResponse", "getTopicsOfNamespaceResponse",
                         "getLastMessageIdResponse", "lookupTopicResponse", "partitionMetadataResponse",
                         "consumerStatsResponse"):
                if f.cmd.HasField(name) and getattr(f.cmd, name).request_id == rid:
                    return True
            return False
        return self.next(None, where=lambda f: f.type in [getattr(pb.BaseCommand, t) for t in answer_types]
                         and matches(f))

    # --- producers
    def create_producer(self, topic, producer_id, **fields):
        return self.request("PRODUCER", ["PRODUCER_SUCCESS", "ERROR"], topic=topic, producer_id=producer_id,
                            **fields)

    def send(self, producer_id, payload: bytes, sequence_id=None, wait=True, checksum=True, send_fields=None,
             **metadata_fields):
        """SEND with MessageMetadata `metadata_fields`; `send_fields` go into
        the CommandSend (num_messages, is_chunk, ...)."""
        seq = sequence_id if sequence_id is not None else self.sequence.get(producer_id, 0)
        self.sequence[producer_id] = max(self.sequence.get(producer_id, 0), seq + 1)
        md = pb.MessageMetadata(producer_name=metadata_fields.pop("producer_name", "wire"), sequence_id=seq,
                                publish_time=metadata_fields.pop("publish_time", int(time.time() * 1000)))
        for k, v in metadata_fields.items():
            if isinstance(v, (list, tuple)):
                getattr(md, k).extend(v)  # repeated fields (properties, ...)
            else:
                setattr(md, k, v)
        send = {"num_messages": 1, **(send_fields or {})}
        cmd = pb.BaseCommand(type=pb.BaseCommand.SEND,
                             send=pb.CommandSend(producer_id=producer_id, sequence_id=seq, **send))
        self.write(cmd, md, payload, checksum)
        if not wait:
            return seq
        return self.next(None, where=lambda f: f.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR)
                         and (f.cmd.send_receipt.sequence_id == seq if f.type == pb.BaseCommand.SEND_RECEIPT
                              else f.cmd.send_error.sequence_id == seq))

    def send_unreadable(self, producer_id, messages=1, **fields):
        """SEND of an entry that says it is zlib-compressed but is not (a
        batch of `messages` when more than one): stored as it came, but no
        Kafka record or AMQP message can be made of it. Its answer."""
        batch = {"num_messages_in_batch": messages} if messages > 1 else {}
        return self.send(producer_id, b"these bytes are not zlib", send_fields={"num_messages": messages},
                         compression=pb.ZLIB, uncompressed_size=100, **batch, **fields)

    # --- consumers
    def subscribe(self, topic, subscription, consumer_id, sub_type="Exclusive", initial="Latest", **fields):
        return self.request("SUBSCRIBE", ["SUCCESS", "ERROR"], topic=topic, subscription=subscription,
                            consumer_id=consumer_id, subType=getattr(pb.CommandSubscribe, sub_type),
                            initialPosition=getattr(pb.CommandSubscribe, initial), **fields)

    def flow(self, consumer_id, permits):
        self.write(command("FLOW", consumer_id=consumer_id, messagePermits=permits))

    def receive(self, consumer_id, count, timeout=TIMEOUT_S):
        """`count` MESSAGE frames for `consumer_id`, in order."""
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            out.append(self.next("MESSAGE", timeout=max(0.0, deadline - time.monotonic()),
                                 where=lambda f: f.cmd.message.consumer_id == consumer_id))
        return out

    def ack(self, consumer_id, message_id):
        self.write(command("ACK", consumer_id=consumer_id, ack_type=pb.CommandAck.Individual,
                           message_id=[message_id]))
