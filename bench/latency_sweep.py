#!/usr/bin/env python3
"""Publish latency at a fraction of the maximum rate, and where it goes,
as docs/benchmarks.md reports it.

One fresh node (fsync always) per step, `magnetar perf produce` with 1 KiB
messages (our own client, batching 1 ms):

  1. as fast as it goes: the maximum rate;
  2. at each fraction of that maximum (default 10%, 25%, 50%): the client's
     publish latency percentiles, and from the node's /metrics the same
     publishes split into stages (magnetar_publish_stage_seconds: broker
     time, storage time; magnetar_storage_journal_stage_seconds: queue,
     write, sync, index update, completion), with the journal's own fdatasync times;
  3. right after each step, the disk alone: fdatasync after writes of the
     size the journal wrote per group commit in that step, at the rate it
     synced, in the same data directory (the disk's own p99 to compare with).

    bench/latency_sweep.py [--build build] [--secs 8] [--fractions 0.1,0.25,0.5] [--json]

Percentiles from the node's histograms are read from bucket bounds
(2^(1/4) apart): each is the upper bound of its bucket.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import magnetar_harness  # noqa: E402
from magnetar_harness import Node  # noqa: E402


def start_node(parent):
    """A fresh node (fsync always) whose data directory is under `parent`
    (None: the system's temporary directory)."""
    data_dir = tempfile.mkdtemp(prefix="magnetar-latency-", dir=parent)
    return Node("--fsync", "always", "--log-level", "warn", data_dir=data_dir).start()


def stop_node(node):
    try:
        node.stop(timeout=30)
    finally:
        node.close()
        shutil.rmtree(node.data_dir, ignore_errors=True)


def pulsar_url(node):
    return f"pulsar://127.0.0.1:{node.ports['pulsar']}"


def metrics_text(node):
    status, body, _ = node.get("/metrics", timeout=10)
    if status != 200:
        raise RuntimeError(f"/metrics answered {status}")
    return body.decode()


SAMPLE = re.compile(r'^(\w+)_bucket\{(.*)\} (\S+)$')


def histograms(text, name):
    """{labels-without-le: [(le, cumulative count)]} of histogram `name`."""
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if not m or m.group(1) != name:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        le = labels.pop("le")
        key = tuple(sorted(labels.items()))
        out.setdefault(key, []).append((float("inf") if le == "+Inf" else float(le), float(m.group(3))))
    return out


def percentile(buckets, q):
    """Upper bound (ms) of the bucket holding quantile q; None when empty."""
    total = buckets[-1][1] if buckets else 0
    if total == 0:
        return None
    for le, count in buckets:
        if count >= q * total:
            return le * 1000 if le != float("inf") else float("inf")
    return None


def counter(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def stage_figures(text):
    figures = {}
    for (labels, buckets) in histograms(text, "magnetar_publish_stage_seconds").items():
        d = dict(labels)
        if d.get("protocol") != "pulsar":
            continue
        figures[d["stage"]] = {"p50": percentile(buckets, 0.5), "p99": percentile(buckets, 0.99),
                               "p99_9": percentile(buckets, 0.999), "count": buckets[-1][1]}
    for (labels, buckets) in histograms(text, "magnetar_storage_journal_stage_seconds").items():
        d = dict(labels)
        figures["journal_" + d["stage"]] = {"p50": percentile(buckets, 0.5), "p99": percentile(buckets, 0.99),
                                            "p99_9": percentile(buckets, 0.999), "count": buckets[-1][1]}
    for (_, buckets) in histograms(text, "magnetar_storage_journal_fsync_seconds").items():
        figures["fsync"] = {"p50": percentile(buckets, 0.5), "p99": percentile(buckets, 0.99),
                            "p99_9": percentile(buckets, 0.999), "count": buckets[-1][1]}
    return figures


def raw_disk(directory, write_bytes, syncs_per_s, secs):
    """fdatasync after each write of `write_bytes`, paced at `syncs_per_s`:
    the disk's own sync latency percentiles (ms)."""
    path = os.path.join(directory, "raw-disk-probe")
    block = b"\x5a" * max(1, int(write_bytes))
    lat = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        interval = 1.0 / syncs_per_s if syncs_per_s > 0 else 0
        start = time.monotonic()
        next_at = start
        while time.monotonic() - start < secs:
            os.write(fd, block)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t0) * 1000)
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        os.close(fd)
        os.unlink(path)
    lat.sort()

    def pct(q):
        return lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
    return {"p50": pct(0.5), "p99": pct(0.99), "p99_9": pct(0.999), "max": lat[-1] if lat else None,
            "syncs": len(lat), "write_bytes": int(write_bytes)}


