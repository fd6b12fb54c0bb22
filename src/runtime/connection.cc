#include "runtime/connection.h"

#include <arpa/inet.h>
#include <unistd.h>

#include "common/logging.h"
#include "runtime/timer.h"
#include "runtime/tls_session.h"

namespace magnetar::runtime {

using common::Slice;
using common::Status;

struct Connection::WriteReq {
  uv_write_t req;
  Connection* conn;
  std::vector<Slice> slices;
  size_t bytes;
};

namespace {

std::string describe_peer(const uv_tcp_t* tcp) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "unknown";
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (addr.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    uv_ip4_name(a, host, sizeof(host));
    port = ntohs(a->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
  uv_ip6_name(a, host, sizeof(host));
  port = ntohs(a->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

}  // namespace

Connection::Connection(Reactor& reactor, std::unique_ptr<ConnectionHandler> handler,
                       ConnectionOptions options)
    : reactor_(reactor), handler_(std::move(handler)), options_(options) {}

Connection::~Connection() {
  if (read_buf_) read_buf_->unref();
}

Connection* Connection::adopt(Reactor& reactor, int fd, std::unique_ptr<ConnectionHandler> handler,
                              ConnectionOptions options) {
  reactor.assert_on_thread();
  auto* c = new Connection(reactor, std::move(handler), options);
  uv_tcp_init(reactor.loop(), &c->tcp_);
  c->tcp_.data = c;
  int rc = uv_tcp_open(&c->tcp_, fd);
  if (rc != 0) {
    MLOG_WARN("cannot adopt socket: {}", uv_strerror(rc));
    ::close(fd);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp_),
             [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
    return nullptr;
  }
  uv_tcp_nodelay(&c->tcp_, 1);
  c->peer_ = describe_peer(&c->tcp_);
  if (c->options_.tls || c->options_.tls_client) {
    c->tls_ = c->options_.tls ? std::make_unique<TlsSession>(*c->options_.tls->current())
                              : std::make_unique<TlsSession>(*c->options_.tls_client, c->options_.tls_server_name);
    if (!c->tls_->ok()) {
      MLOG_WARN("{}: cannot start a TLS session: {}", c->peer_, tls_error_string());
      c->abort(Status::internal("cannot start a TLS session"));
      return nullptr;
    }
    c->handshake_timer_ = std::make_unique<Timer>(reactor);
    c->handshake_timer_->once(c->options_.tls_handshake_timeout, [c]() {
      if (c->state_ != State::kOpen || c->tls_->handshake_done()) return;
      MLOG_INFO("{}: no TLS handshake within {} ms; closing the connection", c->peer_,
                c->options_.tls_handshake_timeout.count());
      c->abort(Status::timeout("TLS handshake timed out"));
    });
  }
  c->update_reading();
  if (c->options_.tls_client && !c->options_.tls) {
    // The client speaks first: the ClientHello goes out now.
    Status st = c->tls_->decrypt(c->input_, c->options_.read_buffer_size);
    c->queue_ciphertext();
    if (!st.is_ok()) {
      c->abort(std::move(st));
      return nullptr;
    }
  }
  c->handler_->on_open(*c);
  return c;
}

void Connection::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* c = static_cast<Connection*>(h->data);
  constexpr size_t kMinFree = 4096;
  if (c->read_buf_ == nullptr || c->read_buf_->capacity() - c->read_used_ < kMinFree) {
    if (c->read_buf_) c->read_buf_->unref();
    c->read_buf_ = common::Buffer::allocate(c->options_.read_buffer_size);
    c->read_used_ = 0;
  }
  buf->base = reinterpret_cast<char*>(c->read_buf_->data() + c->read_used_);
  buf->len = c->read_buf_->capacity() - c->read_used_;
}

void Connection::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
  auto* c = static_cast<Connection*>(s->data);
  if (nread == 0) return;  // EAGAIN
  if (nread < 0) {
    if (nread == UV_EOF) {
      c->close(Status::ok());
    } else {
      c->abort(Status::io_error(std::string("read from ") + c->peer_ + ": " + uv_strerror(static_cast<int>(nread))));
    }
    return;
  }
  if (c->state_ != State::kOpen) return;
  if (c->tls_) {
    c->on_tls_read(static_cast<size_t>(nread));
    return;
  }
  c->input_.append(Slice(c->read_buf_, c->read_used_, static_cast<size_t>(nread)));
  c->read_used_ += static_cast<size_t>(nread);
  c->deliver_input();
}

void Connection::deliver_input() {
  handler_->on_data(*this, input_);
  if (state_ == State::kOpen && input_.size() > options_.max_input_bytes) {
    abort(Status::resource_exhausted("peer " + peer_ + " sent more than " +
                                     std::to_string(options_.max_input_bytes) + " bytes that do not decode"));
  }
}

// The ciphertext is copied into the session, so the read buffer's region
// is reused by the next read (read_used_ stays where it is).
void Connection::on_tls_read(size_t nread) {
  tls_->feed(read_buf_->data() + read_used_, nread);
  const bool was_done = tls_->handshake_done();
  const size_t before = input_.size();
  Status st = tls_->decrypt(input_, options_.read_buffer_size);
  queue_ciphertext();  // handshake messages, session tickets, alerts
  if (!st.is_ok()) {
    MLOG_INFO("{}: {}; closing the connection", peer_, st.message());
    close(std::move(st));
    return;
  }
  if (!was_done && tls_->handshake_done()) {
    handshake_timer_.reset();
    if (!tls_plain_.empty()) schedule_flush();
  }
  if (input_.size() > before) deliver_input();
  if (state_ == State::kOpen && tls_->peer_closed()) close(Status::ok());
}

void Connection::push_ciphertext() {
  Slice s = tls_->take_ciphertext();
  if (s.empty()) return;
  queued_bytes_ += s.size();
  pending_.push_back(std::move(s));
}

void Connection::queue_ciphertext() {
  push_ciphertext();
  if (!pending_.empty()) schedule_flush();
}

void Connection::schedule_flush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  reactor_.defer([this]() { flush(); });
}

// Plaintext written before the handshake finished waits for it.
void Connection::encrypt_pending() {
  if (tls_plain_.empty() || !tls_->handshake_done()) return;
  Status st = tls_->encrypt(tls_plain_);
  tls_plain_.clear();
  queued_bytes_ -= tls_plain_bytes_;
  tls_plain_bytes_ = 0;
  push_ciphertext();
  if (!st.is_ok()) {
    MLOG_WARN("{}: {}; closing the connection", peer_, st.message());
    abort(std::move(st));
  }
}

std::string Connection::tls_peer_common_name() const { return tls_ ? tls_->peer_common_name() : std::string(); }

void Connection::write(Slice bytes) {
  if (state_ != State::kOpen || bytes.empty()) return;
  queued_bytes_ += bytes.size();
  if (tls_) tls_plain_bytes_ += bytes.size();
  (tls_ ? tls_plain_ : pending_).push_back(std::move(bytes));
  schedule_flush();
  if (writable_ && queued_bytes_ > options_.high_watermark) {
    writable_ = false;
    update_reading();
    handler_->on_writable_changed(*this, false);
  }
}

void Connection::flush() {
  flush_scheduled_ = false;
  if (state_ == State::kClosed) return;
  if (tls_) encrypt_pending();
  if (pending_.empty() || state_ == State::kClosed) return;
  auto* req = new WriteReq{};
  req->conn = this;
  req->slices.swap(pending_);
  std::vector<uv_buf_t> bufs;
  bufs.reserve(req->slices.size());
  req->bytes = 0;
  for (auto& s : req->slices) {
    bufs.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(s.data())),
                               static_cast<unsigned>(s.size())));
    req->bytes += s.size();
  }
  req->req.data = req;
  ++writes_in_flight_;
  int rc = uv_write(&req->req, reinterpret_cast<uv_stream_t*>(&tcp_), bufs.data(),
                    static_cast<unsigned>(bufs.size()), [](uv_write_t* w, int status) {
                      auto* r = static_cast<WriteReq*>(w->data);
                      r->conn->after_write(r, status);
                    });
  if (rc != 0) {
    --writes_in_flight_;
    queued_bytes_ -= req->bytes;
    delete req;
    abort(Status::io_error(std::string("write to ") + peer_ + ": " + uv_strerror(rc)));
  }
}

