// Router: maps (method, path pattern) to a handler.
//
// Patterns are literal segments and {name} segments that bind one decoded
// path segment into HttpRequest::params: "/admin/v2/tenants/{tenant}".
// Handlers answer through a Responder, now or later, from any thread.
#pragma once

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "admin/http_message.h"
#include "runtime/task.h"

namespace magnetar::admin {

// Delivers one response to the connection that asked. Callable from any
// thread, at most once; a response for a connection that has since closed is
// dropped. Destroying an unused Responder answers 500 so that no request is
// left hanging.
class Responder {
 public:
  using Deliver = std::function<void(HttpResponse)>;
  Responder() = default;
  explicit Responder(Deliver deliver) : deliver_(std::move(deliver)) {}
  Responder(Responder&&) noexcept = default;
  Responder& operator=(Responder&&) noexcept = default;
  Responder(const Responder&) = delete;
  Responder& operator=(const Responder&) = delete;
  ~Responder();

  void operator()(HttpResponse response);

 private:
  Deliver deliver_;
};

using Handler = std::function<void(HttpRequest& request, Responder respond)>;

struct RouteInfo {
  std::string method;
  std::string pattern;
};

class Router {
 public:
  void add(std::string method, std::string pattern, Handler handler);
  void get(std::string pattern, Handler h) { add("GET", std::move(pattern), std::move(h)); }
  void put(std::string pattern, Handler h) { add("PUT", std::move(pattern), std::move(h)); }
  void post(std::string pattern, Handler h) { add("POST", std::move(pattern), std::move(h)); }
  void del(std::string pattern, Handler h) { add("DELETE", std::move(pattern), std::move(h)); }

  // Finds the route for `request`, binds its params and runs it; answers 404
  // or 405 itself when nothing matches.
  void dispatch(HttpRequest& request, Responder respond) const;
  // Every registered route, for documentation and for the console's API check.
  std::vector<RouteInfo> routes() const;
  // Answers GET and HEAD requests whose path matches no route (the web
  // console's files and its client-side pages) instead of the 404.
  void set_fallback(Handler handler) { fallback_ = std::move(handler); }
  // Runs before every route's handler (not before the fallback): a response
  // it returns is sent instead (401 without a valid token). It may fill in
  // the request's role.
  using Guard = std::function<std::optional<HttpResponse>(HttpRequest&)>;
  void set_guard(Guard guard) { guard_ = std::move(guard); }

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  // "{x}" for a parameter
    Handler handler;
  };
  static bool match(const Route& r, const std::vector<std::string>& segments, HttpRequest& request);
  std::vector<Route> routes_;
  Handler fallback_;
  Guard guard_;
};

// Splits "/a/b%2Fc/" into decoded segments {"a", "b/c"}. Returns false when a
// segment has a malformed escape.
bool split_path(std::string_view path, std::vector<std::string>& segments);

}  // namespace magnetar::admin
