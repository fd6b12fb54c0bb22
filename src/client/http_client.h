// A small blocking HTTP/1.1 client: one request per connection
// ("Connection: close"), over TCP or TLS (https://), responses parsed by
// http-parser. For the command line and the server's own worker threads
// (geo-replication's configuration sync), never a reactor (it blocks).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "client/transport.h"
#include "common/result.h"

namespace magnetar::client {

struct Url {
  std::string host;   // "localhost", "127.0.0.1", "[::1]" without brackets
  uint16_t port = 80;
  std::string base_path;  // "" or "/prefix" without a trailing '/'
  std::string bearer_token;  // sent as Authorization: Bearer when not empty
  client::TlsOptions tls;    // enabled for https://

  // "http://host[:port][/prefix]" or "https://..." (port 80 or 443 by
  // default). InvalidArgument for anything else.
  static common::Result<Url> parse(std::string_view url);
  std::string to_string() const;
};

struct HttpReply {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// Sends `method` `path` (appended to url.base_path; escaped by the caller)
// with `body` as application/json when not empty, and waits for the whole
// reply. Unavailable when the server cannot be reached, Timeout when it does
// not answer within `timeout`, Corruption for a malformed reply.
common::Result<HttpReply> http_request(const Url& url, std::string_view method, std::string_view path,
                                       std::string_view body = {},
                                       std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Percent-escapes one path segment (everything but unreserved characters).
std::string escape_segment(std::string_view segment);

}  // namespace magnetar::client
