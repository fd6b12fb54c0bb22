// Trace queries for the broker's tracing tests (broker/trace_lookup.h).
#pragma once

#include <limits>
#include <string>

#include "broker/trace_lookup.h"

namespace magnetar::broker {

inline TraceQuery by_position(ledger::Position p) {
  TraceQuery q;
  q.position = p;
  return q;
}

inline TraceQuery by_key(std::string key) {
  TraceQuery q;
  q.key = std::move(key);
  return q;
}

inline TraceQuery by_property(std::string name, std::string value) {
  TraceQuery q;
  q.property_name = std::move(name);
  q.property_value = std::move(value);
  return q;
}

inline TraceQuery by_producer(std::string producer, int64_t from_ms,
                              int64_t to_ms = std::numeric_limits<int64_t>::max()) {
  TraceQuery q;
  q.producer = std::move(producer);
  q.from_ms = from_ms;
  q.to_ms = to_ms;
  return q;
}

}  // namespace magnetar::broker
