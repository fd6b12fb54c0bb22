#include "security/scram.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>

#include "common/base64.h"
#include "metadata/leveldb_store.h"
#include "security/scram_credentials.h"

namespace magnetar::security {
namespace {

// RFC 7677 section 3: user "user", password "pencil".
constexpr std::string_view kClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
constexpr std::string_view kServerNonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
constexpr std::string_view kServerFirst =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
constexpr std::string_view kClientFinal =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
constexpr std::string_view kServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

ScramCredential rfc_credential() {
  return scram_credential(ScramMechanism::kSha256, "pencil", *common::base64_decode("W22ZaJ0SNY7soEsUEjb6gQ=="), 4096);
}

ScramServerExchange rfc_exchange(std::optional<ScramCredential> credential = rfc_credential()) {
  return ScramServerExchange(
      ScramMechanism::kSha256,
      [credential](const std::string& user) { return user == "user" ? credential : std::nullopt; },
      std::string(kServerNonce));
}

TEST(ScramTest, Rfc7677Sha256VectorRunsThroughTheExchange) {
  auto exchange = rfc_exchange();
  auto first = exchange.on_client_first(kClientFirst);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(*first, kServerFirst);
  EXPECT_EQ(exchange.user(), "user");
  EXPECT_FALSE(exchange.done());
  auto final = exchange.on_client_final(kClientFinal);
  ASSERT_TRUE(final.is_ok()) << final.status().to_string();
  EXPECT_EQ(*final, kServerFinal);
  EXPECT_TRUE(exchange.done());
  // Nothing more is accepted once done.
  EXPECT_FALSE(exchange.on_client_final(kClientFinal).is_ok());
}

TEST(ScramTest, CredentialFromSaltedPasswordMatchesTheOneFromThePassword) {
  const std::string salt = "0123456789abcdef";
  for (auto m : {ScramMechanism::kSha256, ScramMechanism::kSha512}) {
    std::string salted = scram_salted_password(m, "pencil", salt, 4096);
    EXPECT_EQ(salted.size(), m == ScramMechanism::kSha256 ? 32u : 64u);
    ScramCredential a = scram_credential(m, "pencil", salt, 4096);
    ScramCredential b = scram_credential_from_salted(m, salted, salt, 4096);
    EXPECT_EQ(a.stored_key, b.stored_key);
    EXPECT_EQ(a.server_key, b.server_key);
    EXPECT_NE(a.stored_key, scram_credential(m, "pencil!", salt, 4096).stored_key);
  }
}

// A client's side, to run the SHA-512 exchange end to end.
std::string client_final(ScramMechanism m, std::string_view password, std::string_view client_first_bare,
                         std::string_view server_first, std::string* server_signature,
                         std::string_view echo_prefix = "") {
  std::string nonce, salt_b64;
  int iterations = 0;
  size_t start = 0;
  while (start < server_first.size()) {
    size_t comma = server_first.find(',', start);
    std::string_view part = server_first.substr(start, comma - start);
    if (part[0] == 'r') nonce = part.substr(2);
    if (part[0] == 's') salt_b64 = part.substr(2);
    if (part[0] == 'i') iterations = std::stoi(std::string(part.substr(2)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  std::string salted = scram_salted_password(m, password, *common::base64_decode(salt_b64), iterations);
  std::string without_proof = "c=biws,r=" + std::string(echo_prefix) + nonce;
  std::string auth = std::string(client_first_bare) + "," + std::string(server_first) + "," + without_proof;
  std::string client_key = scram_hmac(m, salted, "Client Key");
  std::string signature = scram_hmac(m, scram_hash(m, client_key), auth);
  std::string proof = client_key;
  for (size_t i = 0; i < proof.size(); ++i) proof[i] ^= signature[i];
  *server_signature = "v=" + common::base64_encode(scram_hmac(m, scram_hmac(m, salted, "Server Key"), auth));
  return without_proof + ",p=" + common::base64_encode(proof);
}

TEST(ScramTest, Sha512ExchangeWithARandomNonce) {
  auto credential = scram_credential(ScramMechanism::kSha512, "s3cret", scram_random_bytes(32), 4096);
  ScramServerExchange exchange(ScramMechanism::kSha512, [&](const std::string&) { return credential; });
  auto first = exchange.on_client_first("n,,n=alice,r=abc");
  ASSERT_TRUE(first.is_ok());
  std::string expected_signature;
  auto final = exchange.on_client_final(client_final(ScramMechanism::kSha512, "s3cret", "n=alice,r=abc", *first,
                                                     &expected_signature));
  ASSERT_TRUE(final.is_ok()) << final.status().to_string();
  EXPECT_EQ(*final, expected_signature);
}

TEST(ScramTest, ANonceWithTheClientPartRepeatedInFrontIsServedAsKafkaDoes) {
  // librdkafka echoes its own nonce, then the whole server-first nonce.
  auto credential = scram_credential(ScramMechanism::kSha256, "pw", "salty-salt", 4096);
  ScramServerExchange exchange(ScramMechanism::kSha256, [&](const std::string&) { return credential; });
  auto first = exchange.on_client_first("n,,n=bob,r=xyz");
  ASSERT_TRUE(first.is_ok());
  std::string expected_signature;
  auto final = exchange.on_client_final(
      client_final(ScramMechanism::kSha256, "pw", "n=bob,r=xyz", *first, &expected_signature, "xyz"));
  ASSERT_TRUE(final.is_ok()) << final.status().to_string();
  EXPECT_EQ(*final, expected_signature);
}

TEST(ScramTest, WrongPasswordAndUnknownUserFailAlike) {
  auto credential = scram_credential(ScramMechanism::kSha256, "right", "salt-salt-salt", 4096);
  auto lookup = [&](const std::string& user) { return user == "alice" ? std::optional(credential) : std::nullopt; };
  std::string ignored;
  ScramServerExchange wrong(ScramMechanism::kSha256, lookup);
  auto first = wrong.on_client_first("n,,n=alice,r=abc");
  ASSERT_TRUE(first.is_ok());
  auto a = wrong.on_client_final(client_final(ScramMechanism::kSha256, "wrong", "n=alice,r=abc", *first, &ignored));
  ASSERT_FALSE(a.is_ok());
  EXPECT_FALSE(wrong.done());

  ScramServerExchange unknown(ScramMechanism::kSha256, lookup);
  auto first2 = unknown.on_client_first("n,,n=nobody,r=abc");
  ASSERT_TRUE(first2.is_ok());  // answered as for a real user
  EXPECT_NE(first2->find(",i=8192"), std::string::npos);
  auto b = unknown.on_client_final(client_final(ScramMechanism::kSha256, "x", "n=nobody,r=abc", *first2, &ignored));
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(a.status().message(), b.status().message());
  // The same unknown user gets the same salt each time.
  ScramServerExchange again(ScramMechanism::kSha256, lookup);
  auto first3 = again.on_client_first("n,,n=nobody,r=abc");
  EXPECT_EQ(first2->substr(first2->find(",s=")), first3->substr(first3->find(",s=")));
}

TEST(ScramTest, GarbageClientFirstMessagesAreRefused) {
  for (std::string_view bad :
       {std::string_view(""), std::string_view("n"), std::string_view("n,,"), std::string_view("x,,n=user,r=abc"),
        std::string_view("p=tls-unique,,n=user,r=abc"), std::string_view("n,,m=ext,n=user,r=abc"),
        std::string_view("n,,n=,r=abc"), std::string_view("n,,n=us=er,r=abc"), std::string_view("n,,r=abc,n=user"),
        std::string_view("n,,n=user"), std::string_view("n,,n=user,r="), std::string_view("n,,n=user,r=a,b"),
        std::string_view("n,a=other,n=user,r=abc"), std::string_view("n,,n=user,r=ab\x01"),
        std::string_view("\0\0\0\0", 4), std::string_view("n,,n=user,r=abc,,,")}) {
    auto exchange = rfc_exchange();
    EXPECT_FALSE(exchange.on_client_first(bad).is_ok()) << bad;
    // A failed exchange stays failed.
    EXPECT_FALSE(exchange.on_client_first(kClientFirst).is_ok());
  }
  // An authorization identity equal to the user is served.
  auto exchange = rfc_exchange();
  EXPECT_TRUE(exchange.on_client_first("y,a=user,n=user,r=abc").is_ok());
}

TEST(ScramTest, GarbageClientFinalMessagesAreRefused) {
  const std::string nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
  for (std::string bad :
       {std::string(), std::string("p="), std::string("c=biws,r=" + nonce), std::string("c=biws,r=" + nonce + ",p=!!"),
        std::string("c=biws,r=other,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        std::string("c=eSws,r=" + nonce + ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        std::string("r=" + nonce + ",c=biws,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        std::string("c=biws,r=" + nonce + ",p=AAAA"), std::string(5000, 'c')}) {
    auto exchange = rfc_exchange();
    ASSERT_TRUE(exchange.on_client_first(kClientFirst).is_ok());
    EXPECT_FALSE(exchange.on_client_final(bad).is_ok()) << bad;
    EXPECT_FALSE(exchange.done());
  }
  // client-final before client-first.
  auto exchange = rfc_exchange();
  EXPECT_FALSE(exchange.on_client_final(kClientFinal).is_ok());
}

TEST(ScramTest, NamesEscapeAndUnescape) {
  EXPECT_EQ(scram_escape_name("a,b=c"), "a=2Cb=3Dc");
  EXPECT_EQ(scram_unescape_name("a=2Cb=3Dc"), "a,b=c");
  EXPECT_FALSE(scram_unescape_name("a=2").has_value());
  EXPECT_FALSE(scram_unescape_name("").has_value());
  EXPECT_EQ(scram_mechanism_from_name("scram-sha-512"), ScramMechanism::kSha512);
  EXPECT_EQ(scram_mechanism_from_name("SHA-256"), ScramMechanism::kSha256);
  EXPECT_FALSE(scram_mechanism_from_name("PLAIN").has_value());
}

class ScramCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-scram-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    open();
  }
  void TearDown() override {
    close();
    std::filesystem::remove_all(dir_);
  }
  void open() {
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    credentials_ = std::make_unique<ScramCredentials>(*store_);
    ASSERT_TRUE(credentials_->start().is_ok());
  }
  void close() {
    credentials_->stop();
    credentials_.reset();
    store_->stop();
    store_.reset();
  }
  template <typename F>
  common::Status wait(F call) {
    std::promise<common::Status> p;
    call([&p](common::Status st) { p.set_value(st); });
    return p.get_future().get();
  }

  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<ScramCredentials> credentials_;
};

TEST_F(ScramCredentialsTest, UpsertFindRemoveAndSurviveARestart) {
  auto c256 = scram_credential(ScramMechanism::kSha256, "pw", "salt1", 4096);
  auto c512 = scram_credential(ScramMechanism::kSha512, "pw", "salt2", 8192);
  const std::string user = "team/a b,c";
  ASSERT_TRUE(wait([&](auto done) { credentials_->upsert(user, c256, done); }).is_ok());
  ASSERT_TRUE(wait([&](auto done) { credentials_->upsert(user, c512, done); }).is_ok());
  ASSERT_TRUE(credentials_->find(user, ScramMechanism::kSha512).has_value());
  EXPECT_EQ(credentials_->find(user, ScramMechanism::kSha256)->stored_key, c256.stored_key);
  EXPECT_EQ(credentials_->users().size(), 1u);
  // Bad input changes nothing.
  auto weak = scram_credential(ScramMechanism::kSha256, "pw", "salt", 1000);
  EXPECT_EQ(wait([&](auto done) { credentials_->upsert(user, weak, done); }).code(),
            common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(wait([&](auto done) { credentials_->upsert("", c256, done); }).code(), common::ErrorCode::kInvalidArgument);
  EXPECT_EQ(wait([&](auto done) { credentials_->remove("nobody", ScramMechanism::kSha256, done); }).code(),
            common::ErrorCode::kNotFound);

  close();
  open();
  auto back = credentials_->user(user);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->credentials.size(), 2u);
  EXPECT_EQ(back->credentials[1].iterations, 8192);
  EXPECT_EQ(back->credentials[1].server_key, c512.server_key);

  ASSERT_TRUE(wait([&](auto done) { credentials_->remove(user, ScramMechanism::kSha256, done); }).is_ok());
  EXPECT_FALSE(credentials_->find(user, ScramMechanism::kSha256).has_value());
  EXPECT_TRUE(credentials_->find(user, ScramMechanism::kSha512).has_value());
  ASSERT_TRUE(wait([&](auto done) { credentials_->remove_user(user, done); }).is_ok());
  EXPECT_TRUE(credentials_->users().empty());
  EXPECT_EQ(wait([&](auto done) { credentials_->remove_user(user, done); }).code(), common::ErrorCode::kNotFound);
}

TEST_F(ScramCredentialsTest, GarbageRecordsFailToDecode) {
  EXPECT_FALSE(decode_scram_user("not a record").is_ok());
  EXPECT_FALSE(decode_scram_user("").is_ok());
}

}  // namespace
}  // namespace magnetar::security
