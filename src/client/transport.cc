#include "client/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/tls_context.h"

namespace magnetar::client {

using common::Result;
using common::Status;
using Clock = std::chrono::steady_clock;

namespace {

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Waits for `events` until the deadline; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // the next call reports the error
  }
}

bool is_ip_literal(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

}  // namespace

Result<std::unique_ptr<Transport>> Transport::connect(const std::string& host, uint16_t port, const TlsOptions& tls,
                                                     std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::string port_str = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), port_str.c_str(), &hints, &found); rc != 0) {
    return Status::unavailable("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  int fd = -1;
  Status last = Status::unavailable("no address for " + host);
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = Status::unavailable("cannot connect to " + where + ": " + std::strerror(errno));
    } else if (!wait_for(fd, POLLOUT, deadline)) {
      last = Status::timeout("timed out connecting to " + where);
    } else {
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err == 0) break;
      last = Status::unavailable("cannot connect to " + where + ": " + std::strerror(err));
    }
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd < 0) return last;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<Transport> t(new Transport(fd));
  if (!tls.enabled) {
    // Plaintext keeps a blocking socket: writes wait in the kernel.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return t;
  }
  MAGNETAR_RETURN_IF_ERROR(t->handshake(host, tls, deadline));
  return t;
}

Status Transport::handshake(const std::string& host, const TlsOptions& tls, Clock::time_point deadline) {
  ERR_clear_error();
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr) return Status::internal("SSL_CTX_new: " + runtime::tls_error_string());
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  if (!tls.allow_insecure) {
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    int ok = tls.trust_certs_file.empty() ? SSL_CTX_set_default_verify_paths(ctx_)
                                          : SSL_CTX_load_verify_locations(ctx_, tls.trust_certs_file.c_str(), nullptr);
    if (ok != 1) return Status::invalid_argument("cannot read trust certificates '" + tls.trust_certs_file + "': " + runtime::tls_error_string());
  }
  if (!tls.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx_, tls.cert_file.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx_, (tls.key_file.empty() ? tls.cert_file : tls.key_file).c_str(),
                                    SSL_FILETYPE_PEM) != 1) {
      return Status::invalid_argument("cannot use client certificate '" + tls.cert_file + "': " + runtime::tls_error_string());
    }
  }
  ssl_ = SSL_new(ctx_);
  if (ssl_ == nullptr) return Status::internal("SSL_new: " + runtime::tls_error_string());
  SSL_set_fd(ssl_, fd_);
  SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!is_ip_literal(host)) SSL_set_tlsext_host_name(ssl_, host.c_str());
  if (!tls.allow_insecure) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (is_ip_literal(host)) {
      X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    }
  }
  for (;;) {
    int r = SSL_connect(ssl_);
    if (r == 1) return Status::ok();
    int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      if (!wait_for(fd_, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline)) {
        return Status::timeout("timed out in the TLS handshake with " + host);
      }
      continue;
    }
    std::string reason = runtime::tls_error_string();
    long verify = SSL_get_verify_result(ssl_);
    if (verify != X509_V_OK) reason += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    if (reason.empty()) reason = "the server closed the connection";
    return Status::invalid_argument("TLS handshake with " + host + " failed: " + reason);
  }
}

Transport::~Transport() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) ::close(fd_);
}

Status Transport::write_all(const uint8_t* data, size_t size) {
  size_t off = 0;
  while (off < size) {
    if (ssl_ == nullptr) {
      ssize_t n = ::send(fd_, data + off, size - off, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::from_errno(errno, "send to the server");
      }
      off += static_cast<size_t>(n);
      continue;
    }
    int err;
    {
      std::lock_guard lock(mu_);
      ERR_clear_error();
      int n = SSL_write(ssl_, data + off, static_cast<int>(std::min(size - off, size_t{1} << 30)));
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      err = SSL_get_error(ssl_, n);
      if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
        return Status::unavailable("TLS write to the server failed: " + runtime::tls_error_string());
      }
    }
    pollfd p{fd_, static_cast<short>(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    if (::poll(&p, 1, 1000) < 0 && errno != EINTR) return Status::from_errno(errno, "poll");
  }
  return Status::ok();
}

Result<size_t> Transport::read_some(uint8_t* buf, size_t size) {
  if (ssl_ == nullptr) {
    ssize_t n = ::recv(fd_, buf, size, MSG_DONTWAIT);
    if (n == 0) {
      eof_ = true;
      return Status::unavailable("end of stream");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return size_t{0};
      return Status::from_errno(errno, "recv from the server");
    }
    return static_cast<size_t>(n);
  }
  std::lock_guard lock(mu_);
  size_t got = 0;
  while (got < size) {
    ERR_clear_error();
    int n = SSL_read(ssl_, buf + got, static_cast<int>(std::min(size - got, size_t{1} << 30)));
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) break;
    if (got > 0) break;  // report the data; the error comes with the next call
    if (err == SSL_ERROR_ZERO_RETURN) {
      eof_ = true;
      return Status::unavailable("end of stream");
    }
    std::string reason = runtime::tls_error_string();
    return Status::unavailable("TLS read from the server failed: " +
                               (reason.empty() ? std::string("the connection closed") : reason));
  }
  return got;
}

bool Transport::wait_readable(Clock::time_point deadline) const {
  return has_buffered() || wait_for(fd_, POLLIN, deadline);
}

bool Transport::has_buffered() const {
  if (ssl_ == nullptr) return false;
  std::lock_guard lock(mu_);
  return SSL_has_pending(ssl_) == 1;
}

}  // namespace magnetar::client
