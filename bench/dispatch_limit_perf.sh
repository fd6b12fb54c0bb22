#!/usr/bin/env bash
# The cost of dispatch rate limits on the delivery path, as
# docs/benchmarks.md reports it: one node (fsync=never), a backlog of
# unbatched 100 B messages (one entry per message, so one allowance check
# and one charge per entry read) drained by `magnetar perf consume`
# alternately from a namespace of a tenant without any limit (the no-limit
# path: a few relaxed atomic loads per read) and from one of a tenant whose
# dispatchRate, and whose namespace's topic and subscription dispatch rates,
# are far above what the node can deliver (every read checks and charges
# three budgets, none is ever waited for), in the same run. Prints one line
# per step and the ratio of the medians.
# Usage:
#   bench/dispatch_limit_perf.sh [build dir (default: build)] [messages per step (default: 300000)] [rounds (default: 3)]
set -euo pipefail
build="${1:-build}"
messages="${2:-300000}"
rounds="${3:-3}"
bin="$build/magnetar"
source "$(dirname "$0")/bench_node.sh"
start_bench_node dispatch-perf --fsync never
big='{"dispatchThrottlingRateInMsg": 1000000000, "dispatchThrottlingRateInByte": 1000000000000, "ratePeriodInSecond": 1}'
curl -sf -X PUT -H 'Content-Type: application/json' -d '{}' "$http/admin/v2/tenants/limited" >/dev/null
curl -sf -X POST -H 'Content-Type: application/json' "$http/admin/v2/tenants/limited/limits" \
  -d '{"dispatchRate": {"dispatchThrottlingRateInMsg": 1000000000, "dispatchThrottlingRateInByte": 1000000000000}}' >/dev/null
curl -sf -X PUT "$http/admin/v2/namespaces/limited/ns" >/dev/null
for policy in dispatchRate subscriptionDispatchRate; do
  curl -sf -X POST -H 'Content-Type: application/json' -d "$big" "$http/admin/v2/namespaces/limited/ns/$policy" >/dev/null
done

results="$data/results.jsonl"
for round in $(seq "$rounds"); do
  for ns in public/default limited/ns; do
    topic="persistent://$ns/perf-$round"
    curl -sf -X PUT "$http/admin/v2/persistent/$ns/perf-$round" >/dev/null
    curl -sf -X PUT "$http/admin/v2/persistent/$ns/perf-$round/subscription/s?messageId=earliest" >/dev/null
    "$bin" perf produce "$topic" --url "$url" -s 100 -n "$messages" --batch false --disk-dir "" --json >/dev/null
    "$bin" perf consume "$topic" --url "$url" --subscription s -n "$messages" --time 300 --json |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d['ns']=sys.argv[1]; print(json.dumps(d))" "$ns" |
      tee -a "$results" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['ns']:<15} consume {d['consume_msgs_per_s']:>10.0f} msg/s  received {d['received']}\")"
  done
done
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = lambda ns: statistics.median(r["consume_msgs_per_s"] for r in rows if r["ns"] == ns)
off, on = med("public/default"), med("limited/ns")
print(f"consume_msgs_per_s: no limit {off:.0f}, limited {on:.0f}, ratio {on / off:.3f}")
PY
