"""`magnetar start --ephemeral`: a throwaway node for application tests.

Each test gives the node a TMPDIR of its own, so "leaves nothing behind"
is checked as that directory being empty again, and runs Pulsar (our CLI),
Kafka (confluent-kafka) and AMQP (pika) clients against the URLs the node
reported. Start-to-ready times are printed, not asserted.
"""
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request
import uuid

import confluent_kafka as ck
import pika

from magnetar_harness import BIN, free_port

TIMEOUT_S = 20.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR_PATTERN = r"magnetar-ephemeral-(\d+)-[a-z0-9]{8}"


def read_line(proc, timeout=TIMEOUT_S):
    """The first line the process writes on stdout, waited for at most `timeout`."""
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no line on stdout in {timeout}s (so far {buf!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"stdout closed before a line: exit {proc.wait(5)}, "
                                   f"stderr {proc.stderr.read().decode(errors='replace')}")
            buf += chunk
    line, rest = buf.split(b"\n", 1)
    assert rest == b"", f"more than one line at once: {buf!r}"
    return line.decode()


def process_gone(pid):
    """True once `pid` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid, timeout=TIMEOUT_S):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.01)
    return False


def processes_started_with(env_entry):
    """The pids of this user's processes whose environment holds `env_entry` (KEY=value)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                entries = f.read().split(b"\0")
        except OSError:
            continue  # gone, or not ours
        if env_entry.encode() in entries and not process_gone(int(pid)) and int(pid) != os.getpid():
            found.append(int(pid))
    return found


def pulsar_round_trip(test, pulsar_url, topic):
    """Produces one message with `magnetar produce` and consumes it with `magnetar consume`."""
    body = f"hello {uuid.uuid4().hex}"
    r = subprocess.run([BIN, "produce", topic, "-m", body, "--url", pulsar_url], capture_output=True, text=True,
                       timeout=30)
    test.assertEqual(r.returncode, 0, r.stderr)
    r = subprocess.run([BIN, "consume", topic, "-s", "app-test", "-P", "Earliest", "-n", "1", "--timeout", "15",
                        "--url", pulsar_url], capture_output=True, text=True, timeout=30)
    test.assertEqual(r.returncode, 0, r.stderr)
    test.assertIn(body, r.stdout)


def kafka_round_trip(test, bootstrap, topic):
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, key=b"k", value=b"over kafka")
    test.assertEqual(p.flush(TIMEOUT_S), 0)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "app-test", "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        got = None
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got = m
        test.assertIsNotNone(got, "no Kafka message within the timeout")
        test.assertEqual((got.key(), got.value()), (b"k", b"over kafka"))
    finally:
        c.close()


def amqp_round_trip(test, amqp_url, queue):
    params = pika.URLParameters(amqp_url)
    params.socket_timeout = TIMEOUT_S
    params.blocked_connection_timeout = TIMEOUT_S
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(queue, durable=True)
        ch.basic_publish("", queue, b"over amqp")
        method, _, body = ch.basic_get(queue, auto_ack=True)
        test.assertIsNotNone(method, "the queue was empty")
        test.assertEqual(body, b"over amqp")
    finally:
        conn.close()


def health(http_url):
    with urllib.request.urlopen(http_url + "/admin/v2/brokers/health", timeout=10) as r:
        return r.status, r.read()


class EphemeralTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ephemeral-test-tmp-")
        self.env = dict(os.environ, TMPDIR=self.tmp)
        self.procs = []

    def tearDown(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, *args, command="start", env=None):
        """Starts an ephemeral node; (process, its JSON line parsed, seconds from exec to the line)."""
        t0 = time.monotonic()
        proc = subprocess.Popen([BIN, command, "--ephemeral", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env or self.env)
        self.procs.append(proc)
        line = read_line(proc)
        return proc, json.loads(line), time.monotonic() - t0

    def left_in_tmp(self):
        return sorted(os.listdir(self.tmp))

    def test_json_line_clients_of_every_protocol_and_nothing_left_after_sigterm(self):
        proc, ready, took = self.start()
        print(f"\nstart to JSON line: {took * 1000:.1f} ms (readyMs {ready['readyMs']})")
        self.assertEqual(ready["pid"], proc.pid)
        data_dir = ready["dataDir"]
        self.assertEqual(os.path.dirname(data_dir), self.tmp)
        self.assertRegex(os.path.basename(data_dir), "^" + DIR_PATTERN + "$")
        self.assertEqual(re.match(DIR_PATTERN, os.path.basename(data_dir)).group(1), str(proc.pid))
        self.assertEqual(os.stat(data_dir).st_mode & 0o777, 0o700)
        ports = ready["ports"]
        for name in ("http", "pulsar", "kafka", "amqp"):
            self.assertGreater(ports[name], 0, name)
            self.assertNotIn(ports[name], (8080, 6650, 9092, 5672), name)
        self.assertEqual(ready["pulsarUrl"], f"pulsar://127.0.0.1:{ports['pulsar']}")
        self.assertEqual(ready["httpUrl"], f"http://127.0.0.1:{ports['http']}")
        self.assertEqual(ready["kafkaBootstrap"], f"127.0.0.1:{ports['kafka']}")
        self.assertEqual(ready["amqpUrl"], f"amqp://127.0.0.1:{ports['amqp']}")
        with open(os.path.join(data_dir, "ports.json")) as f:
            self.assertEqual(json.load(f), ports)
        self.assertEqual(health(ready["httpUrl"]), (200, b"ok"))

        pulsar_round_trip(self, ready["pulsarUrl"], "ephemeral-pulsar")
        kafka_round_trip(self, ready["kafkaBootstrap"], "ephemeral-kafka")
        amqp_round_trip(self, ready["amqpUrl"], "ephemeral-amqp")

        t1 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(TIMEOUT_S), 0, proc.stderr.read().decode(errors="replace"))
        print(f"SIGTERM to exit: {(time.monotonic() - t1) * 1000:.1f} ms")
        self.assertEqual(proc.stdout.read(), b"", "stdout holds the JSON line only")
        self.assertFalse(os.path.exists(data_dir))
        self.assertEqual(self.left_in_tmp(), [])
        self.assertTrue(process_gone(proc.pid))

    def test_sigint_and_the_standalone_command_work_the_same(self):
        proc, ready, _ = self.start(command="standalone")
        self.assertEqual(health(ready["httpUrl"]), (200, b"ok"))
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(TIMEOUT_S), 0)
        self.assertEqual(self.left_in_tmp(), [])

    def test_after_kill_9_only_its_directory_is_left_and_the_next_start_removes_it(self):
        first, ready, _ = self.start()
        first.kill()
        first.wait(TIMEOUT_S)
        self.assertEqual(self.left_in_tmp(), [os.path.basename(ready["dataDir"])])
        second, ready2, took = self.start()
        print(f"\nstart to JSON line, removing a dead node's directory: {took * 1000:.1f} ms")
        self.assertFalse(os.path.exists(ready["dataDir"]))
        self.assertEqual(self.left_in_tmp(), [os.path.basename(ready2["dataDir"])])
        second.send_signal(signal.SIGTERM)
        self.assertEqual(second.wait(TIMEOUT_S), 0)
        self.assertEqual(self.left_in_tmp(), [])

    def test_a_running_ephemeral_node_keeps_its_directory_while_another_starts(self):
        first, ready, _ = self.start()
        second, ready2, _ = self.start()
        self.assertTrue(os.path.isdir(ready["dataDir"]))
        self.assertNotEqual(ready["ports"], ready2["ports"])
        self.assertEqual(health(ready["httpUrl"]), (200, b"ok"))
        for proc in (first, second):
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(TIMEOUT_S), 0)
        self.assertEqual(self.left_in_tmp(), [])

    def test_print_env_returns_and_leaves_the_node_running_until_killed(self):
        # A TMPDIR a shell would split and expand: the lines must still parse.
        tmp = os.path.join(self.tmp, "it's a dir")
        os.mkdir(tmp)
        env = dict(os.environ, TMPDIR=tmp)
        t0 = time.monotonic()
        # capture_output waits for EOF on stdout and stderr: it returns only if
        # the node left both.
        r = subprocess.run([BIN, "start", "--ephemeral", "--print-env"], capture_output=True, text=True, env=env,
                           timeout=TIMEOUT_S)
        print(f"\n--print-env returned after {(time.monotonic() - t0) * 1000:.1f} ms")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        pairs = dict(word.split("=", 1) for word in shlex.split(r.stdout))
        self.assertEqual(set(pairs), {"PULSAR_URL", "PULSAR_HTTP_URL", "KAFKA_BOOTSTRAP", "AMQP_URL", "MAGNETAR_PID",
                                      "MAGNETAR_DATA_DIR"})
        self.assertEqual(len(r.stdout.splitlines()), len(pairs))
        pid = int(pairs["MAGNETAR_PID"])
        try:
            self.assertFalse(process_gone(pid))
            self.assertEqual(os.path.dirname(pairs["MAGNETAR_DATA_DIR"]), tmp)
            self.assertTrue(os.path.isdir(pairs["MAGNETAR_DATA_DIR"]))
            # What a shell makes of the lines is what they say.
            shell = subprocess.run(["bash", "-c", 'set -a; eval "$1"; set +a; env', "-", r.stdout],
                                   capture_output=True, text=True, timeout=30)
            self.assertEqual(shell.returncode, 0, shell.stderr)
            exported = dict(line.split("=", 1) for line in shell.stdout.splitlines() if "=" in line)
            for key, value in pairs.items():
                self.assertEqual(exported.get(key), value, key)

            self.assertEqual(health(pairs["PULSAR_HTTP_URL"]), (200, b"ok"))
            pulsar_round_trip(self, pairs["PULSAR_URL"], "env-pulsar")
            kafka_round_trip(self, pairs["KAFKA_BOOTSTRAP"], "env-kafka")
            amqp_round_trip(self, pairs["AMQP_URL"], "env-amqp")
        finally:
            os.kill(pid, signal.SIGTERM)
        self.assertTrue(wait_gone(pid), "the node did not exit after SIGTERM")
        self.assertEqual(os.listdir(tmp), [])

    def test_print_env_passes_on_a_start_failure(self):
        # Every port given is taken: the node cannot start and says why.
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            r = subprocess.run([BIN, "start", "--ephemeral", "--print-env", "--http-port", str(port)],
                               capture_output=True, text=True, env=self.env, timeout=TIMEOUT_S)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertIn("cannot start", r.stderr)
        self.assertEqual(self.left_in_tmp(), [])

    def test_given_ports_are_kept_and_the_ports_file_lives_as_long_as_the_node(self):
        http_port = free_port()
        ports_file = os.path.join(tempfile.gettempdir(), f"ephemeral-test-ports-{uuid.uuid4().hex}.json")
        proc, ready, _ = self.start("--http-port", str(http_port), "--kafka-port", "off", "--ports-file", ports_file)
        try:
            self.assertEqual(ready["ports"]["http"], http_port)
            self.assertEqual(ready["ports"]["kafka"], 0)
            self.assertNotIn("kafkaBootstrap", ready)
            with open(ports_file) as f:
                self.assertEqual(json.load(f), ready["ports"])
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(TIMEOUT_S), 0)
            self.assertFalse(os.path.exists(ports_file))
            self.assertEqual(self.left_in_tmp(), [])
        finally:
            if os.path.exists(ports_file):
                os.unlink(ports_file)

    def test_flags_it_cannot_honour_are_refused_with_a_reason(self):
        config = os.path.join(self.tmp, "magnetar.toml")
        with open(config, "w") as f:
            f.write('data-dir = "/var/lib/magnetar"\n')
        cases = [
            (["start", "--ephemeral", "--data-dir", "/tmp/somewhere"], "--data-dir"),
            (["standalone", "--ephemeral", "--data-dir", "/tmp/somewhere"], "--data-dir"),
            (["start", "--ephemeral", "--config", config], "--data-dir"),
            (["start", "--ephemeral", "--cluster-port", "6660"], "--cluster-port"),
            (["start", "--ephemeral", "--join", "127.0.0.1:6660"], "--join"),
            (["start", "--ephemeral", "--cluster-secret-file", "/etc/magnetar/cluster.key"], "--cluster-secret-file"),
            (["start", "--ephemeral", "--fsync", "always"], "--fsync"),
            (["start", "--print-env"], "--print-env needs --ephemeral"),
        ]
        for args, what in cases:
            r = subprocess.run([BIN, *args], capture_output=True, text=True, env=self.env, timeout=30)
            self.assertEqual(r.returncode, 2, args)
            self.assertEqual(r.stdout, "", args)
            lines = [line for line in r.stderr.splitlines() if line.strip()]
            self.assertEqual(len(lines), 1, (args, r.stderr))
            self.assertTrue(lines[0].startswith("magnetar: "), lines[0])
            self.assertIn(what, lines[0])
        self.assertEqual(self.left_in_tmp(), ["magnetar.toml"])

    def test_help_and_bash_completion_offer_the_flags(self):
        r = subprocess.run([BIN, "start", "--help"], capture_output=True, text=True, timeout=30)
        for flag in ("--ephemeral", "--print-env", "--ports-file", "PULSAR_URL", "KAFKA_BOOTSTRAP", "AMQP_URL",
                     "MAGNETAR_PID", "nothing ever synced"):
            self.assertIn(flag, r.stdout)
        script = os.path.join(ROOT, "packaging", "magnetar.bash-completion")
        probe = ('source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(( $# - 1 )); _magnetar; '
                 'printf "%s\\n" "${COMPREPLY[@]}"')
        for command in ("start", "standalone"):
            r = subprocess.run(["bash", "-c", probe, script, BIN, command, "--eph"], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.stdout.split(), ["--ephemeral"], command)

    def test_without_tmpdir_the_directory_is_under_tmp(self):
        env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
        proc, ready, _ = self.start(env=env)
        self.assertEqual(os.path.dirname(ready["dataDir"]), "/tmp")
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(TIMEOUT_S), 0)
        self.assertFalse(os.path.exists(ready["dataDir"]))

    def test_the_example_application_suite_passes_and_leaves_nothing(self):
        env = dict(self.env, MAGNETAR=os.path.abspath(BIN), PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run(["/usr/bin/python3", "-m", "unittest", "-v", "test_orders.py"], capture_output=True,
                           text=True, env=env, timeout=120, cwd=os.path.join(ROOT, "examples", "app-tests"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("OK", r.stderr)
        self.assertEqual(self.left_in_tmp(), [])
        self.assertEqual(processes_started_with(f"TMPDIR={self.tmp}"), [])

if __name__ == "__main__":
    unittest.main(verbosity=2)
