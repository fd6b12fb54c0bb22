// Topic: a topic loaded on its home reactor, with its log, producers and
// subscriptions. Protocol-neutral: Pulsar, Kafka and AMQP handlers all
// publish and subscribe through it, which is why a message produced over one
// protocol can be consumed over another.
//
// Threads: every method on the home reactor (BrokerService::with_topic
// gets you there); callbacks run there too.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "broker/consumer.h"
#include "broker/dedup.h"
#include "broker/naming.h"
#include "broker/policies.h"
#include "broker/tenant_state.h"
#include "broker/tenant_usage.h"
#include "broker/producer.h"
#include "broker/publish_limiter.h"
#include "broker/rate_meter.h"
#include "broker/retention.h"
#include "broker/subscription.h"
#include "broker/topic_context.h"
#include "broker/tracing.h"
#include "common/fifo.h"
#include "common/lazy_map.h"
#include "common/result.h"
#include "ledger/log.h"
#include "metadata/store.h"
#include "runtime/timer.h"
#include "storage/storage.h"

namespace magnetar::broker {

// The copies a namespace's persistence policy asks each ledger to have
// (zeros, the storage's defaults, when it sets none).
storage::LedgerOptions ledger_copies(const NamespacePolicies& policies);

// The position a publish completes with when deduplication found the entry
// stored already: nothing was stored again (Pulsar answers (-1, -1)).
inline constexpr ledger::Position kDuplicatePosition{~ledger::LedgerId{0}, ledger::EntryId{-1}};

// How a backlog quota currently holds back this topic's producers.
enum class QuotaBlock : uint8_t { kNone, kHold, kException };

struct PublisherStats {
  uint64_t producer_id = 0;
  std::string producer_name;
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  double msg_rate_in = 0;   // filled by Topic::stats_at
  double byte_rate_in = 0;
  ProducerAccessMode access_mode = ProducerAccessMode::kShared;
  ClientInfo client{};
};

// Geo-replication: the cursor a topic's replicator to cluster C reads from
// is named kReplicatorPrefix + C, and its producer on the remote cluster is
// named kReplicatorPrefix + the origin cluster (Pulsar's names). Neither is
// a subscription clients see or may use.
inline constexpr std::string_view kReplicatorPrefix = "pulsar.repl.";
inline bool is_replicator_name(std::string_view name) { return name.starts_with(kReplicatorPrefix); }

// Replication of a topic to one remote cluster (Pulsar's "replication" map
// in topic stats).
struct ReplicatorStats {
  std::string cluster;
  bool connected = false;           // its producer on the remote cluster is ready
  uint64_t backlog_messages = 0;    // not yet acknowledged by the remote cluster
  uint64_t messages_out = 0;        // replicated and acknowledged
  uint64_t bytes_out = 0;
  double delay_seconds = 0;         // age of the oldest message not yet acknowledged; 0 when caught up
  std::string last_error;           // why the link last failed; empty when it never did
  double msg_rate_out = 0;          // filled by Topic::stats_at
  double byte_rate_out = 0;
};

struct TopicStats {
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  uint64_t messages_out = 0;
  uint64_t bytes_out = 0;
  uint64_t storage_size = 0;     // bytes of entries the log holds
  uint64_t entries = 0;          // entries the log holds
  uint64_t damaged_entries = 0;  // found damaged on disk and skipped (Log::damaged_entries)
  std::vector<PublisherStats> publishers;
  std::vector<SubscriptionStats> subscriptions;
  // Filled by Topic::stats_at, per second.
  double msg_rate_in = 0;
  double byte_rate_in = 0;
  double msg_rate_out = 0;
  double byte_rate_out = 0;
  // Times a publish held its connection over the publish rate limit
  // (Pulsar's publishRateLimitedTimes).
  uint64_t publish_rate_limited_times = 0;
  // The publish rate limit in effect for the topic itself (its policy or
  // its namespace's); -1: none.
  int64_t publish_rate_msgs = -1;
  int64_t publish_rate_bytes = -1;
  // Its tenant's aggregate publish limit (TenantLimits); -1: none.
  int64_t tenant_publish_rate_msgs = -1;
  int64_t tenant_publish_rate_bytes = -1;
  // One per remote cluster this topic replicates to.
  std::vector<ReplicatorStats> replication;
};

// Work that runs beside a loaded topic on its home reactor (a geo-replicator).
// The topic owns it once attached and destroys it before its log closes.
class TopicAttachment {
 public:
  virtual ~TopicAttachment() = default;
  // An entry was stored.
  virtual void on_entries_added() {}
  // A replicated subscription on `cluster` acknowledged that topic's
  // messages through its topic-wide index `origin_index`: the last entry
  // here that every entry up to is acknowledged with them, when this
  // attachment can tell. `covered`: such an entry already known (entries
  // up to it consumed there). Topic::apply_remote_acks.
  virtual std::optional<ledger::Position> consumed_through(const std::string& cluster, int64_t origin_index,
                                                           std::optional<ledger::Position> covered) const {
    return std::nullopt;
  }
  // True while it has work that should keep the topic loaded.
  virtual bool busy() const { return false; }
  virtual void add_stats(TopicStats& stats) const {}
};

class Topic {
 public:
  // REQUIRES: `context` outlives the topic.
  Topic(TopicName name, std::shared_ptr<ledger::Log> log, const TopicContext& context = TopicContext::none());
  ~Topic();
  Topic(const Topic&) = delete;
  Topic& operator=(const Topic&) = delete;

