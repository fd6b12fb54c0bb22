#include "protocol/amqp/methods.h"

#include <gtest/gtest.h>

#include "protocol/amqp/frame.h"

namespace magnetar::protocol::amqp {
namespace {

using common::Slice;

Slice encode(const Method& m) {
  WireWriter w;
  encode_method(w, m);
  return w.finish();
}

TEST(AmqpMethodsTest, ConsecutiveBitsShareOneOctetLowBitFirst) {
  Method m = Method::of(m::kQueueDeclare);
  m.set("queue", std::string("q")).set("durable", uint64_t{1}).set("auto-delete", uint64_t{1});
  // class 50, method 10, reserved-1 0, shortstr "q", bits (durable=bit1, auto-delete=bit3), empty table.
  EXPECT_EQ(encode(m).to_string(), std::string("\0\x32\0\x0a\0\0\x01q\x0a\0\0\0\0", 13));
}

TEST(AmqpMethodsTest, BitsAfterOtherFieldsStartAFreshOctet) {
  Method m = Method::of(m::kBasicNack);
  m.set("delivery-tag", uint64_t{9}).set("requeue", uint64_t{1});
  EXPECT_EQ(encode(m).to_string(), std::string("\0\x3c\0\x78\0\0\0\0\0\0\0\x09\x02", 13));
  auto back = decode_method(encode(m));
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->u("delivery-tag"), 9u);
  EXPECT_FALSE(back->flag("multiple"));
  EXPECT_TRUE(back->flag("requeue"));
}

TEST(AmqpMethodsTest, EveryMethodRoundTrips) {
  const uint32_t keys[] = {m::kConnectionStart, m::kConnectionStartOk, m::kConnectionTune, m::kConnectionOpen,
                           m::kConnectionClose, m::kChannelOpenOk, m::kExchangeDeclare, m::kExchangeBind,
                           m::kQueueDeclareOk, m::kQueueUnbind, m::kBasicConsume, m::kBasicDeliver,
                           m::kBasicGetOk, m::kBasicPublish, m::kConfirmSelect, m::kTxCommit};
  for (uint32_t key : keys) {
    Method m = Method::of(key);
    // Fill every argument with something not zero.
    for (size_t k = 0; k < m.spec->args.size(); ++k) {
      switch (m.spec->args[k].type) {
        case ArgType::kShortStr:
        case ArgType::kLongStr: m.args[k] = std::string(m.spec->args[k].name); break;
        case ArgType::kTable: m.args[k] = FieldTable{{"x-arg", FieldValue::of_int(k)}}; break;
        case ArgType::kBit: m.args[k] = uint64_t{k % 2}; break;
        case ArgType::kOctet: m.args[k] = uint64_t{200}; break;
        default: m.args[k] = uint64_t{k + 1000};
      }
    }
    auto back = decode_method(encode(m));
    ASSERT_TRUE(back.is_ok()) << m.spec->name << ": " << back.status().message();
    EXPECT_EQ(back->spec, m.spec);
    EXPECT_EQ(back->args, m.args) << m.spec->name;
  }
}

TEST(AmqpMethodsTest, MethodFrameWrapsThePayload) {
  Method m = Method::of(m::kChannelOpenOk);
  Slice frame = method_frame(7, m);
  common::SliceChain in;
  in.append(frame);
  Frame f;
  ASSERT_EQ(decode_frame(in, kDefaultFrameMax, &f), DecodeResult::kFrame);
  EXPECT_EQ(f.channel, 7);
  auto back = decode_method(f.payload);
  ASSERT_TRUE(back.is_ok());
  EXPECT_EQ(back->key(), m::kChannelOpenOk);
}

TEST(AmqpMethodsTest, UnknownClassesAndMethodsAreTold) {
  auto cls = decode_method(Slice::copy_of(std::string("\0\x63\0\x0a", 4)));
  ASSERT_FALSE(cls.is_ok());
  EXPECT_EQ(cls.status().code(), common::ErrorCode::kNotFound);
  EXPECT_NE(cls.status().message().find("unknown class 99"), std::string::npos);
  auto method = decode_method(Slice::copy_of(std::string("\0\x3c\0\x63", 4)));
  ASSERT_FALSE(method.is_ok());
  EXPECT_NE(method.status().message().find("unknown method 99 of class 60"), std::string::npos);
}

TEST(AmqpMethodsTest, TruncatedOrOverlongArgumentsAreMalformed) {
  Method m = Method::of(m::kBasicConsume);
  m.set("queue", std::string("orders")).set("consumer-tag", std::string("c1"));
  Slice whole = encode(m);
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    auto r = decode_method(whole.sub(0, cut));
    EXPECT_FALSE(r.is_ok()) << "cut at " << cut;
    if (!r.is_ok()) {
      EXPECT_EQ(r.status().code(), common::ErrorCode::kInvalidArgument);
    }
  }
  auto extra = decode_method(Slice::copy_of(whole.to_string() + "!"));
  EXPECT_FALSE(extra.is_ok());
}

}  // namespace
}  // namespace magnetar::protocol::amqp
