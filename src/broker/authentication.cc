#include "broker/authentication.h"

#include "broker/authorization.h"

namespace magnetar::broker {

common::Result<std::string> AllowAllAuthenticator::authenticate(const Credentials& credentials) {
  if (credentials.method == "basic") {
    auto colon = credentials.data.find(':');
    if (colon != std::string::npos && colon > 0) return credentials.data.substr(0, colon);
  }
  return std::string(kAnonymousRole);
}

const Authorization& allow_all_authorization() {
  static const AllowAllAuthorization allow_all;
  return allow_all;
}

}  // namespace magnetar::broker
