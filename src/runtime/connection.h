// Connection: one TCP stream on one reactor.
//
// Reads arrive as Slices of a per-connection read buffer and are appended to
// an input chain that the protocol handler decodes in place. Writes are
// queued and flushed once per loop iteration with one writev, so a handler
// that answers many requests in one read pays for one syscall.
//
// Back-pressure: when the bytes queued for the peer pass the high watermark,
// the connection stops reading from the peer and tells the handler it is not
// writable; below the low watermark it reads again and tells the handler it
// is writable. A peer that does not read therefore cannot make the server
// buffer without bound.
//
// TLS (options.tls set): the connection runs the server side of TLS over
// memory BIOs. Ciphertext read from the socket is decrypted into the same
// input chain, and written plaintext is encrypted at flush time into the
// same writev path, so handlers see plaintext either way. A failed
// handshake or undecodable ciphertext closes the connection with a log
// line. Without TLS the connection pays for one null pointer.
//
// Threading: every method runs on the connection's reactor. The Connection
// owns its handler and deletes itself (and the handler) after on_close.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/status.h"
#include "runtime/reactor.h"
#include "runtime/tls_context.h"

namespace magnetar::runtime {

class Connection;
class Timer;
class TlsSession;

class ConnectionHandler {
 public:
  virtual ~ConnectionHandler() = default;
  // The connection is set up and reading; nothing has arrived yet.
  virtual void on_open(Connection& conn) {}
  // Bytes arrived; `input` holds everything received and not yet consumed.
  // Consume what can be decoded and leave the rest for the next call.
  virtual void on_data(Connection& conn, common::SliceChain& input) = 0;
  // The queued output crossed a watermark. A handler that answers requests
  // should stop decoding while !conn.writable(); on_data is called again with
  // the remaining input once the connection is writable.
  virtual void on_writable_changed(Connection& conn, bool writable) {}
  // The connection is closed; `reason` is ok for a clean close. The handler is
  // destroyed right after this returns.
  virtual void on_close(Connection& conn, const common::Status& reason) {}
};

struct ConnectionOptions {
  size_t high_watermark = 4 << 20;   // bytes queued before reading pauses
  size_t low_watermark = 1 << 20;    // bytes queued at which reading resumes
  size_t read_buffer_size = 64 << 10;
  size_t max_input_bytes = 64 << 20; // undecoded input past this closes the connection
  // Set: speak TLS as the server, with the source's context current at accept.
  std::shared_ptr<TlsContextSource> tls;
  // Set (and `tls` not): speak TLS as the client (a connection this node
  // made) to the server `tls_server_name` names; the handshake starts at
  // adopt, and what is written meanwhile waits for it.
  std::shared_ptr<const TlsContext> tls_client;
  std::string tls_server_name;
  // A TLS peer that has not finished its handshake by then is disconnected.
  std::chrono::milliseconds tls_handshake_timeout{10000};
};

class Connection {
 public:
  // Takes ownership of the connected socket `fd` and starts reading.
  // REQUIRES: on `reactor`'s thread. Returns null (fd closed) on failure.
  static Connection* adopt(Reactor& reactor, int fd, std::unique_ptr<ConnectionHandler> handler,
                           ConnectionOptions options = {});

  // Queues bytes for the peer. Ignored once the connection is closing.
  void write(common::Slice bytes);
  // True while the queued output is below the high watermark.
  bool writable() const { return writable_; }
  size_t queued_bytes() const { return queued_bytes_; }

  // Stops/starts delivering input (the kernel buffers, then TCP pushes back).
  void pause_reading();
  void resume_reading();

  // Sends what is queued, then closes. Idempotent.
  void close(common::Status reason = common::Status::ok());
  // Closes now, dropping queued output.
  void abort(common::Status reason);
  bool closing() const { return state_ != State::kOpen; }

  const std::string& peer() const { return peer_; }
  // Whether this connection speaks TLS.
  bool tls() const { return tls_ != nullptr; }
  // The subject CN of the client's verified certificate; "" without one.
  std::string tls_peer_common_name() const;
  Reactor& reactor() { return reactor_; }

  // Runs once, on this connection's reactor, when it is gone (after on_close).
  void set_on_destroy(std::function<void(Connection*)> fn) { on_destroy_ = std::move(fn); }

 private:
  enum class State { kOpen, kDraining, kClosed };
  struct WriteReq;

  Connection(Reactor& reactor, std::unique_ptr<ConnectionHandler> handler, ConnectionOptions options);
  ~Connection();
  void flush();
  // Runs flush() once at the end of this loop iteration.
  void schedule_flush();
  void update_reading();
  void finish_close();
  void after_write(WriteReq* req, int status);
  static void on_alloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  void deliver_input();
  void on_tls_read(size_t nread);
  // Move ciphertext the TLS session produced (handshake, alerts, records)
  // to pending_; queue_ciphertext also schedules a flush.
  void push_ciphertext();
  void queue_ciphertext();
  void encrypt_pending();

  Reactor& reactor_;
  std::unique_ptr<ConnectionHandler> handler_;
  const ConnectionOptions options_;
  uv_tcp_t tcp_{};
  std::string peer_;
  common::SliceChain input_;
  common::Buffer* read_buf_ = nullptr;  // current read buffer; we hold one reference
  size_t read_used_ = 0;                // bytes of read_buf_ already filled
  std::vector<common::Slice> pending_;  // queued, not yet handed to libuv
  std::unique_ptr<TlsSession> tls_;     // null without TLS
  std::unique_ptr<Timer> handshake_timer_;  // with TLS, until the handshake is done
  std::vector<common::Slice> tls_plain_;  // with TLS: plaintext waiting to be encrypted
  size_t tls_plain_bytes_ = 0;            // their size
  size_t queued_bytes_ = 0;             // pending_ plus in-flight writes
  size_t writes_in_flight_ = 0;
  bool flush_scheduled_ = false;
  bool writable_ = true;
  bool paused_by_user_ = false;
  bool reading_ = false;
  State state_ = State::kOpen;
  common::Status close_reason_;
  std::function<void(Connection*)> on_destroy_;
};

}  // namespace magnetar::runtime
