#!/usr/bin/env bash
# The cost of the publish rate limiter on the publish path, as
# docs/benchmarks.md reports it: one node (fsync=never so the broker's CPU is
# what limits), `magnetar perf produce` unbatched (one entry, so one charge,
# per 100 B message) alternately on a namespace without a limit and one whose
# publishRate is far above what the node can take (every publish is charged,
# none is held), in the same run. Prints one line per step and the ratio of
# the medians.
# Usage:
#   bench/publish_limit_perf.sh [build dir (default: build)] [seconds per step (default: 10)] [rounds (default: 3)]
set -euo pipefail
build="${1:-build}"
secs="${2:-10}"
rounds="${3:-3}"
bin="$build/magnetar"
source "$(dirname "$0")/bench_node.sh"
start_bench_node limit-perf --fsync never
"$bin" admin --url "$http" namespaces create public/limited >/dev/null
"$bin" admin --url "$http" namespaces set-publish-rate public/limited --msg-publish-rate 1000000000 --byte-publish-rate 1000000000000 >/dev/null

results="$data/results.jsonl"
for round in $(seq "$rounds"); do
  for ns in default limited; do
    "$bin" perf produce "persistent://public/$ns/perf-$round" --url "$url" -s 100 -t "$secs" --batch false \
      --disk-dir "" --json |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d['ns']=sys.argv[1]; print(json.dumps(d))" "$ns" |
      tee -a "$results" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['ns']:<8} produce {d['produce_msgs_per_s']:>10.0f} msg/s  publish p50 {d['publish_latency_ms']['p50']} ms\")"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda ns: statistics.median(r["produce_msgs_per_s"] for r in rows if r["ns"] == ns)
off, on = med("default"), med("limited")
print(f"produce_msgs_per_s: no limit {off:.0f}, limited {on:.0f}, ratio {on / off:.3f}")
PY
