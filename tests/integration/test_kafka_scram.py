"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the Kafka listener: users made
over REST, the CLI and Kafka's AlterUserScramCredentials; librdkafka
producing and consuming with both mechanisms; wrong passwords and unknown
users refused alike; garbage SASL bytes refused without harm; SCRAM users
are roles that authorization checks; credentials survive a restart."""
import base64
import hashlib
import hmac
import json
import os
import struct
import tempfile
import time
import unittest

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient
from cluster_harness import ClusterCase, request, wait_for
from kafka_wire import TAGS, RawKafkaConnection, carray, cbytes, cstr, kstr
from magnetar_harness import KeyedNodeTest, Node, magnetar

TIMEOUT_S = 20
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
CLUSTER_AUTHORIZATION_FAILED = 31
RESOURCE_NOT_FOUND = 91
DUPLICATE_RESOURCE = 92
UNACCEPTABLE_CREDENTIAL = 93
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
HASHES = {1: "sha256", 2: "sha512"}


def scram_config(port, mechanism, user, password):
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def produce(config, topic, values):
    """Delivery errors (None each when stored) and what the error callback saw."""
    errors = []
    p = ck.Producer({**config, "message.timeout.ms": 8000, "error_cb": errors.append})
    reports = []
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda e, m: reports.append(e))
    p.flush(TIMEOUT_S)
    return reports, errors


def consume(config, topic, count, group):
    c = ck.Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.time() + TIMEOUT_S
    try:
        while len(got) < count and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


class ScramWire:
    """A raw Kafka connection that authenticates by hand: PLAIN with a token,
    or SCRAM computed here from the password (RFC 5802)."""

    def __init__(self, port):
        self.conn = RawKafkaConnection(port, "scram-wire")

    def close(self):
        self.conn.close()

    def handshake(self, mechanism, version=1):
        r = self.conn.call(17, version, kstr(mechanism))
        error = r.i16()
        mechanisms = [r.string() for _ in range(r.i32())]
        return error, mechanisms

    def authenticate(self, auth_bytes):
        """One SaslAuthenticate v2: (error, message, server bytes)."""
        r = self.conn.call(36, 2, cbytes(auth_bytes) + TAGS, flexible=True)
        return r.i16(), r.string(), r.bytes()

    def plain(self, token):
        assert self.handshake("PLAIN") == (0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
        error, message, _ = self.authenticate(b"\0public/default\0" + token.encode())
        assert error == 0, message

    def scram(self, user, password, mechanism=1):
        name = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism]
        assert self.handshake(name)[0] == 0
        bare = f"n={user},r=wire-nonce-1234"
        error, message, server_first = self.authenticate(b"n,," + bare.encode())
        if error:
            return error, message
        attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
        h = HASHES[mechanism]
        salted = hashlib.pbkdf2_hmac(h, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", h).digest()
        signature = hmac.new(hashlib.new(h, client_key).digest(), auth, h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        error, message, server_final = self.authenticate(final.encode())
        if error:
            return error, message
        server_key = hmac.new(salted, b"Server Key", h).digest()
        expected = "v=" + base64.b64encode(hmac.new(server_key, auth, h).digest()).decode()
        assert server_final.decode() == expected, (server_final, expected)
        return 0, None

    def describe(self, users):
        body = (b"\x00" if users is None else carray([cstr(u) + TAGS for u in users])) + TAGS
        r = self.conn.call(DESCRIBE_SCRAM, 0, body, flexible=True)
        r.i32()
        error, message = r.i16(), r.string()
        results = r.array(lambda e: (e.string(), e.i16(), e.string(), e.array(lambda i: (i.i8(), i.i32()))))
        return error, message, {u: (code, msg, infos) for u, code, msg, infos in results}

    def alter(self, deletions=(), upsertions=()):
        body = carray([cstr(n) + struct.pack(">b", m) + TAGS for n, m in deletions])
        body += carray([cstr(n) + struct.pack(">bi", m, it) + cbytes(salt) + cbytes(salted) + TAGS
                        for n, m, it, salt, salted in upsertions])
        r = self.conn.call(ALTER_SCRAM, 0, body + TAGS, flexible=True)
        r.i32()
        return {u: (code, msg) for u, code, msg in r.array(lambda e: (e.string(), e.i16(), e.string()))}

    def closed(self):
        """Whether the node closed the connection (bounded wait)."""
        self.conn.sock.settimeout(5)
        try:
            return self.conn.sock.recv(1) == b""
        except ConnectionError:
            return True


def upsertion(name, mechanism, password, iterations=4096):
    salt = os.urandom(16)
    salted = hashlib.pbkdf2_hmac(HASHES.get(mechanism, "sha256"), password.encode(), salt, iterations)
    return name, mechanism, iterations, salt, salted


class ScramTest(KeyedNodeTest):
    """Authentication and authorization on; superuser `root`."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        key = os.path.join(cls.dir.name, "token.key")
        magnetar("tokens", "create-secret-key", "--output", key)
        cls.tokens = {role: magnetar("tokens", "create", "--secret-key", "file://" + key, "--subject",
                                     role).stdout.strip() for role in ("root", "mallory")}
        cls.node = Node("--authentication-enabled", "--token-secret-key", "file://" + key,
                        "--authorization-enabled", "--superuser-roles", "root").start()
        cls.port = cls.node.ports["kafka"]
        cls.call("root", "PUT", "/admin/v2/scram-users/alice", {"password": "alice-pw"}, expect=204)
        cls.call("root", "POST", "/admin/v2/namespaces/public/default/permissions/alice", ["produce", "consume"],
                 expect=204)

    @classmethod
    def call(cls, role, method, path, body=None, expect=None):
        headers = {"Authorization": f"Bearer {cls.tokens[role]}", "Content-Type": "application/json"}
        status, raw, _ = cls.node.http(method, path, json.dumps(body) if body is not None else None, headers=headers)
        if expect is not None:
            assert status == expect, f"{role} {method} {path}: {status} {raw!r}"
        return status, json.loads(raw) if raw else None

    def alice(self, mechanism, password="alice-pw"):
        return scram_config(self.port, mechanism, "alice", password)

    def produce_when_granted(self, config, topic, values):
        """The grant reaches the policy cache a moment after the call."""
        deadline = time.time() + TIMEOUT_S
        while True:
            reports, _ = produce(config, topic, values)
            if reports == [None] * len(values) or time.time() > deadline:
                return reports
            time.sleep(0.2)

    def test_rest_manages_users_for_superusers_only(self):
        status, users = self.call("root", "GET", "/admin/v2/scram-users")
        self.assertEqual(status, 200)
        alice = next(u for u in users if u["user"] == "alice")
        self.assertEqual(alice["credentials"], [{"mechanism": "SCRAM-SHA-256", "iterations": 8192},
                                                {"mechanism": "SCRAM-SHA-512", "iterations": 8192}])
        self.assertNotIn("password", json.dumps(users))
        self.assertEqual(self.call("mallory", "GET", "/admin/v2/scram-users")[0], 403)
        self.assertEqual(self.call("mallory", "PUT", "/admin/v2/scram-users/mallory", {"password": "x"})[0], 403)
        for bad in ({}, {"password": ""}, {"password": "x", "iterations": 100},
                    {"password": "x", "mechanisms": ["MD5"]}, {"password": "x", "mechanisms": []}, "not json"):
            status, body = self.call("root", "PUT", "/admin/v2/scram-users/bad", bad)
            self.assertEqual(status, 400, bad)
        self.assertEqual(self.call("root", "GET", "/admin/v2/scram-users/bad")[0], 404)
        self.assertEqual(self.call("root", "DELETE", "/admin/v2/scram-users/nobody")[0], 404)
        self.assertEqual(self.call("root", "DELETE", "/admin/v2/scram-users/alice?mechanism=MD5")[0], 400)

    def test_cli_adds_lists_and_deletes_users(self):
        token_file = os.path.join(self.dir.name, "root.token")
        with open(token_file, "w") as f:
            f.write(self.tokens["root"] + "\n")

        def cli(*args, check=True):
            return magnetar("admin", "--url", self.node.http_url, "--token-file", token_file, *args, check=check)

        out = cli("scram-users", "add", "cli-user", "--password", "cli-pw", "--mechanism", "SCRAM-SHA-512",
                  "--iterations", "4096").stdout
        self.assertIn("cli-user", out)
        listed = json.loads(cli("--json", "scram-users", "list").stdout)
        self.assertIn({"user": "cli-user", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}, listed)
        self.assertIn("cli-user", cli("scram-users", "list").stdout)
        # The user authenticates with the mechanism it has, not the other.
        AdminClient(scram_config(self.port, "SCRAM-SHA-512", "cli-user", "cli-pw")).list_topics(timeout=TIMEOUT_S)
        with self.assertRaises(ck.KafkaException):
            AdminClient(scram_config(self.port, "SCRAM-SHA-256", "cli-user", "cli-pw")).list_topics(timeout=3)
        bad = cli("scram-users", "add", "cli-user", "--password", "x", "--iterations", "100", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("4096", bad.stderr)
        missing = cli("scram-users", "delete", "cli-user", "--mechanism", "SCRAM-SHA-256", check=False)
        self.assertNotEqual(missing.returncode, 0)
        cli("scram-users", "delete", "cli-user")
        self.assertNotIn("cli-user", [u["user"] for u in json.loads(cli("--json", "scram-users", "list").stdout)])

    def test_confluent_kafka_produces_and_consumes_with_both_mechanisms(self):
        values = [b"scram-%d" % i for i in range(3)]
        self.assertEqual(self.produce_when_granted(self.alice("SCRAM-SHA-256"), "scram-both", values), [None] * 3)
        self.assertEqual(produce(self.alice("SCRAM-SHA-512"), "scram-both", [b"scram-3"])[0], [None])
        self.assertEqual(consume(self.alice("SCRAM-SHA-512"), "scram-both", 4, "g512"), values + [b"scram-3"])
        self.assertEqual(consume(self.alice("SCRAM-SHA-256"), "scram-both", 4, "g256"), values + [b"scram-3"])
        # The SCRAM user is the role: a user without grants is refused the topic.
        self.call("root", "PUT", "/admin/v2/scram-users/nogrants", {"password": "pw"}, expect=204)
        [error], _ = produce(scram_config(self.port, "SCRAM-SHA-256", "nogrants", "pw"), "scram-both", [b"x"])
        self.assertEqual(error.code(), ck.KafkaError.TOPIC_AUTHORIZATION_FAILED)

    def test_wrong_password_and_unknown_user_are_refused_alike(self):
        messages = []
        for user, password in (("alice", "wrong"), ("nobody", "alice-pw")):
            reports, errors = produce(scram_config(self.port, "SCRAM-SHA-256", user, password), "scram-refused", [b"x"])
            self.assertIsNotNone(reports[0])
            auth = [e for e in errors if e.code() == ck.KafkaError._AUTHENTICATION]
            self.assertTrue(auth, errors)
            messages.append(auth[0].str().split("SASL authentication error: ")[1].split(" (after")[0])
        self.assertEqual(messages[0], messages[1])
        self.assertIn("authentication failed", messages[0])

    def test_garbage_sasl_bytes_are_refused_and_hurt_nothing(self):
        self.assertEqual(self.produce_when_granted(self.alice("SCRAM-SHA-256"), "scram-intact", [b"before"]), [None])
        cases = [
            b"\xff\x00garbage",                      # not SCRAM at all
            b"p=tls-unique,,n=alice,r=abc",          # channel binding asked for
            b"n,,m=ext,n=alice,r=abc",               # a mandatory extension
            b"n,,n=alice",                           # no nonce
            b"",                                     # nothing
        ]
        for payload in cases:
            w = ScramWire(self.port)
            self.assertEqual(w.handshake("SCRAM-SHA-256")[0], 0)
            error, message, _ = w.authenticate(payload)
            self.assertEqual(error, SASL_AUTHENTICATION_FAILED, payload)
            self.assertTrue(message, payload)
            self.assertTrue(w.closed(), payload)
            w.close()
        w = ScramWire(self.port)
        self.assertEqual(w.handshake("SCRAM-SHA-256")[0], 0)
        error, _, server_first = w.authenticate(b"n,,n=alice,r=abc")
        self.assertEqual(error, 0)
        self.assertTrue(server_first.startswith(b"r=abc"))
        error, _, _ = w.authenticate(b"c=biws,r=abc,p=AAAA")  # the nonce is not the server's
        self.assertEqual(error, SASL_AUTHENTICATION_FAILED)
        self.assertTrue(w.closed())
        w.close()
        # An unknown mechanism is answered with the list, and the connection stays.
        w = ScramWire(self.port)
        self.assertEqual(w.handshake("SCRAM-SHA-1"), (UNSUPPORTED_SASL_MECHANISM,
                                                      ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]))
        w.close()
        # After a v0 handshake the garbage comes bare: the connection is closed.
        w = ScramWire(self.port)
        self.assertEqual(w.handshake("SCRAM-SHA-512", version=0)[0], 0)
        w.conn.sock.sendall(struct.pack(">i", 7) + b"garbage")
        self.assertTrue(w.closed())
        w.close()
        self.assertEqual(consume(self.alice("SCRAM-SHA-512"), "scram-intact", 1, "g-intact"), [b"before"])

    def test_bare_scram_after_a_v0_handshake(self):
        w = ScramWire(self.port)
        self.assertEqual(w.handshake("SCRAM-SHA-256", version=0)[0], 0)
        bare = "n=alice,r=bare-nonce"
        msg = b"n,," + bare.encode()
        w.conn.sock.sendall(struct.pack(">i", len(msg)) + msg)
        server_first = w.conn.receive()
        attrs = dict(part.split("=", 1) for part in server_first.decode().split(","))
        self.assertTrue(attrs["r"].startswith("bare-nonce"))
        salted = hashlib.pbkdf2_hmac("sha256", b"alice-pw", base64.b64decode(attrs["s"]), int(attrs["i"]))
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
        final = f"{without_proof},p={proof}".encode()
        w.conn.sock.sendall(struct.pack(">i", len(final)) + final)
        self.assertTrue(w.conn.receive().startswith(b"v="))
        # Authenticated: a Metadata request is served.
        r = w.conn.call(3, 1, struct.pack(">i", 0))
        self.assertGreaterEqual(r.i32(), 1)  # brokers
        w.close()

    def test_user_apis_over_the_wire(self):
        # A superuser (by token over PLAIN) describes and alters.
        w = ScramWire(self.port)
        r = w.conn.call(18, 0, b"")  # ApiVersions lists both APIs at v0
        self.assertEqual(r.i16(), 0)
        served = {k: (lo, hi) for k, lo, hi in r.array(lambda x: (x.i16(), x.i16(), x.i16()))}
        self.assertEqual((served[DESCRIBE_SCRAM], served[ALTER_SCRAM]), ((0, 0), (0, 0)))
        w.plain(self.tokens["root"])
        error, _, results = w.describe(None)
        self.assertEqual(error, 0)
        self.assertEqual(results["alice"], (0, None, [(1, 8192), (2, 8192)]))
        error, _, results = w.describe(["alice", "nobody", "alice"])
        self.assertEqual((results["alice"][0], results["nobody"][0]), (DUPLICATE_RESOURCE, RESOURCE_NOT_FOUND))
        answers = w.alter(deletions=[("nobody", 1)],
                          upsertions=[upsertion("carol", 1, "carol-pw"), upsertion("dave", 3, "x"),
                                      upsertion("erin", 1, "x", iterations=100),
                                      upsertion("frank", 2, "x"), upsertion("frank", 2, "y")])
        self.assertEqual({u: code for u, (code, _) in answers.items()},
                         {"carol": 0, "dave": UNSUPPORTED_SASL_MECHANISM, "erin": UNACCEPTABLE_CREDENTIAL,
                          "frank": DUPLICATE_RESOURCE, "nobody": RESOURCE_NOT_FOUND})
        self.assertEqual(w.describe(["carol"])[2]["carol"], (0, None, [(1, 4096)]))
        self.assertEqual(w.describe(["erin"])[2]["erin"][0], RESOURCE_NOT_FOUND)
        w.close()
        # carol authenticates with what Kafka's API stored.
        AdminClient(scram_config(self.port, "SCRAM-SHA-256", "carol", "carol-pw")).list_topics(timeout=TIMEOUT_S)
        # Another role may do neither.
        w = ScramWire(self.port)
        w.plain(self.tokens["mallory"])
        self.assertEqual(w.describe(None)[0], CLUSTER_AUTHORIZATION_FAILED)
        self.assertEqual(w.alter(deletions=[("carol", 1)])["carol"][0], CLUSTER_AUTHORIZATION_FAILED)
        w.close()
        # A SCRAM user named as a superuser role is one: root over SCRAM alters.
        self.call("root", "PUT", "/admin/v2/scram-users/root", {"password": "root-pw", "mechanisms": ["SCRAM-SHA-512"]},
                  expect=204)
        w = ScramWire(self.port)
        self.assertEqual(w.scram("root", "root-pw", mechanism=2), (0, None))
        self.assertEqual(w.alter(deletions=[("carol", 1)]), {"carol": (0, None)})
        w.close()
        self.assertEqual(self.call("root", "GET", "/admin/v2/scram-users/carol")[0], 404)


