#!/usr/bin/env python3
"""Publish latency at a fraction of the maximum rate, and where it goes,
as docs/benchmarks.md reports it.

One fresh node (fsync always) per step, `magnetar perf produce` with 1 KiB
messages (our own client, batching 1 ms):

  1. as fast as it goes: the maximum rate;
  2. at each fraction of that maximum (default 10%, 25%, 50%), after a
     warm-up at the same rate (--warmup-secs, 2 s: a fresh node's first
     second pays for pages its tail cache touches for the first time): the
     client's publish latency percentiles, and from the node's /metrics the same
     publishes split into stages (magnetar_publish_stage_seconds: broker
     time, storage time; magnetar_storage_journal_stage_seconds: queue,
     write, sync, index update, completion), with the journal's own fdatasync times;
     the reactors' loop figures (magnetar_reactor_busy_seconds: one loop
     iteration's running time; magnetar_reactor_mailbox_wait_seconds: a
     posted task's wait; the busiest reactor's); the node's stall probe
     (magnetar_node_stall_seconds: how late a sleeping thread woke, waiting
     for a core or with the machine not running it); and the client's own
     split (sender lag: intended send time until the producer took the
     message; round trip: batch sealed until its receipt; hand-over: the
     publish latency timed from when a message was handed to the producer,
     which for a message handed over ahead of its time adds the wait for
     the rest of its burst);
  3. right after each publish, the disk alone (`magnetar perf disk`): writes
     of the size the journal wrote per group commit in that publish, arriving
     at the bytes per second it wrote, made durable by a bare group commit
     in the same data directory, timed from each write's due time until an
     fdatasync covered it: what a broker doing nothing but group commit
     would show, the p99 to compare the client's with (a write arriving
     during a slow sync waits for it, and for one more).

Each step runs --rounds rounds of (fresh node, warm-up, publish, the disk
alone), each --secs long: this machine's disk and host stall for seconds at
a time (the probe's p99 has ranged 0.9-15.5 ms from one step to the next),
so one publish against one probe compares two moments that may differ by
more than what is measured. A step's verdict is the median over its rounds
of the client's p99 minus the disk's; every round's pair is printed. The
node's stage figures are summed over a step's rounds. (One node for all
rounds was tried: at 50% each round was slower than the one before, 9 ms,
then 34 ms, then 61 ms at p99, as some 12 GB piled up in the page
cache.)

    bench/latency_sweep.py [--build build] [--secs 8] [--rounds 3] [--fractions 0.1,0.25,0.5]
                           [--max-rate N] [--warmup-secs 2] [--settle-secs 10] [--json]

--max-rate skips step 1 and takes N as the maximum, so that two builds are
compared at the same rates. The node's WARN lines (a callback that held a
reactor, say) are printed after each step.

Percentiles from the node's histograms are read from bucket bounds
(2^(1/4) apart): each is the upper bound of its bucket.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import magnetar_harness  # noqa: E402
from magnetar_harness import Node, disk_bytes  # noqa: E402


def start_node(parent):
    """A fresh node (fsync always) whose data directory is under `parent`
    (None: the system's temporary directory)."""
    data_dir = tempfile.mkdtemp(prefix="magnetar-latency-", dir=parent)
    return Node("--fsync", "always", "--log-level", "warn", data_dir=data_dir).start()


def stop_node(node, deleted):
    """Stops `node`, removes its data and returns its WARN and ERROR lines;
    adds the bytes removed to deleted[0]."""
    try:
        node.stop(timeout=30)
    finally:
        node.close()
        lines = [line for line in node.read_log().splitlines() if " warning " in line or " error " in line]
        deleted[0] += disk_bytes(node.data_dir)
        shutil.rmtree(node.data_dir, ignore_errors=True)
    return lines


def settle(args, deleted):
    """Waits for the disk to finish what the last step left it. On a file
    system mounted with `discard`, deleting gigabytes makes the device trim
    them for seconds after and fdatasync waits behind the trims (28-54 ms
    stalls for about 7 s after deleting 2.5 GB here): 3 s per GB deleted,
    at least --settle-secs. Keeping the data until the end instead fills
    the page cache, and later steps' writes wait for reclaim."""
    subprocess.run(["sync"], check=False)
    time.sleep(max(args.settle_secs, 3.0 * deleted[0] / 1e9))
    deleted[0] = 0


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


def diffed(scrapes, name):
    """Histogram `name`'s samples recorded between each (before, after) pair of
    scrapes in `scrapes`, summed: {labels-without-le: [(le, count)]}."""
    out = {}
    for before, after in scrapes:
        base = histograms(before, name)
        for key, buckets in histograms(after, name).items():
            was = dict(base.get(key, []))
            total = out.setdefault(key, {})
            for le, c in buckets:
                total[le] = total.get(le, 0) + c - was.get(le, 0)
    return {key: sorted(total.items()) for key, total in out.items()}


def counted(scrapes, name):
    """Counter `name`'s growth between each (before, after) pair, summed."""
    return sum(counter(after, name) - counter(before, name) for before, after in scrapes)


def figures_of(buckets, with_max=False):
    f = {"p50": percentile(buckets, 0.5), "p99": percentile(buckets, 0.99), "p99_9": percentile(buckets, 0.999),
         "count": buckets[-1][1]}
    if with_max:
        f["max"] = percentile(buckets, 1.0)
    return f


def stage_figures(scrapes):
    """The node's stage figures for the samples between each pair of scrapes."""
    figures = {}
    for (labels, buckets) in diffed(scrapes, "magnetar_publish_stage_seconds").items():
        d = dict(labels)
        if d.get("protocol") == "pulsar":
            figures[d["stage"]] = figures_of(buckets)
    for (labels, buckets) in diffed(scrapes, "magnetar_storage_journal_stage_seconds").items():
        figures["journal_" + dict(labels)["stage"]] = figures_of(buckets)
    for (_, buckets) in diffed(scrapes, "magnetar_storage_journal_fsync_seconds").items():
        figures["fsync"] = figures_of(buckets, with_max=True)
    # The busiest reactor's figures (the one that ran the most iterations:
    # the topic's and the connection's).
    busiest = None
    for (labels, buckets) in diffed(scrapes, "magnetar_reactor_busy_seconds").items():
        if busiest is None or buckets[-1][1] > busiest[1]:
            busiest = (dict(labels).get("reactor"), buckets[-1][1])
            figures["reactor_busy"] = figures_of(buckets, with_max=True)
    for (labels, buckets) in diffed(scrapes, "magnetar_reactor_mailbox_wait_seconds").items():
        if busiest is not None and dict(labels).get("reactor") == busiest[0]:
            figures["mailbox_wait"] = figures_of(buckets, with_max=True)
    return figures


def stall_figures(scrapes):
    """The node's stall probe over the step (magnetar_node_stall_seconds,
    after minus before): wakes, how many were late by 1 ms and 10 ms or
    more, the latest, and the late time's split in ms."""
    parts = {dict(k).get("part"): b for k, b in diffed(scrapes, "magnetar_node_stall_seconds").items()}
    delta = parts.get("late")
    if not delta:
        return None
    wakes = delta[-1][1]

    def over(bound):
        at = [c for le, c in delta if le >= bound]
        return wakes - (at[0] if at else wakes)
    latest = None
    for i, (le, c) in enumerate(delta):
        if c == wakes:
            latest = le * 1000
            break
    sums = {}
    for part in ("run_queue", "absent"):
        sums[part] = counted(scrapes, f'magnetar_node_stall_seconds_sum{{part="{part}"}}') * 1000
    return {"wakes": int(wakes), "late_1ms": int(over(0.001)), "late_10ms": int(over(0.01)), "max_ms": latest,
            "p99": percentile(delta, 0.99), "run_queue_ms": sums["run_queue"], "absent_ms": sums["absent"]}


def raw_disk(build, directory, write_bytes, bytes_per_s, secs):
    """`magnetar perf disk`: writes of `write_bytes` arriving at `bytes_per_s`
    made durable by a bare group commit in `directory`; its figures (ms)."""
    cmd = [os.path.join(build, "magnetar"), "perf", "disk", directory, "--rate-mib",
           f"{max(bytes_per_s, 1024) / (1 << 20):.3f}", "--write-kib", f"{max(write_bytes, 1) / 1024:.3f}",
           "-t", str(secs), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=secs + 120)
    if r.returncode != 0:
        raise RuntimeError(f"perf disk failed: {r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


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
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of (publish, disk alone) per step; the verdict is the median (at least 1)")
    ap.add_argument("--fractions", default="0.1,0.25,0.5")
    ap.add_argument("--data-parent", default=None, help="where the nodes' data directories go (default: $TMPDIR)")
    ap.add_argument("--max-rate", type=float, default=0, help="take this as the maximum instead of measuring it")
    ap.add_argument("--warmup-secs", type=float, default=2,
                    help="publish at the step's rate this long on the fresh node before measuring (0: none)")
    ap.add_argument("--settle-secs", type=float, default=10,
                    help="pause before each step, at least, for the disk to finish trimming what the last one "
                         "deleted (3 s per GB deleted when more)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    run_sweep(args)


def run_sweep(args):
    deleted = [0]  # bytes removed since the disk last settled

    if args.max_rate > 0:
        max_rate = args.max_rate
        if not args.json:
            print(f"maximum: {max_rate:,.0f} msg/s of 1 KiB, fsync always (given)", file=sys.stderr)
    else:
        node = start_node(args.data_parent)
        try:
            top = perf(args.build, node, args.secs)
        finally:
            stop_node(node, deleted)
        max_rate = top["produce_msgs_per_s"]
        if not args.json:
            print(f"maximum: {max_rate:,.0f} msg/s of 1 KiB, fsync always "
                  f"(publish p99 {fmt(top['publish_latency_ms']['p99'])} ms)", file=sys.stderr)
    rows = []
    for fraction in [float(f) for f in args.fractions.split(",")]:
        rate = max(1, int(max_rate * fraction))
        rounds, scrapes, colds, warnings = [], [], [], []
        for _ in range(args.rounds):
            settle(args, deleted)
            node = start_node(args.data_parent)
            try:
                # The first second of a fresh node at full rate pays for pages
                # the tail cache touches for the first time (a one-off, as a
                # JVM broker's warm-up is): run it first and measure after it,
                # as pulsar-perf's --warmup-time does.
                if args.warmup_secs > 0:
                    colds.append(perf(args.build, node, args.warmup_secs, rate)["publish_latency_ms"])
                before = metrics_text(node)
                client = perf(args.build, node, args.secs, rate)
                after = metrics_text(node)
                scrapes.append((before, after))
                writes = counted([(before, after)], 'magnetar_storage_journal_stage_seconds_count{stage="write"}')
                written = counted([(before, after)], "magnetar_storage_appended_bytes_total")
                disk = raw_disk(args.build, node.data_dir, written / writes if writes else 1024,
                                written / args.secs, args.secs)
                deleted[0] += disk["writes"] * disk["write_bytes"]  # the probe's file, removed at its end
            finally:
                warnings += stop_node(node, deleted)
            rounds.append({"achieved": client["produce_msgs_per_s"], "client_ms": client["publish_latency_ms"],
                           "from_handover_ms": client.get("publish_from_handover_ms"),
                           "sender_lag_ms": client.get("sender_lag_ms"), "round_trip_ms": client.get("round_trip_ms"),
                           "disk_ms": disk, "above_disk_ms": client["publish_latency_ms"]["p99"] -
                           disk["write_to_durable_ms"]["p99"]})
        stages = stage_figures(scrapes)
        stalls = stall_figures(scrapes)
        row = {"fraction": fraction, "rate": rate, "rounds": rounds,
               "above_disk_median_ms": statistics.median(r["above_disk_ms"] for r in rounds),
               "stages_ms": stages, "node_stalls": stalls, "warmup_ms": colds,
               "slow_callbacks": counted(scrapes, "magnetar_reactor_slow_callbacks_total"),
               "node_warnings": warnings}
        rows.append(row)
        if not args.json:
            print(f"{fraction:>5.0%} {rate:>8,} msg/s", file=sys.stderr)
            for w in colds:
                print(f"        warm-up ({args.warmup_secs:g} s, not counted) p50 {fmt(w['p50'])} p99 {fmt(w['p99'])} "
                      f"max {fmt(w['max'])} ms", file=sys.stderr)
            for i, r in enumerate(rounds):
                lat = r["client_ms"]
                print(f"        round {i + 1}: client p50 {fmt(lat['p50'])} p99 {fmt(lat['p99'])} "
                      f"p99.9 {fmt(lat['p99_9'])} max {fmt(lat['max'])} ms  (achieved {r['achieved']:,.0f} msg/s)",
                      file=sys.stderr)
                for key, name in (("from_handover_ms", "hand-over"), ("sender_lag_ms", "sender lag"),
                                  ("round_trip_ms", "round trip")):
                    c = r.get(key)
                    if c:
                        print(f"          client {name:<10} p50 {fmt(c['p50'])} p99 {fmt(c['p99'])} "
                              f"p99.9 {fmt(c['p99_9'])} max {fmt(c['max'])} ms", file=sys.stderr)
                disk = r["disk_ms"]
                d, f = disk["write_to_durable_ms"], disk["fdatasync_ms"]
                print(f"          disk alone      p50 {fmt(d['p50'])} p99 {fmt(d['p99'])} p99.9 {fmt(d['p99_9'])} "
                      f"max {fmt(d['max'])} ms  (writes of {disk['write_bytes']} B at {disk['mib_per_s']:.1f} "
                      f"MiB/s, write -> durable); its fdatasync p50 {fmt(f['p50'])} p99 {fmt(f['p99'])} "
                      f"max {fmt(f['max'])} ms", file=sys.stderr)
            print("        the nodes, all rounds:", file=sys.stderr)
            for name in ("total", "broker", "storage", "to_topic", "ledger", "answer", "journal_queue",
                         "journal_write", "journal_sync", "journal_index", "journal_complete", "fsync",
                         "reactor_busy", "mailbox_wait"):
                s = stages.get(name)
                if s:
                    top = f" max {fmt(s['max'])}" if "max" in s else ""
                    print(f"        {name:<17} p50 {fmt(s['p50'])} p99 {fmt(s['p99'])} p99.9 {fmt(s['p99_9'])}"
                          f"{top} ms  ({int(s['count'])} samples)", file=sys.stderr)
            print(f"        slow reactor callbacks (>= 20 ms): {int(row['slow_callbacks'])}", file=sys.stderr)
            if stalls:
                print(f"        node stalls       {stalls['wakes']} probe wakes: late >= 1 ms {stalls['late_1ms']}, "
                      f">= 10 ms {stalls['late_10ms']}, p99 {fmt(stalls['p99'])} max {fmt(stalls['max_ms'])} ms; "
                      f"late in all {stalls['run_queue_ms'] + stalls['absent_ms']:.1f} ms: waiting for a core "
                      f"{stalls['run_queue_ms']:.1f} ms, machine absent {stalls['absent_ms']:.1f} ms", file=sys.stderr)
            seen = set()
            for line in warnings:
                # Without its time and data directory: each round's node may say the same.
                said = re.sub(r"magnetar-latency-\w+", "", line.split(" ", 1)[-1])
                if said not in seen and len(seen) < 10:
                    seen.add(said)
                    print(f"        node: {line}", file=sys.stderr)
    result = {"max_rate": max_rate, "steps": rows}
    if args.json:
        print(json.dumps(result))
    else:
        for row in rows:
            total = row["stages_ms"].get("total", {}).get("p99")
            broker = row["stages_ms"].get("broker", {}).get("p99")
            pairs = ", ".join(f"{fmt(r['client_ms']['p99'])}/{fmt(r['disk_ms']['write_to_durable_ms']['p99'])}"
                              for r in row["rounds"])
            print(f"{row['fraction']:.0%}: broker p99 {fmt(broker)} ms, node total p99 {fmt(total)} ms; "
                  f"client/disk alone p99 by round {pairs} ms: client {row['above_disk_median_ms']:+.2f} ms "
                  f"above the disk (median of {len(row['rounds'])})")


if __name__ == "__main__":
    main()
