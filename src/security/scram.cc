#include "security/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "common/base64.h"

namespace magnetar::security {

using common::Result;
using common::Status;

namespace {

const EVP_MD* scram_digest(ScramMechanism m) { return m == ScramMechanism::kSha512 ? EVP_sha512() : EVP_sha256(); }

// What the server's nonce and an unknown user's salt are made of.
constexpr size_t kServerNonceBytes = 24;
constexpr size_t kSaltBytes = 32;
// Longest client-first or client-final message looked at.
constexpr size_t kMaxScramMessage = 4096;

// A process-wide random key for the salts answered to unknown users: the
// same user gets the same salt each time, and nobody can tell it from a
// real one.
const std::string& unknown_user_key() {
  static const std::string key = scram_random_bytes(32);
  return key;
}

bool printable_nonce(std::string_view nonce) {
  if (nonce.empty()) return false;
  return std::all_of(nonce.begin(), nonce.end(), [](char c) { return c >= 0x21 && c <= 0x7e && c != ','; });
}

// Splits "k=v,k=v,..." into attributes. nullopt when a part is not a
// one-letter key followed by '='.
std::optional<std::vector<std::pair<char, std::string_view>>> scram_attributes(std::string_view text) {
  std::vector<std::pair<char, std::string_view>> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    std::string_view part = text.substr(start, end - start);
    if (part.size() < 2 || part[1] != '=' || !std::isalpha(static_cast<unsigned char>(part[0]))) return std::nullopt;
    out.emplace_back(part[0], part.substr(2));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string_view scram_mechanism_name(ScramMechanism m) {
  return m == ScramMechanism::kSha512 ? "SCRAM-SHA-512" : "SCRAM-SHA-256";
}

std::optional<ScramMechanism> scram_mechanism_from_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "scram-sha-256" || lower == "sha-256") return ScramMechanism::kSha256;
  if (lower == "scram-sha-512" || lower == "sha-512") return ScramMechanism::kSha512;
  return std::nullopt;
}

std::optional<ScramMechanism> scram_mechanism_from_wire(int64_t value) {
  if (value == 1) return ScramMechanism::kSha256;
  if (value == 2) return ScramMechanism::kSha512;
  return std::nullopt;
}

std::string scram_hash(ScramMechanism m, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, scram_digest(m), nullptr);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string scram_hmac(ScramMechanism m, std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(scram_digest(m), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string scram_salted_password(ScramMechanism m, std::string_view password, std::string_view salt,
                                  int32_t iterations) {
  std::string out(static_cast<size_t>(EVP_MD_get_size(scram_digest(m))), '\0');
  PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                    reinterpret_cast<const unsigned char*>(salt.data()), static_cast<int>(salt.size()), iterations,
                    scram_digest(m), static_cast<int>(out.size()), reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

ScramCredential scram_credential_from_salted(ScramMechanism m, std::string_view salted_password, std::string salt,
                                             int32_t iterations) {
  ScramCredential c;
  c.mechanism = m;
  c.salt = std::move(salt);
  c.iterations = iterations;
  c.stored_key = scram_hash(m, scram_hmac(m, salted_password, "Client Key"));
  c.server_key = scram_hmac(m, salted_password, "Server Key");
  return c;
}

ScramCredential scram_credential(ScramMechanism m, std::string_view password, std::string salt, int32_t iterations) {
  std::string salted = scram_salted_password(m, password, salt, iterations);
  return scram_credential_from_salted(m, salted, std::move(salt), iterations);
}

std::string scram_random_bytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    // OpenSSL's generator failing means the process cannot make secrets.
    std::abort();
  }
  return out;
}

std::optional<std::string> scram_unescape_name(std::string_view name) {
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (c == ',' || c == '\0') return std::nullopt;
    if (c != '=') {
      out.push_back(c);
      continue;
    }
    std::string_view code = name.substr(i + 1, 2);
    if (code == "2C") {
      out.push_back(',');
    } else if (code == "3D") {
      out.push_back('=');
    } else {
      return std::nullopt;
    }
    i += 2;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string scram_escape_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ',') {
      out += "=2C";
    } else if (c == '=') {
      out += "=3D";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

ScramServerExchange::ScramServerExchange(ScramMechanism mechanism, Lookup lookup, std::string nonce)
    : mechanism_(mechanism), lookup_(std::move(lookup)), nonce_(std::move(nonce)) {
  if (nonce_.empty()) nonce_ = common::base64_encode(scram_random_bytes(kServerNonceBytes));
}

Status ScramServerExchange::fail(std::string why) {
  state_ = State::kFailed;
  return Status::permission_denied(std::move(why));
}

Result<std::string> ScramServerExchange::on_client_first(std::string_view message) {
  if (state_ != State::kClientFirst) return fail("SCRAM client-first message out of order");
  if (message.empty() || message.size() > kMaxScramMessage) return fail("malformed SCRAM client-first message");
  // gs2-header: cbind-flag "," [authzid] ","
  size_t first = message.find(',');
  size_t second = first == std::string_view::npos ? first : message.find(',', first + 1);
  if (second == std::string_view::npos) return fail("malformed SCRAM client-first message");
  std::string_view flag = message.substr(0, first);
  std::string_view authzid = message.substr(first + 1, second - first - 1);
  if (flag.rfind("p=", 0) == 0) return fail("SCRAM channel binding is not supported; use a mechanism without -PLUS");
  if (flag != "n" && flag != "y") return fail("malformed SCRAM client-first message");
  gs2_header_ = std::string(message.substr(0, second + 1));
  client_first_bare_ = std::string(message.substr(second + 1));
  auto attrs = scram_attributes(client_first_bare_);
  if (!attrs || attrs->size() < 2) return fail("malformed SCRAM client-first message");
  if ((*attrs)[0].first == 'm') return fail("SCRAM mandatory extensions are not supported");
  if ((*attrs)[0].first != 'n' || (*attrs)[1].first != 'r') return fail("malformed SCRAM client-first message");
  auto user = scram_unescape_name((*attrs)[0].second);
  if (!user) return fail("malformed SCRAM user name");
  if (!authzid.empty()) {
    auto authz = authzid.rfind("a=", 0) == 0 ? scram_unescape_name(authzid.substr(2)) : std::nullopt;
    if (!authz) return fail("malformed SCRAM authorization identity");
    if (*authz != *user) return fail("SCRAM authorization identity must be the user name");
  }
  std::string_view client_nonce = (*attrs)[1].second;
  if (!printable_nonce(client_nonce)) return fail("malformed SCRAM nonce");
  user_ = std::move(*user);
  nonce_ = std::string(client_nonce) + nonce_;
  std::optional<ScramCredential> found = lookup_ ? lookup_(user_) : std::nullopt;
  known_user_ = found.has_value() && found->mechanism == mechanism_;
  if (known_user_) {
    credential_ = std::move(*found);
  } else {
    // Answer as for a real user, with a salt nobody can tell from one.
    credential_.mechanism = mechanism_;
    credential_.salt = scram_hmac(mechanism_, unknown_user_key(), user_).substr(0, kSaltBytes);
    credential_.iterations = kScramDefaultIterations;
  }
  server_first_ = "r=" + nonce_ + ",s=" + common::base64_encode(credential_.salt) +
                  ",i=" + std::to_string(credential_.iterations);
  state_ = State::kClientFinal;
  return server_first_;
}

Result<std::string> ScramServerExchange::on_client_final(std::string_view message) {
  if (state_ != State::kClientFinal) return fail("SCRAM client-final message out of order");
  if (message.empty() || message.size() > kMaxScramMessage) return fail("malformed SCRAM client-final message");
  size_t proof_at = message.rfind(",p=");
  if (proof_at == std::string_view::npos) return fail("malformed SCRAM client-final message");
  std::string_view without_proof = message.substr(0, proof_at);
  auto attrs = scram_attributes(without_proof);
  if (!attrs || attrs->size() < 2 || (*attrs)[0].first != 'c' || (*attrs)[1].first != 'r') {
    return fail("malformed SCRAM client-final message");
  }
  auto binding = common::base64_decode((*attrs)[0].second);
  if (!binding.is_ok() || *binding != gs2_header_) return fail("SCRAM channel binding does not match");
  // RFC 5802 wants the nonce echoed; some clients (librdkafka) send their
  // own part once more in front of it. Kafka accepts any nonce that ends
  // with the server-first one, which is fresh either way; so do we.
  std::string_view echoed = (*attrs)[1].second;
  if (echoed.size() < nonce_.size() || echoed.substr(echoed.size() - nonce_.size()) != nonce_) {
    return fail("SCRAM nonce does not match");
  }
  auto proof = common::base64_decode(message.substr(proof_at + 3));
  if (!proof.is_ok()) return fail("malformed SCRAM client proof");
  const std::string auth_message = client_first_bare_ + "," + server_first_ + "," + std::string(without_proof);
  const std::string signature = scram_hmac(mechanism_, credential_.stored_key.empty() ? std::string(1, '\0')
                                                                                       : credential_.stored_key,
                                           auth_message);
  // ClientKey = ClientProof XOR ClientSignature; the proof holds when
  // H(ClientKey) is the StoredKey. Compared in constant time.
  std::string client_key = *proof;
  const bool sized = client_key.size() == signature.size();
  for (size_t i = 0; i < client_key.size() && i < signature.size(); ++i) client_key[i] ^= signature[i];
  const std::string computed = scram_hash(mechanism_, client_key);
  const bool same = known_user_ && sized && computed.size() == credential_.stored_key.size() &&
                    CRYPTO_memcmp(computed.data(), credential_.stored_key.data(), computed.size()) == 0;
  if (!same) return fail("authentication failed: unknown user or wrong password");
  state_ = State::kDone;
  return "v=" + common::base64_encode(scram_hmac(mechanism_, credential_.server_key, auth_message));
}

}  // namespace magnetar::security
