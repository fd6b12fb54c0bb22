#include "ledger/ledger_ids.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>

#include "common/metrics.h"
#include "metadata/leveldb_store.h"
#include "runtime/reactor.h"

namespace magnetar::ledger {
namespace {

using common::Result;

class LedgerIdsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magnetar-ids-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_ + "/metadata"});
    ASSERT_TRUE(store_->start().is_ok());
  }
  void TearDown() override {
    store_->stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Asks for `n` ids from each reactor at once; returns every id handed out.
  std::vector<storage::LedgerId> allocate_at_once(LedgerIdAllocator& ids, std::vector<runtime::Reactor*> reactors,
                                                  int n) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<storage::LedgerId> got;
    size_t left = reactors.size() * static_cast<size_t>(n);
    for (runtime::Reactor* r : reactors) {
      r->run_sync([&, r] {
        for (int i = 0; i < n; ++i) {
          ids.allocate([&, r](Result<storage::LedgerId> id) {
            EXPECT_TRUE(r->is_on_thread());  // answered at home
            std::lock_guard lock(mu);
            EXPECT_TRUE(id.is_ok()) << id.status().to_string();
            if (id.is_ok()) got.push_back(*id);
            --left;
            cv.notify_all();
          });
        }
      });
    }
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return left == 0; }));
    return got;
  }

  std::string dir_;
  std::unique_ptr<metadata::LevelDbStore> store_;
};

// Thousands of topics opening at once must neither contend (they used to
// retry compare-and-sets against each other until they gave up) nor cost a
// metadata write each.
TEST_F(LedgerIdsTest, ManyAtOnceGetUniqueIdsFromFewMetadataWrites) {
  auto& writes = common::MetricsRegistry::global().counter("magnetar_metadata_writes_total", "");
  runtime::Reactor a(0, "reactor-a");
  runtime::Reactor b(1, "reactor-b");
  a.start();
  b.start();
  LedgerIdAllocator ids(*store_, 100);
  const uint64_t writes_before = writes.value();
  auto got = allocate_at_once(ids, {&a, &b}, 2000);
  a.stop();
  b.stop();
  ASSERT_EQ(got.size(), 4000u);
  std::set<storage::LedgerId> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), got.size());
  EXPECT_EQ(*unique.begin(), 1u);
  EXPECT_LE(writes.value() - writes_before, 41u);  // one per block of 100
}

TEST_F(LedgerIdsTest, ARestartNeverReusesAnId) {
  runtime::Reactor a(0, "reactor-a");
  a.start();
  std::vector<storage::LedgerId> first;
  {
    LedgerIdAllocator ids(*store_, 10);
    first = allocate_at_once(ids, {&a}, 3);
  }
  LedgerIdAllocator again(*store_, 10);
  auto second = allocate_at_once(again, {&a}, 3);
  a.stop();
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 3u);
  for (auto id : second) EXPECT_GT(id, *std::max_element(first.begin(), first.end()));
}

}  // namespace
// Two members hand out ids from blocks of their own; a topic that moves
// from the member with the newer block to the other must still get an id
// above its last ledger's.
TEST_F(LedgerIdsTest, AnIdAboveAGivenOneComesFromTheBlockOrANewerOne) {
  runtime::Reactor a(0, "reactor-a");
  a.start();
  LedgerIdAllocator first(*store_, 10);
  LedgerIdAllocator second(*store_, 10);
  auto one = [&](LedgerIdAllocator& ids, storage::LedgerId above) {
    std::promise<Result<storage::LedgerId>> p;
    auto f = p.get_future();
    a.run_sync([&] { ids.allocate([&p](Result<storage::LedgerId> id) { p.set_value(id); }, above); });
    auto id = f.get();
    EXPECT_TRUE(id.is_ok()) << id.status().to_string();
    return id.is_ok() ? *id : 0;
  };
  const storage::LedgerId old_block = one(first, 0);   // 1, block 1..10
  const storage::LedgerId new_block = one(second, 0);  // 11, block 11..20
  ASSERT_GT(new_block, old_block);
  // Above the other member's id: the old block cannot serve it, a new one does.
  const storage::LedgerId moved = one(first, new_block);
  EXPECT_GT(moved, new_block);
  EXPECT_GT(moved, 20u);
  // Within a block, the ids up to the given one are skipped.
  EXPECT_EQ(one(second, new_block + 5), new_block + 6);
  a.stop();
}

}  // namespace magnetar::ledger
