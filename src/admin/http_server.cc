#include "admin/http_server.h"

#include "admin/http_session.h"

namespace magnetar::admin {

common::Result<std::unique_ptr<HttpServer>> HttpServer::listen(runtime::Runtime& runtime,
                                                               const std::string& host,
                                                               uint16_t port, const Router& router,
                                                               HttpLimits limits) {
  runtime::ConnectionOptions options;
  options.max_input_bytes = limits.max_body_bytes + limits.max_header_bytes + limits.max_url_bytes + 4096;
  auto listener = runtime::TcpListener::listen(
      runtime, "http", host, port,
      [&router, limits](runtime::Reactor& reactor) {
        return std::make_unique<HttpSession>(reactor, router, limits);
      },
      options);
  if (!listener) return listener.status();
  auto server = std::unique_ptr<HttpServer>(new HttpServer());
  server->listener_ = std::move(listener).value();
  return server;
}

}  // namespace magnetar::admin
