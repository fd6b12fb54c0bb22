#include "protocol/pulsar/frame.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "protocol/pulsar/commands.h"

namespace magnetar::protocol::pulsar {
namespace {

using common::Slice;
using common::SliceChain;
using common::Status;

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int v : b) s.push_back(static_cast<char>(v));
  return s;
}

SliceChain chain_of(std::string_view s) {
  SliceChain c;
  c.append(Slice::copy_of(s));
  return c;
}

proto::BaseCommand send_command(uint64_t producer_id, uint64_t sequence_id) {
  proto::BaseCommand c;
  c.set_type(proto::BaseCommand::SEND);
  c.mutable_send()->set_producer_id(producer_id);
  c.mutable_send()->set_sequence_id(sequence_id);
  return c;
}

proto::MessageMetadata metadata(std::string producer, uint64_t sequence_id, uint64_t publish_time) {
  proto::MessageMetadata m;
  m.set_producer_name(std::move(producer));
  m.set_sequence_id(sequence_id);
  m.set_publish_time(publish_time);
  return m;
}

// SEND{producer_id 1, sequence_id 2} with metadata {"p", 2, 3} and payload
// "hi", written out by hand from the protocol's layout.
const std::string kSendFrame = bytes({
    0x00, 0x00, 0x00, 0x1f,                          // totalSize 31
    0x00, 0x00, 0x00, 0x08,                          // commandSize 8
    0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02,  // type SEND, send{1, 2}
    0x0e, 0x01,                                      // checksum magic
    0x41, 0x95, 0x52, 0x13,                          // CRC32C of what follows
    0x00, 0x00, 0x00, 0x07,                          // metadataSize 7
    0x0a, 0x01, 'p', 0x10, 0x02, 0x18, 0x03,         // producer_name, sequence_id, publish_time
    'h', 'i'});

TEST(FrameTest, PingIsThirteenKnownBytes) {
  Slice frame = encode_command(commands::ping());
  // totalSize 9, commandSize 5, {type: PING (18), ping (field 18): empty}.
  EXPECT_EQ(frame.to_string(), bytes({0, 0, 0, 9, 0, 0, 0, 5, 0x08, 0x12, 0x92, 0x01, 0x00}));
  Frame out;
  Status why;
  ASSERT_EQ(decode_frame(frame, {}, &out, &why), DecodeResult::kFrame);
  EXPECT_EQ(out.command.type(), proto::BaseCommand::PING);
  EXPECT_FALSE(out.has_payload);
}

TEST(FrameTest, PingWithoutBodyIsAccepted) {
  // Some clients send only the type for PING and PONG: ten bytes.
  SliceChain in = chain_of(bytes({0, 0, 0, 6, 0, 0, 0, 2, 0x08, 0x13}));
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame);
  EXPECT_EQ(out.command.type(), proto::BaseCommand::PONG);
  EXPECT_TRUE(in.empty());
}

TEST(FrameTest, SendFrameMatchesHandWrittenBytes) {
  Slice frame = encode_payload_command(send_command(1, 2), metadata("p", 2, 3), "hi");
  EXPECT_EQ(frame.to_string(), kSendFrame);

  SliceChain in = chain_of(kSendFrame);
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame) << decoder.status().to_string();
  EXPECT_EQ(out.command.send().producer_id(), 1u);
  EXPECT_EQ(out.command.send().sequence_id(), 2u);
  EXPECT_TRUE(out.has_payload);
  EXPECT_TRUE(out.has_checksum);
  EXPECT_FALSE(out.has_broker_entry_metadata);
  EXPECT_EQ(out.metadata.producer_name(), "p");
  EXPECT_EQ(out.metadata.publish_time(), 3u);
  EXPECT_EQ(out.payload.to_string(), "hi");
  EXPECT_EQ(out.entry.to_string(), kSendFrame.substr(16));
}

