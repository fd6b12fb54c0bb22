#include "broker/topic.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include <limits>

#include "common/clock.h"
#include "common/logging.h"
#include "ledger/managed_ledger.h"

namespace magnetar::broker {

using common::Result;
using common::Status;
using ledger::Position;

namespace {
std::atomic<uint64_t> topics_made{0};
}  // namespace

Topic::Topic(TopicName name, std::shared_ptr<ledger::Log> log, const TopicContext& context)
    : context_(context), name_(std::move(name)), load_(++topics_made), log_(std::move(log)) {}

Topic::~Topic() { *alive_ = false; }

void Topic::apply_policies(const NamespacePolicies& policies) {
  if (policies.backlog_quota_size || policies.backlog_quota_age || policies.publish_rate || cold_) {
    Cold& c = cold();
    c.publish_rate = policies.publish_rate;
    c.size_quota = policies.backlog_quota_size;
    c.age_quota = policies.backlog_quota_age;
    if (!c.age_quota) c.age_exceeded = false;
  }
  auto limit = [](const std::optional<int32_t>& v, uint64_t fallback) { return v ? uint64_t(*v) : fallback; };
  max_unacked_per_consumer_ =
      limit(policies.max_unacked_messages_per_consumer, Subscription::kDefaultMaxUnackedPerConsumer);
  max_unacked_per_subscription_ =
      limit(policies.max_unacked_messages_per_subscription, Subscription::kDefaultMaxUnackedPerSubscription);
  apply_dispatch_rates(policies);
  auto count_limit = [](const std::optional<int32_t>& v) { return v && *v > 0 ? uint32_t(*v) : uint32_t{0}; };
  max_producers_ = count_limit(policies.max_producers_per_topic);
  max_consumers_ = count_limit(policies.max_consumers_per_topic);
  max_consumers_per_subscription_ = count_limit(policies.max_consumers_per_subscription);
  max_subscriptions_ = count_limit(policies.max_subscriptions_per_topic);
  for (auto& [name, sub] : subscriptions_) {
    sub.set_unacked_limits(max_unacked_per_consumer_, max_unacked_per_subscription_);
    limit_dispatch(sub);
  }
  apply_tracing(policies);
  apply_compaction_policies(policies);
  apply_log_policies(policies);
  apply_dedup(policies);
  if (context_.on_policies && name_.domain == TopicDomain::kPersistent && !closed_) {
    context_.on_policies(*this, policies);
  }
}

void Topic::apply_dedup(const NamespacePolicies& policies) {
  // A namespace replicated between clusters always deduplicates what the
  // replicators of the other clusters send (by their origin positions);
  // the deduplication policy extends that to every producer.
  const bool all = policies.deduplication.value_or(false);
  const bool replicated = policies.replication_clusters.size() > 1;
  bool want_dedup = (all || replicated) && context_.store != nullptr && name_.domain == TopicDomain::kPersistent &&
                    !closed_;
  if (!want_dedup) {
    if (dedup_ && dedup_->ready()) dedup_.reset();
    return;
  }
  const std::string only = all ? std::string() : std::string(kReplicatorPrefix);
  if (dedup_) {
    dedup_->set_only_prefix(only);
    return;
  }
  dedup_ = std::make_unique<Deduplication>(*context_.store, Deduplication::snapshot_key(name_));
  dedup_->set_only_prefix(only);
  std::weak_ptr<bool> alive = alive_;
  dedup_->recover(*log_, [this, alive](Status st) {
    if (alive.expired()) return;
    if (!st.is_ok()) {
      MLOG_WARN("topic {}: deduplication not recovered, off for now: {}", name_.to_string(), st.to_string());
      dedup_.reset();
    }
    auto waiters = std::move(cold().dedup_waiters);
    cold_->dedup_waiters.clear();
    for (auto& fn : waiters) fn();
    release_held();
  });
}

storage::LedgerOptions ledger_copies(const NamespacePolicies& policies) {
  storage::LedgerOptions copies;
  if (policies.persistence) {
    copies.ensemble = policies.persistence->ensemble;
    copies.write_quorum = policies.persistence->write_quorum;
    copies.ack_quorum = policies.persistence->ack_quorum;
  }
  if (policies.bookie_affinity) {
    copies.affinity_primary = policies.bookie_affinity->primary;
    copies.affinity_secondary = policies.bookie_affinity->secondary;
  }
  return copies;
}

void Topic::apply_log_policies(const NamespacePolicies& policies) {
  if (context_.retention_defaults == nullptr) return;
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr) return;
  RetentionInEffect r = retention_in_effect(name_, policies, false, origin_from_byte(ml->origin()),
                                            *context_.retention_defaults);
  const int64_t ttl_ms =
      policies.message_ttl_seconds && !is_trace_topic(name_) ? int64_t{*policies.message_ttl_seconds} * 1000 : 0;
  if (cleanup_policy() == CleanupPolicy::kCompact) {
    // Its compacted view replaces its history: never trimmed by age or size.
    r.time_ms = -1;
    r.size_bytes = -1;
  }
  ml->set_retention(std::chrono::milliseconds(r.time_ms), r.size_bytes, std::chrono::milliseconds(ttl_ms));
  std::optional<storage::FsyncMode> fsync;
  if (policies.persistence && policies.persistence->fsync_mode) {
    switch (*policies.persistence->fsync_mode) {
      case FsyncMode::kAlways: fsync = storage::FsyncMode::kAlways; break;
      case FsyncMode::kInterval: fsync = storage::FsyncMode::kInterval; break;
      case FsyncMode::kNever: fsync = storage::FsyncMode::kNever; break;
    }
  }
  ml->set_fsync(fsync, std::chrono::milliseconds(policies.persistence ? policies.persistence->fsync_interval_ms : 0));
  ml->set_copies(ledger_copies(policies));
}

