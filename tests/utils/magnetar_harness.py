"""Starts the real magnetar binary for integration tests.

Every node gets its own temporary data directory and port 0 for every
listener, so tests run in parallel. Every wait is bounded.
"""
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

BIN = os.environ.get("MAGNETAR_BIN", "build/magnetar")
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 20.0


class Node:
    """One `magnetar standalone` process (or `command`, e.g. "start")."""

    def __init__(self, *extra_args, data_dir=None, keep_data=False, command="standalone"):
        self.command = command
        self.owns_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="magnetar-test-")
        self.keep_data = keep_data
        self.extra_args = list(extra_args)
        self.proc = None
        self.ports = {}
        self.log_path = os.path.join(self.data_dir, "node.log")

    def start(self):
        ports_file = os.path.join(self.data_dir, "ports.json")
        if os.path.exists(ports_file):
            os.unlink(ports_file)
        args = self.launch_prefix() + [BIN, self.command, "--data-dir", self.data_dir, "--http-port", "0",
                                       "--pulsar-port", "0", "--kafka-port", "0", "--amqp-port", "0"] + self.extra_args
        if getattr(self, "log", None):
            self.log.close()  # a restart: the log goes on in the same file
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"magnetar exited with {self.proc.returncode}: {self.read_log()[-4000:]}")
            try:
                with open(ports_file) as f:
                    self.ports = json.load(f)
                return self
            except (FileNotFoundError, json.JSONDecodeError):
                time.sleep(0.01)
        raise TimeoutError(f"magnetar did not write ports.json in {START_TIMEOUT_S}s: {self.read_log()[-4000:]}")

    def launch_prefix(self):
        """What the command line starts with before the binary (none here)."""
        return []

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def http_url(self):
        return f"http://127.0.0.1:{self.ports['http']}"

    def http(self, method, path, body=None, headers=None, timeout=10):
        """Returns (status, body bytes, headers). Never raises on HTTP errors."""
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        elif isinstance(body, str):
            data = body.encode()
        req = urllib.request.Request(self.http_url + path, data=data, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def get(self, path, **kw):
        return self.http("GET", path, **kw)

    def metric(self, name, default=0.0):
        """The value of the first /metrics sample named `name` (with or
        without labels); `default` when the node has none."""
        status, body, _ = self.get("/metrics", timeout=30)
        if status != 200:
            raise RuntimeError(f"/metrics answered {status}")
        for line in body.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
        return default

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Sends `sig` and returns the exit code (raises if it did not exit in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            raise TimeoutError(f"magnetar did not exit within {timeout}s of {sig!r}")

    def close(self):
        try:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        finally:
            if getattr(self, "log", None):
                self.log.close()
            if self.owns_dir and not self.keep_data:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


def disk_bytes(path):
    """Bytes in the files under `path` (files that vanish meanwhile count 0)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def free_port():
    """A port nothing listens on now (for listeners that must keep their port
    across restarts, such as a cluster member's)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def admin(node, *args):
    """Runs `magnetar admin --url <node> args...`: (exit code, stdout, stderr)."""
    r = subprocess.run([BIN, "admin", "--url", node.http_url, *args], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout, r.stderr


def call_json(node, method, path, body=None):
    """(status, parsed JSON or None) for one request; `body` is sent as JSON
    unless it is a str (sent as is, for malformed bodies)."""
    if body is not None and not isinstance(body, str):
        body = json.dumps(body)
    status, raw, _ = node.http(method, path, body, headers={"Content-Type": "application/json"})
    return json_answer(status, raw)


def json_answer(status, raw):
    """(status, the body parsed as JSON, as text when it is not, or None when empty)."""
    if not raw:
        return status, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def expect_call(test, node, method, path, body=None, status=204):
    """call_json that fails `test` unless the answer has `status`; the parsed answer."""
    got, answer = call_json(node, method, path, body)
    test.assertEqual(got, status, f"{method} {path}: {answer}")
    return answer


def magnetar(*args, check=True):
    """Runs the CLI; with `check`, a non-zero exit fails with its output."""
    r = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=60)
    if check and r.returncode != 0:
        raise AssertionError(f"magnetar {' '.join(args)}: {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


class KeyedNodeTest(unittest.TestCase):
    """A node started by setUpClass with a key in `cls.dir`: stopped cleanly
    (exit code 0) and its key directory removed afterwards."""

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        cls.dir.cleanup()
        assert code == 0, f"exit code {code}"


class NodeTestCase(unittest.TestCase):
    """A test class sharing one node among its tests; the node must exit 0
    when the class is done."""

    node_args = ()

    @classmethod
    def setUpClass(cls):
        cls.node = Node(*cls.node_args).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.node.stop()
        cls.node.close()
        assert code == 0, f"exit code {code}"


class NodePerTestCase(unittest.TestCase):
    """A node of its own per test, so that what a test measures of the node
    (its memory, say) is its own; the node must exit 0 unless the test set
    `self.killed` (a memory watch killed it past its hard cap)."""

    node_args = ()

    def setUp(self):
        self.node = Node(*self.node_args).start()
        self.killed = False

    def tearDown(self):
        code = self.node.stop()
        self.node.close()
        if not self.killed:
            self.assertEqual(code, 0, "the node's exit code")


def raw_exchange(port, payload, timeout=5.0, read=True):
    """Sends raw bytes to 127.0.0.1:port and returns what comes back until EOF
    or timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        if not read:
            return b""
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except socket.timeout:
            pass
        return b"".join(chunks)


def push_until_stalled(sock, data, stall_s=1.0, timeout=60.0):
    """Sends `data` without reading until all of it went or less than a MiB
    went in `stall_s` seconds: the peer stopped reading (the kernel still
    lets a trickle into a full receive buffer as it compacts it). Returns
    how many bytes went; the socket is left blocking with `timeout`."""
    sock.setblocking(False)
    view = memoryview(data)
    sent = 0
    mark, mark_at = 0, time.monotonic()
    try:
        while sent < len(data):
            try:
                sent += sock.send(view[sent:sent + (1 << 20)])
            except BlockingIOError:
                select.select([], [sock], [], 0.05)
            if sent - mark >= (1 << 20):
                mark, mark_at = sent, time.monotonic()
            elif time.monotonic() - mark_at > stall_s:
                break
    finally:
        sock.settimeout(timeout)
    return sent