TEST(FrameTest, PayloadStaysInTheInputBuffer) {
  Slice input = Slice::copy_of(kSendFrame);
  SliceChain in;
  in.append(input);
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame);
  EXPECT_EQ(out.payload.buffer(), input.buffer());
  EXPECT_EQ(out.payload.data(), input.data() + kSendFrame.size() - 2);
  EXPECT_EQ(out.entry.buffer(), input.buffer());
}

TEST(FrameTest, EntryWithoutChecksumFromOldClients) {
  // Before protocol v6 the metadata size follows the command directly.
  std::string frame = bytes({0, 0, 0, 0x19, 0, 0, 0, 8, 0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02});
  frame += kSendFrame.substr(22);  // metadataSize | metadata | payload
  SliceChain in = chain_of(frame);
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame) << decoder.status().to_string();
  EXPECT_FALSE(out.has_checksum);
  EXPECT_EQ(out.metadata.producer_name(), "p");
  EXPECT_EQ(out.payload.to_string(), "hi");
}

TEST(FrameTest, MessageWithBrokerEntryMetadataRoundTrips) {
  proto::BrokerEntryMetadata bem;
  bem.set_broker_timestamp(1700000000000);
  bem.set_index(41);
  auto cmd = commands::message(7, commands::message_id(3, 4), 2);
  auto meta = metadata("producer-a", 9, 1234);
  meta.set_partition_key("k");
  Slice frame = encode_payload_command(cmd, meta, "payload bytes", &bem);
  // The magic 0x0e02 follows the command.
  size_t command_size = cmd.ByteSizeLong();
  EXPECT_EQ(static_cast<uint8_t>(frame.data()[8 + command_size]), 0x0e);
  EXPECT_EQ(static_cast<uint8_t>(frame.data()[9 + command_size]), 0x02);

  Frame out;
  Status why;
  ASSERT_EQ(decode_frame(frame, {}, &out, &why), DecodeResult::kFrame) << why.to_string();
  EXPECT_EQ(out.command.SerializeAsString(), cmd.SerializeAsString());
  ASSERT_TRUE(out.has_broker_entry_metadata);
  EXPECT_EQ(out.broker_entry_metadata.index(), 41u);
  EXPECT_EQ(out.broker_entry_metadata.broker_timestamp(), 1700000000000u);
  EXPECT_EQ(out.metadata.SerializeAsString(), meta.SerializeAsString());
  EXPECT_EQ(out.payload.to_string(), "payload bytes");
  // What follows the broker entry metadata is the plain entry.
  EXPECT_EQ(out.entry.to_string(), encode_entry(meta, "payload bytes").to_string());
}

TEST(FrameTest, HeadPlusStoredEntryIsTheWholeFrame) {
  auto meta = metadata("p", 1, 2);
  Slice entry = encode_entry(meta, std::string(1000, 'x'));
  auto cmd = commands::message(1, commands::message_id(5, 6, 0));
  for (bool with_bem : {false, true}) {
    proto::BrokerEntryMetadata bem;
    bem.set_index(77);
    const proto::BrokerEntryMetadata* b = with_bem ? &bem : nullptr;
    Slice head = encode_payload_head(cmd, entry.size(), b);
    EXPECT_EQ(head.to_string() + entry.to_string(),
              encode_payload_command(cmd, meta, std::string(1000, 'x'), b).to_string());
    // Decoding it as two reads gives the stored bytes back unchanged.
    SliceChain in;
    in.append(head);
    in.append(entry);
    FrameDecoder decoder;
    Frame out;
    ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame) << decoder.status().to_string();
    EXPECT_EQ(out.entry.to_string(), entry.to_string());
    EXPECT_EQ(out.has_broker_entry_metadata, with_bem);
  }
}