namespace {

// Pulsar's dispatch rates are per period (ratePeriodInSecond); the buckets
// count per second (at least one token when a limit is set).
int64_t per_second(int64_t per_period, int32_t period_seconds) {
  if (per_period <= 0) return -1;
  return std::max<int64_t>(1, per_period / std::max(1, period_seconds));
}

}  // namespace

void Topic::apply_dispatch_rates(const NamespacePolicies& policies) {
  const auto& topic_rate = policies.dispatch_rate;
  const int64_t msgs = topic_rate ? per_second(topic_rate->msgs_per_period, topic_rate->period_seconds) : -1;
  const int64_t bytes = topic_rate ? per_second(topic_rate->bytes_per_period, topic_rate->period_seconds) : -1;
  const auto& sub_rate = policies.subscription_dispatch_rate;
  const int64_t sub_msgs = sub_rate ? per_second(sub_rate->msgs_per_period, sub_rate->period_seconds) : -1;
  const int64_t sub_bytes = sub_rate ? per_second(sub_rate->bytes_per_period, sub_rate->period_seconds) : -1;
  if (!cold_ && msgs <= 0 && bytes <= 0 && sub_msgs <= 0 && sub_bytes <= 0) return;  // never limited
  Cold& c = cold();
  if (msgs > 0 || bytes > 0) {
    if (!c.dispatch_limits) c.dispatch_limits = std::make_shared<RateBuckets>();
    c.dispatch_limits->set(msgs, bytes, limiter_now_ns());
  } else {
    c.dispatch_limits.reset();
  }
  c.sub_dispatch_msgs = sub_msgs;
  c.sub_dispatch_bytes = sub_bytes;
}

void Topic::limit_dispatch(Subscription& sub) {
  RateBuckets* tenant = tenant_ ? &tenant_->dispatch : nullptr;
  if (!cold_) return sub.set_dispatch_limits(nullptr, tenant, -1, -1);
  sub.set_dispatch_limits(cold_->dispatch_limits, tenant, cold_->sub_dispatch_msgs, cold_->sub_dispatch_bytes);
}

Topic::FetchLimits Topic::fetch_limits(const std::string& group) {
  FetchLimits limits{cold_ ? cold_->dispatch_limits : nullptr,
                     tenant_ ? std::shared_ptr<RateBuckets>(tenant_, &tenant_->dispatch) : nullptr, nullptr};
  if (!cold_ || (cold_->sub_dispatch_msgs <= 0 && cold_->sub_dispatch_bytes <= 0)) {
    if (cold_) cold_->fetch_group_limits.clear();
    return limits;
  }
  if (group.empty()) return limits;
  auto& groups = cold().fetch_group_limits;
  auto& bucket = groups[group];
  if (!bucket) {
    // Groups come and go: forget the budgets no fetch holds, now and then.
    if (groups.size() % 256 == 0) {
      std::erase_if(groups, [](const auto& kv) { return kv.second && kv.second.use_count() == 1; });
    }
    bucket = std::make_shared<RateBuckets>();
  }
  bucket->set(cold_->sub_dispatch_msgs, cold_->sub_dispatch_bytes, limiter_now_ns());  // no-op unless the rate changed
  limits.group = bucket;
  return limits;
}

