#include "storage/journal.h"

#include <sys/uio.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "common/stage_timing.h"

namespace magnetar::storage {

using common::MetricsRegistry;
using common::Status;
using std::chrono::steady_clock;

namespace {

// Payloads up to this size are copied next to their header so that a batch
// of small entries is a few large iovecs; bigger ones are written from the
// caller's buffer.
constexpr size_t kCopyThreshold = 4096;

std::vector<double> batch_bounds() {
  std::vector<double> b;
  for (double v = 1; v <= 65536; v *= 4) b.push_back(v);
  return b;
}

common::Histogram& stage_histogram(const char* stage) {
  return MetricsRegistry::global().histogram(
      "magnetar_storage_journal_stage_seconds",
      "Where an append's time goes in the journal: queue (until a group commit takes it), write, sync (written "
      "until an fdatasync covered it), index (the batch's index update) and complete (posted until its "
      "completion ran on its reactor)",
      common::stage_latency_bounds(), {{"stage", stage}});
}

}  // namespace

Journal::Journal(std::string segments_dir, const StorageOptions& options, JournalListener* listener,
                 std::unique_ptr<SegmentAppender> active)
    : segments_dir_(std::move(segments_dir)),
      options_(options),
      ops_(options.file_ops ? options.file_ops : FileOps::posix()),
      listener_(listener),
      active_(std::move(active)),
      fsync_seconds_(MetricsRegistry::global().histogram(
          "magnetar_storage_journal_fsync_seconds", "Time one journal fdatasync took",
          common::Histogram::latency_bounds())),
      stages_{stage_histogram("queue"), stage_histogram("write"), stage_histogram("sync"), stage_histogram("index"),
              stage_histogram("complete")},
      batch_entries_(MetricsRegistry::global().histogram(
          "magnetar_storage_journal_batch_entries", "Records written per group commit", batch_bounds())),
      appended_bytes_(MetricsRegistry::global().counter("magnetar_storage_appended_bytes_total",
                                                        "Entry payload bytes appended to the journal")),
      appended_entries_(MetricsRegistry::global().counter("magnetar_storage_appended_entries_total",
                                                          "Entries appended to the journal")),
      errors_(MetricsRegistry::global().counter("magnetar_storage_journal_errors_total",
                                                "Group commits that failed to write or sync")),
      abandoned_segments_(MetricsRegistry::global().counter(
          "magnetar_storage_abandoned_segments_total",
          "Segments that lost writes to a failed sync or write and were left for a new one")) {}

Journal::~Journal() { stop(); }

void Journal::start() {
  advance_durable(Checkpoint{active_->id(), active_->size()});  // recovery leaves it synced
  sync_thread_ = std::thread([this]() {
    common::set_thread_name("journal-sync");
    sync_run();
  });
  thread_ = std::thread([this]() {
    common::set_thread_name("journal");
    run();
  });
}

void Journal::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(sync_mu_);
    sync_stopping_ = true;
  }
  sync_cv_.notify_all();
  if (sync_thread_.joinable()) sync_thread_.join();
}

Status Journal::submit(JournalRequest&& request) {
  request.submitted_ns = common::monotonic_ns();
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::unavailable("storage journal is stopping");
    if (!failure_.is_ok()) return failure_;
    if (queue_.size() >= options_.max_queued_entries ||
        (queued_bytes_ + request.payload.size() > options_.max_queued_bytes && !queue_.empty())) {
      return Status::resource_exhausted("storage journal queue is full");
    }
    queued_bytes_ += request.payload.size();
    queue_.push_back(std::move(request));
    const bool batch_full =
        queue_.size() >= options_.max_batch_entries || queued_bytes_ >= options_.max_batch_bytes;
    wake = idle_wait_ || (batch_wait_ && batch_full) ||
           (sync_wait_ && (queued_bytes_ >= options_.sync_exclusive_bytes ||
                           queue_.size() >= options_.max_batch_entries));
  }
  if (wake) cv_.notify_one();
  return Status::ok();
}

