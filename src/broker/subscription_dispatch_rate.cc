// Subscription's dispatch rate limits (subscription.h): reads for delivery
// wait while a limit is spent, then resume on a timer, so consumers get a
// smooth flow at the limit instead of bursts or errors.
#include <algorithm>
#include <chrono>

#include "broker/subscription.h"
#include "runtime/reactor.h"

namespace magnetar::broker {

void Subscription::set_dispatch_limits(std::shared_ptr<RateBuckets> topic, std::shared_ptr<RateBuckets> tenant,
                                       int64_t own_msgs, int64_t own_bytes) {
  topic_dispatch_ = std::move(topic);
  tenant_dispatch_ = std::move(tenant);
  own_dispatch_.set(own_msgs, own_bytes, limiter_now_ns());
  if (!dispatch_rate_limited() && dispatch_timer_) {
    dispatch_timer_->cancel();
    schedule_dispatch();
  }
}

int64_t Subscription::dispatch_allowance() {
  const DispatchAllowance a =
      broker::dispatch_allowance({topic_dispatch_.get(), tenant_dispatch_.get(), &own_dispatch_}, limiter_now_ns());
  if (a.allowed()) return a.messages;
  ++dispatch_limited_times_;
  if (!dispatch_timer_) dispatch_timer_ = std::make_unique<runtime::Timer>(*runtime::Reactor::current());
  std::weak_ptr<bool> alive = alive_;
  auto ms = std::chrono::milliseconds((std::max<int64_t>(a.wait_ns, 1) + 999'999) / 1'000'000);
  dispatch_timer_->once(ms, [this, alive]() {
    if (!alive.expired()) schedule_dispatch();
  });
  return 0;
}

void Subscription::charge_dispatch(int64_t messages, int64_t bytes) {
  broker::charge_dispatch({topic_dispatch_.get(), tenant_dispatch_.get(), &own_dispatch_}, messages, bytes,
                          limiter_now_ns());
}

}  // namespace magnetar::broker
