#include "cli/token_flags.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

namespace magnetar::cli {

common::Result<std::string> TokenFlags::resolve() const {
  if (!token.empty()) return token;
  if (token_file.empty()) return std::string();
  std::string path = token_file.rfind("file://", 0) == 0 ? token_file.substr(7) : token_file;
  std::ifstream in(path);
  if (!in) return common::Status::not_found("cannot read token file " + path);
  std::ostringstream s;
  s << in.rdbuf();
  std::string t = s.str();
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  t.erase(t.begin(), std::find_if(t.begin(), t.end(), not_space));
  t.erase(std::find_if(t.rbegin(), t.rend(), not_space).base(), t.end());
  if (t.empty()) return common::Status::invalid_argument("token file " + path + " is empty");
  return t;
}

common::Result<client::ClientOptions> client_options_of(const TokenFlags& flags) {
  auto token = flags.resolve();
  if (!token.is_ok()) return token.status();
  client::ClientOptions options;
  options.token = std::move(*token);
  options.tls = flags.tls.options(false);  // pulsar+ssl:// turns it on
  return options;
}

client::TlsOptions TlsFlags::options(bool enabled) const {
  client::TlsOptions o;
  o.enabled = enabled;
  o.trust_certs_file = trust_cert;
  o.allow_insecure = allow_insecure;
  o.cert_file = cert_file;
  o.key_file = key_file;
  return o;
}

void add_token_flags(CLI::App& cmd, TokenFlags& flags) {
  auto* t = cmd.add_option("--token", flags.token, "Authentication token (JWT) for a node with authentication on");
  cmd.add_option("--token-file", flags.token_file, "Read the authentication token from this file")->excludes(t);
  cmd.add_option("--tls-trust-cert", flags.tls.trust_cert,
                 "PEM CA certificate(s) that sign the server's certificate, for pulsar+ssl:// and https:// URLs "
                 "(default: the system's CAs)");
  cmd.add_flag("--tls-allow-insecure", flags.tls.allow_insecure,
               "Accept any server certificate over TLS (self-signed development setups; not authenticated)");
  cmd.add_option("--tls-cert-file", flags.tls.cert_file, "PEM client certificate for servers that require one");
  cmd.add_option("--tls-key-file", flags.tls.key_file, "PEM private key of --tls-cert-file");
}

}  // namespace magnetar::cli
