#include "protocol/pulsar/commands.h"

#include <algorithm>
#include <string>

namespace magnetar::protocol::pulsar::commands {

namespace {

proto::BaseCommand of_type(proto::BaseCommand::Type type) {
  proto::BaseCommand c;
  c.set_type(type);
  return c;
}

std::string to_string(std::string_view s) { return std::string(s); }

}  // namespace

int32_t negotiate_protocol_version(int32_t client_version) {
  return std::clamp(client_version, 0, kMaxProtocolVersion);
}

proto::BaseCommand connected(std::string_view server_version, int32_t protocol_version,
                             int32_t max_message_size) {
  auto c = of_type(proto::BaseCommand::CONNECTED);
  auto* body = c.mutable_connected();
  body->set_server_version(to_string(server_version));
  body->set_protocol_version(protocol_version);
  body->set_max_message_size(max_message_size);
  return c;
}

proto::BaseCommand ping() {
  auto c = of_type(proto::BaseCommand::PING);
  c.mutable_ping();
  return c;
}

proto::BaseCommand pong() {
  auto c = of_type(proto::BaseCommand::PONG);
  c.mutable_pong();
  return c;
}

proto::BaseCommand success(uint64_t request_id) {
  auto c = of_type(proto::BaseCommand::SUCCESS);
  c.mutable_success()->set_request_id(request_id);
  return c;
}

proto::BaseCommand error(uint64_t request_id, proto::ServerError code, std::string_view message) {
  auto c = of_type(proto::BaseCommand::ERROR);
  auto* body = c.mutable_error();
  body->set_request_id(request_id);
  body->set_error(code);
  body->set_message(to_string(message));
  return c;
}

proto::MessageIdData message_id(uint64_t ledger_id, uint64_t entry_id, int32_t partition, int32_t batch_index) {
  proto::MessageIdData id;
  id.set_ledgerid(ledger_id);
  id.set_entryid(entry_id);
  if (partition >= 0) id.set_partition(partition);
  if (batch_index >= 0) id.set_batch_index(batch_index);
  return id;
}

proto::BaseCommand producer_success(uint64_t request_id, std::string_view producer_name, int64_t last_sequence_id,
                                    std::string_view schema_version) {
  auto c = of_type(proto::BaseCommand::PRODUCER_SUCCESS);
  auto* body = c.mutable_producer_success();
  body->set_request_id(request_id);
  body->set_producer_name(to_string(producer_name));
  body->set_last_sequence_id(last_sequence_id);
  if (!schema_version.empty()) body->set_schema_version(to_string(schema_version));
  return c;
}

proto::BaseCommand send_receipt(uint64_t producer_id, uint64_t sequence_id, const proto::MessageIdData& id,
                                uint64_t highest_sequence_id) {
  auto c = of_type(proto::BaseCommand::SEND_RECEIPT);
  auto* body = c.mutable_send_receipt();
  body->set_producer_id(producer_id);
  body->set_sequence_id(sequence_id);
  *body->mutable_message_id() = id;
  body->set_highest_sequence_id(highest_sequence_id);
  return c;
}

proto::BaseCommand send_error(uint64_t producer_id, uint64_t sequence_id, proto::ServerError code,
                              std::string_view message) {
  auto c = of_type(proto::BaseCommand::SEND_ERROR);
  auto* body = c.mutable_send_error();
  body->set_producer_id(producer_id);
  body->set_sequence_id(sequence_id);
  body->set_error(code);
  body->set_message(to_string(message));
  return c;
}

proto::BaseCommand lookup_response(uint64_t request_id, std::string_view broker_service_url,
                                   std::string_view broker_service_url_tls,
                                   proto::CommandLookupTopicResponse::LookupType response, bool authoritative) {
  auto c = of_type(proto::BaseCommand::LOOKUP_RESPONSE);
  auto* body = c.mutable_lookuptopicresponse();
  body->set_request_id(request_id);
  body->set_response(response);
  if (!broker_service_url.empty()) body->set_brokerserviceurl(to_string(broker_service_url));
  if (!broker_service_url_tls.empty()) body->set_brokerserviceurltls(to_string(broker_service_url_tls));
  body->set_authoritative(authoritative);
  return c;
}

proto::BaseCommand lookup_error(uint64_t request_id, proto::ServerError code, std::string_view message) {
  auto c = of_type(proto::BaseCommand::LOOKUP_RESPONSE);
  auto* body = c.mutable_lookuptopicresponse();
  body->set_request_id(request_id);
  body->set_response(proto::CommandLookupTopicResponse::Failed);
  body->set_error(code);
  body->set_message(to_string(message));
  return c;
}

proto::BaseCommand partitioned_metadata_response(uint64_t request_id, uint32_t partitions) {
  auto c = of_type(proto::BaseCommand::PARTITIONED_METADATA_RESPONSE);
  auto* body = c.mutable_partitionmetadataresponse();
  body->set_request_id(request_id);
  body->set_response(proto::CommandPartitionedTopicMetadataResponse::Success);
  body->set_partitions(partitions);
  return c;
}

proto::BaseCommand partitioned_metadata_error(uint64_t request_id, proto::ServerError code,
                                              std::string_view message) {
  auto c = of_type(proto::BaseCommand::PARTITIONED_METADATA_RESPONSE);
  auto* body = c.mutable_partitionmetadataresponse();
  body->set_request_id(request_id);
  body->set_response(proto::CommandPartitionedTopicMetadataResponse::Failed);
  body->set_error(code);
  body->set_message(to_string(message));
  return c;
}

proto::BaseCommand message(uint64_t consumer_id, const proto::MessageIdData& id, uint32_t redelivery_count) {
  auto c = of_type(proto::BaseCommand::MESSAGE);
  auto* body = c.mutable_message();
  body->set_consumer_id(consumer_id);
  *body->mutable_message_id() = id;
  if (redelivery_count > 0) body->set_redelivery_count(redelivery_count);
  return c;
}

}  // namespace magnetar::protocol::pulsar::commands
