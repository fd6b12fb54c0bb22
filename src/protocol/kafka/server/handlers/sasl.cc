// SaslHandshake and SaslAuthenticate: SASL/PLAIN, checked by the same
// Authenticator as Pulsar's CONNECT, and SCRAM-SHA-256/512, checked against
// the SCRAM users (security/scram_credentials.h). After a v1 handshake the
// SASL messages come in SaslAuthenticate requests; after a v0 handshake they
// come bare (size prefix, no request header) and are answered bare.
//
// PLAIN's message is [authzid] NUL username NUL password. The password is
// the credential (a token, as Kafka-on-Pulsar users pass it); the user
// name chooses the connection's namespace when it has the form
// `tenant/namespace` (the namespace must exist), and is only a label
// otherwise. A failed authentication is answered SASL_AUTHENTICATION_FAILED
// and the connection is closed, as Kafka's broker does.
//
// SCRAM takes two rounds (client-first -> server-first, client-final ->
// server-final); the user it proves is the connection's role, and the
// connection uses the listener's default namespace. An unknown user and a
// wrong password fail alike, at the second round.
#include <fmt/format.h>

#include "common/logging.h"
#include "protocol/kafka/server/kafka_connection.h"

namespace magnetar::protocol::kafka {

namespace {

constexpr std::string_view kPlain = "PLAIN";

bool is_scram(std::string_view mechanism) { return security::scram_mechanism_from_name(mechanism).has_value(); }

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
  resp.set("Mechanisms", std::vector<std::string>{std::string(kPlain), "SCRAM-SHA-256", "SCRAM-SHA-512"});
  const std::string mechanism = request.body.str("Mechanism");
  if (c.is_authenticated() || !c.sasl_mechanism().empty()) {
    resp.set("ErrorCode", int64_t{kIllegalSaslState});
    c.respond(request, resp);
    return c.close(common::Status::failed_precondition("SASL handshake repeated"));
  }
  // Names are exact, as Kafka matches them.
  const bool scram = mechanism == "SCRAM-SHA-256" || mechanism == "SCRAM-SHA-512";
  if (mechanism != kPlain && !scram) {
    resp.set("ErrorCode", int64_t{kUnsupportedSaslMechanism});
    return c.respond(request, resp);
  }
  c.set_sasl_mechanism(mechanism);
  if (scram) {
    // The users are read from memory when the client names one.
    security::ScramCredentials* credentials = c.service().scram_credentials();
    const security::ScramMechanism m = *security::scram_mechanism_from_name(mechanism);
    c.scram_exchange() = std::make_unique<security::ScramServerExchange>(m, [credentials, m](const std::string& user) {
      return credentials == nullptr ? std::nullopt : credentials->find(user, m);
    });
  }
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

// Runs one SCRAM round; `reply` is the server's message to send back.
// On the last round's success the connection is authenticated.
std::pair<ErrorCode, std::string> authenticate_scram(KafkaConnection& c, std::string_view bytes, std::string* reply) {
  auto& exchange = c.scram_exchange();
  const bool first = exchange->user().empty();
  auto answer = first ? exchange->on_client_first(bytes) : exchange->on_client_final(bytes);
  if (!answer.is_ok()) {
    MLOG_INFO("kafka client {}: SASL/{} authentication failed{}: {}", c.peer_host(), c.sasl_mechanism(),
              exchange->user().empty() ? "" : " for user '" + exchange->user() + "'", answer.status().message());
    return {kSaslAuthenticationFailed, answer.status().message()};
  }
  *reply = std::move(*answer);
  if (exchange->done()) {
    c.authenticated(exchange->user(), std::nullopt);
    exchange.reset();
  }
  return {kNone, {}};
}

// One SASL message, for the mechanism the handshake chose.
std::pair<ErrorCode, std::string> authenticate_step(KafkaConnection& c, std::string_view bytes, std::string* reply) {
  if (is_scram(c.sasl_mechanism())) {
    if (!c.scram_exchange()) return {kIllegalSaslState, "the SCRAM exchange is over"};
    return authenticate_scram(c, bytes, reply);
  }
  return authenticate_plain(c, bytes);
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
  if (c.sasl_mechanism().empty() || c.is_authenticated()) {
    return refuse(kIllegalSaslState, "SaslAuthenticate needs a SaslHandshake choosing a mechanism first");
  }
  const common::Slice* bytes = request.body.bytes("AuthBytes");
  std::string reply;
  auto [error, why] = authenticate_step(c, bytes == nullptr ? std::string_view() : bytes->view(), &reply);
  if (error != kNone) return refuse(error, why);
  resp.set("AuthBytes", common::Slice::copy_of(reply));
  resp.set("ErrorCode", int64_t{kNone});
  c.respond(request, resp);
}

void handle_raw_sasl_token(KafkaConnection& c, common::Slice token) {
  std::string reply;
  auto [error, why] = authenticate_step(c, token.view(), &reply);
  if (error != kNone) return c.close(common::Status::permission_denied(why));
  // The answer bare too: its size, then its bytes (none for PLAIN).
  std::string framed(4, '\0');
  const uint32_t size = static_cast<uint32_t>(reply.size());
  for (int i = 0; i < 4; ++i) framed[i] = static_cast<char>(size >> (24 - 8 * i));
  framed += reply;
  c.respond_raw(common::Slice::copy_of(framed));
  // SCRAM's second round comes bare as well.
  if (!c.is_authenticated()) c.expect_raw_sasl_token();
}

}  // namespace magnetar::protocol::kafka
