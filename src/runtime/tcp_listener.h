// TcpListener: accepts TCP connections and hands each to a reactor.
//
// The listening socket is watched by one acceptor reactor; each accepted
// socket is posted to the runtime's next reactor in round-robin order, where
// `on_accept` turns it into a Connection. The listener tracks its connections
// so that shutdown can drain them.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "runtime/connection.h"
#include "runtime/runtime.h"

namespace magnetar::runtime {

class TcpListener {
 public:
  // Runs on the chosen reactor; returns the handler for the new connection.
  using HandlerFactory = std::function<std::unique_ptr<ConnectionHandler>(Reactor&)>;

  // Binds host:port (port 0 picks a free port) and starts accepting.
  // `host` is an IP literal or a name resolved once here. Call off-reactor
  // (start-up), since name resolution may block.
  static common::Result<std::unique_ptr<TcpListener>> listen(
      Runtime& runtime, std::string name, const std::string& host, uint16_t port,
      HandlerFactory factory, ConnectionOptions options = {});
  // REQUIRES: shutdown() ran, or the runtime is still running.
  ~TcpListener();

  uint16_t port() const { return port_; }
  const std::string& name() const { return name_; }
  // Live connections over all reactors (approximate while they change).
  size_t connection_count() const;

  // Off-reactor. Stops accepting, closes every connection gracefully (queued
  // output is sent) and waits up to `grace` for them to go, then aborts the
  // rest. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  TcpListener(Runtime& runtime, std::string name, HandlerFactory factory, ConnectionOptions options);
  void on_readable();
  void adopt_on(Reactor& reactor, int fd);

  Runtime& runtime_;
  const std::string name_;
  HandlerFactory factory_;
  const ConnectionOptions options_;
  Reactor& acceptor_;
  int fd_ = -1;
  uint16_t port_ = 0;
  uv_poll_t* poll_ = nullptr;  // on acceptor_; freed by its close callback
  // Per reactor (by index), touched only on that reactor.
  std::vector<std::vector<Connection*>> connections_;
  std::atomic<size_t> live_{0};
  std::atomic<bool> shut_down_{false};
};

// Where one protocol listens: a plaintext port, a TLS port, or both.
struct ListenerPorts {
  bool plain_enabled = true;
  uint16_t port = 0;  // plaintext; 0 picks a free port
  // Set: a TLS listener on tls_port (0 picks a free port) with this context.
  std::shared_ptr<TlsContextSource> tls;
  uint16_t tls_port = 0;
};

// Starts the listeners `ports` asks for: `name` in plaintext into *plain,
// "<name>-tls" into *tls (either left null when off). On failure neither
// is left running. Off-reactor, like TcpListener::listen.
common::Status listen_plain_and_tls(Runtime& runtime, const std::string& name, const std::string& host,
                                    const ListenerPorts& ports, const TcpListener::HandlerFactory& factory,
                                    ConnectionOptions options, std::unique_ptr<TcpListener>* plain,
                                    std::unique_ptr<TcpListener>* tls);

}  // namespace magnetar::runtime
