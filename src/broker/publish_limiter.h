// Publish rate limits: token buckets that the connections producing to a
// topic charge, shared across reactors.
//
// A topic's limit comes from its effective publishRate policy (its own, else
// its namespace's: Pulsar applies a namespace's rate to each topic); a
// tenant's aggregate limit (TenantLimits) is one bucket that every topic of
// the tenant charges as well (its TenantState's, tenant_state.h). A bucket holds a tenth of a second of its rate,
// starts full and may run into debt: a publish is never refused or split,
// and the connection that overdrew waits until the debt is paid
// (PublishThrottle). Over any window the admitted rate is therefore the
// configured rate plus at most one bucket and one publish.
//
// Threads: every method may be called from any thread. The per-publish path
// (PublishLimits::charge) takes no lock and allocates nothing; on a topic
// without any limit it is one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "broker/naming.h"
#include "broker/tenant_state.h"
#include "broker/token_bucket.h"

namespace magnetar::broker {

class PolicyCache;
struct PolicyScope;

// What the connections producing to one topic charge: the topic's buckets
// and its tenant's.
class PublishLimits {
 public:
  PublishLimits(TopicName topic, std::shared_ptr<RateBuckets> tenant)
      : topic_(std::move(topic)), tenant_(std::move(tenant)) {}
  // The tenant's aggregate limits, held for as long as these limits live.
  PublishLimits(TopicName topic, std::shared_ptr<TenantState> tenant)
      : PublishLimits(std::move(topic), std::shared_ptr<RateBuckets>(tenant, &tenant->publish)) {}

  // Charges one publish. Answers how long (ns) the charging connection
  // should stop reading; 0 when no limit is over.
  int64_t charge(int64_t messages, int64_t bytes) {
    if (!active_.load(std::memory_order_relaxed)) return 0;
    return charge_limited(messages, bytes);
  }

  const TopicName& topic() const { return topic_; }
  const RateBuckets& own() const { return own_; }
  // The tenant's aggregate buckets; null without a tenant.
  const RateBuckets* tenant() const { return tenant_.get(); }
  // Times a publish had to hold its connection (Pulsar's publishRateLimitedTimes).
  uint64_t limited_times() const { return limited_times_.load(std::memory_order_relaxed); }

 private:
  friend class PublishLimiters;
  int64_t charge_limited(int64_t messages, int64_t bytes);
  // Whether a publish needs to charge at all (own or tenant limited).
  void update_active() {
    active_.store(own_.limited() || (tenant_ && tenant_->limited()), std::memory_order_relaxed);
  }

  const TopicName topic_;
  const std::shared_ptr<RateBuckets> tenant_;
  RateBuckets own_;
  std::atomic<bool> active_{false};  // own_ or tenant_ limited
  std::atomic<uint64_t> limited_times_{0};
};

// The live PublishLimits of every topic being produced to, configured from
// the policy cache. Owned by the BrokerService.
class PublishLimiters {
 public:
  // `policies` may be null (nothing is limited); it must outlive this.
  PublishLimiters(const PolicyCache* policies, std::shared_ptr<TenantRegistry> tenants)
      : policies_(policies), tenants_(std::move(tenants)) {}

  // The limits of `topic`, made on first use and kept while someone holds
  // them (producers keep them for their lifetime).
  std::shared_ptr<PublishLimits> for_topic(const TopicName& topic);
  // The limits of `topic` if a producer holds them; null otherwise.
  std::shared_ptr<PublishLimits> find(const TopicName& topic) const;
  // Re-reads the rates of the live topics `changed` covers (after a policy
  // change): a tenant's limits (read again by the TenantRegistry first)
  // only switch its topics' limits on or off; a
  // namespace or topic policy reconfigures only its own topics. Outside the
  // registry's lock.
  void refresh(const PolicyScope& changed);

 private:
  using TopicTable = std::unordered_map<std::string, std::weak_ptr<PublishLimits>>;
  void configure(PublishLimits& limits);

  const PolicyCache* policies_;
  const std::shared_ptr<TenantRegistry> tenants_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, TopicTable> by_tenant_;  // tenant -> topic -> limits
  size_t made_ = 0;  // limits made, for the occasional sweep of expired ones
  std::mutex configure_mu_;  // orders reading a topic's policies with setting its buckets
};

}  // namespace magnetar::broker
