// Metadata: this node as the only broker, and the topics of the default
// namespace led by this node: a partitioned topic with its partitions, any
// other topic as one partition (0). Topics asked for that do not exist are
// created when the client allows it (AllowAutoTopicCreation) and the
// namespace's autoTopicCreation policy does, partitioned when it says so.
#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "common/logging.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

constexpr int32_t kNodeId = 0;

struct TopicAnswer {
  std::string name;
  ErrorCode error = kNone;
  int32_t partitions = 0;  // of a partitioned topic; 0: not partitioned (one Kafka partition)
};

// Local topic name -> partitions (0: not partitioned).
using TopicTable = std::map<std::string, int32_t>;

// One Metadata request being answered, shared by everything that works on
// it: the listing on the tenancy thread and each topic it creates. Shared,
// never copied per topic: the request names every topic, so a copy per
// topic made a request for N new topics cost N copies of N names.
struct MetadataState {
  Request request;
  bool all = false;                 // every topic of the namespace, not the ones named
  std::vector<TopicAnswer> topics;  // the answer, in the order asked
  size_t left = 0;                  // creations not yet done
};

// The topics and their partitions are made one at a time while the
// response is encoded (StructGenerator): a namespace of many topics costs
// the response's bytes, not a Struct per partition.
void answer(KafkaConnection& c, const MetadataState& state) {
  const auto& options = c.service().options();
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  auto& broker = resp.add("Brokers");
  broker.set("NodeId", int64_t{kNodeId});
  broker.set("Host", options.advertised_host);
  broker.set("Port", int64_t{c.advertised_port()});
  resp.set("ClusterId", options.cluster_id);
  resp.set("ControllerId", int64_t{kNodeId});
  const Struct topic_shape = resp.element("Topics");
  const Struct partition_shape = topic_shape.element("Partitions");
  resp.set("Topics", StructGenerator{state.topics.size(), [&](size_t i) {
                                       const TopicAnswer& t = state.topics[i];
                                       Struct topic = topic_shape;
                                       topic.set("ErrorCode", int64_t{t.error});
                                       topic.set("Name", t.name);
                                       topic.set("IsInternal", int64_t{0});
                                       if (t.error != kNone) return topic;  // no partitions
                                       const auto count = static_cast<size_t>(std::max(1, t.partitions));
                                       topic.set("Partitions", StructGenerator{count, [&](size_t k) {
                                                   Struct p = partition_shape;
                                                   p.set("ErrorCode", int64_t{kNone});
                                                   p.set("PartitionIndex", static_cast<int64_t>(k));
                                                   p.set("LeaderId", int64_t{kNodeId});
                                                   p.set("LeaderEpoch", int64_t{0});
                                                   p.set("ReplicaNodes", std::vector<int64_t>{kNodeId});
                                                   p.set("IsrNodes", std::vector<int64_t>{kNodeId});
                                                   p.set("OfflineReplicas", std::vector<int64_t>{});
                                                   return p;
                                                 }});
                                       return topic;
                                     }});
  c.respond(state.request, resp);
}

