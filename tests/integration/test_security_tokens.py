"""Token authentication end to end: `magnetar tokens` makes keys and
tokens; a node started with --authentication-enabled refuses clients
without a valid token on every listener (REST, Pulsar, Kafka, AMQP) and
serves those with one. Garbage credentials do not hurt the node."""
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

import confluent_kafka as ck
import pika
import pulsar_api_pb2 as pb
from magnetar_harness import BIN, Node
from pulsar_wire import PulsarWire, command, decode, encode

TIMEOUT_S = 20


def magnetar(*args, check=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"magnetar {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def pulsar_connect(port, **auth):
    """The first frame the node answers a CONNECT with, in a list (empty when
    the connection closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as s:
        s.sendall(encode(command("CONNECT", client_version="sec-test", protocol_version=19, **auth)))
        raw = b""
        while True:
            frame, _ = decode(raw)
            if frame is not None:
                return [frame]
            chunk = s.recv(65536)
            if not chunk:
                return []
            raw += chunk


class TokensCliTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_secret_key_tokens_validate_and_expire(self):
        magnetar("tokens", "create-secret-key", "--output", self.path("k"))
        self.assertEqual(os.stat(self.path("k")).st_mode & 0o777, 0o600)
        self.assertEqual(os.path.getsize(self.path("k")), 32)
        key = "file://" + self.path("k")
        token = magnetar("tokens", "create", "--secret-key", key, "--subject", "alice", "--expiry", "1h").stdout.strip()
        out = json.loads(magnetar("tokens", "validate", token, "--secret-key", key, "--json").stdout)
        self.assertEqual(out["subject"], "alice")
        self.assertAlmostEqual(out["expiresAt"], time.time() + 3600, delta=120)
        self.assertEqual(json.loads(magnetar("tokens", "show", token, "--json").stdout)["subject"], "alice")
        # Another key does not accept it.
        magnetar("tokens", "create-secret-key", "--output", self.path("other"))
        bad = magnetar("tokens", "validate", token, "--secret-key", "file://" + self.path("other"), check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("signature is invalid", bad.stderr)
        # A token whose expiry passed.
        old = magnetar("tokens", "create", "--secret-key", key, "--subject", "alice", "--expiry", "1s").stdout.strip()
        time.sleep(2.1)
        expired = magnetar("tokens", "validate", old, "--secret-key", key, check=False)
        self.assertEqual(expired.returncode, 1)
        self.assertIn("expired", expired.stderr)

    def test_key_pairs_sign_with_the_private_key_and_verify_with_the_public_one(self):
        for alg in ("RS256", "ES256"):
            priv, pub = self.path(alg + ".priv"), self.path(alg + ".pub")
            magnetar("tokens", "create-key-pair", "-a", alg, "--output-private-key", priv, "--output-public-key", pub)
            token = magnetar("tokens", "create", "--private-key", priv, "--subject", "svc").stdout.strip()
            header = json.loads(__import__("base64").urlsafe_b64decode(token.split(".")[0] + "=="))
            self.assertEqual(header["alg"], alg)
            out = json.loads(magnetar("tokens", "validate", token, "--public-key", "file://" + pub, "--json").stdout)
            self.assertEqual(out, {"subject": "svc", "expiresAt": None, "valid": True})

    def test_a_bad_key_or_token_is_a_clear_error(self):
        r = magnetar("tokens", "create", "--subject", "x", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("exactly one of", r.stderr)
        r = magnetar("tokens", "show", "not-a-token", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("malformed token", r.stderr)


class AuthenticatedNodeTest(unittest.TestCase):
    """One node with HS256 token authentication on."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.key = os.path.join(cls.dir.name, "token.key")
        magnetar("tokens", "create-secret-key", "--output", cls.key)
        cls.key_url = "file://" + cls.key
        cls.token = magnetar("tokens", "create", "--secret-key", cls.key_url, "--subject", "admin").stdout.strip()
        cls.node = Node("--authentication-enabled", "--token-secret-key", cls.key_url).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        cls.dir.cleanup()
        assert code == 0, f"exit code {code}"

    def make_token(self, *args):
        return magnetar("tokens", "create", "--secret-key", self.key_url, *args).stdout.strip()

    def forged_token(self):
        other = os.path.join(self.dir.name, "forger.key")
        magnetar("tokens", "create-secret-key", "--output", other)
        return magnetar("tokens", "create", "--secret-key", "file://" + other, "--subject", "admin").stdout.strip()

    def rest(self, token=None, path="/admin/v2/tenants"):
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        status, body, _ = self.node.http("GET", path, headers=headers)
        return status, json.loads(body) if body else None

    def test_rest_needs_a_valid_bearer_token(self):
        status, body = self.rest()
        self.assertEqual(status, 401)
        self.assertIn("Authorization: Bearer", body["reason"])
        self.assertEqual(self.rest(self.forged_token())[0], 401)
        expired = self.make_token("--subject", "admin", "--expiry", "1s")
        time.sleep(1.1)
        status, body = self.rest(expired)
        self.assertEqual((status, "expired" in body["reason"]), (401, True))
        status, body = self.rest(self.token)
        self.assertEqual(status, 200)
        self.assertIn("public", body)
        # The console's page loads without a token (its login comes first).
        self.assertEqual(self.node.http("GET", "/")[0], 200)
        # Garbage in the header: refused (400 when the header itself is not
        # valid HTTP), and the node still serves.
        for junk in ("Bearer ", "Bearer a.b.c", "Bearer \x01\x02", "Basic !!!", "Bearer " + "x" * 5000):
            status = self.node.http("GET", "/admin/v2/tenants", headers={"Authorization": junk})[0]
            self.assertIn(status, (400, 401), repr(junk[:20]))
        self.assertEqual(self.rest(self.token)[0], 200)

    def test_admin_cli_sends_its_token(self):
        url = self.node.http_url
        refused = magnetar("admin", "--url", url, "tenants", "list", check=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("authentication is required", refused.stderr)
        token_file = os.path.join(self.dir.name, "admin.token")
        with open(token_file, "w") as f:
            f.write(self.token + "\n")
        out = magnetar("admin", "--url", url, "--token-file", token_file, "--json", "tenants", "list").stdout
        self.assertIn("public", json.loads(out))

    def test_pulsar_connect_needs_a_valid_token(self):
        port = self.node.ports["pulsar"]
        for auth, reason in (({}, "authentication is required"),
                             ({"auth_method_name": "token", "auth_data": self.forged_token().encode()},
                              "signature is invalid"),
                             ({"auth_method_name": "token", "auth_data": b"\xff\x00garbage"}, "malformed token"),
                             ({"auth_method_name": "tls", "auth_data": b""}, "not served")):
            frames = pulsar_connect(port, **auth)
            self.assertEqual([f.type for f in frames], [pb.BaseCommand.ERROR], auth)
            self.assertEqual(frames[0].cmd.error.error, pb.AuthenticationError)
            self.assertIn(reason, frames[0].cmd.error.message)
        frames = pulsar_connect(port, auth_method_name="token", auth_data=self.token.encode())
        self.assertEqual(frames[0].type, pb.BaseCommand.CONNECTED)
        # The command-line client, with and without --token.
        url = f"pulsar://127.0.0.1:{port}"
        refused = magnetar("produce", "sec-topic", "-m", "x", "--url", url, check=False)
        self.assertNotEqual(refused.returncode, 0)
        magnetar("produce", "sec-topic", "-m", "hello", "--url", url, "--token", self.token)
        out = magnetar("consume", "sec-topic", "-s", "s1", "-P", "Earliest", "-n", "1", "--url", url, "--token",
                       self.token).stdout
        self.assertIn("hello", out)

    def test_kafka_needs_sasl_plain_with_a_valid_token(self):
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"

        def produce(config):
            p = ck.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000, **config})
            reports = []
            p.produce("sec-kafka", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            return reports

        def sasl(password):
            return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "public/default", "sasl.password": password}

        # No SASL: the node closes the connection before anything is served.
        [error] = produce({})
        self.assertIsNotNone(error)
        [error] = produce(sasl(self.forged_token()))
        self.assertIsNotNone(error)
        self.assertEqual(produce(sasl(self.token)), [None])
        status, stats = self.rest(self.token, "/admin/v2/persistent/public/default/sec-kafka/stats")
        self.assertEqual((status, stats["msgInCounter"]), (200, 1))

    def test_amqp_needs_a_valid_token_as_its_password(self):
        def connect(password):
            params = pika.ConnectionParameters("127.0.0.1", self.node.ports["amqp"],
                                               credentials=pika.PlainCredentials("app", password),
                                               connection_attempts=1, socket_timeout=15, blocked_connection_timeout=15)
            return pika.BlockingConnection(params)

        with self.assertRaises(pika.exceptions.ProbableAuthenticationError):
            connect(self.forged_token())
        with self.assertRaises(pika.exceptions.ProbableAuthenticationError):
            connect("not-a-token")
        conn = connect(self.token)
        try:
            ch = conn.channel()
            ch.queue_declare("sec-queue", durable=True)
            ch.basic_publish("", "sec-queue", b"over amqp")
            method, _, body = ch.basic_get("sec-queue", auto_ack=True)
            self.assertEqual(body, b"over amqp")
        finally:
            conn.close()


