"""Clusters of real magnetar processes for the fault tests.

`Cluster` starts members with `magnetar start --cluster-port` on loopback, or,
given a `Network`, each in a network namespace of its own on a bridge, so that
links between members can be cut. Every wait is bounded.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from magnetar_harness import BIN, Node, free_port, json_answer

WAIT_S = 30.0


def wait_for(check, what, timeout=WAIT_S, interval=0.1):
    """Calls `check` until it returns something true (returned) or `timeout`
    passes (AssertionError naming `what` and the last answer)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except (OSError, ValueError) as e:  # a node restarting or cut off
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def make_secret(directory):
    path = os.path.join(directory, "cluster.key")
    r = subprocess.run([BIN, "cluster", "create-secret", "--output", path], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return path


def request(node, method, path, body=None, timeout=10.0):
    """(status, parsed JSON or text or None); raises OSError when the node
    does not answer within `timeout` (a paused or cut-off member)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(node.http_url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    return json_answer(status, raw)


def nodes_of(node, timeout=10.0):
    status, nodes = request(node, "GET", "/admin/v2/cluster/nodes", timeout=timeout)
    if status != 200:
        raise ValueError(f"GET /admin/v2/cluster/nodes answered {status}: {nodes}")
    return nodes


def leader_id(node):
    leaders = [n["id"] for n in nodes_of(node) if n["leader"]]
    return leaders[0] if leaders else None


def member_id(node):
    """This member's own id, as it reports itself."""
    me = [n for n in nodes_of(node) if n.get("httpUrl") == node.http_url]
    if len(me) != 1:
        raise ValueError(f"{node.http_url} is not among its own members")
    return me[0]["id"]


def applied_index(node):
    return [n for n in nodes_of(node) if n.get("httpUrl") == node.http_url][0]["appliedIndex"]


def create_tenant(node, tenant, timeout=20.0):
    """A tenant that allows no cluster: its creation is one create-only
    metadata write with no read before it. (status, answer)."""
    return request(node, "PUT", f"/admin/v2/tenants/{tenant}", {"allowedClusters": [], "adminRoles": []},
                   timeout=timeout)


def tenants_of(node):
    status, tenants = request(node, "GET", "/admin/v2/tenants")
    if status != 200:
        raise ValueError(f"GET /admin/v2/tenants answered {status}: {tenants}")
    return tenants


def kafka_bootstrap(members):
    """bootstrap.servers naming every running member's Kafka listener."""
    return ",".join(f"127.0.0.1:{m.ports['kafka']}" for m in members if m.proc.poll() is None)


def kafka_owner(members, topic):
    """The member that leads partition 0 of `topic` (the owner of its bundle), as
    `members[0]` looks it up."""
    def find():
        status, lookup = request(members[0], "GET", f"/lookup/v2/topic/persistent/public/default/{topic}")
        if status != 200:
            return None
        found = [n for n in members if lookup["brokerUrl"].endswith(f":{n.ports['pulsar']}")]
        return found[0] if found else None
    return wait_for(find, f"an owner for {topic}")


def kafka_produce(members, topic, values, timeout=90, **config):
    """Sends `values` (str) with acks=all through `members` with confluent-
    kafka (more producer settings in `config`); returns (acknowledged values,
    errors), once every value has its answer."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": kafka_bootstrap(members), "acks": "all", "linger.ms": 2,
                         "message.timeout.ms": 60000, **config})
    acked, errors = [], []

    def report(err, msg):
        (errors if err else acked).append(err or msg.value().decode())
    for v in values:
        producer.produce(topic, v.encode(), on_delivery=report)
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"{left} messages still unanswered"
    return acked, errors


def kafka_consume_all(members, topic, expected, timeout=90, distinct=False):
    """Reads partition 0 of `topic` from the start until `expected` values
    (distinct ones when `distinct`: a producer that retried may have stored
    some twice) arrived; returns them in order."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(members), "group.id": "check",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        def done():
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value().decode())
            return len(set(got) if distinct else got) >= expected
        wait_for(done, f"{expected} messages from {topic}", timeout=timeout, interval=0)
    finally:
        consumer.close()
    return got


