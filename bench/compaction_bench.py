#!/usr/bin/env python3
"""Topic compaction, as docs/benchmarks.md reports it.

One node (fsync never: what is measured is the pass, not the disk's
flushes). A Kafka topic with cleanup.policy=compact is filled with
--mb MiB of 1 KiB records over keys that are --live-percent of the
records, each key written round-robin (so 100 / live-percent versions
per key, the last one live). Then:

  baseline   producer throughput into a second topic with nothing else
             running (records of 1 KiB, confluent-kafka, acks=all)
  compact    PUT .../compaction; the pass's time and bytes before/after
             from GET .../compaction (lastRun), the disk reclaimed
  during     the same producer run into the second topic while the pass
             runs (the pass is started first); its throughput as a ratio
             to the baseline

    bench/compaction_bench.py [--build build] [--mb 1024] [--live-percent 10] [--probe-mb 256]
                              [--max-read-mib 32] [--json]
"""
import argparse
import json
import os
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import confluent_kafka as ck  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import magnetar_harness  # noqa: E402
from magnetar_harness import disk_bytes  # noqa: E402
from magnetar_harness import Node, call_json  # noqa: E402

RECORD = 1024


def produce(bootstrap, topic, records, keys, stop=None):
    """Sends `records` records of RECORD bytes round-robin over `keys` keys;
    (records sent, seconds)."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 512 * 1024,
                     "queue.buffering.max.kbytes": 256 * 1024, "acks": "all"})
    value = b"x" * (RECORD - 16)
    start = time.monotonic()
    sent = 0
    for i in range(records):
        if stop is not None and stop.is_set():
            break
        while True:
            try:
                p.produce(topic, key=b"key-%010d" % (i % keys), value=value)
                break
            except BufferError:
                p.poll(0.01)
        sent += 1
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(300) == 0, "undelivered records"
    return sent, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--live-percent", type=int, default=10)
    ap.add_argument("--probe-mb", type=int, default=256, help="MiB the throughput probes send")
    ap.add_argument("--max-read-mib", type=int, default=32,
                    help="the node's --compaction-max-read-mib-per-sec (0: no limit)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    magnetar_harness.BIN = os.path.join(a.build, "magnetar")
    node = Node("--fsync", "never", "--log-level", "warn", "--compaction-max-read-mib-per-sec",
                str(a.max_read_mib)).start()
    try:
        bootstrap = f"127.0.0.1:{node.ports['kafka']}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name, config in (("big", {"cleanup.policy": "compact", "delete.retention.ms": "0"}), ("probe", {})):
            admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(timeout=30)
        records = a.mb * 1024 * 1024 // RECORD
        keys = max(1, records * a.live_percent // 100)
        _, fill_s = produce(bootstrap, "big", records, keys)
        probe_records = a.probe_mb * 1024 * 1024 // RECORD
        sent, base_s = produce(bootstrap, "probe", probe_records, probe_records)
        baseline = sent * RECORD / base_s / 2**20
        disk_before = disk_bytes(node.data_dir)
        path = "/admin/v2/persistent/public/default/big-partition-0/compaction"
        status, body = call_json(node, "PUT", path)
        assert status == 204, body
        stop = threading.Event()
        during = {}

        def probe():
            n, s = produce(bootstrap, "probe", probe_records, probe_records, stop)
            during.update(sent=n, seconds=s)

        t = threading.Thread(target=probe)
        t.start()
        while True:
            status, body = call_json(node, "GET", path)
            if body["status"] != "RUNNING":
                break
            time.sleep(0.2)
        stop.set()
        t.join()
        assert body["status"] == "SUCCESS", body
        run = body["lastRun"]
        # Storage reclaims segments behind deleted ledgers as it compacts them.
        time.sleep(5)
        disk_after = disk_bytes(node.data_dir)
        during_rate = during["sent"] * RECORD / during["seconds"] / 2**20
        out = {
            "mb": a.mb, "live_percent": a.live_percent, "max_read_mib_per_s": a.max_read_mib,
            "records": records, "keys": keys,
            "fill_s": round(fill_s, 1),
            "compaction_s": round(run["durationMs"] / 1000, 2),
            "read_mib": round(run["bytesRead"] / 2**20, 1),
            "written_mib": round(run["bytesWritten"] / 2**20, 1),
            "topic_mib_before": round(run["bytesBefore"] / 2**20, 1),
            "topic_mib_after": round(run["bytesAfter"] / 2**20, 1),
            "disk_mib_before": round(disk_before / 2**20, 1),
            "disk_mib_after": round(disk_after / 2**20, 1),
            "live_keys": run["liveKeys"],
            "produce_mib_s_baseline": round(baseline, 1),
            "produce_mib_s_during": round(during_rate, 1),
            "produce_ratio": round(during_rate / baseline, 2),
        }
        if a.json:
            print(json.dumps(out))
        else:
            for k, v in out.items():
                print(f"{k:24} {v}")
    finally:
        node.stop()
        node.close()


if __name__ == "__main__":
    main()
