"""Geo-replication between two clusters on loopback: two standalone nodes,
each its own cluster (--cluster-name a / b), register each other and
replicate public/default both ways. Whatever is produced on one side, over
Pulsar, Kafka or AMQP, is stored on the other exactly once: replicated
messages are never sent back, and what a replicator sends again after a
restart or a lost link is dropped by the remote side's deduplication by
origin position."""
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

import confluent_kafka as ck
import pika

import pulsar_api_pb2 as pb
import magnetar_harness
from magnetar_harness import Node, free_port
from pulsar_wire import PulsarWire, command
from tls_certs import CertFactory

WAIT_S = 60
NS = "public/default"


def topic_url(name):
    return f"persistent://{NS}/{name}"


class Site:
    """One node as cluster `name`, on ports that stay the same across restarts."""

    host = "127.0.0.1"
    token = None  # sent as a bearer token to its REST API when set

    def __init__(self, name, *extra):
        self.name = name
        self.extra = extra
        self.started = False
        self.pulsar_port = free_port()
        self.http_port = free_port()
        self.node = Node("--cluster-name", name, "--pulsar-port", str(self.pulsar_port),
                         "--http-port", str(self.http_port), "--housekeeping-secs", "1", *extra)

    def start(self):
        # A port found free may be taken by another test before the node
        # binds it: at the first start only (a restart keeps its ports), new
        # ones are chosen then. Sites made otherwise (fixed ports) just start.
        for attempt in range(3):
            try:
                self.node.start()
                self.started = True
                return self
            except RuntimeError as e:
                retry = hasattr(self, "extra") and not getattr(self, "started", False) and attempt < 2
                if not retry or "Address already in use" not in str(e):
                    raise
                self.node.close()
                self.__init__(self.name, *self.extra)
        return self

    def call(self, method, path, body=None, expect=(200, 204)):
        headers = {"Authorization": "Bearer " + self.token} if self.token else None
        status, raw, _ = self.node.http(method, path, body, headers=headers)
        if status not in expect:
            raise AssertionError(f"{method} {path} on {self.name}: {status} {raw[:300]!r}")
        return json.loads(raw) if raw else None

    def stats(self, topic):
        return self.call("GET", f"/admin/v2/persistent/{NS}/{topic}/stats")

    def replication(self, topic, remote):
        return self.stats(topic).get("replication", {}).get(remote)


def link(a, b):
    """Registers each site on the other and replicates public/default to both."""
    for here, there in ((a, b), (b, a)):
        here.call("PUT", f"/admin/v2/clusters/{there.name}",
                  {"serviceUrl": f"http://{there.host}:{there.http_port}",
                   "brokerServiceUrl": f"pulsar://{there.host}:{there.pulsar_port}"})
        here.call("POST", "/admin/v2/tenants/public", {"allowedClusters": [a.name, b.name]})
        here.call("POST", f"/admin/v2/namespaces/{NS}/replication", [a.name, b.name])


def wait_until(test, cond, what, timeout=WAIT_S):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except (AssertionError, KeyError, OSError) as e:
            last = e
        time.sleep(0.2)
    test.fail(f"timed out waiting until {what} (last: {last})")


def produce(site, topic, payloads, producer_id=1, window=1):
    """Sends `payloads`, at most `window` unanswered at once; every one must be stored."""
    with PulsarWire(site.pulsar_port, site.host) as w:
        r = w.create_producer(topic_url(topic), producer_id)
        assert r.type == pb.BaseCommand.PRODUCER_SUCCESS, r
        unanswered = 0
        for p in payloads:
            w.send(producer_id, p, wait=False)
            unanswered += 1
            while unanswered >= window:
                r = w.next(None, where=lambda f: f.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR))
                assert r.type == pb.BaseCommand.SEND_RECEIPT, r
                unanswered -= 1
        while unanswered > 0:
            r = w.next(None, where=lambda f: f.type in (pb.BaseCommand.SEND_RECEIPT, pb.BaseCommand.SEND_ERROR))
            assert r.type == pb.BaseCommand.SEND_RECEIPT, r
            unanswered -= 1


