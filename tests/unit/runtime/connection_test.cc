#include "runtime/connection.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"

namespace magnetar::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// A blocking client socket with bounded waits.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~Client() { ::close(fd_); }
  void send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      ASSERT_GT(n, 0);
      off += static_cast<size_t>(n);
    }
  }
  // Reads until `n` bytes arrived, EOF, or 10 s passed. Returns bytes read.
  size_t read_up_to(size_t n, std::string* out = nullptr, bool* eof = nullptr) {
    size_t got = 0;
    char buf[65536];
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (got < n && Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      ssize_t r = ::recv(fd_, buf, std::min(sizeof(buf), n - got), 0);
      if (r <= 0) {  // EOF, or a reset from a server that aborted
        if (eof) *eof = true;
        break;
      }
      if (out) out->append(buf, static_cast<size_t>(r));
      got += static_cast<size_t>(r);
    }
    return got;
  }
  bool wait_eof() {
    bool eof = false;
    read_up_to(SIZE_MAX, nullptr, &eof);
    return eof;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

class EchoHandler final : public ConnectionHandler {
 public:
  void on_data(Connection& conn, common::SliceChain& input) override {
    while (!input.empty()) conn.write(input.take_front(input.size()));
  }
};

TEST(ConnectionTest, EchoesThroughTheListenerOnEveryReactor) {
  Runtime rt(2);
  rt.start();
  auto listener = TcpListener::listen(rt, "echo", "127.0.0.1", 0,
                                      [](Reactor&) { return std::make_unique<EchoHandler>(); });
  ASSERT_TRUE(listener.is_ok()) << listener.status().to_string();
  uint16_t port = (*listener)->port();
  ASSERT_NE(port, 0);
  for (int i = 0; i < 4; ++i) {  // round robin puts these on both reactors
    Client c(port);
    std::string msg = "ping-" + std::to_string(i) + std::string(100000, 'x');
    c.send_all(msg);
    std::string back;
    EXPECT_EQ(c.read_up_to(msg.size(), &back), msg.size());
    EXPECT_EQ(back, msg);
  }
  (*listener)->shutdown();
  EXPECT_EQ((*listener)->connection_count(), 0u);
  rt.stop();
}

// Answers every 1 KiB request with 64 KiB, decoding only while writable, and
// records the most output it ever had queued.
class AmplifyHandler final : public ConnectionHandler {
 public:
  static constexpr size_t kRequest = 1024;
  static constexpr size_t kResponse = 64 * 1024;
  AmplifyHandler(std::atomic<size_t>& max_queued, std::atomic<size_t>& answered)
      : max_queued_(max_queued), answered_(answered) {}
  void on_data(Connection& conn, common::SliceChain& input) override {
    while (conn.writable() && input.size() >= kRequest) {
      input.consume(kRequest);
      conn.write(common::Slice::copy_of(std::string(kResponse, 'r')));
      answered_.fetch_add(1);
      size_t q = conn.queued_bytes();
      size_t prev = max_queued_.load();
      while (q > prev && !max_queued_.compare_exchange_weak(prev, q)) {}
    }
  }

 private:
  std::atomic<size_t>& max_queued_;
  std::atomic<size_t>& answered_;
};

TEST(ConnectionTest, SlowReaderCannotMakeTheServerBufferWithoutBound) {
  Runtime rt(1);
  rt.start();
  std::atomic<size_t> max_queued{0};
  std::atomic<size_t> answered{0};
  ConnectionOptions opts;
  opts.high_watermark = 1 << 20;
  opts.low_watermark = 256 << 10;
  auto listener = TcpListener::listen(
      rt, "amplify", "127.0.0.1", 0,
      [&](Reactor&) { return std::make_unique<AmplifyHandler>(max_queued, answered); }, opts);
  ASSERT_TRUE(listener.is_ok());
  Client c((*listener)->port());
  int small = 64 << 10;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));

  constexpr size_t kRequests = 2048;  // would be 128 MiB of answers
  c.send_all(std::string(kRequests * AmplifyHandler::kRequest, 'q'));
  // The client reads nothing. Wait until the server stops answering.
  size_t seen = 0;
  for (int i = 0; i < 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    size_t now = answered.load();
    if (now == seen && now > 0) break;
    seen = now;
  }
  size_t stalled_at = answered.load();
  EXPECT_GT(stalled_at, 0u);
  EXPECT_LT(stalled_at, kRequests) << "the server answered everything into its own memory";
  EXPECT_LE(max_queued.load(), opts.high_watermark + AmplifyHandler::kResponse);

  // Now read everything: nothing was lost while paused.
  size_t expected = kRequests * AmplifyHandler::kResponse;
  std::string sink;
  size_t got = 0;
  auto deadline = Clock::now() + std::chrono::seconds(60);
  while (got < expected && Clock::now() < deadline) got += c.read_up_to(expected - got);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(answered.load(), kRequests);
  EXPECT_LE(max_queued.load(), opts.high_watermark + AmplifyHandler::kResponse);
  (*listener)->shutdown();
  rt.stop();
}