bool Journal::take_batch(std::vector<JournalRequest>* batch) {
  std::unique_lock lock(mu_);
  bool slept = false;
  while (queue_.empty() && !stopping_) {
    slept = true;
    idle_wait_ = true;
    if (interval_deadline_ != steady_clock::time_point::max()) {
      cv_.wait_until(lock, interval_deadline_);
      idle_wait_ = false;
      if (queue_.empty()) {
        lock.unlock();
        maybe_interval_sync();
        lock.lock();
      }
    } else {
      cv_.wait(lock);
      idle_wait_ = false;
    }
  }
  if (queue_.empty()) return false;  // stopping and drained
  if (unsynced_batches_ > 0 && options_.sync_exclusive_bytes > 0 && !stopping_ &&
      queued_bytes_ < options_.sync_exclusive_bytes && queue_.size() < options_.max_batch_entries) {
    // What comes meanwhile joins this batch; no further batch delay after.
    sync_wait_ = true;
    cv_.wait(lock, [this] {
      return stopping_ || unsynced_batches_ == 0 || queued_bytes_ >= options_.sync_exclusive_bytes ||
             queue_.size() >= options_.max_batch_entries;
    });
    sync_wait_ = false;
    slept = false;
  }
  if (slept && options_.max_batch_delay.count() > 0 && !stopping_ &&
      queue_.size() < options_.max_batch_entries && queued_bytes_ < options_.max_batch_bytes) {
    batch_wait_ = true;
    cv_.wait_for(lock, options_.max_batch_delay, [this] {
      return stopping_ || queue_.size() >= options_.max_batch_entries ||
             queued_bytes_ >= options_.max_batch_bytes;
    });
    batch_wait_ = false;
  }
  size_t bytes = 0;
  while (!queue_.empty() && batch->size() < options_.max_batch_entries &&
         (batch->empty() || bytes + queue_.front().payload.size() <= options_.max_batch_bytes)) {
    bytes += queue_.front().payload.size();
    batch->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  queued_bytes_ -= bytes;
  lock.unlock();
  const int64_t now = common::monotonic_ns();
  for (const JournalRequest& r : *batch) stages_.queue.observe(common::seconds_between(r.submitted_ns, now));
  return true;
}

void Journal::run() {
  std::vector<JournalRequest> batch;
  while (take_batch(&batch)) {
    process(batch);
    batch.clear();
    maybe_interval_sync();
  }
  if (dirty_ && failure_.is_ok() && !active_->broken()) {
    Status st = sync_segment(*active_);
    if (st.is_ok()) synced_active();
    if (!st.is_ok()) MLOG_ERROR("storage journal: final sync failed: {}", st.to_string());
  }
}

void Journal::sync_run() {
  std::deque<WrittenBatch> batches;
  for (;;) {
    {
      std::unique_lock lock(sync_mu_);
      auto ready = [this] { return sync_stopping_ || (!written_.empty() && !settling_); };
      if (!held_waiting_) {
        // Completions the journal thread held (settle_here) are this thread's to retry.
        sync_cv_.wait(lock, [&] { return ready() || held_waiting_; });
      } else {
        sync_cv_.wait_for(lock, kHeldRetry, ready);
      }
      if (settling_) continue;  // the journal thread settles a batch of its own; held_ is its until then
      if (written_.empty() && sync_stopping_) {
        lock.unlock();
        deliver_held(true);
        return;  // stopping and drained
      }
      batches.swap(written_);
      settling_ = true;
    }
    sync_cv_.notify_all();  // the journal thread may be waiting for room
    settle(batches, true);
    settled(batches.size());
    batches.clear();
  }
}

bool Journal::settle_here(WrittenBatch& handed) {
  if (options_.sync_exclusive_bytes == 0) return false;
  {
    // Enough arrived during the write that the next one should go beside
    // this sync: the sync thread takes it.
    std::lock_guard lock(mu_);
    if (queued_bytes_ >= options_.sync_exclusive_bytes / 4 || queue_.size() >= options_.max_batch_entries / 4) {
      return false;
    }
  }
  {
    std::lock_guard lock(sync_mu_);
    if (!written_.empty() || settling_) return false;  // it would overtake what the sync thread holds
    settling_ = true;
    ++batches_handed_;
  }
  std::deque<WrittenBatch> one;
  one.push_back(std::move(handed));
  settle(one, false);
  settled(1);
  return true;
}

void Journal::settled(size_t batches) {
  {
    std::lock_guard lock(sync_mu_);
    batches_finished_ += batches;
    settling_ = false;
    held_waiting_ = !held_.empty();
  }
  // The journal thread may wait for every batch to settle; the sync thread,
  // to retry completions held for a full mailbox.
  sync_cv_.notify_all();
}

void Journal::settle(std::deque<WrittenBatch>& batches, bool counted) {
  deliver_held(false);
  // Segments before the last one written were synced when they rolled
  // over: one fdatasync of the last covers every batch taken. Without a
  // kAlways record among them nothing waits for a sync.
  std::shared_ptr<SegmentAppender> last;
  bool sync = false;
  for (const WrittenBatch& b : batches) {
    if (b.segment) last = b.segment;
    sync = sync || b.sync;
  }
  if (!sync) last = nullptr;
  Status st;
  if (last) st = sync_segment(*last);
  if (counted) {
    size_t synced_batches = 0;
    for (const WrittenBatch& b : batches) synced_batches += b.sync ? 1 : 0;
    if (synced_batches > 0) syncs_settled(synced_batches);
  }
  if (last && st.is_ok()) {
    for (const WrittenBatch& b : batches) {
      if (b.segment == last) advance_durable(b.end);
    }
  }
  if (last) {
    const int64_t synced_at = common::monotonic_ns();
    for (const WrittenBatch& b : batches) stages_.sync.observe(common::seconds_between(b.written_ns, synced_at));
  }
  if (!st.is_ok()) {
    errors_.inc();
    MLOG_ERROR("storage journal: fdatasync of segment {} failed: {}; every add written to it since its last "
               "good sync fails",
               last->id(), st.to_string());
  }
  for (WrittenBatch& b : batches) {
    // A segment that lost writes to a failed sync (now or before) holds
    // nothing durable past its last good sync.
    Status lost;
    if (b.segment && b.segment == last && !st.is_ok()) lost = st;
    if (b.segment && lost.is_ok() && b.segment->broken()) {
      lost = Status::io_error("segment " + std::to_string(b.segment->id()) + " lost writes to a failed sync");
    }
    if (!lost.is_ok()) {
      for (JournalRequest& r : b.requests) {
        if (r.status.is_ok()) r.status = lost;
      }
    }
    finish(b.requests, b.end);
  }
}

void Journal::syncs_settled(size_t batches) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    unsynced_batches_ -= std::min(unsynced_batches_, batches);
    wake = unsynced_batches_ == 0 && sync_wait_;
  }
  if (wake) cv_.notify_one();
}

