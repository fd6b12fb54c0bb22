// ListGroups: every group with members, over all reactors.
#include "protocol/kafka/server/group_coordinator.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

void handle_list_groups(KafkaConnection& c, const Request& request) {
  c.service().groups().list([reply = c.replier(), request](std::vector<GroupListing> groups) {
    reply([request, groups = std::move(groups)](KafkaConnection& conn) {
      Struct resp = request.response();
      resp.set("ThrottleTimeMs", int64_t{0});
      resp.set("ErrorCode", int64_t{kNone});
      for (const auto& g : groups) {
        auto& out = resp.add("Groups");
        out.set("GroupId", g.group);
        out.set("ProtocolType", g.protocol_type);
      }
      conn.respond(request, resp);
    });
  });
}

}  // namespace magnetar::protocol::kafka
