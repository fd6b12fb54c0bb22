// HttpSession: the ConnectionHandler behind HttpServer (one per connection).
// Decodes requests with HttpRequestParser, routes them, and writes answers in
// request order.
//
// Back-pressure: one request is with its handler at a time. Meanwhile the
// session stops reading its socket once more than kMaxHeldInput bytes of
// input wait undecoded, and reads again after the answer, so a client that
// pipelines requests is held back by TCP instead of filling the
// connection's input. Decoding also stops while the connection is not
// writable (its output over the high watermark): a client that does not
// read its answers gets no more of them.
//
// Deadlines (HttpLimits): while no request is with its handler, the client
// must send a whole request within request_timeout of its first byte, and a
// connection with nothing under way is closed after idle_timeout.
#pragma once

#include <memory>
#include <string>

#include "admin/http_request_parser.h"
#include "admin/http_server.h"
#include "runtime/connection.h"
#include "runtime/timer.h"

namespace magnetar::admin {

class HttpSession final : public runtime::ConnectionHandler {
 public:
  HttpSession(runtime::Reactor& reactor, const Router& router, HttpLimits limits);
  ~HttpSession() override;

  void on_open(runtime::Connection& conn) override;
  void on_data(runtime::Connection& conn, common::SliceChain& input) override;
  void on_close(runtime::Connection& conn, const common::Status& reason) override;

 private:
  // Lives as long as any Responder for this session; touched only on the
  // session's reactor. `session` is cleared when the session goes away.
  struct Link {
    HttpSession* session;
  };

  // Undecoded input past which the session stops reading while a request
  // is being answered.
  static constexpr size_t kMaxHeldInput = 64 << 10;

  void parse(runtime::Connection& conn, common::SliceChain& input);
  // Stops reading while a request is with its handler and more than
  // kMaxHeldInput bytes wait undecoded; reads again otherwise.
  void update_reading(runtime::Connection& conn, const common::SliceChain& input);
  void dispatch(std::unique_ptr<HttpRequest> request);
  void send(runtime::Connection& conn, HttpResponse response, bool close_after);
  // Arms the deadline that applies now: none while a handler has the
  // request, request_timeout from the first byte of a partial request,
  // idle_timeout with nothing under way.
  void update_deadline();

  enum class Deadline { kNone, kIdle, kRequest };

  runtime::Reactor& reactor_;
  const Router& router_;
  const HttpLimits limits_;
  std::unique_ptr<runtime::Timer> deadline_timer_;
  Deadline deadline_ = Deadline::kNone;
  HttpRequestParser parser_;
  std::shared_ptr<Link> link_;
  runtime::Connection* conn_ = nullptr;     // null once closed
  common::SliceChain* input_ = nullptr;     // the connection's input chain
  bool waiting_ = false;  // a request is with its handler
  bool parsing_ = false;  // inside parse(): a synchronous answer continues its loop
  bool paused_ = false;   // reading stopped by update_reading
  bool keep_alive_ = true;
  bool head_request_ = false;
};

}  // namespace magnetar::admin
