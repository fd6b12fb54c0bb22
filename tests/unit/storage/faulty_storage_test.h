// A fixture for tests that run the real storage on FaultyFileOps
// (utils/faulty_file_ops.h) in a temporary directory, stop it and start it
// again on the same files.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "storage/storage.h"
#include "storage_test_util.h"
#include "utils/faulty_file_ops.h"

namespace magnetar::storage::testing {

class FaultyStorageTest : public ::testing::Test {
 protected:
  StorageOptions options(FsyncMode mode = FsyncMode::kAlways) {
    StorageOptions o = small_options(dir_path_);
    o.fsync_mode = mode;
    o.file_ops = ops_;
    return o;
  }
  void start(StorageOptions o) {
    storage_ = make_local_storage(std::move(o));
    auto st = storage_->start();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  void stop() {
    storage_->stop();
    storage_.reset();
  }
  LedgerWriter create(LedgerId id) {
    auto w = create_ledger(*storage_, id);
    EXPECT_TRUE(w.is_ok()) << w.status().to_string();
    return w.is_ok() ? *w : LedgerWriter{};
  }
  // Entries from..to of ledger `id` read back as entry_payload made them.
  void expect_entries(LedgerId id, EntryId from, EntryId to) {
    auto got = read_all(*storage_, id, from, to);
    ASSERT_TRUE(got.is_ok()) << "ledger " << id << ": " << got.status().to_string();
    ASSERT_EQ(got->size(), static_cast<size_t>(to - from + 1));
    for (EntryId e = from; e <= to; ++e) {
      EXPECT_EQ((*got)[static_cast<size_t>(e - from)].data.to_string(), entry_payload(id, e)) << id << ":" << e;
    }
  }

  TempDir dir_;
  std::string dir_path_ = dir_.path();  // where the storage lives: dir_ or a directory in it
  std::shared_ptr<FaultyFileOps> ops_ = std::make_shared<FaultyFileOps>();
  std::unique_ptr<Storage> storage_;
};

}  // namespace magnetar::storage::testing
