// Heartbeat and LeaveGroup: a member stays alive (and learns of a
// rebalance: REBALANCE_IN_PROGRESS), or leaves, which starts one.
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

std::function<void(ErrorCode)> answer_error(KafkaConnection& c, const Request& request) {
  return [reply = c.replier(), request](ErrorCode e) {
    reply([request, e](KafkaConnection& conn) {
      Struct resp = request.response();
      resp.set("ThrottleTimeMs", int64_t{0});
      resp.set("ErrorCode", int64_t{e});
      conn.respond(request, resp);
    });
  };
}

}  // namespace

void handle_heartbeat(KafkaConnection& c, const Request& request) {
  const std::string group = request.body.str("GroupId");
  if (!c.authorize_group(group).is_ok()) return answer_error(c, request)(kGroupAuthorizationFailed);
  c.set_fetch_group(group, request.header);
  c.service().groups().heartbeat(c.group_key(group), static_cast<int32_t>(request.body.i("GenerationId")),
                                 request.body.str("MemberId"), answer_error(c, request));
}

void handle_leave_group(KafkaConnection& c, const Request& request) {
  const std::string group = request.body.str("GroupId");
  if (!c.authorize_group(group).is_ok()) return answer_error(c, request)(kGroupAuthorizationFailed);
  if (request.version() < 3) {
    return c.service().groups().leave(c.group_key(group), request.body.str("MemberId"), answer_error(c, request));
  }
  // v3+: several members leave at once, each answered on its own.
  struct Leaving {
    std::vector<std::pair<std::string, ErrorCode>> members;
    size_t left = 0;
  };
  auto leaving = std::make_shared<Leaving>();
  for (const Struct& m : request.body.array("Members")) leaving->members.emplace_back(m.str("MemberId"), kNone);
  leaving->left = leaving->members.size() + 1;
  auto one_done = [request](KafkaConnection& conn, const std::shared_ptr<Leaving>& l) {
    if (--l->left > 0) return;
    Struct resp = request.response();
    resp.set("ThrottleTimeMs", int64_t{0});
    resp.set("ErrorCode", int64_t{kNone});
    for (const auto& [member, error] : l->members) {
      auto& out = resp.add("Members");
      out.set("MemberId", member);
      out.set_null("GroupInstanceId");
      out.set("ErrorCode", int64_t{error});
    }
    conn.respond(request, resp);
  };
  for (size_t k = 0; k < leaving->members.size(); ++k) {
    c.service().groups().leave(c.group_key(group), leaving->members[k].first,
                               [reply = c.replier(), leaving, k, one_done](ErrorCode e) {
                                 reply([leaving, k, one_done, e](KafkaConnection& conn) {
                                   leaving->members[k].second = e;
                                   one_done(conn, leaving);
                                 });
                               });
  }
  one_done(c, leaving);
}

}  // namespace magnetar::protocol::kafka
