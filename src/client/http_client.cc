#include "client/http_client.h"

#include <http_parser.h>

#include <charconv>

#include <fmt/format.h>

namespace magnetar::client {

using common::Result;
using common::Status;
using Clock = std::chrono::steady_clock;

Result<Url> Url::parse(std::string_view url) {
  Url u;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
    u.tls.enabled = true;
    u.port = 443;
  } else {
    return Status::invalid_argument("URL '" + std::string(url) + "' must start with http:// or https://");
  }
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    u.base_path = std::string(rest.substr(slash));
    while (!u.base_path.empty() && u.base_path.back() == '/') u.base_path.pop_back();
  }
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return Status::invalid_argument("URL '" + std::string(url) + "' has a bad IPv6 host");
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return Status::invalid_argument("URL '" + std::string(url) + "' has a bad port");
      port = authority.substr(close + 2);
    }
  } else {
    size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return Status::invalid_argument("URL '" + std::string(url) + "' has no host");
  if (!port.empty()) {
    unsigned p = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) {
      return Status::invalid_argument("URL '" + std::string(url) + "' has a bad port");
    }
    u.port = static_cast<uint16_t>(p);
  }
  return u;
}

std::string Url::to_string() const {
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}{}", tls.enabled ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "", port,
                     base_path);
}

std::string escape_segment(std::string_view segment) {
  std::string out;
  for (unsigned char c : segment) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

namespace {

struct ParseState {
  HttpReply reply;
  std::string header_field;
  bool in_value = false;
  bool complete = false;
};

int on_header_field(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<ParseState*>(p->data);
  if (s->in_value) {
    s->header_field.clear();
    s->in_value = false;
  }
  s->header_field.append(at, len);
  return 0;
}

int on_header_value(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<ParseState*>(p->data);
  s->in_value = true;
  std::string name = s->header_field;
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  s->reply.headers[name].append(at, len);
  return 0;
}

int on_body(http_parser* p, const char* at, size_t len) {
  static_cast<ParseState*>(p->data)->reply.body.append(at, len);
  return 0;
}

int on_message_complete(http_parser* p) {
  auto* s = static_cast<ParseState*>(p->data);
  s->reply.status = static_cast<int>(p->status_code);
  s->complete = true;
  return 0;
}

}  // namespace

Result<HttpReply> http_request(const Url& url, std::string_view method, std::string_view path, std::string_view body,
                               std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  auto connected = client::Transport::connect(url.host, url.port, url.tls, timeout);
  if (!connected.is_ok()) {
    return Status(connected.status().code(), "cannot reach " + url.to_string() + ": " + connected.status().message());
  }
  client::Transport& conn = **connected;

  std::string request = fmt::format("{} {}{} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: magnetar-cli\r\n"
                                    "Accept: application/json\r\nConnection: close\r\n",
                                    method, url.base_path, path, url.host, url.port);
  if (!body.empty()) request += "Content-Type: application/json\r\n";
  if (!url.bearer_token.empty()) request += "Authorization: Bearer " + url.bearer_token + "\r\n";
  request += fmt::format("Content-Length: {}\r\n\r\n", body.size());
  request.append(body);

  Status sent = conn.write_all(reinterpret_cast<const uint8_t*>(request.data()), request.size());
  if (!sent.is_ok()) return Status::unavailable(fmt::format("sending to {} failed: {}", url.to_string(), sent.message()));

  http_parser_settings settings;
  http_parser_settings_init(&settings);
  settings.on_header_field = on_header_field;
  settings.on_header_value = on_header_value;
  settings.on_body = on_body;
  settings.on_message_complete = on_message_complete;
  http_parser parser;
  http_parser_init(&parser, HTTP_RESPONSE);
  ParseState state;
  parser.data = &state;

  char buf[16384];
  while (!state.complete) {
    auto got = conn.read_some(reinterpret_cast<uint8_t*>(buf), sizeof(buf));
    if (!got.is_ok() && !conn.at_eof()) {
      return Status::unavailable(fmt::format("reading from {} failed: {}", url.to_string(), got.status().message()));
    }
    size_t n = got.is_ok() ? *got : 0;
    if (got.is_ok() && n == 0) {
      if (!conn.wait_readable(deadline)) {
        return Status::timeout(fmt::format("{} did not answer within {} ms", url.to_string(), timeout.count()));
      }
      continue;
    }
    size_t fed = http_parser_execute(&parser, &settings, buf, n);
    if (parser.http_errno != HPE_OK || fed != n) {
      return Status::corruption(fmt::format("malformed HTTP reply from {}: {}", url.to_string(),
                                            http_errno_description(static_cast<http_errno>(parser.http_errno))));
    }
    if (n == 0) break;  // EOF, already fed to the parser as length 0
  }
  if (!state.complete) return Status::corruption("the connection to " + url.to_string() + " closed mid-reply");
  return std::move(state.reply);
}

}  // namespace magnetar::client
