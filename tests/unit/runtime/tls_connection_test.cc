// The TLS layer of Connection against a real OpenSSL client on loopback, and
// TlsContextSource's reloads. Certificates are made by the openssl command
// in a fresh temporary directory.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "runtime/connection.h"
#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"
#include "runtime/tls_context.h"

namespace magnetar::runtime {
namespace {

namespace fs = std::filesystem;

// A CA and a server certificate for 127.0.0.1 in a temporary directory.
class Certs {
 public:
  Certs() {
    char tmpl[] = "/tmp/magnetar-tls-unit-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    run("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=unit-ca");
    issue("server", 1);
  }
  ~Certs() { fs::remove_all(dir_); }
  // Writes <name>.pem/.key signed by the CA with `serial`.
  void issue(const std::string& name, int serial) {
    run("printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && openssl req -newkey rsa:2048 -nodes -keyout " + name +
        ".key -out " + name + ".csr -subj /CN=server && openssl x509 -req -in " + name +
        ".csr -CA ca.pem -CAkey ca.key -set_serial " + std::to_string(serial) + " -out " + name +
        ".pem -days 2 -extfile san.ext");
  }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  TlsFiles files(const std::string& name = "server") const { return {path(name + ".pem"), path(name + ".key"), "", false}; }

 private:
  void run(const std::string& cmd) {
    std::string full = "cd " + dir_ + " && (" + cmd + ") >/dev/null 2>&1";
    ASSERT_EQ(std::system(full.c_str()), 0) << cmd;
  }
  std::string dir_;
};

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{10, 0};  // every blocking read below is bounded
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

// A blocking OpenSSL client that trusts the test CA.
class TlsClient {
 public:
  TlsClient(uint16_t port, const std::string& ca) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    fd_ = connect_loopback(port);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    connected_ = SSL_connect(ssl_) == 1;
  }
  ~TlsClient() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  bool connected() const { return connected_; }
  void send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      int n = SSL_write(ssl_, data.data() + off, static_cast<int>(data.size() - off));
      ASSERT_GT(n, 0);
      off += static_cast<size_t>(n);
    }
  }
  std::string read_exactly(size_t n) {
    std::string out;
    char buf[65536];
    while (out.size() < n) {
      int r = SSL_read(ssl_, buf, static_cast<int>(std::min(sizeof(buf), n - out.size())));
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }

 private:
  SSL_CTX* ctx_;
  SSL* ssl_;
  int fd_;
  bool connected_ = false;
};

class EchoHandler final : public ConnectionHandler {
 public:
  explicit EchoHandler(std::atomic<size_t>& bytes_seen) : bytes_seen_(bytes_seen) {}
  void on_data(Connection& conn, common::SliceChain& input) override {
    bytes_seen_.fetch_add(input.size());
    // Answers in many small writes so that records are gathered.
    while (!input.empty()) conn.write(input.take_front(std::min<size_t>(input.size(), 100)));
  }

 private:
  std::atomic<size_t>& bytes_seen_;
};

class TlsConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_.start();
    auto source = TlsContextSource::create(certs_.files());
    ASSERT_TRUE(source.is_ok()) << source.status().to_string();
    source_ = *source;
    ConnectionOptions options;
    options.tls = source_;
    auto l = TcpListener::listen(rt_, "echo-tls", "127.0.0.1", 0,
                                 [this](Reactor&) { return std::make_unique<EchoHandler>(bytes_seen_); }, options);
    ASSERT_TRUE(l.is_ok()) << l.status().to_string();
    listener_ = std::move(*l);
  }
  void TearDown() override {
    if (listener_) listener_->shutdown();
    rt_.stop();
  }

  Certs certs_;
  Runtime rt_{2};
  std::shared_ptr<TlsContextSource> source_;
  std::atomic<size_t> bytes_seen_{0};
  std::unique_ptr<TcpListener> listener_;
};

TEST_F(TlsConnectionTest, HandlersSeePlaintextBothWays) {
  for (size_t size : {size_t{1}, size_t{5000}, size_t{300000}}) {
    TlsClient c(listener_->port(), certs_.path("ca.pem"));
    ASSERT_TRUE(c.connected());
    std::string msg(size, 'a');
    for (size_t i = 0; i < size; ++i) msg[i] = static_cast<char>('a' + i % 26);
    c.send_all(msg);
    EXPECT_EQ(c.read_exactly(size), msg);
  }
}

