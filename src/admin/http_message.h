// HTTP/1.1 requests and responses as the admin API sees them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace magnetar::admin {

}  // namespace magnetar::admin

namespace magnetar::broker {
class Authorization;
}  // namespace magnetar::broker

namespace magnetar::admin {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded path, no query
  std::map<std::string, std::string> query;    // decoded query parameters
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::map<std::string, std::string> params;   // filled by the router from {name} segments
  std::string role;                            // who sent it, once authenticated
  std::string tls_common_name;                 // CN of the client's verified certificate (HTTPS), or ""
  std::string client_address;                  // the peer's IP, without its port
  // What that role may do; null when the node authenticates no one (then
  // everyone may do everything).
  const broker::Authorization* authorization = nullptr;

  // The named header, or "" when absent. `name` must be lower case.
  const std::string& header(const std::string& name) const;
  // The path parameter, or "" when the route did not bind it.
  const std::string& param(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse text(int status, std::string body);
  static HttpResponse json(int status, const nlohmann::json& body);
  // Pulsar's error shape: {"reason": "..."}.
  static HttpResponse error(int status, std::string reason);
  static HttpResponse no_content() { return HttpResponse{204, "", "", {}}; }
};

std::string_view status_reason(int status);
// Decodes %XX escapes (and '+' as space when `plus_is_space`). Returns false on
// a malformed escape.
bool percent_decode(std::string_view in, std::string& out, bool plus_is_space = false);

}  // namespace magnetar::admin
