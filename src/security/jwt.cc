#include "security/jwt.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/base64.h"

namespace magnetar::security {

using common::base64_decode;
using common::base64url_encode;
using common::Result;
using common::Status;

namespace {

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

Result<JwtAlgorithm> algorithm_of(EVP_PKEY* pkey) {
  switch (EVP_PKEY_get_base_id(pkey)) {
    case EVP_PKEY_RSA: return JwtAlgorithm::kRS256;
    case EVP_PKEY_EC: return JwtAlgorithm::kES256;
    default: return Status::invalid_argument("the key is neither RSA nor EC");
  }
}

constexpr size_t kEs256Half = 32;

// ECDSA's DER signature <-> JWT's fixed r||s.
Result<std::string> der_to_raw(const unsigned char* der, size_t len) {
  const unsigned char* p = der;
  ECDSA_SIG* sig = d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(len));
  if (sig == nullptr) return Status::internal("ECDSA signature did not decode");
  const BIGNUM* r = nullptr;
  const BIGNUM* s = nullptr;
  ECDSA_SIG_get0(sig, &r, &s);
  std::string out(2 * kEs256Half, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  bool ok = BN_bn2binpad(r, o, kEs256Half) == kEs256Half && BN_bn2binpad(s, o + kEs256Half, kEs256Half) == kEs256Half;
  ECDSA_SIG_free(sig);
  if (!ok) return Status::internal("ECDSA signature too long");
  return out;
}

std::optional<std::string> raw_to_der(std::string_view raw) {
  if (raw.size() != 2 * kEs256Half) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
  ECDSA_SIG* sig = ECDSA_SIG_new();
  BIGNUM* r = BN_bin2bn(p, kEs256Half, nullptr);
  BIGNUM* s = BN_bin2bn(p + kEs256Half, kEs256Half, nullptr);
  if (sig == nullptr || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig, r, s) != 1) {
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(sig);
    return std::nullopt;
  }
  unsigned char* der = nullptr;
  int n = i2d_ECDSA_SIG(sig, &der);
  ECDSA_SIG_free(sig);
  if (n <= 0) return std::nullopt;
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

std::string hmac_sha256(const std::string& key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), mac, &len);
  return std::string(reinterpret_cast<char*>(mac), len);
}

// Constant-time comparison of two signatures.
bool same_bytes(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

struct Parts {
  std::string header;
  std::string payload;
  std::string signature;
  std::string_view signed_part;
};

Result<Parts> split(std::string_view token) {
  size_t a = token.find('.');
  size_t b = a == std::string_view::npos ? a : token.find('.', a + 1);
  if (b == std::string_view::npos || token.find('.', b + 1) != std::string_view::npos) {
    return Status::permission_denied("malformed token: not three dot-separated parts");
  }
  Parts p;
  auto h = base64_decode(token.substr(0, a));
  auto pl = base64_decode(token.substr(a + 1, b - a - 1));
  auto s = base64_decode(token.substr(b + 1));
  if (!h.is_ok() || !pl.is_ok() || !s.is_ok()) return Status::permission_denied("malformed token: bad base64url");
  p.header = std::move(*h);
  p.payload = std::move(*pl);
  p.signature = std::move(*s);
  p.signed_part = token.substr(0, b);
  return p;
}

Result<JwtClaims> claims_of(const std::string& payload) {
  auto j = nlohmann::json::parse(payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::permission_denied("malformed token: payload is not a JSON object");
  JwtClaims c;
  auto sub = j.find("sub");
  if (sub == j.end() || !sub->is_string() || sub->get<std::string>().empty()) {
    return Status::permission_denied("token has no subject (sub)");
  }
  c.subject = sub->get<std::string>();
  auto exp = j.find("exp");
  if (exp != j.end()) {
    if (!exp->is_number()) return Status::permission_denied("token's exp is not a number");
    c.expires_at = exp->get<int64_t>();
  }
  return c;
}

}  // namespace

std::string_view algorithm_name(JwtAlgorithm a) {
  switch (a) {
    case JwtAlgorithm::kHS256: return "HS256";
    case JwtAlgorithm::kRS256: return "RS256";
    case JwtAlgorithm::kES256: return "ES256";
  }
  return "?";
}

Result<JwtAlgorithm> parse_algorithm(std::string_view name) {
  for (auto a : {JwtAlgorithm::kHS256, JwtAlgorithm::kRS256, JwtAlgorithm::kES256}) {
    if (name == algorithm_name(a)) return a;
  }
  return Status::invalid_argument("unknown signature algorithm '" + std::string(name) + "' (HS256, RS256, ES256)");
}

TokenKey::~TokenKey() { EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_)); }

