# Sourced by the end-to-end bench scripts: one standalone node on ports
# chosen by the kernel, with a fresh data directory, stopped and removed when
# the script exits.
#   start_bench_node NAME [extra standalone flags...]
# REQUIRES: $bin (the magnetar binary). Sets $data, $node_pid, $url (Pulsar)
# and $http (REST).
start_bench_node() {
  local name="$1"
  shift
  data="$(mktemp -d "${TMPDIR:-/tmp}/magnetar-$name.XXXXXX")"
  "$bin" standalone --data-dir "$data" --http-port 0 --pulsar-port 0 --kafka-port 0 --amqp-port 0 "$@" \
    >"$data.log" 2>&1 &
  node_pid=$!
  trap 'kill "$node_pid" && wait "$node_pid" || true; rm -rf "$data" "$data.log"' EXIT
  for _ in $(seq 100); do [ -s "$data/ports.json" ] && break; sleep 0.05; done
  url="pulsar://127.0.0.1:$(bench_node_port pulsar)"
  http="http://127.0.0.1:$(bench_node_port http)"
}

bench_node_port() {
  /usr/bin/python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$data/ports.json" "$1"
}
