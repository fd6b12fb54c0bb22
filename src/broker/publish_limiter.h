// Publish rate limits: token buckets that the connections producing to a
// topic charge, shared across reactors.
//
// A topic's limit comes from its effective publishRate policy (its own, else
// its namespace's: Pulsar applies a namespace's rate to each topic); a
// tenant's aggregate limit (TenantLimits) is one bucket that every topic of
// the tenant charges as well. A bucket holds a tenth of a second of its rate,
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

namespace magnetar::broker {

class PolicyCache;

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

// What the connections producing to one topic charge: the topic's buckets
// and its tenant's.
class PublishLimits {
 public:
  PublishLimits(TopicName topic, std::shared_ptr<RateBuckets> tenant)
      : topic_(std::move(topic)), tenant_(std::move(tenant)) {}

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
  explicit PublishLimiters(const PolicyCache* policies) : policies_(policies) {}

  // The limits of `topic`, made on first use and kept while someone holds
  // them (producers keep them for their lifetime).
  std::shared_ptr<PublishLimits> for_topic(const TopicName& topic);
  // The limits of `topic` if a producer holds them; null otherwise.
  std::shared_ptr<PublishLimits> find(const TopicName& topic) const;
  // Re-reads every live topic's and tenant's rates (after a policy change).
  void refresh();

 private:
  void configure(PublishLimits& limits, int64_t now_ns);
  void configure_tenant(const std::string& tenant, RateBuckets& buckets, int64_t now_ns);

  const PolicyCache* policies_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::weak_ptr<PublishLimits>> topics_;
  std::unordered_map<std::string, std::weak_ptr<RateBuckets>> tenants_;
};

// Now on the clock the buckets use.
int64_t limiter_now_ns();

}  // namespace magnetar::broker
