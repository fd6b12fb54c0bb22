// LinkListener: the accepting side of the handshake in link_format.h. What a stranger can make it spend is
// bounded: max_handshakes connections at a time, each for the handshake timeout, reads of at most the hello's
// size; anything that is not a handshake of this version closes the connection.
#include <openssl/crypto.h>

#include <cassert>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "cluster/link.h"
#include "cluster/link_format.h"
#include "cluster/link_stream.h"
#include "common/logging.h"

namespace magnetar::cluster {

using common::Status;
using link_detail::HandshakeStream;
namespace lf = link_format;

namespace {

// A refusal is logged once per remote IP and reason in kRefusalRepeatMs (a member with the wrong secret retries
// every second), and at most kRefusalLogsPerWindow lines go out per window (a flood from many addresses); what is
// not logged is counted, and the count goes out with the next line.
constexpr uint64_t kRefusalRepeatMs = 10 * 60'000;
constexpr unsigned kRefusalLogsPerWindow = 10;
constexpr uint64_t kRefusalLogWindowMs = 60'000;
constexpr size_t kRefusalsRemembered = 1024;
// Why a connection was refused, as logged; also the key of the repeat filter.
constexpr std::string_view kBadHandshake = "bad handshake";
constexpr std::string_view kWrongSecret = "wrong cluster secret";
constexpr std::string_view kNotServed = "channel not served";
constexpr std::string_view kTooManyHandshakes = "too many handshakes in progress";
constexpr std::string_view kInternalError = "internal error";
constexpr int kListenBacklog = 128;

}  // namespace

struct LinkListener::Impl {
  class Incoming;

  Impl(uv_loop_t* l, const ClusterSecret& s, ServerId id, std::string address)
      : loop(l), secret(s), self(id), self_address(std::move(address)) {}

  void on_connection(int status);
  // `remote` is the peer's "ip:port"; `line` says who and why.
  void log_refusal(const std::string& remote, std::string_view reason, const std::string& line);
  void released(Incoming* incoming);
  void maybe_closed();

  static void on_server_closed(uv_handle_t* handle) {
    auto* impl = static_cast<Impl*>(handle->data);
    delete reinterpret_cast<uv_tcp_t*>(handle);
    if (impl == nullptr) return;  // a listen() that failed
    impl->server = nullptr;
    impl->maybe_closed();
  }

  uv_loop_t* loop;
  ClusterSecret secret;
  ServerId self;
  std::string self_address;
  uv_tcp_t* server = nullptr;  // open from listen() until its close callback
  int bound_port = 0;
  std::unordered_map<uint8_t, AcceptHandler> handlers;
  unsigned handshake_timeout_ms = kDefaultHandshakeTimeoutMs;
  size_t max_handshakes = kDefaultMaxHandshakes;
  size_t handshaking = 0;  // connections in their handshake, a subset of `incoming`
  std::unordered_map<Incoming*, std::unique_ptr<Incoming>> incoming;  // until every handle of each is closed
  bool closing = false;
  bool nudging = false;  // close() holds a handle of its own so that `closed` never runs inline
  std::function<void()> closed;
  std::unordered_map<std::string, uint64_t> refusals_logged;  // "ip|reason" -> when last logged (uv_now)
  uint64_t log_window_start = 0;
  unsigned logged_in_window = 0;
  unsigned suppressed = 0;
};

// One accepted connection until its handshake ends: handed to a handler, refused, or dropped.
class LinkListener::Impl::Incoming final : public HandshakeStream {
 public:
  explicit Incoming(Impl& owner) : HandshakeStream(owner.loop), owner_(owner) {}

  // Accepts the pending connection on the owner's server. False when nothing could be accepted.
  bool accept() {
    if (open_stream() != 0) return false;
    if (uv_accept(reinterpret_cast<uv_stream_t*>(owner_.server), reinterpret_cast<uv_stream_t*>(stream())) != 0) {
      return false;
    }
    remote_ = link_detail::peer_text(stream());
    return true;
  }

  void start() {
    counted_ = true;
    owner_.handshaking++;
    timeout_ms_ = owner_.handshake_timeout_ms;
    start_deadline(timeout_ms_);
    read_exactly(lf::kHelloHeadBytes);
  }

  // Drops the connection, without a word to the peer.
  void drop() {
    end_handshake();
    close();
  }

  const std::string& remote() const { return remote_; }

 private:
  void on_chunk(std::string chunk) override {
    switch (stage_) {
      case Stage::kHelloHead:
        return on_hello_head(std::move(chunk));
      case Stage::kAddress:
        return on_address(std::move(chunk));
      case Stage::kProof:
        return on_proof(chunk);
      case Stage::kDone:
        return;
    }
  }

  void on_hello_head(std::string head_bytes) {
    lf::HelloHead head;
    std::string_view why;
    if (!lf::decode_hello_head(head_bytes, &head, &why)) return refuse(kBadHandshake, std::string(why));
    peer_.id = head.id;
    channel_ = head.channel;
    hello_ = std::move(head_bytes);
    stage_ = Stage::kAddress;
    read_exactly(head.address_bytes);
  }

