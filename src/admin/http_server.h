// HttpServer: HTTP/1.1 on the runtime's reactors, parsed by http-parser.
//
// Keep-alive and pipelining: requests on one connection are answered in
// order, one at a time; the next is parsed once the previous is answered.
// Malformed requests get 400 (or 413/414/431 for oversize parts) and the
// connection is closed; the server keeps serving everyone else.
#pragma once

#include <memory>
#include <string>

#include "admin/http_request_parser.h"
#include "admin/router.h"
#include "common/result.h"
#include "runtime/runtime.h"
#include "runtime/tcp_listener.h"

namespace magnetar::admin {

class HttpServer {
 public:
  // `router` must outlive the server.
  static common::Result<std::unique_ptr<HttpServer>> listen(runtime::Runtime& runtime,
                                                            const std::string& host, uint16_t port,
                                                            const Router& router,
                                                            HttpLimits limits = {});
  // Plaintext and/or TLS (HTTPS) listeners, as `ports` asks.
  static common::Result<std::unique_ptr<HttpServer>> listen(runtime::Runtime& runtime,
                                                            const std::string& host,
                                                            const runtime::ListenerPorts& ports,
                                                            const Router& router, HttpLimits limits = {});
  // The bound ports; 0 for a listener that is off.
  uint16_t port() const { return listener_ ? listener_->port() : 0; }
  uint16_t tls_port() const { return tls_listener_ ? tls_listener_->port() : 0; }
  // Off-reactor: stops accepting and drains connections. Idempotent.
  void shutdown() {
    if (listener_) listener_->shutdown();
    if (tls_listener_) tls_listener_->shutdown();
  }

 private:
  std::unique_ptr<runtime::TcpListener> listener_;      // null when off
  std::unique_ptr<runtime::TcpListener> tls_listener_;  // null when off
};

}  // namespace magnetar::admin
