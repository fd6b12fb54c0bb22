// What the broker keeps per tenant, over every reactor: the counts of what
// it uses (tenant_usage.h) and its aggregate rate limits (TenantLimits:
// one publish budget over all its topics, one dispatch budget over all its
// subscriptions and Kafka fetches). One TenantState per tenant, shared by
// whoever needs it (loaded topics, producers' publish limits, connections);
// the registry forgets a tenant as soon as nobody holds its state.
//
// Threads: any. The registry's lock is taken when a topic loads or a
// connection starts using a tenant, and by policy changes to find the
// state; never on the publish or dispatch path.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "broker/tenant_usage.h"
#include "broker/token_bucket.h"

namespace magnetar::broker {

class PolicyCache;

struct TenantState {
  explicit TenantState(std::string tenant) : name(std::move(tenant)) {}
  const std::string name;
  TenantCounters usage;
  RateBuckets publish;   // TenantLimits' publishRate
  RateBuckets dispatch;  // TenantLimits' dispatchRate
  // TenantLimits' maxMessageSize: a publish storing more is refused. -1: no limit.
  std::atomic<int64_t> max_message_bytes{-1};
};

class TenantRegistry {
 public:
  // `policies` may be null (nothing is limited); it must outlive this.
  explicit TenantRegistry(const PolicyCache* policies);

  // The state of `tenant`, made on first use with its limits read from the
  // policies, and kept while someone holds it.
  std::shared_ptr<TenantState> of(const std::string& tenant);
  // The state of `tenant` if someone holds it; null otherwise.
  std::shared_ptr<TenantState> find(const std::string& tenant) const;
  // Reads `tenant`'s limits again (after they changed), if someone holds
  // its state. Not under the registry's lock.
  void refresh(const std::string& tenant);
  // Tenants whose state is held (tests).
  size_t size() const;

 private:
  // Shared with the states' deleters, which may run after the registry is gone.
  struct Table {
    mutable std::mutex mu;
    std::unordered_map<std::string, std::weak_ptr<TenantState>> by_tenant;
  };
  void configure(TenantState& state);

  const PolicyCache* policies_;
  std::shared_ptr<Table> table_ = std::make_shared<Table>();
  std::mutex configure_mu_;  // orders reading a tenant's limits with setting its buckets
};

}  // namespace magnetar::broker