void Topic::apply_tracing(const NamespacePolicies& policies) {
  bool was_on = tracing_on();
  if (!cold_ && (!policies.tracing || policies.tracing->mode == TraceMode::kOff)) return;  // never traced
  TopicTracing& tracing = cold().tracing;
  tracing.configure(name_, policies.tracing, context_.trace_recorder);
  if (!tracing.on()) {
    if (was_on) {
      if (auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get())) ml->set_observer({});
    }
    return;
  }
  // What the storage does: the node's copies (one on a standalone node,
  // whatever the quorums say; several in a cluster), synced as the
  // namespace's fsync mode, else the node's, says.
  std::string fsync;  // the namespace's mode; empty: the node's
  if (policies.persistence && policies.persistence->fsync_mode) {
    const FsyncMode mode = *policies.persistence->fsync_mode;
    fsync = mode == FsyncMode::kInterval ? "every " + std::to_string(policies.persistence->fsync_interval_ms) + " ms"
                                         : std::string(fsync_mode_name(mode));
  }
  const std::string node = context_.storage_durability != nullptr ? *context_.storage_durability
                                                                  : std::string("1 copy on this node");
  std::string& durability = cold().trace_durability;
  if (name_.domain == TopicDomain::kNonPersistent) {
    durability = "in memory only (non-persistent)";
  } else if (!fsync.empty()) {
    durability = node.substr(0, node.rfind(", fsync ")) + ", fsync " + fsync;
  } else {
    durability = node;
  }
  if (was_on) return;
  for (auto& [name, sub] : subscriptions_) sub.set_tracing(&tracing);
  auto* ml = dynamic_cast<ledger::ManagedLedger*>(log_.get());
  if (ml == nullptr) return;
  // Housekeeping's removals, as range events.
  std::weak_ptr<bool> alive = alive_;
  ledger::LogObserver observer;
  observer.expired = [this, alive](const std::string& cursor, Position after, Position last) {
    if (alive.expired() || !tracing_on()) return;
    cold_->tracing.record(range_event(TraceStage::kExpired, after, last, cursor, "message TTL or expiry"));
  };
  observer.removed = [this, alive](ledger::LedgerId ledger) {
    if (alive.expired() || !tracing_on()) return;
    cold_->tracing.record(range_event(TraceStage::kRemoved, Position{ledger, -1},
                                      Position{ledger, std::numeric_limits<ledger::EntryId>::max()}, "",
                                      "ledger " + std::to_string(ledger) + " removed by retention"));
  };
  ml->set_observer(std::move(observer));
}

void Topic::append_traces(common::Slice batch) {
  if (closed_) return;
  ledger::MessageHeader header;
  header.publish_time_ms = common::wall_clock_ms();
  header.producer = "broker";
  log_->add_entry(std::move(header), std::move(batch), [topic = name_.to_string()](Result<ledger::AppendedEntry> r) {
    if (!r.is_ok()) MLOG_WARN("traces not stored in {}: {}", topic, r.status().to_string());
  });
}