TEST(FrameTest, ParseEntryChecksAndSplits) {
  Slice entry = encode_entry(metadata("p", 1, 2), "body");
  proto::MessageMetadata m;
  Slice payload;
  bool has_checksum = false;
  ASSERT_TRUE(parse_entry(entry, true, &m, &payload, &has_checksum).is_ok());
  EXPECT_TRUE(has_checksum);
  EXPECT_EQ(payload.to_string(), "body");
  std::string bad = entry.to_string();
  bad.back() ^= 1;
  Status st = parse_entry(Slice::copy_of(bad), true, &m, &payload);
  EXPECT_EQ(st.code(), common::ErrorCode::kCorruption);
  EXPECT_TRUE(parse_entry(Slice::copy_of(bad), false, &m, &payload).is_ok());
}

// Every builder and a hand-made command of each kind a client sends survive
// encode and decode unchanged.
TEST(FrameTest, EveryCommandKindRoundTrips) {
  std::vector<proto::BaseCommand> all = {
      commands::ping(),
      commands::pong(),
      commands::connected("Magnetar 0.1.0", 21, 5 << 20),
      commands::success(1),
      commands::error(2, proto::TopicNotFound, "no such topic"),
      commands::producer_success(3, "standalone-0-1", 41, "v1"),
      commands::send_receipt(4, 5, commands::message_id(6, 7)),
      commands::send_error(4, 6, proto::ChecksumError, "bad checksum"),
      commands::lookup_response(8, "pulsar://localhost:6650", "pulsar+ssl://localhost:6651"),
      commands::lookup_error(9, proto::ServiceNotReady, "starting"),
      commands::partitioned_metadata_response(10, 4),
      commands::partitioned_metadata_error(11, proto::MetadataError, "store down"),
  };
  proto::BaseCommand c;
  c.set_type(proto::BaseCommand::CONNECT);
  c.mutable_connect()->set_client_version("2.11.0");
  c.mutable_connect()->set_protocol_version(19);
  c.mutable_connect()->set_auth_method_name("token");
  c.mutable_connect()->set_auth_data("secret");
  c.mutable_connect()->mutable_feature_flags()->set_supports_auth_refresh(true);
  all.push_back(c);
  c.Clear();
  c.set_type(proto::BaseCommand::SUBSCRIBE);
  auto* sub = c.mutable_subscribe();
  sub->set_topic("persistent://public/default/t");
  sub->set_subscription("s");
  sub->set_subtype(proto::CommandSubscribe::Key_Shared);
  sub->set_consumer_id(1);
  sub->set_request_id(2);
  sub->set_initialposition(proto::CommandSubscribe::Earliest);
  sub->mutable_keysharedmeta()->set_keysharedmode(proto::STICKY);
  auto* range = sub->mutable_keysharedmeta()->add_hashranges();
  range->set_start(0);
  range->set_end(32767);
  all.push_back(c);
  c.Clear();
  c.set_type(proto::BaseCommand::FLOW);
  c.mutable_flow()->set_consumer_id(1);
  c.mutable_flow()->set_messagepermits(1000);
  all.push_back(c);
  c.Clear();
  c.set_type(proto::BaseCommand::ACK);
  c.mutable_ack()->set_consumer_id(1);
  c.mutable_ack()->set_ack_type(proto::CommandAck::Individual);
  *c.mutable_ack()->add_message_id() = commands::message_id(1, 2, -1, 3);
  c.mutable_ack()->mutable_message_id(0)->add_ack_set(-5);
  all.push_back(c);
  c.Clear();
  c.set_type(proto::BaseCommand::SEEK);
  c.mutable_seek()->set_consumer_id(1);
  c.mutable_seek()->set_request_id(9);
  c.mutable_seek()->set_message_publish_time(1700000000000);
  all.push_back(c);
  c.Clear();
  c.set_type(proto::BaseCommand::NEW_TXN);
  c.mutable_newtxn()->set_request_id(5);
  c.mutable_newtxn()->set_tc_id(1);
  all.push_back(c);

  for (const auto& cmd : all) {
    ASSERT_TRUE(cmd.IsInitialized()) << proto::BaseCommand::Type_Name(cmd.type());
    Slice frame = encode_command(cmd);
    Frame out;
    Status why;
    ASSERT_EQ(decode_frame(frame, {}, &out, &why), DecodeResult::kFrame)
        << proto::BaseCommand::Type_Name(cmd.type()) << ": " << why.to_string();
    EXPECT_EQ(out.command.SerializeAsString(), cmd.SerializeAsString());
    EXPECT_EQ(out.wire_type, cmd.type());
  }
}

