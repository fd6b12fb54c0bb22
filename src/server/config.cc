#include "server/config.h"

#include <unistd.h>

namespace magnetar::server {

std::string Config::effective_advertised_address() const {
  if (!advertised_address.empty()) return advertised_address;
  if (bind == "0.0.0.0" || bind == "::" || bind.empty()) {
    char host[256] = {0};
    if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
    return "127.0.0.1";
  }
  return bind;
}

}  // namespace magnetar::server
