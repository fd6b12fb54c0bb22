// Message tracing: which entries of a topic are traced, and how their
// events reach the namespace's trace topic (trace_record.h).
//
// The decision is made per entry from its position, so every stage (store,
// dispatch, ack) reaches the same answer without keeping any state per
// entry: mode `all` traces every entry, `sampled` those whose position
// hashes below the rate. A topic with tracing off holds no buffer and each
// hook costs one null check.
//
// Events go into the topic's TraceBuffer; the TraceRecorder of the topic's
// home reactor writes each non-empty buffer as one TraceBatch entry to the
// trace topic, every kFlushInterval or as soon as a buffer holds
// kFlushEvents events.
//
// Threads: a TopicTracing, its buffer and its recorder live on the topic's
// home reactor.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/naming.h"
#include "broker/policies.h"
#include "broker/trace_record.h"
#include "common/bytes.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::broker {

// The trace topic of `ns`: persistent://<tenant>/<ns>/__trace.
TopicName trace_topic_of(const NamespaceName& ns);
bool is_trace_topic(const TopicName& topic);

// Reads the keys and properties of the messages of a stored entry (Pulsar's
// wire format). The server sets one from the Pulsar protocol layer; without
// it traces carry the broker header's key only.
using MessageDescriber = std::function<std::vector<TracedMessage>(const common::Slice& payload, uint32_t messages)>;

// Events of one topic not yet written.
struct TraceBuffer {
  std::string topic;        // the traced topic's full name
  TopicName trace_topic;    // where its events go
  std::vector<TraceEvent> events;
};

class TraceRecorder {
 public:
  static constexpr std::chrono::milliseconds kFlushInterval{100};
  static constexpr size_t kFlushEvents = 1024;
  // Appends one encoded TraceBatch to `trace_topic` (from the home reactor;
  // it may post elsewhere).
  using Writer = std::function<void(const TopicName& trace_topic, common::Slice batch)>;

  TraceRecorder(runtime::Reactor& home, Writer writer, const MessageDescriber* describer);
  ~TraceRecorder();

  // A buffer for `topic`'s events, flushed by this recorder until the topic
  // drops it (whatever it still holds is flushed then too).
  std::shared_ptr<TraceBuffer> open(const TopicName& topic);
  // `buffer` got an event: flushes it when full, else makes sure a flush
  // is due.
  void added(TraceBuffer& buffer);
  // Writes every non-empty buffer now.
  void flush();
  // Flushes and cancels the flush timer; later events wait for the next
  // flush() call. On the home reactor, before it stops.
  void stop();
  const MessageDescriber* describer() const { return describer_; }

 private:
  void write(TraceBuffer& buffer);

  runtime::Reactor& home_;
  Writer writer_;
  const MessageDescriber* describer_;
  std::vector<std::shared_ptr<TraceBuffer>> buffers_;
  std::unique_ptr<runtime::Timer> timer_;
  bool stopped_ = false;
};

// A topic's tracing state, shared with its subscriptions.
class TopicTracing {
 public:
  // Applies the namespace's policy (unset: off). REQUIRES: `recorder`
  // outlives this (null: tracing stays off).
  void configure(const TopicName& topic, const std::optional<TracingPolicy>& policy, TraceRecorder* recorder);
  bool on() const { return buffer_ != nullptr; }
  // Whether the entry at `p` is traced. REQUIRES: on().
  bool traced(ledger::Position p) const;
  // Records an event. REQUIRES: on().
  void record(TraceEvent e);
  // The keys and properties of an entry's messages, for its received event.
  std::vector<TracedMessage> describe(const common::Slice& payload, uint32_t messages) const;
  TraceMode mode() const { return mode_; }

 private:
  TraceMode mode_ = TraceMode::kOff;
  uint64_t threshold_ = 0;  // sampled: traced when the position's hash is below it
  std::shared_ptr<TraceBuffer> buffer_;
  TraceRecorder* recorder_ = nullptr;
};

}  // namespace magnetar::broker
