#!/usr/bin/env bash
# The AMQP path of Magnetar against Debian's rabbitmq-server on the same
# machine, same client and workload: amqp_perf (librabbitmq) publishing
# persistent messages of one size with publisher confirms to one durable
# queue (a classic queue on RabbitMQ) while a second connection consumes them
# with acks. Magnetar runs with --fsync always; RabbitMQ with its defaults
# (it confirms persistent messages once they are on disk). Each broker gets a
# fresh data directory and its own port. Prints both JSON lines and the ratio.
# Usage:
#   bench/amqp_vs_rabbitmq.sh [build dir (default: build)] [seconds (default: 20)] [size (default: 1024)]
set -euo pipefail
build="${1:-build}"
secs="${2:-20}"
size="${3:-1024}"
perf="$build/bench/amqp/amqp_perf"
data="$(mktemp -d "${TMPDIR:-/tmp}/magnetar-avr.XXXXXX")"
node="" rabbit=""
cleanup() {
  [ -n "$node" ] && kill "$node" 2>/dev/null && wait "$node" 2>/dev/null
  [ -n "$rabbit" ] && kill "$rabbit" 2>/dev/null && wait "$rabbit" 2>/dev/null
  rm -rf "$data"
}
trap cleanup EXIT

mkdir -p "$data/magnetar" "$data/rabbit/log" "$data/rabbit/mnesia"
"$build/magnetar" standalone --data-dir "$data/magnetar" --http-port 0 --pulsar-port 0 --kafka-port 0 --amqp-port 0 \
  --fsync always >"$data/magnetar.log" 2>&1 &
node=$!
for _ in $(seq 200); do [ -s "$data/magnetar/ports.json" ] && break; sleep 0.05; done
port="$(/usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))['amqp'])" "$data/magnetar/ports.json")"
echo "# Magnetar: amqp_perf, persistent, confirms, ${size} B, ${secs} s"
"$perf" --port "$port" --queue bench -s "$size" -t "$secs" --json | tee "$data/magnetar.json"
kill "$node"; wait "$node" 2>/dev/null || true; node=""

# RabbitMQ on a port of its own, everything under the scratch directory.
rport=$(( 20000 + RANDOM % 20000 ))
: >"$data/rabbit/enabled_plugins"
env HOME="$data/rabbit" RABBITMQ_NODE_PORT="$rport" RABBITMQ_DIST_PORT="$(( rport + 20000 ))" \
  RABBITMQ_NODENAME="bench$$@localhost" RABBITMQ_MNESIA_BASE="$data/rabbit/mnesia" \
  RABBITMQ_LOG_BASE="$data/rabbit/log" RABBITMQ_ENABLED_PLUGINS_FILE="$data/rabbit/enabled_plugins" \
  RABBITMQ_CONFIG_FILE="$data/rabbit/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmq-server >"$data/rabbit.log" 2>&1 &
rabbit=$!
for _ in $(seq 120); do grep -q "completed with" "$data/rabbit.log" && break; sleep 0.5; done
echo "# RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server): amqp_perf, classic durable queue, persistent, confirms, ${size} B, ${secs} s"
"$perf" --port "$rport" --queue bench -s "$size" -t "$secs" --json | tee "$data/rabbit.json"
/usr/bin/python3 - "$data/magnetar.json" "$data/rabbit.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
for what in ("publish_msgs_per_s", "consume_msgs_per_s"):
    print(f"{what}: magnetar {m[what]:.0f} / rabbitmq {r[what]:.0f} = {m[what] / r[what]:.2f}x")
PY
