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
  auto listener = runtime::TcpListener::listen(
      runtime_, "pulsar", options_.bind, options_.port,
      [this](runtime::Reactor& reactor) { return std::make_unique<PulsarConnection>(reactor, *this); }, conn);
  if (!listener) return listener.status();
  listener_ = std::move(listener).value();
  return common::Status::ok();
}

void PulsarService::stop() {
  if (listener_) listener_->shutdown();
}

std::string PulsarService::service_url() const {
  return fmt::format("pulsar://{}:{}", options_.advertised_host, port());
}

}  // namespace magnetar::protocol::pulsar