// A stream of several frames, fed in two reads split at every byte, and one
// byte at a time, decodes to the same frames.
TEST(FrameTest, InputSplitAtEveryByteDecodesTheSame) {
  proto::BrokerEntryMetadata bem;
  bem.set_index(5);
  std::string stream = encode_command(commands::connected("m", 19, 1 << 20)).to_string() +
                       kSendFrame + encode_command(commands::ping()).to_string() +
                       encode_payload_command(commands::message(3, commands::message_id(1, 2)),
                                              metadata("q", 8, 9), std::string(300, 'z'), &bem)
                           .to_string() +
                       encode_command(commands::success(77)).to_string();
  auto check = [](const std::vector<Frame>& got, const std::string& where) {
    ASSERT_EQ(got.size(), 5u) << where;
    EXPECT_EQ(got[0].command.connected().protocol_version(), 19) << where;
    EXPECT_EQ(got[1].payload.to_string(), "hi") << where;
    EXPECT_EQ(got[2].command.type(), proto::BaseCommand::PING) << where;
    EXPECT_EQ(got[3].payload.to_string(), std::string(300, 'z')) << where;
    EXPECT_EQ(got[3].broker_entry_metadata.index(), 5u) << where;
    EXPECT_EQ(got[4].command.success().request_id(), 77u) << where;
  };
  auto drain = [](FrameDecoder& decoder, SliceChain& in, std::vector<Frame>& got) {
    for (;;) {
      Frame f;
      DecodeResult r = decoder.decode(in, &f);
      if (r == DecodeResult::kNeedMore) return;
      ASSERT_EQ(r, DecodeResult::kFrame) << decoder.status().to_string();
      got.push_back(std::move(f));
    }
  };
  for (size_t split = 0; split <= stream.size(); ++split) {
    FrameDecoder decoder;
    SliceChain in;
    std::vector<Frame> got;
    in.append(Slice::copy_of(stream.substr(0, split)));
    drain(decoder, in, got);
    in.append(Slice::copy_of(stream.substr(split)));
    drain(decoder, in, got);
    EXPECT_TRUE(in.empty());
    check(got, "split at " + std::to_string(split));
  }
  FrameDecoder decoder;
  SliceChain in;
  std::vector<Frame> got;
  for (char ch : stream) {
    in.append(Slice::copy_of(&ch, 1));
    drain(decoder, in, got);
  }
  check(got, "byte by byte");
}

TEST(FrameTest, ChecksumMismatchIsReportedAndTheStreamGoesOn) {
  std::string bad = kSendFrame;
  bad[bad.size() - 1] = 'X';  // payload "hX"
  SliceChain in = chain_of(bad + encode_command(commands::ping()).to_string());
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kChecksumMismatch);
  EXPECT_EQ(decoder.status().code(), common::ErrorCode::kCorruption);
  // The command is there to answer SEND_ERROR with; the payload is not.
  EXPECT_EQ(out.command.send().producer_id(), 1u);
  EXPECT_EQ(out.command.send().sequence_id(), 2u);
  EXPECT_TRUE(out.payload.empty());
  EXPECT_TRUE(out.entry.empty());
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame);
  EXPECT_EQ(out.command.type(), proto::BaseCommand::PING);

  // A corrupted checksum field counts the same.
  bad = kSendFrame;
  bad[19] ^= 0x40;
  in = chain_of(bad);
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kChecksumMismatch);

  // With checking off the bytes pass.
  FrameLimits lax;
  lax.verify_checksum = false;
  in = chain_of(bad);
  EXPECT_EQ(FrameDecoder(lax).decode(in, &out), DecodeResult::kFrame);
}

