// Start-up: rebuild the index from the segments past its checkpoint, cut a
// torn or corrupt tail, load the ledgers into memory.
#include <unistd.h>

#include "common/logging.h"
#include "storage/storage_impl.h"

namespace magnetar::storage {

using common::Status;

namespace {

// Index updates are flushed every this many records during a replay, to
// bound memory on a long tail.
constexpr size_t kReplayFlushRecords = 16384;

}  // namespace

Status StorageImpl::recover() {
  MAGNETAR_RETURN_IF_ERROR(ensure_directory(segments_dir_));
  MAGNETAR_RETURN_IF_ERROR(ensure_directory(index_dir_));
  auto index = Index::open(index_dir_);
  if (!index) return index.status();
  index_ = std::move(index.value());
  auto cp = index_->checkpoint();
  if (!cp) return cp.status();
  auto segments = list_segments(segments_dir_);
  if (!segments) return segments.status();

  std::unique_ptr<SegmentAppender> active;
  if (segments->empty()) {
    auto created = SegmentAppender::create(segments_dir_, std::max<uint64_t>(cp->segment, 1));
    if (!created) return created.status();
    active = std::move(created.value());
  } else {
    uint64_t last_valid_end = 0;
    size_t replayed = 0;
    for (uint64_t s : *segments) {
      if (s < cp->segment) continue;
      uint64_t start = s == cp->segment ? cp->offset : 0;
      uint64_t valid_end = 0;
      MAGNETAR_RETURN_IF_ERROR(replay_segment(s, start, s == segments->back(), &valid_end));
      last_valid_end = valid_end;
      ++replayed;
    }
    uint64_t last = segments->back();
    if (replayed == 0) {
      // The checkpoint points past every file: nothing to replay; append anew.
      MLOG_WARN("storage: index checkpoint (segment {}) is past the last segment {}", cp->segment, last);
      auto created = SegmentAppender::create(segments_dir_, cp->segment + 1);
      if (!created) return created.status();
      active = std::move(created.value());
    } else if (last_valid_end < format::kFileHeaderSize) {
      // The last segment never got its header to disk: start it again.
      std::string path = segment_path(segments_dir_, last);
      MLOG_WARN("storage: segment {} has no valid header; recreating it", segment_file_name(last));
      if (::unlink(path.c_str()) != 0) return Status::from_errno(errno, "remove " + path);
      auto created = SegmentAppender::create(segments_dir_, last);
      if (!created) return created.status();
      active = std::move(created.value());
    } else {
      auto reopened = SegmentAppender::reopen(segments_dir_, last, last_valid_end);
      if (!reopened) return reopened.status();
      active = std::move(reopened.value());
    }
  }
  active_segment_ = active->id();
  MAGNETAR_RETURN_IF_ERROR(load_ledgers());
  auto refs = index_->segment_refs();
  if (!refs) return refs.status();
  segment_refs_ = std::move(refs.value());
  Status gc = collect_garbage(active_segment_);
  if (!gc.is_ok()) MLOG_WARN("storage: segment garbage collection failed: {}", gc.to_string());
  journal_ = std::make_unique<Journal>(segments_dir_, options_, static_cast<JournalListener*>(this), std::move(active));
  return Status::ok();
}

Status StorageImpl::replay_segment(uint64_t segment, uint64_t start, bool is_last, uint64_t* valid_end) {
  Index::Batch updates;
  size_t pending = 0;
  size_t records = 0;
  Status failure;
  auto flush = [&](uint64_t offset) {
    if (!failure.is_ok()) return;
    updates.set_checkpoint(Checkpoint{segment, offset});
    failure = index_->write(updates, false);
    pending = 0;
  };
  auto scanned = scan_segment(segments_dir_, segment, start, [&](const ScannedRecord& rec) {
    if (!failure.is_ok()) return;
    const auto& h = rec.header;
    ++records;
    switch (h.type) {
      case format::RecordType::kEntry:
        updates.add_entry(h.ledger, h.entry, EntryLocation{segment, rec.offset, rec.size});
        break;
      case format::RecordType::kLedgerCreated:
        updates.put_ledger(LedgerMeta{h.ledger, false, kNoEntry});
        break;
      case format::RecordType::kLedgerClosed:
        updates.put_ledger(LedgerMeta{h.ledger, true, h.entry});
        break;
      case format::RecordType::kLedgerDeleted: {
        flush(rec.offset);
        std::set<uint64_t> segments;
        if (failure.is_ok()) failure = index_->delete_ledger(h.ledger, &segments);
        break;
      }
    }
    if (++pending >= kReplayFlushRecords) flush(rec.offset + rec.size);
  });
  if (!scanned) return scanned.status();
  MAGNETAR_RETURN_IF_ERROR(failure);
  const ScanResult& result = scanned.value();
  if (!result.header_ok) {
    MLOG_ERROR("storage: segment {} has no valid file header ({} bytes); nothing in it is served",
               segment_file_name(segment), result.file_size);
    *valid_end = 0;
    return Status::ok();
  }
  *valid_end = result.valid_end;
  if (result.valid_end < result.file_size) {
    uint64_t cut = result.file_size - result.valid_end;
    if (is_last) {
      MLOG_WARN("storage: segment {}: cut a torn tail of {} bytes at offset {}", segment_file_name(segment), cut,
                result.valid_end);
    } else {
      MLOG_ERROR("storage: segment {}: {} corrupt bytes at offset {} before the end of the log; cut",
                 segment_file_name(segment), cut, result.valid_end);
      std::string path = segment_path(segments_dir_, segment);
      if (::truncate(path.c_str(), static_cast<off_t>(result.valid_end)) != 0) {
        return Status::from_errno(errno, "cut " + path);
      }
    }
  }
  flush(result.valid_end);
  MAGNETAR_RETURN_IF_ERROR(failure);
  if (records > 0) {
    MLOG_INFO("storage: replayed {} records of segment {} from offset {}", records, segment_file_name(segment),
              start);
  }
  return Status::ok();
}

Status StorageImpl::load_ledgers() {
  auto metas = index_->ledgers();
  if (!metas) return metas.status();
  std::lock_guard lock(table_mu_);
  ledgers_.clear();
  for (const LedgerMeta& meta : *metas) {
    auto state = std::make_shared<LedgerState>(meta.id);
    EntryId last = meta.last_entry;
    if (!meta.closed) {
      auto indexed = index_->last_entry(meta.id);
      if (!indexed) return indexed.status();
      last = *indexed;
    }
    state->phase = meta.closed ? LedgerPhase::kClosed : LedgerPhase::kOpen;
    state->closed_last = meta.closed ? meta.last_entry : kNoEntry;
    state->next_entry = last + 1;
    state->journal_last = last;
    state->last_confirmed.store(last, std::memory_order_relaxed);
    ledgers_.emplace(meta.id, std::move(state));
  }
  MLOG_INFO("storage: {} ledgers loaded", ledgers_.size());
  return Status::ok();
}

}  // namespace magnetar::storage
