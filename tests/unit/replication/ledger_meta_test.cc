#include "replication/ledger_meta.h"

#include <gtest/gtest.h>

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
