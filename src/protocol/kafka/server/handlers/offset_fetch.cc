// OffsetFetch: a group's committed offsets, read from the cursors of its
// durable subscriptions (group_offsets.h); -1 where it has none. A null
// topic list (v2+) asks for every partition the group committed: the
// topics of the connection's namespace with a stored subscription named
// after the group (the ones the role may consume from), as Kafka answers
// admin tools (`fetchOffsets({ groupId })`, `listConsumerGroupOffsets`).
#include <algorithm>
#include <tuple>

#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/group_offsets.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/remote_offsets.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

struct FetchPart {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = -1;
  ErrorCode error = kNone;
};

struct OffsetsState {
  Request request;
  std::string group;
  std::string group_key;  // the coordinator's name of `group`
  bool all = false;       // a null topic list: every partition the group committed
  ErrorCode error = kNone;
  std::vector<FetchPart> parts;
  size_t left = 0;
};

void answer(KafkaConnection& c, const OffsetsState& state) {
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  resp.set("ErrorCode", int64_t{state.group.empty() ? kInvalidGroupId : state.error});
  Struct* topic = nullptr;
  for (const FetchPart& p : state.parts) {
    // Every partition asked for gets an answer; of all partitions, only
    // those with a committed offset (one may have gone meanwhile).
    if (state.all && p.error == kNone && p.offset < 0) continue;
    if (topic == nullptr || topic->str("Name") != p.topic) {
      topic = &resp.add("Topics");
      topic->set("Name", p.topic);
    }
    auto& out = topic->add("Partitions");
    out.set("PartitionIndex", int64_t{p.partition});
    out.set("CommittedOffset", p.offset);
    out.set("CommittedLeaderEpoch", int64_t{-1});
    out.set("Metadata", std::string());
    out.set("ErrorCode", int64_t{p.error});
  }
  c.respond(state.request, resp);
}


// Reads the committed offset of every part of `state`, then answers.
void fetch_all(KafkaConnection& c, const std::shared_ptr<OffsetsState>& state) {
  state->left = state->parts.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<OffsetsState>& s) {
    if (--s->left == 0) answer(conn, *s);
  };
  GroupCoordinator& groups = c.service().groups();
  for (size_t k = 0; k < state->parts.size(); ++k) {
    const FetchPart& p = state->parts[k];
    auto report = [reply = c.replier(), state, k, one_done](ErrorCode e, int64_t offset) {
      reply([state, k, one_done, e, offset](KafkaConnection& conn) {
        state->parts[k].error = e;
        state->parts[k].offset = offset;
        one_done(conn, state);
      });
    };
    auto run = [&groups, service = &c.service(), ns = c.ns(), group = state->group, key = state->group_key, p,
                report](Result<broker::Topic*> t) {
      auto fetched = [&groups, key, p, report](ErrorCode e, int64_t aligned) {
        if (e != kNone || aligned < 0) return report(e, -1);
        report(kNone, groups.exact_offset(key, p.topic, p.partition, aligned));
      };
      if (t.is_ok()) return fetch_group_offset(*t, group, fetched);
      if (t.status().code() != common::ErrorCode::kWrongNode) return report(error_code(t.status()), -1);
      // Another member owns the partition, and with it the group's cursor there.
      remote_group_offset(*service, ns, p.topic, p.partition, group, OffsetOp::kFetch, 0, fetched);
    };
    c.with_partition(p.topic, p.partition, broker::TopicAction::kConsume, std::move(run));
  }
  one_done(c, state);
}

// A null topic list: finds, on the tenancy thread, the partitions of the
// namespace that have the group's subscription, then reads them.
void fetch_every_partition(KafkaConnection& c, const std::shared_ptr<OffsetsState>& state) {
  broker::Tenancy* tenancy = c.service().tenancy();
  if (tenancy == nullptr) return answer(c, *state);
  Status st = tenancy->submit([tenancy, ns = c.ns(), state, reply = c.replier()]() {
    auto found = tenancy->topics_with_subscription(ns, state->group);
    reply([state, found = std::move(found)](KafkaConnection& conn) {
      if (!found.is_ok()) {
        state->error = error_code(found.status());
        return answer(conn, *state);
      }
      for (const broker::TopicName& t : *found) {
        FetchPart part;
        part.topic = t.is_partition() ? t.base().local : t.local;
        part.partition = t.is_partition() ? t.partition : 0;
        // Only what a Kafka client can name and this role may read.
        if (!conn.topic_for(part.topic).is_ok()) continue;
        if (!conn.authorize(part.topic, broker::TopicAction::kConsume).is_ok()) continue;
        state->parts.push_back(std::move(part));
      }
      std::sort(state->parts.begin(), state->parts.end(), [](const FetchPart& a, const FetchPart& b) {
        return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition);
      });
      fetch_all(conn, state);
    });
  });
  if (!st.is_ok()) {
    state->error = error_code(st);
    answer(c, *state);
  }
}

}  // namespace

void handle_offset_fetch(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<OffsetsState>();
  state->request = request;
  state->group = request.body.str("GroupId");
  state->group_key = c.group_key(state->group);
  state->all = request.version() >= 2 && request.body.is_null("Topics");
  if (!state->group.empty()) {
    for (const auto& t : request.body.array("Topics")) {
      for (int64_t p : t.ints("PartitionIndexes")) {
        FetchPart part;
        part.topic = t.str("Name");
        part.partition = static_cast<int32_t>(p);
        state->parts.push_back(std::move(part));
      }
    }
  }
  if (!c.authorize_group(state->group).is_ok()) {
    // v2+ read the top-level code; older versions read each partition's.
    state->error = kGroupAuthorizationFailed;
    for (FetchPart& p : state->parts) p.error = kGroupAuthorizationFailed;
    return answer(c, *state);
  }
  if (state->all && !state->group.empty()) return fetch_every_partition(c, state);
  fetch_all(c, state);
}

}  // namespace magnetar::protocol::kafka
