// HttpSession: the ConnectionHandler behind HttpServer (one per connection).
#pragma once

#include <http_parser.h>

#include <memory>
#include <string>

#include "admin/http_server.h"
#include "runtime/connection.h"

namespace magnetar::admin {

class HttpSession final : public runtime::ConnectionHandler {
 public:
  HttpSession(runtime::Reactor& reactor, const Router& router, HttpLimits limits);
  ~HttpSession() override;

  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

 private:
  // Lives as long as any Responder for this session; touched only on the
  // session's reactor. `session` is cleared when the connection closes.
  struct Link {
    HttpSession* session;
  };

  void parse(runtime::Connection& conn, common::SliceChain& input);
  void parse_input(runtime::Connection& conn, common::SliceChain& input);
  void dispatch(runtime::Connection& conn);
  void send(runtime::Connection& conn, HttpResponse response, bool close_after);
  void reject(runtime::Connection& conn, int status, std::string reason);

  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, const char* at, size_t len);
  static int on_header_field(http_parser* p, const char* at, size_t len);
  static int on_header_value(http_parser* p, const char* at, size_t len);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, size_t len);
  static int on_message_complete(http_parser* p);

  runtime::Reactor& reactor_;
  const Router& router_;
  const HttpLimits limits_;
  http_parser parser_{};
  http_parser_settings settings_{};
  std::shared_ptr<Link> link_;
  runtime::Connection* conn_ = nullptr;
  common::SliceChain* input_ = nullptr;

  // The request being parsed.
  std::unique_ptr<HttpRequest> request_;
  std::string header_field_;
  std::string header_value_;
  bool in_value_ = false;
  size_t header_bytes_ = 0;
  int limit_status_ = 0;  // set by a callback that hit a limit
  bool message_done_ = false;
  bool waiting_ = false;  // a request is with its handler
  bool parsing_ = false;  // inside parse(): a synchronous answer continues its loop
  bool keep_alive_ = true;
  bool head_request_ = false;
};

}  // namespace magnetar::admin
