// SignupLimiter: how many trial sign-ups one client address, and all of
// them together, may make in a window. Each is a token bucket holding
// `per_window` sign-ups that refills evenly over the window, so a burst of
// `per_window` is allowed and then one every window / per_window.
//
// The table of addresses is bounded (kMaxAddresses): when full, addresses
// whose buckets have refilled are forgotten first; if none has, the new
// address is refused (a storm from many addresses meets the global bucket
// anyway).
//
// Threads: any; one mutex, taken once per sign-up attempt.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace magnetar::trial {

class SignupLimiter {
 public:
  struct Limits {
    uint32_t per_address = 5;   // sign-ups one address may make per window (0: no limit)
    uint32_t total = 200;       // sign-ups all addresses together may make per window (0: no limit)
    std::chrono::seconds window{3600};
  };
  static constexpr size_t kMaxAddresses = 100000;

  explicit SignupLimiter(Limits limits) : limits_(limits) {}

  // Takes one sign-up for `address` at `now_ms` (a monotonic clock): 0 when
  // allowed, else how many seconds until one would be (Retry-After, >= 1).
  int64_t try_take(const std::string& address, int64_t now_ms);

 private:
  struct Bucket {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  // Refills `b` to `now_ms` against a capacity of `capacity`.
  void refill(Bucket& b, uint32_t capacity, int64_t now_ms) const;
  // Milliseconds until `b` holds one token.
  int64_t wait_ms(const Bucket& b, uint32_t capacity) const;
  void forget_full(int64_t now_ms);

  const Limits limits_;
  std::mutex mu_;
  Bucket total_{-1, 0};  // tokens < 0: not yet filled
  std::unordered_map<std::string, Bucket> by_address_;
};

}  // namespace magnetar::trial
