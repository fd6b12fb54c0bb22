// Transport: one client TCP connection, in plaintext or TLS, for the
// blocking clients of the command line (Pulsar, HTTP).
//
// With TLS the socket is non-blocking underneath and OpenSSL runs over it;
// write_all() and read_some() keep the blocking client's shape. One thread
// may write while another reads (the batching producer does): calls into
// OpenSSL are serialized by a mutex that is never held while waiting.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/result.h"

struct ssl_st;
struct ssl_ctx_st;

namespace magnetar::client {

struct TlsOptions {
  bool enabled = false;
  // PEM CA certificates the server's certificate must chain to; empty:
  // the system's default CAs.
  std::string trust_certs_file;
  // Accept any server certificate (self-signed development setups). The
  // connection is encrypted but the server is not authenticated.
  bool allow_insecure = false;
  // A client certificate and key for servers that require one (mutual TLS).
  std::string cert_file;
  std::string key_file;
};

class Transport {
 public:
  // Connects to host:port within `timeout`; with tls.enabled completes the
  // handshake and checks the server's certificate against `host`.
  // Unavailable when unreachable, Timeout, or InvalidArgument naming the
  // TLS failure (untrusted certificate, wrong host name, bad files).
  static common::Result<std::unique_ptr<Transport>> connect(const std::string& host, uint16_t port,
                                                            const TlsOptions& tls,
                                                            std::chrono::milliseconds timeout);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }

  // Sends every byte, waiting while the socket is full.
  common::Status write_all(const uint8_t* data, size_t size);
  // Reads what is available now without waiting: 0 bytes when nothing is;
  // Unavailable once the server closed the connection (then at_eof() tells
  // an orderly end of stream from a broken one).
  common::Result<size_t> read_some(uint8_t* buf, size_t size);
  bool at_eof() const { return eof_; }
  // Decrypted or undecrypted bytes held in memory that read_some() would
  // return without the socket becoming readable: poll() the fd only when false.
  bool has_buffered() const;
  // Waits until read_some() may return bytes (or report the end), or until
  // `deadline`: false on timeout.
  bool wait_readable(std::chrono::steady_clock::time_point deadline) const;

 private:
  Transport(int fd) : fd_(fd) {}
  common::Status handshake(const std::string& host, const TlsOptions& tls, std::chrono::steady_clock::time_point deadline);

  int fd_;
  ssl_ctx_st* ctx_ = nullptr;
  ssl_st* ssl_ = nullptr;
  bool eof_ = false;
  mutable std::mutex mu_;  // serializes calls into ssl_
};

}  // namespace magnetar::client
