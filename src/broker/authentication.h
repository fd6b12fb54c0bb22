// Authentication: who a client is.
//
// Every protocol hands the credentials its handshake carries to one
// Authenticator: Pulsar's CONNECT (auth_method_name + auth_data), Kafka's
// SASL/PLAIN and AMQP's PLAIN as they arrive. It answers the client's role,
// which authorization checks later. Providers that check tokens or
// passwords implement this interface; the default accepts everyone.
//
// Threads: authenticate() is called on the connection's reactor and must not
// block.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::broker {

struct Credentials {
  std::string method;  // "none" when the client sent none; "token", "basic", ...
  std::string data;    // what the method carries (a token, "user:password", ...)
  std::string peer;    // the client's address, for logs
};

// The credentials an HTTP `Authorization` header carries: "Bearer <token>"
// is method "token", "Basic <base64 user:password>" method "basic",
// anything else (or nothing) method "none".
Credentials credentials_from_http(std::string_view authorization);

// The role of a client that proved nothing.
inline constexpr std::string_view kAnonymousRole = "anonymous";

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The role `credentials` prove; PermissionDenied (with a message for the
  // client) when they prove nothing acceptable.
  virtual common::Result<std::string> authenticate(const Credentials& credentials) = 0;
};

// Accepts every client. Its role is the method's data for "token"/"basic"
// users that name themselves ("user:..." -> "user"), else anonymous: no
// credential is checked, so the role is only a label.
class AllowAllAuthenticator final : public Authenticator {
 public:
  common::Result<std::string> authenticate(const Credentials& credentials) override;
};

}  // namespace magnetar::broker