def perf(build, node, secs, rate=0):
    cmd = [os.path.join(build, "magnetar"), "perf", "produce", "sweep", "--url", pulsar_url(node), "-s", "1024",
           "-t", str(secs), "-w", "10000", "--disk-dir", "", "--json"]
    if rate:
        cmd += ["--rate", str(int(rate))]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 120)
    if r.returncode != 0:
        raise RuntimeError(f"perf failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt(v):
    return "-" if v is None else f"{v:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--secs", type=float, default=8)
    ap.add_argument("--fractions", default="0.1,0.25,0.5")
    ap.add_argument("--data-parent", default=None, help="where the nodes' data directories go (default: $TMPDIR)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")

    node = start_node(args.data_parent)
    try:
        top = perf(args.build, node, args.secs)
    finally:
        stop_node(node)
    max_rate = top["produce_msgs_per_s"]
    if not args.json:
        print(f"maximum: {max_rate:,.0f} msg/s of 1 KiB, fsync always "
              f"(publish p99 {fmt(top['publish_latency_ms']['p99'])} ms)", file=sys.stderr)
    rows = []
    for fraction in [float(f) for f in args.fractions.split(",")]:
        subprocess.run(["sync"], check=False)
        node = start_node(args.data_parent)
        try:
            rate = max(1, int(max_rate * fraction))
            before = metrics_text(node)
            client = perf(args.build, node, args.secs, rate)
            after = metrics_text(node)
            stages = stage_figures(after)
            syncs = counter(after, "magnetar_storage_journal_fsync_seconds_count") - \
                counter(before, "magnetar_storage_journal_fsync_seconds_count")
            written = counter(after, "magnetar_storage_appended_bytes_total") - \
                counter(before, "magnetar_storage_appended_bytes_total")
            disk = raw_disk(node.data_dir, written / syncs if syncs else 1024, syncs / args.secs if syncs else 100,
                            args.secs)
        finally:
            stop_node(node)
        row = {"fraction": fraction, "rate": rate, "achieved": client["produce_msgs_per_s"],
               "client_ms": client["publish_latency_ms"], "stages_ms": stages, "disk_fsync_ms": disk}
        rows.append(row)
        if not args.json:
            lat = client["publish_latency_ms"]
            print(f"{fraction:>5.0%} {rate:>8,} msg/s  client p50 {fmt(lat['p50'])} p99 {fmt(lat['p99'])} "
                  f"p99.9 {fmt(lat['p99_9'])} max {fmt(lat['max'])} ms", file=sys.stderr)
            for name in ("total", "broker", "storage", "to_topic", "ledger", "answer", "journal_queue",
                         "journal_write", "journal_sync", "journal_index", "journal_complete", "fsync"):
                s = stages.get(name)
                if s:
                    print(f"        {name:<17} p50 {fmt(s['p50'])} p99 {fmt(s['p99'])} p99.9 {fmt(s['p99_9'])} ms"
                          f"  ({int(s['count'])} samples)", file=sys.stderr)
            print(f"        disk alone        p50 {fmt(disk['p50'])} p99 {fmt(disk['p99'])} "
                  f"p99.9 {fmt(disk['p99_9'])} ms  ({disk['syncs']} syncs of {disk['write_bytes']} B)",
                  file=sys.stderr)
    result = {"max_rate": max_rate, "steps": rows}
    if args.json:
        print(json.dumps(result))
    else:
        for row in rows:
            total = row["stages_ms"].get("total", {}).get("p99")
            broker = row["stages_ms"].get("broker", {}).get("p99")
            print(f"{row['fraction']:.0%}: client p99 {fmt(row['client_ms']['p99'])} ms, broker p99 {fmt(broker)} ms, "
                  f"node total p99 {fmt(total)} ms, disk fsync p99 {fmt(row['disk_fsync_ms']['p99'])} ms")


if __name__ == "__main__":
    main()
