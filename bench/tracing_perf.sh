#!/usr/bin/env bash
# The cost of message tracing, as docs/benchmarks.md reports it: one node,
# `magnetar perf` (produce and consume, 100 B messages, fsync=never so the
# broker's CPU is what limits) alternately on a namespace with tracing off
# and one with tracing on for every message, in the same run, batched and
# unbatched. Prints one line per step and the ratios of the medians.
# Usage:
#   bench/tracing_perf.sh [build dir (default: build)] [seconds per step (default: 10)] [rounds (default: 3)]
set -euo pipefail
build="${1:-build}"
secs="${2:-10}"
rounds="${3:-3}"
bin="$build/magnetar"
source "$(dirname "$0")/bench_node.sh"
start_bench_node tracing-perf --fsync never
"$bin" admin --url "$http" namespaces create public/traced >/dev/null
"$bin" admin --url "$http" namespaces set-tracing public/traced --mode all >/dev/null

results="$data/results.jsonl"
for batch in true false; do
  for round in $(seq "$rounds"); do
    for ns in default traced; do
      topic="persistent://public/$ns/perf-$batch-$round"
      "$bin" perf --topic "$topic" --url "$url" -s 100 -t "$secs" --batch "$batch" --disk-dir "" --json |
        /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d['batch']=sys.argv[1]; d['tracing']=sys.argv[2]; print(json.dumps(d))" \
          "$batch" "$([ "$ns" = traced ] && echo all || echo off)" | tee -a "$results" |
        /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"batch={d['batch']:<5} tracing={d['tracing']:<3} produce {d['produce_msgs_per_s']:>10.0f} msg/s  consume {d['consume_msgs_per_s']:>10.0f} msg/s  publish p50 {d['publish_latency_ms']['p50']} ms\")"
    done
  done
done
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for batch in ("true", "false"):
    def med(tracing, key):
        return statistics.median(r[key] for r in rows if r["batch"] == batch and r["tracing"] == tracing)
    for key in ("produce_msgs_per_s", "consume_msgs_per_s"):
        off, on = med("off", key), med("all", key)
        print(f"batch={batch:<5} {key}: off {off:.0f}, all {on:.0f}, ratio {on / off:.2f}")
PY
