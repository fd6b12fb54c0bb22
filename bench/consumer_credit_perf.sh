#!/usr/bin/env bash
# What a Pulsar consumer that reads gets from two builds, as
# docs/benchmarks.md reports it for the consumers' delivery credit: for each
# round and each build, one node (fsync=never), a backlog of unbatched
# messages (one entry per message) written by `magnetar perf produce`, then
# drained by `magnetar perf consume` (5,000 permits, topped up at half).
# The builds run alternately so both see the same machine. Prints one line
# per step and the medians.
# Usage:
#   bench/consumer_credit_perf.sh <build dir A> <build dir B> [messages (default: 300000)] [size (default: 100)] [rounds (default: 3)]
set -euo pipefail
builds=("$1" "$2")
messages="${3:-300000}"
size="${4:-100}"
rounds="${5:-3}"
source "$(dirname "$0")/bench_node.sh"

results="$(mktemp "${TMPDIR:-/tmp}/consumer-credit-perf.XXXXXX")"
trap 'rm -f "$results"' EXIT
for round in $(seq "$rounds"); do
  for build in "${builds[@]}"; do
    bin="$build/magnetar"
    start_bench_node consumer-credit --fsync never
    trap 'kill "$node_pid" 2>/dev/null && wait "$node_pid" || true; rm -rf "$data" "$data.log" "$results"' EXIT
    topic="persistent://public/default/perf-$round"
    curl -sf -X PUT "$http/admin/v2/persistent/public/default/perf-$round" >/dev/null
    curl -sf -X PUT "$http/admin/v2/persistent/public/default/perf-$round/subscription/s?messageId=earliest" >/dev/null
    "$bin" perf produce "$topic" --url "$url" -s "$size" -n "$messages" --batch false --disk-dir "" --json >/dev/null
    "$bin" perf consume "$topic" --url "$url" --subscription s -n "$messages" --time 300 --json |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d['build']=sys.argv[1]; print(json.dumps(d))" "$build" |
      tee -a "$results" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['build']:<30} consume {d['consume_msgs_per_s']:>10.0f} msg/s  received {d['received']}\")"
    kill "$node_pid" && wait "$node_pid" || true
    rm -rf "$data" "$data.log"
    trap 'rm -f "$results"' EXIT
  done
done
/usr/bin/python3 - "$results" "${builds[@]}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a, b = sys.argv[2], sys.argv[3]
med = lambda build: statistics.median(r["consume_msgs_per_s"] for r in rows if r["build"] == build)
print(f"consume_msgs_per_s: {a} {med(a):.0f}, {b} {med(b):.0f}, ratio {med(b) / med(a):.3f}")
PY
