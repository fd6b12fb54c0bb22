#include "admin/console.h"

#include <algorithm>

#include "admin/console_assets.h"

namespace magnetar::admin {

namespace {

const ConsoleAsset* find_asset(std::string_view path) {
  auto assets = console_assets();
  auto it = std::lower_bound(assets.begin(), assets.end(), path,
                             [](const ConsoleAsset& a, std::string_view p) { return a.path < p; });
  return it != assets.end() && it->path == path ? &*it : nullptr;
}

// First path segments of the console's client-side pages (web-ui/src/main.ts).
constexpr std::string_view kPages[] = {"tenants", "monitoring", "nodes"};

// True when the header's comma-separated codings accept gzip: "gzip" or "*"
// with a q-value above 0 (RFC 9110, 12.5.3).
bool accepts_gzip(const std::string& accept_encoding) {
  size_t at = 0;
  while (at < accept_encoding.size()) {
    size_t end = accept_encoding.find(',', at);
    if (end == std::string::npos) end = accept_encoding.size();
    std::string_view item(accept_encoding.data() + at, end - at);
    at = end + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    size_t semi = item.find(';');
    std::string_view coding = item.substr(0, semi);
    while (!coding.empty() && coding.back() == ' ') coding.remove_suffix(1);
    if (coding != "gzip" && coding != "*") continue;
    if (semi == std::string_view::npos) return true;
    size_t q = item.find("q=", semi);
    if (q == std::string_view::npos) return true;
    std::string_view value = item.substr(q + 2);
    value = value.substr(0, value.find_first_of(" ;"));
    // "0", "0.", "0.000" refuse; anything else accepts.
    bool zero = !value.empty() && value.front() == '0' && value.find_first_not_of("0.") == std::string_view::npos;
    if (!zero) return true;
  }
  return false;
}

bool etag_matches(const std::string& if_none_match, std::string_view etag) {
  if (if_none_match == "*") return true;
  return if_none_match.find(etag) != std::string::npos;
}

HttpResponse serve(const ConsoleAsset& asset, const HttpRequest& req) {
  HttpResponse r;
  r.headers.emplace_back("ETag", std::string(asset.etag));
  r.headers.emplace_back("Cache-Control", asset.immutable ? "public, max-age=31536000, immutable" : "no-cache");
  r.headers.emplace_back("Vary", "Accept-Encoding");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  if (etag_matches(req.header("if-none-match"), asset.etag)) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.status = 200;
  r.content_type = std::string(asset.content_type);
  if (!asset.gzip.empty() && accepts_gzip(req.header("accept-encoding"))) {
    r.headers.emplace_back("Content-Encoding", "gzip");
    r.body = std::string(asset.gzip);
  } else {
    r.body = std::string(asset.body);
  }
  return r;
}

void serve_path(HttpRequest& req, Responder respond) {
  std::string_view path = req.path;
  if (path == "/") path = "/index.html";
  if (const ConsoleAsset* asset = find_asset(path)) {
    respond(serve(*asset, req));
    return;
  }
  bool page = std::any_of(std::begin(kPages), std::end(kPages), [path](std::string_view p) {
    return path.size() > p.size() && path[0] == '/' && path.substr(1).starts_with(p) &&
           (path.size() == p.size() + 1 || path[p.size() + 1] == '/');
  });
  const ConsoleAsset* index = find_asset("/index.html");
  if (!page || index == nullptr) {
    respond(HttpResponse::error(404, "no such resource: " + req.path));
    return;
  }
  respond(serve(*index, req));
}

}  // namespace

void register_console_routes(Router& router) {
  router.get("/", serve_path);
  router.set_fallback(serve_path);
}

}  // namespace magnetar::admin
