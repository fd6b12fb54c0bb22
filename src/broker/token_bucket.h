// Token buckets: the rate limits' arithmetic (publish_limiter.h for
// publishing, subscription.h and tenant_state.h for dispatch), shared by
// every reactor without a lock.
//
// A bucket holds a tenth of a second of its rate, starts full and may run
// into debt: whoever takes tokens is never refused and waits until the
// debt is paid. Over any window the admitted rate is therefore the
// configured rate plus at most one bucket and one take.
//
// Threads: every method may be called from any thread; none blocks or
// allocates.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>

namespace magnetar::broker {

// A lock-free token bucket.
class TokenBucket {
 public:
  static constexpr int64_t kNanosPerSecond = 1'000'000'000;
  // The bucket holds this fraction of a second of its rate (at least one token).
  static constexpr int64_t kBurstDivisor = 10;

  // Any rate <= 0 means unlimited. A changed rate starts with a full bucket.
  void set_rate(int64_t per_second, int64_t now_ns);
  int64_t rate() const { return rate_.load(std::memory_order_relaxed); }
  bool limited() const { return rate() > 0; }
  // Takes `n` tokens, into debt if need be. Answers how long (ns) from
  // `now_ns` until the debt is paid; 0 when the bucket is not in debt.
  int64_t take(int64_t n, int64_t now_ns);
  // Tokens left (negative: debt), after refilling up to `now_ns`.
  int64_t available(int64_t now_ns);
  // How long (ns) from `now_ns` until at least one token is there; 0 when
  // one is, or when unlimited.
  int64_t time_to_token(int64_t now_ns);

 private:
  void refill(int64_t rate, int64_t now_ns);

  std::atomic<int64_t> rate_{0};
  std::atomic<int64_t> tokens_{0};
  std::atomic<int64_t> refilled_ns_{0};  // time the tokens were last brought up to
};

// Messages and bytes per second: one bucket each. Also what dispatch rate
// limits are made of (subscription.h).
struct RateBuckets {
  TokenBucket messages;
  TokenBucket bytes;
  void set(int64_t messages_per_second, int64_t bytes_per_second, int64_t now_ns);
  bool limited() const { return messages.limited() || bytes.limited(); }
  int64_t take(int64_t messages, int64_t bytes, int64_t now_ns);
};

// What a reader may take now under the dispatch limits that apply to it.
struct DispatchAllowance {
  int64_t messages = INT64_MAX;  // INT64_MAX: no message limit
  // Tokens of the tightest bytes limit, INT64_MAX without one. Bytes are
  // known only once read, so a reader may go over this; it must not read
  // while it is 0.
  int64_t bytes = INT64_MAX;
  int64_t wait_ns = 0;  // when nothing is allowed: until every spent limit has a token again
  bool allowed() const { return messages > 0 && bytes > 0; }
};
// The allowance under every limit in `limits` (null and unlimited ones are
// skipped).
DispatchAllowance dispatch_allowance(std::initializer_list<RateBuckets*> limits, int64_t now_ns);
// Charges what was delivered to every limit in `limits` (null ones are
// skipped), into debt if need be. Answers how long (ns) until the deepest
// debt is paid; 0 when none is in debt.
int64_t charge_dispatch(std::initializer_list<RateBuckets*> limits, int64_t messages, int64_t bytes, int64_t now_ns);

// Now on the clock the buckets use.
int64_t limiter_now_ns();

}  // namespace magnetar::broker
