#include "cli/service_notify.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace magnetar::cli {
namespace {

// A datagram socket standing in for the service manager's, bound to `name`
// (a path, or an abstract name when it starts with '@').
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& name) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size());
    if (name[0] == '@') addr.sun_path[0] = '\0';
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifyListener() { close(fd_); }
  bool bound() const { return bound_; }
  std::string receive() {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n < 0 ? std::string("<nothing>") : std::string(buf, static_cast<size_t>(n));
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

class ServiceNotifyTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("NOTIFY_SOCKET"); }
};

TEST_F(ServiceNotifyTest, WithoutNotifySocketNothingIsSent) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(notify_service_manager("READY=1"));
}

TEST_F(ServiceNotifyTest, SendsTheStateToAPathSocket) {
  std::string path = testing::TempDir() + "notify-" + std::to_string(getpid());
  unlink(path.c_str());
  NotifyListener listener(path);
  ASSERT_TRUE(listener.bound());
  setenv("NOTIFY_SOCKET", path.c_str(), 1);
  EXPECT_TRUE(notify_service_manager("READY=1\nSTATUS=serving"));
  EXPECT_EQ(listener.receive(), "READY=1\nSTATUS=serving");
  EXPECT_TRUE(notify_service_manager("STOPPING=1"));
  EXPECT_EQ(listener.receive(), "STOPPING=1");
  unlink(path.c_str());
}

TEST_F(ServiceNotifyTest, SendsTheStateToAnAbstractSocket) {
  std::string name = "@magnetar-notify-test-" + std::to_string(getpid());
  NotifyListener listener(name);
  ASSERT_TRUE(listener.bound());
  setenv("NOTIFY_SOCKET", name.c_str(), 1);
  EXPECT_TRUE(notify_service_manager("READY=1"));
  EXPECT_EQ(listener.receive(), "READY=1");
}

TEST_F(ServiceNotifyTest, AnUnusableSocketIsReportedNotFatal) {
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(notify_service_manager("READY=1"));
  setenv("NOTIFY_SOCKET", (testing::TempDir() + "no-such-socket").c_str(), 1);
  EXPECT_FALSE(notify_service_manager("READY=1"));
}

}  // namespace
}  // namespace magnetar::cli
