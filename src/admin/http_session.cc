#include "admin/http_session.h"

#include <fmt/format.h>

#include "common/logging.h"

namespace magnetar::admin {

using common::Slice;

namespace {

// "1.2.3.4" from "1.2.3.4:5678", "::1" from "[::1]:5678".
std::string address_of(const std::string& peer) {
  if (!peer.empty() && peer.front() == '[') {
    size_t close = peer.find(']');
    return close == std::string::npos ? peer : peer.substr(1, close - 1);
  }
  size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

}  // namespace

HttpSession::HttpSession(runtime::Reactor& reactor, const Router& router, HttpLimits limits)
    : reactor_(reactor),
      router_(router),
      limits_(limits),
      parser_(limits),
      link_(std::make_shared<Link>(Link{this})) {}

HttpSession::~HttpSession() { link_->session = nullptr; }

void HttpSession::on_open(runtime::Connection& conn) {
  conn_ = &conn;
  update_deadline();
}

void HttpSession::update_deadline() {
  Deadline want = Deadline::kNone;
  if (conn_ != nullptr && !conn_->closing() && !waiting_) {
    const bool partial = parser_.mid_request() || (input_ != nullptr && !input_->empty());
    want = partial ? Deadline::kRequest : Deadline::kIdle;
  }
  if (want == deadline_) return;  // a request's deadline counts from its first byte
  deadline_ = want;
  if (want == Deadline::kNone) {
    if (deadline_timer_) deadline_timer_->cancel();
    return;
  }
  if (!deadline_timer_) deadline_timer_ = std::make_unique<runtime::Timer>(reactor_);
  const bool request = want == Deadline::kRequest;
  deadline_timer_->once(request ? limits_.request_timeout : limits_.idle_timeout, [this, request]() {
    deadline_ = Deadline::kNone;
    if (conn_ == nullptr || conn_->closing() || waiting_) return;
    if (!request) {
      conn_->close();
      return;
    }
    MLOG_DEBUG("{}: no whole HTTP request within {} ms; closing the connection", conn_->peer(),
               limits_.request_timeout.count());
    head_request_ = false;
    send(*conn_, HttpResponse::error(408, "the request did not arrive in time"), /*close_after=*/true);
  });
}

void HttpSession::on_close(runtime::Connection&, const common::Status& reason) {
  conn_ = nullptr;
  input_ = nullptr;
  deadline_timer_.reset();
  if (!reason.is_ok()) MLOG_DEBUG("http connection closed: {}", reason.to_string());
}

void HttpSession::on_data(runtime::Connection& conn, common::SliceChain& input) {
  conn_ = &conn;
  input_ = &input;
  if (!waiting_) parse(conn, input);
  update_reading(conn, input);
  update_deadline();
}

void HttpSession::update_reading(runtime::Connection& conn, const common::SliceChain& input) {
  const bool hold = waiting_ && input.size() > kMaxHeldInput;
  if (hold == paused_) return;
  paused_ = hold;
  if (hold) {
    conn.pause_reading();
  } else {
    conn.resume_reading();
  }
}

// Stops at a request with its handler and while the connection is not
// writable; the connection calls on_data again once it is.
void HttpSession::parse(runtime::Connection& conn, common::SliceChain& input) {
  parsing_ = true;
  while (!waiting_ && !conn.closing() && conn.writable() && !input.empty()) {
    auto result = parser_.parse(input);
    if (result == HttpRequestParser::Result::kNeedMore) break;
    if (result == HttpRequestParser::Result::kError) {
      MLOG_DEBUG("rejecting HTTP request from {}: {}", conn.peer(), parser_.error_reason());
      head_request_ = false;
      send(conn, HttpResponse::error(parser_.error_status(), parser_.error_reason()), /*close_after=*/true);
      break;
    }
    keep_alive_ = parser_.keep_alive();
    dispatch(parser_.take_request());
  }
  parsing_ = false;
}

void HttpSession::dispatch(std::unique_ptr<HttpRequest> request) {
  waiting_ = true;
  if (conn_ != nullptr && conn_->tls()) request->tls_common_name = conn_->tls_peer_common_name();
  if (conn_ != nullptr) request->client_address = address_of(conn_->peer());
  update_deadline();
  head_request_ = request->method == "HEAD";
  std::weak_ptr<Link> weak = link_;
  runtime::Reactor* home = &reactor_;
  Responder respond([weak, home](HttpResponse response) {
    auto deliver = [weak, response = std::move(response)]() mutable {
      auto link = weak.lock();
      if (!link || link->session == nullptr || link->session->conn_ == nullptr) return;
      HttpSession* s = link->session;
      s->send(*s->conn_, std::move(response), !s->keep_alive_);
    };
    if (home->is_on_thread()) {
      deliver();
    } else {
      home->post_reliably(std::move(deliver));
    }
  });
  router_.dispatch(*request, std::move(respond));
}

void HttpSession::send(runtime::Connection& conn, HttpResponse response, bool close_after) {
  std::string head = fmt::format("HTTP/1.1 {} {}\r\n", response.status, status_reason(response.status));
  if (!response.content_type.empty()) head += fmt::format("Content-Type: {}\r\n", response.content_type);
  for (const auto& [k, v] : response.headers) head += fmt::format("{}: {}\r\n", k, v);
  head += fmt::format("Content-Length: {}\r\n", response.body.size());
  if (close_after) head += "Connection: close\r\n";
  head += "\r\n";
  if (!head_request_) head += response.body;
  conn.write(Slice::copy_of(head));
  waiting_ = false;
  if (close_after) {
    conn.close();
    return;
  }
  // An answer given inside parse() lets its loop go on; one given later
  // resumes the pipelined requests from a fresh stack.
  if (!parsing_ && input_ != nullptr && !input_->empty()) {
    std::weak_ptr<Link> weak = link_;
    reactor_.defer([weak]() {
      auto link = weak.lock();
      if (!link || link->session == nullptr) return;
      HttpSession* s = link->session;
      if (s->conn_ == nullptr || s->waiting_ || s->parsing_) return;
      s->parse(*s->conn_, *s->input_);
      s->update_reading(*s->conn_, *s->input_);
      s->update_deadline();
    });
  } else if (!parsing_ && input_ != nullptr) {
    update_reading(conn, *input_);
  }
  if (!parsing_) update_deadline();
}

}  // namespace magnetar::admin
