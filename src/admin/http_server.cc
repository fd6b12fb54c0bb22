#include "admin/http_server.h"

#include "admin/http_session.h"

namespace magnetar::admin {

common::Result<std::unique_ptr<HttpServer>> HttpServer::listen(runtime::Runtime& runtime,
                                                               const std::string& host,
                                                               uint16_t port, const Router& router,
                                                               HttpLimits limits) {
  runtime::ListenerPorts ports;
  ports.port = port;
  return listen(runtime, host, ports, router, limits);
}

common::Result<std::unique_ptr<HttpServer>> HttpServer::listen(runtime::Runtime& runtime,
                                                               const std::string& host,
                                                               const runtime::ListenerPorts& ports,
                                                               const Router& router, HttpLimits limits) {
  runtime::ConnectionOptions options;
  options.max_input_bytes = limits.max_body_bytes + limits.max_header_bytes + limits.max_url_bytes + 4096;
  auto server = std::unique_ptr<HttpServer>(new HttpServer());
  MAGNETAR_RETURN_IF_ERROR(runtime::listen_plain_and_tls(
      runtime, "http", host, ports,
      [&router, limits](runtime::Reactor& reactor) { return std::make_unique<HttpSession>(reactor, router, limits); },
      options, &server->listener_, &server->tls_listener_));
  return server;
}

}  // namespace magnetar::admin