def read_all(site, topic, expected, subscription="check", token=None):
    """Every MESSAGE frame stored in `topic` on `site`, from the start, once
    `expected` messages arrived and nothing more follows within a second."""
    out = []
    auth = {"auth_method_name": "token", "auth_data": token.encode()} if token else {}
    with PulsarWire(site.pulsar_port, site.host, **auth) as w:
        r = w.subscribe(topic_url(topic), subscription, 1, initial="Earliest")
        assert r.type == pb.BaseCommand.SUCCESS, r
        w.flow(1, 100000)
        deadline = time.monotonic() + WAIT_S
        count = 0
        while count < expected:
            f = w.receive(1, 1, timeout=max(0.0, deadline - time.monotonic()))[0]
            out.append(f)
            count += len(messages_of(f))
        while True:
            try:
                out.extend(w.receive(1, 1, timeout=1.0))
            except (TimeoutError, OSError):
                break
        w.request("UNSUBSCRIBE", ["SUCCESS", "ERROR"], consumer_id=1)
    return out


def messages_of(frame):
    """The payloads of one MESSAGE frame: its message, or each of its batch."""
    if not frame.metadata.HasField("num_messages_in_batch"):
        return [frame.payload]
    out, rest = [], frame.payload
    for _ in range(frame.metadata.num_messages_in_batch):
        n = struct.unpack(">I", rest[:4])[0]
        single = pb.SingleMessageMetadata()
        single.ParseFromString(rest[4:4 + n])
        out.append(rest[4 + n:4 + n + single.payload_size])
        rest = rest[4 + n + single.payload_size:]
    return out


def payloads_of(frames):
    return sorted(p for f in frames for p in messages_of(f))


class TwoSites(unittest.TestCase):
    """Sites self.a and self.b (made by setUp), stopped after each test,
    and self.dir (when a test made one) removed."""

    dir = None

    def tearDown(self):
        for s in (self.a, self.b):
            s.node.stop()
            s.node.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def caught_up(self, site, topic, remote):
        r = site.replication(topic, remote)
        return r is not None and r["connected"] and r["replicationBacklog"] == 0


