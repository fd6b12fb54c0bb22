#include "broker/publish_throttle.h"

#include <algorithm>

namespace magnetar::broker {

namespace {

std::chrono::milliseconds ceil_ms(int64_t ns) { return std::chrono::milliseconds((ns + 999'999) / 1'000'000); }

}  // namespace

std::chrono::milliseconds PublishThrottle::remaining() const {
  if (!holding_) return std::chrono::milliseconds(0);
  return ceil_ms(std::max<int64_t>(0, until_ns_ - limiter_now_ns()));
}

void PublishThrottle::hold(int64_t wait_ns) {
  const int64_t until = limiter_now_ns() + wait_ns;
  if (holding_ && until <= until_ns_) return;
  holding_ = true;
  until_ns_ = until;
  if (releasing_) return;  // release() arms the timer once `resume` returns
  if (!timer_) timer_ = std::make_unique<runtime::Timer>(reactor_);
  timer_->once(ceil_ms(wait_ns), [this]() { release(); });
}

// Runs inside the timer's callback, which must not be replaced while it
// runs: a hold that `resume` starts is armed afterwards.
void PublishThrottle::release() {
  holding_ = false;
  releasing_ = true;
  resume_();
  releasing_ = false;
  if (holding_) {
    const int64_t left = until_ns_ - limiter_now_ns();
    timer_->once(ceil_ms(std::max<int64_t>(left, 1)), [this]() { release(); });
  }
}

void PublishThrottle::cancel() {
  holding_ = false;
  if (timer_) timer_->cancel();
}

}  // namespace magnetar::broker