void Journal::fail_journal(const Status& st) {
  std::lock_guard lock(mu_);
  if (failure_.is_ok()) {
    MLOG_ERROR("storage journal failed, appends are refused from now on: {}", st.to_string());
    failure_ = st;
  }
}

Status Journal::sync_segment(SegmentAppender& segment) {
  auto t0 = steady_clock::now();
  Status st = segment.sync();
  fsync_seconds_.observe(std::chrono::duration<double>(steady_clock::now() - t0).count());
  return st;
}

Journal::Durability Journal::durability_of(const LedgerState& ledger) const {
  const uint8_t own = ledger.fsync.load(std::memory_order_acquire);
  if (own == LedgerState::kNodeFsync) return {options_.fsync_mode, options_.fsync_interval};
  const uint32_t interval_ms = ledger.fsync_interval_ms.load(std::memory_order_relaxed);
  return {static_cast<FsyncMode>(own), std::chrono::milliseconds(interval_ms)};
}

void Journal::maybe_interval_sync() {
  if (interval_deadline_ == steady_clock::time_point::max() || steady_clock::now() < interval_deadline_) return;
  interval_deadline_ = steady_clock::time_point::max();
  if (!dirty_ || active_->broken()) return;
  Status st = sync_segment(*active_);
  if (st.is_ok()) {
    dirty_ = false;
    synced_active();
    return;
  }
  // The adds written since the last good sync were acknowledged already
  // (that is this mode's promise) and may be gone: the segment is
  // abandoned before the next write.
  errors_.inc();
  MLOG_ERROR("storage journal: fdatasync of segment {} failed: {}; adds acknowledged since the last good sync "
             "(fsync interval mode) may be lost",
             active_->id(), st.to_string());
}

