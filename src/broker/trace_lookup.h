// Looking messages up in a namespace's traces: which traced messages of a
// topic match a query (message id, key, property, producer and time), and
// every event recorded about each, in order.
//
// The look-up reads the whole trace topic (what its retention keeps) and
// keeps the events of the asked topic in memory, at most kMaxEvents.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "broker/policies.h"
#include "broker/trace_record.h"

namespace magnetar::broker {

struct TraceQuery {
  std::optional<ledger::Position> position;  // a message id (ledger:entry)
  std::string key;
  std::string property_name;                 // with property_value
  std::string property_value;
  std::string producer;
  int64_t from_ms = 0;                       // received in [from_ms, to_ms]
  int64_t to_ms = std::numeric_limits<int64_t>::max();
  size_t limit = 100;                        // messages answered at most
  // What the query asks for, for an answer that found nothing
  // ("key 'k'", "message id 1:2", ...).
  std::string describe() const;
};

struct MessageTrace {
  ledger::Position position;
  TraceEvent received;              // its messages carry keys and properties
  int32_t batch_index = -1;         // the batch message that matched; -1: the entry
  std::vector<TraceEvent> stages;   // received first, then in time order
};

struct TraceAnswer {
  std::vector<MessageTrace> messages;
  bool truncated = false;           // more matched than the limit, or the scan stopped at kMaxEvents
  uint64_t events_scanned = 0;
  TraceMode mode = TraceMode::kOff; // the namespace's tracing now
};

class TraceMatcher {
 public:
  static constexpr size_t kMaxEvents = 2'000'000;

  TraceMatcher(std::string topic, TraceQuery query) : topic_(std::move(topic)), query_(std::move(query)) {}
  // Feeds the trace topic's batches, oldest first.
  void add(TraceBatch batch);
  TraceAnswer finish();

 private:
  // The batch message of `received` that matches the query: its index, -1
  // for the whole entry, nullopt when it does not match.
  std::optional<int32_t> match(const TraceEvent& received) const;

  std::string topic_;
  TraceQuery query_;
  std::vector<TraceEvent> events_;       // of topic_
  std::vector<TraceEvent> dead_letters_; // received elsewhere, from topic_
  uint64_t scanned_ = 0;
  bool truncated_ = false;
};

}  // namespace magnetar::broker
