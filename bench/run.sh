#!/usr/bin/env bash
# Builds and runs every benchmark, printing each figure and its ratio to the
# baseline measured in the same run.
#
#   bench/run.sh                 # all benchmarks
#   bench/run.sh crc32c mailbox  # only these (names of bench/*/<name>_bench)
#   BUILD_DIR=build bench/run.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
"$root/packaging/install-deps.sh" --test
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGNETAR_BUILD_BENCH=ON >/dev/null
mapfile -t all < <(cd "$root/bench" && ls */*_bench.cc | sed 's|.*/||; s|_bench.cc$||' | sort)
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=("${all[@]}")
for name in "${wanted[@]}"; do
  echo "== ${name}_bench"
  cmake --build "$build" --target "${name}_bench" -j"$(nproc)" >/dev/null
  exe=$(find "$build/bench" -name "${name}_bench" -type f -executable | head -1)
  "$exe" --benchmark_counters_tabular=true
done