  const TopicName& name() const { return name_; }
  // Different for every topic object this process makes (from 1): what is
  // kept about a topic outside it (a Kafka producer's last sequence) can
  // tell this load from an earlier one, the topic having moved away since.
  uint64_t load() const { return load_; }
  ledger::Log& log() { return *log_; }
  std::shared_ptr<ledger::Log> shared_log() const { return log_; }
  bool closed() const { return closed_; }

  // Registers a producer (producer.h for access modes). Names are unique
  // per topic: kAlreadyExists when another producer uses the name (or a
  // shared producer meets an exclusive one), kFenced when an exclusive
  // producer meets others, kResourceExhausted while a backlog quota blocks
  // producers (see quota_block()), kLimitReached when the topic has
  // maxProducersPerTopic producers already (or the tenant its maxProducers),
  // kUnavailable once closed. A
  // WaitForExclusive producer that must wait is registered as waiting and
  // `waiting` (may be empty) runs; `done` runs once it is admitted. With
  // deduplication on, `done` waits until the topic's sequence ids are
  // recovered.
  void add_producer(ProducerOptions options, std::function<void()> waiting,
                    ledger::Callback<common::Result<ProducerAdmission>> done);
  // A Shared producer without close notification, answered at once.
  common::Status add_producer(uint64_t producer_id, const std::string& producer_name, ClientInfo client = {});
  // Forgets an admitted or waiting producer; a waiting exclusive producer
  // may be admitted as a result.
  void remove_producer(uint64_t producer_id);

  // Appends one entry for a registered producer (its name goes into the
  // header) and completes with the entry's position once stored; consumers
  // are woken after that. kNotFound for an unknown producer. With
  // deduplication on, an entry whose sequence id was stored already
  // completes with kDuplicatePosition and is not stored again;
  // `highest_sequence_id` is the last sequence id of a batch (-1: the
  // header's sequence id plus its messages). While the backlog quota holds
  // producers, the entry waits; with producer_exception it fails with
  // kResourceExhausted.
  void publish(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload,
               ledger::Callback<common::Result<ledger::Position>> done, int64_t highest_sequence_id = -1);
  // As publish, completing with the topic-wide index of the entry's first
  // message as well (Kafka's base offset): the index the log gave the entry
  // when it took the add, which a publish that waits (held here, or in the
  // log while it rolls over) learns only then. A duplicate completes with
  // kDuplicatePosition and first index -1.
  void publish_appended(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload,
                        ledger::Callback<common::Result<ledger::AppendedEntry>> done);

