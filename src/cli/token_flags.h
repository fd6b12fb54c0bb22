// --token / --token-file: how client commands (produce, consume, perf,
// admin) prove their role to a node that has authentication on; with them,
// --tls-trust-cert and friends: whom those commands trust over TLS
// (pulsar+ssl:// and https:// URLs).
#pragma once

#include <string>

#include "cli/cli11_fwd.h"
#include "client/pulsar_client.h"
#include "common/result.h"

namespace magnetar::cli {

struct TlsFlags {
  std::string trust_cert;  // PEM CAs for the server's certificate
  bool allow_insecure = false;
  std::string cert_file;   // client certificate (mutual TLS)
  std::string key_file;
  // These settings; TLS itself is on when `enabled` (the URL's scheme says).
  client::TlsOptions options(bool enabled) const;
};

struct TokenFlags {
  std::string token;
  std::string token_file;
  TlsFlags tls;
  // The token to send: --token, else the contents of --token-file
  // (whitespace trimmed), else none ("").
  common::Result<std::string> resolve() const;
};

// Adds --token, --token-file and the TLS flags.
void add_token_flags(CLI::App& cmd, TokenFlags& flags);

// Client options carrying the resolved token and the TLS settings.
common::Result<client::ClientOptions> client_options_of(const TokenFlags& flags);

}  // namespace magnetar::cli