  void on_address(std::string address) {
    if (!lf::is_valid_address(address)) return refuse(kBadHandshake, "address is not printable ASCII");
    peer_.address = address;
    hello_ += address;
    std::string nonce = link_detail::random_nonce();
    if (nonce.empty()) return refuse(kInternalError, "the random number generator failed");
    std::string mac = owner_.secret.mac(lf::server_mac_input(hello_, nonce, owner_.self));
    welcome_ = lf::encode_welcome(nonce, owner_.self, mac);
    int rv = send(welcome_, false);
    if (rv != 0) return refuse(kBadHandshake, uv_strerror(rv));
    stage_ = Stage::kProof;
    read_exactly(lf::kProofBytes);
  }

  void on_proof(const std::string& proof) {
    std::string expected = owner_.secret.mac(lf::client_mac_input(hello_, welcome_));
    if (CRYPTO_memcmp(proof.data(), expected.data(), lf::kMacBytes) != 0) return refuse(kWrongSecret);
    stage_ = Stage::kDone;
    end_handshake();
    auto handler = owner_.handlers.find(channel_);
    if (handler == owner_.handlers.end()) {
      owner_.log_refusal(remote_, kNotServed,
                         who() + ": " + link_detail::channel_name(channel_) + " is not served on this port");
      std::string verdict(1, static_cast<char>(lf::Verdict::kNoHandler));
      // Closes once the verdict is written; the deadline still bounds a write that never ends.
      if (send(std::move(verdict), true) != 0) close();
      return;
    }
    std::string verdict(1, static_cast<char>(lf::Verdict::kAccepted));
    int rv = send(std::move(verdict), false);
    if (rv != 0) return refuse(kBadHandshake, uv_strerror(rv));
    AcceptHandler accept = handler->second;  // the handler may replace itself
    Peer peer = peer_;
    accept(peer, hand_over());
  }

  void on_stream_error(int err, size_t got) override {
    if (stage_ == Stage::kDone) {
      close();
      return;
    }
    if (stage_ == Stage::kHelloHead && got == 0 && err == UV_EOF) {
      // A port probe or a health check: not worth a warning.
      MLOG_DEBUG("cluster port: {} closed the connection before its handshake", remote_);
      drop();
      return;
    }
    refuse(kBadHandshake, std::string(err == UV_EOF ? "closed by the peer" : uv_strerror(err)) + " during its " +
                              stage_name());
  }

  void on_deadline() override {
    if (stage_ == Stage::kDone) {
      close();
      return;
    }
    refuse(kBadHandshake, "no " + std::string(stage_name()) + " within " + std::to_string(timeout_ms_) + " ms");
  }

  void on_released() override { owner_.released(this); }

  void refuse(std::string_view reason, const std::string& detail = {}) {
    std::string line = who() + ": " + std::string(reason);
    if (!detail.empty()) line += " (" + detail + ")";
    owner_.log_refusal(remote_, reason, line);
    drop();
  }

  void end_handshake() {
    if (!counted_) return;
    counted_ = false;
    owner_.handshaking--;
  }

  // The peer, as far as it has told.
  std::string who() const {
    if (peer_.address.empty()) return remote_;
    return remote_ + " (server " + std::to_string(peer_.id) + " at " + peer_.address + ")";
  }

  const char* stage_name() const {
    switch (stage_) {
      case Stage::kHelloHead:
      case Stage::kAddress:
        return "hello";
      case Stage::kProof:
        return "proof";
      case Stage::kDone:
        break;
    }
    return "verdict";
  }

  enum class Stage { kHelloHead, kAddress, kProof, kDone };

