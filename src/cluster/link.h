// Links: authenticated connections between members on the cluster port.
//
// Every member listens on one TCP port for all node-to-node traffic. A connection opens one Channel (Raft, RPC)
// after a handshake (link_format.h) in which each side proves it holds the cluster secret (cluster_secret.h)
// without sending it; a process without the secret is refused, and sees nothing but its own refusal. The
// handshake authenticates the peer when the connection opens; the bytes that follow are neither encrypted nor
// MAC'd, so the port belongs on a network that on-path attackers cannot reach.
//
// Streams. A link's stream is a uv_tcp_t allocated with raft_malloc, so libraft's uv backend can own it: the
// owner uv_close()s it and raft_free()s it in the close callback (close_stream does both). It is handed over
// with reading stopped, handle->data free for the owner, not one byte of the channel consumed, TCP_NODELAY set
// and TCP keepalive on (so a peer that vanished is noticed even by a side that only reads).
//
// Threads: everything here runs on one libuv loop, the caller's, and is called on that loop's thread only. None
// of it is thread-safe.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/cluster_secret.h"
#include "cluster/consensus.h"
#include "common/result.h"
#include "common/status.h"

struct raft_uv_transport;

namespace magnetar::cluster {

enum class Channel : uint8_t { kRaft = 1, kRpc = 2 };
struct Peer { ServerId id = 0; std::string address; };  // what the connecting side declared, covered by the MAC

// Closes a link's stream and frees it once closed. REQUIRES: the caller owns `stream`, and it is not closing.
void close_stream(uv_tcp_t* stream);

// Accepted, authenticated stream: allocated with raft_malloc, initialized on the listener's loop, reading stopped,
// no bytes of the peer's stream consumed past the handshake. The callee owns it (uv_close, then raft_free in the
// close callback).
using AcceptHandler = std::function<void(const Peer& peer, uv_tcp_t* stream)>;

// The accepting side of the cluster port. A stranger can make it hold at most max_handshakes connections, each
// for at most the handshake timeout; a refused peer is logged (rate-limited) with its remote address and why.
class LinkListener {
 public:
  static constexpr unsigned kDefaultHandshakeTimeoutMs = 5000;
  static constexpr size_t kDefaultMaxHandshakes = 64;

  // `self` is the id this member gives in its handshakes; `self_address` names it in logs.
  LinkListener(uv_loop_t* loop, const ClusterSecret& secret, ServerId self, std::string self_address);
  ~LinkListener();  // REQUIRES: close() completed (or listen() never called)
  LinkListener(const LinkListener&) = delete;
  LinkListener& operator=(const LinkListener&) = delete;

  // Binds host:port (port 0 = a free port; IPv4 and IPv6 literals and "localhost"), starts accepting.
  // InvalidArgument for a host that does not resolve, IoError when the OS refuses the bind or the listen.
  // REQUIRES: called at most once, before close().
  common::Status listen(const std::string& host, int port);
  int port() const;  // the bound port; 0 before listen() succeeded
  // Connections opening `channel` go to `handler`; a channel with no handler is refused. An empty handler
  // removes the channel's. Applies to handshakes that complete from now on.
  void set_handler(Channel channel, AcceptHandler handler);
  // A connection that has not completed its handshake after this long is closed. Applies to connections
  // accepted from now on.
  void set_handshake_timeout(unsigned ms);
  // Connections accepted while this many are in their handshake are closed at once.
  void set_max_handshakes(size_t n);
  // Stops accepting, drops connections still in their handshake; `closed` runs once every handle is closed, never
  // inline. Streams already handed to a handler are theirs and stay open. REQUIRES: called once.
  void close(std::function<void()> closed);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

using ConnectCallback = std::function<void(common::Result<uv_tcp_t*>)>;  // stream as for AcceptHandler

// The connecting side of the cluster port.
class LinkConnector {
 public:
  static constexpr unsigned kDefaultConnectTimeoutMs = 5000;

  // `self` and `self_address` are what this member declares in every hello: its id, and the address the others
  // reach it at (the peer's Peer, and the address libraft on the peer learns for this member).
  LinkConnector(uv_loop_t* loop, const ClusterSecret& secret, ServerId self, std::string self_address);
  ~LinkConnector();  // REQUIRES: close() completed
  LinkConnector(const LinkConnector&) = delete;
  LinkConnector& operator=(const LinkConnector&) = delete;

  // Connects to `address` ("host:port", "[v6]:port"; a host name resolves to its first IPv4 address, else its
  // first address), authenticates both ways, opens `channel`. `done` runs exactly once, never inline: the stream,
  // or Unavailable (refused, unreachable, timed out after `timeout_ms`, the peer does not serve `channel`),
  // PermissionDenied (the peer does not know our secret or we not theirs), InvalidArgument (`address` or our own
  // address is malformed), Unavailable "shutting down" after close(). REQUIRES: `closed` of close() has not run.
  void connect(std::string address, Channel channel, ConnectCallback done,
               unsigned timeout_ms = kDefaultConnectTimeoutMs);
  // Fails pending connects (their done runs with Unavailable "shutting down"), then `closed` once all handles closed.
  // `closed` never runs inline. REQUIRES: called once.
  void close(std::function<void()> closed);

  uv_loop_t* loop() const;
  ServerId self() const;
  const std::string& self_address() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A raft_uv_transport over a LinkListener (channel kRaft) and a LinkConnector, to pass to raft_uv_init in place
// of libraft's unauthenticated raft_uv_tcp; it keeps the contract of raft/uv.h. Raft addresses are link addresses
// ("host:port", "[v6]:port"), the ones the members' connectors declare as self_address.
//
// raft_uv drives it: init (from raft_init: the server's id and address must be the connector's self() and
// self_address(), else RAFT_INVALID), listen (from raft_start: installs the kRaft handler on the listener),
// connect (RAFT_NOCONNECTION on any failure; raft_uv retries after its connect retry delay), close (from
// raft_close: removes the kRaft handler, fails pending connects with RAFT_CANCELED, then calls back, never
// inline). Streams follow libraft's rules: raft reads accepted streams only, writes connected streams only, and
// closes and raft_free()s both.
//
// Order of shutdown: raft_close (RaftConsensus::close) and its callback, raft_uv_close, then the listener's and
// the connector's close(). The listener and the connector must outlive this object and be open while raft runs.
class RaftLinkTransport {
 public:
  RaftLinkTransport(LinkListener& listener, LinkConnector& connector);
  ~RaftLinkTransport();  // REQUIRES: raft closed it (its close callback ran), or raft never initialized it
  RaftLinkTransport(const RaftLinkTransport&) = delete;
  RaftLinkTransport& operator=(const RaftLinkTransport&) = delete;

  struct raft_uv_transport* get();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace magnetar::cluster
