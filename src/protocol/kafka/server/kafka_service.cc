#include "protocol/kafka/server/kafka_service.h"

#include <fmt/format.h>

#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

KafkaService::KafkaService(runtime::Runtime& runtime, broker::BrokerService& broker, KafkaServiceOptions options)
    : runtime_(runtime),
      broker_(broker),
      options_(std::move(options)),
      groups_(std::make_unique<GroupCoordinator>(runtime)) {
  for (size_t i = 0; i < runtime.size(); ++i) producer_states_.push_back(std::make_unique<ProducerStates>());
}

KafkaService::~KafkaService() = default;

common::Status KafkaService::start() {
  auto ns = broker::NamespaceName::parse(options_.default_namespace);
  if (!ns) return ns.status();
  namespace_ = *ns;
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

void KafkaService::remember_partitions(const broker::TopicName& topic, int32_t partitions) {
  std::lock_guard lock(partitions_mu_);
  partitions_[topic.to_string()] = partitions;
}

void KafkaService::forget_partitions(const broker::TopicName& topic) {
  std::lock_guard lock(partitions_mu_);
  partitions_.erase(topic.to_string());
}

void KafkaService::with_partition(const broker::NamespaceName& ns, const std::string& topic, int32_t partition,
                                  ledger::Callback<common::Result<broker::Topic*>> fn) {
  auto base = topic_for(ns, topic);
  if (!base) return fn(base.status());
  auto go = [this, base = *base, partition, fn = std::move(fn)](int32_t partitions) mutable {
    broker::TopicName target = base;
    if (partitions > 0 && partition >= 0 && partition < partitions) {
      target = base.partition_of(partition);
    } else if (partitions > 0 || partition != 0) {
      return fn(common::Status::not_found(fmt::format("topic '{}' has no partition {}", base.local, partition)));
    }
    if (may_create(target)) {
      broker_.with_topic(target, std::move(fn));
    } else {
      broker_.with_existing_topic(target, false, std::move(fn));
    }
  };
  {
    std::unique_lock lock(partitions_mu_);
    auto it = partitions_.find(base->to_string());
    if (it != partitions_.end()) {
      int32_t known = it->second;
      lock.unlock();
      return go(known);
    }
  }
  if (tenancy_ == nullptr) return go(0);
  // Ask metadata once; later requests use what it said.
  auto shared = std::make_shared<decltype(go)>(std::move(go));
  common::Status st = tenancy_->submit([this, base = *base, shared]() {
    auto n = tenancy_->get_partitions(base);
    int32_t partitions = n.is_ok() ? *n : 0;
    remember_partitions(base, partitions);
    (*shared)(partitions);
  });
  if (!st.is_ok()) (*shared)(0);
}

}  // namespace magnetar::protocol::kafka
