// Subscription's dispatch rate limits (subscription.h): reads for delivery
// wait while a limit is spent, then resume on a timer, so consumers get a
// smooth flow at the limit instead of bursts or errors.
#include <algorithm>
#include <chrono>

#include "broker/subscription.h"
#include "runtime/reactor.h"

namespace magnetar::broker {

void Subscription::set_dispatch_limits(std::shared_ptr<RateBuckets> topic, int64_t own_msgs, int64_t own_bytes) {
  topic_dispatch_ = std::move(topic);
  own_dispatch_.set(own_msgs, own_bytes, limiter_now_ns());
  if (!dispatch_rate_limited() && dispatch_timer_) {
    dispatch_timer_->cancel();
    schedule_dispatch();
  }
}

int64_t Subscription::dispatch_allowance() {
  const int64_t now = limiter_now_ns();
  int64_t allowance = INT64_MAX;
  int64_t wait = 0;
  auto consider = [&](TokenBucket& b, bool counts_messages) {
    if (!b.limited()) return;
    int64_t tokens = b.available(now);
    // Bytes are known only once read: a bytes bucket just has to be out of debt.
    allowance = std::min(allowance, counts_messages ? tokens : (tokens > 0 ? INT64_MAX : 0));
    if (tokens <= 0) wait = std::max(wait, b.time_to_token(now));
  };
  for (RateBuckets* buckets : {topic_dispatch_.get(), &own_dispatch_}) {
    if (buckets == nullptr) continue;
    consider(buckets->messages, true);
    consider(buckets->bytes, false);
  }
  if (allowance > 0) return allowance;
  ++dispatch_limited_times_;
  if (!dispatch_timer_) dispatch_timer_ = std::make_unique<runtime::Timer>(*runtime::Reactor::current());
  std::weak_ptr<bool> alive = alive_;
  auto ms = std::chrono::milliseconds((std::max<int64_t>(wait, 1) + 999'999) / 1'000'000);
  dispatch_timer_->once(ms, [this, alive]() {
    if (!alive.expired()) schedule_dispatch();
  });
  return 0;
}

void Subscription::charge_dispatch(int64_t messages, int64_t bytes) {
  const int64_t now = limiter_now_ns();
  if (topic_dispatch_) topic_dispatch_->take(messages, bytes, now);
  own_dispatch_.take(messages, bytes, now);
}

}  // namespace magnetar::broker
