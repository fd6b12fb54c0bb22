// FindCoordinator: a standalone node coordinates every group (and would
// every transaction, were they served). In a cluster a group's coordinator is
// the owner of the bundle its name falls in (as topic "__group-<name>" of
// the connection's namespace), so every member names the same one.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

// The name whose owner coordinates `group` (see the header comment).
common::Result<broker::TopicName> coordinator_topic(KafkaConnection& c, const std::string& group) {
  return c.topic_for("__group-" + group);
}

// Whether this node coordinates the groups `owner` owns: only while its
// lease is current (Ownership::lapsed_here). Cut off from the members, its
// bundles (and with them its groups) are being taken over, and two
// coordinators of one group would each accept its offsets.
bool coordinates(const broker::Ownership& ownership, const broker::NodeEndpoints& owner) {
  return owner.here && !ownership.lapsed_here(owner);
}

void refuse_not_coordinator(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  resp.set("ErrorCode", int64_t{kNotCoordinator});
  if (request.header.api_key == kJoinGroup) {
    resp.set("GenerationId", int64_t{-1});
    resp.set("MemberId", request.body.str("MemberId"));
  }
  c.respond(request, resp);
}

void set_coordinator(Struct& resp, int64_t error, int64_t node, const std::string& host, int64_t port) {
  resp.set("ErrorCode", error);
  resp.set_null("ErrorMessage");
  resp.set("NodeId", node);
  resp.set("Host", host);
  resp.set("Port", port);
}

}  // namespace

void on_group_coordinator(KafkaConnection& c, const Request& request,
                          void (*handle)(KafkaConnection&, const Request&)) {
  broker::Ownership* ownership = c.service().broker().ownership();
  const std::string& group = request.body.str("GroupId");
  if (ownership == nullptr || group.empty()) return handle(c, request);
  auto pseudo = coordinator_topic(c, group);
  if (!pseudo) return handle(c, request);  // the handler refuses the bad group id
  if (auto known = ownership->known_owner(*pseudo)) {
    return coordinates(*ownership, *known) ? handle(c, request) : refuse_not_coordinator(c, request);
  }
  ownership->owner_of(*pseudo, [ownership, reply = c.replier(), request,
                                handle](common::Result<broker::NodeEndpoints> owner) {
    reply([request, handle, here = owner.is_ok() && coordinates(*ownership, *owner)](KafkaConnection& conn) {
      if (here) return handle(conn, request);
      refuse_not_coordinator(conn, request);
    });
  });
}

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
    auto pseudo = coordinator_topic(c, group);
    if (!pseudo) {
      set_coordinator(resp, kInvalidGroupId, -1, {}, -1);
      return c.respond(request, resp);
    }
    ownership->owner_of(*pseudo, [ownership, request, resp,
                                  reply = c.replier()](common::Result<broker::NodeEndpoints> owner) {
      // Owned here with a lapsed lease: nobody to name (see coordinates()).
      const bool lapsed = owner.is_ok() && ownership->lapsed_here(*owner);
      reply([request, resp, lapsed, owner = std::move(owner)](KafkaConnection& conn) mutable {
        if (!owner.is_ok() || lapsed || (!owner->here && owner->kafka_port <= 0)) {
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