  // Its tenant's shared state (tenant_state.h): the producer and consumer
  // counts (its limits come from the context's tenant_limits when one
  // arrives), the publish budget and the dispatch budget every subscription
  // and Kafka fetch of the tenant charges. Before subscriptions attach.
  void set_tenant(std::shared_ptr<TenantState> tenant) { tenant_ = std::move(tenant); }
  // The dispatch limits a reader outside the dispatchers is held to: a
  // Kafka fetch for `group` ("" when its connection is in none) charges the
  // topic's dispatchRate, the tenant's, and the group's own budget at the
  // subscriptionDispatchRate (a Kafka group is a subscription). The buckets
  // are shared, so what a read hands out can be charged after the read,
  // wherever it completes.
  struct FetchLimits {
    std::shared_ptr<RateBuckets> topic, tenant, group;
    DispatchAllowance allowance(int64_t now_ns) const {
      return dispatch_allowance({topic.get(), tenant.get(), group.get()}, now_ns);
    }
    int64_t charge(int64_t messages, int64_t bytes, int64_t now_ns) const {
      return charge_dispatch({topic.get(), tenant.get(), group.get()}, messages, bytes, now_ns);
    }
  };
  FetchLimits fetch_limits(const std::string& group);
  // The publish rate limits of this topic (publish_limiter.h), which the
  // connections producing to it charge: taken from the context on first
  // use (a producer arrives, a Kafka produce) and kept while the topic is
  // loaded; an idle topic holds none. Null without a context.
  PublishLimits* publish_limits();
  // Whether its namespace traces its messages now.
  bool tracing_on() const { return cold_ && cold_->tracing.on(); }
  // A reader outside the dispatchers (a Kafka fetch) was handed these
  // entries: each traced one is recorded as dispatched to `reader`, with
  // no subscription (a Kafka fetch does not say which group it reads for;
  // the group's commits show as acks of its subscription).
  void trace_read(const std::vector<ledger::Position>& entries, const ClientInfo& reader,
                  const std::string& reader_name);
  // Trace topics only: appends one encoded TraceBatch (tracing.h).
  void append_traces(common::Slice batch);

  // Applies deduplication and backlog quota settings: turning deduplication
  // on recovers the sequence ids from the snapshot and the log first
  // (publishes wait meanwhile).
  void apply_policies(const NamespacePolicies& policies);
  // Re-reads its policies (the context's), enforces the backlog quota and drops
  // abandoned reader subscriptions (the broker's maintenance timer calls
  // this).
  void maintain_producers();
  // A reader's subscription goes with its last consumer (remove_consumer),
  // but one whose consumers the broker detached (a seek) waits for its
  // reader to come back: dropped once it was still without a consumer at
  // the housekeeping pass before this one.
  void drop_abandoned_readers();
  // Re-reads its policies (the context's) and applies them (apply_policies): on every
  // producer or consumer arrival and when the policy cache changes.
  void refresh_policies();
  // Checks the backlog against the size quota (and the last age check)
  // and acts on the quota's policy.
  void check_backlog_quota();
  // Reads the oldest backlog entry of each durable subscription, then
  // checks the age quota (message_age) against its publish time.
  void check_backlog_age();
  // Publishing refused by the backlog quota, or by the tenant's storage
  // quota (as producer_exception).
  QuotaBlock quota_block() const { return storage_exceeded() ? QuotaBlock::kException : quota_block_; }
  // The tenant's largest message in bytes (TenantLimits' maxMessageSize);
  // -1: no limit. publish() refuses a larger payload.
  int64_t max_message_bytes() const {
    return tenant_ != nullptr ? tenant_->max_message_bytes.load(std::memory_order_relaxed) : -1;
  }
  // Why a payload of `bytes` is refused as over max_message_bytes().
  std::string too_large(size_t bytes) const;
  bool deduplication_enabled() const { return dedup_ != nullptr; }
  // Deduplication state (tests and stats); null when off.
  Deduplication* deduplication() { return dedup_.get(); }
  // Estimated bytes of the slowest durable subscription's backlog.
  uint64_t backlog_bytes() const;

