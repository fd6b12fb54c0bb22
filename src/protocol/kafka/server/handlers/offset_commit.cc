// OffsetCommit: a group's committed offsets move the cursors of its durable
// subscriptions (group_offsets.h), after the coordinator checked that the
// member and generation are current.
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/group_offsets.h"
#include "protocol/kafka/server/kafka_connection.h"
#include "protocol/kafka/server/remote_offsets.h"

namespace magnetar::protocol::kafka {

using common::Result;

namespace {

struct CommitPart {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  ErrorCode error = kNone;
};

struct CommitState {
  Request request;
  std::string group;      // the client's name: the subscriptions' name
  std::string group_key;  // the coordinator's
  std::vector<CommitPart> parts;
  size_t left = 0;
};

void answer(KafkaConnection& c, const CommitState& state) {
  Struct resp = state.request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  Struct* topic = nullptr;
  for (const CommitPart& p : state.parts) {
    if (topic == nullptr || topic->str("Name") != p.topic) {
      topic = &resp.add("Topics");
      topic->set("Name", p.topic);
    }
    auto& out = topic->add("Partitions");
    out.set("PartitionIndex", int64_t{p.partition});
    out.set("ErrorCode", int64_t{p.error});
  }
  c.respond(state.request, resp);
}

void commit_all(KafkaConnection& c, const std::shared_ptr<CommitState>& state) {
  state->left = state->parts.size() + 1;
  auto one_done = [](KafkaConnection& conn, const std::shared_ptr<CommitState>& s) {
    if (--s->left == 0) answer(conn, *s);
  };
  GroupCoordinator& groups = c.service().groups();
  for (size_t k = 0; k < state->parts.size(); ++k) {
    const CommitPart& p = state->parts[k];
    auto report = [reply = c.replier(), state, k, one_done](ErrorCode e) {
      reply([state, k, one_done, e](KafkaConnection& conn) {
        state->parts[k].error = e;
        one_done(conn, state);
      });
    };
    if (p.offset < 0) {
      report(kOffsetOutOfRange);
      continue;
    }
    auto run = [&groups, service = &c.service(), ns = c.ns(), group = state->group, key = state->group_key, p,
                report](Result<broker::Topic*> t) {
      auto committed = [&groups, key, p, report](ErrorCode e, int64_t aligned) {
        if (e == kNone) groups.remember_offset(key, p.topic, p.partition, p.offset, aligned);
        report(e);
      };
      if (t.is_ok()) return commit_group_offset(*t, group, p.offset, committed);
      if (t.status().code() != common::ErrorCode::kWrongNode) return report(error_code(t.status()));
      // Another member owns the partition, and with it the group's cursor there.
      remote_group_offset(*service, ns, p.topic, p.partition, group, OffsetOp::kCommit, p.offset, committed);
    };
    c.with_partition(p.topic, p.partition, broker::TopicAction::kConsume, std::move(run));
  }
  one_done(c, state);
}

}  // namespace

void handle_offset_commit(KafkaConnection& c, const Request& request) {
  auto state = std::make_shared<CommitState>();
  state->request = request;
  state->group = request.body.str("GroupId");
  for (const auto& t : request.body.array("Topics")) {
    for (const auto& p : t.array("Partitions")) {
      CommitPart part;
      part.topic = t.str("Name");
      part.partition = static_cast<int32_t>(p.i("PartitionIndex"));
      part.offset = p.i("CommittedOffset");
      state->parts.push_back(std::move(part));
    }
  }
  if (!c.authorize_group(state->group).is_ok()) {
    for (CommitPart& p : state->parts) p.error = kGroupAuthorizationFailed;
    return answer(c, *state);
  }
  state->group_key = c.group_key(state->group);
  c.service().groups().check_commit(
      state->group_key, static_cast<int32_t>(request.body.i("GenerationId")), request.body.str("MemberId"),
      [reply = c.replier(), state](ErrorCode e) {
        reply([state, e](KafkaConnection& conn) {
          if (e == kNone) return commit_all(conn, state);
          for (CommitPart& p : state->parts) p.error = e;
          answer(conn, *state);
        });
      });
}

}  // namespace magnetar::protocol::kafka