void Topic::subscribe(uint64_t consumer_id, ConsumerOptions options, ConsumerSink* sink,
                      ledger::Callback<Result<Subscription*>> done) {
  if (closed_) {
    done(Status::unavailable("topic " + name_.to_string() + " is closed"));
    return;
  }
  if (options.subscription.empty()) {
    done(Status::invalid_argument("a subscription needs a name"));
    return;
  }
  if (is_trace_topic(name_)) {
    done(system_topic_refusal());
    return;
  }
  if (is_replicator_name(options.subscription)) {
    done(Status::invalid_argument("subscription names starting with '" + std::string(kReplicatorPrefix) +
                                  "' are reserved for geo-replication"));
    return;
  }
  if (options.read_compacted && (name_.domain != TopicDomain::kPersistent ||
                                 (options.type != SubscriptionType::kExclusive &&
                                  options.type != SubscriptionType::kFailover))) {
    // Pulsar's words.
    done(Status::invalid_argument("Read compacted can only be used with exclusive or failover persistent "
                                  "subscriptions"));
    return;
  }
  refresh_policies();  // once: the limits below and the new subscription's room read them
  if (auto it = subscriptions_.find(options.subscription); it != subscriptions_.end()) {
    // Pulsar's words: a reader and a subscription never share a name. (A
    // non-persistent topic's cursors are never durable, whatever was asked.)
    if (name_.domain == TopicDomain::kPersistent && it->second.cursor().durable() != options.durable) {
      done(Status::invalid_argument(options.durable ? "NonDurable subscription with the same name already exists."
                                                    : "Durable subscription with the same name already exists."));
      return;
    }
    attach_consumer(consumer_id, std::move(options), sink, std::move(done));
    return;
  }
  if (Status room = subscription_room(); !room.is_ok()) {
    done(room);
    return;
  }
  const bool durable = options.durable;
  std::string name = options.subscription;
  admit_subscription(std::move(name), durable, [this, consumer_id, sink, options = std::move(options),
                                                done = std::move(done)](Status admitted) mutable {
    if (!admitted.is_ok()) return done(admitted);
    auto start = options.initial_position == InitialPosition::kEarliest ? ledger::Log::CursorStart::kEarliest
                                                                        : ledger::Log::CursorStart::kLatest;
    std::weak_ptr<bool> alive = alive_;
    // Read before `options` moves into the callback below.
    const std::string subscription = options.subscription;
    const bool keep = options.durable;
    log_->open_cursor(subscription, keep, start,
                      [this, alive, consumer_id, sink, options = std::move(options),
                       done = std::move(done)](Result<ledger::Cursor*> cursor) mutable {
                        if (alive.expired()) {
                          done(Status::unavailable("topic closed while subscribing"));
                          return;
                        }
                        if (!cursor.is_ok()) {
                          done(cursor.status());
                          return;
                        }
                        // A concurrent subscribe may have created it meanwhile.
                        auto it = subscriptions_.find(options.subscription);
                        if (it == subscriptions_.end()) {
                          ledger::Cursor& c = **cursor;
                          if (!c.durable() && options.start_after && name_.domain == TopicDomain::kPersistent) {
                            // A fresh reader's cursor: nothing is persisted, so
                            // placing it is all there is to do.
                            c.reset(reader_start(*options.start_after, options.initial_position));
                          }
                          it = subscriptions_.try_emplace(options.subscription, options.type, *log_, c).first;
                          it->second.set_tracing(tracing_state());
                        }
                        attach_consumer(consumer_id, std::move(options), sink, std::move(done));
                      });
  });
}

void Topic::attach_consumer(uint64_t consumer_id, ConsumerOptions options, ConsumerSink* sink,
                            ledger::Callback<Result<Subscription*>> done) {
  auto attach = [this, consumer_id, sink](ConsumerOptions opts, ledger::Callback<Result<Subscription*>> done) {
    Subscription* sub = subscription(opts.subscription);
    if (sub == nullptr) {
      done(Status::unavailable("subscription " + opts.subscription + " went away while the consumer attached"));
      return;
    }
    sub->set_unacked_limits(max_unacked_per_consumer_, max_unacked_per_subscription_);
    limit_dispatch(*sub);
    // Pulsar's words, so clients and operators recognise them.
    if (max_consumers_ > 0 && consumer_count() >= max_consumers_) {
      return done(Status::limit_reached("Topic reached max consumers limit"));
    }
    if (max_consumers_per_subscription_ > 0 && sub->consumer_count() >= max_consumers_per_subscription_) {
      return done(Status::limit_reached("Subscription reached max consumers limit"));
    }
    auto slot = take_tenant_slot(&TenantCounters::consumers);
    if (!slot.is_ok()) return done(slot.status());
    sub->set_read_compacted(opts.read_compacted);
    const bool replicate = opts.replicate_state && sub->cursor().durable() && !sub->cursor().replicated();
    auto c = sub->add_consumer(consumer_id, std::move(opts), sink);
    if (!c) return done(c.status());
    if (replicate) (void)set_subscription_replicated(sub->name(), true);
    (*c)->hold(std::move(slot).value());
    done(sub);
  };
  if (options.rollback_ms <= 0 || name_.domain != TopicDomain::kPersistent) {
    return attach(std::move(options), std::move(done));
  }
  // As Pulsar does: a failed move back is logged and the consumer attaches
  // where the subscription is.
  const std::string name = options.subscription;
  const int64_t rollback_ms = options.rollback_ms;
  std::weak_ptr<bool> alive = alive_;
  seek_subscription_by_time(name, common::wall_clock_ms() - rollback_ms,
                            [this, alive, name, rollback_ms, attach, options = std::move(options),
                             done = std::move(done)](Status st) mutable {
                              if (alive.expired()) return done(Status::unavailable("topic closed while subscribing"));
                              if (!st.is_ok()) {
                                MLOG_WARN("topic {}: subscription {} not moved back {} ms: {}", name_.to_string(), name,
                                          rollback_ms, st.to_string());
                              }
                              attach(std::move(options), std::move(done));
                            });
}

