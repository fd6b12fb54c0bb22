#include "protocol/pulsar/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <climits>
#include <utility>

#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {

BatchReader::BatchReader(common::Slice payload, int32_t count) : rest_(std::move(payload)), count_(count) {
  if (count_ < 0) {
    status_ = common::Status::invalid_argument(fmt::format("batch claims {} messages", count_));
    done_ = true;
  }
}

bool BatchReader::next(BatchMessage* out) {
  if (done_) return false;
  auto fail = [&](std::string why) {
    status_ = common::Status::invalid_argument(fmt::format("batch message {} of {}: {}", index_, count_, why));
    done_ = true;
    return false;
  };
  if (index_ == count_) {
    done_ = true;
    if (!rest_.empty()) {
      status_ = common::Status::invalid_argument(
          fmt::format("{} bytes follow the last of the batch's {} messages", rest_.size(), count_));
    }
    return false;
  }
  if (rest_.size() < 4) return fail("the batch ends before its metadata size");
  uint32_t metadata_size = common::load_u32_be(rest_.data());
  if (metadata_size > rest_.size() - 4 || metadata_size > INT_MAX) {
    return fail(fmt::format("metadata size {} exceeds the {} bytes left", metadata_size, rest_.size() - 4));
  }
  out->metadata.Clear();
  if (!parse_whole(rest_.data() + 4, metadata_size, &out->metadata)) {
    return fail("metadata is not a valid SingleMessageMetadata");
  }
  const int32_t payload_size = out->metadata.payload_size();
  const size_t left = rest_.size() - 4 - metadata_size;
  if (payload_size < 0 || static_cast<size_t>(payload_size) > left) {
    return fail(fmt::format("payload size {} does not fit the {} bytes left", payload_size, left));
  }
  out->payload = rest_.sub(4 + metadata_size, static_cast<size_t>(payload_size));
  rest_.remove_prefix(4 + metadata_size + static_cast<size_t>(payload_size));
  ++index_;
  return true;
}

common::Result<std::vector<BatchMessage>> split_batch(const common::Slice& payload, int32_t count) {
  BatchReader reader(payload, count);
  std::vector<BatchMessage> messages;
  if (count > 0) messages.reserve(static_cast<size_t>(std::min(count, 4096)));
  BatchMessage m;
  while (reader.next(&m)) messages.push_back(std::move(m));
  if (!reader.status().is_ok()) return reader.status();
  return messages;
}

void BatchBuilder::add(proto::SingleMessageMetadata metadata, std::string_view payload) {
  assert(payload.size() <= INT32_MAX);
  metadata.set_payload_size(static_cast<int32_t>(payload.size()));
  const size_t metadata_size = metadata.ByteSizeLong();
  writer_.put_u32_be(static_cast<uint32_t>(metadata_size));
  size_t at = writer_.skip(metadata_size);
  metadata.SerializeWithCachedSizesToArray(writer_.at(at));
  writer_.append(payload);
  ++count_;
}

common::Slice BatchBuilder::finish() {
  count_ = 0;
  return writer_.finish();
}

std::optional<Chunk> chunk_of(const proto::MessageMetadata& md) {
  if (!md.has_uuid() || !md.has_num_chunks_from_msg() || md.num_chunks_from_msg() <= 1) return std::nullopt;
  return Chunk{md.uuid(), md.chunk_id(), md.num_chunks_from_msg()};
}

}  // namespace magnetar::protocol::pulsar
