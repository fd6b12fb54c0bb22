#!/usr/bin/env bash
# The Kafka produce path against the Pulsar produce path on the same node,
# same message size and durability (fsync=always, acks=all): kafka_perf
# (librdkafka) and `magnetar perf produce`, one after the other, each on a
# fresh topic. Prints both JSON lines and the ratio. Usage:
#   bench/kafka_vs_pulsar.sh [build dir (default: build)] [seconds (default: 20)] [size (default: 1024)]
set -euo pipefail
build="${1:-build}"
secs="${2:-20}"
size="${3:-1024}"
bin="$build/magnetar"
data="$(mktemp -d "${TMPDIR:-/tmp}/magnetar-kvp.XXXXXX")"
"$bin" standalone --data-dir "$data" --http-port 0 --pulsar-port 0 --kafka-port 0 --fsync always >"$data.log" 2>&1 &
node=$!
trap 'kill $node 2>/dev/null; wait $node 2>/dev/null; rm -rf "$data" "$data.log"' EXIT
for _ in $(seq 200); do [ -s "$data/ports.json" ] && break; sleep 0.05; done
port() { /usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$data/ports.json" "$1"; }
echo "# Kafka: kafka_perf, acks=all, ${size} B, ${secs} s"
"$build/bench/kafka/kafka_perf" --brokers "127.0.0.1:$(port kafka)" --topic bench-kafka -s "$size" -t "$secs" --acks all --json \
  | tee /tmp/magnetar-kvp-kafka.json
echo "# Pulsar: magnetar perf produce, fsync=always, ${size} B, ${secs} s"
"$bin" perf produce bench-pulsar --url "pulsar://127.0.0.1:$(port pulsar)" -s "$size" -t "$secs" -w 10000 --disk-dir "" --json \
  | tee /tmp/magnetar-kvp-pulsar.json
/usr/bin/python3 - <<'PY'
import json
k = json.load(open("/tmp/magnetar-kvp-kafka.json"))["produce_msgs_per_s"]
p = json.load(open("/tmp/magnetar-kvp-pulsar.json"))["produce_msgs_per_s"]
print(f"kafka/pulsar throughput: {k:.0f} / {p:.0f} msg/s = {k / p:.2f}")
PY
