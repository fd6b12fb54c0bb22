// Time bases and bucket bounds for the stage histograms that say where a
// request's time went (storage/journal.h, broker/publish_stages.h).
#pragma once

#include <cstdint>
#include <vector>

namespace magnetar::common {

// Steady-clock nanoseconds (CLOCK_MONOTONIC; a vDSO read, ~20 ns).
int64_t monotonic_ns();
// The same clock as the kernel last ticked it (CLOCK_MONOTONIC_COARSE: a
// few ns to read, a few ms of resolution): for timing that only needs to
// tell milliseconds apart on a path that runs per task.
int64_t monotonic_coarse_ns();

// Seconds from `from_ns` to `to_ns`; zero when the clock did not move.
inline double seconds_between(int64_t from_ns, int64_t to_ns) {
  return to_ns > from_ns ? static_cast<double>(to_ns - from_ns) / 1e9 : 0;
}

// 1 us to 16 s in steps of 2^(1/4): a percentile read from the buckets is
// within ~19% (Histogram::latency_bounds() doubles).
std::vector<double> stage_latency_bounds();

}  // namespace magnetar::common
