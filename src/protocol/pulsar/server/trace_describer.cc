#include "protocol/pulsar/server/trace_describer.h"

#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {

namespace {

// A message's key: Pulsar's ordering key when it has one, else its partition key.
template <typename Metadata>
std::string key_of(const Metadata& md) {
  if (md.has_ordering_key() && !md.ordering_key().empty()) return md.ordering_key();
  return md.has_partition_key() ? md.partition_key() : std::string();
}

template <typename Metadata>
broker::TracedMessage traced(const Metadata& md) {
  broker::TracedMessage m;
  m.key = key_of(md);
  m.properties.reserve(static_cast<size_t>(md.properties_size()));
  for (const auto& kv : md.properties()) m.properties.emplace_back(kv.key(), kv.value());
  return m;
}

}  // namespace

std::vector<broker::TracedMessage> describe_entry(const common::Slice& entry, uint32_t messages) {
  proto::MessageMetadata md;
  common::Slice payload;
  if (!parse_entry(entry, false, &md, &payload).is_ok()) return {};
  std::vector<broker::TracedMessage> out;
  if (!md.has_num_messages_in_batch() || md.compression() != proto::NONE) {
    out.push_back(traced(md));
    return out;
  }
  out.reserve(messages);
  BatchReader reader(payload, md.num_messages_in_batch());
  BatchMessage one;
  while (reader.next(&one)) out.push_back(traced(one.metadata));
  return out;
}

}  // namespace magnetar::protocol::pulsar
