// Segment compaction: a sealed segment that is mostly dead (most of its
// ledgers deleted) but pinned by the records of a few live ones has those
// records copied to the active segment; once the index points at the copies
// nothing live is left in it and collect_garbage removes it like any other.
//
// One segment at a time. The "storage-compact" thread reads the segment a
// step (compact_step_bytes) at a time through the read path's SegmentReader,
// keeps the records the index still points at, and submits them to the
// journal as relocation requests, which are group-committed with the
// appends (and always synced); the last copy of a step to complete starts
// the next step, so at most one step's bytes wait in the journal at once.
// The journal's listener (commit_relocations) then points the index at each
// copy whose entry is still where the copy was taken from, and moves its
// bytes in usage_. A crash before that leaves the old record as the truth
// (recovery takes a copy it finds past the checkpoint as the newer one,
// recovery.cc); after it, the copy, which is durable by then.
//
// A ledger deleted meanwhile: the compactor submits a copy under the
// ledger's mutex and only while it is not deleted, so every copy precedes
// the ledger's delete record in the log, and a copy written after the
// delete reached the index moves nothing (its entry is no longer there).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/logging.h"
#include "storage/storage_impl.h"

namespace magnetar::storage {

using common::Result;
using common::Slice;
using common::Status;

namespace {

// Index lookups made to check records of one ledger: one serves this many
// consecutive entries.
constexpr size_t kLookupEntries = 32;
// How long the compactor waits before it offers a copy to a full journal
// queue again (appends come first).
constexpr auto kQueueFullBackoff = std::chrono::milliseconds(2);

}  // namespace

struct StorageImpl::CompactionJob {
  uint64_t segment = 0;
  uint64_t size = 0;                         // of the file
  uint64_t next = format::kFileHeaderSize;  // offset of the next record to look at
  std::unordered_set<LedgerId> ledgers;      // those with live records in it when the job began
  std::shared_ptr<SegmentReader> reader;
  // Copies submitted and not completed, plus one while a step submits.
  std::atomic<size_t> outstanding{0};
  std::atomic<bool> failed{false};
};

void StorageImpl::maybe_compact() {
  if (options_.compact_ratio <= 0 || !compactor_ || !started_) return;
  auto job = std::make_shared<CompactionJob>();
  {
    std::lock_guard lock(usage_mu_);
    if (compacting_) return;
    uint64_t dead = 0;
    const SegmentUsage* best = nullptr;
    for (const auto& [segment, usage] : usage_) {
      if (segment >= active_segment_) break;
      auto size = sealed_sizes_.find(segment);
      if (size == sealed_sizes_.end()) {
        std::error_code ec;
        const uint64_t bytes = std::filesystem::file_size(segment_path(segments_dir_, segment), ec);
        if (ec) continue;
        size = sealed_sizes_.emplace(segment, bytes).first;
      }
      const uint64_t room = size->second - std::min<uint64_t>(size->second, format::kFileHeaderSize);
      dead += room - std::min(room, usage.live);
      if (compacted_.count(segment) != 0 || static_cast<double>(usage.live) >= options_.compact_ratio * room) continue;
      // The oldest first: a ledger's records are copied in the order it
      // wrote them, so its copies form long runs in the index.
      if (best == nullptr) {
        best = &usage;
        job->segment = segment;
        job->size = size->second;
      }
    }
    dead_bytes_.set(static_cast<double>(dead));
    if (best == nullptr) return;
    for (const auto& [ledger, bytes] : best->ledgers) job->ledgers.insert(ledger);
    compacting_ = true;
    compacted_.insert(job->segment);
    MLOG_INFO("storage: compacting segment {}: {} of its {} bytes are live", segment_file_name(job->segment),
              best->live, job->size);
  }
  Status st = compactor_->post([this, job]() { compact_step(job); });
  if (!st.is_ok()) end_compaction(*job, false);
}

void StorageImpl::end_compaction(const CompactionJob& job, bool finished) {
  if (finished) compacted_segments_.inc();
  {
    std::lock_guard lock(usage_mu_);
    compacting_ = false;
    // Tried again at the next look, not at once: a failing journal would
    // have it fail again straight away.
    if (!finished) compacted_.erase(job.segment);
  }
  if (finished) maybe_compact();
}

void StorageImpl::compact_step(std::shared_ptr<CompactionJob> job) {
  if (!started_ || job->failed) return end_compaction(*job, false);
  bool live = false;
  {
    std::lock_guard lock(usage_mu_);
    live = usage_.count(job->segment) != 0;
  }
  if (!live) return end_compaction(*job, true);  // nothing live is left in it
  if (job->next + format::kRecordHeaderSize > job->size) return end_compaction(*job, true);
  if (!job->reader) {
    auto reader = segment_reader(job->segment);
    if (!reader) {
      MLOG_WARN("storage: cannot compact segment {}: {}", job->segment, reader.status().to_string());
      return end_compaction(*job, false);
    }
    job->reader = std::move(reader.value());
  }
  const uint64_t start = job->next;
  const uint64_t step = std::max<uint64_t>(options_.compact_step_bytes, format::kRecordHeaderSize);
  auto window = job->reader->read(start, std::min<uint64_t>(step, job->size - start));
  // Whole records of the window; a damaged stretch is stepped over a byte
  // at a time until a good record starts, as recovery does.
  std::vector<ScannedRecord> records;
  uint64_t pos = 0;
  while (window && pos + format::kRecordHeaderSize <= window->size()) {
    const format::RecordHeader h = format::decode_record_header(window->data() + pos);
    const uint64_t size = format::kRecordHeaderSize + h.length;
    if (format::header_plausible(h) && pos + size > window->size() && start + pos + size <= job->size) {
      if (pos > 0) break;  // the next step starts with it
      window = job->reader->read(start, size);  // one record larger than a step
      continue;
    }
    if (!format::header_plausible(h) || pos + size > window->size() ||
        !format::record_checksum_ok(window->data() + pos, h)) {
      ++pos;
      continue;
    }
    records.push_back(ScannedRecord{h, start + pos, static_cast<uint32_t>(size), nullptr});
    pos += size;
  }
  if (!window) {
    MLOG_WARN("storage: cannot compact segment {}: {}", job->segment, window.status().to_string());
    return end_compaction(*job, false);
  }
  job->next = start + pos;

  // The records the index still points at: their copies.
  struct Looked {
    EntryId first = 0;
    std::vector<EntryLocation> locations;
  };
  std::unordered_map<LedgerId, Looked> looked;
  std::vector<JournalRequest> copies;
  for (const ScannedRecord& rec : records) {
    const format::RecordHeader& h = rec.header;
    if (h.type != format::RecordType::kEntry || job->ledgers.count(h.ledger) == 0) continue;
    const EntryLocation here{job->segment, rec.offset, rec.size};
    Looked& l = looked[h.ledger];
    if (h.entry < l.first || h.entry >= l.first + static_cast<EntryId>(l.locations.size())) {
      auto found = index_->lookup(h.ledger, h.entry, kLookupEntries);
      if (!found) {
        MLOG_WARN("storage: compaction of segment {}: {}", job->segment, found.status().to_string());
        continue;
      }
      l.first = h.entry;
      l.locations = std::move(found.value());
      if (l.locations.empty()) continue;
    }
    if (!(l.locations[static_cast<size_t>(h.entry - l.first)] == here)) continue;
    auto state = find(h.ledger);
    if (!state) continue;  // deleted
    JournalRequest r;
    r.type = format::RecordType::kEntry;
    r.ledger = std::move(state);
    r.entry = h.entry;
    r.payload = window->sub(rec.offset - start + format::kRecordHeaderSize, h.length);
    r.relocation = true;
    r.relocated_from = here;
    copies.push_back(std::move(r));
  }

  auto step_done = [this, job]() {
    if (job->outstanding.fetch_sub(1) != 1) return;
    Status st = compactor_->post([this, job]() { compact_step(job); });
    if (!st.is_ok()) end_compaction(*job, false);
  };
  job->outstanding = 1;
  for (JournalRequest& r : copies) {
    if (job->failed) break;
    r.done = [job, step_done](Status st) {
      if (!st.is_ok()) job->failed = true;
      step_done();
    };
    LedgerState& ledger = *r.ledger;
    for (;;) {
      Status st;
      {
        // Under the ledger's mutex and only while it is not deleted: the
        // copy goes into the log before the ledger's delete record.
        std::lock_guard lock(ledger.mu);
        if (ledger.phase == LedgerPhase::kDeleted) break;
        job->outstanding.fetch_add(1);
        st = journal_->submit(std::move(r));
        if (st.is_ok()) break;
        job->outstanding.fetch_sub(1);
      }
      if (st.code() != common::ErrorCode::kResourceExhausted || !started_) {
        job->failed = true;
        break;
      }
      std::this_thread::sleep_for(kQueueFullBackoff);
    }
  }
  step_done();
}

Result<bool> StorageImpl::commit_relocations(const std::vector<const JournalRequest*>& copies,
                                             const Checkpoint& durable) {
  bool freed = false;
  Index::Batch dropped;
  for (size_t i = 0; i < copies.size();) {
    // One index update per stretch of consecutive entries of one ledger.
    const LedgerId ledger = copies[i]->ledger->id;
    size_t j = i + 1;
    while (j < copies.size() && copies[j]->ledger->id == ledger && copies[j]->entry == copies[j - 1]->entry + 1) ++j;
    std::vector<EntryLocation> to;
    std::vector<EntryLocation> from;
    for (size_t k = i; k < j; ++k) {
      const EntryLocation& loc = copies[k]->location;
      to.push_back(loc);
      // A copy no sync covered never replaces the original (the journal
      // syncs every batch with copies, so this holds unless a sync failed).
      const bool is_durable = Checkpoint{loc.segment, loc.offset + loc.size} <= durable;
      from.push_back(is_durable ? copies[k]->relocated_from : EntryLocation{});
    }
    std::vector<bool> moved;
    MAGNETAR_RETURN_IF_ERROR(index_->relocate(ledger, copies[i]->entry, to, &from, &moved));
    std::lock_guard lock(usage_mu_);
    for (size_t k = i; k < j; ++k) {
      if (!moved[k - i]) continue;
      const EntryLocation& old = copies[k]->relocated_from;
      const EntryLocation& copy = copies[k]->location;
      add_usage(copy.segment, ledger, copy.size);
      if (remove_usage(old.segment, ledger, old.size)) freed = true;
      auto left = usage_.find(old.segment);
      if (left == usage_.end() || left->second.ledgers.count(ledger) == 0) {
        dropped.drop_segment_ref(old.segment, ledger);
      }
      compacted_bytes_.inc(copy.size);
    }
    i = j;
  }
  if (!dropped.empty()) MAGNETAR_RETURN_IF_ERROR(index_->write(dropped, false));
  return freed;
}

}  // namespace magnetar::storage
