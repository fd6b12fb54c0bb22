// DescribeCluster: the brokers as Metadata lists them (this node, and on a
// cluster member every live member that serves Kafka), the cluster id and
// the controller Metadata names (this node). Only brokers are described:
// EndpointType 2 (controllers, for KRaft's own listeners) is
// UNSUPPORTED_ENDPOINT_TYPE, as a broker answers it.
#include "protocol/kafka/errors.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

constexpr int64_t kBrokersEndpoint = 1;
constexpr int16_t kUnsupportedEndpointType = 120;

}  // namespace

void handle_describe_cluster(KafkaConnection& c, const Request& request) {
  const auto& options = c.service().options();
  Struct resp = request.response();
  resp.set("ThrottleTimeMs", int64_t{0});
  resp.set("ClusterId", options.cluster_id);
  resp.set("ControllerId", int64_t{options.node_id});
  const int64_t endpoint = request.body.i("EndpointType");
  resp.set("EndpointType", endpoint);
  if (endpoint != kBrokersEndpoint) {
    resp.set("ErrorCode", int64_t{kUnsupportedEndpointType});
    resp.set("ErrorMessage", std::string("only brokers are described (EndpointType 1)"));
    return c.respond(request, resp);
  }
  resp.set("ErrorCode", int64_t{kNone});
  add_brokers(c, resp, "BrokerId");
  c.respond(request, resp);
}

}  // namespace magnetar::protocol::kafka
