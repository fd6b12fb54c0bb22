// Reads: the tail cache, then the read-ahead cache, then the disk (on the
// "storage-read" threads) with read-ahead past what was asked.
#include <algorithm>

#include "common/logging.h"
#include "storage/storage_impl.h"

namespace magnetar::storage {

using common::Result;
using common::Slice;
using common::Status;
using runtime::Reactor;

namespace {

// Records closer than this in one segment are read with one pread.
constexpr uint64_t kMaxSpanGap = 64u << 10;
// Index lookups one disk read makes at most when the segments it points
// into are removed under it (each removal moved the records first).
constexpr int kMaxLookups = 4;

}  // namespace

void StorageImpl::read_entries(LedgerId id, EntryId first, EntryId last,
                               Callback<Result<std::vector<Entry>>> done) {
  Reactor* home = Reactor::current();
  auto fail = [&](Status st) { deliver(home, [done, st = std::move(st)]() mutable { done(std::move(st)); }); };
  auto state = find(id);
  if (!state) return fail(Status::not_found("ledger " + std::to_string(id) + " does not exist"));
  EntryId lac = state->last_confirmed.load(std::memory_order_acquire);
  if (first < 0 || first > last || last > lac) {
    return fail(Status::invalid_argument("read " + std::to_string(first) + ".." + std::to_string(last) +
                                         " of ledger " + std::to_string(id) + " whose last confirmed entry is " +
                                         std::to_string(lac)));
  }
  std::vector<Entry> entries;
  size_t bytes = 0;
  for (;;) {
    EntryId next = first + static_cast<EntryId>(entries.size());
    if (next > last || bytes >= options_.max_read_bytes) break;
    size_t got = tail_cache_.get_range(id, next, last, options_.max_read_bytes, &entries, &bytes);
    next = first + static_cast<EntryId>(entries.size());
    if (next <= last) got += read_ahead_cache_.get_range(id, next, last, options_.max_read_bytes, &entries, &bytes);
    if (got == 0) break;
  }
  EntryId next = first + static_cast<EntryId>(entries.size());
  cache_hits_.inc(entries.size());
  if (next > last || (!entries.empty() && bytes >= options_.max_read_bytes)) {
    deliver(home, [done, entries = std::move(entries)]() mutable { done(std::move(entries)); });
    return;
  }
  if (!started_ || read_threads_.empty()) return fail(Status::unavailable("storage is not running"));
  // One ledger's reads stay on one thread (in order, with the kernel's
  // read-ahead on one file warm); different ledgers read in parallel.
  runtime::WorkerThread& thread = *read_threads_[id % read_threads_.size()];
  Status st = thread.post([this, state, first, last, entries = std::move(entries), bytes, home, done]() mutable {
    read_from_disk(std::move(state), first, last, std::move(entries), bytes, home, std::move(done));
  });
  if (!st.is_ok()) fail(std::move(st));
}

Result<std::shared_ptr<SegmentReader>> StorageImpl::segment_reader(uint64_t segment) {
  std::lock_guard lock(readers_mu_);
  auto it = readers_.find(segment);
  if (it != readers_.end()) return it->second;
  auto opened = SegmentReader::open(segments_dir_, segment, *ops_);
  if (!opened) return opened.status();
  // A segment that collect_garbage let go (it erases the cached handle once
  // and then removes the file) is read through this handle but not kept:
  // kept, it would hold the removed file's space until stop().
  bool dead = false;
  {
    std::lock_guard lock(usage_mu_);
    dead = removing_.count(segment) != 0 || (segment < active_segment_ && usage_.count(segment) == 0);
  }
  if (!dead) readers_.emplace(segment, *opened);
  return opened;
}

void StorageImpl::read_from_disk(std::shared_ptr<LedgerState> ledger, EntryId first, EntryId last,
                                 std::vector<Entry> entries, size_t bytes, Reactor* home,
                                 Callback<Result<std::vector<Entry>>> done) {
  auto finish = [&](Status st) {
    Result<std::vector<Entry>> result = std::move(entries);
    if (result->empty()) result = st.is_ok() ? Status::internal("read returned nothing") : std::move(st);
    deliver(home, [done = std::move(done), result = std::move(result)]() mutable { done(std::move(result)); });
  };
  const EntryId lac = ledger->last_confirmed.load(std::memory_order_acquire);
  const EntryId ahead = std::min<EntryId>(static_cast<EntryId>(options_.read_ahead_entries), last - first + 1);
  const EntryId ahead_end = std::min<EntryId>(lac, last + ahead);
  // Read-ahead stops at the same byte budget as the answer itself.
  const size_t read_budget = 2 * options_.max_read_bytes;
  size_t read_bytes = 0;
  EntryId id = first + static_cast<EntryId>(entries.size());
  Status error;
  // A segment the index pointed into may be gone by the time it is opened:
  // compaction moved its records and removed it. The index points at the
  // copies by then (it moves before the segment goes), so the read looks
  // again from the entry it stopped at.
  for (int attempt = 0;; ++attempt) {
    bool moved = false;
    const EntryId start = id;
    auto locations = index_->lookup(ledger->id, start, static_cast<size_t>(ahead_end - start + 1));
    if (!locations) {
      read_errors_.inc();
      return finish(locations.status());
    }
    if (locations->empty()) {
      read_errors_.inc();
      return finish(Status::corruption("entry " + std::to_string(ledger->id) + ":" + std::to_string(start) +
                                       " is missing from the index"));
    }
    const auto& locs = *locations;
    for (size_t i = 0; i < locs.size() && read_bytes < read_budget && error.is_ok();) {
      // One span: consecutive records of one segment with small gaps between.
      size_t j = i + 1;
      uint64_t span_end = locs[i].offset + locs[i].size;
      size_t entry_bytes = locs[i].size;
      while (j < locs.size() && locs[j].segment == locs[i].segment && locs[j].offset >= span_end &&
             locs[j].offset - span_end <= kMaxSpanGap &&
             read_bytes + (locs[j].offset + locs[j].size - locs[i].offset) <= read_budget) {
        span_end = locs[j].offset + locs[j].size;
        entry_bytes += locs[j].size;
        ++j;
      }
      const uint64_t span_start = locs[i].offset;
      auto reader = segment_reader(locs[i].segment);
      if (!reader && attempt < kMaxLookups - 1) {
        moved = true;
        break;
      }
      Result<Slice> span = reader ? reader.value()->read(span_start, span_end - span_start) : reader.status();
      if (!span) {
        error = span.status();
        break;
      }
      read_bytes += span->size();
      // Sparse spans (other ledgers' records between ours) are not pinned by
      // the cache: their entries are copied out.
      const bool dense = entry_bytes * 2 >= span->size();
      for (size_t k = i; k < j; ++k, ++id) {
        Slice record = span->sub(locs[k].offset - span_start, locs[k].size);
        auto payload = decode_entry_record(record, ledger->id, id);
        if (!payload) {
          error = payload.status();
          break;
        }
        Slice data = dense ? payload.value() : Slice::copy_of(payload->data(), payload->size());
        read_ahead_cache_.insert(ledger->id, id, data);
        if (id <= last && (entries.empty() || bytes + data.size() <= options_.max_read_bytes) &&
            first + static_cast<EntryId>(entries.size()) == id) {
          bytes += data.size();
          cache_misses_.inc();
          entries.push_back(Entry{ledger->id, id, std::move(data)});
        }
      }
      i = j;
    }
    if (!moved || id > ahead_end) break;
  }
  if (!error.is_ok()) {
    read_errors_.inc();
    MLOG_WARN("storage: read of ledger {} entry {} failed: {}", ledger->id, id, error.to_string());
  }
  finish(std::move(error));
}

}  // namespace magnetar::storage
