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
from amqp_pika import channel_refusal, open_refusal, publish_confirmed
from amqp_wire import HEADER, AmqpWire, longstr, method, shortstr, table
from kafka_wire import RawKafkaConnection, kbytes, kstr
from magnetar_harness import BIN, KeyedNodeTest, Node, magnetar
from pulsar_wire import PulsarWire, command, decode, encode

TIMEOUT_S = 20


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


class AuthenticatedNodeTest(KeyedNodeTest):
    """One node with HS256 token authentication on."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.key = os.path.join(cls.dir.name, "token.key")
        magnetar("tokens", "create-secret-key", "--output", cls.key)
        cls.key_url = "file://" + cls.key
        cls.token = magnetar("tokens", "create", "--secret-key", cls.key_url, "--subject", "admin").stdout.strip()
        cls.node = Node("--authentication-enabled", "--token-secret-key", cls.key_url).start()

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


    def test_garbage_credentials_are_refused_and_hurt_nothing(self):
        """SASL and AMQP start-ok payloads that are not credentials at all:
        each is refused on its own connection and the node serves on."""
        ports = self.node.ports
        magnetar("produce", "sec-garbage", "-m", "kept", "--url", f"pulsar://127.0.0.1:{ports['pulsar']}",
                 "--token", self.token)
        payloads = [b"", b"\0", b"\0\0", b"no-nul-at-all", b"\xff\xfe\0\x00\x01", b"\0user\0" + b"A" * (1 << 20),
                    b"\0public/default\0" + self.token.encode()[:-3]]
        for payload in payloads:
            k = RawKafkaConnection(ports["kafka"], "garbage")
            try:
                k.send(17, 1, kstr("PLAIN"))  # SaslHandshake v1
                k.receive()
                k.send(36, 0, kbytes(payload))  # SaslAuthenticate v0
                try:
                    answer = k.receive()
                    error_code = int.from_bytes(answer[4:6], "big", signed=True)
                    self.assertEqual(error_code, 58, payload[:20])  # SASL_AUTHENTICATION_FAILED
                except ConnectionError:
                    pass  # closing is a refusal too
            finally:
                k.close()
        # A mechanism the node does not serve, and a request before any SASL.
        k = RawKafkaConnection(ports["kafka"], "garbage")
        try:
            k.send(17, 1, kstr("GSSAPI"))
            answer = k.receive()
            self.assertEqual(int.from_bytes(answer[4:6], "big", signed=True), 33)  # UNSUPPORTED_SASL_MECHANISM
        finally:
            k.close()
        for mechanism, response in (("PLAIN", b""), ("PLAIN", b"\0\0\0\0"), ("PLAIN", b"\xff" * 70000),
                                    ("AMQPLAIN", b"\x05LOGIN"), ("AMQPLAIN", b"\xff\xff\xff\xff"),
                                    ("EXTERNAL", b"x")):
            with AmqpWire(ports["amqp"]) as w:
                w.send(HEADER)
                w.read_method()
                w.send(method(0, 10, 11, table() + shortstr(mechanism) + longstr(response) + shortstr("en_US")))
                try:
                    _, _, code, _ = w.read_close()
                    self.assertIn(code, (403, 501, 502, 503, 530), (mechanism, response[:10]))
                except (EOFError, ConnectionResetError):
                    pass
        # Still serving, and what was stored is intact.
        out = magnetar("consume", "sec-garbage", "-s", "after-garbage", "-P", "Earliest", "-n", "1", "--url",
                       f"pulsar://127.0.0.1:{ports['pulsar']}", "--token", self.token).stdout
        self.assertIn("kept", out)
        self.assertEqual(self.rest(self.token)[0], 200)


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


class AuthorizationTest(KeyedNodeTest):
    """Authorization on: a superuser, a tenant admin, and roles with grants."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        key = os.path.join(cls.dir.name, "token.key")
        magnetar("tokens", "create-secret-key", "--output", key)
        cls.tokens = {role: magnetar("tokens", "create", "--secret-key", key, "--subject", role).stdout.strip()
                      for role in ("root", "alice", "bob", "carol", "mallory")}
        cls.node = Node("--authentication-enabled", "--token-secret-key", "file://" + key,
                        "--authorization-enabled", "--superuser-roles", "root,ops", "--log-level", "debug").start()
        cls.call("root", "PUT", "/admin/v2/tenants/acme", {"adminRoles": ["alice"], "allowedClusters": ["standalone"]},
                 expect=204)
        cls.call("root", "PUT", "/admin/v2/tenants/other", {"allowedClusters": ["standalone"]}, expect=204)

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

    def amqp(self, role, vhost):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.node.ports["amqp"], virtual_host=vhost,
            credentials=pika.PlainCredentials(role, self.tokens[role]), connection_attempts=1,
            socket_timeout=15, blocked_connection_timeout=15))

    def amqp_open_refusal(self, role, vhost):
        """(reply code, text) of the connection.close refusing `role` the
        vhost; None when the connection opened."""
        return open_refusal(lambda: self.amqp(role, vhost))

    def test_amqp_opens_a_vhost_only_for_a_role_with_some_permission(self):
        ns = "/admin/v2/namespaces/acme/vhost"
        self.call("alice", "PUT", ns, {}, expect=204)
        # Nobody but the tenant's admins and superusers has anything there yet.
        code, text = self.amqp_open_refusal("bob", "acme/vhost")
        self.assertEqual(code, 530)
        self.assertIn("access to vhost 'acme/vhost' refused", text)
        self.assertIn("role 'bob'", text)
        self.assertIsNone(self.amqp_open_refusal("alice", "acme/vhost"))
        self.assertIsNone(self.amqp_open_refusal("root", "acme/vhost"))
        # Any grant in the namespace opens it (a topic's own grant too:
        # tests/unit/security/authorizer_test.cc).
        self.call("alice", "POST", ns + "/permissions/bob", ["consume"], expect=204)
        self.call("alice", "POST", ns + "/permissions/carol", ["produce"], expect=204)
        self.wait_for_grant(lambda: self.amqp_open_refusal("bob", "acme/vhost") is None)
        self.wait_for_grant(lambda: self.amqp_open_refusal("carol", "acme/vhost") is None)
        # A grant elsewhere does not open a vhost.
        self.assertEqual(self.amqp_open_refusal("mallory", "acme/vhost")[0], 530)
        self.assertEqual(self.amqp_open_refusal("carol", "acme/amqp-none")[0], 530)
        # carol publishes over the vhost she opened.
        publish_confirmed(self.amqp("carol", "acme/vhost"), "inbox", b"by carol")
        # Taking the last grant away closes the door again.
        self.call("alice", "DELETE", ns + "/permissions/bob", expect=204)
        self.wait_for_grant(lambda: self.amqp_open_refusal("bob", "acme/vhost") is not None)

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
        # The tenant list holds what the role administers; who-am-I says so.
        self.assertEqual(self.call("alice", "GET", "/admin/v2/tenants"), (200, ["acme"]))
        self.assertEqual(self.call("mallory", "GET", "/admin/v2/tenants"), (200, []))
        self.assertIn("other", self.call("root", "GET", "/admin/v2/tenants")[1])
        self.assertEqual(self.call("alice", "GET", "/admin/v2/me"),
                         (200, {"role": "alice", "authenticated": True, "superuser": False, "tenants": ["acme"]}))
        status, me = self.call("root", "GET", "/admin/v2/me")
        self.assertEqual((status, me["superuser"], "acme" in me["tenants"]), (200, True, True))
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

    def test_topic_grants_set_over_rest_and_the_cli_add_to_the_namespace(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/pertopic", {}, expect=204)
        self.call("alice", "PUT", "/admin/v2/persistent/acme/pertopic/open", expect=204)
        self.call("alice", "PUT", "/admin/v2/persistent/acme/pertopic/closed", expect=204)
        base = "/admin/v2/persistent/acme/pertopic/open/permissions"
        self.call("alice", "POST", base + "/carol", ["produce"], expect=204)
        self.assertEqual(self.call("alice", "GET", base), (200, {"carol": ["produce"]}))
        for bad in (["fly"], {"produce": True}, "produce"):
            self.assertEqual(self.call("alice", "POST", base + "/carol", bad)[0], 400, bad)
        # Only the tenant's admins (and superusers) grant; not other roles.
        self.assertEqual(self.call("carol", "POST", base + "/carol", ["consume"])[0], 403)

        def carol_produces(topic):
            with self.pulsar("carol") as w:
                return w.create_producer(topic, 1).type == pb.BaseCommand.PRODUCER_SUCCESS

        self.wait_for_grant(lambda: carol_produces("persistent://acme/pertopic/open"))
        self.assertFalse(carol_produces("persistent://acme/pertopic/closed"))
        with self.pulsar("carol") as w:
            r = w.subscribe("persistent://acme/pertopic/open", "s", 2)
            self.assertEqual(r.cmd.error.error, pb.AuthorizationError)
        # The CLI grants and revokes the same way.
        url = self.node.http_url
        token = self.tokens["alice"]
        r = magnetar("admin", "--url", url, "--token", token, "topics", "grant-permission",
                     "persistent://acme/pertopic/closed", "--role", "carol", "--actions", "produce,consume")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_for_grant(lambda: carol_produces("persistent://acme/pertopic/closed"))
        r = magnetar("admin", "--url", url, "--token", token, "--json", "topics", "permissions",
                     "persistent://acme/pertopic/closed")
        self.assertEqual(json.loads(r.stdout), {"carol": ["consume", "produce"]})
        r = magnetar("admin", "--url", url, "--token", token, "topics", "revoke-permission",
                     "persistent://acme/pertopic/open", "--role", "carol")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.wait_for_grant(lambda: not carol_produces("persistent://acme/pertopic/open"))
        self.assertEqual(self.call("alice", "DELETE", base + "/carol")[0], 404)

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
            return self.amqp(role, "acme/amqp")

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
        self.assertEqual(self.amqp_open_refusal("mallory", "acme/amqp")[0], 530)  # no grant at all
        # alice, the tenant admin, reads what bob wrote.
        conn = connect("alice")
        try:
            _, _, body = conn.channel().basic_get("jobs", auto_ack=True)
            self.assertEqual(body, b"job-1")
        finally:
            conn.close()

    def test_topic_lists_and_schemas_need_a_grant(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/typed", {}, expect=204)
        topic = "persistent://acme/typed/readings"
        schema = pb.Schema(name="r", schema_data=b'{"type":"string"}', type=pb.Schema.String)
        with self.pulsar("alice") as w:
            created = w.request("GET_OR_CREATE_SCHEMA", ["GET_OR_CREATE_SCHEMA_RESPONSE"], topic=topic, schema=schema)
            self.assertFalse(created.cmd.getOrCreateSchemaResponse.HasField("error_code"))
            self.assertEqual(w.create_producer(topic, 1).type, pb.BaseCommand.PRODUCER_SUCCESS)
        with self.pulsar("mallory") as w:
            listed = w.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                               namespace="acme/typed")
            self.assertEqual((listed.type, listed.cmd.error.error), (pb.BaseCommand.ERROR, pb.AuthorizationError))
            got = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic).cmd.getSchemaResponse
            self.assertEqual(got.error_code, pb.AuthorizationError)
            made = w.request("GET_OR_CREATE_SCHEMA", ["GET_OR_CREATE_SCHEMA_RESPONSE"], topic=topic + "-2",
                             schema=schema).cmd.getOrCreateSchemaResponse
            self.assertEqual(made.error_code, pb.AuthorizationError)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/typed/permissions/bob", ["consume"], expect=204)

        def bob_lists():
            with self.pulsar("bob") as w:
                r = w.request("GET_TOPICS_OF_NAMESPACE", ["GET_TOPICS_OF_NAMESPACE_RESPONSE", "ERROR"],
                              namespace="acme/typed")
                return r.type == pb.BaseCommand.GET_TOPICS_OF_NAMESPACE_RESPONSE and \
                    topic in r.cmd.getTopicsOfNamespaceResponse.topics

        self.wait_for_grant(bob_lists)
        with self.pulsar("bob") as w:
            got = w.request("GET_SCHEMA", ["GET_SCHEMA_RESPONSE"], topic=topic).cmd.getSchemaResponse
            self.assertFalse(got.HasField("error_code"))
            self.assertEqual(got.schema.type, pb.Schema.String)

    def test_subscription_permissions_and_prefix_mode(self):
        ns = "/admin/v2/namespaces/acme/subs"
        self.call("alice", "PUT", ns, {}, expect=204)
        for role in ("bob", "carol"):
            self.call("alice", "POST", f"{ns}/permissions/{role}", ["consume"], expect=204)
        self.call("alice", "POST", f"{ns}/permissions/subscription/billing", ["bob"], expect=204)
        self.assertEqual(self.call("alice", "GET", f"{ns}/permissions/subscription"), (200, {"billing": ["bob"]}))
        status, policies = self.call("alice", "GET", ns)
        self.assertEqual(policies["auth_policies"]["subscription_auth_roles"], {"billing": ["bob"]})
        # Wrong shapes are refused and change nothing.
        for body in ({"roles": "bob"}, "bob", [], [1]):
            self.assertEqual(self.call("alice", "POST", f"{ns}/permissions/subscription/billing", body)[0], 400, body)
        self.assertEqual(self.call("bob", "POST", f"{ns}/permissions/subscription/billing", ["bob"])[0], 403)
        topic = "persistent://acme/subs/invoices"

        def subscribe(role, subscription):
            with self.pulsar(role) as w:
                answer = w.subscribe(topic, subscription, 1)
                return answer.type == pb.BaseCommand.SUCCESS, answer

        self.wait_for_grant(lambda: not subscribe("carol", "billing")[0])
        ok, refused = subscribe("carol", "billing")
        self.assertEqual(refused.cmd.error.error, pb.AuthorizationError)
        self.assertIn("may not use subscription 'billing'", refused.cmd.error.message)
        self.assertTrue(subscribe("bob", "billing")[0])
        self.assertTrue(subscribe("carol", "reports")[0])  # a subscription with no roles is open
        self.assertTrue(subscribe("alice", "billing")[0])  # the tenant admin
        # Revoking the last role opens the subscription again.
        self.assertEqual(self.call("alice", "DELETE", f"{ns}/permissions/billing/carol")[0], 404)
        self.call("alice", "DELETE", f"{ns}/permissions/billing/bob", expect=204)
        self.wait_for_grant(lambda: subscribe("carol", "billing")[0])

        # The same through the admin CLI, as pulsar-admin spells it.
        cli = ["admin", "--url", self.node.http_url, "--token", self.tokens["alice"]]
        magnetar(*cli, "namespaces", "grant-subscription-permission", "acme/subs", "--subscription", "cli-sub",
                 "--roles", "bob,carol")
        magnetar(*cli, "namespaces", "revoke-subscription-permission", "acme/subs", "--subscription", "cli-sub",
                 "--role", "carol")
        shown = json.loads(magnetar(*cli, "--json", "namespaces", "subscription-permissions", "acme/subs").stdout)
        self.assertEqual(shown, {"cli-sub": ["bob"]})
        bad = magnetar(*cli, "namespaces", "set-subscription-auth-mode", "acme/subs", "-m", "Sometimes", check=False)
        self.assertNotEqual(bad.returncode, 0)

        # Prefix mode: a role's subscriptions start with its name.
        self.assertEqual(self.call("alice", "POST", f"{ns}/subscriptionAuthMode", "Sometimes")[0], 400)
        self.call("alice", "POST", f"{ns}/subscriptionAuthMode", "Prefix", expect=204)
        self.assertEqual(self.call("alice", "GET", f"{ns}/subscriptionAuthMode"), (200, "Prefix"))
        self.wait_for_grant(lambda: not subscribe("carol", "reports")[0])
        ok, refused = subscribe("carol", "reports")
        self.assertIn("must be prefixed by the role", refused.cmd.error.message)
        self.assertTrue(subscribe("carol", "carol-reports")[0])
        self.assertFalse(subscribe("bob", "carol-reports")[0])
        self.call("alice", "DELETE", f"{ns}/subscriptionAuthMode", expect=204)
        self.wait_for_grant(lambda: subscribe("carol", "reports")[0])

    def test_kafka_groups_follow_subscription_permissions_and_stay_in_their_namespace(self):
        for ns in ("gk", "gk2"):
            self.call("alice", "PUT", f"/admin/v2/namespaces/acme/{ns}", {}, expect=204)
            for role in ("bob", "carol"):
                self.call("alice", "POST", f"/admin/v2/namespaces/acme/{ns}/permissions/{role}",
                          ["produce", "consume"], expect=204)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/gk/permissions/subscription/payments", ["bob"],
                  expect=204)
        bootstrap = f"127.0.0.1:{self.node.ports['kafka']}"

        def config(role, ns="gk"):
            return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                    "sasl.username": f"acme/{ns}", "sasl.password": self.tokens[role]}

        p = ck.Producer({**config("bob"), "message.timeout.ms": 8000})
        p.produce("gk-events", value=b"one")
        self.assertEqual(p.flush(TIMEOUT_S), 0)

        def first_event(role, group, ns="gk"):
            """The first thing a group member's poll yields: a message or an error."""
            errors = []
            c = ck.Consumer({**config(role, ns), "group.id": group, "auto.offset.reset": "earliest",
                             "session.timeout.ms": 6000, "error_cb": errors.append})
            c.subscribe(["gk-events"])
            deadline = time.time() + TIMEOUT_S
            try:
                while time.time() < deadline:
                    m = c.poll(0.5)
                    if m is not None:
                        return m.error() if m.error() is not None else m.value()
                    if errors:
                        return errors[0]
                return None
            finally:
                c.close()

        # (A KafkaError must not be compared with bytes: it compares as an error code.)
        self.wait_for_grant(lambda: not isinstance(first_event("carol", "payments"), bytes))
        refused = first_event("carol", "payments")
        self.assertEqual(refused.code(), ck.KafkaError.GROUP_AUTHORIZATION_FAILED, refused)
        self.assertEqual(first_event("bob", "payments"), b"one")
        self.assertEqual(first_event("carol", "carols"), b"one")

        # The same group name in another namespace is another group; each
        # namespace lists only its own.
        p2 = ck.Producer({**config("carol", "gk2"), "message.timeout.ms": 8000})
        p2.produce("gk-events", value=b"two")
        self.assertEqual(p2.flush(TIMEOUT_S), 0)
        errors = []
        c1 = ck.Consumer({**config("bob"), "group.id": "shared", "auto.offset.reset": "earliest",
                          "error_cb": errors.append})
        c2 = ck.Consumer({**config("carol", "gk2"), "group.id": "shared", "auto.offset.reset": "earliest",
                          "error_cb": errors.append})
        try:
            c1.subscribe(["gk-events"])
            c2.subscribe(["gk-events"])
            got = {}
            deadline = time.time() + TIMEOUT_S
            while len(got) < 2 and time.time() < deadline:
                for name, c in (("gk", c1), ("gk2", c2)):
                    m = c.poll(0.2)
                    if m is not None and m.error() is None:
                        got[name] = m.value()
            # Each got its own namespace's record: neither group took the other's partition.
            self.assertEqual(got, {"gk": b"one", "gk2": b"two"}, errors)
            from confluent_kafka.admin import AdminClient
            for ns, role in (("gk", "bob"), ("gk2", "carol")):
                groups = AdminClient(config(role, ns)).list_groups(timeout=10)
                self.assertEqual([g.id for g in groups if g.id == "shared"], ["shared"], ns)
                self.assertNotIn("payments", [g.id for g in groups] if ns == "gk2" else [])
            # carol does not see bob's payments group in gk.
            listed = [g.id for g in AdminClient(config("carol")).list_groups(timeout=10)]
            self.assertNotIn("payments", listed)
        finally:
            c1.close()
            c2.close()

    def test_amqp_exchanges_and_bindings_need_their_permissions(self):
        self.call("alice", "PUT", "/admin/v2/namespaces/acme/routes", {}, expect=204)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/routes/permissions/bob", ["produce"], expect=204)
        self.call("alice", "POST", "/admin/v2/namespaces/acme/routes/permissions/carol", ["consume"], expect=204)

        def connect(role):
            return self.amqp(role, "acme/routes")

        def refused(role, action):
            """The reply code a channel gets for `action`, or None when it succeeded."""
            refusal = channel_refusal(connect(role), action)
            return None if refusal is None else refusal.reply_code

        declare_exchange = lambda ch: ch.exchange_declare("orders", "topic", durable=True)
        self.wait_for_grant(lambda: refused("bob", declare_exchange) is None)
        self.assertEqual(refused("carol", declare_exchange), 403)  # consume only
        self.assertEqual(refused("alice", lambda ch: ch.queue_declare("billing", durable=True)), None)
        self.assertIsNone(refused("carol", lambda ch: ch.queue_bind("billing", "orders", "order.*")))
        # bob publishes; he may not bind (read) or purge, nor delete shared things.
        self.assertEqual(refused("bob", lambda ch: ch.queue_bind("billing", "orders", "#")), 403)
        self.assertEqual(refused("bob", lambda ch: ch.queue_purge("billing")), 403)
        self.assertEqual(refused("bob", lambda ch: ch.exchange_delete("orders")), 403)
        self.assertEqual(refused("carol", lambda ch: ch.queue_delete("billing")), 403)
        conn = connect("bob")
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("orders", "order.created", b"o-1")
            # A connection's own exclusive queue is its own to delete.
            q = ch.queue_declare("", exclusive=True).method.queue
            ch.queue_delete(q)
        finally:
            conn.close()
        conn = connect("carol")
        try:
            _, _, body = conn.channel().basic_get("billing", auto_ack=True)
            self.assertEqual(body, b"o-1")
        finally:
            conn.close()
        self.assertIsNone(refused("alice", lambda ch: ch.exchange_delete("orders")))

    def test_secrets_never_reach_logs_metrics_or_errors(self):
        """After every kind of refused and accepted credential on every
        listener, no token appears in the node's log (at debug level), its
        metrics or its error answers."""
        forged = magnetar("tokens", "create", "--secret-key", "file://" + self.forger_key(), "--subject",
                          "root").stdout.strip()
        bodies = []
        for token in (forged, self.tokens["mallory"], "garbage." + forged):
            headers = {"Authorization": f"Bearer {token}"}
            bodies.append(self.node.http("GET", "/admin/v2/tenants/other", headers=headers)[1])
            for f in pulsar_connect(self.node.ports["pulsar"], auth_method_name="token", auth_data=token.encode()):
                bodies.append(f.cmd.error.message.encode() if f.type == pb.BaseCommand.ERROR else b"")
            try:
                pika.BlockingConnection(pika.ConnectionParameters(
                    "127.0.0.1", self.node.ports["amqp"], credentials=pika.PlainCredentials("x", token),
                    connection_attempts=1, socket_timeout=10)).close()
            except pika.exceptions.AMQPError as e:
                bodies.append(repr(e).encode())
            p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{self.node.ports['kafka']}",
                             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                             "sasl.username": "acme/x", "sasl.password": token, "message.timeout.ms": 3000})
            p.produce("secret-test", value=b"v")
            p.flush(5)
        metrics = self.call("root", "GET", "/metrics")[1]
        log = self.node.read_log().encode()
        self.assertTrue(log, "the node wrote no log")
        tokens = [forged, *self.tokens.values()]
        for token in tokens:
            signature = token.rsplit(".", 1)[-1]
            for where, text in (("log", log), ("metrics", metrics if isinstance(metrics, bytes) else metrics.encode()), *(("answer", b) for b in bodies)):
                self.assertNotIn(signature.encode(), text, f"a token's signature is in the {where}")

    def forger_key(self):
        path = os.path.join(self.dir.name, "forger.key")
        if not os.path.exists(path):
            magnetar("tokens", "create-secret-key", "--output", path)
        return path


if __name__ == "__main__":
    unittest.main()
