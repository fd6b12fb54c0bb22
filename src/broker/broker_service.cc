#include "broker/broker_service.h"

#include <malloc.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "broker/bundle_layout.h"
#include "broker/tenancy.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/stage_timing.h"
#include "ledger/non_persistent_log.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

// The managed ledger's name: its metadata key (tenancy.h, which the
// namespace's topic list reads) without the "/managed-ledgers/" prefix
// that ManagedLedger adds back.
std::string managed_ledger_name(const TopicName& topic) {
  constexpr std::string_view kPrefix = "/managed-ledgers/";
  std::string key = managed_ledger_key(topic);
  return key.substr(kPrefix.size());
}


// Reads a whole trace topic into a matcher, a bounded number of entries at
// a time; each read's callback keeps the scan alive.
struct TraceScan : std::enable_shared_from_this<TraceScan> {
  std::shared_ptr<ledger::Log> log;
  std::shared_ptr<TraceMatcher> matcher;
  std::function<void(Status)> answer;

  void next(ledger::Position after) {
    log->read_entries(after, 256, [self = shared_from_this()](Result<std::vector<ledger::LedgerEntry>> r) {
      if (!r.is_ok()) return self->answer(r.status());
      if (r->empty()) return self->answer(Status::ok());
      for (const auto& e : *r) {
        auto batch = decode_trace_batch(e.payload);
        if (!batch.is_ok()) {
          MLOG_WARN("trace entry {} skipped: {}", e.position.to_string(), batch.status().to_string());
          continue;
        }
        self->matcher->add(std::move(batch).value());
      }
      self->next(r->back().position);
    });
  }
};

}  // namespace

BrokerService::BrokerService(runtime::Runtime& runtime, storage::Storage& storage, metadata::Store& store,
                             BrokerOptions options)
    : runtime_(runtime), storage_(storage), store_(store), ledger_ids_(store), options_(options) {
  for (size_t i = 0; i < runtime.size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->tracer = std::make_unique<TraceRecorder>(
        runtime.reactor(i),
        [this](const TopicName& trace_topic, common::Slice batch) {
          with_topic(trace_topic, [batch = std::move(batch)](Result<Topic*> t) mutable {
            if (!t.is_ok()) {
              MLOG_WARN("traces dropped: {}", t.status().to_string());
              return;
            }
            (*t)->append_traces(std::move(batch));
          });
        },
        &describer_);
    make_context(*shard);
    shards_.push_back(std::move(shard));
  }
  policy_refresh_ = std::make_shared<PolicyRefresh>();
  policy_refresh_->broker = this;
  policy_refresh_->posted = std::make_unique<std::atomic<bool>[]>(runtime.size());
}

BrokerService::~BrokerService() {
  std::lock_guard lock(policy_refresh_->mu);
  policy_refresh_->broker = nullptr;
}

Status BrokerService::start() { return Status::ok(); }

void BrokerService::set_compaction_codec(std::shared_ptr<const CompactionCodec> codec) {
  compaction_codec_ = std::move(codec);
  for (auto& shard : shards_) shard->context.compaction_codec = compaction_codec_.get();
}

runtime::Reactor& BrokerService::home_of(const TopicName& topic) {
  return runtime_.home_for(std::hash<std::string>{}(topic.to_string()));
}

