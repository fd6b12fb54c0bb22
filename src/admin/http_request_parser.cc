#include "admin/http_request_parser.h"

#include <fmt/format.h>

#include <cctype>
#include <climits>

namespace magnetar::admin {

HttpRequestParser::HttpRequestParser(HttpLimits limits) : limits_(limits) {
  http_parser_init(&parser_, HTTP_REQUEST);
  parser_.data = this;
  settings_.on_message_begin = &HttpRequestParser::on_message_begin;
  settings_.on_url = &HttpRequestParser::on_url;
  settings_.on_header_field = &HttpRequestParser::on_header_field;
  settings_.on_header_value = &HttpRequestParser::on_header_value;
  settings_.on_headers_complete = &HttpRequestParser::on_headers_complete;
  settings_.on_body = &HttpRequestParser::on_body;
  settings_.on_message_complete = &HttpRequestParser::on_message_complete;
}

void HttpRequestParser::fail(int status, std::string reason) {
  if (error_status_ != 0) return;  // keep the first cause
  error_status_ = status;
  error_reason_ = std::move(reason);
}

HttpRequestParser::Result HttpRequestParser::parse(common::SliceChain& input) {
  while (error_status_ == 0 && !input.empty()) {
    auto view = input.front().view();
    size_t n = http_parser_execute(&parser_, &settings_, view.data(), view.size());
    auto err = HTTP_PARSER_ERRNO(&parser_);
    if (error_status_ != 0) break;  // a callback refused the request
    if (err != HPE_OK && err != HPE_PAUSED) {
      fail(400, fmt::format("malformed HTTP request: {}", http_errno_description(err)));
      break;
    }
    input.consume(n);
    if (err == HPE_PAUSED) http_parser_pause(&parser_, 0);
    if (done_) return Result::kRequest;
  }
  return error_status_ != 0 ? Result::kError : Result::kNeedMore;
}

int HttpRequestParser::on_message_begin(http_parser* p) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  s->request_ = std::make_unique<HttpRequest>();
  s->header_field_.clear();
  s->header_value_.clear();
  s->in_value_ = false;
  s->header_bytes_ = 0;
  return 0;
}

int HttpRequestParser::on_url(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  if (s->request_->target.size() + len > s->limits_.max_url_bytes) {
    s->fail(414, fmt::format("request URL is longer than {} bytes", s->limits_.max_url_bytes));
    return 1;
  }
  s->request_->target.append(at, len);
  return 0;
}

int HttpRequestParser::on_header_field(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  s->header_bytes_ += len;
  if (s->header_bytes_ > s->limits_.max_header_bytes) {
    s->fail(431, fmt::format("request headers are larger than {} bytes", s->limits_.max_header_bytes));
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

int HttpRequestParser::on_header_value(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  s->header_bytes_ += len;
  if (s->header_bytes_ > s->limits_.max_header_bytes) {
    s->fail(431, fmt::format("request headers are larger than {} bytes", s->limits_.max_header_bytes));
    return 1;
  }
  s->in_value_ = true;
  s->header_value_.append(at, len);
  return 0;
}

int HttpRequestParser::on_headers_complete(http_parser* p) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  auto& req = *s->request_;
  if (s->in_value_) req.headers[s->header_field_] = s->header_value_;
  req.method = http_method_str(static_cast<http_method>(p->method));
  if (p->http_major != 1) {
    s->fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    return -1;
  }
  if (p->content_length != ULLONG_MAX && p->content_length > s->limits_.max_body_bytes) {
    s->fail(413, fmt::format("request body is larger than {} bytes", s->limits_.max_body_bytes));
    return -1;
  }
  http_parser_url url;
  http_parser_url_init(&url);
  if (http_parser_parse_url(req.target.data(), req.target.size(), 0, &url) != 0) {
    // The request line was accepted but its target has no path we serve
    // (e.g. "*"); the router answers 404 for it.
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

int HttpRequestParser::on_body(http_parser* p, const char* at, size_t len) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  if (s->request_->body.size() + len > s->limits_.max_body_bytes) {
    s->fail(413, fmt::format("request body is larger than {} bytes", s->limits_.max_body_bytes));
    return 1;
  }
  s->request_->body.append(at, len);
  return 0;
}

int HttpRequestParser::on_message_complete(http_parser* p) {
  auto* s = static_cast<HttpRequestParser*>(p->data);
  s->keep_alive_ = http_should_keep_alive(p) != 0;
  s->done_ = std::move(s->request_);
  http_parser_pause(p, 1);  // one request at a time
  return 0;
}

}  // namespace magnetar::admin
