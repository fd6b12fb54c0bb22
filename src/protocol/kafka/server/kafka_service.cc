#include "protocol/kafka/server/kafka_service.h"

#include <fmt/format.h>

#include <mutex>

#include "common/logging.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/remote_offsets.h"

namespace magnetar::protocol::kafka {

KafkaService::KafkaService(runtime::Runtime& runtime, broker::BrokerService& broker, KafkaServiceOptions options)
    : runtime_(runtime),
      broker_(broker),
      options_(std::move(options)),
      groups_(std::make_unique<GroupCoordinator>(runtime, options_.groups)) {
  for (size_t i = 0; i < runtime.size(); ++i) producer_states_.push_back(std::make_unique<ProducerStates>());
}

KafkaService::~KafkaService() = default;

common::Status KafkaService::start() {
  auto ns = broker::NamespaceName::parse(options_.default_namespace);
  if (!ns) return ns.status();
  namespace_ = *ns;
  if (broker::RemoteCalls* calls = broker_.remote_calls()) serve_remote_group_offsets(*this, *calls);
  runtime::ConnectionOptions conn;
  conn.max_input_bytes = options_.max_request_bytes + kSizePrefixBytes + 4096;
  runtime::ListenerPorts ports{options_.plain_enabled, options_.port, options_.tls, options_.tls_port};
  MAGNETAR_RETURN_IF_ERROR(runtime::listen_plain_and_tls(
      runtime_, "kafka", options_.bind, ports,
      [this](runtime::Reactor& reactor) { return std::make_unique<KafkaConnection>(reactor, *this); },
      conn, &listener_, &tls_listener_));
  return common::Status::ok();
}

void KafkaService::stop() {
  if (listener_) listener_->shutdown();
  if (tls_listener_) tls_listener_->shutdown();
  groups_->stop();
}

common::Result<broker::TopicName> KafkaService::topic_for(const broker::NamespaceName& ns,
                                                           const std::string& name) const {
  bool valid = !name.empty() && name.size() <= 249 && name != "." && name != "..";
  for (char ch : name) {
    valid = valid && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                      ch == '_' || ch == '-');
  }
  if (!valid) return common::Status::invalid_argument("'" + name + "' is not a valid Kafka topic name");
  return broker::TopicName::of(broker::TopicDomain::kPersistent, ns.tenant, ns.local, name);
}

bool KafkaService::may_create(const broker::TopicName& topic) const {
  if (policies_ == nullptr) return true;
  auto rule = policies_->auto_topic_creation(topic, broker::AutoTopicCreation{});
  return rule.has_value() && rule->allow;
}

int32_t KafkaService::partitions_on_creation(const broker::TopicName& topic) const {
  if (policies_ == nullptr) return 0;
  auto rule = policies_->auto_topic_creation(topic, broker::AutoTopicCreation{});
  return rule && rule->allow && rule->partitioned && rule->default_partitions > 0 ? rule->default_partitions : 0;
}

void KafkaService::make_partitions(const broker::TopicName& topic, int32_t from, int32_t to,
                                   std::function<void(common::Status)> done) {
  if (from >= to) return done(common::Status::ok());
  struct Making {
    std::mutex mu;
    int32_t left = 0;
    common::Status first_failure;
    std::function<void(common::Status)> done;
  };
  auto making = std::make_shared<Making>();
  making->left = to - from;
  making->done = std::move(done);
  for (int32_t i = from; i < to; ++i) {
    broker_.with_topic(
        topic.partition_of(i),
        [making](common::Result<broker::Topic*> t) {
          std::unique_lock lock(making->mu);
          // A partition another member owns is made there, at its first use.
          bool elsewhere = !t.is_ok() && t.status().code() == common::ErrorCode::kWrongNode;
          if (!t.is_ok() && !elsewhere && making->first_failure.is_ok()) making->first_failure = t.status();
          if (--making->left > 0) return;
          common::Status st = making->first_failure;
          lock.unlock();
          making->done(st);
        },
        broker::TopicCreation::kAdmitted, broker::TopicOrigin::kKafka);
  }
}

int32_t KafkaService::known_partitions(const broker::TopicName& topic) const {
  std::lock_guard lock(partitions_mu_);
  auto it = partitions_.find(topic.to_string());
  return it == partitions_.end() ? -1 : it->second;
}

void KafkaService::remember_partitions(const broker::TopicName& topic, int32_t partitions) {
  std::lock_guard lock(partitions_mu_);
  partitions_[topic.to_string()] = partitions;
}