TokenKey::TokenKey(TokenKey&& o) noexcept
    : secret_(std::move(o.secret_)), pkey_(o.pkey_), has_private_(o.has_private_), algorithm_(o.algorithm_) {
  o.pkey_ = nullptr;
}

TokenKey& TokenKey::operator=(TokenKey&& o) noexcept {
  if (this != &o) {
    EVP_PKEY_free(static_cast<EVP_PKEY*>(pkey_));
    secret_ = std::move(o.secret_);
    pkey_ = o.pkey_;
    has_private_ = o.has_private_;
    algorithm_ = o.algorithm_;
    o.pkey_ = nullptr;
  }
  return *this;
}

TokenKey TokenKey::secret(std::string bytes) {
  TokenKey k;
  k.secret_ = std::move(bytes);
  return k;
}

Result<TokenKey> TokenKey::public_key(std::string_view bytes) { return from_pem_or_der(bytes, false); }

Result<TokenKey> TokenKey::private_key(std::string_view bytes) { return from_pem_or_der(bytes, true); }

Result<TokenKey> TokenKey::from_pem_or_der(std::string_view bytes, bool is_private) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
  EVP_PKEY* pkey = is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                              : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr);
  if (pkey == nullptr) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    pkey = is_private ? d2i_AutoPrivateKey(nullptr, &p, static_cast<long>(bytes.size()))
                      : d2i_PUBKEY(nullptr, &p, static_cast<long>(bytes.size()));
  }
  ERR_clear_error();  // the formats not taken leave errors behind
  if (pkey == nullptr) {
    return Status::invalid_argument(std::string("not a ") + (is_private ? "private" : "public") +
                                    " key (DER or PEM, RSA or EC)");
  }
  auto alg = algorithm_of(pkey);
  if (!alg.is_ok()) {
    EVP_PKEY_free(pkey);
    return alg.status();
  }
  TokenKey k;
  k.pkey_ = pkey;
  k.has_private_ = is_private;
  k.algorithm_ = *alg;
  return k;
}

