#include "trial/signup_limiter.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace magnetar::trial {

void SignupLimiter::refill(Bucket& b, uint32_t capacity, int64_t now_ms) const {
  const double window_ms = static_cast<double>(std::chrono::milliseconds(limits_.window).count());
  if (b.tokens < 0) {
    b.tokens = capacity;
  } else if (now_ms > b.at_ms) {
    b.tokens = std::min<double>(capacity, b.tokens + (now_ms - b.at_ms) * capacity / window_ms);
  }
  b.at_ms = now_ms;
}

int64_t SignupLimiter::wait_ms(const Bucket& b, uint32_t capacity) const {
  const double window_ms = static_cast<double>(std::chrono::milliseconds(limits_.window).count());
  return static_cast<int64_t>(std::ceil((1.0 - b.tokens) * window_ms / capacity));
}

void SignupLimiter::forget_full(int64_t now_ms) {
  for (auto it = by_address_.begin(); it != by_address_.end();) {
    refill(it->second, limits_.per_address, now_ms);
    it = it->second.tokens >= limits_.per_address ? by_address_.erase(it) : std::next(it);
  }
}

int64_t SignupLimiter::try_take(const std::string& address, int64_t now_ms) {
  auto seconds = [](int64_t ms) { return std::max<int64_t>(1, (ms + 999) / 1000); };
  std::lock_guard lock(mu_);
  Bucket* mine = nullptr;
  if (limits_.per_address > 0) {
    auto it = by_address_.find(address);
    if (it == by_address_.end()) {
      if (by_address_.size() >= kMaxAddresses) forget_full(now_ms);
      if (by_address_.size() >= kMaxAddresses) return seconds(std::chrono::milliseconds(limits_.window).count());
      it = by_address_.emplace(address, Bucket{-1, 0}).first;
    }
    mine = &it->second;
    refill(*mine, limits_.per_address, now_ms);
    if (mine->tokens < 1) return seconds(wait_ms(*mine, limits_.per_address));
  }
  if (limits_.total > 0) {
    refill(total_, limits_.total, now_ms);
    if (total_.tokens < 1) return seconds(wait_ms(total_, limits_.total));
    total_.tokens -= 1;
  }
  if (mine != nullptr) mine->tokens -= 1;
  return 0;
}

}  // namespace magnetar::trial
