// CreateTopics, DeleteTopics and CreatePartitions: Kafka's topic admin on
// the namespace's metadata.
//
// A Kafka topic made by CreateTopics is a Pulsar partitioned topic with
// NumPartitions partitions (even one), so that CreatePartitions can grow it
// later; Pulsar cannot add partitions to a non-partitioned topic (one made
// on first use under the default policy), and CreatePartitions says so.
// Replication is a namespace policy here (ensemble and quorums), so a
// replication factor above this cluster's size is refused as Kafka refuses
// it; manual replica assignments are refused. Of the topic configs,
// retention.ms and retention.bytes become the topic's retention policy,
// cleanup.policy, delete.retention.ms and min.compaction.lag.ms become the
// topic's compaction policies (compaction.h), and the storage tuning
// knobs Kafka clients like to pass (segment.*, min.insync.replicas, ...)
// are accepted and have no effect; anything else is INVALID_CONFIG.
// DeleteTopics deletes the data too, whatever producers and consumers are
// attached, as Kafka does.
//
// The work runs on the tenancy thread (metadata reads and writes block).
#include <fmt/format.h>

#include <atomic>
#include <memory>
#include <set>

#include "broker/topic_lifecycle.h"
#include "common/logging.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/topic_configs.h"

namespace magnetar::protocol::kafka {

using common::Status;

namespace {

constexpr int32_t kClusterSize = 1;

struct TopicOutcome {
  std::string name;
  ErrorCode error = kNone;
  std::string message;
  int32_t partitions = -1;  // CreateTopics v5+: of a topic made (or validated)
};

// Runs `work` on the tenancy thread; without tenancy (a bare broker) every
// topic is answered with `fallback`.
bool on_tenancy(KafkaConnection& c, std::function<void(broker::Tenancy&)> work) {
  broker::Tenancy* tenancy = c.service().tenancy();
  if (tenancy == nullptr) return false;
  Status st = tenancy->submit([tenancy, work = std::move(work)]() { work(*tenancy); });
  return st.is_ok();
}

void answer_create(KafkaConnection& c, const Request& request, const std::vector<TopicOutcome>& outcomes) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  for (const TopicOutcome& o : outcomes) {
    auto& t = resp.add("Topics");
    t.set("Name", o.name);
    t.set("ErrorCode", int64_t{o.error});
    if (o.error != kNone) t.set("ErrorMessage", o.message);
    // v5+: what the topic was made with; its configs are not listed (null).
    if (o.error == kNone) {
      t.set("NumPartitions", int64_t{o.partitions});
      t.set("ReplicationFactor", int64_t{kClusterSize});
    }
  }
  c.respond(request, resp);
}

// Tenancy thread: creates (or validates) one topic of a CreateTopics request.
// Topics whose partitions are to be made once metadata has them: the
// partitioned topic, and partitions [from, to).
struct PartitionsToMake {
  broker::TopicName topic;
  int32_t from = 0;
  int32_t to = 0;
};

// Makes the partitions (KafkaService::make_partitions), then runs `then`
// (any thread). A partition that cannot be made now is made on first use.
void make_then(KafkaService& service, std::vector<PartitionsToMake> made, std::function<void()> then) {
  if (made.empty()) return then();
  auto left = std::make_shared<std::atomic<size_t>>(made.size());
  for (const PartitionsToMake& m : made) {
    service.make_partitions(m.topic, m.from, m.to, [left, then, name = m.topic.to_string()](Status st) {
      if (!st.is_ok()) MLOG_WARN("kafka: partitions of {} not made yet: {}", name, st.to_string());
      if (left->fetch_sub(1) == 1) then();
    });
  }
}

TopicOutcome create_one(broker::Tenancy& tenancy, KafkaService& service, const broker::NamespaceName& ns,
                        const Struct& t, bool validate_only, std::vector<PartitionsToMake>& made) {
  TopicOutcome out{t.str("Name"), kNone, {}};
  auto fail = [&](ErrorCode e, std::string why) {
    out.error = e;
    out.message = std::move(why);
    return out;
  };
  auto topic = service.topic_for(ns, out.name);
  if (!topic) return fail(kInvalidTopic, topic.status().message());
  int64_t partitions = t.i("NumPartitions");
  if (partitions == -1) {
    int32_t configured = service.partitions_on_creation(*topic);
    partitions = configured > 0 ? configured : 1;
  }
  if (partitions <= 0 || partitions > broker::Tenancy::kMaxPartitions) {
    return fail(kInvalidPartitions,
                fmt::format("number of partitions must be between 1 and {}", broker::Tenancy::kMaxPartitions));
  }
  const int64_t replication = t.i("ReplicationFactor");
  if (replication == 0 || replication < -1) return fail(kInvalidReplicationFactor, "replication factor must be larger than 0");
  if (replication > kClusterSize) {
    return fail(kInvalidReplicationFactor,
                fmt::format("replication factor {} is larger than the {} available broker(s); durability is the "
                            "namespace's persistence policy",
                            replication, kClusterSize));
  }
  if (!t.array("Assignments").empty()) return fail(kInvalidReplicaAssignment, "manual replica assignment is not served");
  RetentionAsked retention;
  CompactionConfigs compaction;
  for (const Struct& config : t.array("Configs")) {
    std::optional<std::string> value;
    const std::string name = config.str("Name");
    if (!config.is_null("Value")) value = config.str("Value");
    auto applied = apply_topic_config(name, value, broker::RetentionPolicy{});
    if (!applied.is_ok()) return fail(kInvalidConfig, applied.status().message());
    if (is_compaction_config(name)) (void)set_compaction_config(name, value, compaction);
    if (name == "retention.ms") retention = {true, (*applied)->time_minutes, retention.size_set, retention.size_mb};
    if (name == "retention.bytes") retention = {retention.time_set, retention.time_minutes, true, (*applied)->size_mb};
  }
  auto existing = tenancy.get_partitions(*topic);
  if (!existing.is_ok()) return fail(error_code(existing.status()), existing.status().message());
  if (*existing > 0 || tenancy.require_topic(*topic).is_ok()) {
    return fail(kTopicAlreadyExists, fmt::format("topic '{}' already exists", out.name));
  }
  out.partitions = static_cast<int32_t>(partitions);
  if (validate_only) return out;
  Status created = tenancy.create_partitioned_topic(*topic, static_cast<int32_t>(partitions));
  if (created.code() == common::ErrorCode::kAlreadyExists) return fail(kTopicAlreadyExists, created.message());
  if (!created.is_ok()) return fail(error_code(created), created.message());
  if (retention.any()) {
    // A retention config not given is what the topic would have without it
    // (Kafka's default for a topic Kafka made, unless the namespace says).
    auto policy = retention_policy_for(tenancy, *topic, retention, broker::TopicOrigin::kKafka);
    if (!policy.is_ok()) return fail(error_code(policy.status()), policy.status().message());
    Status st = tenancy.update_topic_policies(*topic, [&](broker::NamespacePolicies& p) {
      p.retention = *policy;
      return Status::ok();
    });
    if (!st.is_ok()) return fail(kInvalidConfig, st.message());
  }
  if (compaction != CompactionConfigs{}) {
    Status st = tenancy.update_topic_policies(*topic, [&](broker::NamespacePolicies& p) {
      compaction.store(p);
      return Status::ok();
    });
    if (!st.is_ok()) return fail(kInvalidConfig, st.message());
  }
  service.remember_partitions(*topic, static_cast<int32_t>(partitions));
  made.push_back({*topic, 0, static_cast<int32_t>(partitions)});
  return out;
}

}  // namespace

