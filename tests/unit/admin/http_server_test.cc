#include "admin/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace magnetar::admin {
namespace {

// Sends raw bytes and collects the reply until EOF or `until` appears (bounded).
std::string exchange(uint16_t port, const std::string& request, const std::string& until = "") {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return "connect failed";
  }
  size_t off = 0;
  while (off < request.size()) {
    ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early on bad input
    off += static_cast<size_t>(n);
  }
  std::string out;
  char buf[65536];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!until.empty() && out.find(until) != std::string::npos) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  ::close(fd);
  return out;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_.start();
    router_.get("/echo/{word}", [](HttpRequest& req, Responder respond) {
      respond(HttpResponse::text(200, "word=" + req.param("word") + " q=" + req.query["q"]));
    });
    router_.put("/body", [](HttpRequest& req, Responder respond) {
      respond(HttpResponse::text(200, "got " + std::to_string(req.body.size()) + " bytes, type " +
                                          req.header("content-type")));
    });
    // Answers later, from another thread.
    router_.get("/slow/{n}", [](HttpRequest& req, Responder respond) {
      std::thread([n = req.param("n"), respond = std::move(respond)]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        respond(HttpResponse::text(200, "slow " + n));
      }).detach();
    });
    HttpLimits limits;
    limits.max_body_bytes = 1 << 20;
    limits.max_url_bytes = 1024;
    limits.max_header_bytes = 4096;
    auto server = HttpServer::listen(rt_, "127.0.0.1", 0, router_, limits);
    ASSERT_TRUE(server.is_ok()) << server.status().to_string();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    server_->shutdown();
    rt_.stop();
  }
  bool still_serving() {
    std::string r = exchange(server_->port(), "GET /echo/alive HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    return r.find("200 OK") != std::string::npos && r.find("word=alive") != std::string::npos;
  }

  runtime::Runtime rt_{2};
  Router router_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersWithQueryAndKeepAlive) {
  std::string r = exchange(server_->port(),
                           "GET /echo/hi%21?q=a+b HTTP/1.1\r\nHost: x\r\n\r\n"
                           "GET /echo/again HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(count(r, "HTTP/1.1 200 OK"), 2u) << r;
  EXPECT_NE(r.find("word=hi! q=a b"), std::string::npos) << r;
  EXPECT_LT(r.find("word=hi!"), r.find("word=again"));
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrderEvenWhenSlow) {
  std::string req;
  for (int i = 0; i < 5; ++i) req += "GET /slow/" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  req += "GET /echo/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  std::string r = exchange(server_->port(), req);
  size_t prev = 0;
  for (int i = 0; i < 5; ++i) {
    size_t at = r.find("slow " + std::to_string(i));
    ASSERT_NE(at, std::string::npos) << r;
    EXPECT_GT(at, prev);
    prev = at;
  }
  EXPECT_GT(r.find("word=last"), prev);
}

TEST_F(HttpServerTest, ReadsBodiesSentInPieces) {
  std::string body(300000, 'b');
  std::string r = exchange(server_->port(),
                           "PUT /body HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  EXPECT_NE(r.find("got 300000 bytes, type application/json"), std::string::npos) << r.substr(0, 200);
}

TEST_F(HttpServerTest, GarbageGets400AndTheServerKeepsServing) {
  std::string r = exchange(server_->port(), std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
  EXPECT_NE(r.find("400 Bad Request"), std::string::npos) << r;
  r = exchange(server_->port(), "HELLO THERE\r\n\r\n");
  EXPECT_NE(r.find("400 Bad Request"), std::string::npos) << r;
  EXPECT_NE(r.find("malformed HTTP request"), std::string::npos) << r;
  std::string noise;
  for (int i = 0; i < 5000; ++i) noise += static_cast<char>((i * 7919) % 256);
  exchange(server_->port(), noise);
  EXPECT_TRUE(still_serving());
}

TEST_F(HttpServerTest, OversizeRequestsGetTheirOwnStatus) {
  std::string r = exchange(server_->port(), "GET /echo/" + std::string(2000, 'u') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(r.find("414 URI Too Long"), std::string::npos) << r.substr(0, 100);
  r = exchange(server_->port(), "GET /echo/x HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(5000, 'h') + "\r\n\r\n");
  EXPECT_NE(r.find("431"), std::string::npos) << r.substr(0, 100);
  r = exchange(server_->port(), "PUT /body HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", "\r\n\r\n");
  EXPECT_NE(r.find("413 Payload Too Large"), std::string::npos) << r.substr(0, 100);
  EXPECT_TRUE(still_serving());
}

TEST_F(HttpServerTest, HeadGetsHeadersOnly) {
  std::string r = exchange(server_->port(), "HEAD /echo/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(r.find("200 OK"), std::string::npos);
  EXPECT_NE(r.find("Content-Length: 9"), std::string::npos) << r;
  EXPECT_EQ(r.find("word="), std::string::npos) << r;
}

}  // namespace
}  // namespace magnetar::admin
