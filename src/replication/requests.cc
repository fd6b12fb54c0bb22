#include "replication/requests.h"

#include "cluster/rpc_records.h"
#include "replication/replication_generated.h"

namespace magnetar::replication {

std::string encode_add(LedgerId ledger, EntryId entry, EntryId lac, bool recovery, uint8_t fsync,
                       uint32_t interval_ms, const uint8_t* data, size_t size, bool new_run,
                       const StripeInfo* stripe) {
  flatbuffers::FlatBufferBuilder b(size + 96 + (stripe ? 8 * stripe->ensemble.size() : 0));
  auto bytes = b.CreateVector(data, size);
  flatbuffers::Offset<flatbuffers::Vector<uint64_t>> ensemble;
  if (stripe != nullptr) ensemble = b.CreateVector(stripe->ensemble);
  b.Finish(fb::CreateAddEntry(b, 1, ledger, entry, lac, recovery, fsync, interval_ms, bytes, new_run, ensemble,
                              stripe ? static_cast<uint8_t>(stripe->write_quorum) : uint8_t{0}));
  return cluster::record_bytes(b);
}

std::string restripe_add(const std::string& payload, const StripeInfo& stripe) {
  const auto* a = cluster::verified_record<fb::AddEntry>(payload);
  if (a == nullptr) return payload;
  return encode_add(a->ledger(), a->entry(), a->lac(), a->recovery(), a->fsync(), a->fsync_interval_ms(),
                    a->data() ? a->data()->data() : nullptr, a->data() ? a->data()->size() : 0, a->new_run(),
                    &stripe);
}

std::string encode_read(LedgerId ledger, EntryId first, EntryId last, uint32_t max_bytes) {
  flatbuffers::FlatBufferBuilder b(64);
  b.Finish(fb::CreateReadEntries(b, 1, ledger, first, last, max_bytes));
  return cluster::record_bytes(b);
}

std::string encode_fence(LedgerId ledger, bool fence) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateFence(b, 1, ledger, fence));
  return cluster::record_bytes(b);
}

std::string encode_delete(LedgerId ledger) {
  flatbuffers::FlatBufferBuilder b(32);
  b.Finish(fb::CreateDeleteReplica(b, 1, ledger));
  return cluster::record_bytes(b);
}

common::Status reply_status(uint8_t code, const flatbuffers::String* message) {
  if (code == 0) return common::Status::ok();
  return common::Status(static_cast<common::ErrorCode>(code), message ? message->str() : "");
}

}  // namespace magnetar::replication
