// LinkConnector: the connecting side of the handshake in link_format.h. Each connect is one Outgoing, from the
// name lookup to the verdict; its deadline covers all of it. A failed connect reports once every handle it
// opened is closed, so a caller that reconnects at once never holds two sockets for one peer.
#include <openssl/crypto.h>

#include <cassert>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

#include "cluster/link.h"
#include "cluster/link_format.h"
#include "cluster/link_stream.h"

namespace magnetar::cluster {

using common::Result;
using common::Status;
using link_detail::HandshakeStream;
namespace lf = link_format;

struct LinkConnector::Impl {
  class Outgoing;

  Impl(uv_loop_t* l, const ClusterSecret& s, ServerId id, std::string address)
      : loop(l), secret(s), self(id), self_address(std::move(address)) {}

  void released(Outgoing* outgoing);
  void maybe_closed();

  uv_loop_t* loop;
  ClusterSecret secret;
  ServerId self;
  std::string self_address;
  std::unordered_map<Outgoing*, std::unique_ptr<Outgoing>> outgoing;  // until every handle of each is closed
  bool closing = false;
  bool nudging = false;  // close() holds a handle of its own so that `closed` never runs inline
  std::function<void()> closed;
};

class LinkConnector::Impl::Outgoing final : public HandshakeStream {
 public:
  Outgoing(Impl& owner, std::string address, Channel channel, ConnectCallback done)
      : HandshakeStream(owner.loop), owner_(owner), address_(std::move(address)), channel_(channel),
        done_(std::move(done)) {}

  void start(unsigned timeout_ms) {
    timeout_ms_ = timeout_ms;
    if (owner_.closing) return fail(Status::unavailable(what() + ": shutting down"));
    if (!lf::is_valid_address(owner_.self_address)) {
      return fail(Status::invalid_argument(what() + ": our own address '" + owner_.self_address +
                                           "' is not 1.." + std::to_string(lf::kMaxAddressBytes) +
                                           " printable characters"));
    }
    std::string host;
    int port = 0;
    Status st = link_detail::split_host_port(address_, &host, &port);
    if (!st.is_ok()) return fail(Status::invalid_argument(what() + ": " + st.message()));
    start_deadline(timeout_ms_);
    if (std::optional<link_detail::Endpoint> endpoint = link_detail::numeric_endpoint(host, port)) {
      return connect_to(*endpoint);
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    resolve_.data = this;
    port_ = port;
    int rv = uv_getaddrinfo(owner_.loop, &resolve_, &Outgoing::on_resolved, host.c_str(), nullptr, &hints);
    if (rv != 0) return fail(Status::unavailable(what() + ": cannot resolve '" + host + "': " + uv_strerror(rv)));
    resolving_ = true;
    hold();
  }

  // Fails the connect (if it has not ended) and closes everything it opened; done runs once all is closed.
  void fail(Status status) {
    if (!result_) result_ = std::move(status);
    if (resolving_) uv_cancel(reinterpret_cast<uv_req_t*>(&resolve_));
    close();
  }

  // For on_released: the outcome and who to tell. Empty when the stream was handed over.
  ConnectCallback take_done() { return std::move(done_); }
  Status take_result() { return result_ ? std::move(*result_) : Status::internal("connect ended without outcome"); }

 private:
  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    auto* self = static_cast<Outgoing*>(req->data);
    self->resolving_ = false;
    std::optional<link_detail::Endpoint> endpoint;
    if (status == 0) endpoint = link_detail::resolved_endpoint(res, self->port_);
    uv_freeaddrinfo(res);
    if (!self->closing()) {
      if (endpoint) {
        self->connect_to(*endpoint);
      } else {
        std::string why = status != 0 ? uv_strerror(status) : "no IP address";
        self->fail(Status::unavailable(self->what() + ": cannot resolve the host: " + why));
      }
    }
    self->release();
  }

  void connect_to(const link_detail::Endpoint& endpoint) {
    int rv = open_stream();
    if (rv == 0) {
      connect_req_.data = this;
      rv = uv_tcp_connect(&connect_req_, stream(), reinterpret_cast<const sockaddr*>(&endpoint.addr),
                          &Outgoing::on_connected);
    }
    if (rv != 0) fail(Status::unavailable(what() + ": " + uv_strerror(rv)));
  }

  // Runs before the stream's close callback, also when the stream is closed while connecting (UV_ECANCELED).
  static void on_connected(uv_connect_t* req, int status) {
    auto* self = static_cast<Outgoing*>(req->data);
    if (self->closing()) return;
    if (status != 0) return self->fail(Status::unavailable(self->what() + ": " + uv_strerror(status)));
    std::string nonce = link_detail::random_nonce();
    if (nonce.empty()) return self->fail(Status::internal(self->what() + ": the random number generator failed"));
    self->hello_ = lf::encode_hello(static_cast<uint8_t>(self->channel_), nonce, self->owner_.self,
                                    self->owner_.self_address);
    int rv = self->send(self->hello_, false);
    if (rv != 0) return self->fail(Status::unavailable(self->what() + ": " + uv_strerror(rv)));
    self->stage_ = Stage::kWelcome;
    self->read_exactly(lf::kWelcomeBytes);
  }

  void on_chunk(std::string chunk) override {
    if (stage_ == Stage::kWelcome) return on_welcome(std::move(chunk));
    if (stage_ == Stage::kVerdict) return on_verdict(chunk);
  }