TEST_F(TlsConnectionTest, GarbageClosesThatConnectionAndTheListenerKeepsServing) {
  std::mt19937 rng(42);
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = connect_loopback(listener_->port());
    std::string junk(2048, '\0');
    for (auto& ch : junk) ch = static_cast<char>(rng());
    if (attempt == 1) junk = "GET / HTTP/1.1\r\n\r\n";
    ASSERT_EQ(::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(junk.size()));
    char buf[4096];
    ssize_t r;
    do {
      r = ::recv(fd, buf, sizeof(buf), 0);  // an alert may come first, then EOF
    } while (r > 0);
    EXPECT_TRUE(r == 0 || errno == ECONNRESET) << "the connection stayed open: " << std::strerror(errno);
    ::close(fd);
  }
  EXPECT_EQ(bytes_seen_.load(), 0u) << "garbage reached the handler";
  TlsClient c(listener_->port(), certs_.path("ca.pem"));
  ASSERT_TRUE(c.connected());
  c.send_all("still here");
  EXPECT_EQ(c.read_exactly(10), "still here");
}

TEST(TlsHandshakeTimeoutTest, APeerThatNeverHandshakesIsDisconnected) {
  Certs certs;
  Runtime rt(1);
  rt.start();
  auto source = TlsContextSource::create(certs.files());
  ASSERT_TRUE(source.is_ok());
  std::atomic<size_t> seen{0};
  ConnectionOptions options;
  options.tls = *source;
  options.tls_handshake_timeout = std::chrono::milliseconds(200);
  auto l = TcpListener::listen(rt, "slow-tls", "127.0.0.1", 0,
                               [&](Reactor&) { return std::make_unique<EchoHandler>(seen); }, options);
  ASSERT_TRUE(l.is_ok());
  int fd = connect_loopback((*l)->port());
  ASSERT_EQ(::send(fd, "\x16\x03\x01", 3, MSG_NOSIGNAL), 3);  // the start of a record, then nothing
  char buf[64];
  ssize_t r = ::recv(fd, buf, sizeof(buf), 0);  // bounded by SO_RCVTIMEO
  EXPECT_TRUE(r == 0 || (r < 0 && errno == ECONNRESET)) << "still open: " << r << " " << std::strerror(errno);
  ::close(fd);
  for (int i = 0; i < 500 && (*l)->connection_count() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ((*l)->connection_count(), 0u);
  (*l)->shutdown();
  rt.stop();
}

TEST(TlsContextSourceTest, ReloadsChangedFilesAndKeepsTheOldContextOnFailure) {
  Certs certs;
  auto source = TlsContextSource::create(certs.files());
  ASSERT_TRUE(source.is_ok());
  auto first = (*source)->current();
  EXPECT_TRUE((*source)->reload_if_changed().is_ok());
  EXPECT_EQ((*source)->current(), first) << "unchanged files must not rebuild";

  certs.issue("next", 2);
  fs::rename(certs.path("next.pem"), certs.path("server.pem"));
  fs::rename(certs.path("next.key"), certs.path("server.key"));
  EXPECT_TRUE((*source)->reload_if_changed().is_ok());
  EXPECT_EQ((*source)->generation(), 2u);
  auto second = (*source)->current();
  EXPECT_NE(second, first);

  std::ofstream(certs.path("server.pem"), std::ios::trunc) << "not a certificate\n";
  common::Status st = (*source)->reload_if_changed();
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("server.pem"), std::string::npos) << st.message();
  EXPECT_EQ((*source)->current(), second);
  EXPECT_EQ((*source)->generation(), 2u);
}

TEST(TlsContextSourceTest, BadFilesAreClearErrors) {
  Certs certs;
  TlsFiles files = certs.files();
  files.key_file = certs.path("ca.key");  // a key that does not match
  auto mismatch = TlsContextSource::create(files);
  ASSERT_FALSE(mismatch.is_ok());
  EXPECT_NE(mismatch.status().message().find("mismatch"), std::string::npos) << mismatch.status().message();
  files = certs.files();
  files.require_client_cert = true;  // without trust certificates
  EXPECT_FALSE(TlsContextSource::create(files).is_ok());
}

}  // namespace
}  // namespace magnetar::runtime