class ScramRestartTest(unittest.TestCase):
    def test_credentials_survive_a_restart(self):
        node = Node().start()
        try:
            status, _, _ = node.http("PUT", "/admin/v2/scram-users/keeper", json.dumps({"password": "keep-pw"}),
                                     headers={"Content-Type": "application/json"})
            self.assertEqual(status, 204)
            config = lambda: scram_config(node.ports["kafka"], "SCRAM-SHA-512", "keeper", "keep-pw")  # noqa: E731
            self.assertEqual(produce(config(), "kept", [b"one"])[0], [None])
            self.assertEqual(node.stop(), 0)
            node.start()
            self.assertEqual(consume(config(), "kept", 1, "g-kept"), [b"one"])
            wrong = scram_config(node.ports["kafka"], "SCRAM-SHA-512", "keeper", "nope")
            reports, _ = produce(wrong, "kept", [b"x"])
            self.assertIsNotNone(reports[0])
            status, body, _ = node.http("GET", "/admin/v2/scram-users/keeper")
            self.assertEqual((status, json.loads(body)["user"]), (200, "keeper"))
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()


class ScramClusterTest(ClusterCase):
    def test_a_user_made_on_one_member_signs_in_on_every_member(self):
        members = self.add_members(3)
        leader = self.cluster.leader()
        follower = next(m for m in members if m.id != leader.id)
        # Made through a member that is not the metadata leader.
        status, body = request(follower, "PUT", "/admin/v2/scram-users/everywhere", {"password": "pw-everywhere"})
        self.assertEqual(status, 204, body)

        def signs_in(member):
            try:
                config = scram_config(member.ports["kafka"], "SCRAM-SHA-256", "everywhere", "pw-everywhere")
                AdminClient(config).list_topics(timeout=5)
                return True
            except ck.KafkaException:
                return False
        for member in members:
            wait_for(lambda: signs_in(member), f"member {member.id} to know the SCRAM user")
            self.assertEqual(request(member, "GET", "/admin/v2/scram-users/everywhere")[0], 200)


if __name__ == "__main__":
    unittest.main()
