#include "protocol/kafka/schema.h"

#include <gtest/gtest.h>

#include "protocol/kafka/header.h"
#include "protocol/kafka/messages.h"

namespace magnetar::protocol::kafka {
namespace {

Struct round_trip(const Struct& s, int16_t version, bool flexible) {
  WireWriter w;
  encode_struct(w, s, version, flexible);
  WireReader r(w.finish());
  Struct back = decode_struct(r, *s.schema, version, flexible);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.remaining(), 0u);
  return back;
}

Struct metadata_request(std::initializer_list<const char*> topics) {
  Struct req(*find_api(kMetadata)->request);
  for (const char* t : topics) req.add("Topics").set("Name", std::string(t));
  req.set("AllowAutoTopicCreation", int64_t{0});
  return req;
}

TEST(KafkaSchemaTest, EveryServedVersionOfMetadataRoundTrips) {
  const ApiSpec* api = find_api(kMetadata);
  for (int16_t v = api->min_version; v <= api->max_version; ++v) {
    Struct back = round_trip(metadata_request({"orders", "payments"}), v, api->flexible(v));
    ASSERT_EQ(back.array("Topics").size(), 2u) << v;
    EXPECT_EQ(back.array("Topics")[1].str("Name"), "payments");
    // Before v4 the field does not exist: its default (true) is read.
    EXPECT_EQ(back.i("AllowAutoTopicCreation"), v >= 4 ? 0 : 1) << v;
  }
}

// A struct array made element by element while it is encoded is the same
// bytes as one held whole, nested arrays too, in every served version.
TEST(KafkaSchemaTest, AGeneratedArrayEncodesAsTheSameArrayHeldWhole) {
  const ApiSpec* api = find_api(kMetadata);
  for (int16_t v = api->min_version; v <= api->max_version; ++v) {
    Struct held(*api->response);
    Struct generated(*api->response);
    for (int t = 0; t < 3; ++t) {
      auto& topic = held.add("Topics");
      topic.set("Name", "topic-" + std::to_string(t));
      for (int p = 0; p <= t; ++p) {
        topic.add("Partitions").set("PartitionIndex", int64_t{p}).set("ReplicaNodes", std::vector<int64_t>{1, 2});
      }
    }
    const Struct topic_shape = generated.element("Topics");
    const Struct partition_shape = topic_shape.element("Partitions");
    generated.set("Topics", StructGenerator{3, [&](size_t t) {
                                              Struct topic = topic_shape;
                                              topic.set("Name", "topic-" + std::to_string(t));
                                              topic.set("Partitions", StructGenerator{t + 1, [&](size_t p) {
                                                          Struct part = partition_shape;
                                                          part.set("PartitionIndex", static_cast<int64_t>(p));
                                                          part.set("ReplicaNodes", std::vector<int64_t>{1, 2});
                                                          return part;
                                                        }});
                                              return topic;
                                            }});
    WireWriter a;
    WireWriter b;
    encode_struct(a, held, v, api->flexible(v));
    encode_struct(b, generated, v, api->flexible(v));
    EXPECT_EQ(a.finish().to_string(), b.finish().to_string()) << v;
  }
}

TEST(KafkaSchemaTest, FlexibleVersionsAreCompact) {
  const ApiSpec* api = find_api(kMetadata);
  WireWriter classic, compact;
  encode_struct(classic, metadata_request({"t"}), 8, false);
  encode_struct(compact, metadata_request({"t"}), 9, true);
  // v8: int32 count + int16 length + "t" + 3 bools; v9: 1-byte count, 1-byte
  // length, "t", tagged fields of the topic, 3 bools, tagged fields.
  EXPECT_EQ(classic.size(), 4u + 2 + 1 + 3);
  EXPECT_EQ(compact.size(), 1u + 1 + 1 + 1 + 3 + 1);
  EXPECT_TRUE(api->flexible(9));
  EXPECT_FALSE(api->flexible(8));
}

TEST(KafkaSchemaTest, NullArrayMeansAllTopicsFromV1) {
  Struct req(*find_api(kMetadata)->request);
  req.set_null("Topics");
  Struct back = round_trip(req, 1, false);
  EXPECT_TRUE(back.is_null("Topics"));
  Struct back9 = round_trip(req, 9, true);
  EXPECT_TRUE(back9.is_null("Topics"));
}

TEST(KafkaSchemaTest, NullForANonNullableStringFails) {
  WireWriter w;
  w.i32(1);                   // one topic
  w.string(std::nullopt, false);  // null name at v1
  WireReader r(w.finish());
  decode_struct(r, *find_api(kMetadata)->request, 1, false);
  EXPECT_FALSE(r.ok());
}

TEST(KafkaSchemaTest, UnsetIntegersEncodeTheirDefaults) {
  const ApiSpec* api = find_api(kMetadata);
  Struct resp(*api->response);
  auto& topic = resp.add("Topics");
  topic.set("Name", std::string("t"));
  topic.add("Partitions").set("PartitionIndex", int64_t{0});
  Struct back = round_trip(resp, 9, true);
  EXPECT_EQ(back.i("ControllerId"), -1);
  EXPECT_EQ(back.array("Topics")[0].array("Partitions")[0].i("LeaderEpoch"), -1);
}

TEST(KafkaSchemaTest, FieldsOutsideTheirVersionsAreNotWritten) {
  const ApiSpec* api = find_api(kListOffsets);
  Struct resp(*api->response);
  auto& p = resp.add("Topics").set("Name", std::string("t")).add("Partitions");
  p.set("Offset", int64_t{7});
  p.set("OldStyleOffsets", std::vector<int64_t>{7});
  Struct v0 = round_trip(resp, 0, false);
  EXPECT_EQ(v0.array("Topics")[0].array("Partitions")[0].ints("OldStyleOffsets"), std::vector<int64_t>{7});
  EXPECT_EQ(v0.array("Topics")[0].array("Partitions")[0].i("Offset"), -1);  // not in v0: default
  Struct v6 = round_trip(resp, 6, true);
  EXPECT_TRUE(v6.array("Topics")[0].array("Partitions")[0].ints("OldStyleOffsets").empty());
  EXPECT_EQ(v6.array("Topics")[0].array("Partitions")[0].i("Offset"), 7);
}

TEST(KafkaSchemaTest, ProduceRecordsAreViewsOfTheRequest) {
  const ApiSpec* api = find_api(kProduce);
  Struct req(*api->request);
  req.set("Acks", int64_t{-1});
  req.set("TimeoutMs", int64_t{1000});
  auto& part = req.add("Topics").set("Name", std::string("orders")).add("Partitions");
  part.set("PartitionIndex", int64_t{0});
  part.set("Records", common::Slice::copy_of("abcdef"));
  Struct back = round_trip(req, 7, false);
  EXPECT_TRUE(back.is_null("TransactionalId"));
  EXPECT_EQ(back.i("Acks"), -1);
  const auto* records = back.array("Topics")[0].array("Partitions")[0].bytes("Records");
  ASSERT_NE(records, nullptr);
  EXPECT_EQ(records->view(), "abcdef");
}

TEST(KafkaSchemaTest, FlexibleProduceAndFetchRoundTripCompactly) {
  const ApiSpec* produce = find_api(kProduce);
  ASSERT_TRUE(produce->flexible(9));
  Struct req(*produce->request);
  req.set("Acks", int64_t{1});
  req.set("TimeoutMs", int64_t{100});
  auto& part = req.add("Topics").set("Name", std::string("t")).add("Partitions");
  part.set("PartitionIndex", int64_t{0});
  part.set("Records", common::Slice::copy_of("rec"));
  WireWriter w;
  encode_struct(w, req, 9, true);
  // null transactional id (1) + acks (2) + timeout (4) + topics count (1) +
  // name (2) + partitions count (1) + index (4) + records (1 + 3) + tagged
  // fields of partition, topic and request (3).
  EXPECT_EQ(w.size(), 1u + 2 + 4 + 1 + 2 + 1 + 4 + 4 + 3);
  Struct back = round_trip(req, 9, true);
  EXPECT_EQ(back.array("Topics")[0].array("Partitions")[0].bytes("Records")->view(), "rec");

  const ApiSpec* fetch = find_api(kFetch);
  ASSERT_TRUE(fetch->flexible(12));
  Struct f(*fetch->request);
  auto& fp = f.add("Topics").set("Name", std::string("t")).add("Partitions");
  fp.set("FetchOffset", int64_t{42});
  fp.set("LastFetchedEpoch", int64_t{3});
  Struct fb = round_trip(f, 12, true);
  EXPECT_EQ(fb.array("Topics")[0].array("Partitions")[0].i("FetchOffset"), 42);
  EXPECT_EQ(fb.array("Topics")[0].array("Partitions")[0].i("LastFetchedEpoch"), 3);
  Struct f11 = round_trip(f, 11, false);
  EXPECT_EQ(f11.array("Topics")[0].array("Partitions")[0].i("LastFetchedEpoch"), -1);  // not in v11
}

TEST(KafkaSchemaTest, DeepNestingAndHugeCountsDoNotCrash) {
  // A Fetch request whose topic count claims far more than the input holds.
  WireWriter w;
  w.i32(-1);
  w.i32(500);
  w.i32(1);
  w.i32(1 << 20);
  w.i8(0);
  w.i32(0x7fffffff);
  WireReader r(w.finish());
  decode_struct(r, *find_api(kFetch)->request, 4, false);
  EXPECT_FALSE(r.ok());
}

TEST(KafkaSchemaTest, ServedApisAreListedOnceInKeyOrder) {
  int16_t last = -1;
  for (const ApiSpec& a : served_apis()) {
    EXPECT_GT(a.key, last);
    last = a.key;
    EXPECT_LE(a.min_version, a.max_version);
  }
  EXPECT_EQ(find_api(kApiVersions)->response_header_version(3), 0);
  EXPECT_EQ(find_api(kMetadata)->response_header_version(9), 1);
  EXPECT_EQ(find_api(kMetadata)->request_header_version(9), 2);
  EXPECT_EQ(find_api(29), nullptr);  // DescribeAcls: not served
  EXPECT_EQ(find_api(kDescribeProducers)->request_header_version(0), 2);  // flexible from its first version
  EXPECT_EQ(find_api(kSaslHandshake)->min_version, 0);
}

TEST(KafkaSchemaTest, ScramCredentialApisRoundTrip) {
  const ApiSpec* describe = find_api(kDescribeUserScramCredentials);
  ASSERT_NE(describe, nullptr);
  EXPECT_TRUE(describe->flexible(0));
  Struct all(*describe->request);
  all.set_null("Users");
  EXPECT_TRUE(round_trip(all, 0, true).is_null("Users"));
  Struct some(*describe->request);
  some.add("Users").set("Name", std::string("alice"));
  EXPECT_EQ(round_trip(some, 0, true).array("Users")[0].str("Name"), "alice");

  const ApiSpec* alter = find_api(kAlterUserScramCredentials);
  ASSERT_NE(alter, nullptr);
  Struct req(*alter->request);
  req.add("Deletions").set("Name", std::string("bob")).set("Mechanism", int64_t{2});
  Struct& up = req.add("Upsertions");
  up.set("Name", std::string("alice")).set("Mechanism", int64_t{1}).set("Iterations", int64_t{4096});
  up.set("Salt", common::Slice::copy_of("salt")).set("SaltedPassword", common::Slice::copy_of(std::string(32, 'x')));
  Struct back = round_trip(req, 0, true);
  EXPECT_EQ(back.array("Deletions")[0].i("Mechanism"), 2);
  const Struct& u = back.array("Upsertions")[0];
  EXPECT_EQ(u.str("Name"), "alice");
  EXPECT_EQ(u.i("Iterations"), 4096);
  EXPECT_EQ(u.bytes("Salt")->view(), "salt");
  EXPECT_EQ(u.bytes("SaltedPassword")->size(), 32u);
}

TEST(KafkaSchemaTest, StringArraysRoundTripAndRefuseNullElements) {
  const ApiSpec* api = find_api(kDeleteTopics);
  Struct req(*api->request);
  req.set("TopicNames", std::vector<std::string>{"orders", "", "payments"});
  req.set("TimeoutMs", int64_t{3000});
  for (int16_t v = api->min_version; v <= api->max_version; ++v) {
    Struct back = round_trip(req, v, api->flexible(v));
    EXPECT_EQ(back.strings("TopicNames"), (std::vector<std::string>{"orders", "", "payments"})) << v;
    EXPECT_EQ(back.i("TimeoutMs"), 3000);
  }
  // A null element (length -1) is malformed.
  WireWriter w;
  w.i32(1);
  w.i16(-1);
  w.i32(0);
  WireReader r(w.finish());
  decode_struct(r, *api->request, 0, false);
  EXPECT_FALSE(r.ok());
  // A compact (flexible) string array: InitProducerId v2+ has none, but the
  // DescribeConfigs keys are nullable: null reads as unset.
  const ApiSpec* describe = find_api(kDescribeConfigs);
  Struct d(*describe->request);
  auto& res = d.add("Resources");
  res.set("ResourceType", int64_t{2});
  res.set("ResourceName", std::string("orders"));
  Struct back = round_trip(d, 1, false);
  EXPECT_TRUE(back.array("Resources")[0].is_null("ConfigurationKeys"));
}

TEST(KafkaHeaderTest, RequestHeaderV2AndResponseSizes) {
  WireWriter w;
  begin_request(w, RequestHeader{kMetadata, 9, 77, std::string("cli")}, 2);
  w.i8(1);  // body
  common::Slice msg = w.finish();
  WireReader r(msg.sub(kSizePrefixBytes));
  RequestHeader h = peek_request_header(r);
  EXPECT_EQ(h.api_key, kMetadata);
  EXPECT_EQ(h.api_version, 9);
  EXPECT_EQ(h.correlation_id, 77);
  read_request_header_rest(r, &h, 2);
  EXPECT_EQ(h.client_id, "cli");
  EXPECT_EQ(r.i8(), 1);
  EXPECT_TRUE(r.ok());

  WireWriter out;
  begin_response(out, 77, 1);
  out.i32(5);
  common::Slice resp = finish_response(out);
  WireReader rr(resp);
  EXPECT_EQ(rr.i32(), static_cast<int32_t>(resp.size() - 4));
  EXPECT_EQ(rr.i32(), 77);
  EXPECT_EQ(rr.uvarint(), 0u);
  EXPECT_EQ(rr.i32(), 5);
}

}  // namespace
}  // namespace magnetar::protocol::kafka
