// --token / --token-file: how client commands (produce, consume, perf,
// admin) prove their role to a node that has authentication on.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "client/pulsar_client.h"
#include "common/result.h"

namespace magnetar::cli {

struct TokenFlags {
  std::string token;
  std::string token_file;
  // The token to send: --token, else the contents of --token-file
  // (whitespace trimmed), else none ("").
  common::Result<std::string> resolve() const;
};

void add_token_flags(CLI::App& cmd, TokenFlags& flags);

// Client options carrying the resolved token.
common::Result<client::ClientOptions> client_options_of(const TokenFlags& flags);

}  // namespace magnetar::cli
