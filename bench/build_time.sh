#!/usr/bin/env bash
# How long the README's run command takes to build the binary from a fresh
# clone with the packages installed and an empty compiler cache: configure,
# the web console, every compile and the link, timed end to end, with the
# compilers' own CPU seconds summed (a figure the machine's other load
# barely moves). With --baseline it builds the same tree a second time as
# every file was built before unity batches, line-table debug info and -O1
# for the control-plane libraries (-DMAGNETAR_UNITY_BUILD=OFF
# -DMAGNETAR_FULL_DEBUG_INFO=ON -DMAGNETAR_CONTROL_PLANE_OPT_LEVEL=2) and
# prints the ratio.
#
#   bench/build_time.sh [--baseline] [--jobs N] [--generator "Unix Makefiles"]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="$(nproc)"
baseline=0
# The generator the README's commands use.
generator=Ninja
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline=1 ;;
    --generator) generator="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    *) echo "build_time: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

work="$(mktemp -d /tmp/magnetar-build-time.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# A clone of the committed tree; the console's npm packages are the ones
# install-deps.sh put in place (not downloaded again).
git -C "$root" archive HEAD | tar -x -C "$work"
mkdir -p "$work/web-ui/node_modules"
cp -a "$root/web-ui/node_modules/." "$work/web-ui/node_modules/"
# As install-deps.sh leaves it: installed after the lock file was written,
# so the build does not run npm ci again.
touch "$work/web-ui/node_modules/.package-lock.json"

# Every compiler run through /usr/bin/time, ccache out of the way.
cat > "$work/timed-cc.sh" <<'EOF'
#!/usr/bin/env bash
# "user system wall output start end" per compiler run.
out=unknown
prev=
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="${arg#*CMakeFiles/}"
  prev="$arg"
done
start=$(date +%s.%N)
times=$(mktemp)
/usr/bin/time -o "$times" -f "%U %S %e" "$@"
rc=$?
echo "$(tail -1 "$times") $out $start $(date +%s.%N)" >> "$BUILD_TIME_LOG"
rm -f "$times"
exit $rc
EOF
chmod +x "$work/timed-cc.sh"

# One clean build of the magnetar target with `flags`; prints seconds of
# wall clock and of compiler CPU.
build() {
  local name="$1"; shift
  local dir="$work/build-$name"
  export BUILD_TIME_LOG="$work/$name.times"
  : > "$BUILD_TIME_LOG"
  local start end
  start=$(date +%s.%N)
  CCACHE_DISABLE=1 cmake -S "$work" -B "$dir" -G "$generator" -DMAGNETAR_BUILD_TESTS=OFF -DMAGNETAR_BUILD_BENCH=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER="$work/timed-cc.sh" -DCMAKE_C_COMPILER_LAUNCHER="$work/timed-cc.sh" "$@" \
    > "$work/$name.log" 2>&1
  CCACHE_DISABLE=1 cmake --build "$dir" -j"$jobs" --target magnetar >> "$work/$name.log" 2>&1 &
  local pid=$!
  # Progress every 30 s; the end is noticed within a tenth of a second.
  local ticks=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.1
    ticks=$((ticks + 1))
    if [ $((ticks % 300)) -eq 0 ]; then
      printf '  %s: %s compiler runs so far\n' "$name" "$(wc -l < "$BUILD_TIME_LOG")" >&2
    fi
  done
  wait "$pid" || { tail -20 "$work/$name.log" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$start $end" > "$work/$name.span"
  local cpu
  cpu=$(awk '{s += $1 + $2} END {printf "%.0f", s}' "$BUILD_TIME_LOG")
  echo "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}') $cpu $(wc -l < "$BUILD_TIME_LOG")"
}

echo "build_time: $(nproc) cores, -j$jobs, $generator, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
read -r wall cpu runs < <(build now)
printf 'run command build: %.0f s wall, %s s compiler CPU in %s compiler runs\n' "$wall" "$cpu" "$runs"
echo "the longest compiler runs (wall s, CPU s, output, started at s):"
first=$(awk 'NR == 1 || $5 < m {m = $5} END {print m}' "$work/now.times")
awk -v t0="$first" '{printf "  %6.1f %6.1f %s %.0f\n", $3, $1 + $2, $4, $5 - t0}' "$work/now.times" | sort -rn | head -10
# How busy the cores were from the first compile to the last one's end.
awk -v cores="$jobs" '{print $5, 1; print $6, -1}' "$work/now.times" | sort -n | awk -v cores="$jobs" '
  NR == 1 {t = $1; first = $1}
  {if (running < cores) idle += (cores - running) * ($1 - t); t = $1; running += $2}
  END {printf "compiles from %.0f s to %.0f s after the first began; %.0f core-seconds idle meanwhile\n", 0, t - first, idle}'
read -r began ended < "$work/now.span"
last=$(awk 'NR == 1 || $6 > m {m = $6} END {print m}' "$work/now.times")
awk -v b="$began" -v f="$first" -v l="$last" -v e="$ended" 'BEGIN {
  printf "before the first compile (configure, generators): %.1f s; after the last one (archives, link): %.1f s\n",
    f - b, e - l}'
if [ -f "$work/build-now/.ninja_log" ]; then
  echo "the last steps (start s, end s, output; from the build's first step):"
  grep -v '^#' "$work/build-now/.ninja_log" | sort -n -k2 | tail -8 |
    awk '{printf "  %6.1f %6.1f %s\n", $1 / 1000, $2 / 1000, $4}'
fi
if [ "$baseline" -eq 1 ]; then
  read -r bwall bcpu bruns < <(build baseline -DMAGNETAR_UNITY_BUILD=OFF -DMAGNETAR_FULL_DEBUG_INFO=ON \
    -DMAGNETAR_CONTROL_PLANE_OPT_LEVEL=2)
  printf 'baseline (file by file, full debug info, all -O2): %.0f s wall, %s s compiler CPU in %s compiler runs\n' \
    "$bwall" "$bcpu" "$bruns"
  awk -v bw="$bwall" -v w="$wall" -v bc="$bcpu" -v c="$cpu" \
    'BEGIN {printf "ratio: %.2fx less wall, %.2fx less compiler CPU\n", bw / w, bc / c}'
fi
