// AMQP messages <-> Pulsar messages: the one place that maps one onto the
// other, so that a Pulsar (or Kafka) client reads what an AMQP client
// published to a queue, and the reverse.
//
//   AMQP message                  Pulsar message (one entry, not batched)
//   body                          payload
//   routing key                   partition_key (Kafka's record key)
//   exchange                      property "amqp.exchange"
//   headers (text-like values)    properties, value as text
//   all properties, exactly       property "amqp.properties": flags and
//                                 properties as on the wire, base64
//   timestamp (seconds)           event_time (ms)
//
// A message that did not come from AMQP (no "amqp.properties") is delivered
// with its Pulsar properties as headers (longstr values), its partition key
// as routing key, and its event time as timestamp. A batch entry delivers
// each of its messages; a compressed one is decompressed first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/status.h"
#include "ledger/entry_codec.h"
#include "protocol/amqp/properties.h"

namespace magnetar::protocol::amqp {

inline constexpr std::string_view kExchangeProperty = "amqp.exchange";
inline constexpr std::string_view kPropertiesProperty = "amqp.properties";

struct PublishedEntry {
  ledger::MessageHeader header;  // messages, key, publish time, sequence id
  common::Slice entry;           // Pulsar's stored entry format
};

// One message as AMQP delivers it.
struct AmqpMessage {
  std::string exchange;
  std::string routing_key;
  common::Slice properties;  // property flags and properties, encoded
  common::Slice body;
};

PublishedEntry message_to_entry(std::string_view exchange, std::string_view routing_key, const ContentHeader& header,
                                std::string_view body, int64_t publish_time_ms, const std::string& producer_name,
                                uint64_t sequence_id);

// Appends the messages of a stored entry's payload (Pulsar's format) to
// `out`. kInvalidArgument/kCorruption when it does not parse or decompress;
// kUnimplemented for one chunk of a message a Pulsar producer sent in
// chunks: AMQP delivers whole messages only.
common::Status entry_to_messages(const common::Slice& entry, std::vector<AmqpMessage>* out);

}  // namespace magnetar::protocol::amqp
