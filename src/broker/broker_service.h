// BrokerService: the topics this node serves, each loaded on its home reactor.
//
// A topic's home is runtime.home_for(hash of its full name); its Topic object
// lives in that reactor's shard and is touched only there. with_topic() gets
// a caller to the home, loading the topic first (opening its managed ledger,
// or creating a non-persistent log) when needed. Concurrent loads of one
// topic share one open.
//
// Threads: with_topic from any thread; start/stop on main.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "broker/compaction.h"
#include "broker/naming.h"
#include "broker/lease_gate.h"
#include "broker/ownership.h"
#include "broker/policy_cache.h"
#include "broker/publish_limiter.h"
#include "broker/tenant_state.h"
#include "broker/topic.h"
#include "broker/trace_lookup.h"
#include "broker/tracing.h"
#include "ledger/managed_ledger.h"
#include "metadata/store.h"
#include "runtime/component.h"
#include "runtime/runtime.h"
#include "runtime/timer.h"
#include "storage/storage.h"

namespace magnetar::broker {

// Who asks for a topic that does not exist yet: a client naming it
// (producer, consumer, lookup: the namespace's autoTopicCreation decides),
// an explicit create (AMQP queue.declare: counted here), or create_topic
// (its caller admitted it already).
enum class TopicCreation { kAutomatic, kExplicit, kAdmitted };

struct BrokerOptions {
  ledger::ManagedLedgerConfig managed_ledger;
  // How often each reactor runs housekeeping (rollover by age, retention,
  // TTL) over the topics it has loaded.
  std::chrono::milliseconds maintenance_interval{std::chrono::seconds(60)};
  // A persistent topic nobody has used for this long, with nothing attached
  // (Topic::idle), leaves memory at the next housekeeping pass; its next use
  // loads it again. Zero keeps topics loaded.
  std::chrono::milliseconds topic_idle_unload{std::chrono::minutes(5)};
  // How this node's storage keeps an entry, as message traces say it
  // ("1 copy on this node, fsync always"): what the storage does, not what
  // a namespace's persistence policy asks for.
  std::string storage_durability = "1 copy on this node";
  // Non-persistent topics keep at most this much in memory each.
  size_t non_persistent_max_entries = 10000;
  size_t non_persistent_max_bytes = 64u << 20;
  // Topic compaction: bytes a pass reads per second at most (0: no limit).
  int64_t compaction_max_read_bytes_per_second = 32ll << 20;
  // Retention of topics without a policy of their own or their namespace's,
  // by the protocol that made them (retention.h).
  RetentionDefaults retention_defaults;
};

class BrokerService final : public runtime::Component {
 public:
  BrokerService(runtime::Runtime& runtime, storage::Storage& storage, metadata::Store& store,
                BrokerOptions options = {});
  ~BrokerService() override;

  // Namespace policies for topics loaded from now on: a topic of a namespace
  // that does not exist is refused (kNotFound), and retention and message
  // TTL come from the namespace (or topic) policy (retention.h); a change
  // applies to loaded topics at their next housekeeping. REQUIRES: before
  // start(); `policies` outlives this.
  void set_policies(const PolicyCache* policies) {
    policies_ = policies;
    tenants_ = std::make_shared<TenantRegistry>(policies);
    publish_limiters_ = std::make_shared<PublishLimiters>(policies, tenants_);
  }
  // For the policy cache's change listener (any thread; it may outlive
  // this): re-reads the policies of every loaded topic on its home reactor,
  // so that changed dispatch rates and count limits apply at once, not at
  // the next consumer or maintenance pass. A burst of changes is one pass
  // per reactor; nothing happens once stop() began.
  PolicyCache::Listener policy_change_listener();

  // Any thread: the publish rate limits producers to `topic` charge
  // (publish_limiter.h), kept while a producer holds them.
  std::shared_ptr<PublishLimits> publish_limits(const TopicName& topic) {
    return publish_limiters_->for_topic(topic);
  }
  // The policy cache's change listener: re-reads the rate limits a change
  // covers. It may outlive this (it then does nothing).
  PolicyCache::Listener policy_listener() const;
  // A client connection's place among those using `tenant` (its
  // TenantLimits' maxConnections), held for as long as the connection uses
  // the tenant. ResourceExhausted with the limit's words when full. Any thread.
  common::Result<TenantSlot> take_connection_slot(const std::string& tenant);
  // Any thread: the counters `tenant`'s loaded topics share (the same
  // object while anyone holds it).
  std::shared_ptr<TenantCounters> tenant_counters(const std::string& tenant) {
    auto state = tenants_->of(tenant);
    return std::shared_ptr<TenantCounters>(state, &state->usage);
  }