void KafkaService::forget_partitions(const broker::TopicName& topic) {
  std::lock_guard lock(partitions_mu_);
  partitions_.erase(topic.to_string());
}

void KafkaService::list_topics(const broker::NamespaceName& ns, TopicListingCallback done) {
  if (tenancy_ == nullptr) return done(std::make_shared<TopicListing>());
  {
    std::lock_guard lock(listings_mu_);
    auto& queued = listings_[ns.to_string()].queued;
    queued.push_back(std::move(done));
    if (queued.size() > 1) return;  // the listing not yet started takes it too
  }
  common::Status st = tenancy_->submit([this, ns]() { run_listing(ns); });
  if (!st.is_ok()) {
    MLOG_DEBUG("kafka: topics of {} not listed: {}", ns.to_string(), st.to_string());
    std::vector<TopicListingCallback> waiting;
    std::shared_ptr<const TopicListing> last;
    {
      std::lock_guard lock(listings_mu_);
      auto& listings = listings_[ns.to_string()];
      waiting.swap(listings.queued);
      last = listings.last;
    }
    auto listing = std::make_shared<TopicListing>();
    if (last) listing->topics = last->topics;
    for (auto& fn : waiting) fn(listing);
  }
}

std::shared_ptr<const TopicListing> KafkaService::last_listing(const broker::NamespaceName& ns) const {
  std::lock_guard lock(listings_mu_);
  auto it = listings_.find(ns.to_string());
  if (it == listings_.end() || !it->second.last) return std::make_shared<TopicListing>();
  return it->second.last;
}

void KafkaService::run_listing(const broker::NamespaceName& ns) {
  std::vector<TopicListingCallback> waiting;
  {
    std::lock_guard lock(listings_mu_);
    waiting.swap(listings_[ns.to_string()].queued);  // later requests wait for the next listing
  }
  auto listing = std::make_shared<TopicListing>();
  TopicTable& existing = listing->topics;
  // Partitioned topics first: their partitions are Kafka partitions, not
  // topics of their own.
  auto partitioned = tenancy_->list_partitioned_topics(ns, broker::TopicDomain::kPersistent);
  if (!partitioned.is_ok() && partitioned.status().code() == common::ErrorCode::kNotFound) {
    // No such namespace (any more): it has no topics, and nothing of it is kept.
    listing->complete = true;
    {
      std::lock_guard lock(listings_mu_);
      auto it = listings_.find(ns.to_string());
      if (it != listings_.end() && it->second.queued.empty()) {
        listings_.erase(it);
      } else if (it != listings_.end()) {
        it->second.last.reset();  // the next listing is queued already
      }
    }
    for (auto& fn : waiting) fn(listing);
    return;
  }
  bool partitioned_listed = partitioned.is_ok();
  for (const auto& full : partitioned.is_ok() ? *partitioned : std::vector<std::string>{}) {
    auto name = broker::TopicName::parse(full);
    if (!name) continue;
    auto n = tenancy_->get_partitions(*name);
    if (n.is_ok() && *n > 0) existing[name->local] = *n;
    if (!n.is_ok()) partitioned_listed = false;
  }
  const std::string prefix = "persistent://" + ns.to_string() + "/";
  auto listed = tenancy_->list_topics(ns, broker::TopicDomain::kPersistent);
  if (listed.is_ok()) {
    for (const auto& full : *listed) {
      auto name = broker::TopicName::parse(full);
      if (!name || full.rfind(prefix, 0) != 0) continue;
      if (name->is_partition() && existing.count(name->base().local) > 0) continue;
      existing.emplace(name->local, 0);
    }
  } else {
    MLOG_DEBUG("kafka metadata: topics of {} not listed: {}", ns.to_string(), listed.status().to_string());
  }
  listing->complete = partitioned_listed && listed.is_ok();
  for (const auto& [name, partitions] : existing) {
    auto topic = topic_for(ns, name);
    if (topic.is_ok()) remember_partitions(*topic, partitions);
  }
  {
    std::lock_guard lock(listings_mu_);
    auto& last = listings_[ns.to_string()].last;
    if (listing->complete) {
      last = listing;
    } else if (last) {
      for (const auto& [name, partitions] : last->topics) existing.emplace(name, partitions);  // read ones win
    }
  }
  for (auto& fn : waiting) fn(listing);
}

