#!/usr/bin/env python3
"""How fast a cluster makes a lost storage node's copies again, as a ratio
of what this machine's disk writes, both measured in the same run
(docs/benchmarks.md reports it).

  disk     --mib MiB written to a file in the bench's directory in 1 MiB
           blocks, fdatasync'd every 8 MiB: the raw disk's write bandwidth
  heal     a 4-member cluster (--storage-heal-grace-secs 1, no load
           balancing); a producer (confluent-kafka, acks=all) stores --mib
           MiB of 16 KiB messages on one topic, the topic is unloaded (its
           ledgers close), and the member holding the most copies besides
           the owner (not the metadata leader, which heals) is killed with
           SIGKILL. Measured from GET /admin/v2/cluster/storage:
           the bytes healed over the time from the first copy seen to no
           copy left under-replicated, once with each --rates (MiB/s, 0: no
           limit), each on a fresh cluster.

    bench/heal_bench.py [--build build] [--mib 256] [--rates 0,100] [--json]

Everything runs on one machine: the healer reads from and writes to the same
disk, through members that share its two cores, so the ratio says what one
box gives, not what separate disks would.
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import magnetar_harness  # noqa: E402

MIB = 1 << 20
STORED = "magnetar_replica_entries_added_total"


def disk_write_mib_s(directory, mib):
    path = os.path.join(directory, "disk-baseline")
    block = os.urandom(MIB)
    started = time.monotonic()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for i in range(mib):
            os.write(fd, block)
            if i % 8 == 7:
                os.fdatasync(fd)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.monotonic() - started
    os.unlink(path)
    return mib / elapsed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--mib", type=int, default=256, help="MiB stored, then healed")
    ap.add_argument("--rates", default="0,100", help="healing throttles to try, MiB/s (0: no limit)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    import cluster_harness
    cluster_harness.BIN = magnetar_harness.BIN
    from cluster_harness import Cluster, kafka_owner, leader_id, make_secret, nodes_of, request, wait_for
    from confluent_kafka import Producer

    def say(text):
        if not args.json:
            print(text, flush=True)

    directory = tempfile.mkdtemp(prefix="magnetar-heal-bench-")
    results = {"mib": args.mib}
    try:
        disk = disk_write_mib_s(directory, args.mib)
        results["disk_mib_s"] = round(disk, 1)
        say(f"raw disk: {disk:.1f} MiB/s writing {args.mib} MiB (fdatasync every 8 MiB)")
        for rate in [int(r) for r in args.rates.split(",")]:
            results[f"heal_{rate}"] = one_run(directory, rate, args.mib, disk, say, Cluster, kafka_owner, leader_id,
                                              make_secret, nodes_of, request, wait_for, Producer)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(results))


def one_run(directory, rate, mib, disk, say, Cluster, kafka_owner, leader_id, make_secret, nodes_of, request, wait_for,
            Producer):
    run_dir = os.path.join(directory, f"rate{rate}")
    os.makedirs(run_dir)
    cluster = Cluster(run_dir, make_secret(run_dir))
    # No load balancing: the topic stays on the member that stored it.
    extra = ("--storage-heal-grace-secs", "1", "--storage-heal-rate-mb", str(rate), "--load-balancer-shed-secs", "0")
    try:
        cluster.add(extra=extra)
        for _ in range(3):
            cluster.add(join=cluster.seed(), extra=extra)
        members = cluster.members
        for m in members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(m)) == 4, "4 live members", timeout=60)
        topic = "healed"

        owning = kafka_owner(members, topic)
        before = {m.id: m.metric(STORED) for m in members}
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{owning.ports['kafka']}", "acks": "all",
                             "linger.ms": 5, "batch.size": 1 << 20, "message.max.bytes": 4 << 20})
        payload = os.urandom(16 * 1024)
        count = mib * 64
        failures = []
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, payload, on_delivery=lambda err, msg: err and failures.append(err))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 1024 == 0:
                producer.poll(0)
        left = producer.flush(120)
        if left or failures:
            raise SystemExit(f"the producer did not store everything: {left} left, {failures[:3]}")
        # The member that owns the topic now, and the one (not the metadata
        # leader, which heals) that stored the most copies besides it.
        owning = kafka_owner(members, topic)
        leader = leader_id(members[0])

        def holding():
            stored = {m.id: m.metric(STORED) - before[m.id] for m in members if m is not owning}
            found = [m for m in members if m is not owning and stored[m.id] > 0]
            if len(found) < 2:
                return None  # the third copy may follow the acknowledgement
            return max((m for m in found if m.id != leader), key=lambda m: stored[m.id])
        victim = wait_for(holding, "three copies of the topic's entries", timeout=60)
        status, answer = request(owning, "PUT", f"/admin/v2/persistent/public/default/{topic}/unload")
        if status not in (200, 204):
            raise SystemExit(f"unload: {status} {answer}")
        live = [m for m in members if m is not victim]
        killed = time.monotonic()
        victim.stop(signal.SIGKILL)
        first = None
        start_bytes = 0
        while True:
            status, view = request(live[0], "GET", "/admin/v2/cluster/storage")
            healing = view.get("healing") if status == 200 else None
            now = time.monotonic()
            if healing and healing["copying"] and first is None:
                first = now
                start_bytes = healing["healedBytes"] - healing["copy"]["copiedBytes"]
                say(f"  throttle {rate or 'none'}: copying started {now - killed:.1f} s after the kill")
            if first is not None and healing and not healing["copying"] and view["underReplicatedFragments"] == 0:
                break
            if now - killed > 300:
                raise SystemExit(f"healing did not finish within 5 minutes; last seen: {view}")
            time.sleep(0.2)
        healed = healing["healedBytes"] - start_bytes
        secs = now - first
        speed = healed / MIB / secs
        say(f"  throttle {rate or 'none'}: {healed / MIB:.1f} MiB healed in {secs:.1f} s = {speed:.1f} MiB/s, "
            f"{speed / disk:.2f} of the raw disk; {now - killed:.1f} s from the kill to fully replicated")
        return {"rate_limit_mib_s": rate, "healed_mib": round(healed / MIB, 1), "secs": round(secs, 2),
                "mib_s": round(speed, 1), "ratio_to_disk": round(speed / disk, 3),
                "kill_to_replicated_s": round(now - killed, 1)}
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
