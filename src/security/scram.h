// SCRAM (RFC 5802) with SHA-256 (RFC 7677) and SHA-512, the SASL mechanisms
// Kafka clients offer beside PLAIN: the math, and the server's side of one
// exchange.
//
// A credential never holds the password: only what RFC 5802 says a server
// keeps, per user and mechanism:
//   SaltedPassword = Hi(password, salt, iterations)   (PBKDF2 with HMAC-H)
//   StoredKey      = H(HMAC(SaltedPassword, "Client Key"))
//   ServerKey      = HMAC(SaltedPassword, "Server Key")
//
// The exchange, four messages:
//   client-first   gs2-header client-first-bare: "n,," "n=user,r=cnonce"
//   server-first   "r=cnonce+snonce,s=base64(salt),i=iterations"
//   client-final   "c=base64(gs2-header),r=cnonce+snonce,p=base64(ClientProof)"
//   server-final   "v=base64(ServerSignature)"
// Channel binding is not offered: a client asking for it ("p=...") is
// refused; "y" (the client could bind but thinks we cannot) and "n" are
// served. An unknown user gets a server-first made from a salt derived from
// its name, so the answers do not tell a missing user from a wrong password;
// both fail at the proof with the same message.
//
// Threads: the functions are pure; a ScramServerExchange belongs to one
// connection and its thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::security {

// Kafka's wire numbers for the mechanisms (ScramMechanism in its schemas).
enum class ScramMechanism : int8_t { kSha256 = 1, kSha512 = 2 };

// "SCRAM-SHA-256" / "SCRAM-SHA-512".
std::string_view scram_mechanism_name(ScramMechanism m);
// Both the SASL names and the short ones ("sha-256", "sha-512"), any case.
std::optional<ScramMechanism> scram_mechanism_from_name(std::string_view name);
std::optional<ScramMechanism> scram_mechanism_from_wire(int64_t value);

// Kafka's bounds for a credential's iteration count.
inline constexpr int32_t kScramMinIterations = 4096;
inline constexpr int32_t kScramMaxIterations = 16384;
inline constexpr int32_t kScramDefaultIterations = 8192;

struct ScramCredential {
  ScramMechanism mechanism = ScramMechanism::kSha256;
  std::string salt;  // raw bytes
  int32_t iterations = 0;
  std::string stored_key;  // raw bytes, the hash's length
  std::string server_key;  // raw bytes, the hash's length
};

// The mechanism's hash and HMAC, raw bytes.
std::string scram_hash(ScramMechanism m, std::string_view data);
std::string scram_hmac(ScramMechanism m, std::string_view key, std::string_view data);
// Hi(password, salt, iterations). REQUIRES: iterations >= 1.
std::string scram_salted_password(ScramMechanism m, std::string_view password, std::string_view salt,
                                  int32_t iterations);
// The credential for a salted password (what Kafka's
// AlterUserScramCredentials carries) or for a password.
ScramCredential scram_credential_from_salted(ScramMechanism m, std::string_view salted_password, std::string salt,
                                             int32_t iterations);
ScramCredential scram_credential(ScramMechanism m, std::string_view password, std::string salt, int32_t iterations);
// `n` bytes from OpenSSL's CSPRNG.
std::string scram_random_bytes(size_t n);

// The server's side of one SCRAM exchange. Every error is
// PermissionDenied with a message that may be shown to the client; the
// exchange is then over (each later call fails).
class ScramServerExchange {
 public:
  // The credential of `user` for this exchange's mechanism, or nullopt when
  // the user has none. Called once, from on_client_first.
  using Lookup = std::function<std::optional<ScramCredential>(const std::string& user)>;

  // `nonce`: the server's part of the nonce; empty draws a random one.
  ScramServerExchange(ScramMechanism mechanism, Lookup lookup, std::string nonce = {});

  // client-first -> server-first.
  common::Result<std::string> on_client_first(std::string_view message);
  // client-final -> server-final. On success the client proved `user()`.
  common::Result<std::string> on_client_final(std::string_view message);

  ScramMechanism mechanism() const { return mechanism_; }
  // The user named by client-first (proven only once done()).
  const std::string& user() const { return user_; }
  bool done() const { return state_ == State::kDone; }

 private:
  enum class State { kClientFirst, kClientFinal, kDone, kFailed };
  common::Status fail(std::string why);

  ScramMechanism mechanism_;
  Lookup lookup_;
  State state_ = State::kClientFirst;
  std::string user_;
  std::string gs2_header_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string nonce_;  // client's + server's
  ScramCredential credential_;
  bool known_user_ = false;
};

// Parses a SCRAM `saslname` (RFC 5802: "=2C" is ',', "=3D" is '='; any other
// '=' is malformed). nullopt when malformed or empty.
std::optional<std::string> scram_unescape_name(std::string_view name);
std::string scram_escape_name(std::string_view name);

}  // namespace magnetar::security
