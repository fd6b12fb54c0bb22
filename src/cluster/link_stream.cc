#include "cluster/link_stream.h"

#include <openssl/rand.h>

#include <cassert>
#include <charconv>
#include <cstring>
#include <memory>
#include <utility>

#include "cluster/libraft.h"
#include "cluster/link.h"
#include "cluster/link_format.h"

namespace magnetar::cluster {

void close_stream(uv_tcp_t* stream) {
  uv_close(reinterpret_cast<uv_handle_t*>(stream), [](uv_handle_t* handle) { raft_free(handle); });
}

namespace link_detail {

using common::Status;

namespace {

// Probes a silent link after this long, so a peer that vanished without a word (power loss, a partition) does
// not hold a stream that only ever reads.
constexpr unsigned kKeepAliveDelaySeconds = 60;

// A write that outlives the HandshakeStream that queued it, when the stream is handed over meanwhile.
struct LinkWrite {
  uv_write_t req{};
  std::string bytes;
  HandshakeStream* close_after = nullptr;  // outlives the write: it closes the stream only after the write ended
};

}  // namespace

Status split_host_port(std::string_view address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == address.size()) {
    return Status::invalid_argument("address '" + std::string(address) + "' is not host:port");
  }
  std::string_view h = address.substr(0, colon);
  std::string_view p = address.substr(colon + 1);
  if (h.front() == '[') {
    if (h.size() < 3 || h.back() != ']') {
      return Status::invalid_argument("address '" + std::string(address) + "' is not [ipv6]:port");
    }
    h = h.substr(1, h.size() - 2);
  } else if (h.find(':') != std::string_view::npos) {
    return Status::invalid_argument("address '" + std::string(address) + "': write an IPv6 host as [host]:port");
  }
  int value = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (ec != std::errc() || end != p.data() + p.size() || value < 1 || value > 65535) {
    return Status::invalid_argument("address '" + std::string(address) + "': port must be 1..65535");
  }
  *host = std::string(h);
  *port = value;
  return Status::ok();
}

void after_this_turn(uv_loop_t* loop, std::function<void()> fn) {
  // A handle closed at once: libuv calls its close callback on the next turn.
  auto* idle = new uv_idle_t;
  uv_idle_init(loop, idle);
  idle->data = new std::function<void()>(std::move(fn));
  uv_close(reinterpret_cast<uv_handle_t*>(idle), [](uv_handle_t* handle) {
    std::unique_ptr<std::function<void()>> run(static_cast<std::function<void()>*>(handle->data));
    delete reinterpret_cast<uv_idle_t*>(handle);
    (*run)();
  });
}

std::optional<Endpoint> resolved_endpoint(const addrinfo* resolved, int port) {
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = resolved; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family == AF_INET) {
      pick = ai;
      break;
    }
    if (pick == nullptr && ai->ai_family == AF_INET6) pick = ai;
  }
  if (pick == nullptr) return std::nullopt;
  Endpoint endpoint;
  std::memcpy(&endpoint.addr, pick->ai_addr, pick->ai_addrlen);
  auto net_port = htons(static_cast<uint16_t>(port));
  if (pick->ai_family == AF_INET) reinterpret_cast<sockaddr_in*>(&endpoint.addr)->sin_port = net_port;
  if (pick->ai_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&endpoint.addr)->sin6_port = net_port;
  return endpoint;
}

std::optional<Endpoint> numeric_endpoint(const std::string& host, int port) {
  Endpoint ep;
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  if (uv_ip4_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in*>(&ep.addr)) == 0) return ep;
  if (uv_ip6_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in6*>(&ep.addr)) == 0) return ep;
  return std::nullopt;
}

