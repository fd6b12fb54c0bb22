#!/usr/bin/env bash
# Installs what Magnetar needs on Debian 12, from Debian's packages (and npm
# for the console) only. Idempotent: a second run installs nothing and prints
# nothing.
#
#   packaging/install-deps.sh          what building and running the node needs
#   packaging/install-deps.sh --test   that, and what the tests and benchmarks add
set -euo pipefail

with_tests=0
for arg in "$@"; do
  case "$arg" in
    --test) with_tests=1 ;;
    *) echo "install-deps: unknown argument '$arg' (only --test)" >&2; exit 2 ;;
  esac
done

# Building and running the node. Each entry is added by the change that
# first uses it.
packages=(
  build-essential cmake pkg-config ccache
  ninja-build           # the build: starts a library's compiles before the libraries it links are done
  libuv1-dev            # runtime/: one event loop per reactor thread
  libspdlog-dev libfmt-dev  # common/: logging
  libcli11-dev          # cli/: flags and config files
  libhttp-parser-dev    # admin/: HTTP/1.1 request parsing
  nlohmann-json3-dev    # admin/: JSON bodies
  libleveldb-dev        # metadata/: the local metadata store (storage/ uses it too)
  libflatbuffers-dev flatbuffers-compiler  # metadata/: versioned records (.fbs -> flatc)
  libraft-dev           # cluster/: Raft consensus for the replicated metadata store
  libprotobuf-dev protobuf-compiler  # protocol/pulsar/: the Pulsar wire schema (.proto -> protoc)
  liblz4-dev libzstd-dev libsnappy-dev zlib1g-dev  # client/: Pulsar message compression codecs
  libssl-dev            # security/: JWT signatures with libcrypto; runtime/, client/: TLS listeners and clients with libssl
  libre2-dev            # protocol/pulsar/: clients' topic patterns matched in linear time
)

# What the tests and benchmarks add (--test).
test_packages=(
  libgtest-dev libgmock-dev  # tests/unit
  libbenchmark-dev      # bench/
  prometheus            # tests/integration: promtool checks /metrics
  python3               # tests/integration: the test scripts (Debian's /usr/bin/python3)
  chromium              # tests/e2e: the web console in a real browser, driven by playwright-core
  python3-protobuf      # tests/integration: Pulsar frames built from our pulsar_api.proto (protoc --python_out)
  nats-server           # bench/startup.py: the baseline broker for start-up and idle cost
  rpm                   # packaging/: rpmbuild makes the .rpm
  lintian               # tests/packaging: checks the .deb against Debian policy
  kcat python3-confluent-kafka  # tests/integration: real Kafka clients (librdkafka) on the Kafka port
  python3-pika amqp-tools  # tests/integration: real AMQP 0-9-1 clients on the AMQP port
  librabbitmq-client-java default-jdk-headless  # tests/integration: the RabbitMQ Java client, compiled by javac
  librdkafka-dev        # bench/kafka: kafka_perf, the Kafka produce path through librdkafka
  librabbitmq-dev rabbitmq-server  # bench/amqp: amqp_perf (librabbitmq) and the broker it is compared with
  iproute2              # tests/integration: ip netns, veth, bridge and ip rule cut links between cluster members
)
if [ "$with_tests" -eq 1 ]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js runs the real npm clients in the integration tests; take Debian's
# when the machine has none.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages, pinned by each folder's package-lock.json; installed again
# only when the lock file changed: the web console's build tools (TypeScript,
# Vite; the CMake build runs them), the integration tests' clients
# (pulsar-flex, KafkaJS, amqplib), and playwright-core for tests/e2e (no
# browser download: it drives Debian's chromium).
root="$(cd "$(dirname "$0")/.." && pwd)"
npm_dirs=(web-ui)  # the console the binary embeds
if [ "$with_tests" -eq 1 ]; then
  npm_dirs+=(tests/integration/pulsar_client tests/integration/kafkajs tests/integration/amqp_client tests/e2e)
fi
for dir in "${npm_dirs[@]}"; do
  lock="$root/$dir/package-lock.json"
  stamp="$root/$dir/node_modules/.package-lock.json"
  if [ ! -f "$stamp" ] || [ "$lock" -nt "$stamp" ]; then
    echo "install-deps: npm ci in $dir"
    (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  fi
done
