// JoinGroup: a member joins (or joins again for) the next generation; the
// answer waits until the rebalance completes (group_coordinator.h).
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

std::string bytes_of(const Struct& s, std::string_view name) {
  const common::Slice* b = s.bytes(name);
  return b == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(b->data()), b->size());
}

}  // namespace

void handle_join_group(KafkaConnection& c, const Request& request) {
  JoinArgs args;
  const std::string group = request.body.str("GroupId");
  if (!c.authorize_group(group).is_ok()) {
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    resp.set("ErrorCode", int64_t{kGroupAuthorizationFailed});
    resp.set("GenerationId", int64_t{-1});
    resp.set("MemberId", request.body.str("MemberId"));
    return c.respond(request, resp);
  }
  c.set_fetch_group(group, request.header);
  args.group = c.group_key(group);
  args.member_id = request.body.str("MemberId");
  args.client_id = request.header.client_id.value_or("");
  args.client_host = c.peer_host();
  args.session_timeout_ms = static_cast<int32_t>(request.body.i("SessionTimeoutMs"));
  args.rebalance_timeout_ms = static_cast<int32_t>(request.body.i("RebalanceTimeoutMs"));
  args.protocol_type = request.body.str("ProtocolType");
  for (const auto& p : request.body.array("Protocols")) args.protocols.emplace_back(p.str("Name"), bytes_of(p, "Metadata"));
  std::string protocol_type = args.protocol_type;
  c.service().groups().join(std::move(args), [reply = c.replier(), request, protocol_type](JoinResult r) {
    reply([request, protocol_type, r = std::move(r)](KafkaConnection& conn) {
      Struct resp = request.response();
      resp.set("ThrottleTimeMs", int64_t{0});
      resp.set("ErrorCode", int64_t{r.error});
      resp.set("GenerationId", int64_t{r.generation});
      // v7+: the group's protocol type, null (as the protocol) on an error.
      if (r.error == kNone) {
        resp.set("ProtocolType", protocol_type);
        resp.set("ProtocolName", r.protocol_name);
      } else if (request.version() >= 7) {
        resp.set_null("ProtocolName");
      } else {
        resp.set("ProtocolName", r.protocol_name);
      }
      resp.set("Leader", r.leader);
      resp.set("MemberId", r.member_id);
      for (const auto& [id, meta] : r.members) {
        auto& m = resp.add("Members");
        m.set("MemberId", id);
        m.set_null("GroupInstanceId");
        m.set("Metadata", common::Slice::copy_of(meta));
      }
      conn.respond(request, resp);
    });
  });
}

// --- SyncGroup: the leader hands in the assignment; every member gets its part.
void handle_sync_group(KafkaConnection& c, const Request& request) {
  const std::string group = request.body.str("GroupId");
  if (!c.authorize_group(group).is_ok()) {
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    resp.set("ErrorCode", int64_t{kGroupAuthorizationFailed});
    return c.respond(request, resp);
  }
  std::vector<NamedBytes> assignments;
  for (const auto& a : request.body.array("Assignments")) {
    assignments.emplace_back(a.str("MemberId"), bytes_of(a, "Assignment"));
  }
  c.service().groups().sync(
      c.group_key(group), static_cast<int32_t>(request.body.i("GenerationId")), request.body.str("MemberId"),
      std::move(assignments), [reply = c.replier(), request](ErrorCode e, std::string assignment) {
        reply([request, e, assignment = std::move(assignment)](KafkaConnection& conn) {
          Struct resp = request.response();
          resp.set("ThrottleTimeMs", int64_t{0});
          resp.set("ErrorCode", int64_t{e});
          resp.set("Assignment", common::Slice::copy_of(assignment));
          conn.respond(request, resp);
        });
      });
}

}  // namespace magnetar::protocol::kafka
