#include "admin/http_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/logging.h"

namespace magnetar::admin {

using common::Slice;

HttpSession::HttpSession(runtime::Reactor& reactor, const Router& router, HttpLimits limits)
    : reactor_(reactor), router_(router), limits_(limits), link_(std::make_shared<Link>(Link{this})) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  settings_.on_message_begin = &HttpSession::on_message_begin;
  settings_.on_url = &HttpSession::on_url;
  settings_.on_header_field = &HttpSession::on_header_field;
  settings_.on_header_value = &HttpSession::on_header_value;
  settings_.on_headers_complete = &HttpSession::on_headers_complete;
  settings_.on_body = &HttpSession::on_body;
  settings_.on_message_complete = &HttpSession::on_message_complete;
}

HttpSession::~HttpSession() { link_->session = nullptr; }

void HttpSession::on_close(runtime::Connection&, const common::Status& reason) {
  link_->session = nullptr;
  conn_ = nullptr;
  if (!reason.is_ok()) MLOG_DEBUG("http connection closed: {}", reason.to_string());
}

void HttpSession::on_data(runtime::Connection& conn, common::SliceChain& input) {
  conn_ = &conn;
  input_ = &input;
  if (!waiting_) parse(conn, input);
}

void HttpSession::parse(runtime::Connection& conn, common::SliceChain& input) {
  parsing_ = true;
  parse_input(conn, input);
  parsing_ = false;
}

void HttpSession::parse_input(runtime::Connection& conn, common::SliceChain& input) {
  while (!input.empty() && !waiting_ && !conn.closing()) {
    const Slice& first = input.slices().front();  // front of the live chain
    auto view = first.view();
    size_t n = http_parser_execute(&parser_, &settings_, view.data(), view.size());
    auto err = HTTP_PARSER_ERRNO(&parser_);
    if (limit_status_ == 505) {
      reject(conn, 505, "only HTTP/1.0 and HTTP/1.1 are served");
      return;
    }
    if (limit_status_ != 0) {
      reject(conn, limit_status_, fmt::format("request exceeds a size limit (url {} B, headers {} B, body {} B)",
                                              limits_.max_url_bytes, limits_.max_header_bytes, limits_.max_body_bytes));
      return;
    }
    if (err != HPE_OK && err != HPE_PAUSED) {
      reject(conn, 400, fmt::format("malformed HTTP request: {}", http_errno_description(err)));
      return;
    }
    input.consume(n);
    if (err == HPE_PAUSED) {
      http_parser_pause(&parser_, 0);
    }
    if (message_done_) {
      message_done_ = false;
      dispatch(conn);
    }
  }
}

void HttpSession::dispatch(runtime::Connection& conn) {
  waiting_ = true;
  keep_alive_ = http_should_keep_alive(&parser_) != 0;
  auto request = std::move(request_);
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
      home->post_or_wait(std::move(deliver));
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
  // A response given inside parse() lets its loop go on; one given later
  // resumes parsing the pipelined requests from a fresh stack.
  if (!parsing_ && input_ != nullptr && !input_->empty()) {
    std::weak_ptr<Link> weak = link_;
    reactor_.defer([weak]() {
      auto link = weak.lock();
      if (!link || link->session == nullptr) return;
      HttpSession* s = link->session;
      if (s->conn_ != nullptr && !s->waiting_ && !s->parsing_) s->parse(*s->conn_, *s->input_);
    });
  }
}

void HttpSession::reject(runtime::Connection& conn, int status, std::string reason) {
  MLOG_DEBUG("rejecting HTTP request from {}: {}", conn.peer(), reason);
  head_request_ = false;
  send(conn, HttpResponse::error(status, std::move(reason)), /*close_after=*/true);
}

int HttpSession::on_message_begin(http_parser* p) {
  auto* s = static_cast<HttpSession*>(p->data);
  s->request_ = std::make_unique<HttpRequest>();
  s->header_field_.clear();
  s->header_value_.clear();
  s->in_value_ = false;
  s->header_bytes_ = 0;
  return 0;
}

int HttpSession::on_url(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpSession*>(p->data);
  if (s->request_->target.size() + len > s->limits_.max_url_bytes) {
    s->limit_status_ = 414;
    return 1;
  }
  s->request_->target.append(at, len);
  return 0;
}

int HttpSession::on_header_field(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpSession*>(p->data);
  s->header_bytes_ += len;
  if (s->header_bytes_ > s->limits_.max_header_bytes) {
    s->limit_status_ = 431;
    return 1;
  }
  if (s->in_value_) {
    s->request_->headers[s->header_field_] = s->header_value_;
    s->header_field_.clear();
    s->header_value_.clear();
    s->in_value_ = false;
  }
  for (size_t i = 0; i < len; ++i) {
    s->header_field_ += static_cast<char>(std::tolower(static_cast<unsigned char>(at[i])));
  }
  return 0;
}

int HttpSession::on_header_value(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpSession*>(p->data);
  s->header_bytes_ += len;
  if (s->header_bytes_ > s->limits_.max_header_bytes) {
    s->limit_status_ = 431;
    return 1;
  }
  s->in_value_ = true;
  s->header_value_.append(at, len);
  return 0;
}

int HttpSession::on_headers_complete(http_parser* p) {
  auto* s = static_cast<HttpSession*>(p->data);
  auto& req = *s->request_;
  if (s->in_value_) req.headers[s->header_field_] = s->header_value_;
  req.method = http_method_str(static_cast<http_method>(p->method));
  if (p->http_major != 1) {
    s->limit_status_ = 505;
    return -1;
  }
  if (p->content_length != ULLONG_MAX && p->content_length > s->limits_.max_body_bytes) {
    s->limit_status_ = 413;
    return -1;
  }
  http_parser_url url;
  http_parser_url_init(&url);
  if (http_parser_parse_url(req.target.data(), req.target.size(), 0, &url) != 0) {
    // http_parser checked the request line already; a target it accepted
    // but cannot split (e.g. "*") has no path we serve.
    req.path = req.target;
    return 0;
  }
  if (url.field_set & (1 << UF_PATH)) {
    req.path = req.target.substr(url.field_data[UF_PATH].off, url.field_data[UF_PATH].len);
  }
  if (url.field_set & (1 << UF_QUERY)) {
    std::string_view q(req.target.data() + url.field_data[UF_QUERY].off, url.field_data[UF_QUERY].len);
    while (!q.empty()) {
      size_t amp = q.find('&');
      std::string_view pair = q.substr(0, amp);
      q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
      if (pair.empty()) continue;
      size_t eq = pair.find('=');
      std::string key, value;
      if (!percent_decode(pair.substr(0, eq), key, true)) continue;
      if (eq != std::string_view::npos && !percent_decode(pair.substr(eq + 1), value, true)) continue;
      req.query[key] = value;
    }
  }
  return 0;
}

int HttpSession::on_body(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpSession*>(p->data);
  if (s->request_->body.size() + len > s->limits_.max_body_bytes) {
    s->limit_status_ = 413;
    return 1;
  }
  s->request_->body.append(at, len);
  return 0;
}

int HttpSession::on_message_complete(http_parser* p) {
  auto* s = static_cast<HttpSession*>(p->data);
  s->message_done_ = true;
  http_parser_pause(p, 1);
  return 0;
}

}  // namespace magnetar::admin
