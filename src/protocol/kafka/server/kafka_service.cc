#include "protocol/kafka/server/kafka_service.h"

#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

KafkaService::KafkaService(runtime::Runtime& runtime, broker::BrokerService& broker, KafkaServiceOptions options)
    : runtime_(runtime), broker_(broker), options_(std::move(options)) {}

common::Status KafkaService::start() {
  auto ns = broker::NamespaceName::parse(options_.default_namespace);
  if (!ns) return ns.status();
  namespace_ = *ns;
  runtime::ConnectionOptions conn;
  conn.max_input_bytes = options_.max_request_bytes + kSizePrefixBytes + 4096;
  auto listener = runtime::TcpListener::listen(
      runtime_, "kafka", options_.bind, options_.port,
      [this](runtime::Reactor& reactor) { return std::make_unique<KafkaConnection>(reactor, *this); }, conn);
  if (!listener) return listener.status();
  listener_ = std::move(listener).value();
  return common::Status::ok();
}

void KafkaService::stop() {
  if (listener_) listener_->shutdown();
}

common::Result<broker::TopicName> KafkaService::topic_for(const std::string& name) const {
  bool valid = !name.empty() && name.size() <= 249 && name != "." && name != "..";
  for (char ch : name) {
    valid = valid && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                      ch == '_' || ch == '-');
  }
  if (!valid) return common::Status::invalid_argument("'" + name + "' is not a valid Kafka topic name");
  return broker::TopicName::of(broker::TopicDomain::kPersistent, namespace_.tenant, namespace_.local, name);
}

bool KafkaService::may_create(const broker::TopicName& topic) const {
  if (policies_ == nullptr) return true;
  auto rule = policies_->auto_topic_creation(topic, broker::AutoTopicCreation{});
  return rule.has_value() && rule->allow;
}

}  // namespace magnetar::protocol::kafka
