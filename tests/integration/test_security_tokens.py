"""Token authentication end to end: `magnetar tokens` makes keys and
tokens; a node started with --authentication-enabled refuses clients
without a valid token on every listener (REST, Pulsar, Kafka, AMQP) and
serves those with one. Garbage credentials do not hurt the node."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import confluent_kafka as ck
import pika
import pulsar_api_pb2 as pb
from magnetar_harness import BIN, Node, raw_exchange
from pulsar_wire import command, decode, encode

TIMEOUT_S = 20


def magnetar(*args, check=True):
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"magnetar {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def pulsar_connect(port, **auth):
    """The frames the node answers a CONNECT with (the connection ends after an error)."""
    raw = raw_exchange(port, encode(command("CONNECT", client_version="sec-test", protocol_version=19, **auth)),
                       timeout=5.0)
    frames = []
    while raw:
        frame, used = decode(raw)
        if frame is None:
            break
        frames.append(frame)
        raw = raw[used:]
    return frames


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
            p = ck.Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 4000, **config})
            reports = []
            p.produce("sec-kafka", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(10)
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
                                               connection_attempts=1, socket_timeout=5, blocked_connection_timeout=5)
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


if __name__ == "__main__":
    unittest.main()
