// A managed ledger on real storage and a real metadata store for unit
// tests: one reactor, a temporary directory, and helpers that run a call on
// the reactor and wait (bounded) for what it reports.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>

#include "ledger/managed_ledger.h"
#include "metadata/leveldb_store.h"
#include "runtime/reactor.h"

namespace magnetar::ledger {

using common::Result;
using common::Slice;
using common::Status;

constexpr auto kWait = std::chrono::seconds(60);

class ManagedLedgerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magnetar-ledger-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    storage_options_.directory = dir_ + "/storage";
    storage_options_.max_batch_delay = std::chrono::microseconds(0);
    storage_ = storage::make_local_storage(storage_options_);
    ASSERT_TRUE(storage_->start().is_ok());
    store_ = std::make_unique<metadata::LevelDbStore>(metadata::LevelDbStore::Options{dir_ + "/metadata"});
    ASSERT_TRUE(store_->start().is_ok());
    ids_ = std::make_unique<LedgerIdAllocator>(*store_);
    reactor_.start();
  }
  void TearDown() override {
    reactor_.run_sync([&] { ledgers_.clear(); });
    reactor_.stop();
    store_->stop();
    storage_->stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Forgets every open managed ledger, stops storage, runs `between` on its
  // directory (to damage files, say) and starts storage again.
  void restart_storage(const std::function<void(const std::string& dir)>& between) {
    reactor_.run_sync([&] { ledgers_.clear(); });
    storage_->stop();
    storage_.reset();
    between(storage_options_.directory);
    storage_ = storage::make_local_storage(storage_options_);
    ASSERT_TRUE(storage_->start().is_ok());
  }

  // Starts `op` on the reactor and waits (bounded) for the value it reports.
  template <typename T>
  T on_reactor(std::function<void(Callback<T>)> op) {
    auto p = std::make_shared<std::promise<T>>();
    auto f = p->get_future();
    reactor_.run_sync([&] { op([p](T v) { p->set_value(std::move(v)); }); });
    if (f.wait_for(kWait) != std::future_status::ready) {
      ADD_FAILURE() << "managed ledger call did not complete";
      std::abort();
    }
    return f.get();
  }

  std::shared_ptr<ManagedLedger> open(const std::string& name, ManagedLedgerConfig config = {}) {
    auto ml = on_reactor<Result<std::shared_ptr<ManagedLedger>>>([&](auto done) {
      ManagedLedger::open(name, config, *storage_, *store_, *ids_, done);
    });
    EXPECT_TRUE(ml.is_ok()) << ml.status().to_string();
    if (!ml.is_ok()) return nullptr;
    ledgers_.push_back(*ml);
    return *ml;
  }
  Result<Position> add(ManagedLedger& ml, const std::string& payload, uint32_t messages = 1, int64_t time = 0) {
    auto r = on_reactor<Result<AppendedEntry>>([&](auto done) {
      MessageHeader h;
      h.producer = "p";
      h.messages = messages;
      h.publish_time_ms = time;
      ml.add_entry(h, Slice::copy_of(payload), done);
    });
    if (!r.is_ok()) return r.status();
    return r->position;
  }
  // Every entry after `after`, through the log's compacted view when `compacted`.
  std::vector<LedgerEntry> read_all(ManagedLedger& ml, Position after, bool compacted = false) {
    std::vector<LedgerEntry> all;
    for (;;) {
      auto r = on_reactor<Result<std::vector<LedgerEntry>>>([&](auto done) {
        if (compacted) return ml.read_compacted(after, 7, done);
        ml.read_entries(after, 7, done);
      });
      EXPECT_TRUE(r.is_ok()) << r.status().to_string();
      if (!r.is_ok() || r->empty()) return all;
      after = r->back().position;
      for (auto& e : *r) all.push_back(std::move(e));
    }
  }

  std::string dir_;
  storage::StorageOptions storage_options_;
  std::unique_ptr<storage::Storage> storage_;
  std::unique_ptr<metadata::LevelDbStore> store_;
  std::unique_ptr<LedgerIdAllocator> ids_;
  runtime::Reactor reactor_{0, "reactor-test"};
  std::vector<std::shared_ptr<ManagedLedger>> ledgers_;
};

}  // namespace magnetar::ledger