void KafkaService::with_partition(const broker::NamespaceName& ns, const std::string& topic, int32_t partition,
                                  ledger::Callback<common::Result<broker::Topic*>> fn, bool create) {
  auto base = topic_for(ns, topic);
  if (!base) return fn(base.status());
  auto go = [this, base = *base, partition, create, fn = std::move(fn)](int32_t partitions) mutable {
    broker::TopicName target = base;
    if (partitions > 0 && partition >= 0 && partition < partitions) {
      target = base.partition_of(partition);
    } else if (partitions > 0 || partition != 0) {
      return fn(common::Status::not_found(fmt::format("topic '{}' has no partition {}", base.local, partition)));
    }
    if (!create) {
      // A partition of a partitioned topic exists with it; a topic that is
      // not partitioned is asked for (its topic record).
      if (partitions > 0 || tenancy_ == nullptr) {
        return broker_.with_existing_topic(target, partitions > 0, std::move(fn));
      }
      auto shared_fn = std::make_shared<ledger::Callback<common::Result<broker::Topic*>>>(std::move(fn));
      common::Status st = tenancy_->submit([this, target, shared_fn]() {
        broker_.with_existing_topic(target, tenancy_->require_topic(target).is_ok(), std::move(*shared_fn));
      });
      if (!st.is_ok()) (*shared_fn)(st);
      return;
    }
    if (may_create(target)) {
      // A topic Kafka makes here keeps Kafka's retention; the partitions of
      // a partitioned topic were made with it (make_partitions).
      broker_.with_topic(target, std::move(fn), broker::TopicCreation::kAutomatic,
                         partitions == 0 ? broker::TopicOrigin::kKafka : broker::TopicOrigin::kPulsar);
    } else {
      broker_.with_existing_topic(target, false, std::move(fn));
    }
  };
  const std::string key = base->to_string();
  runtime::Reactor* here = runtime::Reactor::current();
  {
    std::unique_lock lock(partitions_mu_);
    if (auto l = lookups_.find(key); l != lookups_.end()) {
      PartitionsLookup& lookup = l->second;
      auto mine = lookup.waiting.find(here);
      if (mine == lookup.waiting.end() && lookup.done) {
        // This reactor has nothing queued: its earlier calls went already.
        const int32_t partitions = lookup.partitions;
        lock.unlock();
        return go(partitions);
      }
      // Behind this reactor's earlier calls, or the look-up under way.
      lookup.waiting[here].push_back(std::move(go));
      return;
    }
    if (auto it = partitions_.find(key); it != partitions_.end()) {
      const int32_t known = it->second;
      lock.unlock();
      return go(known);
    }
    if (tenancy_ == nullptr) {
      lock.unlock();
      return go(0);
    }
    lookups_[key].waiting[here].push_back(std::move(go));
  }
  // Ask metadata once; later requests use what it said.
  common::Status st = tenancy_->submit([this, base = *base, key]() {
    auto n = tenancy_->get_partitions(base);
    int32_t partitions = n.is_ok() ? *n : 0;
    remember_partitions(base, partitions);
    finish_lookup(key, partitions);
  });
  if (!st.is_ok()) finish_lookup(key, 0);
}

void KafkaService::finish_lookup(const std::string& key, int32_t partitions) {
  std::vector<runtime::Reactor*> reactors;
  {
    std::lock_guard lock(partitions_mu_);
    PartitionsLookup& lookup = lookups_[key];
    lookup.done = true;
    lookup.partitions = partitions;
    for (const auto& [reactor, waiters] : lookup.waiting) reactors.push_back(reactor);
  }
  for (runtime::Reactor* reactor : reactors) {
    if (reactor == nullptr || reactor->is_on_thread()) {
      run_waiters(key, reactor);
    } else if (!reactor->post_reliably([this, key, reactor]() { run_waiters(key, reactor); })) {
      MLOG_DEBUG("kafka: requests for {} dropped: their reactor is stopping", key);
    }
  }
}

void KafkaService::run_waiters(const std::string& key, runtime::Reactor* reactor) {
  while (true) {
    std::vector<std::function<void(int32_t)>> batch;
    int32_t partitions = 0;
    {
      std::lock_guard lock(partitions_mu_);
      auto l = lookups_.find(key);
      if (l == lookups_.end()) return;
      auto mine = l->second.waiting.find(reactor);
      if (mine == l->second.waiting.end()) return;
      if (mine->second.empty()) {
        // Done here: this reactor's later calls go straight to the topic.
        l->second.waiting.erase(mine);
        if (l->second.waiting.empty()) lookups_.erase(l);
        return;
      }
      batch.swap(mine->second);
      partitions = l->second.partitions;
    }
    for (auto& fn : batch) fn(partitions);
  }
}

}  // namespace magnetar::protocol::kafka