class PublicKeyNodeTest(unittest.TestCase):
    def test_rs256_tokens_from_the_private_key_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            priv, pub = os.path.join(d, "priv"), os.path.join(d, "pub")
            magnetar("tokens", "create-key-pair", "-a", "RS256", "--output-private-key", priv,
                     "--output-public-key", pub)
            good = magnetar("tokens", "create", "--private-key", priv, "--subject", "svc").stdout.strip()
            magnetar("tokens", "create-secret-key", "--output", os.path.join(d, "hs"))
            hs = magnetar("tokens", "create", "--secret-key", os.path.join(d, "hs"), "--subject", "svc").stdout.strip()
            with Node("--authentication-enabled", "--token-public-key", "file://" + pub) as node:
                ok = pulsar_connect(node.ports["pulsar"], auth_method_name="token", auth_data=good.encode())
                self.assertEqual(ok[0].type, pb.BaseCommand.CONNECTED)
                refused = pulsar_connect(node.ports["pulsar"], auth_method_name="token", auth_data=hs.encode())
                self.assertEqual(refused[0].type, pb.BaseCommand.ERROR)
                self.assertIn("HS256", refused[0].cmd.error.message)

    def test_authentication_without_a_key_does_not_start(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([BIN, "standalone", "--data-dir", d, "--http-port", "0", "--pulsar-port", "0",
                                "--kafka-port", "0", "--amqp-port", "0", "--authentication-enabled"],
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("--token-secret-key", r.stdout + r.stderr)


class AuthorizationTest(unittest.TestCase):
    """Authorization on: a superuser, a tenant admin, and roles with grants."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        key = os.path.join(cls.dir.name, "token.key")
        magnetar("tokens", "create-secret-key", "--output", key)
        cls.tokens = {role: magnetar("tokens", "create", "--secret-key", key, "--subject", role).stdout.strip()
                      for role in ("root", "alice", "bob", "mallory")}
        cls.node = Node("--authentication-enabled", "--token-secret-key", "file://" + key,
                        "--authorization-enabled", "--superuser-roles", "root,ops").start()
        cls.call("root", "PUT", "/admin/v2/tenants/acme", {"adminRoles": ["alice"], "allowedClusters": ["standalone"]},
                 expect=204)
        cls.call("root", "PUT", "/admin/v2/tenants/other", {"allowedClusters": ["standalone"]}, expect=204)

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        cls.dir.cleanup()
        assert code == 0, f"exit code {code}"

    @classmethod
    def call(cls, role, method, path, body=None, expect=None):
        headers = {"Authorization": f"Bearer {cls.tokens[role]}", "Content-Type": "application/json"}
        status, raw, _ = cls.node.http(method, path, json.dumps(body) if body is not None else None, headers=headers)
        if expect is not None:
            assert status == expect, f"{role} {method} {path}: {status} {raw!r}"
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw  # /metrics is text

    def pulsar(self, role):
        return PulsarWire(self.node.ports["pulsar"], auth_method_name="token", auth_data=self.tokens[role].encode())

    def wait_for_grant(self, check):
        """Grants reach the broker through its policy cache a moment after the call returns."""
        deadline = time.time() + TIMEOUT_S
        while not check():
            self.assertLess(time.time(), deadline, "the grant never took effect")
            time.sleep(0.05)

    def test_a_tenant_admin_manages_their_tenant_only(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/shop", {}, expect=204)
        status, body = self.call("alice", "PUT", "/admin/v2/namespaces/other/shop", {})
        self.assertEqual(status, 403)
        self.assertIn("not an admin of tenant 'other'", body["reason"])
        self.assertEqual(self.call("alice", "GET", "/admin/v2/tenants")[0], 403)  # the list: superusers
        self.assertEqual(self.call("alice", "GET", "/admin/v2/tenants/acme")[0], 200)
        self.assertEqual(self.call("alice", "DELETE", "/admin/v2/tenants/acme")[0], 403)
        self.assertEqual(self.call("mallory", "GET", "/admin/v2/namespaces/acme")[0], 403)
        self.assertEqual(self.call("mallory", "GET", "/metrics")[0], 403)
        self.assertEqual(self.call("root", "GET", "/metrics")[0], 200)
        with self.pulsar("alice") as w:
            self.assertEqual(w.create_producer("persistent://acme/shop/orders", 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
            refused = w.create_producer("persistent://other/shop/orders", 2)
            self.assertEqual((refused.type, refused.cmd.error.error), (pb.BaseCommand.ERROR, pb.AuthorizationError))

    def test_namespace_grants_allow_exactly_their_actions(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/grants", {}, expect=204)
        topic = "persistent://acme/grants/events"
        with self.pulsar("bob") as w:
            refused = w.create_producer(topic, 1)
            self.assertEqual(refused.cmd.error.error, pb.AuthorizationError)
            self.assertIn("may not produce to", refused.cmd.error.message)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/grants/permissions/bob", ["produce"], expect=204)

        def bob_produces():
            with self.pulsar("bob") as w:
                return w.create_producer(topic, 1).type == pb.BaseCommand.PRODUCER_SUCCESS

        self.wait_for_grant(bob_produces)
        with self.pulsar("bob") as w:
            refused = w.subscribe(topic, "s", 1)
            self.assertEqual((refused.type, refused.cmd.error.error), (pb.BaseCommand.ERROR, pb.AuthorizationError))
            self.assertIn("may not consume from", refused.cmd.error.message)
        # The REST producer is a produce too; the admin API is not bob's.
        self.assertEqual(self.call("bob", "GET", "/admin/v2/namespaces/acme/grants/permissions")[0], 403)
        self.assertEqual(self.call("mallory", "POST", "/topics/persistent/acme/grants/events",
                                   {"messages": [{"payload": "x"}]})[0], 403)

    def test_kafka_checks_the_same_grants(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/kafka", {}, expect=204)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/kafka/permissions/bob", ["produce"], expect=204)
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"

        def config(role):
            return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": "acme/kafka", "sasl.password": self.tokens[role]}

        def produce(role):
            p = ck.Producer({**config(role), "message.timeout.ms": 8000})
            reports = []
            p.produce("k-events", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            return reports[0]

        self.wait_for_grant(lambda: produce("bob") is None)
        error = produce("mallory")
        self.assertIsNotNone(error)
        self.assertEqual(error.code(), ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, error)
        # bob may produce, not consume.
        c = ck.Consumer({**config("bob"), "group.id": "g", "auto.offset.reset": "earliest"})
        c.assign([ck.TopicPartition("k-events", 0, 0)])
        deadline = time.time() + TIMEOUT_S
        got = None
        while got is None and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None:
                got = m
        c.close()
        self.assertIsNotNone(got)
        self.assertEqual(got.error().code(), ck.KafkaError.TOPIC_AUTHORIZATION_FAILED)
        # Topic administration is alice's (the tenant admin), not bob's.
        from confluent_kafka.admin import AdminClient, NewTopic
        for role, expected in (("bob", ck.KafkaError.TOPIC_AUTHORIZATION_FAILED), ("alice", None)):
            admin = AdminClient(config(role))
            try:
                admin.create_topics([NewTopic("k-made-by-" + role, num_partitions=1)])["k-made-by-" + role].result(10)
                outcome = None
            except ck.KafkaException as e:
                outcome = e.args[0].code()
            self.assertEqual(outcome, expected, role)


    def test_amqp_checks_the_same_grants(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/amqp", {}, expect=204)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/amqp/permissions/bob", ["produce"], expect=204)

        def connect(role):
            return pika.BlockingConnection(pika.ConnectionParameters(
                "127.0.0.1", self.node.ports["amqp"], virtual_host="acme/amqp",
                credentials=pika.PlainCredentials(role, self.tokens[role]), connection_attempts=1,
                socket_timeout=15, blocked_connection_timeout=15))

        def bob_declares():
            conn = connect("bob")
            try:
                conn.channel().queue_declare("jobs", durable=True)
                return True
            except pika.exceptions.ChannelClosedByBroker:
                return False
            finally:
                conn.close()

        self.wait_for_grant(bob_declares)
        conn = connect("bob")
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", "jobs", b"job-1")  # confirmed: bob may produce
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                ch.basic_get("jobs")
            self.assertEqual(refused.exception.reply_code, 403)
            self.assertIn("may not consume", refused.exception.reply_text)
        finally:
            conn.close()
        conn = connect("mallory")
        try:
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as refused:
                conn.channel().basic_publish("", "jobs", b"x")
                conn.channel().queue_declare("jobs", passive=True)
            self.assertEqual(refused.exception.reply_code, 403)
        finally:
            if conn.is_open:
                conn.close()
        # alice, the tenant admin, reads what bob wrote.
        conn = connect("alice")
        try:
            _, _, body = conn.channel().basic_get("jobs", auto_ack=True)
            self.assertEqual(body, b"job-1")
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