class GeoReplicationTest(TwoSites):
    def setUp(self):
        self.a = Site("a").start()
        self.b = Site("b").start()
        link(self.a, self.b)

    def test_both_ways_exactly_once_and_never_back(self):
        sent_a = [b"from-a-%d" % i for i in range(200)]
        sent_b = [b"from-b-%d" % i for i in range(50)]
        produce(self.a, "both", sent_a)
        produce(self.b, "both", sent_b)
        wait_until(self, lambda: self.caught_up(self.a, "both", "b"), "a replicated to b")
        wait_until(self, lambda: self.caught_up(self.b, "both", "a"), "b replicated to a")
        everything = sorted(sent_a + sent_b)
        on_b = read_all(self.b, "both", len(everything))
        on_a = read_all(self.a, "both", len(everything))
        self.assertEqual(payloads_of(on_b), everything)
        self.assertEqual(payloads_of(on_a), everything)
        # What came from the other cluster says so; nothing went back.
        for frames, local, remote in ((on_b, b"from-b", "a"), (on_a, b"from-a", "b")):
            for f in frames:
                if f.payload.startswith(local):
                    self.assertFalse(f.metadata.HasField("replicated_from"))
                else:
                    self.assertEqual(f.metadata.replicated_from, remote)
        self.assertEqual(self.a.stats("both")["msgInCounter"], len(everything))
        self.assertEqual(self.b.stats("both")["msgInCounter"], len(everything))
        # The replicator's cursor is no subscription anybody sees.
        self.assertEqual(sorted(self.a.stats("both")["subscriptions"].keys()), [])
        stats = self.a.stats("both")["replication"]["b"]
        self.assertEqual(stats["msgOutCounter"], len(sent_a))
        for key in ("msgRateIn", "msgRateOut", "msgThroughputOut", "replicationDelayInSeconds", "connected"):
            self.assertIn(key, stats)

    def test_a_replicated_namespace_drops_what_it_stored_already(self):
        """What a replicator sends again (same origin positions as sequence
        ids) is answered as stored and not stored twice, also after a crash."""
        # Only b takes part. With a running, b's replicator would create the
        # topic on a, whose own replicator would then connect back to b under
        # the very producer name this test uses, and take the name first.
        self.a.node.stop()
        def send(w, seq, payload):
            r = w.send(1, payload, sequence_id=seq, replicated_from="a", producer_name="origin")
            self.assertEqual(r.type, pb.BaseCommand.SEND_RECEIPT)
            return r.cmd.send_receipt.message_id.ledgerId != 2 ** 64 - 1  # stored, not a duplicate
        with PulsarWire(self.b.pulsar_port) as w:
            r = w.create_producer(topic_url("dedup"), 1, producer_name="pulsar.repl.a")
            self.assertEqual(r.type, pb.BaseCommand.PRODUCER_SUCCESS)
            self.assertTrue(send(w, 5, b"five"))
            self.assertFalse(send(w, 5, b"five again"))
            self.assertFalse(send(w, 3, b"three"))
            self.assertTrue(send(w, 6, b"six"))
        self.b.node.stop(sig=signal.SIGKILL)
        self.b.start()
        with PulsarWire(self.b.pulsar_port) as w:
            r = w.create_producer(topic_url("dedup"), 1, producer_name="pulsar.repl.a")
            self.assertEqual(r.type, pb.BaseCommand.PRODUCER_SUCCESS, r.cmd)
            self.assertFalse(send(w, 6, b"six again"))
            self.assertTrue(send(w, 7, b"seven"))
        self.assertEqual(payloads_of(read_all(self.b, "dedup", 3)), [b"five", b"seven", b"six"])

    def test_a_topic_policy_narrows_replication(self):
        self.a.call("PUT", f"/admin/v2/persistent/{NS}/narrow")
        self.a.call("POST", f"/admin/v2/persistent/{NS}/narrow/replication", ["a"])
        self.assertEqual(self.a.call("GET", f"/admin/v2/persistent/{NS}/narrow/replication"), ["a"])
        wait_until(self, lambda: "b" not in self.a.stats("narrow")["replication"], "narrow's replicator gone")
        # A list without the local cluster is not replicated from here either.
        self.a.call("PUT", f"/admin/v2/persistent/{NS}/elsewhere")
        self.a.call("POST", f"/admin/v2/persistent/{NS}/elsewhere/replication", ["b"])
        wait_until(self, lambda: "b" not in self.a.stats("elsewhere")["replication"], "elsewhere's replicator gone")
        produce(self.a, "narrow", [b"stays on a"])
        produce(self.a, "elsewhere", [b"also stays on a"])
        produce(self.a, "wide", [b"goes to b"])
        wait_until(self, lambda: self.caught_up(self.a, "wide", "b"), "wide replicated")
        self.assertEqual(payloads_of(read_all(self.b, "wide", 1)), [b"goes to b"])
        for topic in ("narrow", "elsewhere"):
            status, _, _ = self.b.node.http("GET", f"/admin/v2/persistent/{NS}/{topic}/stats")
            if status == 200:
                self.assertEqual(self.b.stats(topic)["msgInCounter"], 0)
        # Without its own list, the topic follows its namespace again.
        self.a.call("DELETE", f"/admin/v2/persistent/{NS}/narrow/replication")
        wait_until(self, lambda: self.caught_up(self.a, "narrow", "b"), "narrow replicated after all")
        self.assertEqual(payloads_of(read_all(self.b, "narrow", 1)), [b"stays on a"])

    def test_reserved_subscription_names_are_refused(self):
        with PulsarWire(self.a.pulsar_port) as w:
            r = w.subscribe(topic_url("reserved"), "pulsar.repl.b", 1)
            self.assertEqual(r.type, pb.BaseCommand.ERROR)
        status, raw, _ = self.a.node.http("PUT", f"/admin/v2/persistent/{NS}/reserved/subscription/pulsar.repl.b")
        self.assertEqual(status // 100, 4, raw)
        self.assertIn(b"reserved for geo-replication", raw)

    def test_kafka_and_amqp_messages_replicate(self):
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{self.a.node.ports['kafka']}", "acks": "all"})
        for i in range(20):
            p.produce("kafka-made", b"k-%d" % i)
        self.assertEqual(p.flush(30), 0)
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.a.node.ports["amqp"]))
        ch = conn.channel()
        ch.queue_declare("amqp-made", durable=True)
        ch.confirm_delivery()
        for i in range(20):
            ch.basic_publish("", "amqp-made", b"q-%d" % i)
        conn.close()
        kafka_topic = "kafka-made"
        if self.a.node.http("GET", f"/admin/v2/persistent/{NS}/kafka-made/stats")[0] != 200:
            kafka_topic = "kafka-made-partition-0"
        wait_until(self, lambda: self.caught_up(self.a, kafka_topic, "b"), "kafka topic replicated")
        wait_until(self, lambda: self.caught_up(self.a, "amqp-made", "b"), "amqp topic replicated")
        self.assertEqual(payloads_of(read_all(self.b, kafka_topic, 20)), sorted(b"k-%d" % i for i in range(20)))
        self.assertEqual(payloads_of(read_all(self.b, "amqp-made", 20)), sorted(b"q-%d" % i for i in range(20)))

    def test_remote_down_then_back(self):
        produce(self.a, "down", [b"before"])
        wait_until(self, lambda: self.caught_up(self.a, "down", "b"), "first message replicated")
        self.assertEqual(self.b.node.stop(), 0)
        sent = [b"while-down-%d" % i for i in range(100)]
        produce(self.a, "down", sent)
        wait_until(self, lambda: self.a.replication("down", "b")["replicationBacklog"] == 100, "a backlog of 100")
        self.assertFalse(self.a.replication("down", "b")["connected"])
        wait_until(self, lambda: self.a.replication("down", "b")["replicationDelayInSeconds"] >= 1,
                   "the delay growing while b is down")
        self.b.start()
        wait_until(self, lambda: self.caught_up(self.a, "down", "b"), "replicated after b came back")
        self.assertEqual(payloads_of(read_all(self.b, "down", 101)), sorted(sent + [b"before"]))

    def test_origin_killed_mid_replication_leaves_no_duplicates(self):
        sent = [b"m-%05d" % i for i in range(20000)]
        produce(self.a, "killed", sent[:10])
        wait_until(self, lambda: self.caught_up(self.a, "killed", "b"), "first messages replicated")
        # A backlog built while b is away, then a killed while it catches up:
        # the cursor it stored is behind what b stored, so the restarted
        # replicator sends some again.
        self.assertEqual(self.b.node.stop(), 0)
        produce(self.a, "killed", sent[10:], window=500)
        self.b.start()
        wait_until(self, lambda: self.b.stats("killed")["msgInCounter"] > 10, "b taking the backlog", timeout=WAIT_S)
        self.a.node.stop(sig=signal.SIGKILL)
        on_b_at_kill = self.b.stats("killed")["msgInCounter"]
        self.a.start()
        # Nobody uses the topic on a: its replicator resumes by itself.
        on_b = payloads_of(read_all(self.b, "killed", len(sent)))
        self.assertEqual(on_b, sorted(sent))
        wait_until(self, lambda: self.caught_up(self.a, "killed", "b"), "a's replicator caught up")
        self.assertLess(on_b_at_kill, len(sent), "a was killed after it had replicated everything")