  Impl& owner_;
  Stage stage_ = Stage::kHelloHead;
  bool counted_ = false;  // counts in owner_.handshaking
  unsigned timeout_ms_ = 0;
  std::string remote_ = "unknown peer";
  std::string hello_;    // as received: the server and the client MACs cover it
  std::string welcome_;  // as sent: the client MAC covers it
  uint8_t channel_ = 0;
  Peer peer_;
};

void LinkListener::Impl::on_connection(int status) {
  if (status < 0) {
    log_refusal("unknown peer", kInternalError, std::string("a connection: accept failed (") + uv_strerror(status) +
                                                    ")");
    return;
  }
  auto owned = std::make_unique<Incoming>(*this);
  Incoming* conn = owned.get();
  incoming.emplace(conn, std::move(owned));
  if (closing || !conn->accept()) {
    conn->drop();
    return;
  }
  if (handshaking >= max_handshakes) {
    log_refusal(conn->remote(), kTooManyHandshakes,
                conn->remote() + ": " + std::string(kTooManyHandshakes) + " (" + std::to_string(handshaking) + ")");
    conn->drop();
    return;
  }
  conn->start();
}

void LinkListener::Impl::log_refusal(const std::string& remote, std::string_view reason, const std::string& line) {
  uint64_t now = uv_now(loop);
  std::string key = remote.substr(0, remote.rfind(':')) + "|" + std::string(reason);
  auto last = refusals_logged.find(key);
  bool repeated = last != refusals_logged.end() && now - last->second < kRefusalRepeatMs;
  if (now - log_window_start >= kRefusalLogWindowMs) {
    log_window_start = now;
    logged_in_window = 0;
  }
  if (repeated || logged_in_window >= kRefusalLogsPerWindow) {
    suppressed++;
    return;
  }
  if (refusals_logged.size() >= kRefusalsRemembered) {
    std::erase_if(refusals_logged, [now](const auto& entry) { return now - entry.second >= kRefusalRepeatMs; });
    if (refusals_logged.size() >= kRefusalsRemembered) refusals_logged.clear();
  }
  refusals_logged[key] = now;
  logged_in_window++;
  if (suppressed > 0) {
    MLOG_WARN("cluster port: refused {} ({} similar refusals not logged since the last one)", line, suppressed);
    suppressed = 0;
    return;
  }
  MLOG_WARN("cluster port: refused {}", line);
}

void LinkListener::Impl::released(Incoming* conn) {
  incoming.erase(conn);
  maybe_closed();
}

void LinkListener::Impl::maybe_closed() {
  if (!closing || server != nullptr || nudging || !incoming.empty() || !closed) return;
  auto done = std::move(closed);
  closed = nullptr;
  done();
}

LinkListener::LinkListener(uv_loop_t* loop, const ClusterSecret& secret, ServerId self, std::string self_address)
    : impl_(std::make_unique<Impl>(loop, secret, self, std::move(self_address))) {}

LinkListener::~LinkListener() {
  assert(impl_->server == nullptr && impl_->incoming.empty() && !impl_->nudging);
}

Status LinkListener::listen(const std::string& host, int port) {
  assert(impl_->server == nullptr && !impl_->closing);
  if (port < 0 || port > 65535) {
    return Status::invalid_argument("cluster port " + std::to_string(port) + " is not 0..65535");
  }
  std::optional<link_detail::Endpoint> endpoint = link_detail::numeric_endpoint(host, port);
  if (!endpoint) {
    // A name (localhost): resolved here, once, before the member serves anything. IPv4 first, as connectors do.
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    uv_getaddrinfo_t req{};
    int rv = uv_getaddrinfo(impl_->loop, &req, nullptr, host.c_str(), nullptr, &hints);
    if (rv != 0) {
      return Status::invalid_argument("cluster port: cannot resolve host '" + host + "': " + uv_strerror(rv));
    }
    endpoint = link_detail::resolved_endpoint(req.addrinfo, port);
    uv_freeaddrinfo(req.addrinfo);
    if (!endpoint) return Status::invalid_argument("cluster port: host '" + host + "' has no IP address");
  }
  const auto* addr = reinterpret_cast<const sockaddr*>(&endpoint->addr);
  std::string where = link_detail::endpoint_text(addr);
  auto* server = new uv_tcp_t;
  uv_tcp_init(impl_->loop, server);
  server->data = nullptr;
  int rv = uv_tcp_bind(server, addr, 0);
  if (rv == 0) {
    rv = uv_listen(reinterpret_cast<uv_stream_t*>(server), kListenBacklog, [](uv_stream_t* s, int status) {
      static_cast<Impl*>(s->data)->on_connection(status);
    });
  }
  if (rv != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(server), &Impl::on_server_closed);
    return Status::io_error("cluster port: cannot listen on " + where + ": " + uv_strerror(rv));
  }
  server->data = impl_.get();
  impl_->server = server;
  sockaddr_storage bound{};
  int len = sizeof bound;
  if (uv_tcp_getsockname(server, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
    const auto* b = reinterpret_cast<const sockaddr*>(&bound);
    impl_->bound_port = ntohs(b->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(b)->sin6_port
                                                       : reinterpret_cast<const sockaddr_in*>(b)->sin_port);
    where = link_detail::endpoint_text(b);
  }
  MLOG_INFO("cluster port: server {} ({}) listening on {}", impl_->self, impl_->self_address, where);
  return Status::ok();
}

int LinkListener::port() const { return impl_->bound_port; }

void LinkListener::set_handler(Channel channel, AcceptHandler handler) {
  auto key = static_cast<uint8_t>(channel);
  if (handler) {
    impl_->handlers[key] = std::move(handler);
  } else {
    impl_->handlers.erase(key);
  }
}

void LinkListener::set_handshake_timeout(unsigned ms) { impl_->handshake_timeout_ms = ms; }

void LinkListener::set_max_handshakes(size_t n) { impl_->max_handshakes = n; }

void LinkListener::close(std::function<void()> closed) {
  assert(!impl_->closing);
  impl_->closing = true;
  impl_->closed = std::move(closed);
  if (impl_->server != nullptr) uv_close(reinterpret_cast<uv_handle_t*>(impl_->server), &Impl::on_server_closed);
  for (auto& [conn, owned] : impl_->incoming) conn->drop();
  impl_->nudging = true;
  link_detail::after_this_turn(impl_->loop, [impl = impl_.get()]() {
    impl->nudging = false;
    impl->maybe_closed();
  });
}

}  // namespace magnetar::cluster
