#include "broker/authentication.h"

#include "broker/authorization.h"
#include "common/base64.h"

namespace magnetar::broker {

common::Result<std::string> AllowAllAuthenticator::authenticate(const Credentials& credentials) {
  if (credentials.method == "basic") {
    auto colon = credentials.data.find(':');
    if (colon != std::string::npos && colon > 0) return credentials.data.substr(0, colon);
  }
  return std::string(kAnonymousRole);
}

Credentials credentials_from_http(std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  constexpr std::string_view kBasic = "Basic ";
  if (authorization.substr(0, kBearer.size()) == kBearer) {
    return {"token", std::string(authorization.substr(kBearer.size())), ""};
  }
  if (authorization.substr(0, kBasic.size()) == kBasic) {
    auto decoded = common::base64_decode(authorization.substr(kBasic.size()));
    return {"basic", decoded.is_ok() ? *decoded : std::string(), ""};
  }
  return {"none", "", ""};
}

const Authorization& allow_all_authorization() {
  static const AllowAllAuthorization allow_all;
  return allow_all;
}

}  // namespace magnetar::broker
