#include <gtest/gtest.h>

#include "ledger/ledger_chain.h"

namespace magnetar::ledger {
namespace {

ChainLedger ledger(LedgerId id, int64_t first_index, std::initializer_list<uint32_t> per_entry) {
  ChainLedger l;
  l.id = id;
  l.first_index = first_index;
  for (uint32_t m : per_entry) {
    l.record_entry(m);
    ++l.entries;
  }
  return l;
}

TEST(LedgerChainIndexTest, FindsTheEntryHoldingAnIndexAcrossBatchesAndLedgers) {
  LedgerChain chain;
  chain.append(ledger(5, 0, {1, 1, 3, 3, 1}));  // indexes 0,1,2-4,5-7,8
  chain.append(ledger(9, 9, {2, 1}));           // 9-10, 11
  EXPECT_EQ(chain.entry_of_index(0), (Position{5, 0}));
  EXPECT_EQ(chain.entry_of_index(1), (Position{5, 1}));
  EXPECT_EQ(chain.entry_of_index(2), (Position{5, 2}));
  EXPECT_EQ(chain.entry_of_index(4), (Position{5, 2}));
  EXPECT_EQ(chain.entry_of_index(5), (Position{5, 3}));
  EXPECT_EQ(chain.entry_of_index(7), (Position{5, 3}));
  EXPECT_EQ(chain.entry_of_index(8), (Position{5, 4}));
  EXPECT_EQ(chain.entry_of_index(10), (Position{9, 0}));
  EXPECT_EQ(chain.entry_of_index(11), (Position{9, 1}));
  EXPECT_EQ(chain.entry_of_index(12), std::nullopt);
  EXPECT_EQ(chain.entry_of_index(-1), std::nullopt);
}

TEST(LedgerChainIndexTest, TrimmedLedgersAndIncompleteRunsAreNotGuessed) {
  LedgerChain chain;
  chain.append(ledger(3, 100, {10, 10}));
  EXPECT_EQ(chain.entry_of_index(99), std::nullopt);  // trimmed away
  EXPECT_EQ(chain.entry_of_index(115), (Position{3, 1}));
  chain.back().entries += 1;  // an entry whose message count is not known yet
  EXPECT_EQ(chain.entry_of_index(105), std::nullopt);
}

}  // namespace
}  // namespace magnetar::ledger
