// `magnetar tokens`: keys and tokens for token authentication, as `pulsar
// tokens` makes them (the same formats, so keys and tokens move between the
// two):
//   create-secret-key [--output FILE] [--base64]
//   create-key-pair [-a RS256|ES256] --output-private-key F --output-public-key F
//   create (--secret-key URL | --private-key URL) --subject ROLE [--expiry 1h]
//   validate TOKEN (--secret-key URL | --public-key URL) [--json]
//   show TOKEN [--json]
// Keys are named as the server takes them: file:///path, data:;base64,...,
// or a bare path.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <fstream>

#include "cli/admin_cli.h"
#include "cli/commands.h"
#include "common/base64.h"
#include "common/clock.h"
#include "security/jwt.h"

namespace magnetar::cli {

using common::Result;
using common::Status;
using security::TokenKey;

namespace {

int report_failure(const Status& st) {
  fmt::print(stderr, "magnetar tokens: {}\n", st.message());
  return st.code() == common::ErrorCode::kInvalidArgument ? 2 : 1;
}

// Writes `bytes` to `path`, readable by its owner only (keys are secrets).
Status write_private(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::io_error("cannot write " + path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status::io_error("cannot write " + path);
  ::chmod(path.c_str(), 0600);
  return Status::ok();
}

// The signing key: a secret key or a private key.
Result<TokenKey> signing_key(const std::string& secret, const std::string& private_key) {
  if (secret.empty() == private_key.empty()) {
    return Status::invalid_argument("give exactly one of --secret-key and --private-key");
  }
  auto bytes = TokenKey::read_key_bytes(secret.empty() ? private_key : secret);
  if (!bytes.is_ok()) return bytes.status();
  if (!secret.empty()) return TokenKey::secret(std::move(*bytes));
  return TokenKey::private_key(*bytes);
}

Result<TokenKey> verifying_key(const std::string& secret, const std::string& public_key) {
  if (secret.empty() == public_key.empty()) {
    return Status::invalid_argument("give exactly one of --secret-key and --public-key");
  }
  auto bytes = TokenKey::read_key_bytes(secret.empty() ? public_key : secret);
  if (!bytes.is_ok()) return bytes.status();
  if (!secret.empty()) return TokenKey::secret(std::move(*bytes));
  auto key = TokenKey::public_key(*bytes);
  if (key.is_ok()) return key;
  return TokenKey::private_key(*bytes);  // a private key verifies too
}

void print_claims(const security::JwtClaims& c, bool json, bool valid) {
  if (json) {
    nlohmann::json j = {{"subject", c.subject}};
    j["expiresAt"] = c.expires_at ? nlohmann::json(*c.expires_at) : nlohmann::json(nullptr);
    if (valid) j["valid"] = true;
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("subject  {}\n", c.subject);
  if (c.expires_at) {
    fmt::print("expires  {} ({})\n", common::iso8601_utc(*c.expires_at * 1000), *c.expires_at);
  } else {
    fmt::print("expires  never\n");
  }
}

struct TokenArgs {
  std::string output;
  bool base64 = false;
  std::string algorithm = "RS256";
  std::string private_out;
  std::string public_out;
  std::string secret_key;
  std::string private_key;
  std::string public_key;
  std::string subject;
  std::string expiry;
  std::string token;
  bool json = false;
};

}  // namespace

CLI::App* add_tokens_command(CLI::App& app, Command& run) {
  auto a = std::make_shared<TokenArgs>();
  auto* cmd = app.add_subcommand("tokens", "Create keys and tokens for token authentication, as `pulsar tokens` does");
  cmd->require_subcommand(1);
  cmd->footer(
      "Examples:\n"
      "  magnetar tokens create-secret-key --output /etc/magnetar/token.key\n"
      "  magnetar tokens create --secret-key file:///etc/magnetar/token.key --subject admin --expiry 30d\n"
      "  magnetar standalone --authentication-enabled --token-secret-key file:///etc/magnetar/token.key\n");

  auto* secret = cmd->add_subcommand("create-secret-key", "A new random 256-bit secret key for HS256 tokens");
  secret->add_option("-o,--output", a->output, "Write the key's raw bytes to this file (default: print base64)");
  secret->add_flag("--base64", a->base64, "Write the key base64-encoded");
  secret->callback([&run, a]() {
    run = [a]() {
      TokenKey key = TokenKey::generate_secret();
      std::string text = a->base64 || a->output.empty() ? common::base64_encode(key.secret_bytes()) : key.secret_bytes();
      if (a->output.empty()) {
        fmt::print("{}\n", text);
        return 0;
      }
      Status st = write_private(a->output, text);
      if (!st.is_ok()) return report_failure(st);
      fmt::print(stderr, "secret key written to {}\n", a->output);
      return 0;
    };
  });

  auto* pair = cmd->add_subcommand("create-key-pair", "A new key pair for RS256 or ES256 tokens (DER files)");
  pair->add_option("-a,--signature-algorithm", a->algorithm, "RS256 or ES256")->capture_default_str()
      ->transform(CLI::IsMember({"RS256", "ES256"}, CLI::ignore_case));
  pair->add_option("--output-private-key", a->private_out, "File for the private key (signs tokens)")->required();
  pair->add_option("--output-public-key", a->public_out, "File for the public key (the broker's --token-public-key)")
      ->required();
  pair->callback([&run, a]() {
    run = [a]() {
      auto alg = security::parse_algorithm(a->algorithm);
      if (!alg.is_ok()) return report_failure(alg.status());
      auto key = TokenKey::generate_pair(*alg);
      if (!key.is_ok()) return report_failure(key.status());
      auto priv = key->private_der();
      auto pub = key->public_der();
      if (!priv.is_ok()) return report_failure(priv.status());
      if (!pub.is_ok()) return report_failure(pub.status());
      Status st = write_private(a->private_out, *priv);
      if (st.is_ok()) st = write_private(a->public_out, *pub);
      if (!st.is_ok()) return report_failure(st);
      ::chmod(a->public_out.c_str(), 0644);
      fmt::print(stderr, "{} key pair written to {} (private) and {} (public)\n", a->algorithm, a->private_out,
                 a->public_out);
      return 0;
    };
  });

  auto* create = cmd->add_subcommand("create", "A token for a role, signed with a secret or private key");
  create->add_option("--secret-key", a->secret_key, "HS256 secret key: file:///path or data:;base64,...");
  create->add_option("--private-key", a->private_key, "RS256/ES256 private key: file:///path or data:;base64,...");
  create->add_option("-s,--subject", a->subject, "The role the token proves")->required();
  create->add_option("-e,--expiry,--expiry-time", a->expiry, "Valid for this long: 30s, 10m, 1h, 7d, 2w (default: no expiry)");
  create->callback([&run, a]() {
    run = [a]() {
      auto key = signing_key(a->secret_key, a->private_key);
      if (!key.is_ok()) return report_failure(key.status());
      security::JwtClaims claims{a->subject, std::nullopt};
      if (!a->expiry.empty()) {
        auto seconds = parse_duration_seconds(a->expiry);
        if (!seconds.is_ok()) return report_failure(seconds.status());
        claims.expires_at = common::wall_clock_ms() / 1000 + *seconds;
      }
      auto token = security::sign_token(*key, claims);
      if (!token.is_ok()) return report_failure(token.status());
      fmt::print("{}\n", *token);
      return 0;
    };
  });

  auto* validate = cmd->add_subcommand("validate", "Check a token's signature and expiry; exit 1 when invalid");
  validate->add_option("token", a->token, "The token")->required();
  validate->add_option("--secret-key", a->secret_key, "HS256 secret key: file:///path or data:;base64,...");
  validate->add_option("--public-key", a->public_key, "RS256/ES256 public key: file:///path or data:;base64,...");
  validate->add_flag("--json", a->json, "Print JSON for scripts");
  validate->callback([&run, a]() {
    run = [a]() {
      auto key = verifying_key(a->secret_key, a->public_key);
      if (!key.is_ok()) return report_failure(key.status());
      auto claims = security::verify_token(*key, a->token, common::wall_clock_ms() / 1000);
      if (!claims.is_ok()) {
        if (a->json) {
          fmt::print("{}\n", nlohmann::json{{"valid", false}, {"reason", claims.status().message()}}.dump());
        } else {
          fmt::print(stderr, "magnetar tokens: invalid: {}\n", claims.status().message());
        }
        return 1;
      }
      print_claims(*claims, a->json, true);
      return 0;
    };
  });

  auto* show = cmd->add_subcommand("show", "Print a token's subject and expiry without checking its signature");
  show->add_option("token", a->token, "The token")->required();
  show->add_flag("--json", a->json, "Print JSON for scripts");
  show->callback([&run, a]() {
    run = [a]() {
      auto claims = security::decode_token_unverified(a->token);
      if (!claims.is_ok()) return report_failure(Status::invalid_argument(claims.status().message()));
      print_claims(*claims, a->json, false);
      return 0;
    };
  });
  return cmd;
}

}  // namespace magnetar::cli
