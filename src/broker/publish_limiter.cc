#include "broker/publish_limiter.h"

#include <algorithm>
#include <chrono>

#include "broker/policy_cache.h"

namespace magnetar::broker {

namespace {

constexpr __int128 kMaxRefill = int64_t{1} << 60;

int64_t capacity_of(int64_t rate) { return std::max<int64_t>(1, rate / TokenBucket::kBurstDivisor); }

}  // namespace

int64_t limiter_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

int64_t PublishLimits::charge_limited(int64_t messages, int64_t bytes) {
  const int64_t now = limiter_now_ns();
  int64_t wait = own_.take(messages, bytes, now);
  if (tenant_) wait = std::max(wait, tenant_->take(messages, bytes, now));
  if (wait > 0) limited_times_.fetch_add(1, std::memory_order_relaxed);
  return wait;
}

std::shared_ptr<PublishLimits> PublishLimiters::for_topic(const TopicName& topic) {
  const std::string key = topic.to_string();
  std::lock_guard lock(mu_);
  auto& slot = topics_[key];
  if (auto live = slot.lock()) return live;
  // Forget what expired, now and then, so the maps stay as big as what is live.
  if (topics_.size() > 64 && topics_.size() % 64 == 0) {
    std::erase_if(topics_, [](const auto& kv) { return kv.second.expired(); });
    std::erase_if(tenants_, [](const auto& kv) { return kv.second.expired(); });
  }
  const int64_t now = limiter_now_ns();
  auto& tenant_slot = tenants_[topic.ns.tenant];
  auto tenant = tenant_slot.lock();
  if (!tenant) {
    tenant = std::make_shared<RateBuckets>();
    configure_tenant(topic.ns.tenant, *tenant, now);
    tenant_slot = tenant;
  }
  auto limits = std::make_shared<PublishLimits>(topic, std::move(tenant));
  configure(*limits, now);
  topics_[key] = limits;
  return limits;
}

std::shared_ptr<PublishLimits> PublishLimiters::find(const TopicName& topic) const {
  std::lock_guard lock(mu_);
  auto it = topics_.find(topic.to_string());
  return it == topics_.end() ? nullptr : it->second.lock();
}

void PublishLimiters::refresh() {
  const int64_t now = limiter_now_ns();
  std::lock_guard lock(mu_);
  for (auto& [tenant, weak] : tenants_) {
    if (auto buckets = weak.lock()) configure_tenant(tenant, *buckets, now);
  }
  for (auto& [key, weak] : topics_) {
    if (auto limits = weak.lock()) configure(*limits, now);
  }
}

void PublishLimiters::configure_tenant(const std::string& tenant, RateBuckets& buckets, int64_t now_ns) {
  auto limits = policies_ != nullptr ? policies_->tenant_limits(tenant) : nullptr;
  buckets.set(limits ? limits->publish_msgs_per_second : -1, limits ? limits->publish_bytes_per_second : -1, now_ns);
}

// REQUIRES: the tenant's buckets are configured already.
void PublishLimiters::configure(PublishLimits& limits, int64_t now_ns) {
  std::optional<PublishRate> rate;
  if (policies_ != nullptr) {
    if (auto effective = policies_->effective(limits.topic())) rate = effective->publish_rate;
  }
  limits.own_.set(rate ? rate->msgs_per_second : -1, rate ? rate->bytes_per_second : -1, now_ns);
  limits.active_.store(limits.own_.limited() || (limits.tenant_ && limits.tenant_->limited()),
                       std::memory_order_relaxed);
}

}  // namespace magnetar::broker
