#!/usr/bin/env bash
# The Pulsar produce path end to end, as docs/benchmarks.md reports it:
#   1. 1 KiB messages, fsync=always: the most `magnetar perf produce` gets,
#      then the disk's own sequential write + fdatasync bandwidth in the same
#      data directory, right after;
#   2. the same at half that rate with a consumer: end-to-end latency;
#   3. 100 B messages with batching, fsync=never;
#   4. for comparison, 1 KiB and 100 B without client batching.
# Each step prints one JSON line. Usage:
#   bench/pulsar_perf.sh [build dir (default: build)] [seconds per step (default: 20)] [data dir parent]
set -euo pipefail
build="${1:-build}"
secs="${2:-20}"
parent="${3:-${TMPDIR:-/tmp}}"
bin="$build/magnetar"
node_pid=""

start_node() {  # fsync mode
  data="$(mktemp -d "$parent/magnetar-perf.XXXXXX")"
  "$bin" standalone --data-dir "$data" --http-port 0 --pulsar-port 0 --fsync "$1" >"$data.log" 2>&1 &
  node_pid=$!
  for _ in $(seq 100); do [ -s "$data/ports.json" ] && break; sleep 0.05; done
  url="pulsar://127.0.0.1:$(/usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['pulsar'])" "$data/ports.json")"
}
stop_node() {
  kill "$node_pid" && wait "$node_pid" || true
  rm -rf "$data" "$data.log"
}
trap 'stop_node' EXIT

start_node always
echo "# 1 KiB, fsync=always, as fast as it goes, then the disk"
"$bin" perf produce bench-1k --url "$url" -s 1024 -t "$secs" -w 10000 --disk-dir "$data" --json | tee /tmp/magnetar-perf-max.json
rate=$(/usr/bin/python3 -c "import json;print(int(json.load(open('/tmp/magnetar-perf-max.json'))['produce_msgs_per_s'] / 2))")
# A fresh node, once the gigabytes just written are on disk: the latency
# step measures the produce path, not the write-back of the step before.
stop_node
sync
start_node always
echo "# 1 KiB, fsync=always, half that rate ($rate msg/s), produce and consume"
"$bin" perf --topic bench-1k-half --url "$url" -s 1024 -t "$secs" --rate "$rate" -w 10000 --disk-dir "" --json
echo "# 1 KiB, fsync=always, no client batching"
"$bin" perf produce bench-1k-single --url "$url" -s 1024 -t "$secs" -w 10000 --batch false --json
stop_node
sync

start_node never
echo "# 100 B, fsync=never, batching"
"$bin" perf produce bench-100 --url "$url" -s 100 -t "$secs" -w 50000 --json
echo "# 100 B, fsync=never, no client batching"
"$bin" perf produce bench-100-single --url "$url" -s 100 -t "$secs" -w 10000 --batch false --json
