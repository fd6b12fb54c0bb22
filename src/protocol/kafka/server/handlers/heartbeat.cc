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
  c.service().groups().leave(c.group_key(group), request.body.str("MemberId"), answer_error(c, request));
}

}  // namespace magnetar::protocol::kafka
