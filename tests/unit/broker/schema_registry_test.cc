#include "broker/schema_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "metadata/leveldb_store.h"

namespace magnetar::broker {
namespace {

using common::ErrorCode;

// A real LevelDB store in a temporary directory; the registry's blocking
// calls run on the test thread (neither a reactor nor the metadata thread).
class SchemaRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("magnetar-schemas-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    open();
  }
  void TearDown() override {
    close();
    std::filesystem::remove_all(dir_);
  }
  void open() {
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_.string()});
    ASSERT_TRUE(store_->start().is_ok());
    registry_ = std::make_unique<SchemaRegistry>(*store_);
  }
  void close() {
    registry_.reset();
    if (store_) store_->stop();
    store_.reset();
  }
  static TopicName topic(const char* name) { return *TopicName::parse(name); }
  static SchemaInfo avro(const std::string& definition) {
    SchemaInfo s;
    s.type = SchemaType::kAvro;
    s.name = "user";
    s.data = definition;
    s.properties["owner"] = "team-a";
    return s;
  }

  std::filesystem::path dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<SchemaRegistry> registry_;
};

TEST_F(SchemaRegistryTest, NoSchemaIsNotFound) {
  EXPECT_EQ(registry_->get(topic("t1")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(registry_->get(topic("t1"), 0).status().code(), ErrorCode::kNotFound);
  auto all = registry_->list(topic("t1"));
  ASSERT_TRUE(all.is_ok());
  EXPECT_TRUE(all->empty());
}

TEST_F(SchemaRegistryTest, SameSchemaSameVersionNewSchemaNextVersion) {
  auto v0 = registry_->get_or_create(topic("t1"), avro("{\"type\":\"record\",\"v\":1}"));
  ASSERT_TRUE(v0.is_ok()) << v0.status().to_string();
  EXPECT_EQ(*v0, 0);
  EXPECT_EQ(*registry_->get_or_create(topic("t1"), avro("{\"type\":\"record\",\"v\":1}")), 0);
  EXPECT_EQ(*registry_->get_or_create(topic("t1"), avro("{\"type\":\"record\",\"v\":2}")), 1);
  // An older definition still live answers its own version.
  EXPECT_EQ(*registry_->get_or_create(topic("t1"), avro("{\"type\":\"record\",\"v\":1}")), 0);

  auto latest = registry_->get(topic("t1"));
  ASSERT_TRUE(latest.is_ok());
  EXPECT_EQ(latest->version, 1);
  EXPECT_EQ(latest->info.data, "{\"type\":\"record\",\"v\":2}");
  EXPECT_EQ(latest->info.type, SchemaType::kAvro);
  EXPECT_EQ(latest->info.properties.at("owner"), "team-a");
  EXPECT_GT(latest->timestamp_ms, 0);
  EXPECT_EQ(registry_->get(topic("t1"), 0)->info.data, "{\"type\":\"record\",\"v\":1}");
  EXPECT_EQ(registry_->list(topic("t1"))->size(), 2u);
  // Other topics are untouched.
  EXPECT_EQ(registry_->get(topic("t2")).status().code(), ErrorCode::kNotFound);
}

TEST_F(SchemaRegistryTest, PartitionsShareTheirTopicsSchema) {
  ASSERT_TRUE(registry_->get_or_create(topic("persistent://public/default/orders"), avro("a")).is_ok());
  auto p = registry_->get(topic("persistent://public/default/orders-partition-3"));
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->info.data, "a");
}

TEST_F(SchemaRegistryTest, DeleteLeavesATombstoneAndVersionsAreNeverReused) {
  ASSERT_TRUE(registry_->get_or_create(topic("t1"), avro("a")).is_ok());
  auto gone = registry_->remove(topic("t1"));
  ASSERT_TRUE(gone.is_ok());
  EXPECT_EQ(*gone, 1);
  EXPECT_EQ(registry_->get(topic("t1")).status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(registry_->list(topic("t1"))->empty());
  EXPECT_EQ(registry_->remove(topic("t1")).status().code(), ErrorCode::kNotFound);
  // The same definition registered again is a new version after the tombstone.
  EXPECT_EQ(*registry_->get_or_create(topic("t1"), avro("a")), 2);
  ASSERT_TRUE(registry_->forget(topic("t1")).is_ok());
  EXPECT_EQ(*registry_->get_or_create(topic("t1"), avro("a")), 0);
}

TEST_F(SchemaRegistryTest, SurvivesARestart) {
  ASSERT_TRUE(registry_->get_or_create(topic("t1"), avro("a")).is_ok());
  ASSERT_TRUE(registry_->get_or_create(topic("t1"), avro("b")).is_ok());
  close();
  open();
  auto latest = registry_->get(topic("t1"));
  ASSERT_TRUE(latest.is_ok());
  EXPECT_EQ(latest->version, 1);
  EXPECT_EQ(latest->info.data, "b");
}

TEST_F(SchemaRegistryTest, RefusesBadInput) {
  SchemaInfo bad = avro("x");
  bad.type = static_cast<SchemaType>(99);
  EXPECT_EQ(registry_->get_or_create(topic("t1"), bad).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry_->get_or_create(topic("t1"), avro(std::string(kMaxSchemaBytes + 1, 'x'))).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry_->get(topic("t1")).status().code(), ErrorCode::kNotFound);
}

TEST_F(SchemaRegistryTest, ConcurrentRegistrationsAgreeOnOneVersion) {
  std::vector<std::thread> threads;
  std::vector<int64_t> versions(4, -1);
  for (size_t i = 0; i < versions.size(); ++i) {
    threads.emplace_back([&, i]() {
      auto v = registry_->get_or_create(topic("t1"), avro("same"));
      if (v.is_ok()) versions[i] = *v;
    });
  }
  for (auto& t : threads) t.join();
  for (int64_t v : versions) EXPECT_EQ(v, 0);
  EXPECT_EQ(registry_->list(topic("t1"))->size(), 1u);
}

TEST(SchemaVersionTest, EightBytesBigEndian) {
  EXPECT_EQ(encode_schema_version(1), std::string("\0\0\0\0\0\0\0\x01", 8));
  EXPECT_EQ(*decode_schema_version(encode_schema_version(258)), 258);
  EXPECT_EQ(decode_schema_version("abc").status().code(), ErrorCode::kInvalidArgument);
}

TEST(SchemaTypeTest, NamesRoundTrip) {
  EXPECT_EQ(schema_type_name(SchemaType::kKeyValue), "KEY_VALUE");
  EXPECT_EQ(*parse_schema_type("AVRO"), SchemaType::kAvro);
  EXPECT_EQ(*parse_schema_type("BYTES"), SchemaType::kNone);
  EXPECT_EQ(parse_schema_type("XML").status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace magnetar::broker