class GreetHandler final : public ConnectionHandler {
 public:
  explicit GreetHandler(std::atomic<int>& closed) : closed_(closed) {}
  void on_data(Connection& conn, common::SliceChain& input) override {
    input.consume(input.size());
    conn.write(common::Slice::copy_of(std::string(1 << 20, 'g')));  // 1 MiB answer
  }
  void on_close(Connection&, const common::Status&) override { closed_.fetch_add(1); }

 private:
  std::atomic<int>& closed_;
};

TEST(ConnectionTest, ShutdownSendsQueuedOutputThenClosesEveryConnection) {
  Runtime rt(2);
  rt.start();
  std::atomic<int> closed{0};
  auto listener = TcpListener::listen(rt, "greet", "127.0.0.1", 0,
                                      [&](Reactor&) { return std::make_unique<GreetHandler>(closed); });
  ASSERT_TRUE(listener.is_ok());
  uint16_t port = (*listener)->port();
  Client idle1(port), idle2(port), busy(port);
  busy.send_all("hello");
  // Wait for the server to see all three.
  for (int i = 0; i < 500 && (*listener)->connection_count() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_EQ((*listener)->connection_count(), 3u);

  std::thread stopper([&]() { (*listener)->shutdown(std::chrono::milliseconds(5000)); });
  std::string got;
  bool eof = false;
  busy.read_up_to(SIZE_MAX, &got, &eof);
  EXPECT_TRUE(eof);
  EXPECT_EQ(got.size(), size_t(1) << 20);  // the whole answer, then EOF
  EXPECT_TRUE(idle1.wait_eof());
  EXPECT_TRUE(idle2.wait_eof());
  stopper.join();
  EXPECT_EQ((*listener)->connection_count(), 0u);
  EXPECT_EQ(closed.load(), 3);
  // No longer accepting.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_NE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  rt.stop();
}

TEST(ConnectionTest, OversizedUndecodableInputClosesOnlyThatConnection) {
  Runtime rt(1);
  rt.start();
  class Hoarder final : public ConnectionHandler {
    void on_data(Connection&, common::SliceChain&) override {}  // never consumes
  };
  ConnectionOptions opts;
  opts.max_input_bytes = 256 << 10;
  auto listener = TcpListener::listen(rt, "hoard", "127.0.0.1", 0,
                                      [](Reactor&) { return std::make_unique<Hoarder>(); }, opts);
  ASSERT_TRUE(listener.is_ok());
  Client flood((*listener)->port());
  Client bystander((*listener)->port());
  std::string chunk(64 << 10, 'f');
  for (int i = 0; i < 8; ++i) {
    ssize_t n = ::send(flood.fd(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
  }
  EXPECT_TRUE(flood.wait_eof());
  for (int i = 0; i < 500 && (*listener)->connection_count() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ((*listener)->connection_count(), 1u);  // the bystander is still connected
  (*listener)->shutdown();
  rt.stop();
}

TEST(TcpListenerTest, BindingABusyPortIsAClearError) {
  Runtime rt(1);
  rt.start();
  auto first = TcpListener::listen(rt, "first", "127.0.0.1", 0,
                                   [](Reactor&) { return std::make_unique<EchoHandler>(); });
  ASSERT_TRUE(first.is_ok());
  auto second = TcpListener::listen(rt, "second", "127.0.0.1", (*first)->port(),
                                    [](Reactor&) { return std::make_unique<EchoHandler>(); });
  ASSERT_FALSE(second.is_ok());
  EXPECT_NE(second.status().message().find("Address already in use"), std::string::npos)
      << second.status().to_string();
  auto bad = TcpListener::listen(rt, "bad", "no-such-host.invalid", 0,
                                 [](Reactor&) { return std::make_unique<EchoHandler>(); });
  EXPECT_FALSE(bad.is_ok());
  (*first)->shutdown();
  rt.stop();
}

}  // namespace
}  // namespace magnetar::runtime
