// Trace records: what the broker writes down about a traced message, and
// the one place that encodes and decodes them.
//
// A namespace with the `tracing` policy on gets a hidden topic,
// persistent://<tenant>/<ns>/__trace, with its own retention. Each of its
// entries is one TraceBatch (trace.fbs): the traced topic's name and the
// events recorded for it since the last flush. Events name the entry they
// are about by position; expiry and cumulative acknowledgements cover a
// range of positions (after `after`, through `position`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "ledger/position.h"

namespace magnetar::broker {

// The local name of a namespace's trace topic. Hidden from topic lists;
// clients can neither produce to it nor subscribe to it.
inline constexpr std::string_view kTraceTopicLocal = "__trace";

enum class TraceStage : uint8_t {
  kReceived,    // a producer's entry reached the topic
  kPersisted,   // ... and was stored (position, durability)
  kDispatched,  // handed to a consumer (redelivery_count > 0: sent again)
  kAcked,       // acknowledged by a subscription (a range: cumulatively)
  kNacked,      // the consumer asked for it again (negative ack or ack timeout)
  kExpired,     // skipped by a subscription's TTL or expiry (a range)
  kRemoved,     // its ledger was removed by retention (a range)
  // Republished to a dead-letter topic by a Pulsar client: never written,
  // found at look-up from the DLQ message's ORIGIN_MESSAGE_ID property.
  kDeadLettered,
};
std::string_view trace_stage_name(TraceStage s);  // "received", "persisted", ...

// One message of a received entry: its key and properties (a batch has one
// per message; the W3C `traceparent` is one of the properties).
struct TracedMessage {
  std::string key;
  std::vector<std::pair<std::string, std::string>> properties;
  bool operator==(const TracedMessage&) const = default;
};

struct TraceEvent {
  TraceStage stage = TraceStage::kReceived;
  int64_t time_ms = 0;
  ledger::Position position;  // the entry, or a range's last entry
  bool range = false;
  ledger::Position after;     // ranges: the first entry covered follows this
  int32_t batch_index = -1;   // one message of a batch; -1: the whole entry (all written today)
  std::string producer;       // received
  int64_t sequence_id = 0;    // received
  std::string subscription;   // dispatched, acked, nacked, expired
  uint64_t consumer_id = 0;
  std::string consumer_name;
  std::string client_address; // the producer's or consumer's "host:port"
  std::string protocol;       // "pulsar", "kafka", ...
  uint32_t redelivery_count = 0;
  std::string detail;         // durability reached, why, ...
  std::vector<TracedMessage> messages;  // received

  // Whether this event is about the entry at `p`.
  bool covers(ledger::Position p) const { return range ? (after < p && p <= position) : p == position; }
  bool operator==(const TraceEvent&) const = default;
};

// An event about the entries after `after` through `last`, stamped now.
TraceEvent range_event(TraceStage stage, ledger::Position after, ledger::Position last, std::string subscription,
                       std::string detail);

struct TraceBatch {
  std::string topic;
  std::vector<TraceEvent> events;
};

common::Slice encode_trace_batch(const std::string& topic, const std::vector<TraceEvent>& events);
// kCorruption for bytes that fail verification or come from a newer format.
common::Result<TraceBatch> decode_trace_batch(const common::Slice& bytes);

}  // namespace magnetar::broker
