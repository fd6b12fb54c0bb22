// Start-up: rebuild the index from the segments past its checkpoint, cut a
// torn tail of the last segment, keep every good record past a damaged one,
// load the ledgers into memory.
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
  auto index = Index::open(index_dir_, options_.index_env);
  if (!index) return index.status();
  index_ = std::move(index.value());
  auto cp = index_->checkpoint();
  if (!cp) return cp.status();
  auto durable = index_->durable();
  if (!durable) return durable.status();
  if (durable->has_value() && **durable < *cp) {
    // The index was told of records no fdatasync covered (fsync interval or
    // never): after a power loss they may be gone. It forgets them and the
    // segments are replayed from the durable point as they are on disk, so
    // a ledger ends where its data does.
    auto forgotten = index_->rewind(**durable);
    if (!forgotten) return forgotten.status();
    MLOG_WARN("storage: replaying from the last durable point (segment {} offset {}); {} entries indexed past it "
              "are checked again",
              (*durable)->segment, (*durable)->offset, *forgotten);
    cp = **durable;
  }
  auto segments = list_segments(segments_dir_);
  if (!segments) return segments.status();
  auto known = index_->ledgers();
  if (!known) return known.status();
  for (const LedgerMeta& meta : *known) replay_ledgers_.insert(meta.id);

  std::unique_ptr<SegmentAppender> active;
  if (segments->empty()) {
    auto created = SegmentAppender::create(segments_dir_, std::max<uint64_t>(cp->segment, 1), *ops_);
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
      auto created = SegmentAppender::create(segments_dir_, cp->segment + 1, *ops_);
      if (!created) return created.status();
      active = std::move(created.value());
    } else if (last_valid_end < format::kFileHeaderSize) {
      // The last segment never got its header to disk: start it again.
      std::string path = segment_path(segments_dir_, last);
      MLOG_WARN("storage: segment {} has no valid header; recreating it", segment_file_name(last));
      if (ops_->unlink(path) != 0) return Status::from_errno(errno, "remove " + path);
      auto created = SegmentAppender::create(segments_dir_, last, *ops_);
      if (!created) return created.status();
      active = std::move(created.value());
    } else {
      auto reopened = SegmentAppender::reopen(segments_dir_, last, last_valid_end, *ops_);
      if (!reopened) return reopened.status();
      active = std::move(reopened.value());
    }
  }
  active_segment_ = active->id();
  replay_ledgers_.clear();
  replay_last_.clear();
  MAGNETAR_RETURN_IF_ERROR(load_ledgers());
  auto usage = index_->segment_usage();
  if (!usage) return usage.status();
  std::unique_lock usage_lock(usage_mu_);
  usage_.clear();
  for (auto& [segment, ledgers] : *usage) {
    for (const auto& [ledger, bytes] : ledgers) add_usage(segment, ledger, bytes);
  }
  usage_lock.unlock();
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
      case format::RecordType::kEntry: {
        // A record of a ledger deleted before it: a copy compaction made
        // while the ledger was being deleted. Never indexed.
        if (replay_ledgers_.count(h.ledger) == 0) break;
        auto last = replay_last_.find(h.ledger);
        if (last == replay_last_.end()) {
          auto indexed = index_->last_entry(h.ledger);
          if (!indexed) {
            failure = indexed.status();
            break;
          }
          last = replay_last_.emplace(h.ledger, *indexed).first;
        }
        const EntryLocation loc{segment, rec.offset, rec.size};
        if (h.entry > last->second) {
          updates.add_entry(h.ledger, h.entry, loc);
          last->second = h.entry;
          break;
        }
        // An entry the ledger had already: a copy compaction made, newer
        // than every location the index holds (those all lie before the
        // checkpoint). It replaces the original.
        flush(rec.offset);
        if (failure.is_ok()) failure = index_->relocate(h.ledger, h.entry, {loc}, nullptr, nullptr);
        break;
      }
      case format::RecordType::kLedgerCreated:
        replay_ledgers_.insert(h.ledger);
        replay_last_[h.ledger] = kNoEntry;
        updates.put_ledger(LedgerMeta{h.ledger, false, kNoEntry});
        break;
      case format::RecordType::kLedgerClosed:
        updates.put_ledger(LedgerMeta{h.ledger, true, h.entry});
        break;
      case format::RecordType::kLedgerDeleted: {
        flush(rec.offset);
        std::set<uint64_t> segments;
        if (failure.is_ok()) failure = index_->delete_ledger(h.ledger, &segments);
        replay_ledgers_.erase(h.ledger);
        replay_last_.erase(h.ledger);
        break;
      }
    }
    if (++pending >= kReplayFlushRecords) flush(rec.offset + rec.size);
  }, [this](const format::RecordHeader& h) {
    // Past damage, a record starts only where a ledger we know of goes on
    // (or a bookkeeping record, whose checksum is cheap to try).
    return h.type != format::RecordType::kEntry || replay_ledgers_.count(h.ledger) != 0;
  }, *ops_);
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
  for (const DamagedRange& d : result.damaged) {
    // The records after it are kept: reads of the entries it held answer
    // kCorruption (the index has a hole there).
    MLOG_ERROR("storage: segment {}: {} damaged bytes at offset {}; the records after them are kept",
               segment_file_name(segment), d.size, d.offset);
    damaged_bytes_.inc(d.size);
  }
  if (result.valid_end < result.file_size) {
    uint64_t tail = result.file_size - result.valid_end;
    if (is_last) {
      // The unsynced end of the log: the journal cuts it when it reopens.
      MLOG_WARN("storage: segment {}: cut a torn tail of {} bytes at offset {}", segment_file_name(segment), tail,
                result.valid_end);
    } else {
      // A rolled-over segment was synced whole: its end is damage, not a
      // torn write. Left in place (nothing after it is appended).
      MLOG_ERROR("storage: segment {}: {} damaged bytes at its end (offset {})", segment_file_name(segment), tail,
                 result.valid_end);
      damaged_bytes_.inc(tail);
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
