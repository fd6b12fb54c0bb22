#!/usr/bin/env bash
# What counting topics costs their creation, as docs/benchmarks.md reports
# it: one node, N topics created through the admin API (one keep-alive
# connection, PUT per topic) in a namespace without a topic limit and in one
# whose maxTopicsPerNamespace is far above N (every creation is counted,
# none refused), in the same run. Prints topics/s per step, the time of the
# last 100 creations of each (counting grows with the namespace), and the
# ratios.
# Usage:
#   bench/topic_admission.sh [build dir (default: build)] [topics per namespace (default: 2000)]
set -euo pipefail
build="${1:-build}"
topics="${2:-2000}"
bin="$build/magnetar"
source "$(dirname "$0")/bench_node.sh"
start_bench_node topic-admission --fsync never
"$bin" admin --url "$http" namespaces create public/open >/dev/null
"$bin" admin --url "$http" namespaces create public/capped >/dev/null
"$bin" admin --url "$http" namespaces set-max-topics-per-namespace public/capped -t 100000000 >/dev/null

/usr/bin/python3 - "$http" "$topics" <<'PY'
import http.client, sys, time, urllib.parse
url = urllib.parse.urlparse(sys.argv[1])
n = int(sys.argv[2])
results = {}
for ns in ("open", "capped"):
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    started = time.monotonic()
    tail_started = None
    for i in range(n):
        if i == n - 100:
            tail_started = time.monotonic()
        conn.request("PUT", f"/admin/v2/persistent/public/{ns}/t-{i}")
        r = conn.getresponse()
        r.read()
        if r.status != 204:
            sys.exit(f"PUT t-{i} in {ns}: {r.status}")
        if (i + 1) % 500 == 0:
            print(f"  {ns}: {i + 1}/{n} topics", file=sys.stderr, flush=True)
    ended = time.monotonic()
    results[ns] = (n / (ended - started), (ended - tail_started) / 100 * 1000)
    print(f"{ns:<7} {results[ns][0]:>8.0f} topics/s   last 100: {results[ns][1]:.2f} ms per topic")
print(f"capped/open: throughput {results['capped'][0] / results['open'][0]:.2f}, "
      f"last-100 latency {results['capped'][1] / results['open'][1]:.2f}x")
PY
