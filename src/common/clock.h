// Wall-clock time as the broker writes it: milliseconds since the epoch, and
// the ISO 8601 UTC form Pulsar's stats and headers use.
#pragma once

#include <cstdint>
#include <string>

namespace magnetar::common {

// Milliseconds since the Unix epoch (system clock).
int64_t wall_clock_ms();
// Milliseconds on a clock that never jumps (steady clock): for deadlines.
int64_t monotonic_ms();
// "2026-11-30T12:00:00.000Z" for `ms` since the epoch.
std::string iso8601_utc(int64_t ms);

}  // namespace magnetar::common
