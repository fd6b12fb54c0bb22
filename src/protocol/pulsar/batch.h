// Batches: many messages in one entry's payload.
//
// A batched payload (MessageMetadata.num_messages_in_batch = N, after
// decompression) is N times: size (4, big-endian) | SingleMessageMetadata |
// payload (SingleMessageMetadata.payload_size bytes).
//
// Pulsar dispatch passes batches through whole; these are for the
// protocols that convert (Kafka, AMQP) and for tests.
//
// Chunks are the other way round: one message too big for an entry, sent as
// several entries (MessageMetadata uuid, chunk_id, num_chunks_from_msg),
// each holding a piece of the (compressed) message's payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "common/status.h"
#include "protocol/pulsar/pulsar_api.pb.h"

namespace magnetar::protocol::pulsar {

struct BatchMessage {
  proto::SingleMessageMetadata metadata;
  common::Slice payload;  // shares the batch's buffer
};

// Walks the messages of one batch in order. Not thread-safe; the reader keeps
// the batch's buffer alive.
class BatchReader {
 public:
  // `payload`: the uncompressed batch; `count`: num_messages_in_batch.
  BatchReader(common::Slice payload, int32_t count);

  // Fills *out with the next message and returns true; returns false at the end
  // or on malformed input, then status() says which (ok at a clean end). The
  // batch must hold exactly `count` messages and nothing after them.
  bool next(BatchMessage* out);
  const common::Status& status() const { return status_; }
  // Messages returned so far.
  int32_t index() const { return index_; }

 private:
  common::Slice rest_;
  int32_t count_;
  int32_t index_ = 0;
  common::Status status_;
  bool done_ = false;
};

// All messages of a batch, or why it is malformed.
common::Result<std::vector<BatchMessage>> split_batch(const common::Slice& payload, int32_t count);

// One chunk of a message its producer sent in chunks. Pulsar consumers put
// the message together from its chunks; the protocols that convert deliver
// whole messages only and leave chunks out.
struct Chunk {
  std::string uuid;      // the message's, shared by its chunks
  int32_t id = 0;        // this chunk's index
  int32_t count = 0;     // chunks in the message
};
// The chunk an entry with this metadata holds; nullopt for a whole message.
std::optional<Chunk> chunk_of(const proto::MessageMetadata& md);

// Builds a batch payload into one buffer. Set num_messages_in_batch to count()
// in the entry's MessageMetadata.
class BatchBuilder {
 public:
  explicit BatchBuilder(size_t initial_capacity = 1024) : writer_(initial_capacity) {}

  // Appends one message; sets metadata.payload_size to payload.size().
  // REQUIRES: payload.size() <= INT32_MAX.
  void add(proto::SingleMessageMetadata metadata, std::string_view payload);

  int32_t count() const { return count_; }
  size_t size_bytes() const { return writer_.size(); }
  // The batch so far; leaves the builder empty for the next batch.
  common::Slice finish();

 private:
  common::BufferWriter writer_;
  int32_t count_ = 0;
};

}  // namespace magnetar::protocol::pulsar