Status Journal::write_pending() {
  if (pieces_.empty()) return Status::ok();
  std::vector<iovec> iov;
  iov.reserve(pieces_.size());
  for (const Piece& p : pieces_) {
    const uint8_t* base = p.external ? p.external : reinterpret_cast<const uint8_t*>(arena_.data()) + p.offset;
    iov.push_back(iovec{const_cast<uint8_t*>(base), p.size});
  }
  Status st = active_->append(iov.data(), iov.size(), pending_bytes_);
  pieces_.clear();
  arena_.clear();
  pending_bytes_ = 0;
  if (st.is_ok()) dirty_ = true;
  return st;
}

Status Journal::roll_segment() {
  // The old segment is synced whatever the mode: recovery and garbage
  // collection rely on a rolled-over segment being complete on disk.
  if (dirty_) MAGNETAR_RETURN_IF_ERROR(sync_segment(*active_));
  dirty_ = false;
  auto next = SegmentAppender::create(segments_dir_, active_->id() + 1, *ops_);
  if (!next) return next.status();
  MLOG_INFO("storage journal: segment {} full at {} bytes, rolled over to {}", active_->id(), active_->size(),
            active_->id() + 1);
  active_ = std::shared_ptr<SegmentAppender>(std::move(next.value()));
  segment_ledgers_.clear();
  interval_deadline_ = steady_clock::time_point::max();  // the old segment is whole on disk
  synced_active();
  return Status::ok();
}

void Journal::synced_active() { advance_durable(Checkpoint{active_->id(), active_->size()}); }

void Journal::advance_durable(const Checkpoint& cp) {
  std::lock_guard lock(durable_mu_);
  durable_ = std::max(durable_, cp);
}

void Journal::abandon_segment() {
  const uint64_t lost = active_->id();
  {
    // Every batch written to it completes (or fails) first, so that each
    // ledger's last confirmed entry is final below.
    std::unique_lock lock(sync_mu_);
    sync_cv_.wait(lock, [this] { return batches_finished_ == batches_handed_; });
  }
  for (const auto& ledger : segment_ledgers_) {
    ledger->journal_broken = true;
    ledger->journal_last = ledger->last_confirmed.load(std::memory_order_acquire);
  }
  const size_t broken = segment_ledgers_.size();
  segment_ledgers_.clear();
  dirty_ = false;
  interval_deadline_ = steady_clock::time_point::max();
  abandoned_segments_.inc();
  auto next = SegmentAppender::create(segments_dir_, lost + 1, *ops_);
  if (!next) {
    Status st = Status::io_error("segment " + std::to_string(lost) + " lost writes and no new segment can be made: " +
                                 next.status().message());
    errors_.inc();
    fail_journal(st);
    return;
  }
  MLOG_ERROR("storage journal: segment {} lost writes; its {} ledgers end at their last durable entry and take no "
             "more adds; writing goes on in segment {}",
             lost, broken, lost + 1);
  active_ = std::shared_ptr<SegmentAppender>(std::move(next.value()));
}

