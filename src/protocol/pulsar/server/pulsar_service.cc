#include "protocol/pulsar/server/pulsar_service.h"

#include <fmt/format.h>

#include "protocol/pulsar/server/pulsar_connection.h"

namespace magnetar::protocol::pulsar {

PulsarService::PulsarService(runtime::Runtime& runtime, broker::BrokerService& broker, metadata::Store& store,
                             PulsarServiceOptions options)
    : runtime_(runtime), broker_(broker), store_(store), options_(std::move(options)) {}

common::Status PulsarService::start() {
  runtime::ConnectionOptions conn;
  conn.max_input_bytes = options_.frame_limits.max_frame_size + 4096;
  runtime::ListenerPorts ports{options_.plain_enabled, options_.port, options_.tls, options_.tls_port};
  MAGNETAR_RETURN_IF_ERROR(runtime::listen_plain_and_tls(
      runtime_, "pulsar", options_.bind, ports,
      [this](runtime::Reactor& reactor) { return std::make_unique<PulsarConnection>(reactor, *this); },
      conn, &listener_, &tls_listener_));
  return common::Status::ok();
}

void PulsarService::stop() {
  if (listener_) listener_->shutdown();
  if (tls_listener_) tls_listener_->shutdown();
}

std::string PulsarService::service_url() const {
  return listener_ ? fmt::format("pulsar://{}:{}", options_.advertised_host, port()) : std::string();
}

std::string PulsarService::service_url_tls() const {
  return tls_listener_ ? fmt::format("pulsar+ssl://{}:{}", options_.advertised_host, tls_port()) : std::string();
}

}  // namespace magnetar::protocol::pulsar
