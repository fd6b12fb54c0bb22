#include "protocol/amqp/frame.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::amqp {
namespace {

using common::Slice;
using common::SliceChain;

TEST(AmqpFrameTest, FramesAreCutOneAtATimeEvenWhenSplitAcrossReads) {
  Slice a = encode_frame(FrameType::kMethod, 3, "hello");
  Slice b = heartbeat_frame();
  std::string both = a.to_string() + b.to_string();
  SliceChain in;
  Frame f;
  // Byte by byte: nothing comes out until a frame is whole.
  size_t frames = 0;
  for (char ch : both) {
    in.append(Slice::copy_of(&ch, 1));
    while (true) {
      DecodeResult r = decode_frame(in, kDefaultFrameMax, &f);
      if (r == DecodeResult::kNeedMore) break;
      ASSERT_EQ(r, DecodeResult::kFrame);
      if (frames == 0) {
        EXPECT_EQ(f.type, FrameType::kMethod);
        EXPECT_EQ(f.channel, 3);
        EXPECT_EQ(f.payload.to_string(), "hello");
      } else {
        EXPECT_EQ(f.type, FrameType::kHeartbeat);
        EXPECT_EQ(f.channel, 0);
        EXPECT_TRUE(f.payload.empty());
      }
      ++frames;
    }
  }
  EXPECT_EQ(frames, 2u);
  EXPECT_TRUE(in.empty());
}

TEST(AmqpFrameTest, FrameMaxCountsTheWholeFrame) {
  std::string payload(kMinFrameMax - kFrameOverhead, 'x');
  SliceChain in;
  in.append(encode_frame(FrameType::kBody, 1, payload));
  Frame f;
  EXPECT_EQ(decode_frame(in, kMinFrameMax, &f), DecodeResult::kFrame);
  in.append(encode_frame(FrameType::kBody, 1, payload + "y"));
  EXPECT_EQ(decode_frame(in, kMinFrameMax, &f), DecodeResult::kTooLarge);
}

TEST(AmqpFrameTest, TooLargeIsKnownFromTheHeaderAlone) {
  SliceChain in;
  in.append(Slice::copy_of(std::string("\x03\x00\x01\x7f\xff\xff\xff", 7)));
  Frame f;
  EXPECT_EQ(decode_frame(in, kDefaultFrameMax, &f), DecodeResult::kTooLarge);
}

TEST(AmqpFrameTest, UnknownTypesAndMissingFrameEndAreBadFrames) {
  Frame f;
  SliceChain unknown;
  unknown.append(Slice::copy_of(std::string("\x05\x00\x00\x00\x00\x00\x00\xce", 8)));
  EXPECT_EQ(decode_frame(unknown, kDefaultFrameMax, &f), DecodeResult::kBadFrame);
  SliceChain no_end;
  no_end.append(Slice::copy_of(std::string("\x01\x00\x00\x00\x00\x00\x01zz", 9)));
  EXPECT_EQ(decode_frame(no_end, kDefaultFrameMax, &f), DecodeResult::kBadFrame);
  // HTTP sent to the AMQP port.
  SliceChain http;
  http.append(Slice::copy_of("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(decode_frame(http, kDefaultFrameMax, &f), DecodeResult::kBadFrame);
}

}  // namespace
}  // namespace magnetar::protocol::amqp