void Connection::after_write(WriteReq* req, int status) {
  --writes_in_flight_;
  queued_bytes_ -= req->bytes;
  delete req;
  if (status != 0 && status != UV_ECANCELED && state_ != State::kClosed) {
    abort(Status::io_error(std::string("write to ") + peer_ + ": " + uv_strerror(status)));
    return;
  }
  if (state_ == State::kDraining && writes_in_flight_ == 0 && pending_.empty()) {
    finish_close();
    return;
  }
  if (!writable_ && queued_bytes_ <= options_.low_watermark && state_ == State::kOpen) {
    writable_ = true;
    update_reading();
    handler_->on_writable_changed(*this, true);
    // Input that arrived before the pause and was left undecoded gets
    // another chance now, without waiting for more bytes from the peer.
    if (state_ == State::kOpen && writable_ && !input_.empty()) handler_->on_data(*this, input_);
  }
}

void Connection::update_reading() {
  bool want = state_ == State::kOpen && writable_ && !paused_by_user_;
  if (want == reading_) return;
  auto* stream = reinterpret_cast<uv_stream_t*>(&tcp_);
  if (want) {
    uv_read_start(stream, &Connection::on_alloc, &Connection::on_read);
  } else {
    uv_read_stop(stream);
  }
  reading_ = want;
}

void Connection::pause_reading() {
  paused_by_user_ = true;
  update_reading();
}

void Connection::resume_reading() {
  paused_by_user_ = false;
  update_reading();
}

void Connection::close(Status reason) {
  if (state_ != State::kOpen) return;
  state_ = State::kDraining;
  close_reason_ = std::move(reason);
  update_reading();
  if (tls_) {
    encrypt_pending();
    if (state_ == State::kClosed) return;
    tls_->shutdown();
    push_ciphertext();
  }
  if (!pending_.empty()) flush();
  if (state_ == State::kDraining && writes_in_flight_ == 0) finish_close();
}

void Connection::abort(Status reason) {
  if (state_ == State::kClosed) return;
  if (state_ == State::kOpen || close_reason_.is_ok()) close_reason_ = std::move(reason);
  pending_.clear();
  tls_plain_.clear();
  tls_plain_bytes_ = 0;
  finish_close();
}

void Connection::finish_close() {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  reading_ = false;
  uv_close(reinterpret_cast<uv_handle_t*>(&tcp_), [](uv_handle_t* h) {
    auto* c = static_cast<Connection*>(h->data);
    c->handler_->on_close(*c, c->close_reason_);
    if (c->on_destroy_) c->on_destroy_(c);
    // A flush deferred earlier in this iteration still holds `c`: it runs
    // first (deferred tasks run in order), sees kClosed and returns.
    if (c->flush_scheduled_) {
      c->reactor_.defer([c]() { delete c; });
    } else {
      delete c;
    }
  });
}

}  // namespace magnetar::runtime
