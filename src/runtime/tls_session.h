// TlsSession: one TLS connection (the server side, or the client side of
// a connection this node makes), OpenSSL over two memory BIOs. Ciphertext
// from the socket goes in with feed(); plaintext comes out of decrypt() as
// Slices; plaintext to send goes in with encrypt() and ciphertext for the
// socket comes out of take_ciphertext().
// No socket I/O happens here, so Connection keeps its own read and writev
// paths. Used only by Connection, on its reactor.
#pragma once

#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/status.h"
#include "runtime/tls_context.h"

struct ssl_st;
struct bio_st;

namespace magnetar::runtime {

class TlsSession {
 public:
  // A server-side session on `ctx`; check ok() before use.
  explicit TlsSession(const TlsContext& ctx);
  // A client-side session on `ctx` (TlsContext::load_client) to the server
  // named `server_name` (host name or IP address: sent as SNI and, when
  // the context verifies, checked against the server's certificate). The
  // first decrypt() starts the handshake.
  TlsSession(const TlsContext& ctx, const std::string& server_name);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  bool ok() const { return ssl_ != nullptr; }
  bool handshake_done() const { return handshake_done_; }
  // The peer sent close_notify: no more plaintext will come.
  bool peer_closed() const { return peer_closed_; }

  // Ciphertext read from the peer.
  void feed(const uint8_t* data, size_t size);
  // Advances the handshake and appends every whole record's plaintext to
  // `out`, in Slices of buffers of `buffer_size` bytes. An error (bad
  // handshake, untrusted client certificate, garbage) ends the session;
  // take_ciphertext() may still hold an alert for the peer.
  common::Status decrypt(common::SliceChain& out, size_t buffer_size);
  // Encrypts `plain` (small slices share records). REQUIRES: handshake_done().
  common::Status encrypt(const std::vector<common::Slice>& plain);
  // Queues close_notify for the peer. Idempotent; nothing after an error.
  void shutdown();
  // Ciphertext waiting for the socket, in one Slice (empty when none).
  common::Slice take_ciphertext();

  // The subject CN of the verified client certificate; "" when none (or
  // before the handshake finished).
  const std::string& peer_common_name() const { return peer_cn_; }

 private:
  std::string verified_peer_common_name() const;
  common::Status failure(const char* what, int ret);
  common::Status write_record(const uint8_t* data, size_t size);

  ssl_st* ssl_ = nullptr;
  bio_st* in_ = nullptr;   // owned by ssl_
  bio_st* out_ = nullptr;  // owned by ssl_
  common::Buffer* plain_buf_ = nullptr;  // we hold one reference
  size_t plain_used_ = 0;
  bool handshake_done_ = false;
  std::string peer_cn_;  // read once, when the handshake finishes
  bool peer_closed_ = false;
  bool failed_ = false;
  bool client_ = false;
};

}  // namespace magnetar::runtime
