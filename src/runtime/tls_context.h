// TlsContext: the server side of TLS for one listener, an OpenSSL SSL_CTX
// built from PEM files (or the client side, load_client); TlsContextSource: the current TlsContext of a set of
// files, rebuilt when the files change.
//
// A connection takes the source's current context when it is accepted and
// keeps it (SSL_new holds a reference), so a reload affects only new
// connections. A reload that fails keeps the previous context.
//
// Threading: TlsContext is immutable once built and may be shared by every
// reactor. TlsContextSource is safe to call from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"

struct ssl_ctx_st;

namespace magnetar::runtime {

struct TlsFiles {
  std::string certificate_file;  // PEM: the server's certificate, then its chain
  std::string key_file;          // PEM: the certificate's private key
  // PEM: CAs that sign client certificates. Empty: clients are not asked
  // for one. Set: a client certificate, when offered, must chain to them.
  std::string trust_certs_file;
  // Refuse a handshake without a trusted client certificate (mutual TLS).
  // REQUIRES: trust_certs_file set.
  bool require_client_cert = false;
};

class TlsContext {
 public:
  // Reads and checks the files now. InvalidArgument names the file and
  // OpenSSL's reason when one is missing, unreadable or does not match.
  static common::Result<std::shared_ptr<const TlsContext>> load(const TlsFiles& files);
  // The client side, for connections this node makes: the server's
  // certificate must chain to `trust_certs_file` (empty: the system's CAs),
  // unless `allow_insecure` (encrypted, the server not authenticated).
  // With `certificate_file` (and `key_file`, else the key is in the same
  // file), that certificate goes to servers that ask for one.
  static common::Result<std::shared_ptr<const TlsContext>> load_client(const std::string& trust_certs_file,
                                                                       bool allow_insecure,
                                                                       const std::string& certificate_file = {},
                                                                       const std::string& key_file = {});
  bool verifies_peer() const { return verifies_peer_; }
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  ssl_ctx_st* native() const { return ctx_; }

 private:
  explicit TlsContext(ssl_ctx_st* ctx) : ctx_(ctx) {}
  ssl_ctx_st* ctx_;
  bool verifies_peer_ = false;
};

class TlsContextSource {
 public:
  // Loads the files once; an error here is a start-up error.
  static common::Result<std::shared_ptr<TlsContextSource>> create(TlsFiles files);

  std::shared_ptr<const TlsContext> current() const;
  const TlsFiles& files() const { return files_; }
  // How many contexts were built so far (1 after create()).
  uint64_t generation() const;

  // Rebuilds the context when a file's modification time, size or inode
  // changed since the last attempt (every file when `force`). Returns ok
  // when nothing changed or the new context is in use; otherwise the
  // previous context stays and the error says why (it is also logged).
  common::Status reload_if_changed(bool force = false);

 private:
  struct FileStamp {
    ino_t inode = 0;
    off_t size = -1;
    int64_t mtime_ns = -1;
    bool operator==(const FileStamp&) const = default;
  };
  explicit TlsContextSource(TlsFiles files) : files_(std::move(files)) {}
  std::vector<FileStamp> stamps() const;

  const TlsFiles files_;
  mutable std::mutex mu_;
  std::shared_ptr<const TlsContext> current_;  // guarded by mu_
  std::vector<FileStamp> loaded_stamps_;       // guarded by mu_
  uint64_t generation_ = 0;                    // guarded by mu_
};

// OpenSSL's pending errors on this thread as one line ("" when none);
// clears them.
std::string tls_error_string();

}  // namespace magnetar::runtime