  // Attaches a consumer to subscription options.subscription, creating the
  // subscription (and its cursor) on first use: at the end of the log, or at
  // its beginning with InitialPosition::kEarliest, or for a reader after
  // options.start_after (see ConsumerOptions); options.rollback_ms moves it
  // back in time first. kLimitReached when the topic has
  // maxConsumersPerTopic consumers, the subscription
  // maxConsumersPerSubscription or the tenant its maxConsumers already, or a
  // new subscription would pass maxSubscriptionsPerTopic; kInvalidArgument
  // when a reader and a durable subscription of a persistent topic would
  // share the name.
  void subscribe(uint64_t consumer_id, ConsumerOptions options, ConsumerSink* sink,
                 ledger::Callback<common::Result<Subscription*>> done);
  // Detaches a consumer (Subscription::remove_consumer); a non-durable
  // subscription (a reader's) of a persistent topic goes away with its last
  // consumer, cursor and all. Nothing happens for an unknown subscription
  // or consumer.
  void remove_consumer(const std::string& subscription, uint64_t consumer_id);
  // Runs `fn` once, after the next entry is stored (readers waiting for
  // data: a Kafka Fetch at the end of the log). One waiter per `key`: a
  // second call with the same key replaces the first. Home reactor.
  void when_entries_added(const void* key, std::function<void()> fn);
  Subscription* subscription(const std::string& name);
  std::vector<std::string> subscription_names() const;
  // Every subscription, by name, without copying (home reactor).
  const std::map<std::string, Subscription>& subscriptions() const { return subscriptions_; }
  // Removes a subscription without consumers. kFailedPrecondition while it
  // has consumers, kNotFound when missing. Its cursor is deleted from the
  // log in the background.
  common::Status unsubscribe(const std::string& name);
  // The same, completing once the cursor is gone from the log; with
  // `force`, consumers are detached first (their sinks are told the
  // subscription was deleted).
  void remove_subscription(const std::string& name, bool force, ledger::Callback<common::Status> done);
  // Creates a subscription with no consumer (its type is set by the first
  // consumer), its durable cursor at `start`. kAlreadyExists when it exists,
  // kLimitReached at maxSubscriptionsPerTopic.
  void create_subscription(const std::string& name, InitialPosition start,
                           ledger::Callback<common::Result<Subscription*>> done);
  // Marks subscription `name` replicated (its acknowledgements reach the
  // other clusters the topic is replicated to) or not; persisted.
  // kNotFound when missing, kInvalidArgument for a reader or a
  // non-persistent topic's subscription.
  common::Status set_subscription_replicated(const std::string& name, bool on);
  // The topic-wide index of the last message at or before entry p (that of
  // the message before the ledger's first for (ledger, -1)); nullopt when
  // the chain does not hold p's ledger or does not know its message counts.
  std::optional<int64_t> last_index_at(ledger::Position p) const;
  // Acknowledgements of replicated subscription `name` on `cluster`, which
  // acknowledged that topic's messages through its index `origin_index`
  // and, by them, this topic's through `local_index` (-1: unknown): the
  // subscription here moves forward to the last entry every entry up to is
  // consumed there (made, from the earliest, when missing), never back.
  // The attachments tell what `origin_index` covers (consumed_through).
  void apply_remote_acks(const std::string& name, const std::string& cluster, int64_t origin_index,
                         int64_t local_index, ledger::Callback<common::Status> done);
  // Makes a subscription for every cursor the log already has (the durable
  // cursors it recovered). Called once, right after the topic is loaded.
  void restore_subscriptions();
  // Moves subscription `name`'s mark-delete position to `mark_delete`
  // (persisted), detaching its consumers first as Pulsar does, so they
  // reconnect and read from there. kNotFound when missing.
  void reset_subscription(const std::string& name, ledger::Position mark_delete,
                          ledger::Callback<common::Status> done);
  // Pulsar's seek (topic_seek.cc): subscription `name` delivers `first`
  // next, clamped to the log (before its start: the earliest; past its end:
  // the latest); consumers are detached as by reset_subscription().
  // `unacked`, when not empty, is Pulsar's ack_set for a position inside a
  // batch: bit i set = message i of `first` is delivered again; the others
  // count as acknowledged, so the client skips them.
  void seek_subscription(const std::string& name, ledger::Position first, ledger::Callback<common::Status> done,
                         std::vector<uint64_t> unacked = {});
  // The same, to the first message published at or after `time_ms`
  // (persistent topics only; FailedPrecondition otherwise).
  void seek_subscription_by_time(const std::string& name, int64_t time_ms, ledger::Callback<common::Status> done);

