#include "protocol/amqp/server/topology.h"

#include <algorithm>
#include <climits>

#include <fmt/format.h>

namespace magnetar::protocol::amqp {

using common::Status;

common::Result<ExchangeType> parse_exchange_type(std::string_view name) {
  if (name == "direct") return ExchangeType::kDirect;
  if (name == "fanout") return ExchangeType::kFanout;
  if (name == "topic") return ExchangeType::kTopic;
  if (name == "headers") return ExchangeType::kHeaders;
  return Status::not_found(fmt::format("unknown exchange type '{}'", name));
}

std::string_view exchange_type_name(ExchangeType t) {
  switch (t) {
    case ExchangeType::kDirect: return "direct";
    case ExchangeType::kFanout: return "fanout";
    case ExchangeType::kTopic: return "topic";
    case ExchangeType::kHeaders: return "headers";
  }
  return "direct";
}

common::Result<QueueArguments> parse_queue_arguments(const FieldTable& args) {
  QueueArguments q;
  auto non_negative = [&](std::string_view name, std::optional<int64_t>* out, bool positive) -> Status {
    const FieldValue* v = find_field(args, name);
    if (v == nullptr) return Status::ok();
    if (!v->is_integer() || v->type == 't' || v->i < (positive ? 1 : 0)) {
      return Status::invalid_argument(fmt::format("invalid arg '{}' for queue: {} integer expected", name,
                                                  positive ? "a positive" : "a non-negative"));
    }
    *out = v->i;
    return Status::ok();
  };
  auto text = [&](std::string_view name, std::optional<std::string>* out) -> Status {
    const FieldValue* v = find_field(args, name);
    if (v == nullptr) return Status::ok();
    if (v->type != 'S' && v->type != 'x') {
      return Status::invalid_argument(fmt::format("invalid arg '{}' for queue: a string expected", name));
    }
    *out = v->s;
    return Status::ok();
  };
  std::optional<std::string> type;
  MAGNETAR_RETURN_IF_ERROR(text("x-queue-type", &type));
  if (type && *type != "classic" && *type != "quorum" && *type != "stream") {
    return Status::invalid_argument(
        fmt::format("invalid arg 'x-queue-type' for queue: unknown type '{}' (classic, quorum or stream)", *type));
  }
  if (type && *type == "stream") {
    q.stream = true;
    for (std::string_view refused : {"x-message-ttl", "x-max-length", "x-overflow", "x-dead-letter-exchange",
                                     "x-dead-letter-routing-key", "x-expires", "x-max-priority",
                                     "x-single-active-consumer"}) {
      if (find_field(args, refused) != nullptr) {
        return Status::invalid_argument(fmt::format(
            "invalid arg '{}' for a stream queue: a stream keeps every message until x-max-length-bytes or "
            "x-max-age removes it",
            refused));
      }
    }
    std::optional<int64_t> bytes;
    MAGNETAR_RETURN_IF_ERROR(non_negative("x-max-length-bytes", &bytes, false));
    if (bytes) q.stream_max_bytes = *bytes;
    std::optional<std::string> age;
    MAGNETAR_RETURN_IF_ERROR(text("x-max-age", &age));
    if (age) {
      auto ms = parse_age(*age);
      if (!ms) return Status::invalid_argument("invalid arg 'x-max-age' for queue: " + ms.status().message());
      q.stream_max_age_ms = *ms;
    }
    // Segments are the storage's own; the size is taken and has no effect.
    std::optional<int64_t> segment;
    MAGNETAR_RETURN_IF_ERROR(non_negative("x-stream-max-segment-size-bytes", &segment, true));
    return q;
  }
  MAGNETAR_RETURN_IF_ERROR(non_negative("x-message-ttl", &q.message_ttl_ms, false));
  MAGNETAR_RETURN_IF_ERROR(non_negative("x-max-length", &q.max_length, false));
  MAGNETAR_RETURN_IF_ERROR(non_negative("x-max-length-bytes", &q.max_length_bytes, false));
  std::optional<std::string> overflow;
  MAGNETAR_RETURN_IF_ERROR(text("x-overflow", &overflow));
  if (overflow) {
    if (*overflow == "drop-head") {
      q.overflow = Overflow::kDropHead;
    } else if (*overflow == "reject-publish") {
      q.overflow = Overflow::kRejectPublish;
    } else if (*overflow == "reject-publish-dlx") {
      q.overflow = Overflow::kRejectPublishDlx;
    } else {
      return Status::invalid_argument(fmt::format(
          "invalid arg 'x-overflow' for queue: '{}' is not drop-head, reject-publish or reject-publish-dlx", *overflow));
    }
  }
  if (const FieldValue* v = find_field(args, "x-max-priority")) {
    if (!v->is_integer() || v->type == 't' || v->i < 1 || v->i > 255) {
      return Status::invalid_argument("invalid arg 'x-max-priority' for queue: an integer from 1 to 255 expected");
    }
    q.max_priority = static_cast<uint8_t>(v->i);
    if (q.max_length || q.max_length_bytes) {
      return Status::invalid_argument(
          "x-max-priority with x-max-length or x-max-length-bytes is not served: a priority queue keeps each "
          "level apart");
    }
  }
  if (const FieldValue* v = find_field(args, "x-single-active-consumer")) {
    if (v->type != 't') {
      return Status::invalid_argument("invalid arg 'x-single-active-consumer' for queue: a boolean expected");
    }
    q.single_active_consumer = v->i != 0;
  }
  MAGNETAR_RETURN_IF_ERROR(non_negative("x-expires", &q.expires_ms, true));
  MAGNETAR_RETURN_IF_ERROR(text("x-dead-letter-exchange", &q.dead_letter_exchange));
  MAGNETAR_RETURN_IF_ERROR(text("x-dead-letter-routing-key", &q.dead_letter_routing_key));
  if (q.dead_letter_routing_key && !q.dead_letter_exchange) {
    return Status::invalid_argument("x-dead-letter-routing-key needs x-dead-letter-exchange");
  }
  return q;
}

common::Result<int64_t> parse_age(std::string_view text) {
  constexpr int64_t kSecond = 1000;
  constexpr int64_t kDay = 24 * 3600 * kSecond;
  if (text.size() < 2) return Status::invalid_argument(fmt::format("'{}' is not a duration such as 7D or 12h", text));
  int64_t unit = 0;
  switch (text.back()) {
    case 'Y': unit = 365 * kDay; break;
    case 'M': unit = 30 * kDay; break;
    case 'D': unit = kDay; break;
    case 'h': unit = 3600 * kSecond; break;
    case 'm': unit = 60 * kSecond; break;
    case 's': unit = kSecond; break;
    default: return Status::invalid_argument(fmt::format("'{}' has no unit Y, M, D, h, m or s", text));
  }
  int64_t n = 0;
  for (char c : text.substr(0, text.size() - 1)) {
    if (c < '0' || c > '9' || n > (INT64_MAX / unit - 9) / 10) {
      return Status::invalid_argument(fmt::format("'{}' is not a duration such as 7D or 12h", text));
    }
    n = n * 10 + (c - '0');
  }
  if (n == 0) return Status::invalid_argument(fmt::format("'{}' is not a positive duration", text));
  return n * unit;
}

common::Result<StreamStart> parse_stream_offset(const FieldValue* v, int64_t now_ms) {
  StreamStart start;
  if (v == nullptr) return start;
  if (v->type == 'S' || v->type == 'x') {
    if (v->s == "first") {
      start.kind = StreamStart::Kind::kFirst;
    } else if (v->s == "last") {
      start.kind = StreamStart::Kind::kLast;
    } else if (v->s == "next") {
      start.kind = StreamStart::Kind::kNext;
    } else {
      auto age = parse_age(v->s);
      if (!age) {
        return Status::invalid_argument(fmt::format(
            "invalid arg 'x-stream-offset': '{}' is not first, last, next or an age such as 1h", v->s));
      }
      start.kind = StreamStart::Kind::kTime;
      start.value = now_ms - *age;
    }
    return start;
  }
  if (v->type == 'T') {
    start.kind = StreamStart::Kind::kTime;
    start.value = v->i * 1000;
    return start;
  }
  if (v->is_integer() && v->type != 't') {
    start.kind = StreamStart::Kind::kOffset;
    start.value = std::max<int64_t>(0, v->i);
    return start;
  }
  return Status::invalid_argument(
      "invalid arg 'x-stream-offset': first, last, next, an age, an offset or a timestamp expected");
}

namespace {

// Splits at '.' into views of `s`.
std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    if (dot == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, dot - start));
    start = dot + 1;
  }
}

}  // namespace

