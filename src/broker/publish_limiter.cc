#include "broker/publish_limiter.h"

#include <algorithm>

#include "broker/policy_cache.h"

namespace magnetar::broker {

int64_t PublishLimits::charge_limited(int64_t messages, int64_t bytes) {
  const int64_t now = limiter_now_ns();
  int64_t wait = own_.take(messages, bytes, now);
  if (tenant_) wait = std::max(wait, tenant_->take(messages, bytes, now));
  if (wait > 0) limited_times_.fetch_add(1, std::memory_order_relaxed);
  return wait;
}

std::shared_ptr<PublishLimits> PublishLimiters::for_topic(const TopicName& topic) {
  const std::string key = topic.to_string();
  std::shared_ptr<PublishLimits> limits;
  {
    std::lock_guard lock(mu_);
    auto& slot = by_tenant_[topic.ns.tenant][key];
    if (auto live = slot.lock()) return live;
    // Forget what expired, now and then, so the tables stay as big as what is live.
    if (++made_ % 64 == 0) {
      for (auto& [tenant, table] : by_tenant_) {
        std::erase_if(table, [](const auto& kv) { return kv.second.expired(); });
      }
      std::erase_if(by_tenant_, [](const auto& kv) { return kv.second.empty(); });
    }
    limits = std::make_shared<PublishLimits>(topic, tenants_->of(topic.ns.tenant));
    by_tenant_[topic.ns.tenant][key] = limits;
  }
  // Outside the lock; a refresh that finds these limits first reads the
  // same or newer policies under configure_mu_.
  configure(*limits);
  return limits;
}

std::shared_ptr<PublishLimits> PublishLimiters::find(const TopicName& topic) const {
  std::lock_guard lock(mu_);
  auto table = by_tenant_.find(topic.ns.tenant);
  if (table == by_tenant_.end()) return nullptr;
  auto it = table->second.find(topic.to_string());
  return it == table->second.end() ? nullptr : it->second.lock();
}

void PublishLimiters::refresh(const PolicyScope& changed) {
  if (changed.kind == PolicyScope::Kind::kTenant) return;  // admins and clusters: no rates
  std::vector<std::shared_ptr<PublishLimits>> affected;
  {
    std::lock_guard lock(mu_);
    auto table = by_tenant_.find(changed.tenant);
    if (table == by_tenant_.end()) return;
    for (auto& [key, weak] : table->second) {
      auto limits = weak.lock();
      if (limits && changed.covers(limits->topic())) affected.push_back(std::move(limits));
    }
  }
  for (auto& limits : affected) {
    if (changed.kind == PolicyScope::Kind::kTenantLimits) {
      limits->update_active();
    } else {
      configure(*limits);
    }
  }
}

void PublishLimiters::configure(PublishLimits& limits) {
  std::lock_guard lock(configure_mu_);
  std::optional<PublishRate> rate;
  if (policies_ != nullptr) {
    if (auto effective = policies_->effective(limits.topic())) rate = effective->publish_rate;
  }
  limits.own_.set(rate ? rate->msgs_per_second : -1, rate ? rate->bytes_per_second : -1, limiter_now_ns());
  limits.update_active();
}

}  // namespace magnetar::broker
