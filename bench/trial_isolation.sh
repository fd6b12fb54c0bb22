#!/usr/bin/env bash
# How much one trial visitor flooding at their quota slows another's
# publishes, as docs/benchmarks.md reports it: one node in trial mode (its
# default quotas), two visitors signed up. The quiet visitor publishes at a
# steady rate well under their quota (`magnetar perf produce`, unbatched, so
# each message is one publish) while the flooder is idle, then while the
# flooder publishes as fast as their quota lets them (5000 B messages, so
# both the message and the byte rate bind), alternately, in the same run.
# Prints each step's publish p99 and the ratio of the medians.
# Usage:
#   bench/trial_isolation.sh [build dir (default: build)] [seconds per step (default: 10)] [rounds (default: 3)]
#     [quiet visitor's rate (default: 50 msg/s)]
set -euo pipefail
build="${1:-build}"
secs="${2:-10}"
rounds="${3:-3}"
rate="${4:-50}"
bin="$build/magnetar"
source "$(dirname "$0")/bench_node.sh"
start_bench_node trial-isolation --trial --superuser-roles admin

# Sign-up answers the tenant and its token as JSON; keep both.
sign_up() {
  /usr/bin/python3 - "$http" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/trial/signup", data=b"{}", method="POST",
                             headers={"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=30))
print(answer["namespace"], answer["token"])
PY
}
read -r quiet_ns quiet_token < <(sign_up)
read -r flood_ns flood_token < <(sign_up)

results="$data/results.jsonl"
for round in $(seq "$rounds"); do
  for flooding in no yes; do
    flooder=""
    if [ "$flooding" = yes ]; then
      "$bin" perf produce "persistent://$flood_ns/flood" --url "$url" --token "$flood_token" -s 5000 -r 0 \
        -t "$((secs + 3))" --disk-dir "" --json >"$data/flood-$round.json" &
      flooder=$!
      sleep 2  # the flooder is at its quota before the quiet visitor's step starts
    fi
    "$bin" perf produce "persistent://$quiet_ns/steady-$round" --url "$url" --token "$quiet_token" -s 100 \
      -r "$rate" -t "$secs" --batch false --disk-dir "" --json |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); d['flooding']=sys.argv[1]; print(json.dumps(d))" \
        "$flooding" |
      tee -a "$results" |
      /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); l=d['publish_latency_ms']; print(f\"flooder {d['flooding']:<3} quiet visitor {d['produce_msgs_per_s']:>6.1f} msg/s  publish p50 {l['p50']} ms  p99 {l['p99']} ms\")"
    if [ -n "$flooder" ]; then
      wait "$flooder"
      /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"  the flooder got {d['produce_msgs_per_s']:.0f} msg/s, {d['produce_msgs_per_s']*5000/1048576:.2f} MiB/s\")" \
        "$data/flood-$round.json"
    fi
  done
done
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
p99 = lambda f: statistics.median(r["publish_latency_ms"]["p99"] for r in rows if r["flooding"] == f)
quiet, flooded = p99("no"), p99("yes")
print(f"quiet visitor's publish p99: flooder idle {quiet} ms, flooder at its quota {flooded} ms, "
      f"ratio {flooded / quiet:.2f}")
PY
