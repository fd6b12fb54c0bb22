#include "cli/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace magnetar::cli {

bool notify_service_manager(std::string_view state) {
  const char* name = std::getenv("NOTIFY_SOCKET");
  if (name == nullptr || name[0] == '\0') return true;
  size_t len = std::strlen(name);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if ((name[0] != '/' && name[0] != '@') || len >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, name, len);
  if (name[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ssize_t sent = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr), addr_len);
  close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace magnetar::cli