class AuthenticatedLinkTest(TwoSites):
    """b requires tokens: a's replicator gets in once b's cluster record on a
    carries one (Pulsar's token plugin), and not before."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="magnetar-georep-auth-")
        key = os.path.join(self.dir, "key")
        magnetar_cli("tokens", "create-secret-key", "--output", key)
        self.b_token = magnetar_cli("tokens", "create", "--secret-key", "file://" + key, "--subject", "replicator")
        self.a = Site("a").start()
        self.b = Site("b", "--authentication-enabled", "--token-secret-key", "file://" + key)
        self.b.token = self.b_token
        self.b.start()
        link(self.a, self.b)

    def test_the_link_authenticates_with_the_token_of_the_cluster_record(self):
        produce(self.a, "guarded", [b"one"])
        wait_until(self, lambda: self.a.replication("guarded", "b").get("lastError", "") != "", "a refused link")
        r = self.a.replication("guarded", "b")
        self.assertFalse(r["connected"])
        self.assertEqual(r["replicationBacklog"], 1)
        record = {"serviceUrl": f"http://127.0.0.1:{self.b.http_port}",
                  "brokerServiceUrl": f"pulsar://127.0.0.1:{self.b.pulsar_port}",
                  "authenticationPlugin": "org.apache.pulsar.client.impl.auth.AuthenticationToken",
                  "authenticationParameters": "token:" + self.b_token}
        self.a.call("POST", "/admin/v2/clusters/b", record)
        shown = self.a.call("GET", "/admin/v2/clusters/b")
        self.assertEqual(shown["authenticationPlugin"], record["authenticationPlugin"])
        self.assertNotIn("authenticationParameters", shown)  # a secret
        wait_until(self, lambda: self.caught_up(self.a, "guarded", "b"), "replicated with the token")
        self.assertEqual(payloads_of(read_all(self.b, "guarded", 1, token=self.b_token)), [b"one"])


class TlsLinkTest(TwoSites):
    """b takes Pulsar over TLS only to the replicator that trusts its
    certificate: a's link speaks TLS (brokerClientTlsEnabled) and checks b's
    certificate against the CA its cluster record names."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="magnetar-georep-tls-")
        self.ca = CertFactory(self.dir)
        cert, key = self.ca.issue("b", "localhost", serial=3001)
        self.stranger = CertFactory(self.dir, ca_name="stranger")  # signed nothing of b's
        self.a = Site("a").start()
        self.b = Site("b", "--broker-service-port-tls", "0", "--tls-certificate-file", cert, "--tls-key-file", key)
        self.b.start()
        link(self.a, self.b)

    def register_b(self, trust):
        self.a.call("POST", "/admin/v2/clusters/b",
                    {"serviceUrl": f"http://127.0.0.1:{self.b.http_port}",
                     "brokerServiceUrlTls": f"pulsar+ssl://localhost:{self.b.node.ports['pulsar_tls']}",
                     "brokerClientTlsEnabled": True, "brokerClientTrustCertsFilePath": trust})

    def test_the_link_speaks_tls_and_checks_the_remote_certificate(self):
        self.register_b(self.stranger.ca_pem)
        shown = self.a.call("GET", "/admin/v2/clusters/b")
        self.assertTrue(shown["brokerClientTlsEnabled"])
        self.assertEqual(shown["brokerClientTrustCertsFilePath"], self.stranger.ca_pem)
        self.assertEqual(shown["brokerServiceUrl"], "")  # replaced: the link has only the TLS URL
        produce(self.a, "sealed", [b"one"])
        wait_until(self, lambda: "certificate" in self.a.replication("sealed", "b").get("lastError", ""),
                   "a refusing b's certificate")
        r = self.a.replication("sealed", "b")
        self.assertFalse(r["connected"])
        self.assertEqual(r["replicationBacklog"], 1)
        # Trusting the CA that signed it (with the CLI, pulsar-admin's flags), the backlog goes over TLS.
        magnetar_cli("admin", "--url", f"http://127.0.0.1:{self.a.http_port}", "clusters", "update", "b",
                     "--service-url", f"http://127.0.0.1:{self.b.http_port}",
                     "--broker-url-tls", f"pulsar+ssl://localhost:{self.b.node.ports['pulsar_tls']}",
                     "--tls-enable", "--tls-trust-certs-filepath", self.ca.ca_pem)
        self.assertEqual(self.a.call("GET", "/admin/v2/clusters/b")["brokerClientTrustCertsFilePath"], self.ca.ca_pem)
        produce(self.a, "sealed", [b"two"])
        wait_until(self, lambda: self.caught_up(self.a, "sealed", "b"), "replicated over TLS")
        self.assertEqual(payloads_of(read_all(self.b, "sealed", 2)), [b"one", b"two"])


