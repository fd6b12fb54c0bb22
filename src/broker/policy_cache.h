// PolicyCache: tenants, namespace policies and topic overrides in memory, kept
// current by a metadata watch, so that reactors can read them without
// blocking (auto topic creation, rate limits, quotas on the produce path).
//
// Reads take a shared lock and return immutable snapshots; a snapshot stays
// valid after the cache moves on. Changes arrive after the metadata write is
// durable, in the order they were applied: a read right after an admin call
// returns may still see the previous value for a moment.
//
// Threads: start() and stop() on main; reads from any thread. Refreshes run
// on the metadata thread. The store must outlive the cache.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "broker/naming.h"
#include "broker/policies.h"
#include "metadata/store.h"
#include "runtime/component.h"

namespace magnetar::broker {

// What one changed metadata record can change: its tenant's limits, a
// namespace's policies, or one topic's override (a partitioned topic's
// override reaches its partitions). Listeners refresh only what it covers.
struct PolicyScope {
  enum class Kind { kTenant, kTenantLimits, kNamespace, kTopic };
  Kind kind = Kind::kTenant;
  std::string tenant;
  std::string ns;                  // kNamespace, kTopic
  std::optional<TopicName> topic;  // kTopic
  // The scope of a record under the cache's key prefixes; nullopt for
  // another key.
  static std::optional<PolicyScope> of_key(std::string_view key);
  // Whether this change can change the policies in effect for `topic`.
  bool covers(const TopicName& topic) const;
};

class PolicyCache final : public runtime::Component {
 public:
  explicit PolicyCache(metadata::Store& store);
  ~PolicyCache() override;

  // Watches first, then loads every record (blocking), so no change between
  // the two is missed.
  std::string_view name() const override { return "policy-cache"; }
  common::Status start() override;
  void stop() override;

  // Null when the namespace does not exist.
  std::shared_ptr<const NamespacePolicies> namespace_policies(const NamespaceName& ns) const;
  // Null when the topic overrides nothing.
  std::shared_ptr<const NamespacePolicies> topic_policies(const TopicName& topic) const;
  // The overrides of every topic of `ns` that has one (partitions and
  // partitioned topics included): for questions about a namespace's topics
  // as a whole, such as whether a role holds a grant on any of them.
  std::vector<std::shared_ptr<const NamespacePolicies>> topic_overrides(const NamespaceName& ns) const;
  // What applies to `topic`, field by field: its own override, else its
  // partitioned topic's, else its namespace's. nullopt when the namespace
  // does not exist. Fields still unset mean "the broker's default".
  std::optional<NamespacePolicies> effective(const TopicName& topic) const;
  // How `topic` may be created on first use: the namespace's
  // autoTopicCreation override, else `broker_default`. nullopt when the
  // namespace does not exist (then nothing may be created in it).
  std::optional<AutoTopicCreation> auto_topic_creation(const TopicName& topic,
                                                       const AutoTopicCreation& broker_default) const;

  // A tenant's record (its admin roles, allowed clusters); null when the
  // tenant does not exist.
  std::shared_ptr<const TenantInfo> tenant(const std::string& name) const;

  // A tenant's aggregate limits; null when it has none.
  std::shared_ptr<const TenantLimits> tenant_limits(const std::string& tenant) const;

  // Runs `fn` on the metadata thread after each change is applied, with
  // what the change covers (the rate limiters re-read only those rates).
  // REQUIRES: before start(). A refresh under way may still run `fn` after
  // stop(): it should reach what it uses through a weak reference.
  using Listener = std::function<void(const PolicyScope&)>;
  void on_change(Listener fn) { state_->listeners.push_back(std::move(fn)); }

  // Changes applied so far (for tests and metrics).
  uint64_t refreshes() const { return state_->refreshes.load(std::memory_order_relaxed); }

 private:
  // Shared with watch and refresh callbacks, which may still run on the
  // metadata thread after this cache is gone.
  struct State {
    mutable std::shared_mutex mu;
    std::map<std::string, std::shared_ptr<const NamespacePolicies>> by_key;  // metadata key -> record
    std::map<std::string, std::shared_ptr<const TenantInfo>> tenants;        // tenant key -> record
    std::map<std::string, std::shared_ptr<const TenantLimits>> limits;       // tenant limits key -> record
    std::vector<Listener> listeners;  // set before start, then only read
    // Decodes `bytes` as the record `key` names and files it. Under mu.
    common::Status put(const std::string& key, std::string_view bytes);
    std::atomic<uint64_t> refreshes{0};
    // While start() loads: keys a refresh has already settled, which the
    // (possibly older) loaded value must not overwrite.
    bool loading = false;
    std::set<std::string> settled;
  };
  static void refresh(metadata::Store& store, const std::shared_ptr<State>& state, const std::string& key);
  std::shared_ptr<const NamespacePolicies> find(const std::string& key) const;

  metadata::Store& store_;
  std::vector<metadata::WatchId> watches_;
  std::shared_ptr<State> state_;
};

}  // namespace magnetar::broker
