#include "protocol/pulsar/server/compaction_codec.h"

#include <algorithm>

#include "client/compression.h"
#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {

using common::Result;
using common::Slice;
using common::Status;

namespace {

template <typename Metadata>
broker::CompactionMessage compaction_message(const Metadata& md, size_t payload_size) {
  broker::CompactionMessage m;
  m.has_key = md.has_partition_key() && !md.null_partition_key();
  if (m.has_key) m.key = md.partition_key();
  m.tombstone = md.null_value() || payload_size == 0;
  return m;
}

}  // namespace

Result<std::vector<broker::CompactionMessage>> PulsarCompactionCodec::messages(const Slice& entry) const {
  proto::MessageMetadata md;
  Slice payload;
  MAGNETAR_RETURN_IF_ERROR(client::parse_plain_entry(entry, &md, &payload));
  if (chunk_of(md)) return Status::invalid_argument("one chunk of a message sent in chunks");
  std::vector<broker::CompactionMessage> out;
  if (!md.has_num_messages_in_batch()) {
    out.push_back(compaction_message(md, payload.size()));
    return out;
  }
  out.reserve(static_cast<size_t>(std::max(0, md.num_messages_in_batch())));
  BatchReader reader(payload, md.num_messages_in_batch());
  BatchMessage one;
  while (reader.next(&one)) {
    broker::CompactionMessage m = compaction_message(one.metadata, one.payload.size());
    m.compacted_out = one.metadata.compacted_out();
    out.push_back(std::move(m));
  }
  if (!reader.status().is_ok()) return reader.status();
  return out;
}

Result<Slice> PulsarCompactionCodec::keep_only(const Slice& entry, const std::vector<bool>& keep) const {
  proto::MessageMetadata md;
  Slice payload;
  MAGNETAR_RETURN_IF_ERROR(client::parse_plain_entry(entry, &md, &payload));
  if (!md.has_num_messages_in_batch()) {
    if (keep.size() != 1 || !keep[0]) return Status::invalid_argument("a single message is kept or left out whole");
    return entry;
  }
  auto messages = split_batch(payload, md.num_messages_in_batch());
  if (!messages) return messages.status();
  if (messages->size() != keep.size()) return Status::invalid_argument("keep does not match the batch");
  BatchBuilder batch(payload.size());
  for (size_t i = 0; i < keep.size(); ++i) {
    proto::SingleMessageMetadata m = (*messages)[i].metadata;
    if (keep[i]) {
      batch.add(std::move(m), (*messages)[i].payload.view());
      continue;
    }
    m.set_compacted_out(true);
    batch.add(std::move(m), std::string_view());
  }
  md.set_compression(proto::NONE);
  md.clear_uncompressed_size();
  Slice rebuilt = batch.finish();
  return encode_entry(md, rebuilt.view());
}

}  // namespace magnetar::protocol::pulsar
