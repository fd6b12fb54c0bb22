#include "replication/ledger_meta.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace magnetar::replication {
namespace {

LedgerMeta three_of_three() {
  LedgerMeta m;
  m.ensemble = 3;
  m.write_quorum = 3;
  m.ack_quorum = 2;
  m.fragments.push_back(Fragment{0, {1, 2, 3}});
  return m;
}

TEST(LedgerMetaTest, RoundTripsThroughItsRecord) {
  LedgerMeta m = three_of_three();
  m.state = LedgerState::kClosed;
  m.last_entry = 41;
  m.writer = 7;
  m.created_ms = 123456;
  m.fragments.push_back(Fragment{10, {1, 4, 3}});
  auto back = decode_ledger_meta(encode_ledger_meta(m));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->state, LedgerState::kClosed);
  EXPECT_EQ(back->last_entry, 41);
  EXPECT_EQ(back->writer, 7u);
  EXPECT_EQ(back->created_ms, 123456);
  ASSERT_EQ(back->fragments.size(), 2u);
  EXPECT_EQ(back->fragments[1].first_entry, 10);
  EXPECT_EQ(back->fragments[1].nodes, (std::vector<NodeId>{1, 4, 3}));
}

TEST(LedgerMetaTest, EntriesBelongToTheFragmentTheyFallIn) {
  LedgerMeta m = three_of_three();
  m.fragments.push_back(Fragment{10, {1, 4, 3}});
  EXPECT_EQ(m.fragment_of(0).first_entry, 0);
  EXPECT_EQ(m.fragment_of(9).first_entry, 0);
  EXPECT_EQ(m.fragment_of(10).first_entry, 10);
  EXPECT_EQ(m.fragment_of(1000).first_entry, 10);
  EXPECT_EQ(m.fragment_end(0, 50), 9);
  EXPECT_EQ(m.fragment_end(1, 50), 50);
  EXPECT_EQ(m.all_nodes(), (std::vector<NodeId>{1, 2, 3, 4}));
}

TEST(LedgerMetaTest, WriteSetsAreStripedOverALargerEnsemble) {
  LedgerMeta m;
  m.ensemble = 5;
  m.write_quorum = 3;
  m.ack_quorum = 2;
  m.fragments.push_back(Fragment{0, {1, 2, 3, 4, 5}});
  EXPECT_EQ(m.write_set(0), (std::vector<NodeId>{1, 2, 3}));
  EXPECT_EQ(m.write_set(3), (std::vector<NodeId>{4, 5, 1}));
  EXPECT_EQ(three_of_three().write_set(7), (std::vector<NodeId>{2, 3, 1}));
}

// Every stripe of every ensemble up to 6 agrees with the write sets, and its
// counting agrees with counting one entry at a time.
TEST(LedgerMetaTest, EachNodesStripeHoldsExactlyTheEntriesOfItsWriteSets) {
  for (int ensemble = 1; ensemble <= 6; ++ensemble) {
    for (int quorum = 1; quorum <= ensemble; ++quorum) {
      LedgerMeta m;
      m.ensemble = ensemble;
      m.write_quorum = quorum;
      m.ack_quorum = 1;
      Fragment f{0, {}};
      for (int i = 0; i < ensemble; ++i) f.nodes.push_back(static_cast<NodeId>(10 + i));
      m.fragments.push_back(f);
      for (NodeId node : f.nodes) {
        const Stripe s = m.stripe_of(0, node);
        EXPECT_EQ(s.striped(), quorum < ensemble);
        std::vector<EntryId> held;
        for (EntryId e = 0; e < 40; ++e) {
          const std::vector<NodeId> set = m.write_set(e);
          const bool in_set = std::find(set.begin(), set.end(), node) != set.end();
          ASSERT_EQ(s.holds(e), in_set) << ensemble << "/" << quorum << " node " << node << " entry " << e;
          if (in_set) held.push_back(e);
        }
        for (EntryId e = 0; e < 30; ++e) {
          const EntryId next = *std::lower_bound(held.begin(), held.end(), e);
          EXPECT_EQ(s.next_held(e), next);
          const auto before = static_cast<size_t>(std::lower_bound(held.begin(), held.end(), e) - held.begin());
          EXPECT_EQ(s.held_between(0, e), static_cast<EntryId>(before));
          if (s.holds(e)) {
            for (size_t k = 0; before + k < held.size(); ++k) {
              EXPECT_EQ(s.nth_held(e, static_cast<EntryId>(k)), held[before + k]);
            }
          }
        }
      }
    }
  }
  EXPECT_FALSE(three_of_three().stripe_of(0, 99).striped());  // not in the fragment
}

TEST(LedgerMetaTest, RefusesRecordsThatBreakItsRules) {
  EXPECT_FALSE(decode_ledger_meta("not a record").is_ok());
  LedgerMeta none = three_of_three();
  none.fragments.clear();
  EXPECT_FALSE(decode_ledger_meta(encode_ledger_meta(none)).is_ok());
  LedgerMeta quorums = three_of_three();
  quorums.ack_quorum = 4;
  EXPECT_FALSE(decode_ledger_meta(encode_ledger_meta(quorums)).is_ok());
  LedgerMeta order = three_of_three();
  order.fragments.push_back(Fragment{0, {1, 2, 3}});
  EXPECT_FALSE(decode_ledger_meta(encode_ledger_meta(order)).is_ok());
}

}  // namespace
}  // namespace magnetar::replication