  // Topic compaction (compaction.h; topic_compaction.cc). Starts a pass in
  // the background; its outcome goes to the context's compaction board.
  // kFailedPrecondition for a topic that is not persistent, kAlreadyExists
  // while a pass of it runs, kUnimplemented without a codec.
  common::Status start_compaction();
  // Starts a pass when the bytes after the compacted view's horizon reach
  // the compactionThreshold policy, or, for a compact cleanup policy
  // without one, the view's own size and at least kMinCompactableBytes
  // (Kafka's min.cleanable.dirty.ratio of 0.5). The housekeeping calls it.
  void check_compaction();
  static constexpr uint64_t kMinCompactableBytes = 1u << 20;
  // The bytes of the log after its compacted view's horizon (all of it
  // without a view).
  uint64_t bytes_after_compaction_horizon() const;
  // Kafka's cleanup.policy for this topic (delete unless its policies say).
  CleanupPolicy cleanup_policy() const {
    return cold_ && cold_->cleanup ? *cold_->cleanup : CleanupPolicy::kDelete;
  }

  // Expires when this topic is destroyed (unloaded, deleted): work that
  // continues after an asynchronous step checks it before using the topic.
  std::weak_ptr<bool> liveness() const { return alive_; }

  // When the topic was last used (steady clock, ms): BrokerService::with_topic
  // touches it for every request that reaches it.
  void touch(int64_t now_ms) { last_used_ms_ = now_ms; }
  int64_t last_used_ms() const { return last_used_ms_; }
  // Nobody is attached and nothing is under way: no producer (admitted or
  // waiting), no consumer, no held publish, no waiter for entries, and an
  // idle log. Such a topic may leave memory; the next use loads it again.
  bool idle() const;

  // Attachments (TopicAttachment), by key; attaching under a key in use
  // replaces (destroys) the one there. Home reactor.
  void attach(const std::string& key, std::unique_ptr<TopicAttachment> attachment);
  TopicAttachment* attachment(const std::string& key);
  std::unique_ptr<TopicAttachment> detach(const std::string& key);
  std::vector<std::string> attachment_keys() const;

  TopicStats stats() const;
  // stats() plus message and byte rates per second (see RateMeter).
  TopicStats stats_at(RateMeter::Clock::time_point now);
  size_t producer_count() const { return producers_.size(); }
  size_t consumer_count() const;

  // Detaches every consumer (telling each sink `why`) and producer (its
  // on_closed), refuses new producers and consumers, writes the
  // deduplication snapshot and closes the log.
  void close(const common::Status& why, ledger::Callback<common::Status> done);

 private:
  struct Producer {
    std::string name;
    TenantSlot tenant_slot;  // its place among its tenant's producers
    uint64_t messages_in = 0;
    uint64_t bytes_in = 0;
    ProducerAccessMode access_mode = ProducerAccessMode::kShared;
    ClientInfo client{};
    bool own_sequence = true;  // deduplication may judge it (HeldPublish::own_sequence)
    std::function<void(const common::Status&)> on_closed;
  };
  struct WaitingProducer {
    ProducerOptions options;
    TenantSlot tenant_slot;
    ledger::Callback<common::Result<ProducerAdmission>> done;
  };
  // Who waits for a publish: publish's caller (the position) or
  // publish_appended's (position and first index); one of the two is set.
  struct PublishDone {
    ledger::Callback<common::Result<ledger::Position>> position;
    ledger::Callback<common::Result<ledger::AppendedEntry>> appended;
    void operator()(common::Result<ledger::AppendedEntry> r) const;
  };
  struct HeldPublish {
    uint64_t producer_id;
    ledger::MessageHeader header;
    common::Slice payload;
    PublishDone done;
    int64_t highest_sequence_id;
    int64_t received_ms = 0;  // traced topics only: when it arrived
    // The client chose its sequence ids (a Pulsar producer): deduplication
    // judges only those. A Kafka or AMQP publish's ids are the connection's
    // own count, which starts again at 0 on every connection.
    bool own_sequence = true;
  };
  void publish(uint64_t producer_id, ledger::MessageHeader header, common::Slice payload, PublishDone done,
               int64_t highest_sequence_id);
  static constexpr size_t kMaxHeldPublishes = 10000;

