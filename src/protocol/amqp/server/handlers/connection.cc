// The connection class: connection.start (with what the server offers),
// start-ok (PLAIN and AMQPLAIN through the broker's Authenticator), tune,
// tune-ok (channel-max, frame-max, heartbeat), open (the vhost is a
// namespace that must exist and, with authorization on, where the role has
// some permission), and heartbeats once tuned.
#include <fmt/format.h>

#include "common/logging.h"
#include "protocol/amqp/server/amqp_connection.h"

namespace magnetar::protocol::amqp {

using common::Status;

namespace {

FieldTable server_properties(const AmqpServiceOptions& o) {
  FieldTable capabilities = {
      {"publisher_confirms", FieldValue::of_bool(true)},
      {"exchange_exchange_bindings", FieldValue::of_bool(true)},
      {"basic.nack", FieldValue::of_bool(true)},
      {"consumer_cancel_notify", FieldValue::of_bool(true)},
      {"per_consumer_qos", FieldValue::of_bool(true)},
      {"authentication_failure_close", FieldValue::of_bool(true)},
  };
  FieldValue caps;
  caps.type = 'F';
  caps.table = std::move(capabilities);
  return {
      {"product", FieldValue::of_string("Magnetar")},
      {"version", FieldValue::of_string(o.server_version)},
      {"platform", FieldValue::of_string("C++")},
      {"cluster_name", FieldValue::of_string(o.cluster_name)},
      {"capabilities", std::move(caps)},
  };
}

// The credentials a start-ok carries: PLAIN's "\0user\0password" or
// AMQPLAIN's LOGIN and PASSWORD table entries (without the table's size).
common::Result<broker::Credentials> credentials_of(const Method& start_ok, const std::string& peer) {
  const std::string& mechanism = start_ok.str("mechanism");
  const std::string& response = start_ok.str("response");
  broker::Credentials c;
  c.peer = peer;
  c.method = "basic";
  if (mechanism == "PLAIN") {
    size_t first = response.find('\0');
    size_t second = first == std::string::npos ? std::string::npos : response.find('\0', first + 1);
    if (second == std::string::npos) return Status::permission_denied("PLAIN response is not \\0user\\0password");
    c.data = response.substr(first + 1, second - first - 1) + ":" + response.substr(second + 1);
    return c;
  }
  if (mechanism == "AMQPLAIN") {
    WireWriter w;
    w.u32(static_cast<uint32_t>(response.size()));
    w.raw(response);
    WireReader r(w.finish());
    FieldTable t = r.table();
    const FieldValue* login = find_field(t, "LOGIN");
    const FieldValue* password = find_field(t, "PASSWORD");
    if (!r.ok() || login == nullptr || password == nullptr) {
      return Status::permission_denied("AMQPLAIN response lacks LOGIN and PASSWORD");
    }
    c.data = login->s + ":" + password->s;
    return c;
  }
  return Status::permission_denied(fmt::format("mechanism '{}' is not offered (PLAIN, AMQPLAIN; EXTERNAL with a trusted client certificate)", mechanism));
}

}  // namespace

void AmqpConnection::send_start() {
  Method start = Method::of(m::kConnectionStart);
  start.set("version-major", uint64_t{0}).set("version-minor", uint64_t{9});
  start.set("server-properties", server_properties(service_.options()));
  // EXTERNAL (the client certificate's CN) when the client presented a
  // certificate the trusted CAs signed, as RabbitMQ's SSL mechanism does.
  const bool external = conn_ != nullptr && conn_->tls() && !conn_->tls_peer_common_name().empty();
  start.set("mechanisms", std::string(external ? "EXTERNAL PLAIN AMQPLAIN" : "PLAIN AMQPLAIN"));
  start.set("locales", std::string("en_US"));
  send_method(0, start);
}

void AmqpConnection::handshake(const Method& method) {
  const uint32_t key = method.key();
  if (state_ == State::kStartOk && key == m::kConnectionStartOk) {
    std::string cn = conn_ != nullptr && conn_->tls() ? conn_->tls_peer_common_name() : std::string();
    common::Result<std::string> role = common::Status::permission_denied("");
    if (method.str("mechanism") == "EXTERNAL" && !cn.empty()) {
      role = std::move(cn);
    } else {
      auto creds = credentials_of(method, conn_ ? conn_->peer() : std::string());
      role = creds.is_ok() ? service_.authenticator().authenticate(*creds) : common::Result<std::string>(creds.status());
    }
    if (!role) {
      MLOG_INFO("amqp client {}: authentication refused: {}", conn_ ? conn_->peer() : "", role.status().message());
      return connection_error({kAccessRefused, role.status().message(), key});
    }
    role_ = *role;
    const FieldTable& props = method.table("client-properties");
    const FieldValue* product = find_field(props, "product");
    const FieldValue* version = find_field(props, "version");
    client_info_.client_version = fmt::format("{} {}", product ? product->to_text() : std::string("AMQP client"),
                                              version ? version->to_text() : std::string());
    while (!client_info_.client_version.empty() && client_info_.client_version.back() == ' ') {
      client_info_.client_version.pop_back();
    }
    Method tune = Method::of(m::kConnectionTune);
    tune.set("channel-max", uint64_t{service_.options().channel_max});
    tune.set("frame-max", uint64_t{service_.options().frame_max});
    tune.set("heartbeat", uint64_t{service_.options().heartbeat_secs});
    send_method(0, tune);
    state_ = State::kTuneOk;
    return;
  }
  if (state_ == State::kTuneOk && key == m::kConnectionTuneOk) {
    const auto& o = service_.options();
    uint64_t channel_max = method.u("channel-max");
    uint64_t frame_max = method.u("frame-max");
    channel_max_ = static_cast<uint16_t>(channel_max == 0 || channel_max > o.channel_max ? o.channel_max : channel_max);
    if (frame_max != 0 && frame_max < kMinFrameMax) {
      return connection_error({kNotAllowed, fmt::format("frame-max {} is below the minimum {}", frame_max, kMinFrameMax), key});
    }
    if (frame_max > o.frame_max) {
      return connection_error({kNotAllowed, fmt::format("frame-max {} is above the offered {}", frame_max, o.frame_max), key});
    }
    frame_max_ = frame_max == 0 ? o.frame_max : static_cast<uint32_t>(frame_max);
    heartbeat_secs_ = static_cast<uint16_t>(method.u("heartbeat"));
    state_ = State::kOpen;
    start_heartbeats();
    return;
  }
  if (state_ == State::kOpen && key == m::kConnectionOpen) {
    auto ns = AmqpService::namespace_of(method.str("virtual-host"));
    if (!ns) return connection_error({kNotAllowed, ns.status().message(), key});
    vhost_ = *ns;
    // A role with no permission in the vhost could do nothing there: as
    // RabbitMQ refuses a user without permissions on the vhost, 530.
    if (Status allowed = service_.authorization().check_any_grant(role_, vhost_); !allowed.is_ok()) {
      return connection_error({kNotAllowed, fmt::format("access to vhost '{}' refused: {}", vhost_.to_string(),
                                                        allowed.message()), key});
    }
    // As RabbitMQ's vhost connection limit: 530 NOT_ALLOWED.
    auto slot = service_.broker().take_connection_slot(vhost_.tenant);
    if (!slot.is_ok()) return connection_error({kNotAllowed, slot.status().message(), key});
    tenant_slot_ = std::move(slot).value();
    auto opened = [](AmqpConnection& c, const Status& st) {
      if (!st.is_ok()) {
        return c.connection_error({kNotAllowed, fmt::format("vhost '{}' not found: {}", c.vhost_.to_string(),
                                                            st.message()), m::kConnectionOpen});
      }
      c.state_ = State::kOpened;
      c.send_method(0, Method::of(m::kConnectionOpenOk));
      if (c.conn_ != nullptr && c.input_ != nullptr) c.on_data(*c.conn_, *c.input_);
    };
    broker::Tenancy* tenancy = service_.tenancy();
    if (tenancy == nullptr) return opened(*this, Status::ok());
    // Nothing else is read until the namespace is known (kOpening).
    state_ = State::kOpening;
    Status st = tenancy->submit([tenancy, ns = *ns, reply = replier(), opened]() {
      auto policies = tenancy->get_policies(ns);
      Status result = policies.is_ok() ? Status::ok() : policies.status();
      reply([opened, result](AmqpConnection& c) { opened(c, result); });
    });
    if (!st.is_ok()) opened(*this, st);
    return;
  }
  if (key == m::kConnectionClose) {
    send_method(0, Method::of(m::kConnectionCloseOk));
    return finish_close();
  }
  connection_error({kCommandInvalid, fmt::format("{} during the connection handshake", method.spec->name), key});
}

void AmqpConnection::start_heartbeats() {
  if (heartbeat_secs_ == 0) return;
  heartbeat_ = std::make_unique<runtime::Timer>(reactor_);
  auto half = std::chrono::milliseconds(uint64_t{heartbeat_secs_} * 500);
  heartbeat_->every(half, [this]() { heartbeat_tick(); });
}

void AmqpConnection::heartbeat_tick() {
  if (conn_ == nullptr || conn_->closing()) return;
  if (!sent_) send(heartbeat_frame());
  sent_ = false;
  // While a publish limit holds the input, or reading waits for publishes
  // to be stored, the client's heartbeats wait unread.
  if (heard_ || throttle_.holding() || paused_) {
    heard_ = false;
    silent_ticks_ = 0;
    return;
  }
  // Ticks are half an interval: four silent ones are two missed heartbeats.
  if (++silent_ticks_ >= 4) {
    MLOG_INFO("amqp client {}: no heartbeat for {} s; closing", conn_->peer(), 2 * heartbeat_secs_);
    conn_->close(Status::timeout("missed heartbeats"));
  }
}

}  // namespace magnetar::protocol::amqp
