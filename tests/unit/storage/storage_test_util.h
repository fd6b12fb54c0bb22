// Helpers for storage tests: a temporary directory per test, blocking
// wrappers over the asynchronous API (every wait bounded), entry contents
// derived from (ledger, entry) so that any reader can check them.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "common/result.h"
#include "storage/storage.h"

namespace magnetar::storage::testing {

inline constexpr auto kWait = std::chrono::seconds(60);

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "magnetar-storage-XXXXXX").string();
    char* made = ::mkdtemp(tmpl.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Waits (bounded) for an asynchronous call's answer.
template <typename T>
T wait_for(std::future<T>& f) {
  if (f.wait_for(kWait) != std::future_status::ready) {
    ADD_FAILURE() << "storage call did not complete in time";
    std::abort();  // the callback may still fire into a dead promise
  }
  return f.get();
}

inline common::Result<LedgerWriter> create_ledger(Storage& s, LedgerId id) {
  auto p = std::make_shared<std::promise<common::Result<LedgerWriter>>>();
  auto f = p->get_future();
  s.create_ledger(id, [p](common::Result<LedgerWriter> r) { p->set_value(std::move(r)); });
  return wait_for(f);
}

inline common::Result<LedgerWriter> create_ledger_with(Storage& s, LedgerId id, const LedgerOptions& options) {
  auto p = std::make_shared<std::promise<common::Result<LedgerWriter>>>();
  auto f = p->get_future();
  s.create_ledger_with(id, options, [p](common::Result<LedgerWriter> r) { p->set_value(std::move(r)); });
  return wait_for(f);
}

inline common::Result<LedgerWriter> open_ledger(Storage& s, LedgerId id) {
  auto p = std::make_shared<std::promise<common::Result<LedgerWriter>>>();
  auto f = p->get_future();
  s.open_ledger(id, [p](common::Result<LedgerWriter> r) { p->set_value(std::move(r)); });
  return wait_for(f);
}

inline common::Status add_entry(Storage& s, const LedgerWriter& w, EntryId e, common::Slice data) {
  auto p = std::make_shared<std::promise<common::Status>>();
  auto f = p->get_future();
  s.add_entry(w, e, std::move(data), [p](common::Status st) { p->set_value(std::move(st)); });
  return wait_for(f);
}

inline common::Result<EntryId> close_ledger(Storage& s, LedgerId id) {
  auto p = std::make_shared<std::promise<common::Result<EntryId>>>();
  auto f = p->get_future();
  s.close_ledger(id, [p](common::Result<EntryId> r) { p->set_value(std::move(r)); });
  return wait_for(f);
}

inline common::Result<std::vector<Entry>> read_entries(Storage& s, LedgerId id, EntryId first, EntryId last) {
  auto p = std::make_shared<std::promise<common::Result<std::vector<Entry>>>>();
  auto f = p->get_future();
  s.read_entries(id, first, last, [p](common::Result<std::vector<Entry>> r) { p->set_value(std::move(r)); });
  return wait_for(f);
}

inline common::Status delete_ledger(Storage& s, LedgerId id) {
  auto p = std::make_shared<std::promise<common::Status>>();
  auto f = p->get_future();
  s.delete_ledger(id, [p](common::Status st) { p->set_value(std::move(st)); });
  return wait_for(f);
}

// Deterministic contents: size and bytes follow from (ledger, entry).
inline std::string entry_payload(LedgerId ledger, EntryId entry, size_t base_size = 100) {
  uint64_t x = ledger * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(entry) * 0xBF58476D1CE4E5B9ull + 1;
  size_t size = base_size + static_cast<size_t>(x % 64);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x);
  }
  return out;
}

// Reads every entry first..last, following short reads.
inline common::Result<std::vector<Entry>> read_all(Storage& s, LedgerId id, EntryId first, EntryId last) {
  std::vector<Entry> all;
  while (first <= last) {
    auto r = read_entries(s, id, first, last);
    if (!r) return r.status();
    if (r->empty()) return common::Status::internal("empty read");
    for (auto& e : *r) all.push_back(std::move(e));
    first = all.back().id + 1;
  }
  return all;
}

inline StorageOptions small_options(const std::string& dir) {
  StorageOptions o;
  o.directory = dir;
  o.max_batch_delay = std::chrono::microseconds(0);
  return o;
}

}  // namespace magnetar::storage::testing