TEST(FrameTest, OversizeFrameIsRefusedBeforeItsBytesArrive) {
  FrameLimits limits;
  limits.max_frame_size = 1024;
  FrameDecoder decoder(limits);
  SliceChain in = chain_of(bytes({0, 0, 0x04, 0x00}));  // 1024 + 4 bytes
  Frame out;
  EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kStreamError);
  EXPECT_NE(decoder.status().message().find("exceeds the limit"), std::string::npos) << decoder.status().message();
  // The error sticks and nothing is consumed.
  EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kStreamError);
  EXPECT_EQ(in.size(), 4u);

  // Exactly at the limit is fine.
  std::string frame = bytes({0, 0, 0x03, 0xfc, 0, 0, 0x03, 0xf8});
  frame += std::string(1016, '\0');
  in = chain_of(frame.substr(0, 8));
  FrameDecoder at_limit(limits);
  EXPECT_EQ(at_limit.decode(in, &out), DecodeResult::kNeedMore);

  // The default is Pulsar's 5 MiB message plus room for the headers.
  FrameDecoder by_default;
  in = chain_of(bytes({0, 0x50, 0x28, 0x01}));
  EXPECT_EQ(by_default.decode(in, &out), DecodeResult::kStreamError);
  in = chain_of(bytes({0, 0x50, 0x27, 0xfc}));
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kNeedMore);
}

TEST(FrameTest, InconsistentSizesAreRefused) {
  Frame out;
  // totalSize too small to hold the command size.
  SliceChain in = chain_of(bytes({0, 0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kStreamError);
  // commandSize larger than the frame: refused once the 8 bytes are there.
  in = chain_of(bytes({0, 0, 0, 10, 0, 0, 0, 7}));
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kStreamError);

  // metadataSize beyond the frame's end.
  std::string bad = kSendFrame;
  bad[25] = 0x0a;
  in = chain_of(bad);
  FrameLimits lax;
  lax.verify_checksum = false;
  FrameDecoder decoder(lax);
  EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kMalformedFrame);
  EXPECT_NE(decoder.status().message().find("metadata size 10"), std::string::npos) << decoder.status().message();

  // A frame that ends inside the checksum.
  std::string cut = bytes({0, 0, 0, 15, 0, 0, 0, 8, 0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02, 0x0e, 0x01, 0x41});
  in = chain_of(cut);
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kMalformedFrame);

  // Broker entry metadata whose size runs past the end.
  std::string bem = bytes({0, 0, 0, 0x14, 0, 0, 0, 8, 0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02,
                           0x0e, 0x02, 0, 0, 0, 0x40, 0x08, 0x01});
  in = chain_of(bem);
  EXPECT_EQ(FrameDecoder().decode(in, &out), DecodeResult::kMalformedFrame);

  // decode_frame refuses bytes past the frame's end.
  Status why;
  EXPECT_EQ(decode_frame(Slice::copy_of(kSendFrame + "x"), {}, &out, &why), DecodeResult::kStreamError);
  EXPECT_EQ(decode_frame(Slice::copy_of(kSendFrame.substr(0, 20)), {}, &out, &why), DecodeResult::kNeedMore);
}

