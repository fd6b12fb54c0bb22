// Spot checks that the schema's numbers, defaults and encodings are the
// public protocol's: clients and the broker agree on these bytes, not names.
#include <gtest/gtest.h>

#include <string>

#include "protocol/pulsar/pulsar_api.pb.h"

namespace magnetar::protocol::pulsar {
namespace {

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

TEST(PulsarApiTest, CommandTypeNumbers) {
  EXPECT_EQ(proto::BaseCommand::CONNECT, 2);
  EXPECT_EQ(proto::BaseCommand::SEND, 6);
  EXPECT_EQ(proto::BaseCommand::MESSAGE, 9);
  EXPECT_EQ(proto::BaseCommand::PING, 18);
  EXPECT_EQ(proto::BaseCommand::LOOKUP, 23);
  EXPECT_EQ(proto::BaseCommand::GET_OR_CREATE_SCHEMA_RESPONSE, 40);
  EXPECT_EQ(proto::BaseCommand::NEW_TXN, 50);
  EXPECT_EQ(proto::BaseCommand::TC_CLIENT_CONNECT_RESPONSE, 63);
  EXPECT_EQ(proto::BaseCommand::TOPIC_MIGRATED, 68);
  EXPECT_EQ(proto::BaseCommand::Type_MAX, 68);
  EXPECT_EQ(proto::ServerError_MAX, proto::ProducerFenced);
  EXPECT_EQ(proto::ProducerFenced, 25);
  EXPECT_EQ(proto::ChecksumError, 9);
  EXPECT_EQ(proto::ProtocolVersion_MAX, 21);
  EXPECT_EQ(proto::SNAPPY, 4);
  EXPECT_EQ(proto::Schema::External, 22);
  EXPECT_EQ(proto::CommandSubscribe::Key_Shared, 3);
}

TEST(PulsarApiTest, DefaultsClientsRelyOn) {
  proto::MessageIdData id;
  EXPECT_EQ(id.partition(), -1);
  EXPECT_EQ(id.batch_index(), -1);
  proto::MessageMetadata meta;
  EXPECT_EQ(meta.num_messages_in_batch(), 1);
  EXPECT_EQ(meta.compression(), proto::NONE);
  proto::CommandSubscribe sub;
  EXPECT_TRUE(sub.durable());
  EXPECT_TRUE(sub.force_topic_creation());
  EXPECT_EQ(sub.initialposition(), proto::CommandSubscribe::Latest);
  proto::CommandProducer producer;
  EXPECT_TRUE(producer.user_provided_producer_name());
  EXPECT_EQ(producer.producer_access_mode(), proto::Shared);
  proto::CommandProducerSuccess ok;
  EXPECT_EQ(ok.last_sequence_id(), -1);
  EXPECT_TRUE(ok.producer_ready());
  proto::CommandSend send;
  EXPECT_EQ(send.num_messages(), 1);
  proto::CommandPartitionedTopicMetadata pm;
  EXPECT_TRUE(pm.metadata_auto_creation_enabled());
  proto::CommandGetTopicsOfNamespaceResponse topics;
  EXPECT_TRUE(topics.changed());
}

TEST(PulsarApiTest, KnownEncodings) {
  // MessageIdData{ledgerId 300, entryId 1, partition 2, batch_index 3, ack_set [-1]}:
  // varints with field numbers 1..5; ack_set unpacked, as Pulsar writes it.
  proto::MessageIdData id;
  id.set_ledgerid(300);
  id.set_entryid(1);
  id.set_partition(2);
  id.set_batch_index(3);
  id.add_ack_set(-1);
  EXPECT_EQ(hex(id.SerializeAsString()), "08ac02" "1001" "1802" "2003" "28ffffffffffffffffff01");

  // CommandFlow is field 11 of BaseCommand: tag (11 << 3 | 2) = 0x5a.
  proto::BaseCommand flow;
  flow.set_type(proto::BaseCommand::FLOW);
  flow.mutable_flow()->set_consumer_id(1);
  flow.mutable_flow()->set_messagepermits(1000);
  EXPECT_EQ(hex(flow.SerializeAsString()), "080b" "5a05" "0801" "10e807");

  // CommandTopicMigrated is field 68: tag (68 << 3 | 2) = 546 = a2 04.
  proto::BaseCommand moved;
  moved.set_type(proto::BaseCommand::TOPIC_MIGRATED);
  moved.mutable_topicmigrated()->set_resource_id(5);
  moved.mutable_topicmigrated()->set_resource_type(proto::CommandTopicMigrated::Consumer);
  EXPECT_EQ(hex(moved.SerializeAsString()), "0844" "a20404" "0805" "1001");

  // BrokerEntryMetadata{broker_timestamp 1, index 2}.
  proto::BrokerEntryMetadata bem;
  bem.set_broker_timestamp(1);
  bem.set_index(2);
  EXPECT_EQ(hex(bem.SerializeAsString()), "0801" "1002");
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