  // Whether a new topic may be created (topic counts; tenancy.h
  // admit_topic), asked only when the namespace or tenant limits its topics.
  // `done` may run on any thread. REQUIRES: before start().
  using TopicAdmitter = std::function<void(const TopicName&, std::function<void(common::Status)>)>;
  void set_topic_admitter(TopicAdmitter admitter) { admitter_ = std::move(admitter); }
  // Which node serves each topic (a cluster member's; none when standalone,
  // where every topic is served here). A topic owned elsewhere is not
  // loaded: with_topic answers kWrongNode, naming the owner. REQUIRES:
  // before start(); `ownership` outlives this.
  void set_ownership(Ownership* ownership) { ownership_ = ownership; }
  Ownership* ownership() const { return ownership_; }
  // Calls to other members (a cluster member's; none when standalone).
  void set_remote_calls(RemoteCalls* calls) { remote_calls_ = calls; }
  // A cluster member: publishes are acknowledged only while `valid` says
  // its lease is current (lease_gate.h). Before start().
  void set_lease(std::function<bool()> valid);
  RemoteCalls* remote_calls() const { return remote_calls_; }
  // Whether a new durable subscription may be made (the tenant's
  // subscription count; tenancy.h admit_subscription), given to every
  // topic. REQUIRES: before start().
  void set_subscription_admitter(TopicContext::SubscriptionAdmitter admitter) { subscription_admitter_ = std::move(admitter); }

  // Called with each persistent topic's effective policies whenever they
  // are applied (TopicContext::on_policies): geo-replication's entry point.
  // REQUIRES: before start().
  void set_topic_policies_hook(std::function<void(Topic&, const NamespacePolicies&)> hook) {
    policies_hook_ = std::move(hook);
  }

  // How traces read the keys and properties of stored messages
  // (tracing.h). REQUIRES: before start().
  void set_message_describer(MessageDescriber describer) { describer_ = std::move(describer); }
  // How compaction reads stored messages (compaction.h); without one,
  // topics are not compacted. REQUIRES: before start().
  void set_compaction_codec(std::shared_ptr<const CompactionCodec> codec);
  // Any thread: the latest compaction pass of each topic on this node.
  const CompactionBoard& compactions() const { return compactions_; }

  // Any thread: the traced messages of `topic` that match `query`, each
  // with its events in order (trace_lookup.h). An empty answer when nothing
  // matched or the namespace never traced anything. `done` runs on a
  // reactor or the metadata thread.
  void find_traces(const TopicName& topic, TraceQuery query, ledger::Callback<common::Result<TraceAnswer>> done);

  std::string_view name() const override { return "broker"; }
  common::Status start() override;
  // Closes every loaded topic (consumers are told), waiting for their logs.
  void stop() override;

  runtime::Reactor& home_of(const TopicName& topic);
  // Runs `fn` on the topic's home reactor with the loaded topic, or with why
  // it could not be loaded. Creates the topic when it does not exist and
  // may be created: `how` and the namespace's autoTopicCreation
  // (kNotFound when not allowed), its maxTopicsPerNamespace and its
  // tenant's maxTopics (kFailedPrecondition when over); kUnavailable while
  // the topic is being deleted.
  // `origin` is recorded with a topic this call creates (retention.h).
  void with_topic(const TopicName& topic, ledger::Callback<common::Result<Topic*>> fn,
                  TopicCreation how = TopicCreation::kAutomatic, TopicOrigin origin = TopicOrigin::kPulsar);
  // Runs `fn` on the topic's home reactor with the topic if it is loaded,
  // or after loading it when `exists` says it exists (the caller asked the
  // metadata); kNotFound otherwise. Never creates a topic.
  void with_existing_topic(const TopicName& topic, bool exists, ledger::Callback<common::Result<Topic*>> fn);
  // Creates a non-partitioned topic: kAlreadyExists when it is loaded, being
  // created, or (persistent) has a managed ledger already. The caller has
  // checked the topic counts (Tenancy::admit_topic). `done` runs on the
  // home reactor.
  void create_topic(const TopicName& topic, ledger::Callback<common::Status> done);
  // Deletes a loaded topic: kFailedPrecondition while it has producers or
  // consumers unless `force` (they are detached then). Closes it, deletes
  // its managed ledger (ledgers and cursors) and forgets it. kNotFound when
  // not loaded. `done` runs on the home reactor.
  void delete_topic(const TopicName& topic, bool force, ledger::Callback<common::Status> done);
  // Closes a loaded topic and forgets it; the next use loads it again. Ok
  // when it is not loaded. `done` runs on the home reactor.
  void unload_topic(const TopicName& topic, ledger::Callback<common::Status> done);

  // Any thread: closes every loaded topic of `bundle` ("tenant/namespace/
  // range", ownership.h) on every reactor, telling their clients to look
  // them up again; `done` on a reactor once all are closed.
  void unload_bundle(const std::string& bundle, std::function<void()> done);
  // Any thread: splits `bundle` in halves or at `positions` (bundle_layout.h);
  // a cluster member asks the bundle's owner (Ownership::split), a
  // standalone node only changes the layout, its topics staying loaded.
  // With `unload`, the pieces' topics are unloaded afterwards.
  void split_bundle(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                    std::function<void(common::Status)> done);

