#include "broker/token_bucket.h"

#include <algorithm>

#include "common/stage_timing.h"

namespace magnetar::broker {

namespace {

constexpr __int128 kMaxRefill = int64_t{1} << 60;

int64_t capacity_of(int64_t rate) { return std::max<int64_t>(1, rate / TokenBucket::kBurstDivisor); }

}  // namespace

int64_t limiter_now_ns() { return common::monotonic_ns(); }

void TokenBucket::set_rate(int64_t per_second, int64_t now_ns) {
  int64_t rate = per_second > 0 ? per_second : 0;
  if (rate_.load(std::memory_order_relaxed) == rate) return;
  tokens_.store(capacity_of(rate), std::memory_order_relaxed);
  refilled_ns_.store(now_ns, std::memory_order_relaxed);
  rate_.store(rate, std::memory_order_release);
}

void TokenBucket::refill(int64_t rate, int64_t now_ns) {
  int64_t last = refilled_ns_.load(std::memory_order_acquire);
  int64_t elapsed = now_ns - last;
  if (elapsed <= 0) return;
  __int128 add = static_cast<__int128>(elapsed) * rate / kNanosPerSecond;
  if (add == 0) return;
  // Only the time worth whole tokens is used up: the rest counts next time.
  int64_t next = add >= kMaxRefill ? now_ns : last + static_cast<int64_t>(add * kNanosPerSecond / rate);
  if (!refilled_ns_.compare_exchange_strong(last, next, std::memory_order_acq_rel)) return;  // another refilled
  const int64_t cap = capacity_of(rate);
  const int64_t add64 = static_cast<int64_t>(std::min(add, kMaxRefill));
  int64_t t = tokens_.load(std::memory_order_relaxed);
  while (!tokens_.compare_exchange_weak(t, std::min(cap, t + add64), std::memory_order_relaxed)) {
  }
}

int64_t TokenBucket::take(int64_t n, int64_t now_ns) {
  const int64_t rate = rate_.load(std::memory_order_acquire);
  if (rate <= 0) return 0;
  refill(rate, now_ns);
  const int64_t left = tokens_.fetch_sub(n, std::memory_order_relaxed) - n;
  if (left >= 0) return 0;
  // The debt is paid when -left tokens have come in, counted from the last refill.
  const int64_t since = now_ns - refilled_ns_.load(std::memory_order_relaxed);
  const __int128 pay = (static_cast<__int128>(-left) * kNanosPerSecond + rate - 1) / rate;
  return static_cast<int64_t>(std::max<__int128>(1, pay - std::max<int64_t>(0, since)));
}

int64_t TokenBucket::available(int64_t now_ns) {
  const int64_t rate = rate_.load(std::memory_order_acquire);
  if (rate <= 0) return 0;
  refill(rate, now_ns);
  return tokens_.load(std::memory_order_relaxed);
}

int64_t TokenBucket::time_to_token(int64_t now_ns) {
  const int64_t rate = rate_.load(std::memory_order_acquire);
  if (rate <= 0) return 0;
  const int64_t tokens = available(now_ns);
  if (tokens > 0) return 0;
  const int64_t since = now_ns - refilled_ns_.load(std::memory_order_relaxed);
  const __int128 pay = (static_cast<__int128>(1 - tokens) * kNanosPerSecond + rate - 1) / rate;
  return static_cast<int64_t>(std::max<__int128>(1, pay - std::max<int64_t>(0, since)));
}

void RateBuckets::set(int64_t messages_per_second, int64_t bytes_per_second, int64_t now_ns) {
  messages.set_rate(messages_per_second, now_ns);
  bytes.set_rate(bytes_per_second, now_ns);
}

int64_t RateBuckets::take(int64_t n_messages, int64_t n_bytes, int64_t now_ns) {
  return std::max(messages.take(n_messages, now_ns), bytes.take(n_bytes, now_ns));
}

DispatchAllowance dispatch_allowance(std::initializer_list<RateBuckets*> limits, int64_t now_ns) {
  DispatchAllowance a;
  auto consider = [&](TokenBucket& b, int64_t& allowance) {
    if (!b.limited()) return;
    const int64_t tokens = b.available(now_ns);
    allowance = std::min(allowance, std::max<int64_t>(0, tokens));
    if (tokens <= 0) a.wait_ns = std::max(a.wait_ns, b.time_to_token(now_ns));
  };
  for (RateBuckets* buckets : limits) {
    if (buckets == nullptr) continue;
    consider(buckets->messages, a.messages);
    consider(buckets->bytes, a.bytes);
  }
  return a;
}

int64_t charge_dispatch(std::initializer_list<RateBuckets*> limits, int64_t messages, int64_t bytes, int64_t now_ns) {
  int64_t wait = 0;
  for (RateBuckets* buckets : limits) {
    if (buckets != nullptr) wait = std::max(wait, buckets->take(messages, bytes, now_ns));
  }
  return wait;
}

}  // namespace magnetar::broker