void Topic::admit_subscription(const std::string& name, bool durable, std::function<void(Status)> go) {
  auto limits = context_.tenant_limits ? context_.tenant_limits(name_.ns.tenant) : nullptr;
  runtime::Reactor* home = runtime::Reactor::current();
  if (!durable || !context_.admit_subscription || limits == nullptr || limits->max_subscriptions <= 0 || home == nullptr) {
    return go(Status::ok());
  }
  std::weak_ptr<bool> alive = alive_;
  context_.admit_subscription(name_, name, [home, alive, go = std::move(go)](Status st) mutable {
    auto back = [alive, go = std::move(go), st]() {
      if (alive.expired()) return go(Status::unavailable("topic closed while subscribing"));
      go(st);
    };
    if (home->is_on_thread()) return back();
    if (!home->post_reliably(std::move(back))) MLOG_WARN("subscription admitted while its reactor stops");
  });
}

void Topic::trace_read(const std::vector<ledger::Position>& entries, const ClientInfo& reader,
                       const std::string& reader_name) {
  if (!tracing_on()) return;
  const int64_t now = common::wall_clock_ms();
  for (const ledger::Position& p : entries) {
    if (!cold_->tracing.traced(p)) continue;
    TraceEvent e;
    e.stage = TraceStage::kDispatched;
    e.time_ms = now;
    e.position = p;
    e.consumer_name = reader_name;
    e.client_address = reader.address;
    e.protocol = reader.protocol;
    e.detail = "fetched";
    cold_->tracing.record(std::move(e));
  }
}

void Topic::when_entries_added(const void* key, std::function<void()> fn) {
  auto& waiters = cold().entry_waiters;
  for (auto& [k, f] : waiters) {
    if (k == key) {
      f = std::move(fn);
      return;
    }
  }
  waiters.emplace_back(key, std::move(fn));
}

Subscription* Topic::subscription(const std::string& name) {
  auto it = subscriptions_.find(name);
  return it == subscriptions_.end() ? nullptr : &it->second;
}

std::vector<std::string> Topic::subscription_names() const {
  std::vector<std::string> out;
  for (const auto& [name, sub] : subscriptions_) out.push_back(name);
  return out;
}

Status Topic::unsubscribe(const std::string& name) {
  auto it = subscriptions_.find(name);
  if (it == subscriptions_.end()) return Status::not_found("no subscription '" + name + "' on " + name_.to_string());
  if (it->second.consumer_count() > 0) {
    return Status::failed_precondition("subscription '" + name + "' has active consumers");
  }
  auto s = it->second.stats();
  cold().removed_messages_out += s.messages_out;
  cold_->removed_bytes_out += s.bytes_out;
  subscriptions_.erase(it);
  log_->delete_cursor(name, [topic = name_.to_string(), name](Status st) {
    if (!st.is_ok()) MLOG_WARN("topic {}: cursor of subscription {} not deleted: {}", topic, name, st.to_string());
  });
  return Status::ok();
}

void Topic::remove_consumer(const std::string& subscription, uint64_t consumer_id) {
  auto it = subscriptions_.find(subscription);
  if (it == subscriptions_.end()) return;
  it->second.remove_consumer(consumer_id);
  // A reader's subscription lives as long as its consumers, as in Pulsar.
  if (name_.domain == TopicDomain::kPersistent && !it->second.cursor().durable() &&
      it->second.consumer_count() == 0) {
    (void)unsubscribe(subscription);
  }
}

void Topic::drop_abandoned_readers() {
  if (name_.domain != TopicDomain::kPersistent) return;
  std::vector<std::string> without_consumers;
  static const std::vector<std::string> kNone;
  const std::vector<std::string>& seen = cold_ ? cold_->readers_without_consumers : kNone;
  for (const auto& [name, sub] : subscriptions_) {
    if (sub.cursor().durable() || sub.consumer_count() > 0) continue;
    const bool before = std::find(seen.begin(), seen.end(), name) != seen.end();
    if (!before) without_consumers.push_back(name);
  }
  for (const std::string& name : seen) {  // unsubscribe leaves this list alone
    auto it = subscriptions_.find(name);
    if (it != subscriptions_.end() && !it->second.cursor().durable() && it->second.consumer_count() == 0) {
      (void)unsubscribe(name);
    }
  }
  if (cold_ || !without_consumers.empty()) cold().readers_without_consumers.swap(without_consumers);
}

void Topic::remove_subscription(const std::string& name, bool force, ledger::Callback<Status> done) {
  auto it = subscriptions_.find(name);
  if (it == subscriptions_.end()) {
    done(Status::not_found("Subscription " + name + " not found on " + name_.to_string()));
    return;
  }
  if (it->second.consumer_count() > 0) {
    if (!force) {
      done(Status::failed_precondition("Subscription " + name + " has active consumers"));
      return;
    }
    it->second.close_consumers(Status::not_found("subscription " + name + " was deleted"));
  }
  auto s = it->second.stats();
  cold().removed_messages_out += s.messages_out;
  cold_->removed_bytes_out += s.bytes_out;
  subscriptions_.erase(it);
  log_->delete_cursor(name, std::move(done));
}