common::Status may_administer(KafkaConnection& c) {
  return c.service().authorization().check_tenant_admin(c.role(), c.ns().tenant);
}

void handle_create_topics(KafkaConnection& c, const Request& request) {
  const bool validate_only = request.body.i("ValidateOnly") != 0;
  if (Status allowed = may_administer(c); !allowed.is_ok()) {
    std::vector<TopicOutcome> outcomes;
    for (const Struct& t : request.body.array("Topics")) {
      outcomes.push_back({t.str("Name"), kTopicAuthorizationFailed, allowed.message()});
    }
    return answer_create(c, request, outcomes);
  }
  bool queued = on_tenancy(c, [reply = c.replier(), request, validate_only, service = &c.service(),
                               ns = c.ns()](broker::Tenancy& tenancy) {
    std::vector<TopicOutcome> outcomes;
    std::vector<PartitionsToMake> made;
    std::set<std::string> seen;
    for (const Struct& t : request.body.array("Topics")) {
      if (!seen.insert(t.str("Name")).second) {
        outcomes.push_back({t.str("Name"), kInvalidRequest, "the topic is named twice in the request"});
        continue;
      }
      outcomes.push_back(create_one(tenancy, *service, ns, t, validate_only, made));
    }
    make_then(*service, std::move(made), [reply, request, outcomes = std::move(outcomes)]() {
      reply([request, outcomes](KafkaConnection& conn) { answer_create(conn, request, outcomes); });
    });
  });
  if (queued) return;
  std::vector<TopicOutcome> outcomes;
  for (const Struct& t : request.body.array("Topics")) {
    outcomes.push_back({t.str("Name"), kInvalidRequest, "topic administration needs the metadata service"});
  }
  answer_create(c, request, outcomes);
}

