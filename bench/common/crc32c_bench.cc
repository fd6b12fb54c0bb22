// CRC32C throughput (bytes/s), hardware and software, against memcpy of the
// same buffer measured in the same run (`memcpy_ratio`: CRC speed over copy
// speed; 1.0 means checksumming costs as much as copying the bytes once).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "common/crc32c.h"

namespace {

using magnetar::common::crc32c::extend_hardware;
using magnetar::common::crc32c::extend_software;
using magnetar::common::crc32c::hardware_available;

std::map<int64_t, double> g_memcpy_bytes_per_second;

std::vector<uint8_t> buffer(size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + 7);
  return b;
}

void BM_Memcpy(benchmark::State& state) {
  auto src = buffer(static_cast<size_t>(state.range(0)));
  std::vector<uint8_t> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
}


template <uint32_t (*Fn)(uint32_t, const void*, size_t)>
void BM_Crc32c(benchmark::State& state) {
  if (Fn == &extend_hardware && !hardware_available()) {
    state.SkipWithError("this CPU has no SSE4.2 crc32 instruction");
    return;
  }
  auto data = buffer(static_cast<size_t>(state.range(0)));
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = Fn(crc, data.data(), data.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  auto it = g_memcpy_bytes_per_second.find(state.range(0));
  if (it != g_memcpy_bytes_per_second.end()) {
    state.counters["memcpy_ratio"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * static_cast<double>(state.range(0)) / it->second,
        benchmark::Counter::kIsRate);
  }
}

// Measures memcpy once per size, outside Google Benchmark's loop, so the
// CRC benchmarks can report a ratio against it.
void measure_memcpy_baselines() {
  for (int64_t n : {64, 4096, 1 << 20}) {
    auto src = buffer(static_cast<size_t>(n));
    std::vector<uint8_t> dst(src.size());
    size_t rounds = static_cast<size_t>((512ll << 20) / n);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < rounds; ++i) {
      std::memcpy(dst.data(), src.data(), src.size());
      benchmark::DoNotOptimize(dst.data());
      benchmark::ClobberMemory();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g_memcpy_bytes_per_second[n] = static_cast<double>(rounds) * static_cast<double>(n) / secs;
  }
}

BENCHMARK(BM_Memcpy)->Arg(64)->Arg(4096)->Arg(1 << 20);
BENCHMARK_TEMPLATE(BM_Crc32c, extend_hardware)->Arg(64)->Arg(4096)->Arg(1 << 20);
BENCHMARK_TEMPLATE(BM_Crc32c, extend_software)->Arg(64)->Arg(4096)->Arg(1 << 20);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  measure_memcpy_baselines();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
