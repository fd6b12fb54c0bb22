// RateMeter: per-second rates from cumulative counters, for stats and metrics.
//
// update() compares the counters with the sample taken at least kWindow
// earlier and answers (delta / elapsed). Calls closer together than kWindow
// answer the last rates without taking a new sample, so frequent readers
// (scrapes, admin calls) do not shrink the window to nothing. The first
// call answers zero rates.
//
// Not thread-safe: owned by the topic's home reactor like the topic.
#pragma once

#include <chrono>
#include <cstdint>

namespace magnetar::broker {

class RateMeter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kWindow{1000};

  struct Rates {
    double messages = 0;  // per second
    double bytes = 0;     // per second
  };

  RateMeter() = default;
  // A meter whose first sample was (messages, bytes) at `at`.
  RateMeter(uint64_t messages, uint64_t bytes, Clock::time_point at)
      : sampled_(true), messages_(messages), bytes_(bytes), at_(at) {}

  Rates update(uint64_t messages, uint64_t bytes, Clock::time_point now) {
    if (!sampled_) {
      sampled_ = true;
      take(messages, bytes, now);
      return rates_;
    }
    const auto elapsed = now - at_;
    if (elapsed < kWindow) return rates_;
    const double seconds = std::chrono::duration<double>(elapsed).count();
    // Counters only grow; a smaller value means they were reset: start over.
    rates_.messages = messages >= messages_ ? static_cast<double>(messages - messages_) / seconds : 0;
    rates_.bytes = bytes >= bytes_ ? static_cast<double>(bytes - bytes_) / seconds : 0;
    take(messages, bytes, now);
    return rates_;
  }

 private:
  void take(uint64_t messages, uint64_t bytes, Clock::time_point now) {
    messages_ = messages;
    bytes_ = bytes;
    at_ = now;
  }

  bool sampled_ = false;
  uint64_t messages_ = 0;
  uint64_t bytes_ = 0;
  Clock::time_point at_{};
  Rates rates_{};
};

}  // namespace magnetar::broker
