#include "admin/router.h"

#include <gtest/gtest.h>

namespace magnetar::admin {
namespace {

struct Captured {
  HttpResponse response;
  bool answered = false;
};

Responder capture(Captured& c) {
  return Responder([&c](HttpResponse r) {
    c.response = std::move(r);
    c.answered = true;
  });
}

HttpRequest request(std::string method, std::string path) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

TEST(RouterTest, BindsDecodedParameters) {
  Router router;
  router.get("/admin/v2/namespaces/{tenant}/{namespace}", [](HttpRequest& req, Responder respond) {
    respond(HttpResponse::text(200, req.param("tenant") + "|" + req.param("namespace")));
  });
  Captured c;
  auto req = request("GET", "/admin/v2/namespaces/public/my%20ns");
  router.dispatch(req, capture(c));
  ASSERT_TRUE(c.answered);
  EXPECT_EQ(c.response.status, 200);
  EXPECT_EQ(c.response.body, "public|my ns");
}

TEST(RouterTest, UnknownPathIs404AndWrongMethodIs405) {
  Router router;
  router.get("/admin/v2/clusters", [](HttpRequest&, Responder respond) { respond(HttpResponse::text(200, "[]")); });
  Captured missing, wrong;
  auto r1 = request("GET", "/admin/v2/nothing");
  router.dispatch(r1, capture(missing));
  EXPECT_EQ(missing.response.status, 404);
  EXPECT_NE(missing.response.body.find("\"reason\""), std::string::npos);
  auto r2 = request("DELETE", "/admin/v2/clusters");
  router.dispatch(r2, capture(wrong));
  EXPECT_EQ(wrong.response.status, 405);
}

TEST(RouterTest, MalformedEscapeIs400) {
  Router router;
  router.get("/x/{y}", [](HttpRequest&, Responder respond) { respond(HttpResponse::text(200, "")); });
  Captured c;
  auto req = request("GET", "/x/%zz");
  router.dispatch(req, capture(c));
  EXPECT_EQ(c.response.status, 400);
}

TEST(RouterTest, AnUnansweredRequestGets500NotSilence) {
  Router router;
  router.get("/forgetful", [](HttpRequest&, Responder) {});
  Captured c;
  auto req = request("GET", "/forgetful");
  router.dispatch(req, capture(c));
  ASSERT_TRUE(c.answered);
  EXPECT_EQ(c.response.status, 500);
}

TEST(SplitPathTest, SkipsEmptySegments) {
  std::vector<std::string> segs;
  ASSERT_TRUE(split_path("//a/b%2Fc/", segs));
  EXPECT_EQ(segs, (std::vector<std::string>{"a", "b/c"}));
}

}  // namespace
}  // namespace magnetar::admin
