"""TLS on every listener, end to end with real clients: kcat and
confluent_kafka over Kafka TLS, `magnetar produce/consume/admin` over
pulsar+ssl:// and https://, curl and python's ssl against HTTPS, pika over
amqps. Mutual TLS refuses clients without a trusted certificate.
Certificates reload without a restart. Garbage on a TLS port closes that
connection only; a plain port turned off is not listening."""
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import confluent_kafka as ck
import pika
from amqp_pika import open_refusal, publish_confirmed
from magnetar_harness import BIN, Node
from pulsar_wire import PulsarWire, command, encode
from tls_certs import CertFactory, serial_of_der

TIMEOUT_S = 20
TLS_PORTS = ["--broker-service-port-tls", "0", "--web-service-port-tls", "0", "--kafka-port-tls", "0",
             "--amqp-port-tls", "0"]


def run(*args, check=True, timeout=60):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def served_serial(port, cwd, ca=None):
    """The serial number of the certificate a new TLS connection is served."""
    ctx = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return serial_of_der(s.getpeercert(binary_form=True), cwd)


def https_get(port, path, ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    with urllib.request.urlopen(f"https://localhost:{port}{path}", context=ctx, timeout=TIMEOUT_S) as r:
        return r.status, r.read()


def closed_by_peer(sock):
    """True when the server closes (or resets) `sock` within the timeout."""
    sock.settimeout(TIMEOUT_S)
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def listening_ports(pid):
    """The TCP ports process `pid` listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


class TlsNode(unittest.TestCase):
    """A node with every plain and TLS listener, and a CA that signed its certificate."""

    extra = []

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="magnetar-tls-")
        cls.ca = CertFactory(cls.tmp)
        cls.cert, cls.key = cls.ca.issue("server", "localhost", serial=1001)
        cls.node = Node(*TLS_PORTS, "--tls-certificate-file", cls.cert, "--tls-key-file", cls.key,
                        *cls.node_args()).start()

    @classmethod
    def node_args(cls):
        return []

    @classmethod
    def tearDownClass(cls):
        cls.node.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def magnetar(self, *args, check=True):
        return run(BIN, *args, check=check)

    @property
    def pulsar_ssl(self):
        return f"pulsar+ssl://localhost:{self.node.ports['pulsar_tls']}"


class TlsListenersTest(TlsNode):
    def test_ports_file_and_banner_name_every_tls_listener(self):
        for name in ("pulsar_tls", "http_tls", "kafka_tls", "amqp_tls"):
            self.assertGreater(self.node.ports.get(name, 0), 0, name)
        log = self.node.read_log()
        self.assertIn(f"pulsar+ssl://127.0.0.1:{self.node.ports['pulsar_tls']}", log)
        self.assertIn(f"amqps://127.0.0.1:{self.node.ports['amqp_tls']}", log)
        self.assertIn(f"https://127.0.0.1:{self.node.ports['http_tls']}/admin/v2", log)

    def test_lookup_names_the_tls_service_url(self):
        with PulsarWire(self.node.ports["pulsar"]) as w:
            ans = w.request("LOOKUP", ["LOOKUP_RESPONSE"], topic="persistent://public/default/lookup-tls")
        body = ans.cmd.lookupTopicResponse
        self.assertEqual(body.brokerServiceUrl, f"pulsar://127.0.0.1:{self.node.ports['pulsar']}")
        self.assertEqual(body.brokerServiceUrlTls, f"pulsar+ssl://127.0.0.1:{self.node.ports['pulsar_tls']}")
        # The REST lookup names both too.
        status, raw, _ = self.node.http("GET", "/lookup/v2/topic/persistent/public/default/lookup-tls")
        self.assertEqual(status, 200)
        rest = json.loads(raw)
        self.assertEqual(rest["brokerUrlTls"], f"pulsar+ssl://127.0.0.1:{self.node.ports['pulsar_tls']}")
        self.assertEqual(rest["httpUrlTls"], f"https://127.0.0.1:{self.node.ports['http_tls']}")
        self.assertEqual(rest["brokerUrl"], f"pulsar://127.0.0.1:{self.node.ports['pulsar']}")

    def test_kcat_produces_and_consumes_over_tls(self):
        broker = f"127.0.0.1:{self.node.ports['kafka_tls']}"
        ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={self.ca.ca_pem}"]
        r = subprocess.run(["kcat", "-P", "-b", broker, "-t", "kcat-tls", *ssl_args], input="one\ntwo\n",
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = run("kcat", "-C", "-b", broker, "-t", "kcat-tls", "-o", "beginning", "-e", "-q", *ssl_args).stdout
        self.assertEqual(out.split(), ["one", "two"])
        # The same log over the plain listener.
        plain = run("kcat", "-C", "-b", f"127.0.0.1:{self.node.ports['kafka']}", "-t", "kcat-tls", "-o",
                    "beginning", "-e", "-q").stdout
        self.assertEqual(plain.split(), ["one", "two"])

    def test_kcat_without_the_ca_is_refused(self):
        r = run("kcat", "-L", "-b", f"127.0.0.1:{self.node.ports['kafka_tls']}", "-X", "security.protocol=ssl",
                "-X", "ssl.ca.location=/etc/ssl/certs/ca-certificates.crt", "-m", "5", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("certificate verify failed", r.stderr)

    def test_confluent_kafka_over_tls(self):
        conf = {"bootstrap.servers": f"localhost:{self.node.ports['kafka_tls']}", "security.protocol": "ssl",
                "ssl.ca.location": self.ca.ca_pem}
        p = ck.Producer(conf)
        for i in range(20):
            p.produce("ck-tls", f"m{i}".encode())
        self.assertEqual(p.flush(TIMEOUT_S), 0)
        c = ck.Consumer({**conf, "group.id": "g-tls", "auto.offset.reset": "earliest"})
        c.subscribe(["ck-tls"])
        got = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 20 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        c.close()
        self.assertEqual(got, [f"m{i}" for i in range(20)])

    def test_cli_produces_and_consumes_over_pulsar_ssl(self):
        trust = ["--tls-trust-cert", self.ca.ca_pem]
        self.magnetar("produce", "cli-tls", "-m", "a", "-m", "b", "--url", self.pulsar_ssl, *trust)
        self.magnetar("produce", "cli-tls", "-m", "c", "-n", "500", "--batch", "--url", self.pulsar_ssl, *trust)
        out = self.magnetar("consume", "cli-tls", "-s", "s1", "-P", "Earliest", "-n", "502", "--url",
                            self.pulsar_ssl, *trust).stdout.split()
        self.assertEqual(out[:3], ["a", "b", "c"])
        self.assertEqual(len(out), 502)
        # The same topic over the plain listener.
        plain = self.magnetar("consume", "cli-tls", "-s", "s2", "-P", "Earliest", "-n", "2", "--url",
                              f"pulsar://127.0.0.1:{self.node.ports['pulsar']}").stdout.split()
        self.assertEqual(plain, ["a", "b"])

    def test_cli_checks_the_server_certificate(self):
        r = self.magnetar("produce", "cli-untrusted", "-m", "x", "--url", self.pulsar_ssl, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("certificate verify failed", r.stderr)
        r = self.magnetar("produce", "cli-untrusted", "-m", "x", "--tls-allow-insecure", "--url", self.pulsar_ssl)
        self.assertIn("Produced 1 message", r.stdout)

    def test_https_admin_api_with_curl_python_and_the_cli(self):
        port = self.node.ports["http_tls"]
        r = run("curl", "-sS", "--cacert", self.ca.ca_pem, f"https://localhost:{port}/admin/v2/brokers/health")
        self.assertEqual(r.stdout, "ok")
        status, body = https_get(port, "/admin/v2/tenants", self.ca.ca_pem)
        self.assertEqual(status, 200)
        self.assertIn("public", json.loads(body))
        out = self.magnetar("admin", "--url", f"https://localhost:{port}", "--tls-trust-cert", self.ca.ca_pem,
                            "tenants", "list").stdout.split()
        self.assertIn("public", out)
        r = run("curl", "-sS", f"https://localhost:{port}/admin/v2/tenants", check=False)
        self.assertNotEqual(r.returncode, 0)  # the system CAs do not know ours

    def test_amqps_with_pika(self):
        ctx = ssl.create_default_context(cafile=self.ca.ca_pem)
        params = pika.ConnectionParameters(host="localhost", port=self.node.ports["amqp_tls"],
                                           ssl_options=pika.SSLOptions(ctx, "localhost"))
        conn = pika.BlockingConnection(params)
        try:
            ch = conn.channel()
            ch.queue_declare("amqps-q")
            for i in range(10):
                ch.basic_publish("", "amqps-q", f"p{i}".encode())
            got = []
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 10 and time.monotonic() < deadline:
                _, _, body = ch.basic_get("amqps-q", auto_ack=True)
                if body is None:
                    time.sleep(0.05)
                else:
                    got.append(body.decode())
            self.assertEqual(got, [f"p{i}" for i in range(10)])
        finally:
            conn.close()

    def test_garbage_on_tls_ports_closes_only_that_connection(self):
        trust = ["--tls-trust-cert", self.ca.ca_pem]
        self.magnetar("produce", "kept", "-m", "before", "--url", self.pulsar_ssl, *trust)
        rng = random.Random(7)
        garbage = [bytes(rng.randrange(256) for _ in range(4096)),
                   encode(command("CONNECT", client_version="plain-on-tls", protocol_version=19)),
                   b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                   # A ClientHello record header that promises 512 bytes, then stops.
                   bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]) + bytes(40)]
        for name in ("pulsar_tls", "kafka_tls", "amqp_tls", "http_tls"):
            for i, blob in enumerate(garbage):
                with socket.create_connection(("127.0.0.1", self.node.ports[name]), timeout=TIMEOUT_S) as s:
                    s.sendall(blob)
                    if i == len(garbage) - 1:
                        s.shutdown(socket.SHUT_WR)  # the truncated hello never completes
                    self.assertTrue(closed_by_peer(s), f"{name}: garbage {i} left the connection open")
        self.assertIn("TLS handshake failed", self.node.read_log())
        self.assertIsNone(self.node.proc.poll())
        # Both kinds of listener still serve, and what was stored is intact.
        self.magnetar("produce", "kept", "-m", "after", "--url", self.pulsar_ssl, *trust)
        out = self.magnetar("consume", "kept", "-s", "s", "-P", "Earliest", "-n", "2", "--url",
                            f"pulsar://127.0.0.1:{self.node.ports['pulsar']}").stdout.split()
        self.assertEqual(out, ["before", "after"])
        status, _ = https_get(self.node.ports["http_tls"], "/admin/v2/brokers/health", self.ca.ca_pem)
        self.assertEqual(status, 200)


class MutualTlsTest(TlsNode):
    @classmethod
    def node_args(cls):
        return ["--tls-trust-certs-file-path", cls.ca.ca_pem, "--tls-require-trusted-client-cert-on-connect"]

    def test_a_client_without_a_trusted_certificate_is_refused(self):
        port = self.node.ports["http_tls"]
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            https_get(port, "/admin/v2/brokers/health", self.ca.ca_pem)
        stranger_ca = CertFactory(self.tmp, ca_name="stranger-ca")
        s_cert, s_key = stranger_ca.issue("stranger", "mallory", serial=5, server=False)
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            https_get(port, "/admin/v2/brokers/health", self.ca.ca_pem, s_cert, s_key)
        r = self.magnetar("produce", "mtls", "-m", "x", "--url", self.pulsar_ssl, "--tls-trust-cert",
                          self.ca.ca_pem, check=False)
        self.assertNotEqual(r.returncode, 0)
        r = run("kcat", "-L", "-b", f"127.0.0.1:{self.node.ports['kafka_tls']}", "-X", "security.protocol=ssl",
                "-X", f"ssl.ca.location={self.ca.ca_pem}", "-m", "5", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("certificate", self.node.read_log())

    def test_a_client_with_a_trusted_certificate_is_served(self):
        cert, key = self.ca.issue("alice", "alice", serial=11, server=False)
        status, body = https_get(self.node.ports["http_tls"], "/admin/v2/brokers/health", self.ca.ca_pem, cert, key)
        self.assertEqual((status, body), (200, b"ok"))
        mtls = ["--tls-trust-cert", self.ca.ca_pem, "--tls-cert-file", cert, "--tls-key-file", key]
        self.magnetar("produce", "mtls-ok", "-m", "hello", "--url", self.pulsar_ssl, *mtls)
        out = self.magnetar("consume", "mtls-ok", "-s", "s", "-P", "Earliest", "-n", "1", "--url", self.pulsar_ssl,
                            *mtls).stdout.split()
        self.assertEqual(out, ["hello"])
        broker = f"127.0.0.1:{self.node.ports['kafka_tls']}"
        ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={self.ca.ca_pem}",
                    "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
        r = subprocess.run(["kcat", "-P", "-b", broker, "-t", "mtls-k", *ssl_args], input="k1\n",
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = run("kcat", "-C", "-b", broker, "-t", "mtls-k", "-o", "beginning", "-e", "-q", *ssl_args).stdout
        self.assertEqual(out.split(), ["k1"])


class CertificateRoleTest(TlsNode):
    """With authentication on, a Pulsar client that sends no token over TLS
    with a trusted certificate has the certificate's CN as its role."""

    @classmethod
    def node_args(cls):
        key = os.path.join(cls.tmp, "secret.key")
        run(BIN, "tokens", "create-secret-key", "--output", key)
        return ["--tls-trust-certs-file-path", cls.ca.ca_pem, "--authentication-enabled", "--token-secret-key",
                "file://" + key, "--authorization-enabled", "--superuser-roles", "alice"]

    def test_the_certificate_cn_is_the_role(self):
        trust = ["--tls-trust-cert", self.ca.ca_pem]
        alice = self.ca.issue("alice-role", "alice", serial=21, server=False)
        bob = self.ca.issue("bob-role", "bob", serial=22, server=False)
        ok = self.magnetar("produce", "by-cert", "-m", "hi", "--url", self.pulsar_ssl, *trust,
                           "--tls-cert-file", alice[0], "--tls-key-file", alice[1])
        self.assertIn("Produced 1 message", ok.stdout)
        denied = self.magnetar("produce", "by-cert", "-m", "no", "--url", self.pulsar_ssl, *trust,
                               "--tls-cert-file", bob[0], "--tls-key-file", bob[1], check=False)
        self.assertNotEqual(denied.returncode, 0)
        self.assertIn("bob", denied.stderr)
        # No certificate and no token: refused, over TLS and over plaintext.
        anon = self.magnetar("produce", "by-cert", "-m", "no", "--url", self.pulsar_ssl, *trust, check=False)
        self.assertIn("authentication is required", anon.stderr)
        plain = self.magnetar("produce", "by-cert", "-m", "no", "--url",
                              f"pulsar://127.0.0.1:{self.node.ports['pulsar']}", check=False)
        self.assertIn("authentication is required", plain.stderr)

    def test_the_certificate_cn_is_the_role_on_kafka_amqp_and_https(self):
        alice = self.ca.issue("alice-other", "alice", serial=23, server=False)
        bob = self.ca.issue("bob-other", "bob", serial=24, server=False)
        # Kafka: the certificate authenticates the connection (no SASL);
        # bob has no grant, alice is a superuser.
        broker = f"127.0.0.1:{self.node.ports['kafka_tls']}"

        def kafka_produce(cert):
            p = ck.Producer({"bootstrap.servers": broker, "security.protocol": "ssl",
                             "ssl.ca.location": self.ca.ca_pem, "ssl.certificate.location": cert[0],
                             "ssl.key.location": cert[1], "message.timeout.ms": 8000})
            reports = []
            p.produce("cert-k", value=b"v", on_delivery=lambda e, m: reports.append(e))
            p.flush(TIMEOUT_S)
            return reports[0] if reports else "no report"

        self.assertIsNone(kafka_produce(alice))
        refused = kafka_produce(bob)
        self.assertEqual(refused.code(), ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, refused)

        # AMQP: EXTERNAL is offered to a client with a trusted certificate.
        def amqp(cert):
            ctx = ssl.create_default_context(cafile=self.ca.ca_pem)
            ctx.load_cert_chain(*cert)
            return pika.BlockingConnection(pika.ConnectionParameters(
                host="localhost", port=self.node.ports["amqp_tls"], ssl_options=pika.SSLOptions(ctx, "localhost"),
                credentials=pika.credentials.ExternalCredentials(), connection_attempts=1, socket_timeout=15))

        publish_confirmed(amqp(alice), "cert-q", b"by alice")
        # bob holds no permission in the vhost: connection.open is refused.
        self.assertEqual(open_refusal(lambda: amqp(bob))[0], 530)

        # HTTPS: the certificate stands in for a bearer token.
        port = self.node.ports["http_tls"]
        status, body = https_get(port, "/admin/v2/me", self.ca.ca_pem, *alice)
        self.assertEqual((status, json.loads(body)["role"]), (200, "alice"))
        with self.assertRaises(urllib.error.HTTPError) as e:
            https_get(port, "/admin/v2/tenants/public", self.ca.ca_pem, *bob)
        self.assertEqual(e.exception.code, 403)
        with self.assertRaises(urllib.error.HTTPError) as e:
            https_get(port, "/admin/v2/tenants/public", self.ca.ca_pem)
        self.assertEqual(e.exception.code, 401)


class ReloadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="magnetar-tls-reload-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.ca = CertFactory(self.tmp)
        self.cert = os.path.join(self.tmp, "live.pem")
        self.key = os.path.join(self.tmp, "live.key")
        self.install(*self.ca.issue("first", "localhost", serial=1))

    def install(self, cert, key):
        """Replaces the files the node reads, each by an atomic rename."""
        for src, dst in ((key, self.key), (cert, self.cert)):
            shutil.copyfile(src, dst + ".tmp")
            os.replace(dst + ".tmp", dst)

    def start(self, refresh_secs):
        node = Node("--web-service-port-tls", "0", "--broker-service-port-tls", "0", "--tls-certificate-file",
                    self.cert, "--tls-key-file", self.key, "--tls-cert-refresh-check-duration-sec", str(refresh_secs))
        self.addCleanup(node.close)
        return node.start()

    def wait_for_serial(self, port, serial):
        deadline = time.monotonic() + TIMEOUT_S
        seen = None
        while time.monotonic() < deadline:
            seen = served_serial(port, self.tmp, self.ca.ca_pem)
            if seen == serial:
                return
            time.sleep(0.2)
        self.fail(f"the served certificate's serial stayed {seen}, expected {serial}")

    def test_changed_files_are_picked_up_by_new_connections(self):
        node = self.start(refresh_secs=1)
        port = node.ports["http_tls"]
        self.assertEqual(served_serial(port, self.tmp, self.ca.ca_pem), 1)
        # A connection made before the change keeps working after it.
        ctx = ssl.create_default_context(cafile=self.ca.ca_pem)
        old = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S),
                              server_hostname="localhost")
        self.addCleanup(old.close)
        self.install(*self.ca.issue("second", "localhost", serial=2))
        self.wait_for_serial(port, 2)
        self.wait_for_serial(node.ports["pulsar_tls"], 2)
        old.sendall(b"GET /admin/v2/brokers/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertIn(b"200", old.recv(4096))
        self.assertIn("TLS certificates reloaded", node.read_log())

    def test_a_broken_replacement_keeps_the_old_certificate(self):
        node = self.start(refresh_secs=1)
        port = node.ports["http_tls"]
        with open(self.cert + ".tmp", "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        os.replace(self.cert + ".tmp", self.cert)
        deadline = time.monotonic() + TIMEOUT_S
        while "TLS certificates not reloaded" not in node.read_log() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertIn("TLS certificates not reloaded", node.read_log())
        self.assertEqual(served_serial(port, self.tmp, self.ca.ca_pem), 1)
        # Fixed files are picked up again.
        self.install(*self.ca.issue("third", "localhost", serial=3))
        self.wait_for_serial(port, 3)

    def test_sighup_reloads_at_once(self):
        node = self.start(refresh_secs=3600)
        port = node.ports["pulsar_tls"]
        self.install(*self.ca.issue("fourth", "localhost", serial=4))
        self.assertEqual(served_serial(port, self.tmp, self.ca.ca_pem), 1)  # no check before an hour
        node.proc.send_signal(signal.SIGHUP)
        self.wait_for_serial(port, 4)
        self.assertIsNone(node.proc.poll())


class PlainPortsOffTest(unittest.TestCase):
    def test_off_plain_ports_do_not_listen(self):
        tmp = tempfile.mkdtemp(prefix="magnetar-tls-off-")
        self.addCleanup(shutil.rmtree, tmp, True)
        ca = CertFactory(tmp)
        cert, key = ca.issue("server", "localhost", serial=9)
        node = Node(*TLS_PORTS, "--tls-certificate-file", cert, "--tls-key-file", key, "--pulsar-port", "off",
                    "--kafka-port", "off", "--amqp-port", "off", "--http-port", "off")
        self.addCleanup(node.close)
        node.start()
        for name in ("pulsar", "kafka", "amqp", "http"):
            self.assertEqual(node.ports[name], 0, name)
        tls_ports = {node.ports[n] for n in ("pulsar_tls", "kafka_tls", "amqp_tls", "http_tls")}
        self.assertEqual(listening_ports(node.proc.pid), tls_ports)
        out = run(BIN, "produce", "only-tls", "-m", "x", "--url",
                  f"pulsar+ssl://localhost:{node.ports['pulsar_tls']}", "--tls-trust-cert", ca.ca_pem).stdout
        self.assertIn("Produced 1 message", out)

    def test_tls_settings_and_off_ports_from_a_config_file(self):
        tmp = tempfile.mkdtemp(prefix="magnetar-tls-toml-")
        self.addCleanup(shutil.rmtree, tmp, True)
        ca = CertFactory(tmp)
        cert, key = ca.issue("server", "localhost", serial=10)
        config = os.path.join(tmp, "magnetar.toml")
        with open(config, "w") as f:
            f.write(f'kafka-port-tls = 0\namqp-port-tls = "off"\ntls-certificate-file = "{cert}"\n'
                    f'tls-key-file = "{key}"\n')
        # The harness's "--kafka-port 0" is on the command line, which wins
        # over the file: "off" for it comes from the command line too.
        node = Node("--config", config, "--kafka-port", "off")
        self.addCleanup(node.close)
        node.start()
        self.assertEqual(node.ports["kafka"], 0)
        self.assertNotIn("amqp_tls", node.ports)
        out = run("kcat", "-L", "-b", f"127.0.0.1:{node.ports['kafka_tls']}", "-X", "security.protocol=ssl",
                  "-X", f"ssl.ca.location={ca.ca_pem}", "-m", "10").stdout
        self.assertIn(f"127.0.0.1:{node.ports['kafka_tls']}", out)

    def test_tls_port_without_certificate_files_is_a_start_error(self):
        node = Node("--broker-service-port-tls", "0")
        self.addCleanup(node.close)
        with self.assertRaises(RuntimeError) as e:
            node.start()
        self.assertIn("--tls-certificate-file", str(e.exception))

    def test_missing_certificate_file_is_a_start_error(self):
        node = Node("--broker-service-port-tls", "0", "--tls-certificate-file", "/nonexistent/cert.pem",
                    "--tls-key-file", "/nonexistent/key.pem")
        self.addCleanup(node.close)
        with self.assertRaises(RuntimeError) as e:
            node.start()
        self.assertIn("/nonexistent/cert.pem", str(e.exception))


if __name__ == "__main__":
    unittest.main()