class MutualTlsLinkTest(TwoSites):
    """b takes only clients whose certificate its CA signed: a's link presents
    the certificate its cluster record names (brokerClientCertificateFilePath)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="magnetar-georep-mtls-")
        self.ca = CertFactory(self.dir)
        cert, key = self.ca.issue("b", "localhost", serial=3101)
        self.client_cert, self.client_key = self.ca.issue("replicator", "replicator", serial=3102, server=False)
        self.a = Site("a").start()
        self.b = Site("b", "--broker-service-port-tls", "0", "--tls-certificate-file", cert, "--tls-key-file", key,
                      "--tls-trust-certs-file-path", self.ca.ca_pem, "--tls-require-trusted-client-cert-on-connect")
        self.b.start()
        link(self.a, self.b)

    def register_b(self, **client):
        self.a.call("POST", "/admin/v2/clusters/b",
                    {"serviceUrl": f"http://127.0.0.1:{self.b.http_port}",
                     "brokerServiceUrlTls": f"pulsar+ssl://localhost:{self.b.node.ports['pulsar_tls']}",
                     "brokerClientTlsEnabled": True, "brokerClientTrustCertsFilePath": self.ca.ca_pem, **client})

    def test_the_link_presents_the_client_certificate_of_the_cluster_record(self):
        self.register_b()
        produce(self.a, "mutual", [b"one"])
        wait_until(self, lambda: self.a.replication("mutual", "b").get("lastError", "") != "", "b refusing a")
        self.assertFalse(self.a.replication("mutual", "b")["connected"])
        self.register_b(brokerClientCertificateFilePath=self.client_cert, brokerClientKeyFilePath=self.client_key)
        self.assertEqual(self.a.call("GET", "/admin/v2/clusters/b")["brokerClientCertificateFilePath"],
                         self.client_cert)
        wait_until(self, lambda: self.caught_up(self.a, "mutual", "b"), "replicated with the client certificate")
        self.assertEqual(payloads_of(read_all(self.b, "mutual", 1)), [b"one"])


class ConfigurationSyncTest(TwoSites):
    """A tenant made on a that allows b has its home on a: it appears on b
    with its namespaces and their policies, b refuses edits and names a, a
    namespace deleted on a goes from b, and when a is lost b takes the home
    over."""

    def setUp(self):
        self.a = Site("a").start()
        self.b = Site("b").start()
        for here, there in ((self.a, self.b), (self.b, self.a)):
            here.call("PUT", f"/admin/v2/clusters/{there.name}",
                      {"serviceUrl": f"http://{there.host}:{there.http_port}",
                       "brokerServiceUrl": f"pulsar://{there.host}:{there.pulsar_port}"})

    def on_b(self, path):
        status, raw, _ = self.b.node.http("GET", path)
        return json.loads(raw) if status == 200 else None

    def test_a_tenants_configuration_follows_its_home_cluster(self):
        self.a.call("PUT", "/admin/v2/tenants/acme", {"adminRoles": ["ops"], "allowedClusters": ["a", "b"]})
        self.assertEqual(self.a.call("GET", "/admin/v2/tenants/acme")["homeCluster"], "a")
        self.a.call("PUT", "/admin/v2/namespaces/acme/orders")
        retention = {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
        self.a.call("POST", "/admin/v2/namespaces/acme/orders/retention", retention)
        self.a.call("PUT", "/admin/v2/namespaces/acme/audit")
        wait_until(self, lambda: self.on_b("/admin/v2/namespaces/acme/orders/retention") == retention,
                   "acme/orders and its retention on b")
        self.assertEqual(self.on_b("/admin/v2/tenants/acme"),
                         {"adminRoles": ["ops"], "allowedClusters": ["a", "b"], "homeCluster": "a"})
        self.assertEqual(sorted(self.on_b("/admin/v2/namespaces/acme")), ["acme/audit", "acme/orders"])
        # Edits on b are refused, naming the home; nothing changes there.
        for method, path, body in (("POST", "/admin/v2/namespaces/acme/orders/retention",
                                    {"retentionTimeInMinutes": 5, "retentionSizeInMB": 1}),
                                   ("PUT", "/admin/v2/namespaces/acme/rogue", None),
                                   ("DELETE", "/admin/v2/namespaces/acme/audit", None),
                                   ("POST", "/admin/v2/tenants/acme", {"allowedClusters": ["a", "b"]})):
            status, raw, _ = self.b.node.http(method, path, body)
            self.assertIn(status, (409, 412), (method, path, raw))
            self.assertIn(b"home cluster 'a'", raw, (method, path))
        self.assertEqual(self.on_b("/admin/v2/namespaces/acme/orders/retention"), retention)
        # A topic's override follows too: it is there once b has the topic
        # (its first message would make it), and refused on b.
        self.a.call("PUT", "/admin/v2/persistent/acme/orders/capped")
        self.a.call("POST", "/admin/v2/persistent/acme/orders/capped/messageTTL", "60")
        self.b.call("PUT", "/admin/v2/persistent/acme/orders/capped")
        wait_until(self, lambda: self.on_b("/admin/v2/persistent/acme/orders/capped/messageTTL") == 60,
                   "the topic's TTL on b")
        status, raw, _ = self.b.node.http("POST", "/admin/v2/persistent/acme/orders/capped/messageTTL", "5")
        self.assertIn(status, (409, 412), raw)
        self.assertIn(b"home cluster 'a'", raw)
        # A partitioned topic made and grown on a is made and grown on b.
        def partitions_on_a(method, count):
            status, raw, _ = self.a.node.http(method, "/admin/v2/persistent/acme/orders/parted/partitions",
                                              str(count).encode(), headers={"Content-Type": "application/json"})
            self.assertEqual(status, 204, raw)
        partitions_on_a("PUT", 3)
        wait_until(self, lambda: self.on_b("/admin/v2/persistent/acme/orders/parted/partitions") == {"partitions": 3},
                   "the partitioned topic on b")
        partitions_on_a("POST", 5)
        wait_until(self, lambda: self.on_b("/admin/v2/persistent/acme/orders/parted/partitions") == {"partitions": 5},
                   "its new partitions on b")
        # A change and a deletion on a follow.
        self.a.call("DELETE", "/admin/v2/namespaces/acme/audit")
        self.a.call("POST", "/admin/v2/namespaces/acme/orders/retention",
                    {"retentionTimeInMinutes": 120, "retentionSizeInMB": 20})
        wait_until(self, lambda: self.on_b("/admin/v2/namespaces/acme") == ["acme/orders"], "acme/audit gone from b")
        wait_until(self, lambda: self.on_b("/admin/v2/namespaces/acme/orders/retention")["retentionSizeInMB"] == 20,
                   "the new retention on b")
        # An override removed at home goes on b.
        self.a.call("DELETE", "/admin/v2/persistent/acme/orders/capped/messageTTL")
        wait_until(self, lambda: self.on_b("/admin/v2/persistent/acme/orders/capped/messageTTL") is None,
                   "the topic's TTL gone from b")
        # a is lost: b takes the home over and edits there.
        self.a.node.stop()
        self.b.call("POST", "/admin/v2/tenants/acme", {"allowedClusters": ["a", "b"], "homeCluster": "b"})
        self.b.call("PUT", "/admin/v2/namespaces/acme/after-a")
        self.assertEqual(self.on_b("/admin/v2/tenants/acme")["homeCluster"], "b")

    def test_a_tenant_deleted_while_the_other_cluster_was_down_goes_there_after_a_restart_of_its_home(self):
        self.a.call("PUT", "/admin/v2/tenants/gone", {"allowedClusters": ["a", "b"]})
        self.a.call("PUT", "/admin/v2/namespaces/gone/ns")
        wait_until(self, lambda: self.on_b("/admin/v2/namespaces/gone") == ["gone/ns"], "gone/ns on b")
        self.b.node.stop()
        self.a.call("DELETE", "/admin/v2/namespaces/gone/ns")
        self.a.call("DELETE", "/admin/v2/tenants/gone")
        # The home restarts before b is back: what it had sent is remembered.
        self.a.node.stop()
        self.a.node.start()
        self.b.node.start()
        wait_until(self, lambda: self.on_b("/admin/v2/tenants/gone") is None, "tenant gone deleted on b")
        self.assertNotIn("gone", self.on_b("/admin/v2/tenants"))


class ReplicatedSubscriptionTest(TwoSites):
    """A subscription marked replicated on a has its acknowledgements sent to
    b: a consumer that moves to b resumes after what it acknowledged on a,
    whichever cluster the messages were produced on, and acknowledgements on
    b come back to a."""

    def setUp(self):
        self.a = Site("a").start()
        self.b = Site("b").start()
        link(self.a, self.b)

    def subscription(self, site, topic, name):
        return site.stats(topic)["subscriptions"].get(name)

    def wait_backlog(self, site, topic, name, backlog):
        def settled():
            s = self.subscription(site, topic, name)
            return s is not None and s["isReplicated"] and s["msgBacklog"] == backlog
        wait_until(self, settled, f"subscription {name} on {site.name} with a backlog of {backlog}")

    def test_a_consumer_moved_to_the_other_cluster_resumes_after_what_it_acknowledged(self):
        topic = "replicated-sub"
        with PulsarWire(self.a.pulsar_port, self.a.host) as w:
            r = w.subscribe(topic_url(topic), "orders", 1, initial="Earliest", replicate_subscription_state=True)
            self.assertEqual(r.type, pb.BaseCommand.SUCCESS, r)
            self.assertTrue(self.subscription(self.a, topic, "orders")["isReplicated"])
            # Twenty produced on a, then ten on b: a's log holds a0..a19,
            # b0..b9, and so does b's.
            produce(self.a, topic, [b"a%d" % i for i in range(20)])
            wait_until(self, lambda: self.caught_up(self.a, topic, "b"), "a's messages on b")
            produce(self.b, topic, [b"b%d" % i for i in range(10)])
            wait_until(self, lambda: self.caught_up(self.b, topic, "a"), "b's messages on a")
            w.flow(1, 1000)
            frames = w.receive(1, 30)
            self.assertEqual([f.payload for f in frames], [b"a%d" % i for i in range(20)] +
                             [b"b%d" % i for i in range(10)])

            def ack_through(i):
                w.write(command("ACK", consumer_id=1, ack_type=pb.CommandAck.Cumulative,
                                message_id=[frames[i].cmd.message.message_id]))
            # Through a14: b's copy of the subscription leaves a15..a19 and
            # b's own ten (the subscription is made there).
            acked_at = time.monotonic()
            ack_through(14)
            self.wait_backlog(self.b, topic, "orders", 15)
            first = time.monotonic() - acked_at
            # Through b4, one of b's own messages.
            acked_at = time.monotonic()
            ack_through(24)
            self.wait_backlog(self.b, topic, "orders", 5)
            print(f"\n{self.id()}: acknowledged on a, followed on b after {first * 1000:.0f} ms "
                  f"(subscription made there) and {(time.monotonic() - acked_at) * 1000:.0f} ms")
            w.request("CLOSE_CONSUMER", ["SUCCESS", "ERROR"], consumer_id=1)
        # The consumer moves to b: what it acknowledged on a does not come again.
        with PulsarWire(self.b.pulsar_port, self.b.host) as w:
            r = w.subscribe(topic_url(topic), "orders", 2, initial="Earliest", replicate_subscription_state=True)
            self.assertEqual(r.type, pb.BaseCommand.SUCCESS, r)
            w.flow(2, 1000)
            frames = w.receive(2, 5)
            self.assertEqual([f.payload for f in frames], [b"b%d" % i for i in range(5, 10)])
            with self.assertRaises((TimeoutError, OSError)):
                w.receive(2, 1, timeout=1.0)
            # Acknowledged on b, and so on a.
            w.write(command("ACK", consumer_id=2, ack_type=pb.CommandAck.Cumulative,
                            message_id=[frames[-1].cmd.message.message_id]))
            self.wait_backlog(self.a, topic, "orders", 0)
        # Nothing but messages was ever stored: 30 in each log.
        self.assertEqual(self.a.stats(topic)["msgInCounter"], 30)
        self.assertEqual(self.b.stats(topic)["msgInCounter"], 30)

    def test_the_replicated_status_is_set_over_rest(self):
        topic = "replicated-rest"
        path = f"/admin/v2/persistent/{NS}/{topic}/subscription/audit"
        self.a.call("PUT", f"/admin/v2/persistent/{NS}/{topic}")
        self.a.call("PUT", path)
        self.assertFalse(self.subscription(self.a, topic, "audit")["isReplicated"])
        self.a.call("POST", path + "/replicatedSubscriptionStatus", "true")
        self.assertTrue(self.subscription(self.a, topic, "audit")["isReplicated"])
        status, raw, _ = self.a.node.http("POST", path + "/replicatedSubscriptionStatus", "yes")
        self.assertEqual(status, 400, raw)
        self.a.call("POST", path + "/replicatedSubscriptionStatus", "false")
        self.assertFalse(self.subscription(self.a, topic, "audit")["isReplicated"])


def magnetar_cli(*args):
    out = subprocess.run([magnetar_harness.BIN, *args], capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip()


if __name__ == "__main__":
    unittest.main()