Status Topic::subscription_room() const {
  if (max_subscriptions_ == 0 || subscriptions_.size() < max_subscriptions_) return Status::ok();
  return Status::limit_reached("Exceed the maximum number of subscriptions of the topic: " + name_.to_string());
}

void Topic::create_subscription(const std::string& name, InitialPosition start,
                                ledger::Callback<Result<Subscription*>> done) {
  if (closed_) {
    done(Status::unavailable("topic " + name_.to_string() + " is closed"));
    return;
  }
  if (name.empty()) {
    done(Status::invalid_argument("a subscription needs a name"));
    return;
  }
  if (is_replicator_name(name)) {
    done(Status::invalid_argument("subscription names starting with '" + std::string(kReplicatorPrefix) +
                                  "' are reserved for geo-replication"));
    return;
  }
  if (subscriptions_.count(name) > 0 || log_->cursor(name) != nullptr) {
    done(Status::already_exists("Subscription " + name + " already exists on " + name_.to_string()));
    return;
  }
  refresh_policies();
  if (Status room = subscription_room(); !room.is_ok()) {
    done(room);
    return;
  }
  admit_subscription(name, true, [this, name, start, done = std::move(done)](Status admitted) mutable {
    if (!admitted.is_ok()) return done(admitted);
    auto from = start == InitialPosition::kEarliest ? ledger::Log::CursorStart::kEarliest
                                                    : ledger::Log::CursorStart::kLatest;
    std::weak_ptr<bool> alive = alive_;
    log_->open_cursor(name, true, from, [this, alive, name, done = std::move(done)](Result<ledger::Cursor*> cursor) {
      if (alive.expired()) {
        done(Status::unavailable("topic closed while creating the subscription"));
        return;
      }
      if (!cursor.is_ok()) {
        done(cursor.status());
        return;
      }
      auto it = subscriptions_.find(name);
      if (it == subscriptions_.end()) {
        it = subscriptions_.try_emplace(name, *log_, **cursor).first;
        it->second.set_tracing(tracing_state());
        limit_dispatch(it->second);
      }
      done(&it->second);
    });
  });
}

Status Topic::set_subscription_replicated(const std::string& name, bool on) {
  if (subscription(name) == nullptr) return Status::not_found("Subscription " + name + " not found");
  if (name_.domain != TopicDomain::kPersistent) {
    return Status::invalid_argument("only a persistent topic's subscription is replicated");
  }
  return log_->set_replicated(name, on);
}

std::optional<int64_t> Topic::last_index_at(Position p) const {
  const ledger::ChainLedger* l = log_->chain().find(p.ledger);
  if (l == nullptr || !l->runs_complete() || p.entry + 1 > l->entries) return std::nullopt;
  return l->first_index + static_cast<int64_t>(l->messages_before(p.entry + 1)) - 1;
}

void Topic::apply_remote_acks(const std::string& name, const std::string& cluster, int64_t origin_index,
                              int64_t local_index, ledger::Callback<Status> done) {
  if (closed_) return done(Status::unavailable("topic " + name_.to_string() + " is closed"));
  if (is_replicator_name(name)) return done(Status::invalid_argument("not a subscription: " + name));
  std::optional<Position> covered;
  if (local_index >= 0) covered = log_->chain().entry_of_index(local_index);
  std::optional<Position> target = covered;
  if (cold_) {
    for (const auto& [key, attachment] : cold_->attachments) {
      auto p = attachment->consumed_through(cluster, origin_index, covered);
      if (p && (!target || *target < *p)) target = p;
    }
  }
  if (!target) return done(Status::ok());  // nothing known to be consumed there yet
  auto move = [this, name, target](Subscription& sub) {
    Status st = sub.cursor().replicated() ? Status::ok() : set_subscription_replicated(name, true);
    if (!st.is_ok()) return st;
    return sub.ack_through(*target);
  };
  if (Subscription* sub = subscription(name)) return done(move(*sub));
  std::weak_ptr<bool> alive = alive_;
  create_subscription(name, InitialPosition::kEarliest,
                      [this, alive, name, move, done](Result<Subscription*> sub) {
                        if (alive.expired()) return done(Status::unavailable("topic closed"));
                        if (sub.is_ok()) return done(move(**sub));
                        // Made meanwhile by a consumer: moved all the same.
                        if (Subscription* made = subscription(name)) return done(move(*made));
                        done(sub.status());
                      });
}