Result<std::string> TokenKey::read_key_bytes(std::string_view url) {
  constexpr std::string_view kData = "data:;base64,";
  constexpr std::string_view kFile = "file://";
  if (url.substr(0, kData.size()) == kData) {
    auto bytes = base64_decode(url.substr(kData.size()));
    if (!bytes.is_ok()) return Status::invalid_argument("the key's data: URL is not base64");
    return bytes;
  }
  const bool file_url = url.substr(0, kFile.size()) == kFile;
  std::string path(file_url ? url.substr(kFile.size()) : url);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // A value that is neither URL may be the key itself, pasted by mistake:
    // the error names a file only when a file was meant, never the value.
    if (file_url) return Status::not_found("cannot read key file " + path);
    return Status::invalid_argument(
        "cannot read the key: give it as file:///path or data:;base64,<key> (the value given is not shown)");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TokenKey TokenKey::generate_secret() {
  std::string bytes(32, '\0');
  RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  return secret(std::move(bytes));
}

Result<TokenKey> TokenKey::generate_pair(JwtAlgorithm a) {
  EVP_PKEY* pkey = nullptr;
  if (a == JwtAlgorithm::kRS256) pkey = EVP_RSA_gen(2048);
  if (a == JwtAlgorithm::kES256) pkey = EVP_EC_gen("P-256");
  if (pkey == nullptr) return Status::invalid_argument("key pairs are RS256 or ES256");
  TokenKey k;
  k.pkey_ = pkey;
  k.has_private_ = true;
  k.algorithm_ = a;
  return k;
}

Result<std::string> TokenKey::private_der() const {
  if (!has_private_) return Status::invalid_argument("not a private key");
  PKCS8_PRIV_KEY_INFO* info = EVP_PKEY2PKCS8(static_cast<EVP_PKEY*>(pkey_));
  if (info == nullptr) return Status::internal("cannot encode the private key");
  unsigned char* der = nullptr;
  int n = i2d_PKCS8_PRIV_KEY_INFO(info, &der);
  PKCS8_PRIV_KEY_INFO_free(info);
  if (n <= 0) return Status::internal("cannot encode the private key");
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_clear_free(der, static_cast<size_t>(n));
  return out;
}

Result<std::string> TokenKey::public_der() const {
  if (pkey_ == nullptr) return Status::invalid_argument("a secret key has no public part");
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(static_cast<EVP_PKEY*>(pkey_), &der);
  if (n <= 0) return Status::internal("cannot encode the public key");
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

class JwtAccess {
 public:
  static EVP_PKEY* pkey(const TokenKey& k) { return static_cast<EVP_PKEY*>(k.pkey_); }
  static bool can_sign(const TokenKey& k) { return k.is_secret() || k.has_private_; }
};

Result<std::string> sign_token(const TokenKey& key, const JwtClaims& claims) {
  if (!JwtAccess::can_sign(key)) return Status::invalid_argument("a public key cannot sign tokens");
  nlohmann::json header = {{"alg", std::string(algorithm_name(key.algorithm()))}, {"typ", "JWT"}};
  nlohmann::json payload = {{"sub", claims.subject}};
  if (claims.expires_at) payload["exp"] = *claims.expires_at;
  std::string signing_input = base64url_encode(header.dump()) + "." + base64url_encode(payload.dump());
  std::string signature;
  if (key.is_secret()) {
    signature = hmac_sha256(key.secret_bytes(), signing_input);
  } else {
    std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
    size_t len = 0;
    const auto* data = reinterpret_cast<const unsigned char*>(signing_input.data());
    if (EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, JwtAccess::pkey(key)) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &len, data, signing_input.size()) != 1) {
      return Status::internal("signing failed");
    }
    std::string sig(len, '\0');
    if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len, data, signing_input.size()) != 1) {
      return Status::internal("signing failed");
    }
    sig.resize(len);
    if (key.algorithm() == JwtAlgorithm::kES256) {
      auto raw = der_to_raw(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
      if (!raw.is_ok()) return raw.status();
      sig = std::move(*raw);
    }
    signature = std::move(sig);
  }
  return signing_input + "." + base64url_encode(signature);
}

Result<JwtClaims> decode_token_unverified(std::string_view token) {
  auto parts = split(token);
  if (!parts.is_ok()) return parts.status();
  return claims_of(parts->payload);
}

Result<JwtClaims> verify_token(const TokenKey& key, std::string_view token, int64_t now_seconds) {
  auto parts = split(token);
  if (!parts.is_ok()) return parts.status();
  auto header = nlohmann::json::parse(parts->header, nullptr, false);
  if (header.is_discarded() || !header.is_object() || !header.contains("alg") || !header["alg"].is_string()) {
    return Status::permission_denied("malformed token: header has no alg");
  }
  const std::string alg = header["alg"].get<std::string>();
  if (alg != algorithm_name(key.algorithm())) {
    return Status::permission_denied("token signed with " + alg + ", the broker expects " +
                                     std::string(algorithm_name(key.algorithm())));
  }
  bool valid = false;
  if (key.is_secret()) {
    valid = same_bytes(hmac_sha256(key.secret_bytes(), parts->signed_part), parts->signature);
  } else {
    std::string sig = parts->signature;
    if (key.algorithm() == JwtAlgorithm::kES256) {
      auto der = raw_to_der(sig);
      if (!der) return Status::permission_denied("token signature is invalid");
      sig = std::move(*der);
    }
    std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
    valid = EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, JwtAccess::pkey(key)) == 1 &&
            EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(sig.data()), sig.size(),
                             reinterpret_cast<const unsigned char*>(parts->signed_part.data()),
                             parts->signed_part.size()) == 1;
  }
  if (!valid) return Status::permission_denied("token signature is invalid");
  auto claims = claims_of(parts->payload);
  if (!claims.is_ok()) return claims.status();
  if (claims->expires_at && *claims->expires_at <= now_seconds) return Status::permission_denied("token has expired");
  return claims;
}

}  // namespace magnetar::security
