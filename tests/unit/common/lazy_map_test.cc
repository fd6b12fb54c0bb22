#include "common/lazy_map.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

namespace magnetar::common {
namespace {

TEST(LazyMapTest, AnEmptyMapIsOnePointerAndReadsAllocateNothing) {
  static_assert(sizeof(LazyMap<int, int>) == sizeof(void*));
  LazyMap<int, std::string> m;
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.size(), 0u);
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m.find(1), m.end());
  EXPECT_EQ(m.lower_bound(1), m.end());
  EXPECT_EQ(m.upper_bound(1), m.end());
  EXPECT_EQ(m.begin(), m.end());
  EXPECT_EQ(m.erase(1), 0u);
  EXPECT_EQ(m.erase(m.begin(), m.upper_bound(5)), m.end());
  int visited = 0;
  for (const auto& kv : m) visited += kv.first;
  EXPECT_EQ(visited, 0);
  EXPECT_TRUE(m.empty());  // none of that made the map
}

TEST(LazyMapTest, BehavesAsAStdMapOnceFilled) {
  LazyMap<int, std::string> m;
  std::map<int, std::string> want;
  for (int i : {5, 1, 9, 3, 7}) {
    m[i] = std::to_string(i);
    want[i] = std::to_string(i);
  }
  EXPECT_TRUE(m.emplace(4, "four").second);
  want.emplace(4, "four");
  EXPECT_FALSE(m.emplace(4, "again").second);
  EXPECT_EQ(m.size(), want.size());
  EXPECT_EQ(m.find(4)->second, "four");
  EXPECT_EQ(m.lower_bound(6)->first, 7);
  EXPECT_EQ(m.upper_bound(7)->first, 9);

  // Erase through 4 as the subscriptions do: [begin, upper_bound(p)).
  m.erase(m.begin(), m.upper_bound(4));
  want.erase(want.begin(), want.upper_bound(4));
  auto it = m.find(7);
  it = m.erase(it);
  want.erase(7);
  EXPECT_EQ(it->first, 9);
  EXPECT_EQ(m.erase(5), 1u);
  want.erase(5);
  std::map<int, std::string> got(m.begin(), m.end());
  EXPECT_EQ(got, want);
}

TEST(LazyMapTest, ClearFreesAndTheMapComesBackOnTheNextInsert) {
  LazyMap<int, std::unique_ptr<int>> m;  // move-only values work
  m.emplace(1, std::make_unique<int>(10));
  EXPECT_FALSE(m.empty());
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.find(1), m.end());
  m.emplace(2, std::make_unique<int>(20));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(*m.find(2)->second, 20);

  LazyMap<int, std::unique_ptr<int>> moved = std::move(m);
  EXPECT_EQ(*moved.find(2)->second, 20);
}

TEST(LazyMapTest, CopiesAreDeep) {
  LazyMap<std::string, int> a;
  a["x"] = 1;
  LazyMap<std::string, int> b = a;
  b["x"] = 2;
  b["y"] = 3;
  EXPECT_EQ(a.find("x")->second, 1);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(b.size(), 2u);
  LazyMap<std::string, int> empty;
  b = empty;
  EXPECT_TRUE(b.empty());
}

}  // namespace
}  // namespace magnetar::common