void Topic::restore_subscriptions() {
  for (const std::string& name : log_->cursor_names()) {
    ledger::Cursor* c = log_->cursor(name);
    if (c == nullptr || !c->durable() || subscriptions_.count(name) > 0 || is_replicator_name(name)) continue;
    subscriptions_.try_emplace(name, *log_, *c).first->second.set_tracing(tracing_state());
  }
}

void Topic::reset_subscription(const std::string& name, Position mark_delete, ledger::Callback<Status> done) {
  move_subscription(name, mark_delete, nullptr, std::move(done));
}

void Topic::move_subscription(const std::string& name, Position mark_delete, std::function<void()> then,
                              ledger::Callback<Status> done) {
  Subscription* sub = subscription(name);
  if (sub == nullptr) {
    done(Status::not_found("Subscription " + name + " not found on " + name_.to_string()));
    return;
  }
  sub->close_consumers(Status::unavailable("subscription " + name + " was reset"));
  std::weak_ptr<bool> alive = alive_;
  Position was = sub->cursor().mark_delete_position();
  log_->reset_cursor(name, mark_delete, [this, alive, name, was, mark_delete, then = std::move(then),
                                         done = std::move(done)](Status st) {
    if (!alive.expired()) {
      if (st.is_ok() && then) then();
      if (Subscription* s = subscription(name)) s->rewind();
      // Moving forward acknowledges what it passes (a Kafka offset commit).
      if (st.is_ok() && tracing_on() && was < mark_delete) {
        cold_->tracing.record(range_event(TraceStage::kAcked, was, mark_delete, name,
                                          "position moved: an offset commit, a seek or a reset"));
      }
    }
    done(st);
  });
}

void Topic::attach(const std::string& key, std::unique_ptr<TopicAttachment> attachment) {
  cold().attachments[key] = std::move(attachment);
}

TopicAttachment* Topic::attachment(const std::string& key) {
  if (!cold_) return nullptr;
  auto it = cold_->attachments.find(key);
  return it == cold_->attachments.end() ? nullptr : it->second.get();
}

std::unique_ptr<TopicAttachment> Topic::detach(const std::string& key) {
  if (!cold_) return nullptr;
  auto it = cold_->attachments.find(key);
  if (it == cold_->attachments.end()) return nullptr;
  auto a = std::move(it->second);
  cold_->attachments.erase(it);
  return a;
}

std::vector<std::string> Topic::attachment_keys() const {
  std::vector<std::string> keys;
  if (cold_) {
    for (const auto& [key, a] : cold_->attachments) keys.push_back(key);
  }
  return keys;
}

bool Topic::idle() const {
  auto busy_attachment = [this]() {
    for (const auto& [key, a] : cold_->attachments) {
      if (a->busy()) return true;
    }
    return false;
  };
  const bool cold_idle = !cold_ || (cold_->waiting_producers.empty() && cold_->entry_waiters.empty() &&
                                    cold_->held.empty() && cold_->dedup_waiters.empty() && !cold_->age_checking &&
                                    !busy_attachment());
  return !closed_ && producers_.empty() && cold_idle && consumer_count() == 0 && log_->idle();
}

size_t Topic::consumer_count() const {
  size_t n = 0;
  for (const auto& [name, sub] : subscriptions_) n += sub.consumer_count();
  return n;
}

TopicStats Topic::stats_at(RateMeter::Clock::time_point now) {
  TopicStats s = stats();
  std::map<std::string, RateMeter> kept;
  auto rates = [&](const std::string& key, uint64_t messages, uint64_t bytes) {
    auto it = cold_ ? cold_->meters.find(key) : std::map<std::string, RateMeter>::iterator{};
    const bool known = cold_ && it != cold_->meters.end();
    // Nothing counted and no meter: the rate is 0 and nothing needs keeping,
    // and a counter without a meter was 0 at the last sample.
    if (!known && messages == 0 && bytes == 0) return RateMeter::Rates{};
    RateMeter meter = known            ? it->second
                      : last_sample_ != RateMeter::Clock::time_point{} ? RateMeter(0, 0, last_sample_)
                                     : RateMeter();
    auto r = meter.update(messages, bytes, now);
    kept[key] = meter;
    return r;
  };
  auto in = rates("in", s.messages_in, s.bytes_in);
  s.msg_rate_in = in.messages;
  s.byte_rate_in = in.bytes;
  auto out = rates("out", s.messages_out, s.bytes_out);
  s.msg_rate_out = out.messages;
  s.byte_rate_out = out.bytes;
  for (auto& p : s.publishers) {
    auto r = rates("p/" + std::to_string(p.producer_id) + "/" + p.producer_name, p.messages_in, p.bytes_in);
    p.msg_rate_in = r.messages;
    p.byte_rate_in = r.bytes;
  }
  for (auto& sub : s.subscriptions) {
    auto r = rates("s/" + sub.name, sub.messages_out, sub.bytes_out);
    sub.msg_rate_out = r.messages;
    sub.byte_rate_out = r.bytes;
    for (auto& c : sub.consumer_list) {
      auto cr = rates("c/" + sub.name + "/" + std::to_string(c.consumer_id), c.messages_out, c.bytes_out);
      c.msg_rate_out = cr.messages;
      c.byte_rate_out = cr.bytes;
    }
  }
  for (auto& r : s.replication) {
    auto rr = rates("r/" + r.cluster, r.messages_out, r.bytes_out);
    r.msg_rate_out = rr.messages;
    r.byte_rate_out = rr.bytes;
  }
  if (cold_ || !kept.empty()) cold().meters = std::move(kept);  // meters of producers and subscriptions gone are dropped
  last_sample_ = now;
  return s;
}

