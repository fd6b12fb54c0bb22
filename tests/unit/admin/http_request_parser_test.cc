#include "admin/http_request_parser.h"

#include <gtest/gtest.h>

namespace magnetar::admin {
namespace {

using common::Slice;
using common::SliceChain;

TEST(HttpRequestParserTest, RequestsSplitAtEveryByteParseTheSame) {
  const std::string wire =
      "PUT /admin/v2/tenants/acme?force=true&x=a%20b HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\n\r\n{\"a\": \"body\"}"
      "GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  for (size_t split = 1; split < wire.size(); ++split) {
    HttpRequestParser parser({});
    SliceChain input;
    input.append(Slice::copy_of(wire.substr(0, split)));
    std::vector<std::unique_ptr<HttpRequest>> got;
    std::vector<bool> keep;
    auto drain = [&]() {
      for (;;) {
        auto r = parser.parse(input);
        ASSERT_NE(r, HttpRequestParser::Result::kError) << "split " << split << ": " << parser.error_reason();
        if (r == HttpRequestParser::Result::kNeedMore) break;
        got.push_back(parser.take_request());
        keep.push_back(parser.keep_alive());
      }
    };
    drain();
    input.append(Slice::copy_of(wire.substr(split)));
    drain();
    ASSERT_EQ(got.size(), 2u) << "split " << split;
    EXPECT_EQ(got[0]->method, "PUT");
    EXPECT_EQ(got[0]->path, "/admin/v2/tenants/acme");
    EXPECT_EQ(got[0]->query["force"], "true");
    EXPECT_EQ(got[0]->query["x"], "a b");
    EXPECT_EQ(got[0]->header("content-type"), "application/json");
    EXPECT_EQ(got[0]->body, "{\"a\": \"body\"}");
    EXPECT_TRUE(keep[0]);
    EXPECT_EQ(got[1]->method, "GET");
    EXPECT_EQ(got[1]->path, "/metrics");
    EXPECT_FALSE(keep[1]);
    EXPECT_TRUE(input.empty());
  }
}

TEST(HttpRequestParserTest, ErrorsCarryTheirStatusAndStick) {
  struct Case {
    std::string wire;
    int status;
  } cases[] = {
      {"NOT HTTP AT ALL\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", 414},
      {"GET / HTTP/1.1\r\nX: " + std::string(300, 'h') + "\r\n\r\n", 431},
      {"PUT / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n", 413},
      {"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + std::string(1000, 'c'), 413},
  };
  HttpLimits limits;
  limits.max_url_bytes = 64;
  limits.max_header_bytes = 256;
  limits.max_body_bytes = 512;
  for (const auto& c : cases) {
    HttpRequestParser parser(limits);
    SliceChain input;
    input.append(Slice::copy_of(c.wire));
    EXPECT_EQ(parser.parse(input), HttpRequestParser::Result::kError) << c.wire.substr(0, 30);
    EXPECT_EQ(parser.error_status(), c.status) << c.wire.substr(0, 30);
    EXPECT_FALSE(parser.error_reason().empty());
    input.append(Slice::copy_of("GET / HTTP/1.1\r\n\r\n"));
    EXPECT_EQ(parser.parse(input), HttpRequestParser::Result::kError);
  }
}

}  // namespace
}  // namespace magnetar::admin
