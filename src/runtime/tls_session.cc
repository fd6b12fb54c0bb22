#include "runtime/tls_session.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cstring>

#include "common/result.h"

namespace magnetar::runtime {

using common::Slice;
using common::Status;

namespace {
constexpr size_t kRecordBytes = 16 << 10;  // TLS's largest record payload
}

TlsSession::TlsSession(const TlsContext& ctx) {
  ssl_ = SSL_new(ctx.native());
  if (ssl_ == nullptr) return;
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  if (in_ == nullptr || out_ == nullptr) {
    BIO_free(in_);
    BIO_free(out_);
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  // An empty memory BIO means "wait for more", not end of file.
  BIO_set_mem_eof_return(in_, -1);
  SSL_set_bio(ssl_, in_, out_);
  SSL_set_accept_state(ssl_);
}

TlsSession::TlsSession(const TlsContext& ctx, const std::string& server_name) : TlsSession(ctx) {
  if (ssl_ == nullptr) return;
  client_ = true;
  SSL_set_connect_state(ssl_);
  in6_addr ip6{};
  in_addr ip4{};
  const bool ip = inet_pton(AF_INET, server_name.c_str(), &ip4) == 1 ||
                  inet_pton(AF_INET6, server_name.c_str(), &ip6) == 1;
  if (!ip) SSL_set_tlsext_host_name(ssl_, server_name.c_str());
  if (ctx.verifies_peer()) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, server_name.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, server_name.c_str(), 0);
    }
  }
}

TlsSession::~TlsSession() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // frees both BIOs
  if (plain_buf_ != nullptr) plain_buf_->unref();
}

void TlsSession::feed(const uint8_t* data, size_t size) {
  if (!failed_) BIO_write(in_, data, static_cast<int>(size));
}

Status TlsSession::failure(const char* what, int ret) {
  int err = SSL_get_error(ssl_, ret);
  std::string reason = tls_error_string();
  failed_ = true;
  if (reason.empty()) reason = err == SSL_ERROR_SYSCALL ? "unexpected end of stream" : "error " + std::to_string(err);
  if (err == SSL_ERROR_SSL && SSL_get_verify_result(ssl_) != X509_V_OK) {
    reason += std::string(client_ ? " (server certificate: " : " (client certificate: ") +
              X509_verify_cert_error_string(SSL_get_verify_result(ssl_)) + ")";
  }
  return Status::invalid_argument(std::string(what) + ": " + reason);
}

Status TlsSession::decrypt(common::SliceChain& out, size_t buffer_size) {
  if (failed_) return Status::failed_precondition("the TLS session already failed");
  ERR_clear_error();
  if (!handshake_done_) {
    int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Status::ok();
      return failure("TLS handshake failed", r);
    }
    handshake_done_ = true;
    peer_cn_ = verified_peer_common_name();  // it cannot change afterwards
  }
  constexpr size_t kMinFree = 4096;
  for (;;) {
    if (plain_buf_ == nullptr || plain_buf_->capacity() - plain_used_ < kMinFree) {
      if (plain_buf_ != nullptr) plain_buf_->unref();
      plain_buf_ = common::Buffer::allocate(std::max(buffer_size, kMinFree));
      plain_used_ = 0;
    }
    size_t room = plain_buf_->capacity() - plain_used_;
    int n = SSL_read(ssl_, plain_buf_->data() + plain_used_, static_cast<int>(std::min(room, size_t{1} << 30)));
    if (n > 0) {
      out.append(Slice(plain_buf_, plain_used_, static_cast<size_t>(n)));
      plain_used_ += static_cast<size_t>(n);
      continue;
    }
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Status::ok();
    if (err == SSL_ERROR_ZERO_RETURN) {
      peer_closed_ = true;
      return Status::ok();
    }
    return failure("TLS read failed", n);
  }
}

Status TlsSession::write_record(const uint8_t* data, size_t size) {
  while (size > 0) {
    int n = SSL_write(ssl_, data, static_cast<int>(std::min(size, size_t{1} << 30)));
    if (n <= 0) return failure("TLS write failed", n);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

Status TlsSession::encrypt(const std::vector<Slice>& plain) {
  if (failed_) return Status::failed_precondition("the TLS session already failed");
  ERR_clear_error();
  // Small writes are gathered so that each record carries up to 16 KiB.
  uint8_t staging[kRecordBytes];
  size_t staged = 0;
  for (const Slice& s : plain) {
    if (staged + s.size() > kRecordBytes && staged > 0) {
      MAGNETAR_RETURN_IF_ERROR(write_record(staging, staged));
      staged = 0;
    }
    if (s.size() >= kRecordBytes) {
      MAGNETAR_RETURN_IF_ERROR(write_record(s.data(), s.size()));
      continue;
    }
    std::memcpy(staging + staged, s.data(), s.size());
    staged += s.size();
  }
  if (staged > 0) MAGNETAR_RETURN_IF_ERROR(write_record(staging, staged));
  return Status::ok();
}

void TlsSession::shutdown() {
  if (failed_ || !handshake_done_) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
}

Slice TlsSession::take_ciphertext() {
  size_t n = BIO_ctrl_pending(out_);
  if (n == 0) return Slice();
  Slice s = Slice::allocate(n);
  int got = BIO_read(out_, s.mutable_data(), static_cast<int>(n));
  s.truncate(got > 0 ? static_cast<size_t>(got) : 0);
  return s;
}

std::string TlsSession::verified_peer_common_name() const {
  if (SSL_get_verify_result(ssl_) != X509_V_OK) return "";
  X509* cert = SSL_get1_peer_certificate(ssl_);
  if (cert == nullptr) return "";
  char cn[256] = {0};
  int len = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  X509_free(cert);
  return len > 0 ? std::string(cn, static_cast<size_t>(len)) : "";
}

}  // namespace magnetar::runtime
