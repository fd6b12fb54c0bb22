#include "protocol/kafka/convert.h"

#include <algorithm>

#include <fmt/format.h>

#include "client/compression.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::kafka {

namespace proto = pulsar::proto;
using common::Slice;
using common::Status;

namespace {

template <typename Metadata>
void record_to_metadata(const Record& r, Metadata* md) {
  if (r.key) {
    md->set_partition_key(r.key->to_string());
  } else {
    md->set_null_partition_key(true);
  }
  if (!r.value) md->set_null_value(true);
  for (const RecordHeader& h : r.headers) {
    auto* kv = md->add_properties();
    kv->set_key(h.key);
    kv->set_value(h.value ? h.value->to_string() : std::string());
  }
  if (r.timestamp > 0) md->set_event_time(static_cast<uint64_t>(r.timestamp));
}

template <typename Metadata>
Record metadata_to_record(const Metadata& md, const Slice& payload, int64_t publish_time, int32_t offset_delta) {
  Record r;
  r.offset_delta = offset_delta;
  r.timestamp = md.event_time() > 0 ? static_cast<int64_t>(md.event_time()) : publish_time;
  if (md.has_partition_key() && !md.null_partition_key()) r.key = Slice::copy_of(md.partition_key());
  if (!md.null_value()) r.value = payload;
  for (const auto& kv : md.properties()) r.headers.push_back(RecordHeader{kv.key(), Slice::copy_of(kv.value())});
  return r;
}

}  // namespace

ConvertedEntry batch_to_entry(const RecordBatch& batch, int64_t publish_time_ms, const std::string& producer_name,
                              uint64_t sequence_id) {
  pulsar::BatchBuilder builder;
  for (const Record& r : batch.records) {
    proto::SingleMessageMetadata md;
    record_to_metadata(r, &md);
    builder.add(std::move(md), r.value ? r.value->view() : std::string_view());
  }
  proto::MessageMetadata md;
  md.set_producer_name(producer_name);
  md.set_sequence_id(sequence_id);
  md.set_publish_time(static_cast<uint64_t>(publish_time_ms));
  md.set_num_messages_in_batch(builder.count());
  Slice payload = builder.finish();
  ConvertedEntry out;
  out.entry = pulsar::encode_entry(md, payload.view());
  out.header.publish_time_ms = publish_time_ms;
  out.header.producer = producer_name;
  out.header.sequence_id = static_cast<int64_t>(sequence_id);
  out.header.messages = static_cast<uint32_t>(batch.records.size());
  const Record& first = batch.records.front();
  if (first.key) out.header.key = first.key->to_string();
  return out;
}

common::Result<std::optional<pulsar::Chunk>> append_entry_as_batch(const ledger::MessageHeader& header,
                                                                   const Slice& entry, WireWriter& out) {
  proto::MessageMetadata md;
  Slice payload;
  MAGNETAR_RETURN_IF_ERROR(client::parse_plain_entry(entry, &md, &payload));
  if (auto chunk = pulsar::chunk_of(md)) return chunk;
  const auto publish_time = static_cast<int64_t>(md.publish_time());
  RecordBatch batch;
  batch.base_offset = header.first_index;
  if (md.has_num_messages_in_batch()) {
    auto messages = pulsar::split_batch(payload, md.num_messages_in_batch());
    if (!messages) return messages.status();
    int32_t delta = 0;
    for (const auto& m : *messages) {
      // Removed by compaction: its offset is a gap, as in a compacted Kafka log.
      if (!m.metadata.compacted_out()) {
        batch.records.push_back(metadata_to_record(m.metadata, m.payload, publish_time, delta));
      }
      ++delta;
    }
    batch.last_offset_delta = delta - 1;
  } else {
    batch.records.push_back(metadata_to_record(md, payload, publish_time, 0));
  }
  if (batch.records.empty()) {
    // An entry that counts messages must show them, or their offsets would
    // hold nothing at all.
    if (header.messages == 0) return std::optional<pulsar::Chunk>();
    return Status::invalid_argument(fmt::format("a batch entry of {} messages holds none", header.messages));
  }
  batch.base_timestamp = batch.records.front().timestamp;
  batch.max_timestamp = batch.base_timestamp;
  for (const Record& r : batch.records) {
    batch.base_timestamp = std::min(batch.base_timestamp, r.timestamp);
    batch.max_timestamp = std::max(batch.max_timestamp, r.timestamp);
  }
  write_record_batch(out, batch);
  return std::optional<pulsar::Chunk>();
}

}  // namespace magnetar::protocol::kafka