// On the connection's reactor, with the namespace's existing topics (local
// names): creates what may be created, then answers.
void resolve(KafkaConnection& c, const std::shared_ptr<MetadataState>& state, const TopicTable& existing) {
  auto& topics = state->topics;
  if (state->all) {
    // Only the topics this role may look up.
    for (const auto& [name, partitions] : existing) {
      if (c.authorize(name, broker::TopicAction::kLookup).is_ok()) topics.push_back({name, kNone, partitions});
    }
    return answer(c, *state);
  }
  const bool client_allows = state->request.body.i("AllowAutoTopicCreation") != 0;
  std::vector<std::pair<size_t, broker::TopicName>> to_create;
  for (const auto& asked : state->request.body.array("Topics")) {
    std::string name = asked.str("Name");
    auto topic = c.topic_for(name);
    if (!topic) {
      topics.push_back({std::move(name), kInvalidTopic, 0});
    } else if (!c.authorize(name, broker::TopicAction::kLookup).is_ok()) {
      topics.push_back({std::move(name), kTopicAuthorizationFailed, 0});
    } else if (auto it = existing.find(name); it != existing.end()) {
      topics.push_back({std::move(name), kNone, it->second});
    } else if (client_allows && c.service().may_create(*topic)) {
      to_create.emplace_back(topics.size(), *topic);
      topics.push_back({std::move(name), kNone, 0});
    } else {
      topics.push_back({std::move(name), kUnknownTopicOrPartition, 0});
    }
  }
  if (to_create.empty()) return answer(c, *state);
  state->left = to_create.size();
  for (auto& [index, topic] : to_create) {
    auto done = [reply = c.replier(), state, index = index](ErrorCode error, int32_t partitions) {
      reply([state, index, error, partitions](KafkaConnection& conn) {
        state->topics[index].error = error;
        state->topics[index].partitions = partitions;
        if (--state->left == 0) answer(conn, *state);
      });
    };
    const int32_t partitions = c.service().partitions_on_creation(topic);
    broker::Tenancy* tenancy = c.service().tenancy();
    if (partitions > 0 && tenancy != nullptr) {
      // As a Pulsar client's lookup would: a partitioned topic, its
      // partitions made on first use.
      Status st = tenancy->submit([tenancy, service = &c.service(), topic = topic, partitions, done]() {
        Status created = tenancy->create_partitioned_topic(topic, partitions);
        if (!created.is_ok() && created.code() != common::ErrorCode::kAlreadyExists) {
          return done(error_code(created), 0);
        }
        auto n = tenancy->get_partitions(topic);
        int32_t count = n.is_ok() ? *n : partitions;
        service->remember_partitions(topic, count);
        if (!created.is_ok()) return done(kNone, count);  // made by someone else meanwhile
        service->make_partitions(topic, 0, count, [done, count](Status made) {
          done(made.is_ok() ? kNone : error_code(made), count);
        });
      });
      if (!st.is_ok()) done(error_code(st), 0);
      continue;
    }
    c.service().broker().with_topic(
        topic, [done](Result<broker::Topic*> t) { done(t.is_ok() ? kNone : error_code(t.status()), 0); },
        broker::TopicCreation::kAutomatic, broker::TopicOrigin::kKafka);
  }
}

}  // namespace

void handle_metadata(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<MetadataState>();
  state->request = request;
  const auto& asked_topics = request.body.array("Topics");
  state->all = request.body.is_null("Topics") || (request.version() == 0 && asked_topics.empty());
  broker::Tenancy* tenancy = c.service().tenancy();
  if (tenancy == nullptr) return resolve(c, state, {});
  const broker::NamespaceName ns = c.ns();
  const std::string prefix = "persistent://" + ns.to_string() + "/";
  KafkaService* service = &c.service();
  Status st = tenancy->submit([service, tenancy, ns, prefix, state, reply = c.replier()]() {
    TopicTable existing;
    // Partitioned topics first: their partitions are Kafka partitions, not
    // topics of their own.
    auto partitioned = tenancy->list_partitioned_topics(ns, broker::TopicDomain::kPersistent);
    for (const auto& full : partitioned.is_ok() ? *partitioned : std::vector<std::string>{}) {
      auto name = broker::TopicName::parse(full);
      if (!name) continue;
      auto n = tenancy->get_partitions(*name);
      if (n.is_ok() && *n > 0) existing[name->local] = *n;
    }
    auto listed = tenancy->list_topics(ns, broker::TopicDomain::kPersistent);
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
    for (const auto& [name, partitions] : existing) {
      auto topic = service->topic_for(ns, name);
      if (topic.is_ok()) service->remember_partitions(*topic, partitions);
    }
    reply([state, existing = std::move(existing)](KafkaConnection& conn) { resolve(conn, state, existing); });
  });
  if (!st.is_ok()) resolve(c, state, {});
}

}  // namespace magnetar::protocol::kafka
