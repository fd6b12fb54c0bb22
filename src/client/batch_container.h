// BatchContainer: collects a producer's messages into one Pulsar batch.
//
// A batch closes when it holds max_messages, or would pass max_bytes with the
// next message, or max_delay after its first message (the producer's timer
// asks deadline()). A message bigger than max_bytes still goes, alone. The
// sealed batch is the payload of one SEND whose MessageMetadata carries
// num_messages_in_batch; the broker stores it as one entry.
//
// Not thread-safe: the producer guards it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "client/message.h"
#include "protocol/pulsar/batch.h"

namespace magnetar::client {

struct BatchLimits {
  uint32_t max_messages = 1000;
  size_t max_bytes = 128 * 1024;
  std::chrono::microseconds max_delay{1000};  // Pulsar clients' default: 1 ms
};

class BatchContainer {
 public:
  using Clock = std::chrono::steady_clock;

  struct Sealed {
    common::Slice payload;  // the batch, uncompressed
    int32_t count = 0;
    std::vector<SendCallback> callbacks;  // one per message, in order
  };

  explicit BatchContainer(BatchLimits limits) : limits_(limits), builder_(limits.max_bytes + 1024) {}

  bool empty() const { return builder_.count() == 0; }
  int32_t count() const { return builder_.count(); }
  size_t size_bytes() const { return builder_.size_bytes(); }
  // Whether `payload_bytes` more fit; always true when empty.
  bool has_room(size_t payload_bytes) const;
  // Whether the batch must be sent now (max_messages or max_bytes reached).
  bool full() const;
  // When the batch must be sent at the latest. REQUIRES: !empty().
  Clock::time_point deadline() const { return first_added_ + limits_.max_delay; }

  void add(const OutgoingMessage& message, SendCallback done, Clock::time_point now);
  // The batch so far; leaves the container empty. REQUIRES: !empty().
  Sealed seal();

 private:
  BatchLimits limits_;
  protocol::pulsar::BatchBuilder builder_;
  std::vector<SendCallback> callbacks_;
  Clock::time_point first_added_{};
};

}  // namespace magnetar::client