namespace {

struct DeleteState {
  Request request;
  std::vector<TopicOutcome> outcomes;
  size_t left = 0;
};

void answer_delete(KafkaConnection& c, const DeleteState& state) {
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  for (const TopicOutcome& o : state.outcomes) {
    auto& t = resp.add("Responses");
    t.set("Name", o.name);
    t.set("ErrorCode", int64_t{o.error});
    if (o.error != kNone && !o.message.empty()) t.set("ErrorMessage", o.message);  // v5+
  }
  c.respond(state.request, resp);
}

}  // namespace

void handle_delete_topics(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<DeleteState>();
  state->request = request;
  const bool allowed = may_administer(c).is_ok();
  for (const std::string& name : request.body.strings("TopicNames")) {
    state->outcomes.push_back({name, allowed ? kNone : kTopicAuthorizationFailed, {}});
  }
  state->left = state->outcomes.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<DeleteState>& s) {
    if (--s->left == 0) answer_delete(conn, *s);
  };
  if (!allowed) {
    state->left = 1;
    return one_done(c, state);
  }
  bool queued = on_tenancy(c, [reply = c.replier(), state, one_done, service = &c.service(),
                               ns = c.ns()](broker::Tenancy& tenancy) {
    for (size_t k = 0; k < state->outcomes.size(); ++k) {
      auto report = [reply, state, k, one_done](ErrorCode e, std::string why) {
        reply([state, k, one_done, e, why = std::move(why)](KafkaConnection& conn) {
          state->outcomes[k].error = e;
          state->outcomes[k].message = why;
          one_done(conn, state);
        });
      };
      auto topic = service->topic_for(ns, state->outcomes[k].name);
      if (!topic) {
        report(kInvalidTopic, topic.status().message());
        continue;
      }
      broker::delete_topic_with_data(service->broker(), tenancy, *topic, /*force=*/true,
                                     [service, topic = *topic, report](Status st) {
                                       service->forget_partitions(topic);
                                       report(error_code(st), st.is_ok() ? std::string() : st.message());
                                     });
    }
    reply([state, one_done](KafkaConnection& conn) { one_done(conn, state); });
  });
  if (queued) return;
  for (auto& o : state->outcomes) o.error = kInvalidRequest;
  state->left = 1;
  one_done(c, state);
}

