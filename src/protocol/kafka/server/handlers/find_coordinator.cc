// FindCoordinator: a standalone node coordinates every group (and would
// every transaction, were they served). In a cluster a group's coordinator is
// the owner of the bundle its name falls in (as topic "__group-<name>" of
// the connection's namespace), so every member names the same one.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

void set_coordinator(Struct& resp, int64_t error, int64_t node, const std::string& host, int64_t port) {
  resp.set("ErrorCode", error);
  resp.set_null("ErrorMessage");
  resp.set("NodeId", node);
  resp.set("Host", host);
  resp.set("Port", port);
}

}  // namespace

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
  } else if (broker::Ownership* ownership = c.service().broker().ownership(); ownership != nullptr && !group.empty()) {
    auto pseudo = c.topic_for("__group-" + group);
    if (!pseudo) {
      set_coordinator(resp, kInvalidGroupId, -1, {}, -1);
      return c.respond(request, resp);
    }
    ownership->owner_of(*pseudo, [request, resp, reply = c.replier()](common::Result<broker::NodeEndpoints> owner) {
      reply([request, resp, owner = std::move(owner)](KafkaConnection& conn) mutable {
        if (!owner.is_ok() || (!owner->here && owner->kafka_port <= 0)) {
          set_coordinator(resp, kCoordinatorNotAvailable, -1, {}, -1);
        } else if (owner->here) {
          set_coordinator(resp, kNone, conn.service().options().node_id, conn.service().options().advertised_host,
                          conn.advertised_port());
        } else {
          set_coordinator(resp, kNone, owner->broker_id, owner->kafka_host, owner->kafka_port);
        }
        conn.respond(request, resp);
      });
    });
    return;
  } else {
    set_coordinator(resp, group.empty() ? kInvalidGroupId : kNone, c.service().options().node_id,
                    c.service().options().advertised_host, c.advertised_port());
  }
  c.respond(request, resp);
}

}  // namespace magnetar::protocol::kafka
