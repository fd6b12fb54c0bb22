#!/usr/bin/env python3
"""What a cluster costs and how fast it heals, against one standalone node
measured in the same run, as docs/benchmarks.md reports it.

  1. Metadata writes through the admin REST API (each is a namespace
     created: reads and one compare-and-set in the metadata store), one at a
     time: per second and p50/p99 latency on a standalone node, then on a
     3-member cluster through the Raft leader and through a follower (which
     forwards to the leader over the cluster port).
  2. Failover: a writer keeps creating namespaces through a follower; the
     leader is killed with SIGKILL; the time from the kill to the next
     acknowledged write (election plus the retry). Repeated --failovers
     times, the killed member restarted between trials.
  3. Produce throughput (`magnetar perf produce`, 1 KiB, fsync always): one
     producer per member, each on a topic that member owns, all at once,
     against the same number of producers on one standalone node. Then one
     producer alone, as fast as it goes: its msg/s and publish p99 with each
     entry on 3 members (acknowledged at 2) against 1 copy on a standalone
     node.
  4. AMQP through the member that owns a queue and through another member
     (which forwards over the cluster port), with pika: publishes with
     confirms one at a time (per second, p50/p99), then consuming what they
     stored with prefetch 200 and an ack per message (per second).

    bench/cluster_bench.py [--build build] [--writes 300] [--failovers 3] [--secs 8] [--amqp 3000] [--json]

Everything runs on this one machine, so the members share its cores and
disk: the produce ratio says what three processes on one box give, not
what three machines would.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "utils"))
import magnetar_harness  # noqa: E402
from magnetar_harness import Node, call_json, free_port  # noqa: E402


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


def timed_writes(node, tenant, count):
    status, answer = call_json(node, "PUT", f"/admin/v2/tenants/{tenant}",
                               {"allowedClusters": ["standalone"], "adminRoles": []})
    assert status == 204, answer
    latencies = []
    started = time.monotonic()
    for i in range(count):
        t0 = time.monotonic()
        status, answer = call_json(node, "PUT", f"/admin/v2/namespaces/{tenant}/ns{i}", {})
        assert status == 204, answer
        latencies.append(time.monotonic() - t0)
    elapsed = time.monotonic() - started
    return {"per_second": count / elapsed, "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000}


class Cluster:
    def __init__(self, root, size):
        self.root = root
        self.secret = os.path.join(root, "cluster.key")
        subprocess.run([magnetar_harness.BIN, "cluster", "create-secret", "--output", self.secret], check=True,
                       capture_output=True)
        self.members = []
        for i in range(size):
            port = free_port()
            args = ["--cluster-port", str(port), "--cluster-secret-file", self.secret, "--reactors", "1"]
            if self.members:
                args += ["--join", f"127.0.0.1:{self.members[0].cluster_port}"]
            node = Node(*args, data_dir=tempfile.mkdtemp(dir=root), command="start")
            node.cluster_port = port
            node.start()
            self.members.append(node)
        self.wait(lambda nodes: len(nodes) == size and all(n["alive"] and n["raftRole"] == "voter" for n in nodes))

    def nodes(self, via=None):
        for node in ([via] if via else []) + [m for m in self.members if m.proc.poll() is None]:
            try:
                status, nodes = call_json(node, "GET", "/admin/v2/cluster/nodes")
                if status == 200:
                    return nodes
            except OSError:
                continue
        return []

    def wait(self, check, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(self.nodes()):
                return
            time.sleep(0.1)
        raise TimeoutError("the cluster did not settle")

    def member_of(self, node_json):
        return [m for m in self.members if m.http_url == node_json["httpUrl"]][0]

    def leader(self):
        return self.member_of([n for n in self.nodes() if n["leader"]][0])

    def close(self):
        for m in self.members:
            m.close()


def failover_trial(cluster, trial):
    leader = cluster.leader()
    follower = [m for m in cluster.members if m is not leader][0]
    tenant = f"failover{trial}"
    status, answer = call_json(follower, "PUT", f"/admin/v2/tenants/{tenant}",
                               {"allowedClusters": ["standalone"], "adminRoles": []})
    assert status == 204, answer
    acknowledged = []
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            try:
                status, _ = call_json(follower, "PUT", f"/admin/v2/namespaces/{tenant}/n{i}", {})
            except OSError:
                status = 0
            if status == 204:
                acknowledged.append(time.monotonic())
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    time.sleep(1.0)
    killed_at = time.monotonic()
    leader.stop(sig=signal.SIGKILL)
    deadline = killed_at + 60
    while time.monotonic() < deadline and not any(t > killed_at for t in acknowledged):
        time.sleep(0.005)
    stop.set()
    thread.join(timeout=60)
    after = [t for t in acknowledged if t > killed_at]
    recovered_ms = (after[0] - killed_at) * 1000 if after else float("nan")
    leader.start()  # catches up from the others before the next trial
    cluster.wait(lambda nodes: len(nodes) == len(cluster.members) and all(n["alive"] for n in nodes))
    return recovered_ms


def owned_topics(cluster):
    """One topic per member, each owned by that member (found by lookup)."""
    chosen = {}
    for i in range(200):
        name = f"perf-{i}"
        status, lookup = call_json(cluster.members[0], "GET", f"/lookup/v2/topic/persistent/public/default/{name}")
        if status != 200:
            continue
        for m in cluster.members:
            if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}") and m.http_url not in chosen:
                chosen[m.http_url] = (m, name)
        if len(chosen) == len(cluster.members):
            break
    return list(chosen.values())


def perf_one(node, topic, secs):
    """One producer as fast as it goes: (msg/s, publish p99 ms)."""
    run = subprocess.run([magnetar_harness.BIN, "perf", "produce", topic, "--url",
                          f"pulsar://127.0.0.1:{node.ports['pulsar']}", "-t", str(secs), "--json"],
                         capture_output=True, text=True, timeout=secs + 120)
    out = run.stdout
    if not out.strip().startswith("{"):
        print(f"perf produce {topic} failed: {run.stderr.strip()[-2000:]}", file=sys.stderr)
        return float("nan"), float("nan")
    j = json.loads(out)
    return j["produce_msgs_per_s"], j["publish_latency_ms"]["p99"]


def striped_one_producer(cluster, secs):
    """One producer through its owner on a namespace striped 3/2/2: each
    entry on two of the three members, in turn."""
    first = cluster.members[0]
    status, answer = call_json(first, "PUT", "/admin/v2/namespaces/public/striped", {})
    assert status in (204, 409), answer
    status, answer = call_json(first, "POST", "/admin/v2/namespaces/public/striped/persistence",
                               {"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 2})
    assert status == 204, answer
    status, lookup = call_json(first, "GET", "/lookup/v2/topic/persistent/public/striped/perf-striped")
    assert status == 200, lookup
    owner = [m for m in cluster.members if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}")][0]
    return perf_one(owner, "persistent://public/striped/perf-striped", secs)


def perf_all(pairs, secs):
    procs = [subprocess.Popen([magnetar_harness.BIN, "perf", "produce", topic, "--url",
                               f"pulsar://127.0.0.1:{node.ports['pulsar']}", "-t", str(secs), "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for node, topic in pairs]
    total = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=secs + 120)
        total += json.loads(out)["produce_msgs_per_s"] if out.strip().startswith("{") else 0.0
    return total


def amqp_paths(cluster, count):
    """Publish and consume rates of one queue through its owner and through
    another member."""
    import pika
    owner = None
    for i in range(200):
        queue = f"amqp-bench-{i}"
        status, lookup = call_json(cluster.members[0], "GET", f"/lookup/v2/topic/persistent/public/default/{queue}")
        if status == 200:
            owner = [m for m in cluster.members if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}")][0]
            break
    other = [m for m in cluster.members if m is not owner][0]
    body = b"x" * 1024
    results = {}
    for label, node in (("owner", owner), ("other", other)):
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.ports["amqp"]))
        ch = conn.channel()
        ch.queue_declare(f"{queue}-{label}", durable=True)
        ch.confirm_delivery()
        latencies = []
        started = time.monotonic()
        for _ in range(count):
            t0 = time.monotonic()
            ch.basic_publish("", f"{queue}-{label}", body)
            latencies.append(time.monotonic() - t0)
        publish_s = time.monotonic() - started
        got = 0
        ch.basic_qos(prefetch_count=200)
        started = time.monotonic()
        for method, _, _ in ch.consume(f"{queue}-{label}", inactivity_timeout=30):
            if method is None:
                break
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got == count:
                break
        consume_s = time.monotonic() - started
        ch.cancel()
        conn.close()
        results[label] = {"publish_per_second": count / publish_s, "publish_p50_ms": percentile(latencies, 0.5) * 1000,
                          "publish_p99_ms": percentile(latencies, 0.99) * 1000,
                          "consume_per_second": got / consume_s, "consumed": got}
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--secs", type=float, default=8)
    parser.add_argument("--amqp", type=int, default=3000, help="messages per AMQP path")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    root = tempfile.mkdtemp(prefix="magnetar-cluster-bench-")
    results = {}
    say = (lambda *a: None) if args.json else (lambda *a: print(*a, flush=True))
    try:
        say(f"metadata writes: {args.writes} namespaces, one at a time")
        alone = Node("--reactors", "1", data_dir=tempfile.mkdtemp(dir=root)).start()
        try:
            results["standalone_writes"] = timed_writes(alone, "bench", args.writes)
            say(f"  standalone       {results['standalone_writes']}")
            results["standalone_produce"] = perf_all([(alone, f"perf-{i}") for i in range(3)], args.secs)
            results["standalone_one_producer"] = perf_one(alone, "perf-one", args.secs)
        finally:
            alone.stop()
            alone.close()
        cluster = Cluster(root, 3)
        try:
            leader = cluster.leader()
            follower = [m for m in cluster.members if m is not leader][0]
            results["leader_writes"] = timed_writes(leader, "vialeader", args.writes)
            say(f"  cluster, leader  {results['leader_writes']}")
            results["follower_writes"] = timed_writes(follower, "viafollower", args.writes)
            say(f"  cluster, follower {results['follower_writes']}")
            pairs = owned_topics(cluster)
            results["cluster_produce"] = perf_all(pairs, args.secs) if len(pairs) == 3 else float("nan")
            say(f"produce, 3 producers: standalone {results['standalone_produce']:.0f} msg/s, "
                f"3 members {results['cluster_produce']:.0f} msg/s "
                f"(ratio {results['cluster_produce'] / results['standalone_produce']:.2f})")
            if pairs:
                member, topic = pairs[0]
                results["cluster_one_producer"] = perf_one(member, topic, args.secs)
                (a_rate, a_p99), (c_rate, c_p99) = results["standalone_one_producer"], results["cluster_one_producer"]
                say(f"produce, 1 producer: standalone (1 copy) {a_rate:.0f} msg/s p99 {a_p99:.2f} ms; "
                    f"3 members (3 copies, acked at 2) {c_rate:.0f} msg/s p99 {c_p99:.2f} ms "
                    f"(rate ratio {c_rate / a_rate:.2f})")
                results["cluster_striped_one_producer"] = striped_one_producer(cluster, args.secs)
                s_rate, s_p99 = results["cluster_striped_one_producer"]
                say(f"produce, 1 producer, striped: 3 members (ensemble 3, 2 copies, acked at 2) {s_rate:.0f} msg/s "
                    f"p99 {s_p99:.2f} ms (rate ratio {s_rate / a_rate:.2f} vs standalone, "
                    f"{s_rate / c_rate:.2f} vs 3 copies)")
            if args.amqp > 0:
                amqp = amqp_paths(cluster, args.amqp)
                results["amqp"] = amqp
                for label in ("owner", "other"):
                    a = amqp[label]
                    say(f"amqp through the {label:5}: publish (confirmed, one at a time) "
                        f"{a['publish_per_second']:.0f}/s p50 {a['publish_p50_ms']:.2f} ms "
                        f"p99 {a['publish_p99_ms']:.2f} ms; consume {a['consume_per_second']:.0f}/s")
                say(f"amqp through another member vs the owner: publish "
                    f"{amqp['other']['publish_per_second'] / amqp['owner']['publish_per_second']:.2f}, consume "
                    f"{amqp['other']['consume_per_second'] / amqp['owner']['consume_per_second']:.2f}")
            trials = []
            for trial in range(args.failovers):
                trials.append(failover_trial(cluster, trial))
                say(f"failover {trial + 1}: next acknowledged write {trials[-1]:.0f} ms after kill -9 of the leader")
            results["failover_ms"] = trials
        finally:
            cluster.close()
        ratio = {k: results[f"{k}_writes"]["per_second"] / results["standalone_writes"]["per_second"]
                 for k in ("leader", "follower")}
        results["write_rate_ratio_vs_standalone"] = ratio
        say(f"write rate vs standalone: leader {ratio['leader']:.2f}, follower {ratio['follower']:.2f}")
        if args.json:
            print(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
