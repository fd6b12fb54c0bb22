// HttpRequestParser: bytes in, HTTP/1.x requests out (http-parser underneath).
//
// Incremental: feed it a connection's input chain as bytes arrive; it
// consumes what it parsed and stops after each complete request so the caller
// can answer before the next one (pipelining). Never throws; any input either
// yields requests or one error with the HTTP status to answer it with.
#pragma once

#include <http_parser.h>

#include <chrono>
#include <memory>
#include <string>

#include "admin/http_message.h"
#include "common/bytes.h"

namespace magnetar::admin {

struct HttpLimits {
  size_t max_url_bytes = 8 << 10;
  size_t max_header_bytes = 64 << 10;
  size_t max_body_bytes = 16 << 20;
  // A request must arrive whole (headers and body) within this long of its
  // first byte, else 408 and the connection is closed (a client trickling
  // bytes cannot hold a connection forever).
  std::chrono::milliseconds request_timeout{30000};
  // A connection with no request under way is closed after this long.
  std::chrono::milliseconds idle_timeout{120000};
};

class HttpRequestParser {
 public:
  enum class Result {
    kNeedMore,  // all input consumed, no complete request yet
    kRequest,   // a request is ready: take_request()
    kError,     // the stream is unusable: answer error_status() and close
  };

  explicit HttpRequestParser(HttpLimits limits);
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Consumes bytes from the front of `input` up to the end of the next
  // complete request. After kError every later call returns kError.
  Result parse(common::SliceChain& input);

  // REQUIRES: the last parse() returned kRequest.
  std::unique_ptr<HttpRequest> take_request() { return std::move(done_); }
  // Whether the connection may carry another request after the one taken.
  bool keep_alive() const { return keep_alive_; }
  int error_status() const { return error_status_; }
  // Whether part of a request has been read (its first byte and not yet its end).
  bool mid_request() const { return request_ != nullptr; }
  const std::string& error_reason() const { return error_reason_; }

 private:
  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, const char* at, size_t len);
  static int on_header_field(http_parser* p, const char* at, size_t len);
  static int on_header_value(http_parser* p, const char* at, size_t len);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t len);
  static int on_message_complete(http_parser* p);
  void fail(int status, std::string reason);

  const HttpLimits limits_;
  http_parser parser_{};
  http_parser_settings settings_{};
  std::unique_ptr<HttpRequest> request_;  // being parsed
  std::unique_ptr<HttpRequest> done_;     // complete, not yet taken
  std::string header_field_;
  std::string header_value_;
  bool in_value_ = false;
  size_t header_bytes_ = 0;
  bool keep_alive_ = true;
  int error_status_ = 0;
  std::string error_reason_;
};

}  // namespace magnetar::admin
