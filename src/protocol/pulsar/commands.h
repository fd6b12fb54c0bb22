// Builders for the commands a broker sends most, so handlers stay short:
//   conn.write(encode_command(commands::pong()));
// Each returns a BaseCommand with its type and body set and every required
// field filled; encode it with frame.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "protocol/pulsar/pulsar_api.pb.h"

namespace magnetar::protocol::pulsar::commands {

// The newest protocol version this codec knows.
inline constexpr int32_t kMaxProtocolVersion = proto::ProtocolVersion_MAX;

// The version both sides speak: the client's, capped at ours. A client that
// sends none speaks v0.
int32_t negotiate_protocol_version(int32_t client_version);

// Answer to CONNECT. `protocol_version` is the negotiated one;
// `max_message_size` tells the client how big a message may be.
proto::BaseCommand connected(std::string_view server_version, int32_t protocol_version,
                             int32_t max_message_size);

proto::BaseCommand ping();
proto::BaseCommand pong();

proto::BaseCommand success(uint64_t request_id);
proto::BaseCommand error(uint64_t request_id, proto::ServerError code, std::string_view message);

proto::MessageIdData message_id(uint64_t ledger_id, uint64_t entry_id, int32_t partition = -1,
                                int32_t batch_index = -1);

// Answer to PRODUCER. `last_sequence_id` is -1 unless deduplication knows one.
proto::BaseCommand producer_success(uint64_t request_id, std::string_view producer_name,
                                    int64_t last_sequence_id = -1, std::string_view schema_version = {});

// Answers to SEND: stored at `id`, or refused.
proto::BaseCommand send_receipt(uint64_t producer_id, uint64_t sequence_id, const proto::MessageIdData& id,
                                uint64_t highest_sequence_id = 0);
proto::BaseCommand send_error(uint64_t producer_id, uint64_t sequence_id, proto::ServerError code,
                              std::string_view message);

// Answers to LOOKUP: the broker that serves the topic (`Connect`), or one to
// ask instead (`Redirect`), or a failure.
proto::BaseCommand lookup_response(uint64_t request_id, std::string_view broker_service_url,
                                   std::string_view broker_service_url_tls,
                                   proto::CommandLookupTopicResponse::LookupType response =
                                       proto::CommandLookupTopicResponse::Connect,
                                   bool authoritative = true);
proto::BaseCommand lookup_error(uint64_t request_id, proto::ServerError code, std::string_view message);

// Answers to PARTITIONED_METADATA: the partition count (0: not partitioned),
// or a failure.
proto::BaseCommand partitioned_metadata_response(uint64_t request_id, uint32_t partitions);
proto::BaseCommand partitioned_metadata_error(uint64_t request_id, proto::ServerError code,
                                              std::string_view message);

// The command part of a MESSAGE frame, for encode_payload_head/_command.
proto::BaseCommand message(uint64_t consumer_id, const proto::MessageIdData& id, uint32_t redelivery_count = 0);

}  // namespace magnetar::protocol::pulsar::commands
