#include "ledger/entry_codec.h"

#include <flatbuffers/flatbuffers.h>

#include <cstring>

#include "ledger/records_generated.h"

namespace magnetar::ledger {

using common::Slice;
using common::Status;

Slice encode_entry(const MessageHeader& header, const Slice& payload) {
  flatbuffers::FlatBufferBuilder b(80 + header.producer.size() + header.key.size());
  auto producer = b.CreateString(header.producer);
  flatbuffers::Offset<flatbuffers::String> key;
  if (!header.key.empty()) key = b.CreateString(header.key);
  fb::EntryHeaderBuilder h(b);
  h.add_publish_time_ms(header.publish_time_ms);
  h.add_producer(producer);
  h.add_sequence_id(header.sequence_id);
  h.add_messages(header.messages);
  h.add_first_index(header.first_index);
  if (!header.key.empty()) h.add_key(key);
  if (header.deliver_at_ms != 0) h.add_deliver_at_ms(header.deliver_at_ms);
  if (header.more_chunks) h.add_more_chunks(true);
  if (header.origin_ledger != 0) {
    h.add_origin_ledger(header.origin_ledger);
    h.add_origin_entry(header.origin_entry);
  }
  b.Finish(h.Finish());
  const uint32_t hsize = b.GetSize();
  Slice out = Slice::allocate(4 + hsize + payload.size());
  uint8_t* p = out.mutable_data();
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(hsize >> (8 * i));
  std::memcpy(p + 4, b.GetBufferPointer(), hsize);
  if (!payload.empty()) std::memcpy(p + 4 + hsize, payload.data(), payload.size());
  return out;
}

common::Result<std::pair<MessageHeader, Slice>> decode_entry(const Slice& entry) {
  if (entry.size() < 4) return Status::corruption("entry too short for its header");
  const uint8_t* p = entry.data();
  const uint32_t hsize = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
  if (hsize > entry.size() - 4) return Status::corruption("entry header longer than the entry");
  flatbuffers::Verifier v(p + 4, hsize);
  if (!v.VerifyBuffer<fb::EntryHeader>(nullptr)) return Status::corruption("entry header fails verification");
  auto* h = flatbuffers::GetRoot<fb::EntryHeader>(p + 4);
  MessageHeader header;
  header.publish_time_ms = h->publish_time_ms();
  if (h->producer()) header.producer = h->producer()->str();
  header.sequence_id = h->sequence_id();
  header.messages = h->messages();
  header.first_index = h->first_index();
  if (h->key()) header.key = h->key()->str();
  header.deliver_at_ms = h->deliver_at_ms();
  header.more_chunks = h->more_chunks();
  header.origin_ledger = h->origin_ledger();
  header.origin_entry = h->origin_entry();
  return std::make_pair(std::move(header), entry.sub(4 + hsize));
}

}  // namespace magnetar::ledger