  common::Status name_in_use(const std::string& name) const;
  // Attaches a consumer to its subscription, which exists, after moving the
  // subscription back by options.rollback_ms when asked (subscribe()).
  void attach_consumer(uint64_t consumer_id, ConsumerOptions options, ConsumerSink* sink,
                       ledger::Callback<common::Result<Subscription*>> done);
  // The mark-delete position of a new reader asked to start after
  // `start_after` (ConsumerOptions::start_after), clamped to the log.
  ledger::Position reader_start(ledger::Position start_after, InitialPosition initial) const;
  // reset_subscription(), running `then` (may be empty) once the cursor
  // moved and before the subscription reads from there.
  void move_subscription(const std::string& name, ledger::Position mark_delete, std::function<void()> then,
                         ledger::Callback<common::Status> done);
  // The mark-delete position that makes `first` the next entry delivered,
  // clamped to the log as seek_subscription() says.
  ledger::Position position_before(ledger::Position first) const;
  // Why clients may not produce to or subscribe to a trace topic.
  common::Status system_topic_refusal() const;
  void admit(ProducerOptions options, TenantSlot slot, ledger::Callback<common::Result<ProducerAdmission>> done);
  // A place among the tenant's producers or consumers (TenantLimits), or
  // ResourceExhausted with the limit's words.
  common::Result<TenantSlot> take_tenant_slot(TenantSlot::Counter counter) const;
  bool storage_exceeded() const {
    return tenant_ != nullptr && tenant_->usage.storage_exceeded.load(std::memory_order_relaxed);
  }
  // Why nothing may be published now (a quota), or ok.
  common::Status quota_refusal() const;
  void admit_waiting();
  // Closes producer `id` (its on_closed runs) and forgets it.
  void close_producer(uint64_t id, const common::Status& why);
  // OK while maxSubscriptionsPerTopic (as last refreshed) leaves room for
  // one more subscription; kLimitReached with Pulsar's words otherwise.
  common::Status subscription_room() const;
  // Runs `go` on this topic's home reactor once durable subscription
  // `name` may be made as far as the tenant's subscription count goes: at
  // once when it has no limit; after the admitter answers otherwise (with
  // its refusal, or Unavailable when the topic closed meanwhile).
  void admit_subscription(const std::string& name, bool durable, std::function<void(common::Status)> go);
  void store_entry(HeldPublish p);
  void release_held();
  void hold_retry_timer();
  // Applies `quota`'s policy once the backlog is over it (by size or age).
  void act_on_quota(const BacklogQuota& quota, bool by_age);
  void when_dedup_ready(std::function<void()> fn);
  // Deduplication on (every producer, or replicators only) or off.
  void apply_dedup(const NamespacePolicies& policies);
  void apply_tracing(const NamespacePolicies& policies);
  void apply_compaction_policies(const NamespacePolicies& policies);
  // Retention, TTL and the fsync mode of the managed ledger.
  void apply_log_policies(const NamespacePolicies& policies);
  void apply_dispatch_rates(const NamespacePolicies& policies);
  // Gives `sub` the dispatch limits in effect (apply_dispatch_rates).
  void limit_dispatch(Subscription& sub);
  // The received and persisted events of an entry stored at `at`.
  void trace_stored(ledger::Position at, int64_t received_ms, uint64_t producer_id, const ledger::MessageHeader& header,
                    const common::Slice& payload);

