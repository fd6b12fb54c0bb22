// Metadata: the brokers, and the topics of the connection's namespace: a
// partitioned topic with its partitions, any other topic as one partition
// (0). A standalone node is the only broker and leads everything; a cluster
// member lists every live member that serves Kafka, each with its broker id,
// and names each partition's owner as its leader. Topics asked for that do not exist are
// created when the client allows it (AllowAutoTopicCreation) and the
// namespace's autoTopicCreation policy does, partitioned when it says so.
//
// An answer never waits on the metadata store past the service's
// metadata_patience: a Kafka broker answers from its own cache, and a
// client whose Metadata request times out drops the connection and asks
// again. Past it, the answer is what this node knows: the namespace's last
// complete listing, each partition's owner as far as it is known here, and a
// retriable error for the rest.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <memory>
#include <vector>

#include "common/logging.h"
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

struct TopicAnswer {
  std::string name;
  ErrorCode error = kNone;
  int32_t partitions = 0;  // of a partitioned topic; 0: not partitioned (one Kafka partition)
};

// One Metadata request being answered, shared by everything that works on
// it: the listing on the tenancy thread and each topic it creates. Shared,
// never copied per topic: the request names every topic, so a copy per
// topic made a request for N new topics cost N copies of N names.
struct MetadataState {
  Request request;
  bool all = false;                 // every topic of the namespace, not the ones named
  std::vector<TopicAnswer> topics;  // the answer, in the order asked
  size_t left = 0;                  // creations not yet done
  // A cluster member's: each partition's leader ("persistent://.../t-partition-0" -> broker id; -1 when its
  // owner cannot be told now).
  std::unordered_map<std::string, int32_t> leaders;
  bool resolved = false;   // `topics` is filled (resolve ran)
  bool hurried = false;    // the patience ran out: answered with what is known now
  bool answered = false;
  uint64_t deadline = 0;   // the connection's at() for the patience
};

// The partitions of answer `t`, as broker topics.
std::vector<broker::TopicName> partitions_of(KafkaConnection& c, const TopicAnswer& t) {
  std::vector<broker::TopicName> out;
  auto topic = c.topic_for(t.name);
  if (!topic) return out;
  if (t.partitions <= 0) {
    out.push_back(*topic);
    return out;
  }
  for (int32_t k = 0; k < t.partitions; k++) out.push_back(topic->partition_of(k));
  return out;
}

// The topics and their partitions are made one at a time while the
// response is encoded (StructGenerator): a namespace of many topics costs
// the response's bytes, not a Struct per partition.
void answer_now(KafkaConnection& c, MetadataState& state) {
  if (state.answered) return;
  state.answered = true;
  c.cancel(state.deadline);
  const auto& options = c.service().options();
  const int64_t self_id = options.node_id;
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  const std::vector<int64_t> listed = add_brokers(c, resp, "NodeId");
  resp.set("ClusterId", options.cluster_id);
  resp.set("ControllerId", self_id);
  auto topic_name = [&c](const TopicAnswer& t, size_t k) -> std::string {
    auto topic = c.topic_for(t.name);
    if (!topic) return {};
    return t.partitions > 0 ? topic->partition_of(static_cast<int32_t>(k)).to_string() : topic->to_string();
  };
  // Partition k's leader, -1 for none: a broker this answer does not list
  // is none too, since a client cannot reach it.
  auto leader_of_partition = [&](const TopicAnswer& t, size_t k) -> int64_t {
    if (state.leaders.empty()) return self_id;
    auto it = state.leaders.find(topic_name(t, k));
    if (it == state.leaders.end()) return -1;
    return std::find(listed.begin(), listed.end(), it->second) != listed.end() ? it->second : -1;
  };
  // A topic none of whose partitions has a leader is not available as a
  // whole (as Kafka answers a topic whose leaders are being elected): a
  // client caches a partition without a leader, and librdkafka then calls
  // it unknown to offset queries (query_watermark_offsets, offsets_for_times)
  // without asking again until its cache ages out (metadata.max.age.ms, 15
  // minutes); a topic-level LEADER_NOT_AVAILABLE is not cached but asked again.
  if (!state.leaders.empty()) {
    for (TopicAnswer& t : state.topics) {
      if (t.error != kNone) continue;
      bool led = false;
      for (size_t k = 0, n = static_cast<size_t>(std::max(1, t.partitions)); k < n && !led; k++) {
        led = leader_of_partition(t, k) >= 0;
      }
      if (!led) t.error = kLeaderNotAvailable;
    }
  }
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
                                                   const int64_t leader = leader_of_partition(t, k);
                                                   p.set("ErrorCode",
                                                         int64_t{leader < 0 ? kLeaderNotAvailable : kNone});
                                                   p.set("PartitionIndex", static_cast<int64_t>(k));
                                                   p.set("LeaderId", leader);
                                                   p.set("LeaderEpoch", int64_t{0});
                                                   p.set("ReplicaNodes", std::vector<int64_t>{leader});
                                                   p.set("IsrNodes", std::vector<int64_t>{leader});
                                                   p.set("OfflineReplicas", std::vector<int64_t>{});
                                                   return p;
                                                 }});
                                       return topic;
                                     }});
  c.respond(state.request, resp);
}