void Journal::process(std::vector<JournalRequest>& batch) {
  if (active_->broken()) abandon_segment();
  Status failure;
  {
    std::lock_guard lock(mu_);
    failure = failure_;  // a failed journal writes nothing more
  }
  size_t written = 0;
  const int64_t write_start = common::monotonic_ns();
  // Each ledger this batch writes to, with its journal_last before the batch.
  std::vector<std::pair<LedgerState*, EntryId>> touched;
  uint64_t payload_bytes = 0;
  uint64_t entries = 0;
  bool sync = false;
  std::chrono::milliseconds interval = std::chrono::milliseconds::max();
  for (JournalRequest& r : batch) {
    LedgerState& ledger = *r.ledger;
    if (r.type == format::RecordType::kEntry && ledger.journal_broken && !r.relocation) {
      r.status = Status::io_error("ledger " + std::to_string(ledger.id) + " lost an earlier add; close it");
      continue;
    }
    if (!failure.is_ok()) continue;
    const size_t size = format::kRecordHeaderSize + r.payload.size();
    const uint64_t end = active_->size() + pending_bytes_;
    if (end + size > options_.segment_size && end > format::kFileHeaderSize) {
      failure = write_pending();
      if (failure.is_ok()) failure = roll_segment();
      if (!failure.is_ok()) continue;
    }
    if (r.relocation) {
      sync = true;  // the index points at a copy only once it is durable
    } else if (r.type == format::RecordType::kEntry) {
      if (touched.empty() || touched.back().first != &ledger) touched.emplace_back(&ledger, ledger.journal_last);
      if (ledger.journal_segment != active_->id()) {
        ledger.journal_segment = active_->id();
        segment_ledgers_.push_back(r.ledger);
      }
      ledger.journal_last = r.entry;
      payload_bytes += r.payload.size();
      ++entries;
    } else if (r.type == format::RecordType::kLedgerClosed) {
      r.entry = ledger.journal_last;
    }
    r.location = EntryLocation{active_->id(), active_->size() + pending_bytes_, static_cast<uint32_t>(size)};
    size_t header_at = arena_.size();
    arena_.resize(header_at + format::kRecordHeaderSize);
    format::encode_record_header(reinterpret_cast<uint8_t*>(arena_.data()) + header_at, r.type, ledger.id,
                                 r.entry, r.payload.data(), static_cast<uint32_t>(r.payload.size()));
    if (r.payload.size() <= kCopyThreshold) {
      arena_.append(reinterpret_cast<const char*>(r.payload.data()), r.payload.size());
      if (!pieces_.empty() && pieces_.back().external == nullptr) {
        pieces_.back().size += size;
      } else {
        pieces_.push_back(Piece{nullptr, header_at, size});
      }
    } else {
      if (!pieces_.empty() && pieces_.back().external == nullptr) {
        pieces_.back().size += format::kRecordHeaderSize;
      } else {
        pieces_.push_back(Piece{nullptr, header_at, format::kRecordHeaderSize});
      }
      pieces_.push_back(Piece{r.payload.data(), 0, r.payload.size()});
    }
    pending_bytes_ += size;
    ++written;
    if (r.relocation) continue;
    const Durability d = durability_of(ledger);
    if (d.mode == FsyncMode::kAlways) sync = true;
    if (d.mode == FsyncMode::kInterval) interval = std::min(interval, d.interval);
  }
  if (failure.is_ok()) failure = write_pending();
  pieces_.clear();
  arena_.clear();
  pending_bytes_ = 0;
  const int64_t written_at = common::monotonic_ns();
  stages_.write.observe(common::seconds_between(write_start, written_at));

  if (!failure.is_ok()) {
    errors_.inc();
    MLOG_ERROR("storage journal: group commit of {} records failed: {}", written, failure.to_string());
    for (JournalRequest& r : batch) {
      if (r.status.is_ok()) r.status = failure;
    }
    // Restore in reverse so that each ledger ends at its value before the batch.
    for (auto it = touched.rbegin(); it != touched.rend(); ++it) {
      it->first->journal_broken = true;
      it->first->journal_last = it->second;
    }
  } else {
    appended_entries_.inc(entries);
    appended_bytes_.inc(payload_bytes);
    batch_entries_.observe(static_cast<double>(written));
  }
  const Checkpoint end{active_->id(), active_->size()};
  if (failure.is_ok() && written > 0 && interval != std::chrono::milliseconds::max()) {
    interval_deadline_ = std::min(interval_deadline_, steady_clock::now() + interval);
  }
  const bool wrote = failure.is_ok() && written > 0;
  WrittenBatch handed{std::move(batch), wrote ? active_ : nullptr, end, written_at, wrote && sync};
  if (settle_here(handed)) return;
  if (handed.sync) {
    std::lock_guard lock(mu_);
    ++unsynced_batches_;  // the next write waits for its sync (take_batch)
  }
  {
    std::unique_lock lock(sync_mu_);
    sync_cv_.wait(lock, [this] { return written_.size() < kMaxUnsyncedBatches; });
    written_.push_back(std::move(handed));
    ++batches_handed_;
  }
  sync_cv_.notify_all();
}