class Member(Node):
    """A cluster member; `host` is the address it binds and advertises, and
    `netns` the network namespace it runs in (None: this one)."""

    def __init__(self, *args, host="127.0.0.1", netns=None, **kw):
        super().__init__(*args, **kw)
        self.host = host
        self.netns = netns

    @property
    def http_url(self):
        return f"http://{self.host}:{self.ports['http']}"

    def launch_prefix(self):
        # `ip netns exec` enters the namespace and execs the binary, so the
        # process left is magnetar itself and signals reach it directly.
        return ["ip", "netns", "exec", self.netns] if self.netns else []

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)  # a paused member must be able to die
            except ProcessLookupError:
                pass
        super().close()


class Cluster:
    """Members started with `magnetar start --cluster-port`, each with its
    own data directory under `directory`. On loopback each member gets a
    free cluster port (fixed across its restarts: members know each other
    by address); in a `Network` every member has an address of its own and
    the same cluster port."""

    def __init__(self, directory, secret, network=None):
        self.directory = directory
        self.secret = secret
        self.network = network
        self.members = []

    def add(self, join=None, extra=()):
        index = len(self.members)
        data_dir = os.path.join(self.directory, f"member{index}")
        os.makedirs(data_dir)
        if self.network is None:
            host, netns, port = "127.0.0.1", None, free_port()
        else:
            host, netns, port = self.network.address(index), self.network.namespace(index), 6660
        args = ["--cluster-port", str(port), "--cluster-secret-file", self.secret, "--reactors", "1",
                "--bind", host]
        if join:
            args += ["--join", ",".join(join)]
        args += list(extra)
        node = Member(*args, data_dir=data_dir, command="start", host=host, netns=netns)
        node.cluster_port = port
        self.members.append(node)
        node.start()
        node.id = wait_for(lambda: member_id(node), "the member to know its own id")
        # A restart keeps its identity and finds the others in its log: no --join.
        node.extra_args = [a for a in node.extra_args if a != "--join" and a != ",".join(join or [])]
        return node

    def seed(self):
        first = self.members[0]
        return [f"{first.host}:{first.cluster_port}"]

    def member(self, node_id):
        return [n for n in self.members if n.id == node_id][0]

    def leader(self, among=None, timeout=WAIT_S, other_than=()):
        """The member that every one of `among` (default: all) names as the
        leader, once they agree on one that is not in `other_than` (each
        member refreshes its view every second)."""
        among = among or self.members
        excluded = {n.id for n in other_than}

        def agreed():
            ids = {leader_id(n) for n in among}
            return ids.pop() if len(ids) == 1 and not ids & ({None} | excluded) else None
        return self.member(wait_for(agreed, "members agreeing on a leader", timeout=timeout))

    def close(self):
        for node in self.members:
            node.close()


class ClusterCase(unittest.TestCase):
    """A test case with a fresh `Cluster` (on loopback) per test, in a
    directory of its own that is removed after it."""
    prefix = "magnetar-cluster-"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self.prefix)
        self.cluster = Cluster(self.dir, make_secret(self.dir))

    def tearDown(self):
        self.cluster.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def add_members(self, count, extra=()):
        """Founds the cluster and joins count - 1 more members through the
        first, each started with `extra` arguments too."""
        self.cluster.add(extra=extra)
        for _ in range(count - 1):
            self.cluster.add(join=self.cluster.seed(), extra=extra)
        return list(self.cluster.members)


# ---- network namespaces ----

_LOCK = "/tmp/magnetar-netns.lock"
_NAME = re.compile(r"^mf(\d+)[a-z]")


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def remove_stale_networks():
    """Namespaces and links left by a run that was killed (named after the
    test process's pid, which no longer exists)."""
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        m = _NAME.match(name)
        if m and not _alive(int(m.group(1))):
            # Members that run there were started by that run: they go with it.
            for pid in _ip("netns", "pids", name, check=False).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", name, check=False)
    for line in _ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        m = _NAME.match(name)
        if m and not _alive(int(m.group(1))):
            _ip("link", "del", name, check=False)