// The leader this node may name for a partition `owner` owns: not itself
// once its lease lapsed (Ownership::lapsed_here). A client told "not
// available" looks again, and finds the new owner through another member.
int32_t leader_of(const broker::Ownership& ownership, const broker::NodeEndpoints& owner) {
  return ownership.lapsed_here(owner) ? -1 : owner.broker_id;
}

// Each partition's leader as this node knows it without asking: its
// owner when known, else -1 (an owner that is not alive is not among the
// brokers answer_now lists, so it names none).
void known_leaders(KafkaConnection& c, MetadataState& state, const std::vector<broker::TopicName>& partitions) {
  const broker::Ownership& ownership = *c.service().broker().ownership();
  for (const auto& partition : partitions) {
    auto owner = ownership.known_owner(partition);
    state.leaders[partition.to_string()] = owner ? leader_of(ownership, *owner) : -1;
  }
}

// Answers `state`, once each partition's leader is known on a cluster member.
void answer(KafkaConnection& c, const std::shared_ptr<MetadataState>& state) {
  if (state->answered) return;
  broker::Ownership* ownership = c.service().broker().ownership();
  if (ownership == nullptr) return answer_now(c, *state);
  std::vector<broker::TopicName> partitions;
  for (const auto& t : state->topics) {
    if (t.error != kNone) continue;
    for (auto& p : partitions_of(c, t)) partitions.push_back(std::move(p));
  }
  if (partitions.empty()) return answer_now(c, *state);
  if (state->hurried) {
    known_leaders(c, *state, partitions);
    return answer_now(c, *state);
  }
  struct Resolving {
    std::mutex mu;
    size_t left = 0;
    std::unordered_map<std::string, int32_t> leaders;
  };
  auto resolving = std::make_shared<Resolving>();
  resolving->left = partitions.size();
  for (const auto& partition : partitions) {
    ownership->owner_of(partition, [ownership, resolving, state, key = partition.to_string(),
                                    reply = c.replier()](Result<broker::NodeEndpoints> owner) {
      const int32_t leader = owner.is_ok() ? leader_of(*ownership, *owner) : -1;
      std::unique_lock lock(resolving->mu);
      resolving->leaders[key] = leader;
      if (--resolving->left > 0) return;
      auto leaders = std::move(resolving->leaders);
      lock.unlock();
      reply([state, leaders = std::move(leaders)](KafkaConnection& conn) mutable {
        if (state->answered) return;  // the patience ran out first
        state->leaders = std::move(leaders);
        answer_now(conn, *state);
      });
    });
  }
}

