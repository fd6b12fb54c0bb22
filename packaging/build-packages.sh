#!/usr/bin/env bash
# Builds the .deb and the .rpm of this tree (docs/packaging.md).
#
#   packaging/build-packages.sh [BUILD_DIR]     default: build-packages
#
# Configures BUILD_DIR without tests or benchmarks, builds only the magnetar
# binary, then runs cpack; the packages land in BUILD_DIR/packages/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-packages}"

cmake -S "$root" -B "$build" -DMAGNETAR_BUILD_TESTS=OFF -DMAGNETAR_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target magnetar magnetar_man
(cd "$build" && cpack --config CPackConfig.cmake)
ls -1 "$build"/packages/*.deb "$build"/packages/*.rpm 2>/dev/null
