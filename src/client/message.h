// What a client sends and receives: message ids, outgoing messages, and the
// callback that reports a send's outcome.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace magnetar::client {

struct MessageId {
  uint64_t ledger = 0;
  uint64_t entry = 0;
  int32_t batch_index = -1;
  int32_t batch_size = 0;  // messages in the batch when batch_index >= 0 (received messages)
  int32_t partition = -1;  // received messages: the partition of the topic they came from; -1: none
  std::string to_string() const;
};

// What a producer sends besides the payload. Everything optional.
struct OutgoingMessage {
  std::string_view payload;
  std::string_view key;
  const std::map<std::string, std::string>* properties = nullptr;
  uint64_t event_time_ms = 0;
};

using SendCallback = std::function<void(common::Result<MessageId>)>;

}  // namespace magnetar::client
