#!/usr/bin/env bash
# Pulsar over TLS against plaintext on the same node: `magnetar perf`
# (produce and consume one topic, batching on) on the plain port, then on the
# pulsar+ssl port, each on a fresh topic, same message size and duration.
# Certificates are made here with openssl (RSA 2048, TLS 1.3). Prints both
# JSON lines and the TLS/plain ratios. Usage:
#   bench/tls_vs_plain.sh [build dir (default: build)] [seconds (default: 10)] [size (default: 1024)]
set -euo pipefail
build="${1:-build}"
secs="${2:-10}"
size="${3:-1024}"
bin="$build/magnetar"
work="$(mktemp -d "${TMPDIR:-/tmp}/magnetar-tls-bench.XXXXXX")"
certs="$work/certs"
mkdir -p "$certs"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" -days 2 \
  -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$certs/server.key" -out "$certs/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$certs/san.ext"
openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -set_serial 1 \
  -out "$certs/server.pem" -days 2 -extfile "$certs/san.ext" 2>/dev/null
"$bin" standalone --data-dir "$work/data" --http-port 0 --pulsar-port 0 --kafka-port off --amqp-port off \
  --broker-service-port-tls 0 --tls-certificate-file "$certs/server.pem" --tls-key-file "$certs/server.key" \
  >"$work/node.log" 2>&1 &
node=$!
trap 'kill $node 2>/dev/null; wait $node 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -s "$work/data/ports.json" ] && break; sleep 0.05; done
port() { /usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/data/ports.json" "$1"; }
echo "# plain: magnetar perf, pulsar://, ${size} B, ${secs} s"
"$bin" perf --topic bench-plain --url "pulsar://127.0.0.1:$(port pulsar)" -s "$size" -t "$secs" --disk-dir "" --json \
  | tee "$work/plain.json"
echo "# TLS: magnetar perf, pulsar+ssl://, ${size} B, ${secs} s"
"$bin" perf --topic bench-tls --url "pulsar+ssl://localhost:$(port pulsar_tls)" --tls-trust-cert "$certs/ca.pem" \
  -s "$size" -t "$secs" --disk-dir "" --json | tee "$work/tls.json"
/usr/bin/python3 - "$work/plain.json" "$work/tls.json" <<'PY'
import json, sys
plain, tls = (json.load(open(p)) for p in sys.argv[1:3])
for key in ("produce_msgs_per_s", "consume_msgs_per_s"):
    print(f"{key}: tls/plain = {tls[key]:.0f} / {plain[key]:.0f} = {tls[key] / plain[key]:.2f}")
p50 = lambda r: r["end_to_end_latency_ms"]["p50"]
print(f"end-to-end p50 latency: tls {p50(tls):.2f} ms, plain {p50(plain):.2f} ms")
PY
