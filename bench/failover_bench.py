#!/usr/bin/env python3
"""Failover and rolling restarts of a 3-member cluster on one box, as
docs/benchmarks.md reports them.

  kill -9    a topic's owner is killed with SIGKILL while a confluent-kafka
             producer (acks=all) keeps sending to it through the other two;
             the time from the kill to the next acknowledged message, over
             --trials kills (the member is restarted between trials)
  rolling    the same producer while every member in turn is stopped with
             SIGTERM and started again; the longest gap between two
             acknowledgements during the restarts, against the longest gap
             over an equally long quiet period before them (the baseline),
             and whether any acknowledged message is missing afterwards

    bench/failover_bench.py [--build build] [--trials 3] [--rate 500] [--json]
"""
import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "utils"))

import magnetar_harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rate", type=int, default=500, help="messages a second the producer offers")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    magnetar_harness.BIN = os.path.join(args.build, "magnetar")
    import cluster_harness
    cluster_harness.BIN = magnetar_harness.BIN
    from cluster_harness import Cluster, make_secret, nodes_of, request, wait_for
    from confluent_kafka import Consumer, Producer, TopicPartition

    directory = tempfile.mkdtemp(prefix="magnetar-failover-bench-")
    cluster = Cluster(directory, make_secret(directory))
    results = {}

    def say(text):
        if not args.json:
            print(text, flush=True)

    def all_alive():
        for m in cluster.members:
            wait_for(lambda: sum(n["alive"] for n in nodes_of(m)) == 3, "3 live members", timeout=60)

    def owner(topic):
        def find():
            live = [m for m in cluster.members if m.proc.poll() is None]
            status, lookup = request(live[0], "GET", f"/lookup/v2/topic/persistent/public/default/{topic}")
            if status != 200:
                return None
            found = [m for m in live if lookup["brokerUrl"].endswith(f":{m.ports['pulsar']}")]
            return found[0] if found else None
        return wait_for(find, "an owner", timeout=60)

    class Load:
        """A producer offering --rate msg/s; records acknowledgement times."""

        def __init__(self, topic):
            self.topic, self.acked, self.times, self.errors = topic, [], [], []
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self.run)
            self.thread.start()

        def run(self):
            boot = ",".join(f"127.0.0.1:{m.ports['kafka']}" for m in cluster.members if m.proc.poll() is None)
            producer = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 1,
                                 "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000})

            def report(err, msg):
                if err:
                    self.errors.append(str(err))
                else:
                    self.acked.append(msg.value().decode())
                    self.times.append(time.monotonic())
            i, period = 0, 1.0 / args.rate
            next_at = time.monotonic()
            while not self.stop.is_set():
                try:
                    producer.produce(self.topic, f"m{i}".encode(), on_delivery=report)
                    i += 1
                except BufferError:
                    pass
                next_at += period
                producer.poll(max(0.0, next_at - time.monotonic()))
            producer.flush(90)

        def close(self):
            self.stop.set()
            self.thread.join(120)

    def longest_gap(times, start, end):
        inside = [t for t in times if start <= t <= end]
        return max((b - a for a, b in zip(inside, inside[1:])), default=end - start)

    try:
        cluster.add()
        for _ in range(2):
            cluster.add(join=cluster.seed())
        all_alive()

        kills = []
        for trial in range(args.trials):
            topic = f"kill-{trial}"
            victim = owner(topic)
            load = Load(topic)
            wait_for(lambda: len(load.acked) > args.rate, "the producer under way")
            victim.stop(signal.SIGKILL)
            killed = time.monotonic()
            count = len(load.acked)
            wait_for(lambda: len(load.acked) > count, "an acknowledgement after the kill", timeout=120)
            served = [t for t in load.times if t > killed][0] - killed
            load.close()
            kills.append(served)
            say(f"kill -9 trial {trial + 1}: the topic acknowledged again {served:.2f} s after its owner died")
            victim.start()
            all_alive()
        results["kill9_seconds"] = kills

        load = Load("rolling")
        wait_for(lambda: len(load.acked) > args.rate, "the producer under way")
        try:
            roll_from = time.monotonic()
            for m in cluster.members:
                assert m.stop() == 0
                m.start()
                all_alive()
            roll_until = time.monotonic()
            # The baseline: as long again with nothing restarting (after 2 s to settle).
            time.sleep(roll_until - roll_from + 2)
            quiet_until = time.monotonic()
        finally:
            load.close()
        stall = longest_gap(load.times, roll_from, roll_until)
        baseline = longest_gap(load.times, roll_until + 2, quiet_until)
        boot = ",".join(f"127.0.0.1:{m.ports['kafka']}" for m in cluster.members)
        consumer = Consumer({"bootstrap.servers": boot, "group.id": "bench", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("rolling", 0, 0)])
        got, want = set(), set(load.acked)
        deadline = time.monotonic() + 120
        while not want <= got and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.add(msg.value().decode())
        consumer.close()
        lost = len(want - got)
        results.update({"rolling_seconds": roll_until - roll_from, "rolling_longest_stall_seconds": stall,
                        "quiet_longest_gap_seconds": baseline, "stall_ratio": stall / baseline if baseline else None,
                        "acknowledged": len(want), "lost": lost, "errors": len(load.errors)})
        say(f"rolling restart of 3 members in {roll_until - roll_from:.1f} s: longest stall {stall:.2f} s, "
            f"longest gap when quiet {baseline:.3f} s ({stall / baseline:.1f}x); {len(want)} acknowledged, "
            f"{lost} lost, {len(load.errors)} send errors")
    finally:
        cluster.close()
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