  void on_welcome(std::string welcome) {
    std::string_view w = welcome;
    if (w.substr(0, 4) != lf::kMagic) {
      return fail(Status::permission_denied(what() + ": the peer does not speak the cluster protocol"));
    }
    std::string_view nonce = w.substr(4, lf::kNonceBytes);
    uint64_t peer_id = lf::get_u64(w.substr(4 + lf::kNonceBytes, 8));
    std::string_view mac = w.substr(4 + lf::kNonceBytes + 8, lf::kMacBytes);
    std::string expected = owner_.secret.mac(lf::server_mac_input(hello_, nonce, peer_id));
    bool authentic = CRYPTO_memcmp(mac.data(), expected.data(), lf::kMacBytes) == 0;
    // The proof goes out either way: a member with another secret then logs the mismatch on its side too.
    std::string proof = owner_.secret.mac(lf::client_mac_input(hello_, welcome));
    if (!authentic) {
      result_ = Status::permission_denied(what() + ": server " + std::to_string(peer_id) +
                                          " does not hold our cluster secret (or we not its)");
      if (send(std::move(proof), true) != 0) close();  // else closes once the proof is written
      return;
    }
    int rv = send(std::move(proof), false);
    if (rv != 0) return fail(Status::unavailable(what() + ": " + uv_strerror(rv)));
    stage_ = Stage::kVerdict;
    read_exactly(lf::kVerdictBytes);
  }

  void on_verdict(const std::string& verdict) {
    auto v = static_cast<lf::Verdict>(static_cast<uint8_t>(verdict[0]));
    if (v == lf::Verdict::kNoHandler) {
      return fail(Status::unavailable(what() + ": the peer does not serve " +
                                      link_detail::channel_name(static_cast<uint8_t>(channel_))));
    }
    if (v != lf::Verdict::kAccepted) {
      unsigned code = static_cast<uint8_t>(verdict[0]);
      return fail(Status::unavailable(what() + ": refused (verdict " + std::to_string(code) + ")"));
    }
    stage_ = Stage::kDone;
    ConnectCallback done = std::move(done_);
    done_ = nullptr;
    done(hand_over());
  }

  void on_stream_error(int err, size_t /*got*/) override {
    if (err == UV_EOF && stage_ == Stage::kWelcome) {
      return fail(Status::unavailable(what() + ": the peer closed the connection during the handshake"));
    }
    if (err == UV_EOF && stage_ == Stage::kVerdict) {
      // The peer read our proof and hung up: it found our MAC wrong.
      return fail(Status::permission_denied(what() + ": the peer refused our proof of the cluster secret"));
    }
    fail(Status::unavailable(what() + ": " + uv_strerror(err)));
  }

  void on_deadline() override {
    fail(Status::unavailable(what() + ": timed out after " + std::to_string(timeout_ms_) + " ms"));
  }

  void on_released() override { owner_.released(this); }

  std::string what() const {
    return "connect to " + address_ + " (" + link_detail::channel_name(static_cast<uint8_t>(channel_)) + ")";
  }

  enum class Stage { kConnecting, kWelcome, kVerdict, kDone };

  Impl& owner_;
  std::string address_;
  Channel channel_;
  ConnectCallback done_;
  unsigned timeout_ms_ = 0;
  int port_ = 0;
  Stage stage_ = Stage::kConnecting;
  std::optional<Status> result_;  // the failure done will get; the first one set wins
  bool resolving_ = false;
  uv_getaddrinfo_t resolve_{};
  uv_connect_t connect_req_{};
  std::string hello_;  // as sent: both MACs cover it
};

void LinkConnector::Impl::released(Outgoing* conn) {
  auto it = outgoing.find(conn);
  assert(it != outgoing.end());
  std::unique_ptr<Outgoing> owned = std::move(it->second);
  outgoing.erase(it);
  ConnectCallback done = owned->take_done();
  if (done) done(owned->take_result());
  owned.reset();
  maybe_closed();
}

void LinkConnector::Impl::maybe_closed() {
  if (!closing || nudging || !outgoing.empty() || !closed) return;
  auto done = std::move(closed);
  closed = nullptr;
  done();
}

LinkConnector::LinkConnector(uv_loop_t* loop, const ClusterSecret& secret, ServerId self, std::string self_address)
    : impl_(std::make_unique<Impl>(loop, secret, self, std::move(self_address))) {}

LinkConnector::~LinkConnector() { assert(impl_->outgoing.empty() && !impl_->nudging); }

void LinkConnector::connect(std::string address, Channel channel, ConnectCallback done, unsigned timeout_ms) {
  auto owned = std::make_unique<Impl::Outgoing>(*impl_, std::move(address), channel, std::move(done));
  Impl::Outgoing* conn = owned.get();
  impl_->outgoing.emplace(conn, std::move(owned));
  conn->start(timeout_ms);
}

void LinkConnector::close(std::function<void()> closed) {
  assert(!impl_->closing);
  impl_->closing = true;
  impl_->closed = std::move(closed);
  for (auto& [conn, owned] : impl_->outgoing) conn->fail(Status::unavailable("cluster link: shutting down"));
  impl_->nudging = true;
  link_detail::after_this_turn(impl_->loop, [impl = impl_.get()]() {
    impl->nudging = false;
    impl->maybe_closed();
  });
}

uv_loop_t* LinkConnector::loop() const { return impl_->loop; }

ServerId LinkConnector::self() const { return impl_->self; }

const std::string& LinkConnector::self_address() const { return impl_->self_address; }

}  // namespace magnetar::cluster
