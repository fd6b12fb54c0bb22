#!/usr/bin/env bash
# How long the README's run command takes from a fresh clone to a node that
# says "Ready": a clone of this tree's HEAD, an empty compiler cache, the
# packages already installed (install-deps.sh finds nothing to install; the
# console's `npm ci` reads npm's own cache). Prints each step's seconds.
#
#   bench/run_command_time.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/magnetar-run-command.XXXXXX)"
node_pid=
cleanup() {
  [ -n "$node_pid" ] && kill "$node_pid" 2>/dev/null && wait "$node_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

git clone -q "$root" "$work/clone"
export CCACHE_DIR="$work/ccache"  # empty: every compile is a miss
cd "$work/clone"
echo "run_command_time: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

step() {
  local what="$1"; shift
  local start
  start=$(date +%s.%N)
  "$@" > "$work/$what.log" 2>&1 || { tail -20 "$work/$what.log" >&2; exit 1; }
  awk -v a="$start" -v b="$(date +%s.%N)" -v w="$what" 'BEGIN {printf "  %-14s %6.1f s\n", w, b - a}'
}

began=$(date +%s.%N)
# The README's first command, step by step (the same commands).
step install-deps packaging/install-deps.sh
step configure cmake -G Ninja -S . -B build -DMAGNETAR_BUILD_TESTS=OFF -DMAGNETAR_BUILD_BENCH=OFF
step build cmake --build build -j"$(nproc)" --target magnetar
start=$(date +%s.%N)
./build/magnetar standalone --data-dir "$work/data" --pulsar-port 0 --kafka-port 0 --amqp-port 0 --http-port 0 \
  > "$work/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 1 600); do
  grep -q "Ready" "$work/node.log" && break
  sleep 0.05
done
grep -q "Ready" "$work/node.log" || { tail -20 "$work/node.log" >&2; exit 1; }
ended=$(date +%s.%N)
awk -v a="$start" -v b="$ended" 'BEGIN {printf "  %-14s %6.1f s\n", "to Ready", b - a}'
awk -v a="$began" -v b="$ended" 'BEGIN {printf "run command, clone to Ready: %.1f s (%d min %02d s)\n", b - a,
  int((b - a) / 60), int(b - a) % 60}'
