// SaslHandshake and SaslAuthenticate: SASL/PLAIN, checked by the same
// Authenticator as Pulsar's CONNECT. After a v1 handshake the token comes in
// SaslAuthenticate requests; after a v0 handshake it comes bare (size
// prefix, no request header) and a bare empty token answers success.
//
// PLAIN's message is [authzid] NUL username NUL password. The password is
// the credential (a token, as Kafka-on-Pulsar users pass it); the user
// name chooses the connection's namespace when it has the form
// `tenant/namespace` (the namespace must exist), and is only a label
// otherwise. A failed authentication is answered SASL_AUTHENTICATION_FAILED
// and the connection is closed, as Kafka's broker does.
#include <fmt/format.h>

#include "common/logging.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

constexpr std::string_view kPlain = "PLAIN";

struct PlainMessage {
  std::string user;
  std::string password;
};

std::optional<PlainMessage> parse_plain(std::string_view bytes) {
  size_t first = bytes.find('\0');
  if (first == std::string_view::npos) return std::nullopt;
  size_t second = bytes.find('\0', first + 1);
  if (second == std::string_view::npos) return std::nullopt;
  PlainMessage m;
  m.user = std::string(bytes.substr(first + 1, second - first - 1));
  m.password = std::string(bytes.substr(second + 1));
  if (m.user.empty() || m.password.find('\0') != std::string::npos) return std::nullopt;
  return m;
}

}  // namespace

void handle_sasl_handshake(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("Mechanisms", std::vector<std::string>{std::string(kPlain)});
  const std::string mechanism = request.body.str("Mechanism");
  if (c.is_authenticated() || !c.sasl_mechanism().empty()) {
    resp.set("ErrorCode", int64_t{kIllegalSaslState});
    c.respond(request, resp);
    return c.close(common::Status::failed_precondition("SASL handshake repeated"));
  }
  if (mechanism != kPlain) {
    resp.set("ErrorCode", int64_t{kUnsupportedSaslMechanism});
    return c.respond(request, resp);
  }
  c.set_sasl_mechanism(mechanism);
  resp.set("ErrorCode", int64_t{kNone});
  c.respond(request, resp);
  if (request.version() == 0) c.expect_raw_sasl_token();
}

namespace {

// Checks a PLAIN message; on success the connection is authenticated.
// Returns the error to answer with, and why.
std::pair<ErrorCode, std::string> authenticate_plain(KafkaConnection& c, std::string_view bytes) {
  auto plain = parse_plain(bytes);
  if (!plain) return {kSaslAuthenticationFailed, "malformed SASL/PLAIN message"};
  std::optional<broker::NamespaceName> ns;
  if (plain->user.find('/') != std::string::npos) {
    auto parsed = broker::NamespaceName::parse(plain->user);
    if (!parsed) return {kSaslAuthenticationFailed, "user name '" + plain->user + "' is not a tenant/namespace"};
    const broker::PolicyCache* policies = c.service().policies();
    if (policies != nullptr && policies->namespace_policies(*parsed) == nullptr) {
      return {kSaslAuthenticationFailed, "namespace " + parsed->to_string() + " does not exist"};
    }
    ns = *parsed;
  }
  broker::Credentials credentials{"token", plain->password, c.peer_host()};
  auto role = c.service().authenticator().authenticate(credentials);
  if (!role.is_ok()) {
    MLOG_INFO("kafka client {}: SASL/PLAIN authentication failed: {}", c.peer_host(), role.status().message());
    return {kSaslAuthenticationFailed, "authentication failed: " + role.status().message()};
  }
  c.authenticated(*role, ns);
  return {kNone, {}};
}

}  // namespace

void handle_sasl_authenticate(KafkaConnection& c, const Request& request) {
  Struct resp = request.response();
  resp.set("AuthBytes", common::Slice());
  resp.set("SessionLifetimeMs", int64_t{0});
  auto refuse = [&](ErrorCode e, std::string why) {
    resp.set("ErrorCode", int64_t{e});
    resp.set("ErrorMessage", why);
    c.respond(request, resp);
    c.close(common::Status::permission_denied(why));
  };
  if (c.sasl_mechanism() != kPlain || c.is_authenticated()) {
    return refuse(kIllegalSaslState, "SaslAuthenticate needs a SaslHandshake choosing PLAIN first");
  }
  const common::Slice* bytes = request.body.bytes("AuthBytes");
  auto [error, why] = authenticate_plain(c, bytes == nullptr ? std::string_view() : bytes->view());
  if (error != kNone) return refuse(error, why);
  resp.set("ErrorCode", int64_t{kNone});
  c.respond(request, resp);
}

void handle_raw_sasl_token(KafkaConnection& c, common::Slice token) {
  auto [error, why] = authenticate_plain(c, token.view());
  if (error != kNone) return c.close(common::Status::permission_denied(why));
  static const char kEmptyToken[4] = {0, 0, 0, 0};
  c.respond_raw(common::Slice::copy_of(std::string_view(kEmptyToken, sizeof kEmptyToken)));
}

}  // namespace magnetar::protocol::kafka