void BrokerService::with_topic(const TopicName& topic, ledger::Callback<Result<Topic*>> fn, TopicCreation how,
                               TopicOrigin origin) {
  runtime::Reactor& home = home_of(topic);
  auto run = [this, &home, topic, how, origin, fn = std::move(fn)]() mutable {
    Shard& shard = *shards_[home.index()];
    if (stopping_) {
      fn(Status::unavailable("the broker is shutting down"));
      return;
    }
    std::string key = topic.to_string();
    if (auto it = shard.topics.find(key); it != shard.topics.end()) {
      if (it->second->closed()) {
        // Closing (unloaded, or deleted): asked again once it is gone, when
        // it loads anew (or the deletion answers).
        shard.after_close[key].push_back([this, topic, how, origin, fn = std::move(fn)]() mutable {
          with_topic(topic, std::move(fn), how, origin);
        });
        return;
      }
      it->second->touch(steady_ms());
      fn(it->second.get());
      return;
    }
    if (shard.deleting.count(key) > 0) {
      fn(Status::unavailable("topic " + key + " is being deleted"));
      return;
    }
    auto& waiting = shard.loading[key];
    waiting.push_back(std::move(fn));
    if (waiting.size() == 1) {
      load(shard, topic, shard.creating.count(key) > 0 ? TopicCreation::kAdmitted : how, origin);
    }
  };
  if (home.is_on_thread()) {
    run();
    return;
  }
  // Never dropped for a full mailbox: a SEND or ACK lost here would leave
  // its client waiting for an answer that never comes.
  if (!home.post_reliably(std::move(run))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
}

namespace {

// On the home reactor: answers everyone waiting for `key` to load.
auto load_finisher(std::unordered_map<std::string, std::vector<ledger::Callback<Result<Topic*>>>>& loading,
                   std::string key) {
  return [&loading, key = std::move(key)](Result<Topic*> r) {
    auto waiting = std::move(loading[key]);
    loading.erase(key);
    for (auto& fn : waiting) fn(r);
  };
}

}  // namespace

namespace {

Status served_elsewhere(const TopicName& topic, const NodeEndpoints& owner) {
  return Status::wrong_node("topic " + topic.to_string() + " is served by node " + std::to_string(owner.node) +
                            (owner.pulsar_url.empty() ? "" : " (" + owner.pulsar_url + ")") +
                            ": look it up again");
}

}  // namespace

void BrokerService::load(Shard& shard, const TopicName& topic, TopicCreation how, TopicOrigin origin) {
  if (ownership_ == nullptr) return load_owned(shard, topic, how, origin);
  if (ownership_->releasing(topic)) {
    return load_finisher(shard.loading, topic.to_string())(Status::unavailable(
        "topic " + topic.to_string() + " is moving to another node: look it up again shortly"));
  }
  if (auto known = ownership_->known_owner(topic)) {
    if (known->here) return load_owned(shard, topic, how, origin);
    return load_finisher(shard.loading, topic.to_string())(served_elsewhere(topic, *known));
  }
  runtime::Reactor& home = home_of(topic);
  ownership_->owner_of(topic, [this, &shard, &home, topic, how, origin](Result<NodeEndpoints> owner) {
    auto back = [this, &shard, topic, how, origin, owner = std::move(owner)]() {
      if (!owner.is_ok()) return load_finisher(shard.loading, topic.to_string())(owner.status());
      if (!owner->here) return load_finisher(shard.loading, topic.to_string())(served_elsewhere(topic, *owner));
      load_owned(shard, topic, how, origin);
    };
    if (home.is_on_thread()) return back();
    if (!home.post_reliably(std::move(back))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
  });
}

Status BrokerService::still_owned(const TopicName& topic) const {
  if (ownership_ == nullptr) return Status::ok();
  if (ownership_->releasing(topic)) {
    return Status::unavailable("topic " + topic.to_string() + " is moving to another node: look it up again shortly");
  }
  auto known = ownership_->known_owner(topic);
  if (known && !known->here) return served_elsewhere(topic, *known);
  return Status::ok();
}

void BrokerService::load_owned(Shard& shard, const TopicName& topic, TopicCreation how, TopicOrigin origin) {
  std::optional<NamespacePolicies> policies;
  if (policies_ != nullptr) {
    policies = policies_->effective(topic);
    if (!policies) {
      load_finisher(shard.loading, topic.to_string())(
          Status::not_found("namespace " + topic.ns.to_string() + " does not exist"));
      return;
    }
  }
  // Whether a topic that does not exist yet may be created is asked only
  // where something limits it; elsewhere a first use creates, unchecked.
  bool auto_allowed = true;
  bool gated = false;
  if (policies && !is_trace_topic(topic) && how != TopicCreation::kAdmitted) {
    auto_allowed = how == TopicCreation::kExplicit ||
                   policies->auto_topic_creation.value_or(AutoTopicCreation{}).allow;
    auto limits = policies_->tenant_limits(topic.ns.tenant);
    gated = !auto_allowed || policies->max_topics_per_namespace.value_or(0) > 0 ||
            (limits != nullptr && limits->max_topics > 0);
  }
  if (!gated) return open(shard, topic, origin);
  runtime::Reactor& home = home_of(topic);
  check_new_topic(topic, auto_allowed, [this, &shard, &home, topic, origin](Status st) {
    auto back = [this, &shard, topic, origin, st]() {
      if (!st.is_ok()) return load_finisher(shard.loading, topic.to_string())(st);
      open(shard, topic, origin);
    };
    if (home.is_on_thread()) return back();
    if (!home.post_reliably(std::move(back))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
  });
}

void BrokerService::check_new_topic(const TopicName& topic, bool auto_allowed, std::function<void(Status)> done) {
  auto decide = [this, topic, auto_allowed, done]() {
    if (!auto_allowed) {
      return done(Status::not_found("Topic " + topic.to_string() + " does not exist and namespace " +
                                    topic.ns.to_string() + " does not create topics automatically"));
    }
    if (!admitter_) return done(Status::ok());
    admitter_(topic, done);
  };
  // A partition of a partitioned topic was counted with it.
  auto partition_or_new = [this, topic, decide, done]() {
    if (!topic.is_partition()) return decide();
    store_.get(partitioned_topic_key(topic.base()), [topic, decide, done](Result<metadata::Record> r) {
      if (r.is_ok()) {
        auto n = decode_partitions(r->value);
        if (n.is_ok() && topic.partition < *n) return done(Status::ok());
      } else if (r.status().code() != common::ErrorCode::kNotFound) {
        return done(r.status());
      }
      decide();
    });
  };
  if (topic.domain == TopicDomain::kNonPersistent) return partition_or_new();
  store_.get(managed_ledger_key(topic), [partition_or_new, done](Result<metadata::Record> r) {
    if (r.is_ok()) return done(Status::ok());
    if (r.status().code() != common::ErrorCode::kNotFound) return done(r.status());
    partition_or_new();
  });
}

void BrokerService::open(Shard& shard, const TopicName& topic, TopicOrigin origin) {
  std::string key = topic.to_string();
  auto finish = load_finisher(shard.loading, key);
  ledger::ManagedLedgerConfig config = options_.managed_ledger;
  // Retention, TTL and fsync come from the policies once the log is open and its
  // recorded origin known (attach_policies -> Topic::apply_log_policies).
  config.origin = static_cast<uint8_t>(origin);
  // Its first ledger already gets the copies the namespace asks for.
  if (policies_ != nullptr) {
    if (auto p = policies_->namespace_policies(topic.ns)) config.copies = ledger_copies(*p);
  }
  if (topic.domain == TopicDomain::kNonPersistent) {
    auto log = std::make_shared<ledger::NonPersistentLog>(key, options_.non_persistent_max_entries,
                                                          options_.non_persistent_max_bytes);
    auto& slot = shard.topics[key];
    slot = std::make_unique<Topic>(topic, std::move(log), shard.context);
    attach_policies(*slot);
    finish(slot.get());
    return;
  }
  ledger::ManagedLedger::open(
      managed_ledger_name(topic), config, storage_, store_, ledger_ids_,
      [this, &shard, topic, key, finish](Result<std::shared_ptr<ledger::ManagedLedger>> ml) {
        if (!ml.is_ok()) {
          MLOG_WARN("cannot load topic {}: {}", key, ml.status().to_string());
          Status st = ml.status();
          // A compare-and-set lost while loading (the previous owner's last
          // ledger closed or recovered by someone else meanwhile) passes:
          // clients are told to retry, not that a policy refuses them.
          if (st.code() == common::ErrorCode::kFailedPrecondition) {
            st = Status::unavailable("topic " + key + " is not ready, try again: " + st.message());
          }
          finish(st);
          return;
        }
        auto log = std::move(ml).value();
        if (Status moved = still_owned(topic); !moved.is_ok()) {
          // The bundle went elsewhere while the log opened: the topics
          // closed then did not include this one, so it is never served
          // here (its writer is fenced by the new owner's open anyway).
          MLOG_WARN("topic {} opened after its bundle moved to another node: closing it", key);
          log->close([](Status) {});
          finish(moved);
          return;
        }
        auto& slot = shard.topics[key];
        slot = std::make_unique<Topic>(topic, log, shard.context);
        slot->touch(steady_ms());
        slot->restore_subscriptions();
        attach_policies(*slot);
        // Message TTL catches up on the time it spent unloaded (retention
        // trims at the next housekeeping run, as for any loaded topic).
        log->expire_messages([key](Status st) {
          if (!st.is_ok()) MLOG_WARN("housekeeping of {}: {}", key, st.to_string());
        });
        arm_maintenance(home_of(topic).index());
        if (stopping_) {
          finish(Status::unavailable("the broker is shutting down"));
          return;
        }
        finish(slot.get());
      });
}

common::Result<TenantSlot> BrokerService::take_connection_slot(const std::string& tenant) {
  auto limits = policies_ != nullptr ? policies_->tenant_limits(tenant) : nullptr;
  auto state = tenants_->of(tenant);
  return TenantSlot::take(std::shared_ptr<TenantCounters>(state, &state->usage), &TenantCounters::connections,
                          limits == nullptr ? -1 : limits->max_connections, tenant, "connections");
}

PolicyCache::Listener BrokerService::policy_listener() const {
  return [tenants = std::weak_ptr<TenantRegistry>(tenants_),
          limiters = std::weak_ptr<PublishLimiters>(publish_limiters_)](const PolicyScope& changed) {
    if (changed.kind == PolicyScope::Kind::kTenantLimits) {
      if (auto live = tenants.lock()) live->refresh(changed.tenant);
    }
    if (auto live = limiters.lock()) live->refresh(changed);
  };
}

void BrokerService::set_lease(std::function<bool()> valid) {
  lease_gate_ = std::make_unique<LeaseGate>(runtime_, std::move(valid));
  for (auto& shard : shards_) shard->context.lease_gate = lease_gate_.get();
}

void BrokerService::make_context(Shard& shard) {
  TopicContext& c = shard.context;
  c.store = &store_;
  c.trace_recorder = shard.tracer.get();
  c.storage_durability = &options_.storage_durability;
  c.retention_defaults = &options_.retention_defaults;
  c.compaction_codec = compaction_codec_.get();
  c.compactions = &compactions_;
  c.compaction_max_read_bytes_per_second = options_.compaction_max_read_bytes_per_second;
  c.policies = [this](const TopicName& topic) -> std::optional<NamespacePolicies> {
    return policies_ == nullptr ? std::nullopt : policies_->effective(topic);
  };
  c.tenant_limits = [this](const std::string& tenant) -> std::shared_ptr<const TenantLimits> {
    return policies_ == nullptr ? nullptr : policies_->tenant_limits(tenant);
  };
  c.admit_subscription = [this](const TopicName& topic, const std::string& subscription,
                                std::function<void(Status)> done) {
    if (!subscription_admitter_) return done(Status::ok());
    subscription_admitter_(topic, subscription, std::move(done));
  };
  c.publish_limits = [this](const TopicName& topic) { return publish_limiters_->for_topic(topic); };
  c.on_policies = [this](Topic& topic, const NamespacePolicies& policies) {
    if (policies_hook_) policies_hook_(topic, policies);
  };
  c.log_taken_over = [this](const TopicName& topic) {
    MLOG_WARN("topic {}: another node took its log over; closing it here, its clients look it up again",
              topic.to_string());
    // What this node has cached about the bundle is stale: the next lookup asks the store.
    if (ownership_ != nullptr) ownership_->doubt(topic);
    // Posted: the topic is in the middle of its own callback.
    runtime::Reactor& home = home_of(topic);
    if (!home.post_reliably([this, topic]() { unload_topic(topic, [](Status) {}); })) {
      MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
    }
  };
}

void BrokerService::attach_policies(Topic& topic) {
  topic.set_tenant(tenants_->of(topic.name().ns.tenant));
  topic.refresh_policies();
}

void BrokerService::arm_maintenance(size_t reactor) {
  Shard& shard = *shards_[reactor];
  if (shard.maintenance) return;
  // An idle node with no topics never wakes up for this.
  shard.maintenance = std::make_unique<runtime::Timer>(runtime_.reactor(reactor));
  shard.maintenance->every(options_.maintenance_interval, [this, reactor]() { maintain(reactor); });
}

PolicyCache::Listener BrokerService::policy_change_listener() {
  return [refresh = policy_refresh_](const PolicyScope&) {
    std::lock_guard lock(refresh->mu);
    if (refresh->broker != nullptr) refresh->broker->refresh_loaded_topics();
  };
}

void BrokerService::refresh_loaded_topics() {
  for (size_t i = 0; i < shards_.size(); ++i) {
    std::atomic<bool>& posted = policy_refresh_->posted[i];
    if (posted.exchange(true)) continue;  // the pass already queued reads the newest policies
    Status st = runtime_.reactor(i).post([this, i, &posted]() {
      posted = false;
      if (stopping_) return;
      for (auto& [name, topic] : shards_[i]->topics) {
        if (!topic->closed()) topic->refresh_policies();
      }
    });
    // A full mailbox: the maintenance pass (or the next arrival) applies it.
    if (!st.is_ok()) posted = false;
  }
}

int64_t BrokerService::steady_ms() { return common::monotonic_ns() / 1'000'000; }

void BrokerService::maintain(size_t reactor) {
  // Topics that left memory leave freed pages in the allocator's arenas;
  // once many have gone, give those pages back (one pass, from one reactor).
  if (reactor == 0 && unloaded_since_trim_.load(std::memory_order_relaxed) >= kTrimAfterUnloads) {
    unloaded_since_trim_.store(0, std::memory_order_relaxed);
    const auto start = std::chrono::steady_clock::now();
    malloc_trim(0);
    MLOG_DEBUG("returned freed memory to the system after idle topics left, in {} us",
               std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  }
  Shard& shard = *shards_[reactor];
  const bool unloading = options_.topic_idle_unload.count() > 0 && !stopping_;
  const int64_t unused_before = steady_ms() - options_.topic_idle_unload.count();
  // Gathered first: a topic that leaves memory leaves shard.topics.
  struct Due {
    std::string key;
    Topic* topic;
    ledger::ManagedLedger* ml;
    bool unload;
  };
  std::vector<Due> due;
  for (auto& [name, topic] : shard.topics) {
    if (!topic->closed()) topic->maintain_producers();
    auto* ml = dynamic_cast<ledger::ManagedLedger*>(&topic->log());
    if (ml == nullptr || topic->closed()) continue;
    const bool unload = unloading && topic->name().domain == TopicDomain::kPersistent &&
                        topic->last_used_ms() <= unused_before && topic->idle();
    due.push_back(Due{name, topic.get(), ml, unload});
  }
  // Retention and TTL apply to every topic, once more before an idle one
  // leaves (and again when it is next loaded).
  for (Due& d : due) {
    d.ml->maintain([this, &shard, key = std::move(d.key), topic = d.topic, unload = d.unload](Status st) {
      if (!st.is_ok()) MLOG_WARN("housekeeping of {}: {}", key, st.to_string());
      if (unload) unload_if_idle(shard, key, topic);
    });
  }
}

void BrokerService::unload_if_idle(Shard& shard, const std::string& key, Topic* topic) {
  static common::Counter& unloaded = common::MetricsRegistry::global().counter(
      "magnetar_topics_unloaded_idle_total", "Topics that left memory after a time unused (loaded again on use)");
  auto it = shard.topics.find(key);
  if (it == shard.topics.end() || it->second.get() != topic || !topic->idle() || stopping_) return;
  unloaded.inc();
  unloaded_since_trim_.fetch_add(1, std::memory_order_relaxed);
  MLOG_DEBUG("topic {} unused for {} ms: unloading it", key, options_.topic_idle_unload.count());
  close_and_forget(shard, key, topic, Status::unavailable("topic " + key + " was unloaded while idle"),
                   [key](Status closed) {
                     if (!closed.is_ok()) MLOG_WARN("unloading idle topic {}: {}", key, closed.to_string());
                   });
}

void BrokerService::with_existing_topic(const TopicName& topic, bool exists, ledger::Callback<Result<Topic*>> fn) {
  runtime::Reactor& home = home_of(topic);
  auto run = [this, &home, topic, exists, fn = std::move(fn)]() mutable {
    Shard& shard = *shards_[home.index()];
    std::string key = topic.to_string();
    if (!exists && shard.topics.count(key) == 0 && shard.loading.count(key) == 0) {
      fn(Status::not_found("Topic " + key + " not found"));
      return;
    }
    with_topic(topic, std::move(fn));
  };
  if (home.is_on_thread()) return run();
  // Never dropped for a full mailbox: a SEND or ACK lost here would leave
  // its client waiting for an answer that never comes.
  if (!home.post_reliably(std::move(run))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
}

void BrokerService::create_topic(const TopicName& topic, ledger::Callback<Status> done) {
  runtime::Reactor& home = home_of(topic);
  auto run = [this, &home, topic, done = std::move(done)]() mutable {
    Shard& shard = *shards_[home.index()];
    std::string key = topic.to_string();
    auto exists = Status::already_exists("Topic " + key + " already exists");
    if (shard.topics.count(key) > 0 || shard.loading.count(key) > 0 || shard.creating.count(key) > 0) {
      return done(exists);
    }
    shard.creating[key] = 1;
    auto finish = [&shard, key, done](Status st) {
      shard.creating.erase(key);
      done(st);
    };
    auto load_it = [this, topic, finish]() {
      with_topic(topic, [finish](Result<Topic*> t) { finish(t.is_ok() ? Status::ok() : t.status()); });
    };
    if (topic.domain == TopicDomain::kNonPersistent) return load_it();
    store_.get(managed_ledger_key(topic), [finish, load_it, exists](Result<metadata::Record> rec) {
      if (rec.is_ok()) return finish(exists);
      if (rec.status().code() != common::ErrorCode::kNotFound) return finish(rec.status());
      load_it();
    });
  };
  if (home.is_on_thread()) return run();
  // Never dropped for a full mailbox: a SEND or ACK lost here would leave
  // its client waiting for an answer that never comes.
  if (!home.post_reliably(std::move(run))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
}

void BrokerService::close_and_forget(Shard& shard, const std::string& key, Topic* topic, const Status& why,
                                     ledger::Callback<Status> done) {
  topic->close(why, [&shard, key, topic, done](Status st) {
    auto it = shard.topics.find(key);
    if (it != shard.topics.end() && it->second.get() == topic) {
      // Destroyed after this callback returns: the log may still be in it.
      std::shared_ptr<Topic> gone(std::move(it->second));
      shard.topics.erase(it);
      runtime::Reactor::current()->defer([gone]() {});
    }
    done(st);
    if (auto waiting = shard.after_close.find(key); waiting != shard.after_close.end()) {
      auto again = std::move(waiting->second);
      shard.after_close.erase(waiting);
      for (auto& fn : again) fn();
    }
  });
}

void BrokerService::delete_topic(const TopicName& topic, bool force, ledger::Callback<Status> done) {
  runtime::Reactor& home = home_of(topic);
  auto run = [this, &home, topic, force, done = std::move(done)]() mutable {
    Shard& shard = *shards_[home.index()];
    std::string key = topic.to_string();
    auto it = shard.topics.find(key);
    if (it == shard.topics.end()) return done(Status::not_found("Topic " + key + " not found"));
    Topic* t = it->second.get();
    if (!force && (t->producer_count() > 0 || t->consumer_count() > 0)) {
      return done(Status::failed_precondition("Topic " + key + " has active producers or consumers"));
    }
    auto* ml = dynamic_cast<ledger::ManagedLedger*>(&t->log());
    std::shared_ptr<ledger::ManagedLedger> keep = ml != nullptr ? ml->shared_from_this() : nullptr;
    // Until its log is gone, nobody loads the topic again.
    ++shard.deleting[key];
    auto finish = [&shard, key, done](Status st) {
      if (--shard.deleting[key] == 0) shard.deleting.erase(key);
      done(st);
    };
    close_and_forget(shard, key, t, Status::not_found("topic " + key + " was deleted"),
                     [this, keep, key, topic, finish](Status closed) {
                       if (!closed.is_ok()) MLOG_WARN("closing deleted topic {}: {}", key, closed.to_string());
                       if (!keep) return finish(Status::ok());
                       keep->delete_log([this, key, topic, finish](Status deleted) {
                         if (!deleted.is_ok()) return finish(deleted);
                         Deduplication::remove(store_, Deduplication::snapshot_key(topic), [key, finish](Status st) {
                           if (!st.is_ok()) MLOG_WARN("deduplication snapshot of {}: {}", key, st.to_string());
                           finish(Status::ok());
                         });
                       });
                     });
  };
  if (home.is_on_thread()) return run();
  // Never dropped for a full mailbox: a SEND or ACK lost here would leave
  // its client waiting for an answer that never comes.
  if (!home.post_reliably(std::move(run))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
}

void BrokerService::unload_topic(const TopicName& topic, ledger::Callback<Status> done) {
  runtime::Reactor& home = home_of(topic);
  auto run = [this, &home, topic, done = std::move(done)]() mutable {
    Shard& shard = *shards_[home.index()];
    std::string key = topic.to_string();
    auto it = shard.topics.find(key);
    if (it == shard.topics.end()) return done(Status::ok());
    close_and_forget(shard, key, it->second.get(), Status::unavailable("topic " + key + " was unloaded"),
                     std::move(done));
  };
  if (home.is_on_thread()) return run();
  // Never dropped for a full mailbox: a SEND or ACK lost here would leave
  // its client waiting for an answer that never comes.
  if (!home.post_reliably(std::move(run))) MLOG_WARN("cannot reach the home of {}: it is stopping", topic.to_string());
}

void BrokerService::split_bundle(const std::string& bundle, std::vector<uint32_t> positions, bool unload,
                                 std::function<void(Status)> done) {
  if (ownership_ != nullptr) return ownership_->split(bundle, std::move(positions), unload, std::move(done));
  auto plan = plan_split(bundle, positions);
  if (!plan.is_ok()) return done(plan.status());
  commit_split(store_, plan->ns, plan->low, plan->high, plan->cuts,
               [this, bundle, unload, pieces = plan->pieces, done](Status st) {
                 if (!st.is_ok()) return done(st);
                 MLOG_INFO("bundle {} split into {}", bundle, fmt::join(pieces, ", "));
                 if (!unload) return done(Status::ok());
                 auto left = std::make_shared<std::atomic<size_t>>(pieces.size());
                 for (const auto& piece : pieces) {
                   unload_bundle(piece, [left, done]() {
                     if (--*left == 0) done(Status::ok());
                   });
                 }
               });
}

void BrokerService::unload_bundle(const std::string& bundle, std::function<void()> done) {
  struct Gather {
    std::atomic<size_t> left;
    std::function<void()> done;
  };
  auto g = std::make_shared<Gather>();
  g->left = runtime_.size();
  g->done = std::move(done);
  auto one_done = [g]() {
    if (--g->left == 0) g->done();
  };
  for (size_t i = 0; i < runtime_.size(); ++i) {
    auto run = [this, i, bundle, one_done]() {
      Shard& shard = *shards_[i];
      std::vector<std::pair<std::string, Topic*>> moving;
      for (auto& [key, topic] : shard.topics) {
        // A topic closing already (idle, deleted) goes by itself.
        if (!topic->closed() && qualified_bundle(topic->name()) == bundle) moving.emplace_back(key, topic.get());
      }
      if (moving.empty()) return one_done();
      auto left = std::make_shared<size_t>(moving.size());
      for (auto& [key, topic] : moving) {
        close_and_forget(shard, key, topic,
                         Status::unavailable("topic " + key + " is moving to another node: look it up again"),
                         [key = key, left, one_done](Status closed) {
                           if (!closed.is_ok()) MLOG_WARN("closing moving topic {}: {}", key, closed.to_string());
                           if (--*left == 0) one_done();
                         });
      }
    };
    if (!runtime_.reactor(i).post_reliably(std::move(run))) one_done();
  }
}

void BrokerService::collect_stats(ledger::Callback<std::vector<TopicSample>> done) {
  struct Gather {
    std::mutex mu;
    size_t left;
    std::vector<TopicSample> samples;
    ledger::Callback<std::vector<TopicSample>> done;
  };
  auto g = std::make_shared<Gather>();
  g->left = runtime_.size() + 1;
  g->done = std::move(done);
  auto release = [g](std::vector<TopicSample> part) {
    ledger::Callback<std::vector<TopicSample>> finish;
    std::vector<TopicSample> all;
    {
      std::lock_guard<std::mutex> lock(g->mu);
      for (auto& s : part) g->samples.push_back(std::move(s));
      if (--g->left > 0) return;
      finish = std::move(g->done);
      all = std::move(g->samples);
    }
    finish(std::move(all));
  };
  for (size_t i = 0; i < runtime_.size(); ++i) {
    Status st = runtime_.reactor(i).post([this, i, release]() {
      std::vector<TopicSample> part;
      const auto now = RateMeter::Clock::now();
      for (auto& [name, topic] : shards_[i]->topics) {
        if (topic->closed()) continue;
        TopicSample sample{topic->name(), topic->stats_at(now), 0};
        for (const auto& sub : sample.stats.subscriptions) sample.backlog_messages += sub.backlog_messages;
        part.push_back(std::move(sample));
      }
      release(std::move(part));
    });
    if (!st.is_ok()) release({});
  }
  release({});
}

Topic* BrokerService::loaded_topic(const TopicName& topic) {
  runtime::Reactor& home = home_of(topic);
  home.assert_on_thread();
  auto& topics = shards_[home.index()]->topics;
  auto it = topics.find(topic.to_string());
  return it == topics.end() ? nullptr : it->second.get();
}

std::vector<std::string> BrokerService::loaded_topic_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < runtime_.size(); ++i) {
    auto part = runtime_.reactor(i).run_sync([this, i]() {
      std::vector<std::string> out;
      for (const auto& [name, t] : shards_[i]->topics) out.push_back(name);
      return out;
    });
    names.insert(names.end(), part.begin(), part.end());
  }
  return names;
}

void BrokerService::find_traces(const TopicName& topic, TraceQuery query,
                                ledger::Callback<Result<TraceAnswer>> done) {
  TraceMode mode = TraceMode::kOff;
  if (policies_ != nullptr) {
    if (auto p = policies_->effective(topic); p && p->tracing) mode = p->tracing->mode;
  }
  auto matcher = std::make_shared<TraceMatcher>(topic.to_string(), std::move(query));
  auto answer = [matcher, mode, done](Status st) {
    if (!st.is_ok()) return done(st);
    TraceAnswer a = matcher->finish();
    a.mode = mode;
    done(std::move(a));
  };
  TopicName traces = trace_topic_of(topic.ns);
  // A namespace that never traced has no trace topic: nothing to load.
  store_.get(managed_ledger_key(traces), [this, traces, matcher, answer](Result<metadata::Record> rec) {
    if (!rec.is_ok()) {
      if (rec.status().code() == common::ErrorCode::kNotFound) return answer(Status::ok());
      return answer(rec.status());
    }
    with_topic(traces, [matcher, answer](Result<Topic*> t) {
      if (!t.is_ok()) return answer(t.status());
      auto scan = std::make_shared<TraceScan>();
      scan->log = (*t)->shared_log();
      scan->matcher = matcher;
      scan->answer = answer;
      scan->next(ledger::Position{});
    });
  });
}

void BrokerService::stop() {
  if (stopping_) return;
  {
    std::lock_guard lock(policy_refresh_->mu);
    policy_refresh_->broker = nullptr;  // no more passes are posted
  }
  // Traces still buffered go out before the topics close.
  for (size_t i = 0; i < runtime_.size(); ++i) {
    runtime_.reactor(i).run_sync([this, i]() { shards_[i]->tracer->stop(); });
  }
  for (size_t i = 0; i < runtime_.size(); ++i) {
    auto closed = std::make_shared<std::promise<void>>();  // may outlive a timed-out wait
    auto fut = closed->get_future();
    runtime_.reactor(i).run_sync([this, i, closed]() {
      stopping_ = true;
      auto& topics = shards_[i]->topics;
      auto remaining = std::make_shared<size_t>(topics.size() + 1);
      auto one_done = [remaining, closed]() {
        if (--*remaining == 0) closed->set_value();
      };
      for (auto& [name, topic] : topics) {
        topic->close(Status::unavailable("the broker is shutting down"), [one_done, name = name](Status st) {
          if (!st.is_ok()) MLOG_WARN("closing topic {}: {}", name, st.to_string());
          one_done();
        });
      }
      one_done();
    });
    if (fut.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      MLOG_WARN("topics on reactor {} did not close within 10 s", i);
    }
    // A deletion under way still writes to storage and metadata, which stop
    // after the broker: let it finish while they run.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      bool deleting = false;
      runtime_.reactor(i).run_sync([this, i, &deleting]() { deleting = !shards_[i]->deleting.empty(); });
      if (!deleting) break;
      if (std::chrono::steady_clock::now() > deadline) {
        MLOG_WARN("topic deletions on reactor {} did not finish within 10 s", i);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    runtime_.reactor(i).run_sync([this, i]() {
      shards_[i]->maintenance.reset();
      shards_[i]->topics.clear();
    });
  }
  // Acknowledgements held for the lease are answered as the shutdown they are.
  if (lease_gate_) lease_gate_->stop();
}

}  // namespace magnetar::broker
