#include "common/stage_timing.h"

#include <chrono>
#include <cmath>
#include <ctime>

namespace magnetar::common {

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t monotonic_coarse_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::vector<double> stage_latency_bounds() {
  std::vector<double> b;
  for (int i = 0; i <= 24 * 4; ++i) b.push_back(1e-6 * std::pow(2.0, i / 4.0));
  return b;
}

}  // namespace magnetar::common
