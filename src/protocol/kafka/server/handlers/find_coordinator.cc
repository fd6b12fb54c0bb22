// FindCoordinator: this node coordinates every group (and would every
// transaction, were they served).
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

// Node id 0: the one node Metadata lists.

namespace magnetar::protocol::kafka {

void handle_find_coordinator(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  const int64_t key_type = request.body.i("KeyType");
  if (key_type != 0) {
    resp.set("ErrorCode", int64_t{kCoordinatorNotAvailable});
    resp.set("ErrorMessage", std::string("only group coordinators are served"));
    resp.set("NodeId", int64_t{-1});
    resp.set("Host", std::string());
    resp.set("Port", int64_t{-1});
  } else if (const std::string& group = request.body.str("Key"); !c.authorize_group(group).is_ok()) {
    // As Kafka: a group the role may not use is refused here already.
    resp.set("ErrorCode", int64_t{kGroupAuthorizationFailed});
    resp.set("ErrorMessage", std::string("not authorized to use group ") + group);
    resp.set("NodeId", int64_t{-1});
    resp.set("Host", std::string());
    resp.set("Port", int64_t{-1});
  } else {
    resp.set("ErrorCode", int64_t{group.empty() ? kInvalidGroupId : kNone});
    resp.set_null("ErrorMessage");
    resp.set("NodeId", int64_t{0});
    resp.set("Host", c.service().options().advertised_host);
    resp.set("Port", int64_t{c.advertised_port()});
  }
  c.respond(request, resp);
}

}  // namespace magnetar::protocol::kafka
