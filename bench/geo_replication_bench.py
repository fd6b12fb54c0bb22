#!/usr/bin/env python3
"""Geo-replication between two nodes on one box, as docs/benchmarks.md
reports it.

Two standalone nodes, clusters a and b, on loopback. Messages of --size
bytes from `magnetar perf produce` (our client, batching as Pulsar clients
do). Measured in one run:

  baseline   local produce throughput on a, before replication is set up
  live       the same produce to a topic replicated to b: the producer's
             throughput, and the replication throughput, messages over the
             time from the first send until b acknowledged the last
  catch-up   a backlog of the same size built on a while b is down, then
             b started: messages over the time until b acknowledged the last
             (the replicator alone)
  delay      `magnetar perf consume` on b while a takes --rate msg/s for
             --seconds: end-to-end latency from the publish on a to the
             receive on b (same clock), p50/p99

Replication throughputs are printed as ratios to the baseline.

    bench/geo_replication_bench.py [--build build] [--messages 200000] [--size 1024]
                                   [--rate 5000] [--seconds 20] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import magnetar_harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--messages", type=int, default=200000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=float, default=5000)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    binary = os.path.join(args.build, "magnetar")
    magnetar_harness.BIN = binary
    sys.path.insert(0, os.path.join(args.build, "python"))  # pulsar_api_pb2, which the test helpers use
    import test_geo_replication as geo  # after BIN is set: its nodes use it

    def perf(*cmd):
        out = subprocess.run([binary, "perf", *cmd, "--json"], capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"perf {cmd} failed: {out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def produce(site, topic, **kw):
        extra = [f"--{k}={v}" for k, v in kw.items()]
        return perf("produce", "--url", f"pulsar://127.0.0.1:{site.pulsar_port}", "--size", str(args.size),
                    "--disk-dir", "", *extra, topic)

    def caught_up_at(site, topic, deadline_s=600):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            r = site.replication(topic, "b")
            if r is not None and r["connected"] and r["replicationBacklog"] == 0:
                return time.monotonic()
            time.sleep(0.05)
        raise TimeoutError(f"{topic} did not catch up")

    a = geo.Site("a").start()
    b = geo.Site("b").start()
    result = {"messages": args.messages, "size": args.size}
    try:
        base = produce(a, "baseline", messages=args.messages)
        result["baseline_msgs_per_s"] = base["produce_msgs_per_s"]
        geo.link(a, b)

        start = time.monotonic()
        live = produce(a, "live", messages=args.messages)
        done = caught_up_at(a, "live")
        result["live_produce_msgs_per_s"] = live["produce_msgs_per_s"]
        result["live_replication_msgs_per_s"] = args.messages / (done - start)

        produce(a, "backlog", messages=10)
        caught_up_at(a, "backlog")
        b.node.stop()
        produce(a, "backlog", messages=args.messages)
        start = time.monotonic()
        b.start()
        done = caught_up_at(a, "backlog")
        result["catch_up_msgs_per_s"] = args.messages / (done - start)

        consume = subprocess.Popen([binary, "perf", "consume", "--url", f"pulsar://127.0.0.1:{b.pulsar_port}",
                                    "--time", str(args.seconds + 5), "--json", "steady"],
                                   stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        steady = produce(a, "steady", rate=args.rate, time=args.seconds)
        out, _ = consume.communicate(timeout=args.seconds + 60)
        result["delay_produced"] = steady["messages"]
        lat = json.loads(out.strip().splitlines()[-1])
        result["delay_rate"] = args.rate
        result["delay_received"] = lat["received"]
        result["delay_p50_ms"] = lat["end_to_end_latency_ms"]["p50"]
        result["delay_p99_ms"] = lat["end_to_end_latency_ms"]["p99"]
        local = subprocess.Popen([binary, "perf", "consume", "--url", f"pulsar://127.0.0.1:{a.pulsar_port}",
                                  "--time", str(args.seconds + 5), "--json", "steady-local"],
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        produce(a, "steady-local", rate=args.rate, time=args.seconds)
        out, _ = local.communicate(timeout=args.seconds + 60)
        lat = json.loads(out.strip().splitlines()[-1])
        result["local_p50_ms"] = lat["end_to_end_latency_ms"]["p50"]
        result["local_p99_ms"] = lat["end_to_end_latency_ms"]["p99"]
    finally:
        for s in (a, b):
            s.node.stop()
            s.node.close()

    base = result["baseline_msgs_per_s"]
    result["live_replication_ratio"] = result["live_replication_msgs_per_s"] / base
    result["catch_up_ratio"] = result["catch_up_msgs_per_s"] / base
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.messages} messages of {args.size} B, two nodes on one box")
    print(f"baseline local produce     {base:12.0f} msg/s")
    print(f"produce while replicating  {result['live_produce_msgs_per_s']:12.0f} msg/s")
    print(f"replication (live)         {result['live_replication_msgs_per_s']:12.0f} msg/s  "
          f"ratio {result['live_replication_ratio']:.2f}")
    print(f"replication (catch-up)     {result['catch_up_msgs_per_s']:12.0f} msg/s  "
          f"ratio {result['catch_up_ratio']:.2f}")
    print(f"delay at {args.rate:.0f} msg/s: a->b p50 {result['delay_p50_ms']:.1f} ms, p99 "
          f"{result['delay_p99_ms']:.1f} ms (local produce->consume p50 {result['local_p50_ms']:.1f} ms, "
          f"p99 {result['local_p99_ms']:.1f} ms; {result['delay_received']} of {result['delay_produced']} "
          "received on b)")


if __name__ == "__main__":
    main()
