#include "security/token_authenticator.h"

#include "common/clock.h"

namespace magnetar::security {

using common::Result;
using common::Status;

Result<std::string> TokenAuthenticator::authenticate(const broker::Credentials& credentials) {
  std::string_view token;
  if (credentials.method == "token") {
    token = credentials.data;
  } else if (credentials.method == "basic") {
    // AMQP's PLAIN: "user:password", the password being the token.
    auto colon = credentials.data.find(':');
    if (colon != std::string::npos) token = std::string_view(credentials.data).substr(colon + 1);
  } else if (credentials.method == "none" || credentials.method.empty()) {
    return Status::permission_denied("authentication is required: connect with a token");
  } else {
    return Status::permission_denied("authentication method '" + credentials.method +
                                     "' is not served; use token authentication");
  }
  if (token.empty()) return Status::permission_denied("authentication is required: connect with a token");
  auto claims = verify_token(key_, token, common::wall_clock_ms() / 1000);
  if (!claims.is_ok()) return claims.status();
  return claims->subject;
}

Result<std::string> TokenAuthenticator::authenticate_bearer(std::string_view header_value) {
  constexpr std::string_view kBearer = "Bearer ";
  if (header_value.substr(0, kBearer.size()) != kBearer) {
    return Status::permission_denied("authentication is required: send Authorization: Bearer <token>");
  }
  return authenticate(broker::Credentials{"token", std::string(header_value.substr(kBearer.size())), ""});
}

}  // namespace magnetar::security