bool topic_matches(std::string_view pattern, std::string_view routing_key) {
  const auto p = words(pattern);
  const auto k = words(routing_key);
  // matched[i][j]: p[i..] matches k[j..]; filled from the back, one row kept.
  std::vector<char> next(k.size() + 1, 0), cur(k.size() + 1, 0);
  next[k.size()] = 1;  // empty pattern matches empty key
  for (size_t i = p.size(); i-- > 0;) {
    for (size_t j = k.size() + 1; j-- > 0;) {
      if (p[i] == "#") {
        cur[j] = next[j] || (j < k.size() && cur[j + 1]);
      } else {
        cur[j] = j < k.size() && (p[i] == "*" || p[i] == k[j]) && next[j + 1];
      }
    }
    std::swap(cur, next);
  }
  return next[0] != 0;
}

bool headers_match(const FieldTable& binding_args, const FieldTable* headers) {
  std::string_view mode = "all";
  if (const FieldValue* m = find_field(binding_args, "x-match")) mode = m->s;
  const bool any = mode == "any" || mode == "any-with-x";
  const bool with_x = mode == "all-with-x" || mode == "any-with-x";
  for (const auto& arg : binding_args) {
    if (arg.name.rfind("x-", 0) == 0 && (!with_x || arg.name == "x-match")) continue;
    const FieldValue* h = headers != nullptr ? find_field(*headers, arg.name) : nullptr;
    bool match = false;
    if (h != nullptr) {
      // A void binding value asks for the header's presence; scalars of
      // other encodings (an int of another width, a string as bytes) match
      // when their text is the same; tables and arrays compare whole.
      auto scalar = [](const FieldValue& v) { return v.type != 'F' && v.type != 'A'; };
      match = arg.value.type == 'V' || arg.value == *h ||
              (scalar(arg.value) && scalar(*h) && arg.value.to_text() == h->to_text());
    }
    if (any && match) return true;
    if (!any && !match) return false;
  }
  return !any;
}

