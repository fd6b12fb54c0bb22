"""The free-trial mode (`magnetar standalone --trial`): visitors sign up for
a tenant of their own, produce and consume with their token over Pulsar
(our C++ client, the magnetar CLI), Kafka (confluent-kafka, SASL/PLAIN) and
AMQP (pika), within their quotas; one visitor never reaches another's
tenant; the operator lists, extends and deletes trials; an expired trial is
deleted with all its data, across a restart too; sign-up storms, slow HTTP
clients and connection floods leave the node serving."""
import http.client
import json
import os
import re
import select
import socket
import time
import unittest

import confluent_kafka as ck
import pika
from amqp_pika import open_refusal, wait_for
from magnetar_harness import Node, magnetar

TIMEOUT_S = 20
API_TS = os.path.join(os.path.dirname(__file__), "..", "..", "web-ui", "src", "api.ts")


def http_from(node, source, method, path, body=None, headers=None):
    """(status, parsed JSON or text, headers) of a request sent from local
    address `source` (127.0.0.x: each is another client address)."""
    conn = http.client.HTTPConnection("127.0.0.1", node.ports["http"], timeout=TIMEOUT_S,
                                      source_address=(source, 0))
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode(errors="replace")
        return resp.status, parsed, dict(resp.getheaders())
    finally:
        conn.close()


class TrialNode(Node):
    """A node in trial mode with superuser role `admin`, whose token signs
    with the key the node made in its data directory."""

    def __init__(self, *extra):
        super().__init__("--trial", "--superuser-roles", "admin", *extra)
        self.admin_token = None
        self.source = 10  # the next 127.0.0.x address a visitor signs up from

    def start(self):
        super().start()
        key = "file://" + os.path.join(self.data_dir, "trial-token.key")
        self.admin_token = magnetar("tokens", "create", "--secret-key", key, "--subject", "admin").stdout.strip()
        return self

    def as_admin(self, method, path, body=None):
        status, raw, _ = self.http(method, path, body, headers={"Authorization": f"Bearer {self.admin_token}"})
        return status, (json.loads(raw) if raw.strip().startswith((b"{", b"[")) else raw)

    def sign_up(self, source=None, **body):
        """A fresh visitor's sign-up answer, from an address of its own."""
        if source is None:
            self.source += 1
            source = f"127.0.0.{self.source}"
        status, answer, _ = http_from(self, source, "POST", "/trial/signup", body)
        if status != 201:
            raise AssertionError(f"sign-up answered {status}: {answer}")
        return answer


class Visitor:
    """One trial visitor and their clients."""

    def __init__(self, node, signup):
        self.node = node
        self.signup = signup
        self.tenant = signup["tenant"]
        self.ns = signup["namespace"]
        self.token = signup["token"]

    def rest(self, method, path, body=None):
        return self.node.http(method, path, body, headers={"Authorization": f"Bearer {self.token}"})

    def kafka_config(self, ns=None):
        return {"bootstrap.servers": self.signup["addresses"]["kafka"], "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": ns or self.ns, "sasl.password": self.token}

    def kafka_produce(self, topic, values, ns=None):
        """The delivery errors (None for each delivered record)."""
        p = ck.Producer({**self.kafka_config(ns), "message.timeout.ms": 10000})
        reports = []
        for v in values:
            p.produce(topic, value=v, on_delivery=lambda e, m: reports.append(e))
        p.flush(TIMEOUT_S)
        return reports

    def kafka_consume(self, topic, count, ns=None, wait=TIMEOUT_S):
        """(values, the first error) read from the start of `topic`; an error
        the client reports outside poll (a refused SASL handshake) counts."""
        reported = []
        c = ck.Consumer({**self.kafka_config(ns), "group.id": "g-" + self.tenant, "auto.offset.reset": "earliest",
                         "error_cb": reported.append})
        c.assign([ck.TopicPartition(topic, 0, 0)])
        values, error = [], None
        deadline = time.monotonic() + wait
        while len(values) < count and error is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                error = reported[0] if reported else None
                continue
            if m.error():
                error = m.error()
            else:
                values.append(m.value())
        c.close()
        return values, error

    def pulsar(self, verb, topic, *args):
        return magnetar(verb, topic, "--url", self.signup["addresses"]["pulsar"], "--token", self.token, *args,
                        check=False)

    def amqp(self, vhost=None):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", self.node.ports["amqp"], vhost or self.ns, pika.PlainCredentials("trial", self.token),
            connection_attempts=1, socket_timeout=TIMEOUT_S, blocked_connection_timeout=TIMEOUT_S))


