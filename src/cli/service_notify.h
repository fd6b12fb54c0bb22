// Readiness and stopping notices to a service manager (systemd Type=notify).
#pragma once

#include <string_view>

namespace magnetar::cli {

// Sends `state` (newline-separated KEY=VALUE pairs, e.g. "READY=1") as one
// datagram to the AF_UNIX socket named by $NOTIFY_SOCKET: a path, or an
// abstract socket when it starts with '@'. Without $NOTIFY_SOCKET (not run by
// a service manager) it does nothing and returns true. Returns false when the
// notice could not be sent; the caller goes on either way.
bool notify_service_manager(std::string_view state);

}  // namespace magnetar::cli
