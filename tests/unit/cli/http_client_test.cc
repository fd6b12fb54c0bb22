#include "cli/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace magnetar::cli {
namespace {

using common::ErrorCode;

TEST(HttpClientTest, ParsesUrls) {
  auto u = Url::parse("http://localhost:8080");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->base_path, "");
  auto p = Url::parse("http://10.0.0.5/prefix/");
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->port, 80);
  EXPECT_EQ(p->base_path, "/prefix");
  auto v6 = Url::parse("http://[::1]:9000");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->to_string(), "http://[::1]:9000");
  EXPECT_FALSE(v6->tls.enabled);
  auto tls = Url::parse("https://broker.example.com/admin");
  ASSERT_TRUE(tls.is_ok());
  EXPECT_TRUE(tls->tls.enabled);
  EXPECT_EQ(tls->port, 443);
  EXPECT_EQ(tls->to_string(), "https://broker.example.com:443/admin");
  for (const char* bad : {"ftp://x", "localhost:8080", "http://", "https://", "http://h:0", "http://h:70000",
                          "http://h:8o"}) {
    EXPECT_EQ(Url::parse(bad).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

TEST(HttpClientTest, EscapesSegments) {
  EXPECT_EQ(escape_segment("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(escape_segment("a b/c%"), "a%20b%2Fc%25");
}

// A one-shot server on a loopback port: reads one request, writes `reply`,
// closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string reply) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    socklen_t len = sizeof(a);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 1);
    thread_ = std::thread([this, reply = std::move(reply)]() {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n > 0) request_.assign(buf, static_cast<size_t>(n));
      if (!reply.empty()) (void)!::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~OneShotServer() {
    thread_.join();
    ::close(fd_);
  }
  uint16_t port() const { return port_; }
  const std::string& request() const { return request_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::string request_;
};

TEST(HttpClientTest, ReadsAChunkedReply) {
  OneShotServer server(
      "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\n{\"rea\r\n10\r\nson\": \"missing\"}\r\n0\r\n\r\n");
  Url url{"127.0.0.1", server.port(), "", "", {}};
  auto r = http_request(url, "PUT", "/admin/v2/x", "{\"a\":1}", std::chrono::seconds(10));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->headers["content-type"], "application/json");
  EXPECT_EQ(r->body, "{\"reason\": \"missing\"}");
  EXPECT_NE(server.request().find("PUT /admin/v2/x HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(server.request().find("Content-Length: 7\r\n"), std::string::npos);
}

TEST(HttpClientTest, RejectsGarbageAndEarlyClose) {
  {
    OneShotServer server("SPDY/9 nonsense\r\n\r\n");
    auto r = http_request(Url{"127.0.0.1", server.port(), "", "", {}}, "GET", "/", {}, std::chrono::seconds(10));
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruption);
  }
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort");
    auto r = http_request(Url{"127.0.0.1", server.port(), "", "", {}}, "GET", "/", {}, std::chrono::seconds(10));
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruption);
  }
}

TEST(HttpClientTest, NobodyListening) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  uint16_t port = ntohs(a.sin_port);
  ::close(fd);  // the port is now closed
  auto r = http_request(Url{"127.0.0.1", port, "", "", {}}, "GET", "/", {}, std::chrono::seconds(10));
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace magnetar::cli
