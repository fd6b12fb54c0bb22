#!/usr/bin/env python3
"""Publish latency with each protocol's durable acknowledgement, one message
in flight, by stage, against the disk alone.

A fresh node (fsync always) per protocol; N messages of 1 KiB sent one at a
time, each waiting for its acknowledgement:

  kafka  confluent-kafka (librdkafka) producer, acks=all, linger.ms=0,
         flush() after each produce
  amqp   pika, publisher confirms on a durable queue, persistent messages

Printed per protocol: the client's round trip (p50, p99, max), the node's
magnetar_publish_stage_seconds{protocol} for the same publishes (broker:
everything but storage; storage: the journal until the completion ran),
and `magnetar perf disk` at the rate the client reached with one write per
message: what a bare group commit gives the same stream.

    bench/acks_latency.py [--build build] [--messages 3000] [--json]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import magnetar_harness  # noqa: E402
from magnetar_harness import Node  # noqa: E402
from latency_sweep import diffed, figures_of, metrics_text, raw_disk  # noqa: E402


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def kafka_round_trips(node, n, payload):
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{node.ports['kafka']}", "acks": "all", "linger.ms": 0,
                     "enable.idempotence": False})
    p.produce("acks", payload)  # makes the topic: its metadata is not what is measured
    if p.flush(30) != 0:
        raise RuntimeError("kafka: the first produce was not acknowledged")
    failed = []
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        p.produce("acks", payload, on_delivery=lambda err, msg: failed.append(err) if err else None)
        if p.flush(30) != 0:
            raise RuntimeError("kafka: a produce was not acknowledged in 30 s")
        out.append((time.perf_counter() - t0) * 1000)
    if failed:
        raise RuntimeError(f"kafka: {len(failed)} produces failed: {failed[0]}")
    return out


def amqp_round_trips(node, n, payload):
    import pika
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.ports["amqp"]))
    try:
        ch = conn.channel()
        ch.queue_declare("acks", durable=True)
        ch.confirm_delivery()
        props = pika.BasicProperties(delivery_mode=2)
        ch.basic_publish("", "acks", payload, props)
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            ch.basic_publish("", "acks", payload, props)  # returns once confirmed
            out.append((time.perf_counter() - t0) * 1000)
        return out
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--messages", type=int, default=3000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    payload = b"m" * 1024
    rows = []
    for protocol, run in (("kafka", kafka_round_trips), ("amqp", amqp_round_trips)):
        data_dir = tempfile.mkdtemp(prefix="magnetar-acks-")
        node = Node("--fsync", "always", "--log-level", "warn", data_dir=data_dir).start()
        try:
            before = metrics_text(node)
            t0 = time.monotonic()
            trips = run(node, args.messages, payload)
            secs = time.monotonic() - t0
            after = metrics_text(node)
            stages = {}
            for labels, buckets in diffed(before, after, "magnetar_publish_stage_seconds").items():
                d = dict(labels)
                if d.get("protocol") == protocol:
                    stages[d["stage"]] = figures_of(buckets, with_max=True)
            disk = raw_disk(args.build, node.data_dir, len(payload), len(payload) * args.messages / secs,
                            max(1.0, min(secs, 10.0)))
        finally:
            node.stop(timeout=30)
            node.close()
            shutil.rmtree(data_dir, ignore_errors=True)
        row = {"protocol": protocol, "messages": args.messages, "msgs_per_s": args.messages / secs,
               "client_ms": {"p50": pct(trips, 0.5), "p99": pct(trips, 0.99), "max": max(trips)},
               "stages_ms": stages, "disk_ms": disk["write_to_durable_ms"]}
        rows.append(row)
        if not args.json:
            c, d = row["client_ms"], row["disk_ms"]
            print(f"{protocol:>5}: {row['msgs_per_s']:,.0f} msg/s one at a time; client round trip p50 {c['p50']:.3f} "
                  f"p99 {c['p99']:.3f} max {c['max']:.3f} ms")
            for name in ("broker", "storage", "total"):
                s = stages.get(name)
                if s:
                    print(f"       node {name:<8} p50 {s['p50']:.3f} p99 {s['p99']:.3f} max {s['max']:.3f} ms "
                          f"({int(s['count'])} publishes)")
            print(f"       disk alone     p50 {d['p50']:.3f} p99 {d['p99']:.3f} max {d['max']:.3f} ms "
                  f"(1 KiB writes at the same rate, write -> durable)")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
