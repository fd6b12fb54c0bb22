// PulsarService: the Pulsar binary protocol listener (port 6650 by default),
// translating the wire onto the protocol-neutral broker API.
//
// One PulsarConnection per client connection, on the reactor that accepted
// it. Everything about a topic happens on the topic's home reactor
// (BrokerService::with_topic); answers are posted back to the connection's
// reactor.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "broker/authentication.h"
#include "broker/authorization.h"
#include "broker/broker_service.h"
#include "broker/schema_registry.h"
#include "broker/tenancy.h"
#include "metadata/store.h"
#include "protocol/pulsar/frame.h"
#include "runtime/component.h"
#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"

namespace magnetar::protocol::pulsar {

inline constexpr size_t kDefaultMaxPendingPublishes = 1000;
inline constexpr size_t kDefaultMaxPendingPublishBytes = 64 << 20;
inline constexpr size_t kDefaultMaxPendingRequests = 100;
inline constexpr size_t kDefaultMaxPendingRequestBytes = 64 << 20;
inline constexpr uint64_t kDefaultConsumerCreditBytes = 16 << 20;

struct PulsarServiceOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 6650;
  // Plaintext listener on `port` unless off; TLS listener on `tls_port`
  // when `tls` is set.
  bool plain_enabled = true;
  std::shared_ptr<runtime::TlsContextSource> tls;
  uint16_t tls_port = 0;
  std::string advertised_host;  // what LOOKUP hands out
  std::string cluster_name = "standalone";
  std::string server_version = "Magnetar";
  FrameLimits frame_limits;
  // A connection idle this long gets a PING, and is closed when nothing
  // arrives within as long again; 0 turns keep-alive off.
  std::chrono::seconds keepalive{30};
  // Per connection: SENDs awaiting their receipt and their bytes (Pulsar's
  // maxPendingPublishRequestsPerConnection), and other requests awaiting
  // their answer and their bytes. At a bound the connection stops decoding
  // and reading, as Pulsar's broker does, and goes on once it is back at
  // half. A frame over a bytes bound is still handled, alone.
  size_t max_pending_publishes = kDefaultMaxPendingPublishes;
  size_t max_pending_publish_bytes = kDefaultMaxPendingPublishBytes;
  size_t max_pending_requests = kDefaultMaxPendingRequests;
  size_t max_pending_request_bytes = kDefaultMaxPendingRequestBytes;
  // Per consumer: the bytes of entries (payload and 256 per entry, as
  // broker::delivery_cost counts them) the broker may hand the consumer
  // beyond what reached the connection. The connection gives the credit
  // back as deliveries reach it and only while it is writable
  // (protocol/delivery_credit.h), so a client that grants permits and
  // does not read holds the node to this plus one entry per consumer,
  // past the output's high watermark. Permits go to the broker as the
  // client grants them.
  uint64_t consumer_credit_bytes = kDefaultConsumerCreditBytes;
};

class PulsarService final : public runtime::Component {
 public:
  PulsarService(runtime::Runtime& runtime, broker::BrokerService& broker, metadata::Store& store,
                PulsarServiceOptions options);
  std::string_view name() const override { return "pulsar"; }
  common::Status start() override;
  void stop() override;

  // Valid after start().
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  uint16_t tls_port() const { return tls_listener_ ? tls_listener_->port() : 0; }
  // pulsar://host:port and pulsar+ssl://host:port; "" for a listener that is off.
  std::string service_url() const;
  std::string service_url_tls() const;

  broker::BrokerService& broker() { return broker_; }
  metadata::Store& store() { return store_; }
  // Namespaces' topic lists and topic schemas; set before start(). Without
  // them GET_TOPICS_OF_NAMESPACE and the schema commands answer
  // ServiceNotReady.
  void set_metadata(broker::Tenancy* tenancy, broker::SchemaRegistry* schemas) {
    tenancy_ = tenancy;
    schemas_ = schemas;
  }
  broker::SchemaRegistry* schemas() { return schemas_; }
  // Who checks CONNECT's credentials; accepts everyone unless set (before
  // start(); must outlive the service).
  void set_authenticator(broker::Authenticator* a) { authenticator_ = a; }
  // What roles may do (default: everything). Before start().
  void set_authorization(const broker::Authorization* a) { authorization_ = a; }
  const broker::Authorization& authorization() const { return *authorization_; }
  broker::Authenticator& authenticator() { return *authenticator_; }
  broker::Tenancy* tenancy() { return tenancy_; }
  // Runs `task` on the tenancy thread, where blocking metadata calls are
  // allowed. Unavailable without tenancy; ResourceExhausted when its queue is full.
  common::Status on_metadata_thread(runtime::Task task) {
    if (tenancy_ == nullptr) return common::Status::unavailable("metadata is not available");
    return tenancy_->submit(std::move(task));
  }
  const PulsarServiceOptions& options() const { return options_; }
  // Broker-wide ids for producers and consumers (the client's ids are per
  // connection).
  uint64_t next_id() { return next_id_.fetch_add(1, std::memory_order_relaxed); }

 private:
  runtime::Runtime& runtime_;
  broker::BrokerService& broker_;
  metadata::Store& store_;
  broker::Tenancy* tenancy_ = nullptr;
  broker::SchemaRegistry* schemas_ = nullptr;
  broker::AllowAllAuthenticator allow_all_;
  broker::Authenticator* authenticator_ = &allow_all_;
  const broker::Authorization* authorization_ = &broker::allow_all_authorization();
  PulsarServiceOptions options_;
  std::unique_ptr<runtime::TcpListener> listener_;      // null when off
  std::unique_ptr<runtime::TcpListener> tls_listener_;  // null when off
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace magnetar::protocol::pulsar
