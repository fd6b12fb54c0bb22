#!/usr/bin/env python3
"""Memory per idle topic, as docs/benchmarks.md reports it.

One node per phase. N persistent topics are made, each with one durable
subscription, by Pulsar SUBSCRIBE commands pipelined on one connection (a
window of 64 unanswered); every consumer is then closed, so the topics sit
loaded and idle. The node's resident memory is read at each tenth of N;
the bytes per topic are the slope between the half-way point and the end
(the metadata and index write buffers, which fill up early and stay at a
fixed size, fall out of it).

  loaded    topics stay loaded (--topic-idle-unload-secs 0)
  unloaded  idle topics leave memory (--topic-idle-unload-secs 5,
            housekeeping every second): memory once every topic left,
            and the ratio to the loaded run

    bench/many_topics.py [--build build] [--topics 100000] [--json]
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import magnetar_harness  # noqa: E402
from magnetar_harness import Node  # noqa: E402
from memory_watch import rss_bytes  # noqa: E402

WINDOW = 64


def start_node(*args):
    """A node on kernel-chosen ports with its own data directory, quiet logs
    and no fsync (the memory of idle topics is what is measured)."""
    return Node("--fsync", "never", "--log-level", "warn", *args).start()


def stop_node(node):
    node.stop(timeout=120)  # 100,000 topics take a while to close
    node.close()


def make_topics(node, n, progress):
    """N topics with a durable subscription each: (seconds, RSS samples as (topics, bytes))."""
    import pulsar_api_pb2 as pb
    from pulsar_wire import PulsarWire, command
    wire = PulsarWire(node.ports["pulsar"])
    wire.sock.settimeout(60)
    samples = [(0, rss_bytes(node.proc.pid))]
    started = time.monotonic()

    subs = []
    for i in range(n):
        subs.append(command("SUBSCRIBE", request_id=i + 1, topic="persistent://public/default/idle-%d" % i,
                            subscription="s", consumer_id=i + 1, subType=pb.CommandSubscribe.Exclusive,
                            initialPosition=pb.CommandSubscribe.Latest))

    def sample(done):
        samples.append((done, rss_bytes(node.proc.pid)))
        progress(done)
    sent = done = closes = 0

    def answer():
        """Reads one answer; counts it as a subscribe or a close."""
        nonlocal done, closes
        f = wire.next(None, timeout=60)
        if f.type == pb.BaseCommand.ERROR:
            raise SystemExit("subscribe refused: %s" % f.cmd.error.message)
        if f.type != pb.BaseCommand.SUCCESS:
            return
        if f.cmd.success.request_id > n:
            closes += 1
            return
        done += 1
        # Closed at once: the topic stays with its subscription and no consumer.
        wire.write(command("CLOSE_CONSUMER", consumer_id=f.cmd.success.request_id,
                           request_id=n + f.cmd.success.request_id))
        if done % max(1, n // 10) == 0:
            sample(done)
    while done < n:
        while sent < n and sent - done < WINDOW:
            wire.write(subs[sent])
            sent += 1
        answer()
    while closes < n:
        answer()
    elapsed = time.monotonic() - started
    wire.close()
    time.sleep(2)
    samples.append((n, rss_bytes(node.proc.pid)))
    return elapsed, samples


def per_topic(samples, n):
    half = min(samples, key=lambda s: abs(s[0] - n // 2))
    end = samples[-1]
    return (end[1] - half[1]) / max(1, end[0] - half[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--topics", type=int, default=100000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "python"))
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    n = args.topics
    out = {"topics": n}

    def progress(phase):
        return lambda done: None if args.json else print(f"  {phase}: {done}/{n} topics", file=sys.stderr,
                                                          flush=True)

    node = start_node("--topic-idle-unload-secs", "0")
    try:
        base = rss_bytes(node.proc.pid)
        secs, samples = make_topics(node, n, progress("loaded"))
        out["loaded"] = {"seconds": round(secs, 1), "topics_per_s": round(n / secs), "rss_start": base,
                         "rss_end": samples[-1][1], "bytes_per_topic": round(per_topic(samples, n))}
    finally:
        stop_node(node)

    node = start_node("--topic-idle-unload-secs", "5", "--housekeeping-secs", "1")
    try:
        base = rss_bytes(node.proc.pid)
        secs, samples = make_topics(node, n, progress("unloaded"))
        peak = samples[-1][1]
        deadline = time.monotonic() + 600
        while node.metric("magnetar_topics_unloaded_idle_total") < n and time.monotonic() < deadline:
            time.sleep(1)
        time.sleep(2)
        after = rss_bytes(node.proc.pid)
        out["unloaded"] = {"unloaded": int(node.metric("magnetar_topics_unloaded_idle_total")), "rss_start": base,
                           "rss_all_loaded": peak, "rss_after_unload": after,
                           "bytes_per_topic_after_unload": round((after - base) / n)}
    finally:
        stop_node(node)
    out["unloaded_to_loaded"] = round(out["unloaded"]["rss_after_unload"] / out["loaded"]["rss_end"], 3)

    if args.json:
        print(json.dumps(out, indent=2))
        return
    lo, un = out["loaded"], out["unloaded"]
    mb = lambda b: b / (1 << 20)
    print(f"{n} idle topics, one durable subscription each")
    print(f"  loaded:   {lo['topics_per_s']} topics/s made, RSS {mb(lo['rss_start']):.1f} -> {mb(lo['rss_end']):.1f} MiB,"
          f" {lo['bytes_per_topic']} bytes per loaded topic")
    print(f"  unloaded: {un['unloaded']} topics left memory, RSS {mb(un['rss_all_loaded']):.1f} -> "
          f"{mb(un['rss_after_unload']):.1f} MiB, {un['bytes_per_topic_after_unload']} bytes per topic left")
    print(f"  ratio unloaded/loaded RSS: {out['unloaded_to_loaded']}")


if __name__ == "__main__":
    main()