TopicStats Topic::stats() const {
  TopicStats s;
  s.messages_in = messages_in_;
  s.bytes_in = bytes_in_;
  s.messages_out = cold_ ? cold_->removed_messages_out : 0;
  s.bytes_out = cold_ ? cold_->removed_bytes_out : 0;
  s.storage_size = log_->chain().total_size();
  s.entries = log_->chain().total_entries();
  s.damaged_entries = log_->damaged_entries();
  // Every producer charges the limits the topic holds (publish_limits());
  // a topic nobody produced to since it loaded holds none and shows the
  // rates its policy and its tenant set, without making limits for it.
  if (publish_limits_) {
    s.publish_rate_limited_times = publish_limits_->limited_times();
    const RateBuckets& own = publish_limits_->own();
    if (own.messages.limited()) s.publish_rate_msgs = own.messages.rate();
    if (own.bytes.limited()) s.publish_rate_bytes = own.bytes.rate();
  } else if (cold_ && cold_->publish_rate) {
    if (cold_->publish_rate->msgs_per_second > 0) s.publish_rate_msgs = cold_->publish_rate->msgs_per_second;
    if (cold_->publish_rate->bytes_per_second > 0) s.publish_rate_bytes = cold_->publish_rate->bytes_per_second;
  }
  if (tenant_) {
    if (tenant_->publish.messages.limited()) s.tenant_publish_rate_msgs = tenant_->publish.messages.rate();
    if (tenant_->publish.bytes.limited()) s.tenant_publish_rate_bytes = tenant_->publish.bytes.rate();
  }
  for (const auto& [id, p] : producers_) {
    PublisherStats ps;
    ps.producer_id = id;
    ps.producer_name = p.name;
    ps.messages_in = p.messages_in;
    ps.bytes_in = p.bytes_in;
    ps.access_mode = p.access_mode;
    ps.client = p.client;
    s.publishers.push_back(std::move(ps));
  }
  for (const auto& [name, sub] : subscriptions_) {
    s.subscriptions.push_back(sub.stats());
    s.messages_out += s.subscriptions.back().messages_out;
    s.bytes_out += s.subscriptions.back().bytes_out;
  }
  if (cold_) {
    for (const auto& [key, a] : cold_->attachments) a->add_stats(s);
  }
  return s;
}

void Topic::close(const Status& why, ledger::Callback<Status> done) {
  if (closed_) {
    done(Status::ok());
    return;
  }
  closed_ = true;
  if (cold_) cold_->hold_timer.reset();
  std::vector<uint64_t> ids;
  for (const auto& [id, p] : producers_) ids.push_back(id);
  for (uint64_t id : ids) close_producer(id, why);
  producers_.clear();
  if (cold_) {
    for (auto& [id, w] : cold_->waiting_producers) w.done(why);
    cold_->waiting_producers.clear();
  }
  if (cold_) {
    for (auto& h : cold_->held) h.done(why);
    cold_->held.clear();
  }
  for (auto& [name, sub] : subscriptions_) sub.close_consumers(why);
  if (cold_) cold_->attachments.clear();  // they use the log: gone before it closes
  if (dedup_ && dedup_->ready()) {
    // The snapshot saves replaying the log at the next load.
    std::weak_ptr<bool> alive = alive_;
    dedup_->snapshot([this, alive, done = std::move(done)](Status) {
      if (alive.expired()) return done(Status::ok());
      log_->close(std::move(done));
    });
    return;
  }
  log_->close(std::move(done));
}

}  // namespace magnetar::broker
