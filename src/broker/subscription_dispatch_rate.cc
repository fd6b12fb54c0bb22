// Subscription's dispatch rate limits (subscription.h): reads for delivery
// wait while a limit is spent, then resume on a timer, so consumers get a
// smooth flow at the limit instead of bursts or errors.
#include <algorithm>
#include <chrono>

#include "broker/subscription.h"
#include "runtime/reactor.h"

namespace magnetar::broker {

void Subscription::set_dispatch_limits(std::shared_ptr<RateBuckets> topic, RateBuckets* tenant, int64_t own_msgs,
                                       int64_t own_bytes) {
  tenant_dispatch_ = tenant;
  if (!dispatch_ && (topic != nullptr || own_msgs > 0 || own_bytes > 0)) dispatch_ = std::make_unique<DispatchLimits>();
  if (dispatch_) {
    dispatch_->topic = std::move(topic);
    dispatch_->own.set(own_msgs, own_bytes, limiter_now_ns());
  }
  if (!dispatch_rate_limited() && dispatch_ && dispatch_->timer) {
    dispatch_->timer->cancel();
    schedule_dispatch();
  }
}

int64_t Subscription::dispatch_allowance() {
  RateBuckets* topic = dispatch_ ? dispatch_->topic.get() : nullptr;
  RateBuckets* own = dispatch_ ? &dispatch_->own : nullptr;
  const DispatchAllowance a = broker::dispatch_allowance({topic, tenant_dispatch_, own}, limiter_now_ns());
  if (a.allowed()) return a.messages;
  if (!dispatch_) dispatch_ = std::make_unique<DispatchLimits>();  // the tenant's limit held it back
  ++dispatch_->limited_times;
  if (!dispatch_->timer) dispatch_->timer = std::make_unique<runtime::Timer>(*runtime::Reactor::current());
  std::weak_ptr<bool> alive = liveness();
  auto ms = std::chrono::milliseconds((std::max<int64_t>(a.wait_ns, 1) + 999'999) / 1'000'000);
  dispatch_->timer->once(ms, [this, alive]() {
    if (!alive.expired()) schedule_dispatch();
  });
  return 0;
}

void Subscription::charge_dispatch(int64_t messages, int64_t bytes) {
  broker::charge_dispatch({dispatch_ ? dispatch_->topic.get() : nullptr, tenant_dispatch_,
                           dispatch_ ? &dispatch_->own : nullptr},
                          messages, bytes, limiter_now_ns());
}

}  // namespace magnetar::broker
