// TcpListener: accepts TCP connections and hands each to a reactor.
//
// The listening socket is watched by one acceptor reactor; each accepted
// socket is posted to the runtime's next reactor in round-robin order, where
// `on_accept` turns it into a Connection. The listener tracks its connections
// so that shutdown can drain them, and counts them per client address: past
// the runtime's max_connections_per_address, a new one is closed at once
// (a connection flood from one address cannot take every descriptor).
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
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
  // Connections closed at accept for their address being at its limit.
  uint64_t refused_count() const { return refused_.load(std::memory_order_relaxed); }

  // Off-reactor. Stops accepting, closes every connection gracefully (queued
  // output is sent) and waits up to `grace` for them to go, then aborts the
  // rest. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  TcpListener(Runtime& runtime, std::string name, HandlerFactory factory, ConnectionOptions options);
  void on_readable();
  // `address`: the client's IP, counted against the per-address limit
  // (empty: not counted).
  void adopt_on(Reactor& reactor, int fd, std::string address);
  // Takes a place for `address`; false when it has the most it may have.
  bool admit_address(const std::string& address);
  void release_address(const std::string& address);

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
  const uint32_t max_per_address_;
  std::mutex addresses_mu_;  // taken at accept and when a counted connection goes
  std::unordered_map<std::string, uint32_t> per_address_;
  std::atomic<uint64_t> refused_{0};
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