class TrialNodeTestCase(unittest.TestCase):
    """Tests sharing one trial node started with ARGS; it must exit 0 when the class is done."""
    ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.node = TrialNode(*cls.ARGS).start()

    @classmethod
    def tearDownClass(cls):
        try:
            assert cls.node.stop() == 0, cls.node.read_log()[-3000:]
        finally:
            cls.node.close()


class TrialVisitorsTest(TrialNodeTestCase):
    ARGS = ("--trial-expiry", "1h", "--trial-max-topics", "8", "--trial-max-message-size", "64k",
            "--trial-max-connections", "6")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.a = Visitor(cls.node, cls.node.sign_up())
        cls.b = Visitor(cls.node, cls.node.sign_up())

    def test_a_sign_up_answers_a_tenant_a_token_and_where_to_connect(self):
        status, terms, _ = http_from(self.node, "127.0.0.1", "GET", "/trial/config")
        self.assertEqual(status, 200)
        self.assertEqual((terms["trial"], terms["inviteRequired"], terms["expirySeconds"]), (True, False, 3600))
        self.assertEqual((terms["limits"]["maxTopics"], terms["limits"]["maxMessageSize"]), (8, 65536))
        signup = self.a.signup
        self.assertRegex(signup["tenant"], r"^trial-[a-z2-9]{12}$")
        self.assertNotEqual(signup["tenant"], self.b.tenant)
        self.assertEqual(signup["namespace"], signup["tenant"] + "/sandbox")
        self.assertAlmostEqual(signup["expiresAtMs"] / 1000, time.time() + 3600, delta=120)
        port = self.node.ports
        self.assertEqual(signup["addresses"], {"pulsar": f"pulsar://127.0.0.1:{port['pulsar']}",
                                               "http": f"http://127.0.0.1:{port['http']}",
                                               "kafka": f"127.0.0.1:{port['kafka']}",
                                               "amqp": f"amqp://127.0.0.1:{port['amqp']}"})
        # The token names a role that administers exactly its tenant.
        status, raw, _ = self.a.rest("GET", "/admin/v2/me")
        me = json.loads(raw)
        self.assertEqual((status, me["role"], me["superuser"], me["tenants"]),
                         (200, self.a.tenant, False, [self.a.tenant]))
        status, raw, _ = self.a.rest("GET", "/admin/v2/tenants")
        self.assertEqual(json.loads(raw), [self.a.tenant])
        # Everything but the trial's two open routes still needs a token.
        self.assertEqual(self.node.get("/admin/v2/tenants")[0], 401)

    def test_every_trial_route_the_console_calls_exists(self):
        with open(API_TS) as f:
            block = re.search(r"export const TRIAL_ROUTES = \[(.*?)\] as const", f.read(), re.S)
        routes = re.findall(r"'([A-Z]+) (/[^']*)'", block.group(1))
        self.assertEqual(len(routes), 2)
        for method, path in routes:
            status = http_from(self.node, "127.0.0.9", method, path, {"inviteCode": ""} if method == "POST" else None)[0]
            self.assertIn(status, (200, 201), f"{method} {path}")

    def test_each_visitor_produces_and_consumes_over_every_protocol(self):
        for v in (self.a, self.b):
            # Pulsar, with our own client.
            topic = f"persistent://{v.ns}/pulsar-hello"
            r = v.pulsar("produce", topic, "-m", "hello-" + v.tenant)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = v.pulsar("consume", topic, "-s", "sub", "-P", "Earliest", "-n", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("hello-" + v.tenant, r.stdout)
            # Kafka, SASL/PLAIN with the token as password.
            self.assertEqual(v.kafka_produce("kafka-hello", [b"k1-" + v.tenant.encode(), b"k2"]), [None, None])
            values, error = v.kafka_consume("kafka-hello", 2)
            self.assertIsNone(error)
            self.assertEqual(values, [b"k1-" + v.tenant.encode(), b"k2"])
            # AMQP, PLAIN with the token as password, the namespace as vhost.
            conn = v.amqp()
            ch = conn.channel()
            ch.queue_declare("amqp-hello", durable=True)
            ch.confirm_delivery()
            ch.basic_publish("", "amqp-hello", b"a-" + v.tenant.encode())
            method, _, body = ch.basic_get("amqp-hello", auto_ack=True)
            conn.close()
            self.assertEqual(body, b"a-" + v.tenant.encode())

    def test_one_visitor_never_reaches_the_other(self):
        a, b = self.a, self.b
        self.assertEqual(b.pulsar("produce", f"persistent://{b.ns}/private", "-m", "secret").returncode, 0)
        self.assertEqual(b.kafka_produce("private-k", [b"secret"]), [None])
        # REST: the tenant, its namespace, its topics, their stats, their messages.
        for path in (f"/admin/v2/tenants/{b.tenant}", f"/admin/v2/namespaces/{b.tenant}",
                     f"/admin/v2/namespaces/{b.ns}/topics", f"/admin/v2/persistent/{b.ns}/private/stats",
                     f"/admin/v2/persistent/{b.ns}/private/subscription/s/position/1",
                     f"/lookup/v2/topic/persistent/{b.ns}/private"):
            self.assertEqual(a.rest("GET", path)[0], 403, path)
        self.assertEqual(a.rest("PUT", f"/admin/v2/persistent/{b.ns}/made-by-a")[0], 403)
        self.assertEqual(a.rest("POST", f"/topics/persistent/{b.ns}/private", {"messages": []})[0], 403)
        self.assertEqual(a.rest("DELETE", f"/admin/v2/persistent/{b.ns}/private?force=true")[0], 403)
        # Trials are the operator's: a visitor cannot list or extend them.
        self.assertEqual(a.rest("GET", "/admin/v2/trials")[0], 403)
        self.assertEqual(a.rest("POST", f"/admin/v2/trials/{a.tenant}/extend", {"seconds": 3600})[0], 403)
        # Pulsar: lookup, produce and consume.
        for verb, args in (("produce", ("-m", "intruder")), ("consume", ("-s", "x", "-n", "1"))):
            r = a.pulsar(verb, f"persistent://{b.ns}/private", *args)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertRegex(r.stderr.lower(), "authoriz|permission|may not", r.stderr)
        # Kafka: the other namespace refuses the token; in its own, the other's topics do not show.
        [error] = a.kafka_produce("private-k", [b"intruder"], ns=b.ns)
        self.assertIsNotNone(error)
        values, _ = a.kafka_consume("private-k", 1, ns=b.ns, wait=5)
        self.assertEqual(values, [])
        from confluent_kafka.admin import AdminClient
        for ns in (a.ns, b.ns):
            self.assertNotIn("private-k", AdminClient(a.kafka_config(ns)).list_topics(timeout=TIMEOUT_S).topics)
        named = AdminClient(a.kafka_config(b.ns)).list_topics(topic="private-k", timeout=TIMEOUT_S).topics
        self.assertEqual(named["private-k"].error.code(), ck.KafkaError.TOPIC_AUTHORIZATION_FAILED)
        # AMQP: the other's vhost is refused at open.
        refusal = open_refusal(lambda: a.amqp(vhost=b.ns))
        self.assertIsNotNone(refusal)
        self.assertEqual(refusal[0], 530, refusal)
        # And b's data is still all there.
        values, error = b.kafka_consume("private-k", 1)
        self.assertEqual((values, error), ([b"secret"], None))

    def test_quotas_hold(self):
        v = Visitor(self.node, self.node.sign_up())
        # Max message size (64 KiB here), whatever the protocol.
        [error] = v.kafka_produce("big", [b"x" * 100_000])
        self.assertIsNotNone(error)
        self.assertEqual(v.kafka_produce("big", [b"x" * 1000]), [None])
        r = v.pulsar("produce", f"persistent://{v.ns}/big-p", "-m", "y" * 100_000)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("max message size", r.stderr)
        conn = v.amqp()
        ch = conn.channel()
        ch.queue_declare("big-a", durable=True)
        ch.confirm_delivery()
        with self.assertRaises(pika.exceptions.AMQPError):
            ch.basic_publish("", "big-a", b"z" * 100_000)
        if conn.is_open:
            conn.close()
        # One namespace, the one it has.
        status, raw, _ = v.rest("PUT", f"/admin/v2/namespaces/{v.tenant}/second", {})
        self.assertEqual(status, 412, raw)
        self.assertIn(b"max namespaces", raw)
        # Max topics (8): made until refused, then there are 8.
        statuses = []
        for i in range(10):
            statuses.append(v.rest("PUT", f"/admin/v2/persistent/{v.ns}/t{i}")[0])
            if statuses[-1] != 204:
                break
        self.assertEqual(statuses[-1], 412, statuses)
        status, raw, _ = v.rest("GET", f"/admin/v2/namespaces/{v.ns}/topics")
        self.assertEqual((status, len(json.loads(raw))), (200, 8), raw)
        # Connections (6): AMQP connections past them are refused at open.
        conns, refused = [], None
        try:
            for _ in range(8):
                try:
                    conns.append(v.amqp())
                except pika.exceptions.AMQPError as e:
                    refused = e
                    break
        finally:
            for c in conns:
                c.close()
        self.assertIsNotNone(refused)
        self.assertLessEqual(len(conns), 6)
        # The operator sees the trial tenant's limits as set.
        status, limits = self.node.as_admin("GET", f"/admin/v2/tenants/{v.tenant}/limits")
        self.assertEqual((status, limits["maxTopics"], limits["maxNamespaces"], limits["maxConnections"]),
                         (200, 8, 1, 6))

    def test_the_operator_lists_extends_and_deletes_trials(self):
        v = Visitor(self.node, self.node.sign_up())
        self.assertEqual(v.kafka_produce("doomed", [b"1"]), [None])
        url = self.node.http_url
        token = self.node.admin_token
        listed = json.loads(magnetar("admin", "--url", url, "--token", token, "--json", "trials", "list").stdout)
        mine = [t for t in listed if t["tenant"] == v.tenant]
        self.assertEqual(len(mine), 1)
        self.assertTrue(mine[0]["address"].startswith("127.0.0."))
        human = magnetar("admin", "--url", url, "--token", token, "trials", "list").stdout
        self.assertIn("TENANT", human)
        self.assertIn(v.tenant, human)
        before = mine[0]["expiresAtMs"]
        out = magnetar("admin", "--url", url, "--token", token, "trials", "extend", v.tenant, "--by", "2h").stdout
        self.assertIn(f"Trial {v.tenant} now expires at", out)
        after = [t for t in json.loads(magnetar("admin", "--url", url, "--token", token, "--json", "trials",
                                                "list").stdout) if t["tenant"] == v.tenant][0]["expiresAtMs"]
        self.assertEqual(after - before, 7200 * 1000)
        bad = magnetar("admin", "--url", url, "--token", token, "trials", "extend", "trial-nosuchthing", check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("does not exist", bad.stderr)
        out = magnetar("admin", "--url", url, "--token", token, "trials", "delete", v.tenant).stdout
        self.assertIn(f"Deleted trial {v.tenant}", out)
        self.assertEqual(self.node.as_admin("GET", f"/admin/v2/tenants/{v.tenant}")[0], 404)
        self.assertNotIn(v.tenant, [t["tenant"] for t in self.node.as_admin("GET", "/admin/v2/trials")[1]])
        # Its token opens nothing now.
        self.assertNotEqual(v.rest("GET", f"/admin/v2/namespaces/{v.ns}/topics")[0], 200)


class TrialExpiryTest(unittest.TestCase):
    def test_an_expired_trial_is_deleted_with_all_its_data_across_restarts(self):
        node = TrialNode("--trial-expiry", "3s")
        try:
            node.start()
            v = Visitor(node, node.sign_up())
            self.assertEqual(v.kafka_produce("kept-k", [b"1", b"2"]), [None, None])
            self.assertEqual(v.pulsar("produce", f"persistent://{v.ns}/kept-p", "-m", "x").returncode, 0)
            conn = v.amqp()
            ch = conn.channel()
            ch.queue_declare("kept-a", durable=True)
            ch.confirm_delivery()
            ch.basic_publish("", "kept-a", b"x")
            conn.close()
            status, topics = node.as_admin("GET", f"/admin/v2/namespaces/{v.ns}/topics")
            self.assertEqual(status, 200)
            self.assertGreaterEqual(len(topics), 3)

            def gone(tenant):
                return (node.as_admin("GET", f"/admin/v2/tenants/{tenant}")[0] == 404 and
                        tenant not in [t["tenant"] for t in node.as_admin("GET", "/admin/v2/trials")[1]])

            wait_for(lambda: gone(v.tenant), "the expired trial's deletion", timeout=30)
            self.assertEqual(node.as_admin("GET", f"/admin/v2/namespaces/{v.ns}/topics")[0], 404)
            self.assertEqual(node.as_admin("GET", f"/admin/v2/persistent/{v.ns}/kept-k/stats")[0], 404)
            [error] = v.kafka_produce("kept-k", [b"3"])
            self.assertIsNotNone(error)
            # A trial that expires while the node is down is deleted once it is back.
            w = Visitor(node, node.sign_up())
            self.assertEqual(node.stop(), 0)
            time.sleep(3.5)
            node.start()
            wait_for(lambda: gone(w.tenant), "the trial that expired while the node was down", timeout=30)
            # The node made its token key once and kept it: the admin token still works.
            self.assertEqual(node.as_admin("GET", "/admin/v2/trials")[0], 200)
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()


class SignupLimitsTest(unittest.TestCase):
    def test_a_sign_up_storm_is_refused_past_its_limits_with_retry_after(self):
        node = TrialNode("--trial-signups-per-address", "3", "--trial-signups-total", "5",
                         "--trial-signup-window", "1h")
        try:
            node.start()
            answers = [http_from(node, "127.0.0.2", "POST", "/trial/signup", {}) for _ in range(5)]
            self.assertEqual([a[0] for a in answers], [201, 201, 201, 429, 429])
            retry = int(answers[3][2]["Retry-After"])
            self.assertGreaterEqual(retry, 1)
            self.assertLessEqual(retry, 3600 // 3 + 1)
            self.assertIn("too many sign-ups", answers[3][1]["reason"])
            # Another address gets its own share, until the total is spent.
            answers = [http_from(node, "127.0.0.3", "POST", "/trial/signup", {})[0] for _ in range(3)]
            self.assertEqual(answers, [201, 201, 429])
            status, trials = node.as_admin("GET", "/admin/v2/trials")
            self.assertEqual((status, len(trials)), (200, 5))
            # Bad bodies are answered, not counted as trials.
            self.assertEqual(http_from(node, "127.0.0.4", "POST", "/trial/signup", [1, 2])[0], 400)
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()

    def test_an_invite_code_is_required_when_the_operator_sets_one(self):
        node = TrialNode("--trial-invite-code", "early-bird,friends")
        try:
            node.start()
            status, terms, _ = http_from(node, "127.0.0.1", "GET", "/trial/config")
            self.assertTrue(terms["inviteRequired"])
            for body, expected in (({}, 403), ({"inviteCode": "guess"}, 403), ({"inviteCode": 7}, 400),
                                   ({"inviteCode": "friends"}, 201)):
                status, answer, _ = http_from(node, "127.0.0.5", "POST", "/trial/signup", body)
                self.assertEqual(status, expected, (body, answer))
            self.assertEqual(node.stop(), 0)
        finally:
            node.close()


class AbuseTest(TrialNodeTestCase):
    ARGS = ("--max-connections-per-address", "16", "--http-request-timeout-secs", "2", "--http-idle-timeout-secs", "5")

    def assert_serving(self):
        self.assertEqual(self.node.as_admin("GET", "/admin/v2/brokers/health"), (200, b"ok"))
        v = Visitor(self.node, self.node.sign_up())
        self.assertEqual(v.kafka_produce("alive", [b"1"]), [None])

    def open_from(self, source, port, count):
        socks = []
        for _ in range(count):
            s = socket.socket()
            s.settimeout(TIMEOUT_S)
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
            socks.append(s)
        return socks

    def closed_by_server(self, s, within=TIMEOUT_S):
        """What the server sent before it closed `s`; None when it did not close it in time."""
        s.settimeout(within)
        got = b""
        try:
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return got
                got += chunk
        except (socket.timeout, TimeoutError):
            return None
        except ConnectionResetError:
            return got

    def test_slow_http_clients_are_cut_off_and_the_node_keeps_serving(self):
        socks = self.open_from("127.0.0.20", self.node.ports["http"], 16)
        try:
            # Slowloris: a header line now and then, never the end of the request.
            for s in socks:
                s.sendall(b"GET /admin/v2/brokers/health HTTP/1.1\r\nHost: x\r\n")
            time.sleep(1)
            for s in socks:
                s.sendall(b"X-Slow: 1\r\n")
            self.assert_serving()
            answers = [self.closed_by_server(s) for s in socks]
            self.assertNotIn(None, answers)
            self.assertTrue(all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[:2])
        finally:
            for s in socks:
                s.close()
        # An idle connection (nothing sent) is closed too.
        [idle] = self.open_from("127.0.0.21", self.node.ports["http"], 1)
        try:
            self.assertEqual(self.closed_by_server(idle), b"")
        finally:
            idle.close()

    def test_a_connection_flood_from_one_address_leaves_the_node_serving(self):
        for listener in ("http", "pulsar", "kafka", "amqp"):
            socks = self.open_from("127.0.0.30", self.node.ports[listener], 40)
            try:
                # The listener keeps 16 from this address and closes the rest at once.
                def cut():
                    readable = select.select(socks, [], [], 0)[0]
                    return sum(1 for s in readable if self.closed_by_server(s, within=1) is not None)
                wait_for(lambda: cut() == 40 - 16, f"{listener} to close what is past the limit")
                self.assertEqual(cut(), 40 - 16, listener)
                self.assert_serving()
            finally:
                for s in socks:
                    s.close()
        # Once they are gone, the address may connect again.
        wait_for(lambda: http_from(self.node, "127.0.0.30", "GET", "/trial/config")[0] == 200,
                 "the flooding address served again")


if __name__ == "__main__":
    unittest.main()
