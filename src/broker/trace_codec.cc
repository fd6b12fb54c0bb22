// FlatBuffers encoding of trace batches (trace.fbs, trace_record.h).
#include "broker/trace_generated.h"
#include "broker/trace_record.h"
#include "common/clock.h"

namespace magnetar::broker {

using common::Result;
using common::Status;

namespace {

constexpr uint16_t kMaxTraceFormat = 1;  // newest trace format this binary reads

using Builder = flatbuffers::FlatBufferBuilder;

std::string text_of(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

// Names repeat from event to event (producer, subscription, address,
// durability): each is stored once per batch.
flatbuffers::Offset<flatbuffers::String> opt_string(Builder& b, const std::string& s) {
  return s.empty() ? 0 : b.CreateSharedString(s);
}

flatbuffers::Offset<fb::TracedMessage> message(Builder& b, const TracedMessage& m) {
  std::vector<flatbuffers::Offset<fb::TraceProperty>> props;
  props.reserve(m.properties.size());
  for (const auto& [k, v] : m.properties) {
    props.push_back(fb::CreateTraceProperty(b, b.CreateSharedString(k), b.CreateString(v)));
  }
  auto key = opt_string(b, m.key);
  auto list = props.empty() ? 0 : b.CreateVector(props);
  return fb::CreateTracedMessage(b, key, list);
}

flatbuffers::Offset<fb::TraceEvent> event(Builder& b, const TraceEvent& e) {
  flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::TracedMessage>>> messages = 0;
  if (!e.messages.empty()) {
    std::vector<flatbuffers::Offset<fb::TracedMessage>> ms;
    ms.reserve(e.messages.size());
    for (const auto& m : e.messages) ms.push_back(message(b, m));
    messages = b.CreateVector(ms);
  }
  auto producer = opt_string(b, e.producer);
  auto subscription = opt_string(b, e.subscription);
  auto consumer_name = opt_string(b, e.consumer_name);
  auto address = opt_string(b, e.client_address);
  auto protocol = opt_string(b, e.protocol);
  auto detail = opt_string(b, e.detail);
  fb::TraceEventBuilder t(b);
  t.add_stage(static_cast<fb::TraceStage>(e.stage));
  t.add_time_ms(e.time_ms);
  t.add_ledger(e.position.ledger);
  t.add_entry(e.position.entry);
  if (e.range) {
    t.add_range(true);
    t.add_after_ledger(e.after.ledger);
    t.add_after_entry(e.after.entry);
  }
  t.add_batch_index(e.batch_index);
  t.add_producer(producer);
  t.add_sequence_id(e.sequence_id);
  t.add_subscription(subscription);
  t.add_consumer_id(e.consumer_id);
  t.add_consumer_name(consumer_name);
  t.add_client_address(address);
  t.add_protocol(protocol);
  t.add_redelivery_count(e.redelivery_count);
  t.add_detail(detail);
  t.add_messages(messages);
  return t.Finish();
}

}  // namespace

std::string_view trace_stage_name(TraceStage s) {
  switch (s) {
    case TraceStage::kReceived: return "received";
    case TraceStage::kPersisted: return "persisted";
    case TraceStage::kDispatched: return "dispatched";
    case TraceStage::kAcked: return "acked";
    case TraceStage::kNacked: return "nacked";
    case TraceStage::kExpired: return "expired";
    case TraceStage::kRemoved: return "removed";
    case TraceStage::kDeadLettered: return "dead-lettered";
  }
  return "unknown";
}

TraceEvent range_event(TraceStage stage, ledger::Position after, ledger::Position last, std::string subscription,
                       std::string detail) {
  TraceEvent e;
  e.stage = stage;
  e.time_ms = common::wall_clock_ms();
  e.range = true;
  e.after = after;
  e.position = last;
  e.subscription = std::move(subscription);
  e.detail = std::move(detail);
  return e;
}

common::Slice encode_trace_batch(const std::string& topic, const std::vector<TraceEvent>& events) {
  Builder b(256 + events.size() * 96);
  std::vector<flatbuffers::Offset<fb::TraceEvent>> list;
  list.reserve(events.size());
  for (const auto& e : events) list.push_back(event(b, e));
  auto name = b.CreateString(topic);
  auto vec = b.CreateVector(list);
  b.Finish(fb::CreateTraceBatch(b, 1, name, vec));
  return common::Slice::copy_of(b.GetBufferPointer(), b.GetSize());
}

Result<TraceBatch> decode_trace_batch(const common::Slice& bytes) {
  flatbuffers::Verifier v(bytes.data(), bytes.size());
  if (!v.VerifyBuffer<fb::TraceBatch>(nullptr)) return Status::corruption("trace batch fails verification");
  const auto* r = flatbuffers::GetRoot<fb::TraceBatch>(bytes.data());
  if (r->format() > kMaxTraceFormat) {
    return Status::corruption("trace batch has format " + std::to_string(r->format()) +
                              ", newer than this binary reads");
  }
  TraceBatch out;
  out.topic = text_of(r->topic());
  if (r->events() == nullptr) return out;
  out.events.reserve(r->events()->size());
  for (const auto* e : *r->events()) {
    TraceEvent t;
    t.stage = static_cast<TraceStage>(
        std::min<int>(static_cast<int>(e->stage()), static_cast<int>(fb::TraceStage::MAX)));
    t.time_ms = e->time_ms();
    t.position = ledger::Position{e->ledger(), e->entry()};
    t.range = e->range();
    if (t.range) t.after = ledger::Position{e->after_ledger(), e->after_entry()};
    t.batch_index = e->batch_index();
    t.producer = text_of(e->producer());
    t.sequence_id = e->sequence_id();
    t.subscription = text_of(e->subscription());
    t.consumer_id = e->consumer_id();
    t.consumer_name = text_of(e->consumer_name());
    t.client_address = text_of(e->client_address());
    t.protocol = text_of(e->protocol());
    t.redelivery_count = e->redelivery_count();
    t.detail = text_of(e->detail());
    if (e->messages()) {
      for (const auto* m : *e->messages()) {
        TracedMessage tm;
        tm.key = text_of(m->key());
        if (m->properties()) {
          for (const auto* p : *m->properties()) tm.properties.emplace_back(text_of(p->key()), text_of(p->value()));
        }
        t.messages.push_back(std::move(tm));
      }
    }
    out.events.push_back(std::move(t));
  }
  return out;
}

}  // namespace magnetar::broker
