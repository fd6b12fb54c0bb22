// ClientInfo: who is on the other end of a producer or consumer.
#pragma once

#include <cstdint>
#include <string>

namespace magnetar::broker {

// Who is on the other end of a producer or consumer, for stats and the
// console: filled by the protocol handler that created it.
struct ClientInfo {
  std::string protocol;        // "pulsar", "kafka", "amqp"
  std::string address;         // the client's "host:port"
  std::string client_version;  // what the client calls itself, when it says
  int64_t connected_since_ms = 0;
};

}  // namespace magnetar::broker
