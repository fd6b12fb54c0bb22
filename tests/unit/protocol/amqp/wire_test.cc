#include "protocol/amqp/wire.h"

#include <gtest/gtest.h>

#include <cmath>

namespace magnetar::protocol::amqp {
namespace {

using common::Slice;

FieldTable every_type() {
  FieldTable t;
  auto add = [&](std::string name, char type, int64_t i = 0) {
    FieldValue v;
    v.type = type;
    v.i = i;
    t.push_back({std::move(name), std::move(v)});
  };
  add("bool", 't', 1);
  add("i8", 'b', -5);
  add("u8", 'B', 250);
  add("i16", 's', -30000);
  add("u16", 'u', 65000);
  add("i32", 'I', -2000000000);
  add("u32", 'i', 4000000000);
  add("i64", 'l', INT64_MIN);
  add("ts", 'T', 1700000000);
  add("void", 'V');
  FieldValue f;
  f.type = 'f';
  f.d = 1.5;
  t.push_back({"float", f});
  FieldValue d;
  d.type = 'd';
  d.d = -2.25e100;
  t.push_back({"double", d});
  FieldValue dec;
  dec.type = 'D';
  dec.scale = 2;
  dec.i = -12345;
  t.push_back({"decimal", dec});
  t.push_back({"text", FieldValue::of_string("héllo")});
  FieldValue bytes;
  bytes.type = 'x';
  bytes.s = std::string("\0\1\2", 3);
  t.push_back({"bytes", bytes});
  FieldValue nested;
  nested.type = 'F';
  nested.table.push_back({"inner", FieldValue::of_int(7)});
  t.push_back({"table", nested});
  FieldValue arr;
  arr.type = 'A';
  arr.array = {FieldValue::of_string("a"), FieldValue::of_bool(false), nested};
  t.push_back({"array", arr});
  return t;
}

TEST(AmqpWireTest, IntegersAndStringsRoundTrip) {
  WireWriter w;
  w.u8(0xab);
  w.u16(0xbeef);
  w.u32(0xdeadbeef);
  w.u64(0x0123456789abcdefULL);
  w.shortstr("short");
  w.longstr(std::string(1000, 'x'));
  WireReader r(w.finish());
  EXPECT_EQ(r.u8(), 0xab);
  EXPECT_EQ(r.u16(), 0xbeef);
  EXPECT_EQ(r.u32(), 0xdeadbeefu);
  EXPECT_EQ(r.u64(), 0x0123456789abcdefULL);
  EXPECT_EQ(r.shortstr(), "short");
  EXPECT_EQ(r.longstr(), std::string(1000, 'x'));
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.remaining(), 0u);
}

TEST(AmqpWireTest, EveryFieldTypeRoundTripsWithItsTag) {
  FieldTable t = every_type();
  WireWriter w;
  w.table(t);
  WireReader r(w.finish());
  FieldTable back = r.table();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(back, t);
  EXPECT_EQ(find_field(back, "i8")->i, -5);
  EXPECT_EQ(find_field(back, "u32")->i, 4000000000);
  EXPECT_EQ(find_field(back, "table")->table[0].value.i, 7);
  EXPECT_EQ(find_field(back, "nothing"), nullptr);
}

TEST(AmqpWireTest, ValuesAsText) {
  EXPECT_EQ(FieldValue::of_string("x").to_text(), "x");
  EXPECT_EQ(FieldValue::of_int(-3).to_text(), "-3");
  EXPECT_EQ(FieldValue::of_bool(true).to_text(), "true");
  FieldValue t;
  t.type = 'F';
  EXPECT_EQ(t.to_text(), "");
}

TEST(AmqpWireTest, TruncatedInputFailsWithoutReadingPastTheEnd) {
  WireWriter w;
  w.table(every_type());
  Slice whole = w.finish();
  for (size_t cut = 0; cut < whole.size(); ++cut) {
    WireReader r(whole.sub(0, cut));
    r.table();
    EXPECT_FALSE(r.ok()) << "cut at " << cut;
  }
}

TEST(AmqpWireTest, UnknownTypeTagAndOverrunsAreRefused) {
  // A table of one entry "k" with type 'Z'.
  std::string bad("\0\0\0\3\1kZ", 7);
  WireReader r(Slice::copy_of(bad));
  r.table();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown field value type"), std::string::npos);
  // An entry whose value runs past the table's own size.
  std::string overrun("\0\0\0\3\1kI\0\0\0\1", 11);
  WireReader r2(Slice::copy_of(overrun));
  r2.table();
  EXPECT_FALSE(r2.ok());
  // A table claiming more bytes than there are.
  std::string huge("\x7f\xff\xff\xff", 4);
  WireReader r3(Slice::copy_of(huge));
  r3.table();
  EXPECT_FALSE(r3.ok());
}

TEST(AmqpWireTest, DeepNestingIsRefusedNotRecursedInto) {
  // 100 nested tables, each {"n": F ...}, built from the inside out.
  WireWriter inner;
  FieldValue v;
  v.type = 'F';
  FieldValue* cur = &v;
  for (int k = 0; k < 100; ++k) {
    cur->table.push_back({"n", FieldValue()});
    cur->table[0].value.type = 'F';
    cur = &cur->table[0].value;
  }
  WireWriter w;
  w.table(v.table);
  WireReader r(w.finish());
  r.table();
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace magnetar::protocol::amqp