  // What most topics never use, made on first use (cold()): a loaded idle
  // topic carries one null pointer for it (docs/benchmarks.md, "Many idle
  // topics").
  struct Cold {
    std::vector<std::function<void()>> dedup_waiters;  // run once recovery ends
    std::vector<std::pair<const void*, std::function<void()>>> entry_waiters;  // when_entries_added
    std::optional<BacklogQuota> size_quota;
    std::optional<BacklogQuota> age_quota;
    bool age_exceeded = false;  // as of the last check_backlog_age
    bool age_checking = false;
    std::unique_ptr<runtime::Timer> hold_timer;
    ProducerAccess access;
    std::map<uint64_t, WaitingProducer> waiting_producers;
    // Reader (non-durable) subscriptions without a consumer at the last
    // housekeeping pass (drop_abandoned_readers).
    std::vector<std::string> readers_without_consumers;
    std::map<std::string, RateMeter> meters;  // "in", "out", "p/<id>", "s/<name>", "c/<name>/<id>"
    // Kafka groups' fetch budgets at the subscriptionDispatchRate, by group.
    std::map<std::string, std::shared_ptr<RateBuckets>> fetch_group_limits;
    common::Fifo<HeldPublish> held;  // publishes waiting for deduplication or the quota
    // The publishRate policy, for stats while the topic holds no limits.
    std::optional<PublishRate> publish_rate;
    // dispatchRate (shared by the subscriptions; null: none) and
    // subscriptionDispatchRate (each subscription's own; -1: none), per
    // second; set here once a policy first limits dispatch.
    std::shared_ptr<RateBuckets> dispatch_limits;
    int64_t sub_dispatch_msgs = -1;
    int64_t sub_dispatch_bytes = -1;
    uint64_t removed_messages_out = 0;  // from subscriptions since removed
    uint64_t removed_bytes_out = 0;
    // Its tracing state, shared with its subscriptions (tracing_state()),
    // and what "persisted" means in a trace under its persistence policy.
    TopicTracing tracing;
    std::string trace_durability;
    // Compaction policies as last applied (apply_compaction_policies).
    std::optional<int64_t> compaction_threshold;
    std::optional<CleanupPolicy> cleanup;
    std::optional<int64_t> delete_retention_ms;
    std::optional<int64_t> min_compaction_lag_ms;
    std::map<std::string, std::unique_ptr<TopicAttachment>> attachments;
  };
  // What subscriptions read their tracing from; null until tracing was first on.
  TopicTracing* tracing_state() { return cold_ ? &cold_->tracing : nullptr; }
  Cold& cold() {
    if (!cold_) cold_ = std::make_unique<Cold>();
    return *cold_;
  }
  std::unique_ptr<Cold> cold_;
  // When stats_at last sampled the rates (a counter without a meter was 0
  // then); the clock's epoch before the first sample.
  RateMeter::Clock::time_point last_sample_{};

  const TopicContext& context_;
  std::unique_ptr<Deduplication> dedup_;
  // From the policies; given to each subscription as a consumer attaches.
  uint32_t max_unacked_per_consumer_ = Subscription::kDefaultMaxUnackedPerConsumer;
  uint32_t max_unacked_per_subscription_ = Subscription::kDefaultMaxUnackedPerSubscription;
  QuotaBlock quota_block_ = QuotaBlock::kNone;
  bool closed_ = false;
  bool taken_over_ = false;  // reported to context_.log_taken_over

  const TopicName name_;
  const uint64_t load_;
  std::shared_ptr<ledger::Log> log_;
  common::LazyMap<uint64_t, Producer> producers_;
  std::map<std::string, Subscription> subscriptions_;  // in place: one allocation each
  uint64_t messages_in_ = 0;
  uint64_t bytes_in_ = 0;
  int64_t last_used_ms_ = 0;
  std::shared_ptr<PublishLimits> publish_limits_;  // publish_limits(): null until first used
  // maxProducersPerTopic, maxConsumersPerTopic, maxConsumersPerSubscription
  // from the policies; 0: no limit.
  uint32_t max_producers_ = 0;
  uint32_t max_consumers_ = 0;
  uint32_t max_consumers_per_subscription_ = 0;
  uint32_t max_subscriptions_ = 0;
  std::shared_ptr<TenantState> tenant_;  // shared with the tenant's other topics
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace magnetar::broker
