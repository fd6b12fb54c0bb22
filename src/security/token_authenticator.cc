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

}  // namespace magnetar::security
