#include "ledger/range_set.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace magnetar::ledger {
namespace {

using Ref = std::set<std::pair<LedgerId, EntryId>>;

std::vector<RangeSet::Range> ref_ranges(const Ref& ref) {
  std::vector<RangeSet::Range> out;
  for (auto [l, e] : ref) {
    if (!out.empty() && out.back().ledger == l && out.back().last + 1 == e) {
      out.back().last = e;
    } else {
      out.push_back({l, e, e});
    }
  }
  return out;
}

TEST(RangeSetTest, AddContainsAndRanges) {
  RangeSet s;
  s.add({1, 5});
  s.add({1, 6});
  s.add({1, 8});
  s.add_range(2, 0, 9999);
  EXPECT_TRUE(s.contains({1, 5}));
  EXPECT_FALSE(s.contains({1, 7}));
  EXPECT_FALSE(s.contains({1, -1}));
  EXPECT_EQ(s.size(), 3u + 10000u);
  EXPECT_EQ(s.ranges(), (std::vector<RangeSet::Range>{{1, 5, 6}, {1, 8, 8}, {2, 0, 9999}}));
  EXPECT_EQ(s.count_in(2, 100, 4195), 4096u);
  EXPECT_EQ(s.first_absent(1, 5), 7);
  EXPECT_EQ(s.first_absent(2, 0), 10000);
  EXPECT_EQ(s.first_absent(3, 4), 4);
}

TEST(RangeSetTest, RemoveThroughDropsEverythingUpToAPosition) {
  RangeSet s;
  s.add_range(1, 0, 10);
  s.add_range(2, 0, 10000);
  s.remove_through({2, 4999});
  EXPECT_FALSE(s.contains({1, 3}));
  EXPECT_FALSE(s.contains({2, 4999}));
  EXPECT_TRUE(s.contains({2, 5000}));
  EXPECT_EQ(s.size(), 5001u);
  s.remove_through({3, -1});
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.memory_bytes(), 0u);
}

TEST(RangeSetTest, ScatteredAcksStaySmall) {
  RangeSet s;
  for (EntryId e = 0; e < 2'000'000; e += 2) s.add({7, e});
  EXPECT_EQ(s.size(), 1'000'000u);
  // 2M entry ids -> 489 chunks of 512 bytes.
  EXPECT_LT(s.memory_bytes(), 400u * 1024);
  // Filling the gaps turns chunks into runs that cost no bitmap.
  for (EntryId e = 1; e < 2'000'000; e += 2) s.add({7, e});
  EXPECT_EQ(s.ranges(), (std::vector<RangeSet::Range>{{7, 0, 1'999'999}}));
  EXPECT_LT(s.memory_bytes(), 64u * 1024);
}

// Random operations against a std::set of positions.
TEST(RangeSetTest, MatchesAReferenceModel) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    RangeSet s;
    Ref ref;
    auto ledger = [&] { return static_cast<LedgerId>(rng() % 3 + 1); };
    auto entry = [&] { return static_cast<EntryId>(rng() % 10000); };
    for (int op = 0; op < 3000; ++op) {
      switch (rng() % 10) {
        case 0: case 1: case 2: case 3: {
          Position p{ledger(), entry()};
          s.add(p);
          ref.insert({p.ledger, p.entry});
          break;
        }
        case 4: {
          LedgerId l = ledger();
          EntryId a = entry();
          EntryId b = a + static_cast<EntryId>(rng() % 5000);
          s.add_range(l, a, b);
          for (EntryId e = a; e <= b; ++e) ref.insert({l, e});
          break;
        }
        case 5: {
          if (rng() % 8 != 0) break;  // rarely, or the set stays empty
          Position p{ledger(), static_cast<EntryId>(rng() % 10001) - 1};
          s.remove_through(p);
          ref.erase(ref.begin(), ref.upper_bound({p.ledger, p.entry}));
          break;
        }
        case 6: {
          Position p{ledger(), entry()};
          ASSERT_EQ(s.contains(p), ref.count({p.ledger, p.entry}) == 1) << "seed " << seed;
          break;
        }
        case 7: {
          LedgerId l = ledger();
          EntryId a = entry(), b = entry();
          if (a > b) std::swap(a, b);
          uint64_t expected = static_cast<uint64_t>(
              std::distance(ref.lower_bound({l, a}), ref.upper_bound({l, b})));
          ASSERT_EQ(s.count_in(l, a, b), expected) << "seed " << seed;
          break;
        }
        case 8: {
          LedgerId l = ledger();
          EntryId from = entry();
          EntryId expected = from;
          while (ref.count({l, expected})) ++expected;
          ASSERT_EQ(s.first_absent(l, from), expected) << "seed " << seed;
          break;
        }
        case 9:
          ASSERT_EQ(s.ranges(), ref_ranges(ref)) << "seed " << seed;
          break;
      }
      ASSERT_EQ(s.size(), ref.size()) << "seed " << seed;
    }
    ASSERT_EQ(s.ranges(), ref_ranges(ref));
  }
}

}  // namespace
}  // namespace magnetar::ledger
