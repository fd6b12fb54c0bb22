#include "broker/tracing.h"

#include <cmath>

#include "common/logging.h"

namespace magnetar::broker {

namespace {

// splitmix64's finaliser: positions next to each other hash far apart.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

TopicName trace_topic_of(const NamespaceName& ns) {
  TopicName t;
  t.domain = TopicDomain::kPersistent;
  t.ns = ns;
  t.local = std::string(kTraceTopicLocal);
  return t;
}

bool is_trace_topic(const TopicName& topic) {
  return topic.domain == TopicDomain::kPersistent && topic.local == kTraceTopicLocal;
}

// --- TraceRecorder.

TraceRecorder::TraceRecorder(runtime::Reactor& home, Writer writer, const MessageDescriber* describer)
    : home_(home), writer_(std::move(writer)), describer_(describer) {}

TraceRecorder::~TraceRecorder() = default;

std::shared_ptr<TraceBuffer> TraceRecorder::open(const TopicName& topic) {
  auto b = std::make_shared<TraceBuffer>();
  b->topic = topic.to_string();
  b->trace_topic = trace_topic_of(topic.ns);
  buffers_.push_back(b);
  return b;
}

void TraceRecorder::added(TraceBuffer& buffer) {
  if (buffer.events.size() >= kFlushEvents) {
    write(buffer);
    return;
  }
  if (stopped_ || (timer_ && timer_->active())) return;
  if (!timer_) timer_ = std::make_unique<runtime::Timer>(home_);
  timer_->once(kFlushInterval, [this]() { flush(); });
}

void TraceRecorder::write(TraceBuffer& buffer) {
  if (buffer.events.empty()) return;
  common::Slice batch = encode_trace_batch(buffer.topic, buffer.events);
  buffer.events.clear();
  writer_(buffer.trace_topic, std::move(batch));
}

void TraceRecorder::flush() {
  std::vector<std::shared_ptr<TraceBuffer>> kept;
  kept.reserve(buffers_.size());
  for (auto& b : buffers_) {
    write(*b);
    if (b.use_count() > 1) kept.push_back(std::move(b));  // its topic still records into it
  }
  buffers_ = std::move(kept);
}

void TraceRecorder::stop() {
  flush();
  timer_.reset();
  stopped_ = true;
}

// --- TopicTracing.

void TopicTracing::configure(const TopicName& topic, const std::optional<TracingPolicy>& policy,
                             TraceRecorder* recorder) {
  TraceMode mode = policy && recorder != nullptr && !is_trace_topic(topic) ? policy->mode : TraceMode::kOff;
  if (mode == TraceMode::kSampled && policy->rate >= 1.0) mode = TraceMode::kAll;
  mode_ = mode;
  recorder_ = recorder;
  threshold_ = 0;
  if (mode == TraceMode::kSampled) {
    threshold_ = static_cast<uint64_t>(std::ldexp(std::max(0.0, policy->rate), 64));
  }
  if (mode == TraceMode::kOff) {
    // What it still holds is written at the next flush.
    if (buffer_ && !buffer_->events.empty() && recorder_) recorder_->added(*buffer_);
    buffer_.reset();
    return;
  }
  if (!buffer_) buffer_ = recorder->open(topic);
}

bool TopicTracing::traced(ledger::Position p) const {
  if (mode_ == TraceMode::kAll) return true;
  return mix(p.ledger * 0x100000001b3ULL ^ static_cast<uint64_t>(p.entry)) < threshold_;
}

void TopicTracing::record(TraceEvent e) {
  buffer_->events.push_back(std::move(e));
  recorder_->added(*buffer_);
}

std::vector<TracedMessage> TopicTracing::describe(const common::Slice& payload, uint32_t messages) const {
  const MessageDescriber* d = recorder_ ? recorder_->describer() : nullptr;
  if (d == nullptr || !*d) return {};
  return (*d)(payload, messages);
}

}  // namespace magnetar::broker
