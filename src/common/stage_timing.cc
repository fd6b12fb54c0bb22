#include "common/stage_timing.h"

#include <chrono>
#include <cmath>

namespace magnetar::common {

int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<double> stage_latency_bounds() {
  std::vector<double> b;
  for (int i = 0; i <= 24 * 4; ++i) b.push_back(1e-6 * std::pow(2.0, i / 4.0));
  return b;
}

}  // namespace magnetar::common
