// The reconciler against real storage and a real metadata store: ledgers no
// topic names are deleted, named ones never are, and a ledger made by this
// process is given one pass to be named first.
#include "ledger/ledger_reconciler.h"

#include <gtest/gtest.h>

#include <thread>

#include "utils/ledger_fixture.h"
#include "metadata/blocking.h"

namespace magnetar::ledger {
namespace {

class LedgerReconcilerTest : public ManagedLedgerFixture {
 protected:
  // A ledger straight in storage, as a crash between a storage create and
  // its ledger list write leaves one.
  void make_orphan(storage::LedgerId id) {
    auto p = std::make_shared<std::promise<Result<storage::LedgerWriter>>>();
    auto f = p->get_future();
    storage_->create_ledger(id, [p](Result<storage::LedgerWriter> w) { p->set_value(std::move(w)); });
    ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
    auto w = f.get();
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  }
  bool stored(storage::LedgerId id) { return storage_->ledger_info(id).is_ok(); }
  // Starts a reconciler that runs its pass at start only, and waits for it.
  std::unique_ptr<LedgerReconciler> start_reconciler(bool holds_every_ledger = true, std::string records = "") {
    auto r = std::make_unique<LedgerReconciler>(*storage_, *store_, std::chrono::milliseconds(0));
    r->set_holds_every_ledger(holds_every_ledger);
    r->set_ledger_records(std::move(records));
    EXPECT_TRUE(r->start().is_ok());
    const auto deadline = std::chrono::steady_clock::now() + kWait;
    while (r->passes() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(r->passes(), 1u);
    return r;
  }
};

TEST_F(LedgerReconcilerTest, UnnamedLedgersGoAndNamedOnesStay) {
  auto ml = open("public/default/persistent/orders");
  ASSERT_NE(ml, nullptr);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(add(*ml, "m" + std::to_string(i)).is_ok());
  const storage::LedgerId named = ml->chain().back().id;
  // Left by an earlier process: below the first id this one may hand out.
  make_orphan(named + 1000);
  ASSERT_TRUE(metadata::blocking::put(*store_, LedgerIdAllocator::kNextIdKey, std::to_string(named + 2000)).is_ok());
  // Made "by this process": at or above that id.
  make_orphan(named + 3000);

  auto reconciler = start_reconciler();
  EXPECT_FALSE(stored(named + 1000)) << "an older process's orphan survived the pass at start";
  EXPECT_TRUE(stored(named + 3000)) << "a ledger made by this process was deleted at its first unnamed pass";
  EXPECT_TRUE(stored(named));

  auto second = reconciler->run_pass();
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second->deleted, 1u);
  EXPECT_EQ(second->missing, 0u);
  EXPECT_FALSE(stored(named + 3000));
  // The topic reads back whole and goes on.
  EXPECT_EQ(read_all(*ml, Position{}).size(), 20u);
  EXPECT_TRUE(add(*ml, "after").is_ok());
  auto third = reconciler->run_pass();
  ASSERT_TRUE(third.is_ok());
  EXPECT_EQ(third->deleted, 0u);
  EXPECT_EQ(third->named, third->stored);
}

// A cluster member's storage holds copies other members write, of ledgers
// with ids from blocks they reserved before this member started: an
// unnamed one may be a ledger whose list write is under way elsewhere.
TEST_F(LedgerReconcilerTest, AClusterMemberGivesEveryUnnamedCopyAPass) {
  auto ml = open("public/default/persistent/copies");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE(add(*ml, "x").is_ok());
  const storage::LedgerId named = ml->chain().back().id;
  make_orphan(named + 1);  // below this process's first id: another member's, not yet in its list
  ASSERT_TRUE(metadata::blocking::put(*store_, LedgerIdAllocator::kNextIdKey, std::to_string(named + 1000)).is_ok());

  // A copy whose ledger's cluster-wide record is gone (deleted while this
  // member was down) goes at once; one whose record is there waits.
  make_orphan(named + 2);
  ASSERT_TRUE(metadata::blocking::put(*store_, "/storage/ledgers/" + std::to_string(named + 1), "meta").is_ok());
  auto reconciler = start_reconciler(false, "/storage/ledgers");
  EXPECT_FALSE(stored(named + 2)) << "a copy of a ledger deleted cluster-wide survived the pass at start";
  EXPECT_TRUE(stored(named + 1)) << "a copy below this process's first id was deleted at its first unnamed pass";
  // Still unnamed a pass later: left by a crash, and it goes.
  auto second = reconciler->run_pass();
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  EXPECT_EQ(second->deleted, 1u);
  EXPECT_FALSE(stored(named + 1));
  EXPECT_TRUE(stored(named));
}

TEST_F(LedgerReconcilerTest, ANamedLedgerStorageLostIsCountedNotHidden) {
  auto ml = open("public/default/persistent/lost");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE(add(*ml, "x").is_ok());
  const storage::LedgerId id = ml->chain().back().id;
  reactor_.run_sync([&] { ledgers_.clear(); });
  auto p = std::make_shared<std::promise<Status>>();
  auto f = p->get_future();
  storage_->delete_ledger(id, [p](Status st) { p->set_value(std::move(st)); });
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(f.get().is_ok());

  LedgerReconciler reconciler(*storage_, *store_, std::chrono::milliseconds(0));
  auto pass = reconciler.run_pass();
  ASSERT_TRUE(pass.is_ok()) << pass.status().to_string();
  EXPECT_EQ(pass->missing, 1u);
  EXPECT_EQ(pass->deleted, 0u);
}

// Storage full of ledgers no list names is a metadata store that lost its
// records (or another node's): the pass deletes nothing and says so.
TEST_F(LedgerReconcilerTest, MostLedgersUnnamedDeletesNone) {
  auto ml = open("public/default/persistent/kept");
  ASSERT_NE(ml, nullptr);
  ASSERT_TRUE(add(*ml, "x").is_ok());
  const storage::LedgerId named = ml->chain().back().id;
  ASSERT_TRUE(metadata::blocking::put(*store_, LedgerIdAllocator::kNextIdKey, std::to_string(named + 1000)).is_ok());
  for (storage::LedgerId id = named + 1; id <= named + LedgerReconciler::kMaxUnchecked + 1; ++id) make_orphan(id);

  LedgerReconciler reconciler(*storage_, *store_, std::chrono::milliseconds(0));
  ASSERT_TRUE(reconciler.start().is_ok());
  auto pass = reconciler.run_pass();
  ASSERT_TRUE(pass.is_ok()) << pass.status().to_string();
  EXPECT_EQ(pass->deleted, 0u);
  EXPECT_EQ(pass->refused, LedgerReconciler::kMaxUnchecked + 1);
  for (storage::LedgerId id = named + 1; id <= named + LedgerReconciler::kMaxUnchecked + 1; ++id) {
    EXPECT_TRUE(stored(id)) << id;
  }
}

}  // namespace
}  // namespace magnetar::ledger
