#include "broker/naming.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

using common::ErrorCode;

TEST(NamingTest, EntityNames) {
  for (const char* ok : {"public", "a", "my-tenant_1", "x.y:z=w", "UPPER"}) {
    EXPECT_TRUE(validate_entity_name(ok, "tenant").is_ok()) << ok;
  }
  for (const char* bad : {"", "has space", "slash/inside", "star*", "üml", "semi;colon", "new\nline"}) {
    auto st = validate_entity_name(bad, "tenant");
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(validate_entity_name(std::string(kMaxNameLength, 'a'), "tenant").is_ok());
  EXPECT_FALSE(validate_entity_name(std::string(kMaxNameLength + 1, 'a'), "tenant").is_ok());
  EXPECT_NE(validate_entity_name("a b", "namespace").message().find("namespace"), std::string::npos);
}

TEST(NamingTest, NamespaceNames) {
  auto ns = NamespaceName::parse("public/default");
  ASSERT_TRUE(ns.is_ok());
  EXPECT_EQ(ns->tenant, "public");
  EXPECT_EQ(ns->local, "default");
  EXPECT_EQ(ns->to_string(), "public/default");
  for (const char* bad : {"public", "public/", "/default", "a/b/c", "pub lic/default"}) {
    EXPECT_FALSE(NamespaceName::parse(bad).is_ok()) << bad;
  }
}

TEST(NamingTest, TopicNamesFullAndShort) {
  auto t = TopicName::parse("persistent://acme/orders/created");
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->domain, TopicDomain::kPersistent);
  EXPECT_EQ(t->ns.to_string(), "acme/orders");
  EXPECT_EQ(t->local, "created");
  EXPECT_FALSE(t->is_partition());
  EXPECT_EQ(t->to_string(), "persistent://acme/orders/created");

  auto np = TopicName::parse("non-persistent://acme/orders/ticks");
  ASSERT_TRUE(np.is_ok());
  EXPECT_EQ(np->domain, TopicDomain::kNonPersistent);

  EXPECT_EQ(TopicName::parse("my-topic")->to_string(), "persistent://public/default/my-topic");
  EXPECT_EQ(TopicName::parse("acme/orders/x")->to_string(), "persistent://acme/orders/x");

  for (const char* bad : {"", "kafka://a/b/c", "persistent://a/b", "persistent://a/b/", "persistent://a/b/c/d",
                          "a/b", "persistent://bad tenant/b/c"}) {
    EXPECT_FALSE(TopicName::parse(bad).is_ok()) << bad;
  }
}

TEST(NamingTest, Partitions) {
  auto p = TopicName::parse("persistent://t/n/orders-partition-3");
  ASSERT_TRUE(p.is_ok());
  EXPECT_TRUE(p->is_partition());
  EXPECT_EQ(p->partition, 3);
  EXPECT_EQ(p->base().to_string(), "persistent://t/n/orders");
  EXPECT_EQ(p->base().partition_of(0).to_string(), "persistent://t/n/orders-partition-0");
  // Not partition suffixes: no digits, leading zero, sign, trailing text.
  for (const char* local : {"x-partition-", "x-partition-01", "x-partition--1", "x-partition-2a", "-partition-1"}) {
    auto t = TopicName::parse(std::string("persistent://t/n/") + local);
    ASSERT_TRUE(t.is_ok()) << local;
    EXPECT_FALSE(t->is_partition()) << local;
  }
}

}  // namespace
}  // namespace magnetar::broker