Topology::Topology() {
  auto builtin = [&](std::string name, ExchangeType type) {
    ExchangeDef e;
    e.name = std::move(name);
    e.type = type;
    e.durable = true;
    e.builtin = true;
    put_exchange(std::move(e));
  };
  builtin("", ExchangeType::kDirect);
  builtin("amq.direct", ExchangeType::kDirect);
  builtin("amq.fanout", ExchangeType::kFanout);
  builtin("amq.topic", ExchangeType::kTopic);
  builtin("amq.headers", ExchangeType::kHeaders);
  builtin("amq.match", ExchangeType::kHeaders);
}

const ExchangeDef* Topology::exchange(const std::string& name) const {
  auto it = exchanges_.find(name);
  return it == exchanges_.end() ? nullptr : &it->second;
}

const QueueDef* Topology::queue(const std::string& name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

QueueDef* Topology::mutable_queue(const std::string& name) {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

std::vector<Binding> Topology::remove_exchange(const std::string& name) {
  exchanges_.erase(name);
  std::vector<Binding> removed;
  std::erase_if(bindings_, [&](const Binding& b) {
    bool hit = b.source == name || (b.to_exchange && b.destination == name);
    if (hit) removed.push_back(b);
    return hit;
  });
  return removed;
}

std::vector<Binding> Topology::remove_queue(const std::string& name) {
  queues_.erase(name);
  std::vector<Binding> removed;
  std::erase_if(bindings_, [&](const Binding& b) {
    bool hit = !b.to_exchange && b.destination == name;
    if (hit) removed.push_back(b);
    return hit;
  });
  return removed;
}

bool Topology::add_binding(Binding b) {
  if (std::find(bindings_.begin(), bindings_.end(), b) != bindings_.end()) return false;
  bindings_.push_back(std::move(b));
  return true;
}

bool Topology::remove_binding(const Binding& b) {
  auto it = std::find(bindings_.begin(), bindings_.end(), b);
  if (it == bindings_.end()) return false;
  bindings_.erase(it);
  return true;
}

std::pair<std::vector<ExchangeDef>, std::vector<Binding>> Topology::drop_unused_auto_delete(
    std::vector<Binding> removed) {
  std::vector<ExchangeDef> exchanges;
  std::vector<Binding> bindings;
  while (!removed.empty()) {
    Binding b = std::move(removed.back());
    removed.pop_back();
    auto it = exchanges_.find(b.source);
    if (it == exchanges_.end() || !it->second.auto_delete || it->second.builtin) continue;
    const std::string name = b.source;
    if (std::any_of(bindings_.begin(), bindings_.end(), [&](const Binding& x) { return x.source == name; })) continue;
    exchanges.push_back(it->second);
    for (Binding& gone : remove_exchange(name)) {
      removed.push_back(gone);
      bindings.push_back(std::move(gone));
    }
  }
  return {std::move(exchanges), std::move(bindings)};
}

bool Topology::exchange_in_use(const std::string& name) const {
  return std::any_of(bindings_.begin(), bindings_.end(),
                     [&](const Binding& b) { return b.source == name || (b.to_exchange && b.destination == name); });
}

size_t Topology::queue_binding_count(const std::string& queue) const {
  return static_cast<size_t>(std::count_if(bindings_.begin(), bindings_.end(), [&](const Binding& b) {
    return !b.to_exchange && b.destination == queue;
  }));
}

std::vector<std::string> Topology::route(const std::string& exchange, std::string_view routing_key,
                                         const FieldTable* headers) const {
  std::set<std::string> queues;
  if (exchange.empty()) {
    std::string key(routing_key);
    if (queues_.count(key)) queues.insert(std::move(key));
  } else if (const ExchangeDef* e = this->exchange(exchange)) {
    std::set<std::string> visited;
    route_from(*e, routing_key, headers, visited, queues);
  }
  return {queues.begin(), queues.end()};
}

void Topology::route_from(const ExchangeDef& e, std::string_view routing_key, const FieldTable* headers,
                          std::set<std::string>& visited, std::set<std::string>& queues) const {
  if (!visited.insert(e.name).second) return;
  for (const Binding& b : bindings_) {
    if (b.source != e.name) continue;
    bool match = false;
    switch (e.type) {
      case ExchangeType::kDirect: match = b.routing_key == routing_key; break;
      case ExchangeType::kFanout: match = true; break;
      case ExchangeType::kTopic: match = topic_matches(b.routing_key, routing_key); break;
      case ExchangeType::kHeaders: match = headers_match(b.arguments, headers); break;
    }
    if (!match) continue;
    if (!b.to_exchange) {
      if (queues_.count(b.destination)) queues.insert(b.destination);
    } else if (const ExchangeDef* next = exchange(b.destination)) {
      route_from(*next, routing_key, headers, visited, queues);
    }
  }
}

}  // namespace magnetar::protocol::amqp
