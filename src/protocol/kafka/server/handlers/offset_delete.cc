// OffsetDelete: a group's committed offset on a partition is the cursor of
// the subscription named after the group (group_offsets.h), so deleting the
// offset removes that subscription from the partition. As in Kafka, a
// partition of a topic the group's members subscribe to (consumer protocol
// metadata) is GROUP_SUBSCRIBED_TO_TOPIC, and a group with members of
// another protocol is NON_EMPTY_GROUP; a subscription a Pulsar consumer is
// attached to is GROUP_SUBSCRIBED_TO_TOPIC too. A group without members
// whose offset none of the named partitions holds is GROUP_ID_NOT_FOUND.
// Served by the group's coordinator; the partitions it does not own in a
// cluster are NOT_LEADER_OR_FOLLOWER (the offset stays).
#include <set>

#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/partition_calls.h"
#include "protocol/kafka/wire.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Status;

namespace {

struct OffsetDeleted {
  ErrorCode error = kNone;
  bool existed = false;
};

// The topics a consumer-protocol member subscribes to (its JoinGroup
// metadata: version, then an array of topic names); none when it does not
// parse.
std::vector<std::string> subscribed_topics(const std::string& metadata) {
  WireReader in(common::Slice::copy_of(metadata));
  in.i16();
  const int32_t count = in.array_length(false);
  std::vector<std::string> out;
  for (int32_t k = 0; k < count && in.ok(); ++k) {
    auto name = in.string(false);
    if (in.ok() && name) out.push_back(*name);
  }
  return in.ok() ? out : std::vector<std::string>{};
}

void answer_offset_delete(KafkaConnection& c, const Request& request, ErrorCode top,
                          const std::vector<TopicPartition>& partitions, const std::vector<OffsetDeleted>& answers) {
  Struct resp = request.response();
  resp.set("ErrorCode", int64_t{top});
  resp.set("ThrottleTimeMs", int64_t{0});
  if (top == kNone) {
    Struct* topic = nullptr;
    for (size_t k = 0; k < answers.size(); ++k) {
      Struct& p = partition_entry(resp, topic, partitions[k]);
      p.set("ErrorCode", int64_t{answers[k].error});
    }
  }
  c.respond(request, resp);
}

void delete_offsets(KafkaConnection& c, const Request& request, const std::string& group,
                    const std::set<std::string>& subscribed, bool has_members) {
  std::vector<TopicPartition> partitions;
  for (const Struct& t : request.body.array("Topics")) {
    for (const Struct& p : t.array("Partitions")) {
      partitions.push_back({t.str("Name"), static_cast<int32_t>(p.i("PartitionIndex"))});
    }
  }
  PartitionWork<OffsetDeleted> work = [partitions, subscribed, group](size_t k, Result<broker::Topic*> t,
                                                                      std::function<void(OffsetDeleted)> answer) {
    if (subscribed.count(partitions[k].topic) > 0) return answer({kGroupSubscribedToTopic});
    if (!t.is_ok()) return answer({error_code(t.status())});
    if ((*t)->subscription(group) == nullptr) return answer({kNone, false});
    (*t)->remove_subscription(group, false, [answer](Status st) {
      if (st.is_ok()) return answer({kNone, true});
      answer({st.code() == common::ErrorCode::kFailedPrecondition ? kGroupSubscribedToTopic : error_code(st)});
    });
  };
  auto done = [request, partitions, has_members](KafkaConnection& conn, std::vector<OffsetDeleted> answers) {
    bool found = has_members;
    for (const OffsetDeleted& a : answers) found = found || a.existed || a.error != kNone;
    answer_offset_delete(conn, request, found ? kNone : kGroupIdNotFound, partitions, answers);
  };
  on_each_partition<OffsetDeleted>(c, partitions, broker::TopicAction::kConsume, std::move(work), std::move(done));
}

}  // namespace

void handle_offset_delete(KafkaConnection& c, const Request& request) {
  const std::string group = request.body.str("GroupId");
  if (group.empty()) return answer_offset_delete(c, request, kInvalidGroupId, {}, {});
  if (!c.authorize_group(group).is_ok()) return answer_offset_delete(c, request, kGroupAuthorizationFailed, {}, {});
  c.service().groups().describe(c.group_key(group), [reply = c.replier(), request, group](GroupDescription d) {
    reply([request, group, d = std::move(d)](KafkaConnection& conn) {
      std::set<std::string> subscribed;
      if (!d.members.empty()) {
        if (d.protocol_type != "consumer") return answer_offset_delete(conn, request, kNonEmptyGroup, {}, {});
        for (const MemberDescription& m : d.members) {
          for (auto& topic : subscribed_topics(m.metadata)) subscribed.insert(std::move(topic));
        }
      }
      delete_offsets(conn, request, group, subscribed, !d.members.empty());
    });
  });
}

}  // namespace magnetar::protocol::kafka
