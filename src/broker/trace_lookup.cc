#include "broker/trace_lookup.h"

#include <algorithm>
#include <charconv>
#include <map>

namespace magnetar::broker {

using ledger::Position;

namespace {

// "L:E" at the start of a Pulsar message id string ("L:E:P[:B]").
std::optional<Position> leading_position(std::string_view s) {
  uint64_t ledger = 0;
  int64_t entry = 0;
  auto a = std::from_chars(s.data(), s.data() + s.size(), ledger);
  if (a.ec != std::errc() || a.ptr == s.data() + s.size() || *a.ptr != ':') return std::nullopt;
  auto b = std::from_chars(a.ptr + 1, s.data() + s.size(), entry);
  if (b.ec != std::errc()) return std::nullopt;
  return Position{ledger, entry};
}

const std::string* property(const TracedMessage& m, std::string_view name) {
  for (const auto& [k, v] : m.properties) {
    if (k == name) return &v;
  }
  return nullptr;
}

}  // namespace

std::string TraceQuery::describe() const {
  std::vector<std::string> parts;
  if (position) parts.push_back("message id " + position->to_string());
  if (!key.empty()) parts.push_back("key '" + key + "'");
  if (!property_name.empty()) parts.push_back("property " + property_name + "='" + property_value + "'");
  if (!producer.empty()) parts.push_back("producer '" + producer + "'");
  if (from_ms != 0 || to_ms != std::numeric_limits<int64_t>::max()) parts.push_back("the time window asked");
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

void TraceMatcher::add(TraceBatch batch) {
  scanned_ += batch.events.size();
  if (batch.topic != topic_) {
    // A Pulsar client's dead-letter message names the message it replaces.
    for (auto& e : batch.events) {
      if (e.stage != TraceStage::kReceived) continue;
      for (const auto& m : e.messages) {
        const std::string* real = property(m, "REAL_TOPIC");
        const std::string* origin = property(m, "ORIGIN_MESSAGE_ID");
        if (real == nullptr || origin == nullptr || *real != topic_) continue;
        auto at = leading_position(*origin);
        if (!at) continue;
        TraceEvent d;
        d.stage = TraceStage::kDeadLettered;
        d.time_ms = e.time_ms;
        d.position = *at;
        d.producer = e.producer;
        d.client_address = e.client_address;
        d.protocol = e.protocol;
        d.detail = "republished to " + batch.topic + " as " + e.position.to_string();
        dead_letters_.push_back(std::move(d));
      }
    }
    return;
  }
  if (events_.size() + batch.events.size() > kMaxEvents) {
    truncated_ = true;
    return;
  }
  for (auto& e : batch.events) events_.push_back(std::move(e));
}

std::optional<int32_t> TraceMatcher::match(const TraceEvent& r) const {
  if (query_.position && r.position != *query_.position) return std::nullopt;
  if (!query_.producer.empty() && r.producer != query_.producer) return std::nullopt;
  if (r.time_ms < query_.from_ms || r.time_ms > query_.to_ms) return std::nullopt;
  const bool by_message = !query_.key.empty() || !query_.property_name.empty();
  if (!by_message) return -1;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const TracedMessage& m = r.messages[i];
    if (!query_.key.empty() && m.key != query_.key) continue;
    if (!query_.property_name.empty()) {
      const std::string* v = property(m, query_.property_name);
      if (v == nullptr || *v != query_.property_value) continue;
    }
    return r.messages.size() == 1 ? -1 : static_cast<int32_t>(i);
  }
  return std::nullopt;
}

TraceAnswer TraceMatcher::finish() {
  TraceAnswer out;
  out.events_scanned = scanned_;
  out.truncated = truncated_;
  std::map<Position, size_t> found;  // position -> index in out.messages
  for (const auto& e : events_) {
    if (e.stage != TraceStage::kReceived || found.count(e.position) > 0) continue;
    auto which = match(e);
    if (!which) continue;
    if (out.messages.size() >= query_.limit) {
      out.truncated = true;
      break;
    }
    found[e.position] = out.messages.size();
    MessageTrace m;
    m.position = e.position;
    m.received = e;
    m.batch_index = *which;
    out.messages.push_back(std::move(m));
  }
  if (found.empty()) return out;
  // Every other event about those entries; a range event covers several.
  for (const auto& e : events_) {
    if (e.stage == TraceStage::kReceived) continue;
    if (!e.range) {
      auto it = found.find(e.position);
      if (it != found.end()) out.messages[it->second].stages.push_back(e);
      continue;
    }
    for (auto it = found.upper_bound(e.after); it != found.end() && it->first <= e.position; ++it) {
      out.messages[it->second].stages.push_back(e);
    }
  }
  for (const auto& d : dead_letters_) {
    if (auto it = found.find(d.position); it != found.end()) out.messages[it->second].stages.push_back(d);
  }
  for (auto& m : out.messages) {
    auto& s = m.stages;
    // Events of one topic come in the order they happened; a clock tick
    // holds several, so only the time orders them.
    std::stable_sort(s.begin(), s.end(),
                     [](const TraceEvent& a, const TraceEvent& b) { return a.time_ms < b.time_ms; });
    // A subscription acknowledges a message once: a later cumulative ack or
    // an expiry of a range it was already acknowledged in says nothing new.
    std::vector<TraceEvent> kept;
    std::map<std::string, bool> acked;  // subscription -> acknowledged already
    for (auto& e : s) {
      if (e.stage == TraceStage::kAcked || e.stage == TraceStage::kExpired) {
        bool& done = acked[e.subscription];
        if (done && (e.range || e.stage == TraceStage::kExpired)) continue;
        done = true;
      }
      kept.push_back(std::move(e));
    }
    s.clear();
    s.push_back(m.received);
    for (auto& e : kept) s.push_back(std::move(e));
  }
  return out;
}

}  // namespace magnetar::broker