class Network:
    """A bridge in this namespace (address .254, so the tests reach every
    member) and one namespace per member with a veth into it, on a /24 of
    10.77.0.0/16 that no other run holds. Names start with "mf<pid>", so
    that a run that was killed is cleaned up by the next one.

    Links are cut by dropping a sender's packets where they arrive: an `ip
    rule` of type blackhole on the receiver, matching the sender's address
    and the veth they come in on, ahead of the local table (moved from
    preference 0 to 500 for that). This kernel has no netem and no tc
    actions (act_gact), and Debian's iptables/nft are not needed for it.
    A drop at the receiver is silent, as a broken cable: TCP retransmits
    and times out; a blackhole route at the sender would fail its sends at
    once instead. A cut one way is a drop at one receiver only; the test
    process always reaches every member through the bridge.
    """

    def __init__(self, size):
        self.size = size
        self.prefix = f"mf{os.getpid()}"
        self.bridge = self.prefix + "b"
        self.cuts = set()
        self.subnet = None
        self.made = False

    def namespace(self, i):
        return f"{self.prefix}n{i}"

    def address(self, i):
        return f"10.77.{self.subnet}.{i + 1}"

    def veth(self, i):
        return f"{self.prefix}h{i}"

    def inner(self, i):
        return f"{self.prefix}v{i}"

    def setup(self):
        if os.geteuid() != 0:
            raise RuntimeError("the partition tests make network namespaces and must run as root")
        with open(_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_stale_networks()
            used = set(int(m) for m in re.findall(r"inet 10\.77\.(\d+)\.", _ip("-o", "addr", "show")))
            free = [s for s in range(1, 255) if s not in used]
            if not free:
                raise RuntimeError("no free /24 in 10.77.0.0/16 for a test network")
            self.subnet = free[0]
            self.made = True
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"10.77.{self.subnet}.254/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        for i in range(self.size):
            ns = self.namespace(i)
            _ip("netns", "add", ns)
            _ip("link", "add", self.veth(i), "type", "veth", "peer", "name", self.inner(i))
            _ip("link", "set", self.inner(i), "netns", ns)
            _ip("link", "set", self.veth(i), "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", self.inner(i))
            _ip("-n", ns, "link", "set", self.inner(i), "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "rule", "add", "pref", "500", "lookup", "local")
            _ip("-n", ns, "rule", "del", "pref", "0")
        return self

    def _rule(self, action, frm, to):
        _ip("-n", self.namespace(to), "rule", action, "pref", str(100 + frm), "from", self.address(frm), "iif",
            self.inner(to), "blackhole")

    def cut_one_way(self, frm, to):
        """Packets from member `frm` to member `to` are dropped."""
        if (frm, to) not in self.cuts:
            self._rule("add", frm, to)
            self.cuts.add((frm, to))

    def cut(self, group_a, group_b):
        """Every link between a member of `group_a` and one of `group_b`, both ways."""
        for a in group_a:
            for b in group_b:
                self.cut_one_way(a, b)
                self.cut_one_way(b, a)

    def heal(self):
        for frm, to in sorted(self.cuts):
            self._rule("del", frm, to)
        self.cuts.clear()

    def teardown(self):
        if not self.made:
            return
        for i in range(self.size):
            # A namespace may outlive its name while the kernel still holds
            # sockets of it, and its veth pair with it: remove the pair first.
            _ip("link", "del", self.veth(i), check=False)
            _ip("netns", "del", self.namespace(i), check=False)
        _ip("link", "del", self.bridge, check=False)
        self.made = False


class NetworkClusterCase(unittest.TestCase):
    """A test case whose cluster's members each live in a network namespace
    of their own (`Network`); needs root, and fails, not skips, without it."""
    prefix = "magnetar-netns-"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self.prefix)
        self.network = None
        self.cluster = None

    def tearDown(self):
        if self.cluster:
            self.cluster.close()
        if self.network:
            self.network.teardown()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, count):
        """Founds a cluster of `count` members on a fresh network and waits
        until each sees min(count, 5) live voters."""
        import atexit
        self.network = Network(count)
        atexit.register(self.network.teardown)  # the test process dying before tearDown
        try:
            self.network.setup()
        except (RuntimeError, OSError) as e:
            self.fail(f"cannot make the test network (root, ip netns, veth and a bridge are needed): {e}")
        self.cluster = Cluster(self.dir, make_secret(self.dir), network=self.network)
        self.cluster.add()
        for _ in range(count - 1):
            self.cluster.add(join=self.cluster.seed())
        voters = min(count, 5)
        for node in self.cluster.members:
            wait_for(lambda: sum(n["raftRole"] == "voter" and n["alive"] for n in nodes_of(node)) == voters,
                     f"{node.http_url} seeing {voters} live voters", timeout=60)
        return list(self.cluster.members)