void Journal::finish(std::vector<JournalRequest>& batch, const Checkpoint& end) {
  const int64_t start = common::monotonic_ns();
  Status st = listener_->on_written(batch, end, durable());
  stages_.index.observe(common::seconds_between(start, common::monotonic_ns()));
  if (!st.is_ok()) {
    fail_journal(st);
    for (JournalRequest& r : batch) {
      if (r.status.is_ok()) r.status = st;
    }
  }
  complete(batch);
}

void Journal::complete(std::vector<JournalRequest>& batch) {
  // One task per home reactor per batch, each running its completions in order.
  std::vector<std::pair<runtime::Reactor*, std::vector<Completion>>> groups;
  for (JournalRequest& r : batch) {
    if (!r.done) continue;
    if (r.home == nullptr) {
      r.done(std::move(r.status));
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == r.home; });
    if (it == groups.end()) {
      groups.emplace_back(r.home, std::vector<Completion>{});
      it = groups.end() - 1;
    }
    it->second.push_back(Completion{std::move(r.done), std::move(r.status)});
  }
  const int64_t posted_at = common::monotonic_ns();
  for (auto& [reactor, completions] : groups) {
    runtime::Task task([completions = std::move(completions), posted_at, &complete = stages_.complete]() mutable {
      complete.observe(common::seconds_between(posted_at, common::monotonic_ns()));
      for (Completion& c : completions) c.done(std::move(c.status));
    });
    // Behind completions that already wait for this reactor, so that they
    // keep their order.
    auto held = std::find_if(held_.begin(), held_.end(), [&](const auto& h) { return h.first == reactor; });
    if (held != held_.end()) {
      held->second.push_back(std::move(task));
      continue;
    }
    Status st = reactor->try_post(task);
    if (st.is_ok()) continue;
    if (st.code() != common::ErrorCode::kResourceExhausted) {
      MLOG_DEBUG("storage journal: reactor {} stopped before its completions", reactor->name());
      continue;
    }
    // A busy reactor's full mailbox must not hold back the others' acks:
    // its completions wait here (bounded by the journal's own queue) and
    // are tried again shortly.
    held_.emplace_back(reactor, std::deque<runtime::Task>{});
    held_.back().second.push_back(std::move(task));
  }
}

void Journal::deliver_held(bool wait) {
  for (auto it = held_.begin(); it != held_.end();) {
    auto& [reactor, tasks] = *it;
    while (!tasks.empty()) {
      Status st = reactor->try_post(tasks.front());
      if (st.is_ok() || st.code() != common::ErrorCode::kResourceExhausted) {
        tasks.pop_front();  // posted, or the reactor is gone
        continue;
      }
      if (!wait) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    it = tasks.empty() ? held_.erase(it) : std::next(it);
  }
}

}  // namespace magnetar::storage
