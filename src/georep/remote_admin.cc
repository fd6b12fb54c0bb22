#include "georep/remote_admin.h"

#include "client/http_client.h"
#include "georep/geo_replication.h"

namespace magnetar::georep {

using common::Status;

Status call_remote_admin(broker::Tenancy& tenancy, const std::string& cluster, const std::string& method,
                         const std::string& path, const std::string& body, std::chrono::milliseconds timeout) {
  auto info = tenancy.get_cluster(cluster);
  if (!info.is_ok()) return Status::unavailable("cluster " + cluster + " is not registered here");
  const bool tls = info->broker_client_tls_enabled && !info->service_url_tls.empty();
  const std::string& address = tls ? info->service_url_tls : info->service_url;
  if (address.empty()) return Status::unavailable("cluster " + cluster + " has no serviceUrl to send to");
  auto url = client::Url::parse(address);
  if (!url.is_ok()) return Status::invalid_argument("cluster " + cluster + ": " + url.status().message());
  auto token = link_token(*info, cluster);
  if (!token.is_ok()) return token.status();
  url->bearer_token = *token;
  if (tls) {
    url->tls.trust_certs_file = info->broker_client_trust_certs_file;
    url->tls.allow_insecure = info->tls_allow_insecure;
    url->tls.cert_file = info->broker_client_certificate_file;
    url->tls.key_file = info->broker_client_key_file;
  }
  auto reply = client::http_request(*url, method, path, body, timeout);
  if (reply.is_ok() && reply->status == 307) {
    // "http://member:port/admin/...": the same credentials, at that member.
    auto location = reply->headers.find("location");
    const std::string target = location == reply->headers.end() ? std::string() : location->second;
    const auto scheme_end = target.find("://");
    const auto path_start = scheme_end == std::string::npos ? scheme_end : target.find('/', scheme_end + 3);
    auto moved = client::Url::parse(path_start == std::string::npos ? std::string() : target.substr(0, path_start));
    if (!moved.is_ok()) return Status::unavailable("cluster " + cluster + " redirected to '" + target + "'");
    moved->bearer_token = url->bearer_token;
    moved->tls = url->tls;
    moved->tls.enabled = target.starts_with("https://");
    reply = client::http_request(*moved, method, target.substr(path_start), body, timeout);
  }
  if (!reply.is_ok()) return reply.status();
  if (reply->status / 100 == 2) return Status::ok();
  return Status(reply->status == 404 ? common::ErrorCode::kNotFound : common::ErrorCode::kUnavailable,
                "cluster " + cluster + " answered " + std::to_string(reply->status) + ": " +
                    reply->body.substr(0, 300));
}

}  // namespace magnetar::georep
