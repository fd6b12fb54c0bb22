#include "protocol/kafka/server/fetch_groups.h"

#include <gtest/gtest.h>

namespace magnetar::protocol::kafka {
namespace {

TEST(FetchGroupsTest, AFetchingConnectionFindsTheGroupItsClientJoinedElsewhere) {
  FetchGroups groups;
  EXPECT_EQ(groups.group_of("public/default", "app-1", "/127.0.0.1:5000"), "");
  const uint64_t before = groups.version();
  // The coordinator connection joined; the fetching one has another port.
  groups.joined("public/default", "app-1", "/127.0.0.1:5000", "billing");
  EXPECT_GT(groups.version(), before);
  EXPECT_EQ(groups.group_of("public/default", "app-1", "/127.0.0.1:6000"), "billing");
  // Another namespace, client id or host is someone else.
  EXPECT_EQ(groups.group_of("acme/default", "app-1", "/127.0.0.1:6000"), "");
  EXPECT_EQ(groups.group_of("public/default", "app-2", "/127.0.0.1:6000"), "");
  EXPECT_EQ(groups.group_of("public/default", "app-1", "/10.0.0.7:6000"), "");
  // Joining the same group again changes nothing.
  const uint64_t now = groups.version();
  groups.joined("public/default", "app-1", "/127.0.0.1:5001", "billing");
  EXPECT_EQ(groups.version(), now);
}

TEST(FetchGroupsTest, MembersOfSeveralGroupsThatLookAlikeAreNoGroup) {
  FetchGroups groups;
  groups.joined("public/default", "rdkafka", "/127.0.0.1:5000", "a");
  groups.joined("public/default", "rdkafka", "/127.0.0.1:5001", "b");
  EXPECT_EQ(groups.group_of("public/default", "rdkafka", "/127.0.0.1:7000"), "");
  groups.joined("public/default", "rdkafka", "/127.0.0.1:5002", "a");
  EXPECT_EQ(groups.group_of("public/default", "rdkafka", "/127.0.0.1:7000"), "");
  // IPv6 peers: only the port is left out.
  groups.joined("public/default", "app", "/[::1]:5000", "c");
  EXPECT_EQ(groups.group_of("public/default", "app", "/[::1]:6000"), "c");
}

}  // namespace
}  // namespace magnetar::protocol::kafka
