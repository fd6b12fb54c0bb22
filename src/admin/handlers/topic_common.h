// What the topic route groups share: finding a topic (metadata on the
// tenancy thread, then the broker on the topic's home reactor) and the
// services they need.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "admin/router.h"
#include "broker/broker_service.h"
#include "broker/tenancy.h"

namespace magnetar::admin {

// Where clients reach this node, for lookups. The ports are asked at
// request time: a port given as 0 is only known once its listener is bound.
struct AdvertisedAddress {
  std::string host;
  std::function<uint16_t()> pulsar_port;  // 0: no Pulsar listener
  std::function<uint16_t()> http_port;
  std::function<uint16_t()> pulsar_tls_port;  // null or 0: no TLS listener
  std::function<uint16_t()> http_tls_port;
};

// This node's addresses, as Pulsar's lookup answers them.
nlohmann::json lookup_json(const AdvertisedAddress& a);

struct TopicServices {
  broker::Tenancy& tenancy;
  broker::BrokerService& broker;
  AdvertisedAddress address;
  // A cluster member's brokers' load reports (server/load_manager.h:
  // LoadManager::view, blocking); empty on a standalone node.
  std::function<common::Result<nlohmann::json>()> cluster_load = {};
};

using SharedResponder = std::shared_ptr<Responder>;
// Runs on the topic's home reactor with the loaded topic.
using TopicWork = std::function<void(broker::Topic& topic, SharedResponder respond)>;

// The route's {tenant}/{namespace}/{topic} in `domain`; InvalidArgument
// when a part is not a valid name.
common::Result<broker::TopicName> route_topic(broker::TopicDomain domain, const HttpRequest& req);

// Finds the non-partitioned topic (or partition) the request names and runs
// `work` with it on its home reactor, loading it if metadata knows it.
// Answers 400 for a bad name, 404 when the namespace or the topic does not
// exist (a partitioned topic's own name is not a topic here), and the
// broker's error when it cannot be loaded.
void on_existing_topic(TopicServices& services, broker::TopicDomain domain, HttpRequest& req, Responder respond,
                       TopicWork work);

// The error answer for a call on `topic` that failed with `status`. A topic
// another cluster member owns (kWrongNode) is answered as Pulsar does: 307
// to the same path on the owner's web service, which pulsar-admin and
// `magnetar admin` follow.
HttpResponse topic_error_response(const TopicServices& services, const broker::TopicName& topic,
                                  const std::string& target, const common::Status& status);

// True when the query parameter is "true".
bool query_flag(const HttpRequest& req, const std::string& name);

// Answers 204 or the error, from any thread.
void respond_status(const SharedResponder& respond, const common::Status& status);

}  // namespace magnetar::admin