// On the connection's reactor, with the namespace's existing topics (local
// names): creates what may be created, then answers. Not `listed` (the
// metadata store could not be read): a topic missing from `existing` may
// well exist, and is answered with a retriable error, neither created nor
// called unknown (a client caches "unknown" for minutes).
void resolve(KafkaConnection& c, const std::shared_ptr<MetadataState>& state, const TopicTable& existing,
             bool listed) {
  if (state->resolved || state->answered) return;
  state->resolved = true;
  auto& topics = state->topics;
  if (state->all) {
    // Only the topics this role may look up.
    for (const auto& [name, partitions] : existing) {
      if (c.authorize(name, broker::TopicAction::kLookup).is_ok()) topics.push_back({name, kNone, partitions});
    }
    return answer(c, state);
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
    } else if (!listed) {
      topics.push_back({std::move(name), kLeaderNotAvailable, 0});
    } else if (client_allows && c.service().may_create(*topic)) {
      // Answered so if the patience runs out before it is made.
      to_create.emplace_back(topics.size(), *topic);
      topics.push_back({std::move(name), kLeaderNotAvailable, 0});
    } else {
      topics.push_back({std::move(name), kUnknownTopicOrPartition, 0});
    }
  }
  if (to_create.empty()) return answer(c, state);
  state->left = to_create.size();
  for (auto& [index, topic] : to_create) {
    auto done = [reply = c.replier(), state, index = index](ErrorCode error, int32_t partitions) {
      reply([state, index, error, partitions](KafkaConnection& conn) {
        state->topics[index].error = error;
        state->topics[index].partitions = partitions;
        if (--state->left == 0) answer(conn, state);
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
        topic,
        [done](Result<broker::Topic*> t) {
          // Owned by another member: it makes the topic at its first produce.
          bool elsewhere = !t.is_ok() && t.status().code() == common::ErrorCode::kWrongNode;
          done(t.is_ok() || elsewhere ? kNone : error_code(t.status()), 0);
        },
        broker::TopicCreation::kAutomatic, broker::TopicOrigin::kKafka);
  }
}

}  // namespace

void handle_metadata(KafkaConnection& c, const Request& request) {
  if (c.let_go_on_lapsed_lease()) return;  // a producer: sent to ask another member
  auto state = std::make_shared<MetadataState>();
  state->request = request;
  const auto& asked_topics = request.body.array("Topics");
  state->all = request.body.is_null("Topics") || (request.version() == 0 && asked_topics.empty());
  if (c.service().tenancy() == nullptr) return resolve(c, state, {}, true);
  // The patience: then what this node knows now is the answer.
  const auto deadline = std::chrono::steady_clock::now() + c.service().options().metadata_patience;
  state->deadline = c.at(deadline, [state, conn = &c]() {
    if (state->answered) return;
    state->hurried = true;
    if (state->resolved) return answer(*conn, state);  // topics being made, or owners asked for
    resolve(*conn, state, conn->service().last_listing(conn->ns())->topics, false);
  });
  // Weak: a request answered by the patience (or whose connection closed)
  // leaves only this behind while its listing waits for the tenancy thread.
  std::weak_ptr<MetadataState> weak = state;
  c.service().list_topics(c.ns(), [weak, reply = c.replier()](std::shared_ptr<const TopicListing> listing) {
    if (weak.expired()) return;
    reply([weak, listing = std::move(listing)](KafkaConnection& conn) {
      if (auto state = weak.lock()) resolve(conn, state, listing->topics, listing->complete);
    });
  });
}

std::vector<int64_t> add_brokers(KafkaConnection& c, Struct& resp, const char* id_field) {
  const auto& options = c.service().options();
  std::vector<int64_t> listed{options.node_id};
  auto& self = resp.add("Brokers");
  self.set(id_field, int64_t{options.node_id});
  self.set("Host", options.advertised_host);
  self.set("Port", int64_t{c.advertised_port()});
  if (const broker::Ownership* ownership = c.service().broker().ownership()) {
    for (const auto& node : ownership->live_nodes()) {
      if (node.here || node.kafka_port <= 0) continue;
      auto& other = resp.add("Brokers");
      other.set(id_field, int64_t{node.broker_id});
      other.set("Host", node.kafka_host);
      other.set("Port", int64_t{node.kafka_port});
      listed.push_back(node.broker_id);
    }
  }
  return listed;
}

}  // namespace magnetar::protocol::kafka
