// JSON Web Tokens as Pulsar's token authentication uses them (RFC 7519):
// header.payload.signature, each base64url without padding, signed with
// HS256 (a shared secret key), RS256 (RSA, PKCS#1 v1.5 with SHA-256) or
// ES256 (ECDSA P-256 with SHA-256, r||s). The subject (`sub`) is the
// client's role; `exp` (seconds since the epoch) is checked when present.
//
// Keys are read as Pulsar takes them: `file:///path` or
// `data:;base64,<base64>`; a secret key is the file's raw bytes, a public or
// private key is DER (what `pulsar tokens create-key-pair` writes) or PEM.
//
// Threads: a TokenKey is immutable once made; use it from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::security {

enum class JwtAlgorithm { kHS256, kRS256, kES256 };
std::string_view algorithm_name(JwtAlgorithm a);
common::Result<JwtAlgorithm> parse_algorithm(std::string_view name);

// A signing or verifying key: a secret (HS256), or an RSA / EC key pair or
// public key.
class TokenKey {
 public:
  ~TokenKey();
  TokenKey(TokenKey&&) noexcept;
  TokenKey& operator=(TokenKey&&) noexcept;

  static TokenKey secret(std::string bytes);
  // DER or PEM; a private key can sign and verify, a public key only verify.
  static common::Result<TokenKey> public_key(std::string_view bytes);
  static common::Result<TokenKey> private_key(std::string_view bytes);
  // Reads a key named as Pulsar names it (file:///..., data:;base64,...;
  // a bare path is read as a file).
  static common::Result<std::string> read_key_bytes(std::string_view url);

  // A new random 256-bit HS256 secret.
  static TokenKey generate_secret();
  // A new key pair: RSA 2048 for RS256, P-256 for ES256.
  static common::Result<TokenKey> generate_pair(JwtAlgorithm a);
  // DER encodings of a generated pair.
  common::Result<std::string> private_der() const;
  common::Result<std::string> public_der() const;

  bool is_secret() const { return pkey_ == nullptr; }
  const std::string& secret_bytes() const { return secret_; }
  // The algorithm this key signs with (RS256 for RSA, ES256 for EC).
  JwtAlgorithm algorithm() const { return algorithm_; }

 private:
  friend class JwtAccess;
  TokenKey() = default;
  static common::Result<TokenKey> from_pem_or_der(std::string_view bytes, bool is_private);
  std::string secret_;
  void* pkey_ = nullptr;  // EVP_PKEY*
  bool has_private_ = false;
  JwtAlgorithm algorithm_ = JwtAlgorithm::kHS256;
};

struct JwtClaims {
  std::string subject;
  std::optional<int64_t> expires_at;  // seconds since the epoch
};

// Signs `claims` with `key` (its algorithm). kInvalidArgument for a public key.
common::Result<std::string> sign_token(const TokenKey& key, const JwtClaims& claims);

// Verifies `token` with `key`: the header's algorithm must be the key's,
// the signature must match, and `exp` (when present) must be after
// `now_seconds`. PermissionDenied with the reason (never the token) otherwise.
common::Result<JwtClaims> verify_token(const TokenKey& key, std::string_view token, int64_t now_seconds);

// The claims without checking anything (for `magnetar tokens show`).
common::Result<JwtClaims> decode_token_unverified(std::string_view token);

}  // namespace magnetar::security