std::string endpoint_text(const sockaddr* addr) {
  char ip[INET6_ADDRSTRLEN] = {0};
  if (addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    uv_ip4_name(in, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    uv_ip6_name(in6, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "unknown address";
}

std::string peer_text(const uv_tcp_t* stream) {
  sockaddr_storage addr{};
  int len = sizeof addr;
  if (uv_tcp_getpeername(stream, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown peer";
  return endpoint_text(reinterpret_cast<const sockaddr*>(&addr));
}

std::string channel_name(uint8_t channel) {
  switch (static_cast<Channel>(channel)) {
    case Channel::kRaft:
      return "raft";
    case Channel::kRpc:
      return "rpc";
  }
  return "channel " + std::to_string(channel);
}

std::string random_nonce() {
  std::string nonce(link_format::kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) return {};
  return nonce;
}

HandshakeStream::HandshakeStream(uv_loop_t* loop) : loop_(loop) {
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
  holds_ = 1;
}

int HandshakeStream::open_stream() {
  assert(stream_ == nullptr && !closing_);
  auto* stream = static_cast<uv_tcp_t*>(raft_malloc(sizeof(uv_tcp_t)));
  if (stream == nullptr) return UV_ENOMEM;
  int rv = uv_tcp_init(loop_, stream);
  if (rv != 0) {
    raft_free(stream);
    return rv;
  }
  stream->data = this;
  stream_ = stream;
  holds_++;
  return 0;
}

void HandshakeStream::start_deadline(unsigned ms) {
  if (timer_closing_) return;
  uv_timer_start(&timer_, &HandshakeStream::on_timer, ms, 0);
}

void HandshakeStream::read_exactly(size_t n) {
  assert(stream_ != nullptr && n > 0);
  chunk_.assign(n, '\0');
  want_ = n;
  got_ = 0;
  if (reading_) return;
  int rv = uv_read_start(reinterpret_cast<uv_stream_t*>(stream_), &HandshakeStream::on_alloc,
                         &HandshakeStream::on_read);
  if (rv != 0) {
    want_ = 0;
    on_stream_error(rv, 0);
    return;
  }
  reading_ = true;
}

int HandshakeStream::send(std::string bytes, bool then_close) {
  assert(stream_ != nullptr);
  auto* write = new LinkWrite;
  write->bytes = std::move(bytes);
  write->close_after = then_close ? this : nullptr;
  write->req.data = write;
  uv_buf_t buf = uv_buf_init(write->bytes.data(), static_cast<unsigned>(write->bytes.size()));
  int rv = uv_write(&write->req, reinterpret_cast<uv_stream_t*>(stream_), &buf, 1, &HandshakeStream::on_written);
  if (rv != 0) delete write;
  return rv;
}

uv_tcp_t* HandshakeStream::hand_over() {
  assert(stream_ != nullptr && !closing_);
  uv_tcp_t* stream = stream_;
  if (reading_) uv_read_stop(reinterpret_cast<uv_stream_t*>(stream));
  reading_ = false;
  want_ = 0;
  stream->data = nullptr;
  // Consensus traffic is small messages that wait on each other: no Nagle delay.
  uv_tcp_nodelay(stream, 1);
  uv_tcp_keepalive(stream, 1, kKeepAliveDelaySeconds);
  stream_ = nullptr;
  holds_--;  // the stream is no longer ours to close; the timer still holds
  close();
  return stream;
}

void HandshakeStream::close() {
  if (closing_) return;
  closing_ = true;
  want_ = 0;
  reading_ = false;
  if (stream_ != nullptr) uv_close(reinterpret_cast<uv_handle_t*>(stream_), &HandshakeStream::on_stream_closed);
  timer_closing_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), &HandshakeStream::on_timer_closed);
}

void HandshakeStream::release() {
  assert(holds_ > 0);
  if (--holds_ == 0) on_released();
}

void HandshakeStream::on_alloc(uv_handle_t* handle, size_t /*suggested*/, uv_buf_t* buf) {
  auto* self = static_cast<HandshakeStream*>(handle->data);
  if (self->want_ == 0) {
    *buf = uv_buf_init(nullptr, 0);  // read_cb then sees UV_ENOBUFS
    return;
  }
  *buf = uv_buf_init(self->chunk_.data() + self->got_, static_cast<unsigned>(self->want_ - self->got_));
}

void HandshakeStream::on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* /*buf*/) {
  auto* self = static_cast<HandshakeStream*>(stream->data);
  if (nread == 0) return;  // nothing to read after all
  if (nread < 0) {
    if (self->reading_) uv_read_stop(stream);
    self->reading_ = false;
    size_t got = self->got_;
    self->want_ = 0;
    self->on_stream_error(static_cast<int>(nread), got);
    return;
  }
  self->got_ += static_cast<size_t>(nread);
  if (self->got_ < self->want_) return;
  self->want_ = 0;
  std::string chunk = std::move(self->chunk_);
  self->chunk_.clear();
  self->on_chunk(std::move(chunk));
  // Unless on_chunk asked for more (or gave the stream away, or closed it), stop before libuv reads on.
  if (self->stream_ != nullptr && !self->closing_ && self->want_ == 0 && self->reading_) {
    uv_read_stop(stream);
    self->reading_ = false;
  }
}

void HandshakeStream::on_timer(uv_timer_t* timer) {
  auto* self = static_cast<HandshakeStream*>(timer->data);
  self->on_deadline();
}

void HandshakeStream::on_timer_closed(uv_handle_t* handle) {
  static_cast<HandshakeStream*>(handle->data)->release();
}

void HandshakeStream::on_stream_closed(uv_handle_t* handle) {
  auto* self = static_cast<HandshakeStream*>(handle->data);
  raft_free(handle);
  self->stream_ = nullptr;
  self->release();
}

void HandshakeStream::on_written(uv_write_t* req, int /*status*/) {
  // A failed write surfaces as a failed read or the deadline; only the refusal needs its close here.
  auto* write = static_cast<LinkWrite*>(req->data);
  HandshakeStream* close_after = write->close_after;
  delete write;
  if (close_after != nullptr) close_after->close();
}

}  // namespace link_detail
}  // namespace magnetar::cluster