  struct TopicSample {
    TopicName name;
    TopicStats stats;
    uint64_t backlog_messages = 0;  // summed over subscriptions
  };
  // Any thread: stats (with rates) of every loaded topic, gathered on each
  // reactor. `done` runs on the reactor that answers last; a reactor that
  // cannot take the request is left out.
  void collect_stats(ledger::Callback<std::vector<TopicSample>> done);

  // Home reactor only: the topic if it is loaded there, else null.
  Topic* loaded_topic(const TopicName& topic);
  // Any thread, blocking (admin and tests): names of the loaded topics.
  std::vector<std::string> loaded_topic_names();

 private:
  struct Shard {
    // What this reactor's topics share (make_context); declared first so
    // that it outlives them.
    TopicContext context;
    std::unique_ptr<runtime::Timer> maintenance;  // armed only while topics are loaded
    std::unordered_map<std::string, std::unique_ptr<Topic>> topics;
    std::unordered_map<std::string, std::vector<ledger::Callback<common::Result<Topic*>>>> loading;
    std::unordered_map<std::string, int> creating;  // create_topic under way
    std::unordered_map<std::string, int> deleting;  // delete_topic under way: not loaded meanwhile
    // Requests that found their topic closing (unloaded): run again once it is gone.
    std::unordered_map<std::string, std::vector<std::function<void()>>> after_close;
    std::unique_ptr<TraceRecorder> tracer;
  };
  // On the home reactor: close the loaded `topic`, then forget it.
  void close_and_forget(Shard& shard, const std::string& key, Topic* topic, const common::Status& why,
                        ledger::Callback<common::Status> done);
  void load(Shard& shard, const TopicName& topic, TopicCreation how, TopicOrigin origin);
  // load() once this node is known to own `topic`.
  void load_owned(Shard& shard, const TopicName& topic, TopicCreation how, TopicOrigin origin);
  // OK unless the topic's bundle is known to be served elsewhere, or being
  // handed over from here (then why, for the client).
  common::Status still_owned(const TopicName& topic) const;
  // Opens (or creates) the topic's log and makes it loaded.
  void open(Shard& shard, const TopicName& topic, TopicOrigin origin);
  // Any thread: ok when `topic` exists (its log or its partitioned topic),
  // else whether it may be created; `done` on any thread.
  void check_new_topic(const TopicName& topic, bool auto_allowed, std::function<void(common::Status)> done);
  // What the topics of `shard` share: this service's policies, tenant
  // limits, publish limits and subscription admitter, read at each call.
  void make_context(Shard& shard);
  // Gives a freshly loaded topic its tenant's counters and applies its policies.
  void attach_policies(Topic& topic);
  static int64_t steady_ms();
  void arm_maintenance(size_t reactor);
  // Housekeeping of the topics of `reactor`: producers, then rollover by
  // age, retention and TTL; a persistent topic idle past
  // options_.topic_idle_unload leaves memory once that is done.
  void maintain(size_t reactor);
  // After its housekeeping: unloads `topic` (at `key`) if it is still
  // loaded and idle.
  void unload_if_idle(Shard& shard, const std::string& key, Topic* topic);
  // Posts one refresh_policies pass over each reactor's topics (policy_change_listener).
  void refresh_loaded_topics();

  // What the policy cache's listener holds: the broker until it stops.
  struct PolicyRefresh {
    std::mutex mu;
    BrokerService* broker = nullptr;  // guarded by mu
    std::unique_ptr<std::atomic<bool>[]> posted;  // by reactor: a pass is queued there
  };

  runtime::Runtime& runtime_;
  storage::Storage& storage_;
  metadata::Store& store_;
  ledger::LedgerIdAllocator ledger_ids_;
  const BrokerOptions options_;
  const PolicyCache* policies_ = nullptr;
  // Per tenant, over every reactor: its counts and aggregate rate limits.
  std::shared_ptr<TenantRegistry> tenants_ = std::make_shared<TenantRegistry>(nullptr);
  std::shared_ptr<PublishLimiters> publish_limiters_ = std::make_shared<PublishLimiters>(nullptr, tenants_);
  TopicAdmitter admitter_;
  Ownership* ownership_ = nullptr;
  RemoteCalls* remote_calls_ = nullptr;
  std::unique_ptr<LeaseGate> lease_gate_;
  TopicContext::SubscriptionAdmitter subscription_admitter_;
  MessageDescriber describer_;
  std::function<void(Topic&, const NamespacePolicies&)> policies_hook_;
  std::shared_ptr<const CompactionCodec> compaction_codec_;
  CompactionBoard compactions_;
  std::vector<std::unique_ptr<Shard>> shards_;  // by reactor index
  std::shared_ptr<PolicyRefresh> policy_refresh_;
  bool stopping_ = false;
  // Topics unloaded while idle since the allocator was last trimmed.
  static constexpr uint64_t kTrimAfterUnloads = 1000;
  std::atomic<uint64_t> unloaded_since_trim_{0};
};

}  // namespace magnetar::broker