TEST(FrameTest, MalformedCommandsAreConsumedAndReported) {
  struct Case {
    const char* what;
    std::string command;
    std::string after;  // bytes after the command inside the frame
  };
  const std::vector<Case> cases = {
      {"garbage", bytes({0xff, 0xff, 0xff, 0xff}), ""},
      {"empty command", "", ""},
      {"no type", bytes({0x92, 0x01, 0x00}), ""},
      {"unknown type", bytes({0x08, 0x63}), ""},
      {"type without body", bytes({0x08, 0x0b}), ""},            // FLOW, no flow
      {"missing required field", bytes({0x08, 0x0b, 0x5a, 0x02, 0x08, 0x01}), ""},  // flow without permits
      {"payload after PING", bytes({0x08, 0x12, 0x92, 0x01, 0x00}), "abc"},
      {"SEND without payload", bytes({0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02}), ""},
      {"SEND with bad metadata", bytes({0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02}),
       bytes({0, 0, 0, 2, 0xff, 0xff})},
  };
  for (const auto& c : cases) {
    std::string frame;
    uint32_t total = static_cast<uint32_t>(4 + c.command.size() + c.after.size());
    uint32_t cmd = static_cast<uint32_t>(c.command.size());
    for (uint32_t v : {total, cmd}) {
      for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>(v >> shift));
    }
    frame += c.command + c.after;
    SliceChain in = chain_of(frame + encode_command(commands::pong()).to_string());
    FrameDecoder decoder;
    Frame out;
    EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kMalformedFrame) << c.what;
    EXPECT_FALSE(decoder.status().is_ok()) << c.what;
    // The stream is still in step.
    ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kFrame) << c.what;
    EXPECT_EQ(out.command.type(), proto::BaseCommand::PONG) << c.what;
  }
  // An unknown type is named, for an error answer.
  SliceChain in = chain_of(bytes({0, 0, 0, 6, 0, 0, 0, 2, 0x08, 0x63}));
  FrameDecoder decoder;
  Frame out;
  ASSERT_EQ(decoder.decode(in, &out), DecodeResult::kMalformedFrame);
  EXPECT_EQ(out.wire_type, 99);
  EXPECT_EQ(decoder.status().code(), common::ErrorCode::kUnimplemented);
  EXPECT_EQ(decoder.status().message(), "unknown command type 99");
}

TEST(FrameTest, RefusedInputIsNotLogged) {
  // Metadata with only producer_name: valid protobuf, required fields missing.
  std::string frame = bytes({0, 0, 0, 0x13, 0, 0, 0, 8, 0x08, 0x06, 0x32, 0x04, 0x08, 0x01, 0x10, 0x02,
                             0, 0, 0, 3, 0x0a, 0x01, 'p'});
  testing::internal::CaptureStderr();
  SliceChain in = chain_of(frame);
  FrameDecoder decoder;
  Frame out;
  EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kMalformedFrame);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(decoder.status().message(), "message metadata is not a valid MessageMetadata");
}

TEST(FrameTest, RandomBytesNeverPassAsFrames) {
  // Random garbage after a valid size header: the frame is delimited, its
  // content is not a command. A fixed seed keeps the run repeatable.
  std::mt19937 rng(20261130);
  int frames = 0;
  for (int round = 0; round < 20000; ++round) {
    const size_t n = rng() % 64;
    std::string body(n, '\0');
    for (auto& ch : body) ch = static_cast<char>(rng());
    std::string frame = bytes({0, 0, 0, static_cast<int>(n + 4), 0, 0, 0, static_cast<int>(rng() % (n + 1))});
    frame += body;
    SliceChain in = chain_of(frame);
    FrameDecoder decoder;
    Frame out;
    DecodeResult r = decoder.decode(in, &out);
    ASSERT_NE(r, DecodeResult::kNeedMore) << "round " << round;
    if (r == DecodeResult::kFrame) {
      ++frames;  // a few random bytes can be a valid command, e.g. 08 12 = PING
      EXPECT_TRUE(out.command.IsInitialized());
    } else {
      EXPECT_FALSE(decoder.status().is_ok());
    }
    EXPECT_TRUE(in.empty()) << "round " << round;
  }
  EXPECT_LT(frames, 200);
}

TEST(FrameTest, TextOnThePulsarPortIsAStreamError) {
  SliceChain in = chain_of("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  FrameDecoder decoder;
  Frame out;
  EXPECT_EQ(decoder.decode(in, &out), DecodeResult::kStreamError);
}

}  // namespace
}  // namespace magnetar::protocol::pulsar
