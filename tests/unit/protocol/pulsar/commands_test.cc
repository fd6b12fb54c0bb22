#include "protocol/pulsar/commands.h"

#include <gtest/gtest.h>

#include "protocol/pulsar/frame.h"

namespace magnetar::protocol::pulsar {
namespace {

TEST(CommandsTest, NegotiatesTheLowerVersion) {
  EXPECT_EQ(commands::kMaxProtocolVersion, 21);
  EXPECT_EQ(commands::negotiate_protocol_version(6), 6);
  EXPECT_EQ(commands::negotiate_protocol_version(19), 19);
  EXPECT_EQ(commands::negotiate_protocol_version(21), 21);
  EXPECT_EQ(commands::negotiate_protocol_version(99), 21);
  EXPECT_EQ(commands::negotiate_protocol_version(-3), 0);
}

TEST(CommandsTest, ConnectedCarriesVersionAndMaxMessageSize) {
  auto c = commands::connected("Magnetar 0.1.0", 19, 5 * 1024 * 1024);
  ASSERT_TRUE(c.IsInitialized());
  EXPECT_EQ(c.type(), proto::BaseCommand::CONNECTED);
  EXPECT_EQ(c.connected().server_version(), "Magnetar 0.1.0");
  EXPECT_EQ(c.connected().protocol_version(), 19);
  EXPECT_EQ(c.connected().max_message_size(), 5 * 1024 * 1024);
  // {type 3, connected {server_version "m", protocol_version 6, max_message_size 1}}
  auto small = commands::connected("m", 6, 1);
  EXPECT_EQ(encode_command(small).to_string(),
            std::string("\x00\x00\x00\x0f\x00\x00\x00\x0b\x08\x03\x1a\x07\x0a\x01m\x10\x06\x18\x01", 19));
}

TEST(CommandsTest, ErrorsCarryCodeAndMessage) {
  auto e = commands::error(7, proto::AuthorizationError, "not allowed");
  ASSERT_TRUE(e.IsInitialized());
  EXPECT_EQ(e.error().request_id(), 7u);
  EXPECT_EQ(e.error().error(), proto::AuthorizationError);
  EXPECT_EQ(e.error().message(), "not allowed");

  auto s = commands::send_error(1, 2, proto::ChecksumError, "checksum mismatch");
  ASSERT_TRUE(s.IsInitialized());
  EXPECT_EQ(s.type(), proto::BaseCommand::SEND_ERROR);
  EXPECT_EQ(s.send_error().error(), proto::ChecksumError);
  EXPECT_EQ(s.send_error().sequence_id(), 2u);
}

TEST(CommandsTest, ProducerAndSendAnswers) {
  auto p = commands::producer_success(3, "standalone-0-7");
  ASSERT_TRUE(p.IsInitialized());
  EXPECT_EQ(p.producer_success().last_sequence_id(), -1);
  EXPECT_TRUE(p.producer_success().producer_ready());
  EXPECT_FALSE(p.producer_success().has_schema_version());

  auto r = commands::send_receipt(1, 10, commands::message_id(4, 5, 2));
  ASSERT_TRUE(r.IsInitialized());
  EXPECT_EQ(r.send_receipt().message_id().ledgerid(), 4u);
  EXPECT_EQ(r.send_receipt().message_id().entryid(), 5u);
  EXPECT_EQ(r.send_receipt().message_id().partition(), 2);
  EXPECT_EQ(r.send_receipt().message_id().batch_index(), -1);
  EXPECT_FALSE(r.send_receipt().message_id().has_batch_index());
}

TEST(CommandsTest, LookupAndPartitionAnswers) {
  auto l = commands::lookup_response(9, "pulsar://127.0.0.1:6650", "");
  ASSERT_TRUE(l.IsInitialized());
  EXPECT_EQ(l.lookuptopicresponse().response(), proto::CommandLookupTopicResponse::Connect);
  EXPECT_TRUE(l.lookuptopicresponse().authoritative());
  EXPECT_EQ(l.lookuptopicresponse().brokerserviceurl(), "pulsar://127.0.0.1:6650");
  EXPECT_FALSE(l.lookuptopicresponse().has_brokerserviceurltls());

  auto f = commands::lookup_error(9, proto::TopicNotFound, "gone");
  EXPECT_EQ(f.lookuptopicresponse().response(), proto::CommandLookupTopicResponse::Failed);
  EXPECT_EQ(f.lookuptopicresponse().error(), proto::TopicNotFound);

  auto m = commands::partitioned_metadata_response(4, 0);
  ASSERT_TRUE(m.IsInitialized());
  EXPECT_TRUE(m.partitionmetadataresponse().has_partitions());
  EXPECT_EQ(m.partitionmetadataresponse().partitions(), 0u);
  EXPECT_EQ(m.partitionmetadataresponse().response(), proto::CommandPartitionedTopicMetadataResponse::Success);

  auto e = commands::partitioned_metadata_error(4, proto::MetadataError, "down");
  EXPECT_EQ(e.partitionmetadataresponse().response(), proto::CommandPartitionedTopicMetadataResponse::Failed);
}

TEST(CommandsTest, MessageCommandForDispatch) {
  auto m = commands::message(12, commands::message_id(1, 2), 3);
  ASSERT_TRUE(m.IsInitialized());
  EXPECT_EQ(m.message().consumer_id(), 12u);
  EXPECT_EQ(m.message().redelivery_count(), 3u);
  EXPECT_FALSE(commands::message(12, commands::message_id(1, 2)).message().has_redelivery_count());
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
