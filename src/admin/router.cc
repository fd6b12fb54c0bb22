#include "admin/router.h"

namespace magnetar::admin {

Responder::~Responder() {
  if (deliver_) deliver_(HttpResponse::error(500, "the handler dropped this request without answering"));
}

void Responder::operator()(HttpResponse response) {
  if (!deliver_) return;
  auto deliver = std::move(deliver_);
  deliver_ = nullptr;
  deliver(std::move(response));
}

bool split_path(std::string_view path, std::vector<std::string>& segments) {
  segments.clear();
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    if (i >= path.size()) break;
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string decoded;
    if (!percent_decode(path.substr(i, j - i), decoded)) return false;
    segments.push_back(std::move(decoded));
    i = j;
  }
  return true;
}

void Router::add(std::string method, std::string pattern, Handler handler) {
  Route r{std::move(method), pattern, {}, std::move(handler)};
  split_path(pattern, r.segments);
  routes_.push_back(std::move(r));
}

bool Router::match(const Route& r, const std::vector<std::string>& segments, HttpRequest& request) {
  if (r.segments.size() != segments.size()) return false;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& p = r.segments[i];
    bool is_param = p.size() > 2 && p.front() == '{' && p.back() == '}';
    if (!is_param && p != segments[i]) return false;
  }
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& p = r.segments[i];
    if (p.size() > 2 && p.front() == '{' && p.back() == '}') {
      request.params[p.substr(1, p.size() - 2)] = segments[i];
    }
  }
  return true;
}

void Router::dispatch(HttpRequest& request, Responder respond) const {
  std::vector<std::string> segments;
  if (!split_path(request.path, segments)) {
    respond(HttpResponse::error(400, "malformed percent-escape in path"));
    return;
  }
  bool path_known = false;
  for (const auto& r : routes_) {
    HttpRequest probe;
    if (!match(r, segments, probe)) continue;
    path_known = true;
    if (r.method != request.method && !(request.method == "HEAD" && r.method == "GET")) continue;
    match(r, segments, request);
    if (guard_) {
      if (auto denied = guard_(request)) return respond(std::move(*denied));
    }
    r.handler(request, std::move(respond));
    return;
  }
  if (!path_known && fallback_ && (request.method == "GET" || request.method == "HEAD")) {
    fallback_(request, std::move(respond));
    return;
  }
  if (path_known) {
    respond(HttpResponse::error(405, "method " + request.method + " is not allowed on " + request.path));
  } else {
    respond(HttpResponse::error(404, "no such resource: " + request.path));
  }
}

std::vector<RouteInfo> Router::routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const auto& r : routes_) out.push_back({r.method, r.pattern});
  return out;
}

}  // namespace magnetar::admin
