#include "cli/admin_cli.h"

#include <gtest/gtest.h>

namespace magnetar::cli {
namespace {

using common::ErrorCode;

TEST(AdminCliTest, Durations) {
  EXPECT_EQ(*parse_duration_seconds("90"), 90);
  EXPECT_EQ(*parse_duration_seconds("30s"), 30);
  EXPECT_EQ(*parse_duration_seconds("10m"), 600);
  EXPECT_EQ(*parse_duration_seconds("2h"), 7200);
  EXPECT_EQ(*parse_duration_seconds("3d"), 3 * 86400);
  EXPECT_EQ(*parse_duration_seconds("1w"), 7 * 86400);
  EXPECT_EQ(*parse_duration_seconds("-1"), -1);
  for (const char* bad : {"", "m", "3x", "-5", "1.5h", "h3", "10mm"}) {
    EXPECT_EQ(parse_duration_seconds(bad).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

TEST(AdminCliTest, Sizes) {
  EXPECT_EQ(*parse_size_bytes("4096"), 4096);
  EXPECT_EQ(*parse_size_bytes("10k"), 10 << 10);
  EXPECT_EQ(*parse_size_bytes("10M"), 10 << 20);
  EXPECT_EQ(*parse_size_bytes("16G"), int64_t{16} << 30);
  EXPECT_EQ(*parse_size_bytes("3T"), int64_t{3} << 40);
  EXPECT_EQ(*parse_size_bytes("-1"), -1);
  for (const char* bad : {"", "G", "10Q", "-2", "1.5G"}) {
    EXPECT_FALSE(parse_size_bytes(bad).is_ok()) << bad;
  }
}

TEST(AdminCliTest, Paths) {
  EXPECT_EQ(*namespace_path("acme/orders", "retention"), "/admin/v2/namespaces/acme/orders/retention");
  EXPECT_EQ(*namespace_path("acme/orders"), "/admin/v2/namespaces/acme/orders");
  EXPECT_FALSE(namespace_path("acme").is_ok());
  EXPECT_FALSE(namespace_path("a/b/c").is_ok());
  EXPECT_EQ(*topic_path("orders", "partitions"), "/admin/v2/persistent/public/default/orders/partitions");
  EXPECT_EQ(*topic_path("non-persistent://t/n/x y"), "/admin/v2/non-persistent/t/n/x%20y");
  EXPECT_FALSE(topic_path("kafka://t/n/x").is_ok());
}

TEST(AdminCliTest, HumanValues) {
  EXPECT_EQ(human_value(nullptr), "-");
  EXPECT_EQ(human_value(Json::array()), "-");
  EXPECT_EQ(human_value(Json::array({"a", "b"})), "a,b");
  EXPECT_EQ(human_value(Json{{"x", 1}, {"y", "z"}}), "x=1 y=z");
  EXPECT_EQ(human_value(true), "true");
  EXPECT_EQ(human_value(42), "42");
}

}  // namespace
}  // namespace magnetar::cli
