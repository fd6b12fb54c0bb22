#include "security/jwt.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/base64.h"
#include "security/token_authenticator.h"

namespace magnetar::security {
namespace {

constexpr int64_t kNow = 1'800'000'000;

// Changes one character in the middle of the signature.
std::string flip_last_signature_char(std::string token) {
  size_t dot = token.rfind('.');
  char& c = token[dot + (token.size() - dot) / 2];
  c = c == 'A' ? 'B' : 'A';
  return token;
}

TEST(JwtTest, Hs256RoundTripAndExpiry) {
  TokenKey key = TokenKey::generate_secret();
  auto token = sign_token(key, JwtClaims{"alice", kNow + 60});
  ASSERT_TRUE(token.is_ok());
  auto claims = verify_token(key, *token, kNow);
  ASSERT_TRUE(claims.is_ok()) << claims.status().to_string();
  EXPECT_EQ(claims->subject, "alice");
  EXPECT_EQ(claims->expires_at, kNow + 60);
  auto late = verify_token(key, *token, kNow + 60);
  EXPECT_EQ(late.status().code(), common::ErrorCode::kPermissionDenied);
  EXPECT_NE(late.status().message().find("expired"), std::string::npos);
}

TEST(JwtTest, TamperedTokensAndOtherKeysAreRefused) {
  TokenKey key = TokenKey::generate_secret();
  std::string token = *sign_token(key, JwtClaims{"alice", std::nullopt});
  EXPECT_FALSE(verify_token(key, flip_last_signature_char(token), kNow).is_ok());
  EXPECT_FALSE(verify_token(TokenKey::generate_secret(), token, kNow).is_ok());
  // A payload swapped for another subject keeps the old signature: refused.
  size_t a = token.find('.');
  size_t b = token.find('.', a + 1);
  std::string forged = token.substr(0, a + 1) + common::base64url_encode(R"({"sub":"root"})") + token.substr(b);
  EXPECT_FALSE(verify_token(key, forged, kNow).is_ok());
}

TEST(JwtTest, AlgorithmNoneAndAlgorithmConfusionAreRefused) {
  TokenKey key = TokenKey::generate_secret();
  std::string none = common::base64url_encode(R"({"alg":"none","typ":"JWT"})") + "." +
                     common::base64url_encode(R"({"sub":"root"})") + ".";
  EXPECT_FALSE(verify_token(key, none, kNow).is_ok());
  // An HS256 token checked against an RSA public key: refused by algorithm.
  auto pair = TokenKey::generate_pair(JwtAlgorithm::kRS256);
  ASSERT_TRUE(pair.is_ok());
  auto pub = TokenKey::public_key(*pair->public_der());
  ASSERT_TRUE(pub.is_ok());
  std::string hs = *sign_token(key, JwtClaims{"root", std::nullopt});
  auto r = verify_token(*pub, hs, kNow);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("HS256"), std::string::npos);
}

TEST(JwtTest, Rs256AndEs256SignWithPrivateAndVerifyWithPublicKeys) {
  for (JwtAlgorithm alg : {JwtAlgorithm::kRS256, JwtAlgorithm::kES256}) {
    auto pair = TokenKey::generate_pair(alg);
    ASSERT_TRUE(pair.is_ok());
    auto token = sign_token(*pair, JwtClaims{"svc", std::nullopt});
    ASSERT_TRUE(token.is_ok());
    auto pub = TokenKey::public_key(*pair->public_der());
    ASSERT_TRUE(pub.is_ok());
    EXPECT_EQ(pub->algorithm(), alg);
    auto claims = verify_token(*pub, *token, kNow);
    ASSERT_TRUE(claims.is_ok()) << algorithm_name(alg) << ": " << claims.status().to_string();
    EXPECT_EQ(claims->subject, "svc");
    EXPECT_FALSE(verify_token(*pub, flip_last_signature_char(*token), kNow).is_ok());
    EXPECT_FALSE(sign_token(*pub, JwtClaims{"x", std::nullopt}).is_ok());  // a public key does not sign
    // The private key reads back from its DER.
    auto priv = TokenKey::private_key(*pair->private_der());
    ASSERT_TRUE(priv.is_ok());
    EXPECT_TRUE(verify_token(*pub, *sign_token(*priv, JwtClaims{"again", std::nullopt}), kNow).is_ok());
  }
}

TEST(JwtTest, GarbageIsRefusedWithoutCrashing) {
  TokenKey key = TokenKey::generate_secret();
  const std::vector<std::string> junks = {"", ".", "..", "a.b.c", "a.b.c.d", "!!!.###.$$$", std::string(3, '\0'),
                                         std::string(10000, 'x') + ".y.z"};
  for (const std::string& junk : junks) {
    EXPECT_FALSE(verify_token(key, junk, kNow).is_ok()) << junk.substr(0, 10);
  }
  std::string no_sub = common::base64url_encode(R"({"alg":"HS256"})") + "." + common::base64url_encode(R"({"exp":1})");
  EXPECT_FALSE(decode_token_unverified(no_sub + ".x").is_ok());
  EXPECT_FALSE(TokenKey::public_key("not a key").is_ok());
  EXPECT_FALSE(TokenKey::private_key("").is_ok());
}

TEST(JwtTest, KeysAreReadFromDataUrls) {
  auto bytes = TokenKey::read_key_bytes("data:;base64," + common::base64_encode("secret-bytes"));
  ASSERT_TRUE(bytes.is_ok());
  EXPECT_EQ(*bytes, "secret-bytes");
  EXPECT_EQ(TokenKey::read_key_bytes("file:///no/such/key").status().code(), common::ErrorCode::kNotFound);
  // A key pasted where its URL belongs is refused without being repeated.
  auto pasted = TokenKey::read_key_bytes("c2VjcmV0LWtleS0xMjM0NTY3ODkw/x+y==");
  ASSERT_FALSE(pasted.is_ok());
  EXPECT_EQ(pasted.status().message().find("c2VjcmV0"), std::string::npos) << pasted.status().message();
}

TEST(TokenAuthenticatorTest, EachProtocolsCredentialsAndAnonymousRefusal) {
  TokenKey key = TokenKey::generate_secret();
  std::string token = *sign_token(key, JwtClaims{"alice", std::nullopt});
  TokenAuthenticator auth(TokenKey::secret(key.secret_bytes()));
  EXPECT_EQ(*auth.authenticate({"token", token, ""}), "alice");
  EXPECT_EQ(*auth.authenticate({"basic", "app:" + token, ""}), "alice");  // AMQP PLAIN
  EXPECT_EQ(*auth.authenticate(broker::credentials_from_http("Bearer " + token)), "alice");
  EXPECT_FALSE(auth.authenticate({"none", "", ""}).is_ok());
  EXPECT_FALSE(auth.authenticate({"basic", "app", ""}).is_ok());
  EXPECT_FALSE(auth.authenticate({"tls", token, ""}).is_ok());
  EXPECT_FALSE(auth.authenticate(broker::credentials_from_http(token)).is_ok());
  EXPECT_EQ(*auth.authenticate(broker::credentials_from_http("Basic " + common::base64_encode("u:" + token))),
            "alice");
  // The refusal never repeats the token.
  auto r = auth.authenticate({"token", flip_last_signature_char(token), ""});
  EXPECT_EQ(r.status().message().find(token.substr(0, 20)), std::string::npos);
}

TEST(JwtTest, ANonCanonicalSignatureEncodingIsRefused) {
  TokenKey key = TokenKey::generate_secret();
  std::string token = *sign_token(key, JwtClaims{"alice", std::nullopt});
  // 32 signature bytes take 43 characters; the last one has 2 unused bits.
  std::string varied = token;
  char& c = varied.back();
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  c = alphabet[alphabet.find(c) ^ 1];
  EXPECT_FALSE(verify_token(key, varied, kNow).is_ok());
  EXPECT_TRUE(verify_token(key, token, kNow).is_ok());
}

}  // namespace
}  // namespace magnetar::security
