// Token authentication: every client proves its role with a JWT signed by
// the broker's secret key (HS256) or by the private key whose public half
// the broker holds (RS256, ES256), as Pulsar's AuthenticationProviderToken
// does. The role is the token's subject.
//
// Where each protocol carries the token:
//   Pulsar    CONNECT auth_method_name "token", auth_data the token
//   Kafka     SASL/PLAIN password (the user name chooses the namespace)
//   AMQP      PLAIN / AMQPLAIN password
//   REST      Authorization: Bearer <token>
// A client that brings none is refused: with authentication on, no door is
// left open to anonymous clients. Error messages say why (expired, bad
// signature, ...) but never repeat the token.
//
// Threads: authenticate() from any thread; the key is immutable.
#pragma once

#include "broker/authentication.h"
#include "security/jwt.h"

namespace magnetar::security {

class TokenAuthenticator final : public broker::Authenticator {
 public:
  explicit TokenAuthenticator(TokenKey key) : key_(std::move(key)) {}
  common::Result<std::string> authenticate(const broker::Credentials& credentials) override;

 private:
  TokenKey key_;
};

}  // namespace magnetar::security
