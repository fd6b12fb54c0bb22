#include "protocol/amqp/convert.h"

#include <fmt/format.h>

#include "common/base64.h"

#include "client/compression.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::amqp {

namespace proto = pulsar::proto;
using common::Slice;
using common::Status;

namespace {

// One message's metadata (MessageMetadata or SingleMessageMetadata) and
// payload as AMQP delivers it.
template <typename Metadata>
AmqpMessage to_message(const Metadata& md, const Slice& payload) {
  AmqpMessage m;
  m.body = payload;
  if (md.has_partition_key() && !md.null_partition_key()) m.routing_key = md.partition_key();
  std::string raw;
  FieldTable headers;
  for (const auto& kv : md.properties()) {
    if (kv.key() == kExchangeProperty) {
      m.exchange = kv.value();
    } else if (kv.key() == kPropertiesProperty) {
      auto decoded = common::base64_decode(kv.value());
      raw = decoded.is_ok() ? std::move(*decoded) : std::string();
    } else {
      headers.push_back({kv.key(), FieldValue::of_string(kv.value())});
    }
  }
  if (!raw.empty()) {
    Slice stored = Slice::copy_of(raw);
    if (decode_properties(stored).is_ok()) {
      m.properties = std::move(stored);
      return m;
    }
  }
  // Not from AMQP: what Pulsar carries, as AMQP properties.
  BasicProperties p;
  if (!headers.empty()) p.headers = std::move(headers);
  if (md.event_time() > 0) p.timestamp = md.event_time() / 1000;
  WireWriter out(64);
  encode_properties(out, p);
  m.properties = out.finish();
  return m;
}

}  // namespace


PublishedEntry message_to_entry(std::string_view exchange, std::string_view routing_key, const ContentHeader& header,
                                std::string_view body, int64_t publish_time_ms, const std::string& producer_name,
                                uint64_t sequence_id) {
  proto::MessageMetadata md;
  md.set_producer_name(producer_name);
  md.set_sequence_id(sequence_id);
  md.set_publish_time(static_cast<uint64_t>(publish_time_ms));
  md.set_partition_key(std::string(routing_key));
  if (!exchange.empty()) {
    auto* kv = md.add_properties();
    kv->set_key(std::string(kExchangeProperty));
    kv->set_value(std::string(exchange));
  }
  const BasicProperties& p = header.properties;
  if (p.headers) {
    for (const auto& h : *p.headers) {
      if (h.value.type == 'F' || h.value.type == 'A' || h.value.type == 'V' || h.name.rfind("amqp.", 0) == 0) continue;
      auto* kv = md.add_properties();
      kv->set_key(h.name);
      kv->set_value(h.value.to_text());
    }
  }
  // Two bytes are the flags alone: no property set.
  if (header.raw_properties.size() > 2) {
    auto* kv = md.add_properties();
    kv->set_key(std::string(kPropertiesProperty));
    kv->set_value(common::base64_encode(header.raw_properties.view()));
  }
  if (p.timestamp && *p.timestamp > 0) md.set_event_time(*p.timestamp * 1000);
  PublishedEntry out;
  out.entry = pulsar::encode_entry(md, body);
  out.header.publish_time_ms = publish_time_ms;
  out.header.producer = producer_name;
  out.header.sequence_id = static_cast<int64_t>(sequence_id);
  out.header.messages = 1;
  out.header.key = std::string(routing_key);
  return out;
}

Status entry_to_messages(const Slice& entry, std::vector<AmqpMessage>* out) {
  proto::MessageMetadata md;
  Slice payload;
  MAGNETAR_RETURN_IF_ERROR(client::parse_plain_entry(entry, &md, &payload));
  if (auto chunk = pulsar::chunk_of(md)) {
    return Status::unimplemented(fmt::format("chunk {} of {} of Pulsar message {}: AMQP delivers whole messages only",
                                             chunk->id, chunk->count, chunk->uuid));
  }
  if (!md.has_num_messages_in_batch()) {
    out->push_back(to_message(md, payload));
    return Status::ok();
  }
  auto messages = pulsar::split_batch(payload, md.num_messages_in_batch());
  if (!messages) return messages.status();
  for (const auto& m : *messages) out->push_back(to_message(m.metadata, m.payload));
  return Status::ok();
}

}  // namespace magnetar::protocol::amqp