void handle_create_partitions(KafkaConnection& c, const Request& request) {
  const bool validate_only = request.body.i("ValidateOnly") != 0;
  const Status allowed = may_administer(c);
  auto answer = [](KafkaConnection& conn, const Request& req, const std::vector<TopicOutcome>& outcomes) {
    Struct resp = req.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    for (const TopicOutcome& o : outcomes) {
      auto& t = resp.add("Results");
      t.set("Name", o.name);
      t.set("ErrorCode", int64_t{o.error});
      if (o.error != kNone) t.set("ErrorMessage", o.message);
    }
    conn.respond(req, resp);
  };
  if (!allowed.is_ok()) {
    std::vector<TopicOutcome> outcomes;
    for (const Struct& t : request.body.array("Topics")) {
      outcomes.push_back({t.str("Name"), kTopicAuthorizationFailed, allowed.message()});
    }
    return answer(c, request, outcomes);
  }
  bool queued = on_tenancy(c, [reply = c.replier(), request, validate_only, answer, service = &c.service(),
                               ns = c.ns()](broker::Tenancy& tenancy) {
    std::vector<TopicOutcome> outcomes;
    std::vector<PartitionsToMake> made;
    for (const Struct& t : request.body.array("Topics")) {
      TopicOutcome& out = outcomes.emplace_back(TopicOutcome{t.str("Name"), kNone, {}});
      auto fail = [&](ErrorCode e, std::string why) {
        out.error = e;
        out.message = std::move(why);
      };
      auto topic = service->topic_for(ns, out.name);
      if (!topic) {
        fail(kInvalidTopic, topic.status().message());
        continue;
      }
      if (!t.is_null("Assignments")) {
        fail(kInvalidReplicaAssignment, "manual replica assignment is not served");
        continue;
      }
      auto current = tenancy.get_partitions(*topic);
      if (!current.is_ok()) {
        fail(error_code(current.status()), current.status().message());
        continue;
      }
      const int64_t count = t.i("Count");
      if (*current == 0) {
        if (tenancy.require_topic(*topic).is_ok()) {
          fail(kInvalidPartitions, fmt::format("topic '{}' is a non-partitioned topic (created on first use); Pulsar "
                                               "cannot add partitions to it. Create topics that will grow with "
                                               "CreateTopics, or set the namespace's autoTopicCreation to partitioned",
                                               out.name));
        } else {
          fail(kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", out.name));
        }
        continue;
      }
      if (count <= *current || count > broker::Tenancy::kMaxPartitions) {
        fail(kInvalidPartitions, fmt::format("topic '{}' has {} partitions; the new count must be larger (and at most {})",
                                             out.name, *current, broker::Tenancy::kMaxPartitions));
        continue;
      }
      if (validate_only) continue;
      Status st = tenancy.update_partitions(*topic, static_cast<int32_t>(count));
      if (!st.is_ok()) {
        fail(error_code(st), st.message());
        continue;
      }
      service->remember_partitions(*topic, static_cast<int32_t>(count));
      // The new partitions keep what the topic was made with.
      auto origin = tenancy.topic_origin(*topic);
      if (origin.is_ok() && *origin == broker::TopicOrigin::kKafka) {
        made.push_back({*topic, *current, static_cast<int32_t>(count)});
      }
    }
    make_then(*service, std::move(made), [reply, request, answer, outcomes = std::move(outcomes)]() {
      reply([request, answer, outcomes](KafkaConnection& conn) { answer(conn, request, outcomes); });
    });
  });
  if (queued) return;
  std::vector<TopicOutcome> outcomes;
  for (const Struct& t : request.body.array("Topics")) {
    outcomes.push_back({t.str("Name"), kInvalidRequest, "topic administration needs the metadata service"});
  }
  answer(c, request, outcomes);
}

}  // namespace magnetar::protocol::kafka
