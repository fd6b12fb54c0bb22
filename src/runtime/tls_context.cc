#include "runtime/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/stat.h>

#include "common/logging.h"

namespace magnetar::runtime {

using common::Result;
using common::Status;

std::string tls_error_string() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

namespace {

Status file_error(const std::string& what, const std::string& path) {
  std::string reason = tls_error_string();
  return Status::invalid_argument(what + " '" + path + "': " + (reason.empty() ? "unreadable" : reason));
}

}  // namespace

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

Result<std::shared_ptr<const TlsContext>> TlsContext::load(const TlsFiles& files) {
  ERR_clear_error();
  if (files.certificate_file.empty() || files.key_file.empty()) {
    return Status::invalid_argument("TLS needs a certificate file and a key file");
  }
  if (files.require_client_cert && files.trust_certs_file.empty()) {
    return Status::invalid_argument("requiring client certificates needs a trust certificates file");
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status::internal("SSL_CTX_new: " + tls_error_string());
  std::shared_ptr<const TlsContext> owned(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.certificate_file.c_str()) != 1) {
    return file_error("TLS certificate file", files.certificate_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return file_error("TLS key file", files.key_file);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return file_error("TLS key file does not match the certificate", files.key_file);
  }
  if (!files.trust_certs_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.trust_certs_file.c_str(), nullptr) != 1) {
      return file_error("TLS trust certificates file", files.trust_certs_file);
    }
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.trust_certs_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
    int mode = SSL_VERIFY_PEER | (files.require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0);
    SSL_CTX_set_verify(ctx, mode, nullptr);
  }
  // Resumed sessions must be checked against the same client CAs.
  static const unsigned char kSessionContext[] = "magnetar";
  SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof(kSessionContext) - 1);
  return owned;
}

Result<std::shared_ptr<const TlsContext>> TlsContext::load_client(const std::string& trust_certs_file,
                                                                  bool allow_insecure,
                                                                  const std::string& certificate_file,
                                                                  const std::string& key_file) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return Status::internal("SSL_CTX_new: " + tls_error_string());
  std::shared_ptr<TlsContext> owned(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (!allow_insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int ok = trust_certs_file.empty() ? SSL_CTX_set_default_verify_paths(ctx)
                                            : SSL_CTX_load_verify_locations(ctx, trust_certs_file.c_str(), nullptr);
    if (ok != 1) return file_error("TLS trust certificates file", trust_certs_file);
    owned->verifies_peer_ = true;
  }
  if (!certificate_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, certificate_file.c_str()) != 1) {
      return file_error("TLS client certificate file", certificate_file);
    }
    const std::string& key = key_file.empty() ? certificate_file : key_file;
    if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return file_error("TLS client key file", key);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) return file_error("TLS client key does not match the certificate", key);
  }
  return std::shared_ptr<const TlsContext>(std::move(owned));
}

Result<std::shared_ptr<TlsContextSource>> TlsContextSource::create(TlsFiles files) {
  std::shared_ptr<TlsContextSource> source(new TlsContextSource(std::move(files)));
  auto stamps = source->stamps();
  auto ctx = TlsContext::load(source->files_);
  if (!ctx.is_ok()) return ctx.status();
  source->current_ = std::move(*ctx);
  source->loaded_stamps_ = std::move(stamps);
  source->generation_ = 1;
  return source;
}

std::shared_ptr<const TlsContext> TlsContextSource::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

uint64_t TlsContextSource::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

std::vector<TlsContextSource::FileStamp> TlsContextSource::stamps() const {
  std::vector<FileStamp> out;
  for (const std::string* path : {&files_.certificate_file, &files_.key_file, &files_.trust_certs_file}) {
    FileStamp s;
    struct stat st {};
    if (!path->empty() && ::stat(path->c_str(), &st) == 0) {
      s.inode = st.st_ino;
      s.size = st.st_size;
      s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    }
    out.push_back(s);
  }
  return out;
}

Status TlsContextSource::reload_if_changed(bool force) {
  auto now = stamps();
  {
    std::lock_guard lock(mu_);
    if (!force && now == loaded_stamps_) return Status::ok();
    // Remember this attempt either way: a broken file is reported once,
    // not on every check, and retried when it changes again.
    loaded_stamps_ = now;
  }
  auto ctx = TlsContext::load(files_);
  if (!ctx.is_ok()) {
    MLOG_WARN("TLS certificates not reloaded, the previous ones stay in use: {}", ctx.status().message());
    return ctx.status();
  }
  std::lock_guard lock(mu_);
  current_ = std::move(*ctx);
  ++generation_;
  MLOG_INFO("TLS certificates reloaded from {} (generation {})", files_.certificate_file, generation_);
  return Status::ok();
}

}  // namespace magnetar::runtime
