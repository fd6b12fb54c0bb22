// Internal to the links (link.h): what both ends of a handshake share. A HandshakeStream owns one connection
// while its handshake runs: the stream, a deadline timer, reads of exact sizes (so it never consumes a byte the
// next owner of the stream should see), and writes that outlive it.
#pragma once

#include <sys/socket.h>
#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace magnetar::cluster::link_detail {

// A socket address parsed or resolved from "host:port".
struct Endpoint {
  sockaddr_storage addr{};
};

// Splits "host:port" or "[v6]:port". InvalidArgument when malformed or the port is out of 1..65535.
common::Status split_host_port(std::string_view address, std::string* host, int* port);
// A numeric IPv4 or IPv6 host (brackets removed) as an endpoint; nullopt when `host` is not numeric.
std::optional<Endpoint> numeric_endpoint(const std::string& host, int port);
// The address a name resolved to that links use: its first IPv4 address, else its first IPv6 one, with `port`;
// nullopt when it has neither.
std::optional<Endpoint> resolved_endpoint(const addrinfo* resolved, int port);
// Runs `fn` on `loop` once the current turn is over (never inline): for
// completions that must not run inside the call that caused them.
void after_this_turn(uv_loop_t* loop, std::function<void()> fn);
// "ip:port" or "[ip]:port" of a socket address, for logs.
std::string endpoint_text(const sockaddr* addr);
// The peer's address of a connected stream, for logs; "unknown peer" when the OS does not say.
std::string peer_text(const uv_tcp_t* stream);
// A channel's name in logs and messages: "raft", "rpc", or its number.
std::string channel_name(uint8_t channel);
// kNonceBytes fresh random bytes; empty when the random number generator fails.
std::string random_nonce();

class HandshakeStream {
 public:
  // Opens the deadline timer; the owner must close() this before destroying the loop.
  explicit HandshakeStream(uv_loop_t* loop);
  virtual ~HandshakeStream() = default;
  HandshakeStream(const HandshakeStream&) = delete;
  HandshakeStream& operator=(const HandshakeStream&) = delete;

  uv_loop_t* loop() const { return loop_; }
  // The stream while this owns it and it is open; null before open_stream(), once closed or handed over.
  uv_tcp_t* stream() const { return stream_; }
  bool closing() const { return closing_; }

  // Allocates (raft_malloc) and initializes the stream. A libuv error code on failure, with nothing left open.
  int open_stream();
  // on_deadline runs once `ms` from now, unless close() or hand_over() comes first. Restarts a running deadline.
  void start_deadline(unsigned ms);
  // Reads exactly `n` (> 0) bytes, then on_chunk gets them; on_chunk may ask for the next chunk, otherwise
  // reading stops. REQUIRES: stream() open.
  void read_exactly(size_t n);
  // Queues `bytes` for writing; `then_close`: close() once they are written (or failed). A libuv error code
  // when the write cannot be queued. The write outlives this object if the stream is handed over.
  int send(std::string bytes, bool then_close);
  // Gives the stream away as link.h promises it (reading stopped, data null, TCP_NODELAY and keepalive on) and
  // closes the timer.
  // REQUIRES: stream() open.
  uv_tcp_t* hand_over();
  // Closes the stream (unless handed over) and the timer; on_released runs once both are closed. Idempotent.
  void close();

 protected:
  // A request of the subclass (a connect, a name lookup) that must complete before on_released may run.
  void hold() { holds_++; }
  void release();

  virtual void on_chunk(std::string chunk) = 0;
  // The stream failed or the peer closed it (UV_EOF), mid-chunk. `got` bytes of the chunk had arrived.
  virtual void on_stream_error(int err, size_t got) = 0;
  virtual void on_deadline() = 0;
  // Every handle and held request is closed: the owner may now destroy this.
  virtual void on_released() = 0;

 private:
  static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);
  static void on_timer(uv_timer_t* timer);
  static void on_timer_closed(uv_handle_t* handle);
  static void on_stream_closed(uv_handle_t* handle);
  static void on_written(uv_write_t* req, int status);

  uv_loop_t* loop_;
  uv_timer_t timer_{};
  uv_tcp_t* stream_ = nullptr;
  bool timer_closing_ = false;
  bool reading_ = false;
  bool closing_ = false;
  std::string chunk_;  // the chunk being read
  size_t want_ = 0;    // its size; 0 when no read is asked for
  size_t got_ = 0;
  int holds_ = 0;      // open handles and held requests
};

}  // namespace magnetar::cluster::link_detail
