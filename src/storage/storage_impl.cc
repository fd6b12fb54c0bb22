#include "storage/storage_impl.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/logging.h"

namespace magnetar::storage {

using common::MetricsRegistry;
using common::Result;
using common::Status;
using runtime::Reactor;

std::unique_ptr<Storage> make_local_storage(StorageOptions options) {
  return std::make_unique<StorageImpl>(std::move(options));
}

StorageOptions StorageImpl::with_file_ops(StorageOptions options) {
  if (!options.file_ops) options.file_ops = FileOps::posix();
  return options;
}

StorageImpl::StorageImpl(StorageOptions options)
    : options_(with_file_ops(std::move(options))),
      ops_(options_.file_ops),
      segments_dir_(options_.directory + "/segments"),
      index_dir_(options_.directory + "/index"),
      tail_cache_(options_.tail_cache_bytes),
      read_ahead_cache_(options_.read_ahead_cache_bytes),
      cache_hits_(MetricsRegistry::global().counter("magnetar_storage_cache_hits_total",
                                                    "Entries read from the tail or read-ahead cache")),
      cache_misses_(MetricsRegistry::global().counter("magnetar_storage_cache_misses_total",
                                                      "Entries read from disk")),
      read_errors_(MetricsRegistry::global().counter("magnetar_storage_read_errors_total",
                                                     "Entries that failed their checksum or could not be read")),
      damaged_bytes_(MetricsRegistry::global().counter(
          "magnetar_storage_damaged_bytes_total",
          "Bytes of segment files found damaged at start-up (good records around them are kept)")),
      compacted_segments_(MetricsRegistry::global().counter(
          "magnetar_storage_compacted_segments_total",
          "Segments whose live records were copied forward so that the segment could be removed")),
      compacted_bytes_(MetricsRegistry::global().counter(
          "magnetar_storage_compacted_bytes_total",
          "Bytes of records copied forward by segment compaction (headers included)")),
      dead_bytes_(MetricsRegistry::global().gauge(
          "magnetar_storage_dead_bytes",
          "Bytes of sealed segments that no live ledger uses, as of the last look for a segment to compact")) {}

StorageImpl::~StorageImpl() { stop(); }

Status StorageImpl::start() {
  if (started_) return Status::ok();
  MAGNETAR_RETURN_IF_ERROR(recover());
  started_ = true;
  for (size_t i = 0; i < std::max<size_t>(options_.read_threads, 1); ++i) {
    read_threads_.push_back(std::make_unique<runtime::WorkerThread>("storage-read"));
  }
  remover_ = std::make_unique<runtime::WorkerThread>("storage-gc", 1024);
  compactor_ = std::make_unique<runtime::WorkerThread>("storage-compact", 1024);
  journal_->start();
  maybe_compact();
  return Status::ok();
}

void StorageImpl::stop() {
  if (!started_) return;
  started_ = false;
  // A compaction stops at its next step; copies in flight complete (or
  // fail) with the journal's drain below.
  compactor_->stop();
  journal_->stop();
  // The final sync is done: say how far the segments are on disk.
  Index::Batch durable;
  durable.set_durable(journal_->durable());
  Status st = index_->write(durable, true);
  if (!st.is_ok()) MLOG_WARN("storage: cannot record the durable point at stop: {}", st.to_string());
  for (auto& reader : read_threads_) reader->stop();
  remover_->stop();  // removes what is queued first
  journal_.reset();
  index_.reset();  // releases the directory's lock for the next owner
  std::lock_guard lock(readers_mu_);
  readers_.clear();
}

void StorageImpl::deliver(Reactor* home, runtime::Task fn) {
  if (home == nullptr) {
    fn();
    return;
  }
  if (home->is_on_thread()) {
    // A reactor never waits on its own mailbox; when it is full the answer
    // runs now rather than being lost.
    Status st = home->try_post(fn);
    if (st.is_ok()) return;
    if (fn) fn();
    return;
  }
  if (!home->post_or_wait(std::move(fn))) MLOG_DEBUG("storage: reactor {} stopped before an answer", home->name());
}

std::shared_ptr<LedgerState> StorageImpl::find(LedgerId id) const {
  std::lock_guard lock(table_mu_);
  auto it = ledgers_.find(id);
  return it == ledgers_.end() ? nullptr : it->second;
}

void StorageImpl::create_ledger(LedgerId id, Callback<Result<LedgerWriter>> done) {
  Reactor* home = Reactor::current();
  if (!journal_ || !started_) {
    deliver(home, [done]() { done(Status::unavailable("storage is not running")); });
    return;
  }
  auto state = std::make_shared<LedgerState>(id);
  LedgerWriter writer{id, 0};
  {
    std::lock_guard lock(table_mu_);
    if (ledgers_.count(id) != 0) {
      deliver(home, [done, id]() { done(Status::already_exists("ledger " + std::to_string(id) + " exists")); });
      return;
    }
    writer.token = next_writer_token_++;
    state->writer = writer.token;
    ledgers_.emplace(id, state);
  }
  JournalRequest r;
  r.type = format::RecordType::kLedgerCreated;
  r.ledger = state;
  r.home = home;
  r.done = [done, writer](Status st) {
    if (st.is_ok()) {
      done(writer);
    } else {
      done(std::move(st));
    }
  };
  Status st;
  {
    std::lock_guard lock(state->mu);
    st = journal_->submit(std::move(r));
    if (!st.is_ok()) state->phase = LedgerPhase::kDeleted;
  }
  if (!st.is_ok()) {
    {
      std::lock_guard lock(table_mu_);
      auto it = ledgers_.find(id);
      if (it != ledgers_.end() && it->second == state) ledgers_.erase(it);
    }
    deliver(home, [done, st]() { done(st); });
  }
}

void StorageImpl::open_ledger(LedgerId id, Callback<Result<LedgerWriter>> done) {
  Reactor* home = Reactor::current();
  auto state = find(id);
  Status st = Status::not_found("ledger " + std::to_string(id) + " does not exist");
  LedgerWriter writer{id, 0};
  if (state) {
    std::lock_guard lock(state->mu);
    if (state->phase == LedgerPhase::kClosed || state->phase == LedgerPhase::kClosing) {
      st = Status::failed_precondition("ledger " + std::to_string(id) + " is closed");
    } else if (state->phase != LedgerPhase::kOpen) {
      st = Status::failed_precondition("ledger " + std::to_string(id) + " is not open");
    } else if (state->writer != 0) {
      st = Status::fenced("ledger " + std::to_string(id) + " already has a writer");
    } else {
      std::lock_guard table_lock(table_mu_);
      state->writer = next_writer_token_++;
      writer.token = state->writer;
      st = Status::ok();
    }
  }
  deliver(home, [done, st = std::move(st), writer]() mutable {
    if (st.is_ok()) {
      done(writer);
    } else {
      done(std::move(st));
    }
  });
}

void StorageImpl::add_entry(const LedgerWriter& writer, EntryId entry, common::Slice data,
                            Callback<Status> done) {
  Reactor* home = Reactor::current();
  auto fail = [&](Status st) { deliver(home, [done, st = std::move(st)]() mutable { done(std::move(st)); }); };
  if (!journal_ || !started_) return fail(Status::unavailable("storage is not running"));
  if (data.size() > format::kMaxPayloadSize) {
    return fail(Status::invalid_argument("entry of " + std::to_string(data.size()) + " bytes exceeds the limit of " +
                                         std::to_string(format::kMaxPayloadSize)));
  }
  auto state = find(writer.ledger);
  if (!state) return fail(Status::not_found("ledger " + std::to_string(writer.ledger) + " does not exist"));
  Status st;
  {
    std::lock_guard lock(state->mu);
    if (state->phase != LedgerPhase::kOpen || state->writer != writer.token) {
      st = Status::fenced("ledger " + std::to_string(writer.ledger) + " is closed or has another writer");
    } else if (!state->failure.is_ok()) {
      st = state->failure;
    } else if (entry != state->next_entry) {
      st = Status::invalid_argument("ledger " + std::to_string(writer.ledger) + " expects entry " +
                                    std::to_string(state->next_entry) + ", got " + std::to_string(entry));
    } else {
      JournalRequest r;
      r.type = format::RecordType::kEntry;
      r.ledger = state;
      r.entry = entry;
      r.payload = std::move(data);
      r.home = home;
      r.done = std::move(done);
      st = journal_->submit(std::move(r));
      if (st.is_ok()) {
        ++state->next_entry;
        return;
      }
      done = std::move(r.done);  // not queued: the request was left untouched
    }
  }
  fail(std::move(st));
}

void StorageImpl::close_ledger(LedgerId id, Callback<Result<EntryId>> done) {
  Reactor* home = Reactor::current();
  auto state = find(id);
  Status st = Status::not_found("ledger " + std::to_string(id) + " does not exist");
  EntryId last = kNoEntry;
  if (state && (!journal_ || !started_)) st = Status::unavailable("storage is not running");
  if (state && journal_ && started_) {
    std::lock_guard lock(state->mu);
    if (state->phase == LedgerPhase::kClosed) {
      st = Status::ok();
      last = state->closed_last;
    } else if (state->phase == LedgerPhase::kCreating) {
      st = Status::failed_precondition("ledger " + std::to_string(id) + " is still being created");
    } else if (state->phase == LedgerPhase::kOpen || state->phase == LedgerPhase::kClosing) {
      LedgerPhase before = state->phase;
      state->phase = LedgerPhase::kClosing;
      state->writer = 0;  // fences the writer from now on
      JournalRequest r;
      r.type = format::RecordType::kLedgerClosed;
      r.ledger = state;
      r.home = home;
      r.done = [done, state](Status result) {
        if (!result.is_ok()) return done(std::move(result));
        EntryId closed_last;
        {
          std::lock_guard l(state->mu);
          closed_last = state->closed_last;
        }
        done(closed_last);
      };
      st = journal_->submit(std::move(r));
      if (st.is_ok()) return;
      state->phase = before;
    }
  }
  deliver(home, [done, st = std::move(st), last]() mutable {
    if (st.is_ok()) {
      done(last);
    } else {
      done(std::move(st));
    }
  });
}

void StorageImpl::delete_ledger(LedgerId id, Callback<Status> done) {
  Reactor* home = Reactor::current();
  auto state = find(id);
  Status st = Status::not_found("ledger " + std::to_string(id) + " does not exist");
  if (state && (!journal_ || !started_)) st = Status::unavailable("storage is not running");
  if (state && journal_ && started_) {
    std::lock_guard lock(state->mu);
    if (state->phase == LedgerPhase::kCreating) {
      st = Status::failed_precondition("ledger " + std::to_string(id) + " is still being created");
    } else if (state->phase != LedgerPhase::kDeleted) {
      JournalRequest r;
      r.type = format::RecordType::kLedgerDeleted;
      r.ledger = state;
      r.home = home;
      r.done = done;
      st = journal_->submit(std::move(r));
      if (st.is_ok()) {
        state->phase = LedgerPhase::kDeleted;
        state->writer = 0;
        std::lock_guard table_lock(table_mu_);
        ledgers_.erase(id);
      }
    }
  }
  if (st.is_ok()) {
    tail_cache_.erase_ledger(id);
    read_ahead_cache_.erase_ledger(id);
    return;
  }
  deliver(home, [done, st = std::move(st)]() mutable { done(std::move(st)); });
}

Status StorageImpl::set_fsync(LedgerId id, std::optional<FsyncMode> mode, std::chrono::milliseconds interval) {
  auto state = find(id);
  if (!state) return Status::not_found("ledger " + std::to_string(id) + " does not exist");
  state->fsync_interval_ms.store(static_cast<uint32_t>(std::clamp<int64_t>(interval.count(), 1, UINT32_MAX)),
                                 std::memory_order_relaxed);
  state->fsync.store(mode ? static_cast<uint8_t>(*mode) : LedgerState::kNodeFsync, std::memory_order_release);
  return Status::ok();
}

Result<LedgerInfo> StorageImpl::ledger_info(LedgerId id) const {
  auto state = find(id);
  if (!state) return Status::not_found("ledger " + std::to_string(id) + " does not exist");
  std::lock_guard lock(state->mu);
  LedgerInfo info;
  info.id = id;
  info.closed = state->phase == LedgerPhase::kClosed;
  info.last_confirmed = info.closed ? state->closed_last : state->last_confirmed.load(std::memory_order_acquire);
  return info;
}

std::vector<LedgerId> StorageImpl::list_ledgers() const {
  std::lock_guard lock(table_mu_);
  std::vector<LedgerId> ids;
  ids.reserve(ledgers_.size());
  for (const auto& [id, state] : ledgers_) ids.push_back(id);
  return ids;
}

// ---- journal thread ----

Status StorageImpl::on_written(std::vector<JournalRequest>& batch, const Checkpoint& end,
                               const Checkpoint& durable) {
  Index::Batch updates;
  bool deleted_any = false;
  std::vector<const JournalRequest*> copies;
  std::unique_lock usage_lock(usage_mu_);
  for (JournalRequest& r : batch) {
    LedgerState& ledger = *r.ledger;
    if (!r.status.is_ok()) continue;
    if (r.relocation) {
      copies.push_back(&r);
      continue;
    }
    switch (r.type) {
      case format::RecordType::kEntry:
        updates.add_entry(ledger.id, r.entry, r.location);
        add_usage(r.location.segment, ledger.id, r.location.size);
        break;
      case format::RecordType::kLedgerCreated:
        updates.put_ledger(LedgerMeta{ledger.id, false, kNoEntry});
        break;
      case format::RecordType::kLedgerClosed:
        updates.put_ledger(LedgerMeta{ledger.id, true, r.entry});
        break;
      case format::RecordType::kLedgerDeleted: {
        MAGNETAR_RETURN_IF_ERROR(index_->write(updates, false));
        std::set<uint64_t> segments;
        MAGNETAR_RETURN_IF_ERROR(index_->delete_ledger(ledger.id, &segments));
        for (uint64_t s : segments) {
          auto it = usage_.find(s);
          if (it == usage_.end()) continue;
          auto share = it->second.ledgers.find(ledger.id);
          if (share == it->second.ledgers.end()) continue;
          remove_usage(s, ledger.id, share->second);
        }
        deleted_any = true;
        break;
      }
    }
  }
  usage_lock.unlock();
  updates.set_checkpoint(end);
  updates.set_durable(durable);
  MAGNETAR_RETURN_IF_ERROR(index_->write(updates, false));
  // After the write that records `durable`: an index that points at a copy
  // also says the copy is durable, so a rewind at start-up never forgets it.
  if (!copies.empty()) {
    auto freed = commit_relocations(copies, durable);
    if (!freed) return freed.status();
    deleted_any = deleted_any || *freed;
  }

  // The index holds the batch: now readers may see it.
  for (JournalRequest& r : batch) {
    LedgerState& ledger = *r.ledger;
    if (r.relocation) continue;  // the ledger's stream is unchanged, whatever became of the copy
    if (!r.status.is_ok()) {
      if (r.type == format::RecordType::kEntry) {
        std::lock_guard lock(ledger.mu);
        if (ledger.failure.is_ok()) ledger.failure = r.status;
      } else if (r.type == format::RecordType::kLedgerCreated) {
        std::lock_guard lock(table_mu_);
        auto it = ledgers_.find(ledger.id);
        if (it != ledgers_.end() && it->second == r.ledger) ledgers_.erase(it);
      } else if (r.type == format::RecordType::kLedgerClosed) {
        std::lock_guard lock(ledger.mu);
        if (ledger.phase == LedgerPhase::kClosing) ledger.phase = LedgerPhase::kOpen;
      }
      continue;
    }
    switch (r.type) {
      case format::RecordType::kEntry:
        tail_cache_.insert(ledger.id, r.entry, r.payload);
        ledger.last_confirmed.store(r.entry, std::memory_order_release);
        break;
      case format::RecordType::kLedgerCreated: {
        std::lock_guard lock(ledger.mu);
        if (ledger.phase == LedgerPhase::kCreating) ledger.phase = LedgerPhase::kOpen;
        break;
      }
      case format::RecordType::kLedgerClosed: {
        std::lock_guard lock(ledger.mu);
        if (ledger.phase != LedgerPhase::kDeleted) ledger.phase = LedgerPhase::kClosed;
        ledger.closed_last = r.entry;
        break;
      }
      case format::RecordType::kLedgerDeleted:
        tail_cache_.erase_ledger(ledger.id);
        read_ahead_cache_.erase_ledger(ledger.id);
        break;
    }
  }
  if (deleted_any || end.segment != active_segment_) {
    {
      std::lock_guard lock(usage_mu_);
      active_segment_ = end.segment;
    }
    Status st = collect_garbage(end.segment);
    if (!st.is_ok()) MLOG_WARN("storage: segment garbage collection failed: {}", st.to_string());
    maybe_compact();
  }
  return Status::ok();
}

void StorageImpl::add_usage(uint64_t segment, LedgerId ledger, uint64_t bytes) {
  SegmentUsage& u = usage_[segment];
  u.live += bytes;
  u.ledgers[ledger] += bytes;
}

bool StorageImpl::remove_usage(uint64_t segment, LedgerId ledger, uint64_t bytes) {
  auto it = usage_.find(segment);
  if (it == usage_.end()) return true;
  SegmentUsage& u = it->second;
  auto share = u.ledgers.find(ledger);
  if (share != u.ledgers.end()) {
    bytes = std::min(bytes, share->second);
    share->second -= bytes;
    u.live -= std::min(bytes, u.live);
    if (share->second == 0) u.ledgers.erase(share);
  }
  if (!u.ledgers.empty()) return false;
  usage_.erase(it);
  return true;
}

Status StorageImpl::collect_garbage(uint64_t active_segment) {
  auto on_disk = list_segments(segments_dir_);
  if (!on_disk) return on_disk.status();
  std::vector<uint64_t> dead;
  {
    std::lock_guard lock(usage_mu_);
    for (uint64_t s : *on_disk) {
      if (s < active_segment && usage_.count(s) == 0 && removing_.insert(s).second) {
        dead.push_back(s);
        sealed_sizes_.erase(s);
        compacted_.erase(s);
      }
    }
  }
  if (dead.empty()) return Status::ok();
  // The index must not lose what these segments told it before they go:
  // rewrite the checkpoint as it stands, synced.
  auto cp = index_->checkpoint();
  if (!cp) return cp.status();
  Index::Batch sync_point;
  sync_point.set_checkpoint(*cp);
  MAGNETAR_RETURN_IF_ERROR(index_->write(sync_point, true));
  std::vector<std::string> paths;
  for (uint64_t s : dead) {
    std::lock_guard lock(readers_mu_);
    readers_.erase(s);
    paths.push_back(segment_path(segments_dir_, s));
  }
  // Unlinking a large file takes tens of milliseconds on ext4: done here, on
  // the journal's completion path, it would hold back every acknowledgement
  // behind it. The segments are dead already; a crash before they go only
  // leaves them for the next start to remove.
  auto remove = [this, dead, paths = std::move(paths)]() {
    for (const auto& path : paths) {
      if (ops_->unlink(path) != 0) {
        MLOG_WARN("storage: cannot remove segment {}: {}", path, std::strerror(errno));
        continue;
      }
      MLOG_INFO("storage: removed segment {}: every ledger in it was deleted", path);
    }
    Status st = sync_directory(segments_dir_, *ops_);
    if (!st.is_ok()) MLOG_WARN("storage: {}", st.to_string());
    // One that could not be removed is tried again at the next collection.
    std::lock_guard lock(usage_mu_);
    for (uint64_t s : dead) removing_.erase(s);
  };
  if (started_ && remover_ && remover_->post(remove).is_ok()) return Status::ok();
  remove();
  return Status::ok();
}

}  // namespace magnetar::storage
