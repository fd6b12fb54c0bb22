#include "broker/tenant_state.h"

#include "broker/policy_cache.h"

namespace magnetar::broker {

TenantRegistry::TenantRegistry(const PolicyCache* policies) : policies_(policies) {}

std::shared_ptr<TenantState> TenantRegistry::of(const std::string& tenant) {
  std::lock_guard lock(table_->mu);
  auto& weak = table_->by_tenant[tenant];
  if (auto live = weak.lock()) return live;
  // The last holder's release forgets the tenant, unless a newer state took its place.
  std::shared_ptr<TenantState> state(new TenantState(tenant), [table = std::weak_ptr<Table>(table_)](TenantState* s) {
    if (auto t = table.lock()) {
      std::lock_guard lock(t->mu);
      auto it = t->by_tenant.find(s->name);
      if (it != t->by_tenant.end() && it->second.expired()) t->by_tenant.erase(it);
    }
    delete s;
  });
  // Configured before anyone else can see it, so no one charges a bucket
  // that does not know its rate yet.
  configure(*state);
  weak = state;
  return state;
}

std::shared_ptr<TenantState> TenantRegistry::find(const std::string& tenant) const {
  std::lock_guard lock(table_->mu);
  auto it = table_->by_tenant.find(tenant);
  return it == table_->by_tenant.end() ? nullptr : it->second.lock();
}

void TenantRegistry::refresh(const std::string& tenant) {
  if (auto state = find(tenant)) configure(*state);
}

size_t TenantRegistry::size() const {
  std::lock_guard lock(table_->mu);
  return table_->by_tenant.size();
}

void TenantRegistry::configure(TenantState& state) {
  std::lock_guard lock(configure_mu_);
  auto limits = policies_ != nullptr ? policies_->tenant_limits(state.name) : nullptr;
  const int64_t now = limiter_now_ns();
  state.publish.set(limits ? limits->publish_msgs_per_second : -1, limits ? limits->publish_bytes_per_second : -1,
                    now);
  state.dispatch.set(limits ? limits->dispatch_msgs_per_second : -1, limits ? limits->dispatch_bytes_per_second : -1,
                     now);
  state.max_message_bytes.store(limits ? limits->max_message_bytes : -1, std::memory_order_relaxed);
}

}  // namespace magnetar::broker
