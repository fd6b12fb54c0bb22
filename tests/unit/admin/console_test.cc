#include "admin/console.h"

#include <gtest/gtest.h>

#include "admin/console_assets.h"

namespace magnetar::admin {
namespace {

HttpResponse get(const Router& router, std::string path, std::map<std::string, std::string> headers = {}) {
  HttpRequest req;
  req.method = "GET";
  req.path = std::move(path);
  req.headers = std::move(headers);
  HttpResponse out;
  router.dispatch(req, Responder([&out](HttpResponse r) { out = std::move(r); }));
  return out;
}

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

const ConsoleAsset& index_asset() {
  for (const auto& a : console_assets()) {
    if (a.path == "/index.html") return a;
  }
  ADD_FAILURE() << "no /index.html embedded";
  return console_assets().front();
}

class ConsoleTest : public ::testing::Test {
 protected:
  ConsoleTest() {
    router_.get("/admin/v2/tenants", [](HttpRequest&, Responder respond) { respond(HttpResponse::text(200, "[]")); });
    register_console_routes(router_);
  }
  Router router_;
};

TEST_F(ConsoleTest, AssetsAreSortedAndHoldIndex) {
  auto assets = console_assets();
  ASSERT_FALSE(assets.empty());
  for (size_t i = 1; i < assets.size(); ++i) EXPECT_LT(assets[i - 1].path, assets[i].path);
  EXPECT_EQ(index_asset().path, "/index.html");
}

TEST_F(ConsoleTest, RootServesIndexWithoutCaching) {
  auto r = get(router_, "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(r.body, index_asset().body);
  EXPECT_EQ(header(r, "Cache-Control"), "no-cache");
  EXPECT_EQ(header(r, "ETag"), index_asset().etag);
}

TEST_F(ConsoleTest, EveryAssetServedWithItsTypeAndCachePolicy) {
  for (const auto& a : console_assets()) {
    auto r = get(router_, std::string(a.path));
    EXPECT_EQ(r.status, 200) << a.path;
    EXPECT_EQ(r.content_type, a.content_type) << a.path;
    EXPECT_EQ(r.body, a.body) << a.path;
    EXPECT_EQ(header(r, "Cache-Control"), a.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  }
}

TEST_F(ConsoleTest, MatchingEtagAnswers304WithoutBody) {
  auto r = get(router_, "/", {{"if-none-match", std::string(index_asset().etag)}});
  EXPECT_EQ(r.status, 304);
  EXPECT_TRUE(r.body.empty());
  auto other = get(router_, "/", {{"if-none-match", "\"something-else\""}});
  EXPECT_EQ(other.status, 200);
}

TEST_F(ConsoleTest, GzipOnlyWhenAcceptedAndSmaller) {
  for (const auto& a : console_assets()) {
    auto zipped = get(router_, std::string(a.path), {{"accept-encoding", "gzip, deflate, br"}});
    auto plain = get(router_, std::string(a.path), {{"accept-encoding", "identity"}});
    EXPECT_EQ(plain.body, a.body);
    EXPECT_EQ(header(plain, "Content-Encoding"), "");
    if (a.gzip.empty()) {
      EXPECT_EQ(zipped.body, a.body);
    } else {
      EXPECT_LT(a.gzip.size(), a.body.size());
      EXPECT_EQ(header(zipped, "Content-Encoding"), "gzip");
      EXPECT_EQ(zipped.body, a.gzip);
    }
  }
}

TEST_F(ConsoleTest, AcceptEncodingQValues) {
  const ConsoleAsset* zipped = nullptr;
  for (const auto& a : console_assets()) {
    if (!a.gzip.empty()) zipped = &a;
  }
  if (zipped == nullptr) return;  // a build without the console has nothing worth compressing
  auto encoding = [&](const char* accept) {
    return header(get(router_, std::string(zipped->path), {{"accept-encoding", accept}}), "Content-Encoding");
  };
  EXPECT_EQ(encoding("gzip"), "gzip");
  EXPECT_EQ(encoding("br;q=1.0, gzip;q=0.5"), "gzip");
  EXPECT_EQ(encoding("*"), "gzip");
  EXPECT_EQ(encoding("gzip;q=0"), "");
  EXPECT_EQ(encoding("gzip;q=0.000, deflate"), "");
  EXPECT_EQ(encoding("x-gzip, deflate"), "");
  EXPECT_EQ(encoding(""), "");
}

TEST_F(ConsoleTest, ClientSidePagesFallBackToIndex) {
  for (const char* path : {"/tenants", "/tenants/public/default", "/tenants/public/default/persistent/orders",
                           "/monitoring"}) {
    auto r = get(router_, path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body, index_asset().body) << path;
  }
}

TEST_F(ConsoleTest, ApiRoutesWinAndUnknownPathsAre404) {
  EXPECT_EQ(get(router_, "/admin/v2/tenants").body, "[]");
  for (const char* path : {"/admin/v2/nothing", "/assets/missing-abc123.js", "/no/such/thing", "/favicon.ico",
                           "/tenantsx", "/topics/persistent/public/default/orders"}) {
    auto r = get(router_, path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.content_type, "application/json") << path;
  }
}

TEST_F(ConsoleTest, OnlyGetAndHeadFallBack) {
  HttpRequest req;
  req.method = "POST";
  req.path = "/tenants";
  HttpResponse out;
  router_.dispatch(req, Responder([&out](HttpResponse r) { out = std::move(r); }));
  EXPECT_EQ(out.status, 404);
}

}  // namespace
}  // namespace magnetar::admin
