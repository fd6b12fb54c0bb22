#include "replication/storage_server.h"

#include <leveldb/db.h>
#include <leveldb/iterator.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "cluster/rpc_records.h"
#include "common/logging.h"
#include "replication/replication_generated.h"
#include "runtime/reactor.h"

namespace magnetar::replication {

using common::Result;
using common::Slice;
using common::Status;

namespace {

std::string fence_key(LedgerId id) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(id >> (56 - 8 * i));
  return k;
}

// 'r', the ledger, the local index a run starts at (both big-endian): the
// run's first ledger entry (8 bytes, little-endian), then for a striped run
// its stripe's period, width and anchor (4 bytes each, little-endian).
constexpr size_t kRunKeyBytes = 17;
constexpr size_t kRunValueBytes = 8;
constexpr size_t kStripedRunValueBytes = 20;
std::string run_key(LedgerId ledger, EntryId local) {
  return "r" + fence_key(ledger) + fence_key(static_cast<LedgerId>(local));
}

uint64_t big_endian(const char* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(at[i]);
  return v;
}

void put_i64(uint8_t* at, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) at[i] = static_cast<uint8_t>(u >> (8 * i));
}

int64_t get_i64(const uint8_t* at) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(at[i]) << (8 * i);
  return static_cast<int64_t>(u);
}

void put_u32(uint8_t* at, uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t get_u32(const uint8_t* at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(at[i]) << (8 * i);
  return v;
}

// What a node whose storage was wiped answers for a ledger it may have held.
Status forgotten(LedgerId ledger) {
  return Status::corruption("this storage node's disk was wiped or replaced since ledger " + std::to_string(ledger) +
                            " was made: it cannot tell whether it held a copy");
}

std::optional<storage::FsyncMode> fsync_of(uint8_t mode) {
  if (mode > static_cast<uint8_t>(storage::FsyncMode::kNever)) return std::nullopt;
  return static_cast<storage::FsyncMode>(mode);
}

std::string read_reply(const Status& st, bool held, EntryId first_held, EntryId last_held,
                       const std::vector<storage::Entry>* entries, size_t max_bytes) {
  flatbuffers::FlatBufferBuilder b(256);
  std::vector<flatbuffers::Offset<fb::StoredEntry>> out;
  size_t bytes = 0;
  if (entries != nullptr) {
    for (const storage::Entry& e : *entries) {
      if (e.data.size() < kReplicaHeaderBytes) break;
      const size_t n = e.data.size() - kReplicaHeaderBytes;
      if (!out.empty() && bytes + n > max_bytes) break;
      bytes += n;
      out.push_back(fb::CreateStoredEntry(b, get_i64(e.data.data()),
                                          b.CreateVector(e.data.data() + kReplicaHeaderBytes, n)));
    }
  }
  b.Finish(fb::CreateReadReply(b, 1, static_cast<uint8_t>(st.code()), b.CreateString(st.message()), held,
                               first_held, last_held, b.CreateVector(out)));
  return cluster::record_bytes(b);
}

std::string fence_reply(const Status& st, bool held, EntryId lac, EntryId last_held) {
  flatbuffers::FlatBufferBuilder b(64);
  b.Finish(fb::CreateFenceReply(b, 1, static_cast<uint8_t>(st.code()), b.CreateString(st.message()), held, lac,
                                last_held));
  return cluster::record_bytes(b);
}

}  // namespace

std::string encode_outcome(const Status& st) {
  flatbuffers::FlatBufferBuilder b(64);
  b.Finish(fb::CreateOutcome(b, 1, static_cast<uint8_t>(st.code()), b.CreateString(st.message())));
  return cluster::record_bytes(b);
}

Status decode_outcome(std::string_view bytes) {
  const auto* o = cluster::verified_record<fb::Outcome>(bytes);
  if (o == nullptr) return Status::internal("malformed answer from a storage node");
  if (o->code() == 0) return Status::ok();
  return Status(static_cast<common::ErrorCode>(o->code()), o->message() ? o->message()->str() : "");
}

StorageServer::StorageServer(storage::Storage& local, std::string fence_dir)
    : local_(local),
      fence_dir_(std::move(fence_dir)),
      entries_added_(common::MetricsRegistry::global().counter(
          "magnetar_replica_entries_added_total", "Entries of replicated ledgers this storage node stored")),
      fences_(common::MetricsRegistry::global().counter(
          "magnetar_replica_fences_total", "Replicated ledger copies fenced on this node by a recovering owner")) {}

StorageServer::~StorageServer() { stop(); }

Status StorageServer::start() {
  std::error_code ec;
  std::filesystem::create_directories(fence_dir_, ec);
  if (ec) return Status::io_error("cannot create " + fence_dir_ + ": " + ec.message());
  leveldb::Options options;
  options.create_if_missing = true;
  leveldb::DB* db = nullptr;
  leveldb::Status opened = leveldb::DB::Open(options, fence_dir_, &db);
  if (!opened.ok()) return Status::io_error("cannot open the fences in " + fence_dir_ + ": " + opened.ToString());
  fences_db_.reset(db);
  std::unique_ptr<leveldb::Iterator> it(fences_db_->NewIterator(leveldb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const leveldb::Slice key = it->key();
    const size_t value_bytes = it->value().size();
    if (key.size() == kRunKeyBytes && key[0] == 'r' &&
        (value_bytes == kRunValueBytes || value_bytes == kStripedRunValueBytes)) {
      const auto* v = reinterpret_cast<const uint8_t*>(it->value().data());
      StoredRun run{static_cast<EntryId>(big_endian(key.data() + 9)), static_cast<EntryId>(get_i64(v)), Stripe{}};
      if (value_bytes == kStripedRunValueBytes) {
        run.stripe = Stripe{get_u32(v + 8), get_u32(v + 12), get_u32(v + 16)};
        if (run.stripe.period == 0 || run.stripe.width == 0 || run.stripe.anchor >= run.stripe.period) {
          MLOG_ERROR("storage node: a run of ledger {} has a broken stripe; its copy is ignored",
                     big_endian(key.data() + 1));
          continue;
        }
      }
      stored_runs_[big_endian(key.data() + 1)].push_back(run);
      continue;
    }
    if (key.size() != 8) continue;
    const LedgerId id = big_endian(key.data());
    fenced_.insert(id);
    durable_fences_.insert(id);
  }
  fence_thread_ = std::make_unique<runtime::WorkerThread>("storage-fence", 4096);
  return Status::ok();
}

void StorageServer::stop() {
  if (fence_thread_) fence_thread_->stop();
  fence_thread_.reset();
  fences_db_.reset();
}

void StorageServer::sync_write(std::string key, std::optional<std::string> value, std::string what,
                               std::function<void(Status)> done) {
  runtime::Reactor* home = runtime::Reactor::current();
  auto answer = [home, done](Status st) {
    if (home == nullptr) return done(st);
    home->post_reliably([done, st]() { done(st); });
  };
  if (!fence_thread_) return answer(Status::unavailable("the storage node is stopping"));
  Status posted = fence_thread_->post([this, key = std::move(key), value = std::move(value), what, answer]() {
    leveldb::WriteOptions sync;
    sync.sync = true;
    leveldb::Status s = value ? fences_db_->Put(sync, key, *value) : fences_db_->Delete(sync, key);
    answer(s.ok() ? Status::ok() : Status::io_error(what + ": " + s.ToString()));
  });
  if (!posted.is_ok()) answer(posted);
}

void StorageServer::persist_fence(LedgerId ledger, bool fenced, std::function<void(Status)> done) {
  sync_write(fence_key(ledger), fenced ? std::optional<std::string>("") : std::nullopt, "writing a fence",
             std::move(done));
}

void StorageServer::with_copy(LedgerId ledger, std::function<void(Copy&)> then) {
  auto it = copies_.find(ledger);
  if (it == copies_.end()) {
    Copy& copy = copies_[ledger];
    copy.waiting.push_back([this, ledger, then]() { then(copies_[ledger]); });
    load(ledger);
    return;
  }
  Copy& copy = it->second;
  if (copy.phase == Copy::Phase::kLoading || copy.phase == Copy::Phase::kCreating) {
    copy.waiting.push_back([this, ledger, then]() { then(copies_[ledger]); });
    return;
  }
  then(copy);
}

void StorageServer::run_waiting(Copy& copy) {
  while (!copy.waiting.empty() && copy.phase != Copy::Phase::kLoading && copy.phase != Copy::Phase::kCreating) {
    auto next = std::move(copy.waiting.front());
    copy.waiting.erase(copy.waiting.begin());
    next();
  }
}

// A copy on disk is known by its first and last local entries' headers.
void StorageServer::load(LedgerId ledger) {
  auto info = local_.ledger_info(ledger);
  if (!info) {
    Copy& copy = copies_[ledger];
    copy.phase = Copy::Phase::kReady;
    copy.held = false;
    return run_waiting(copy);
  }
  auto writer = std::make_shared<Result<storage::LedgerWriter>>(Status::ok());
  const EntryId last_local = info->last_confirmed;
  local_.open_ledger(ledger, [this, ledger, last_local, writer](Result<storage::LedgerWriter> w) {
    *writer = std::move(w);
    auto it = copies_.find(ledger);
    if (it == copies_.end()) return;
    Copy& copy = it->second;
    copy.held = true;
    if (writer->is_ok()) copy.writer = writer->value();
    if (last_local == storage::kNoEntry) return finish_load(ledger, Status::ok());
    local_.read_entries(ledger, 0, 0, [this, ledger, last_local](Result<std::vector<storage::Entry>> first) {
      if (!first || first->empty() || first->front().data.size() < kReplicaHeaderBytes) {
        return finish_load(ledger, first ? Status::corruption("the first entry of a copy has no header")
                                         : first.status());
      }
      auto it2 = copies_.find(ledger);
      if (it2 == copies_.end()) return;
      // The first run starts at local entry 0 (with its stripe where the
      // node recorded one); later ones where the node recorded them.
      std::vector<Run>& runs = it2->second.runs;
      runs.assign(1, Run{get_i64(first->front().data.data()), 0, 0, Stripe{}});
      auto stored = stored_runs_.find(ledger);
      if (stored != stored_runs_.end()) {
        std::sort(stored->second.begin(), stored->second.end());
        for (const StoredRun& run : stored->second) {
          if (run.local == 0) {
            runs[0].first = run.first;
            runs[0].stripe = run.stripe;
          } else if (run.local <= last_local + 1) {
            runs.push_back(Run{run.first, run.local, 0, run.stripe});
          }
        }
        stored_runs_.erase(stored);
      }
      for (size_t i = 0; i < runs.size(); ++i) {
        const EntryId end = i + 1 < runs.size() ? runs[i + 1].local : last_local + 1;
        runs[i].count = end - runs[i].local;
      }
      local_.read_entries(ledger, last_local, last_local, [this, ledger](Result<std::vector<storage::Entry>> last) {
        if (!last || last->empty() || last->front().data.size() < kReplicaHeaderBytes) {
          return finish_load(ledger, last ? Status::corruption("the last entry of a copy has no header")
                                          : last.status());
        }
        auto it3 = copies_.find(ledger);
        if (it3 == copies_.end()) return;
        it3->second.lac = get_i64(last->front().data.data() + 8);
        finish_load(ledger, Status::ok());
      });
    });
  });
}

void StorageServer::finish_load(LedgerId ledger, Status st) {
  auto it = copies_.find(ledger);
  if (it == copies_.end()) return;
  Copy& copy = it->second;
  if (!st.is_ok()) {
    MLOG_ERROR("storage node: the copy of ledger {} cannot be read: {}", ledger, st.to_string());
    copy.phase = Copy::Phase::kBroken;
    copy.failure = st;
  } else {
    copy.phase = Copy::Phase::kReady;
    // Closed locally (or held by another writer): readable, not writable.
    if (copy.writer.ledger == 0) {
      copy.failure = Status::failed_precondition("the copy of ledger " + std::to_string(ledger) + " is sealed");
    }
  }
  run_waiting(copy);
}

void StorageServer::add(std::string_view payload, Reply reply) {
  const auto* req = cluster::verified_record<fb::AddEntry>(payload);
  if (req == nullptr) return reply(encode_outcome(Status::invalid_argument("malformed AddEntry")));
  const LedgerId ledger = req->ledger();
  if (req->entry() < 0) return reply(encode_outcome(Status::invalid_argument("negative entry id")));
  if (!req->recovery() && fenced_.count(ledger) != 0) {
    return reply(encode_outcome(Status(common::ErrorCode::kFenced,
                                       "ledger " + std::to_string(ledger) + " is fenced on this node")));
  }
  const size_t n = req->data() ? req->data()->size() : 0;
  Slice data = Slice::allocate(kReplicaHeaderBytes + n);
  put_i64(data.mutable_data(), req->entry());
  put_i64(data.mutable_data() + 8, req->lac());
  if (n > 0) std::memcpy(data.mutable_data() + kReplicaHeaderBytes, req->data()->data(), n);
  const EntryId entry = req->entry();
  const EntryId lac = req->lac();
  const uint8_t fsync = req->fsync();
  const uint32_t interval = req->fsync_interval_ms();
  const bool new_run = req->new_run();
  Stripe stripe;
  const auto* ensemble = req->ensemble();
  if (ensemble != nullptr && req->write_quorum() > 0 && ensemble->size() > req->write_quorum()) {
    auto at = std::find(ensemble->begin(), ensemble->end(), self_);
    if (at == ensemble->end()) {
      return reply(encode_outcome(Status::invalid_argument(
          "storage node " + std::to_string(self_) + " is not in the ensemble of ledger " + std::to_string(ledger) +
          "'s entry " + std::to_string(entry))));
    }
    stripe = Stripe::of(ensemble->size(), req->write_quorum(), static_cast<size_t>(at - ensemble->begin()));
    if (!stripe.holds(entry)) {
      return reply(encode_outcome(Status::invalid_argument(
          "entry " + std::to_string(entry) + " of ledger " + std::to_string(ledger) +
          " is not in storage node " + std::to_string(self_) + "'s stripe")));
    }
  }
  with_copy(ledger, [this, ledger, entry, lac, data = std::move(data), fsync, interval, new_run, stripe,
                     reply](Copy& copy) {
    if (!copy.held && ledger < wiped_below_) return reply(encode_outcome(forgotten(ledger)));
    add_loaded(copy, ledger, AddRequest{entry, lac, data, fsync, interval, new_run, stripe}, reply);
  });
}

void StorageServer::add_loaded(Copy& copy, LedgerId ledger, AddRequest add, Reply reply) {
  if (copy.phase == Copy::Phase::kBroken) return reply(encode_outcome(copy.failure));
  auto again = [this, ledger, add, reply]() { add_loaded(copies_[ledger], ledger, add, reply); };
  if (copy.phase == Copy::Phase::kCreating) return copy.waiting.push_back(again);
  if (!copy.held) {
    copy.phase = Copy::Phase::kCreating;
    copy.waiting.push_back(again);
    local_.create_ledger(ledger, [this, ledger, add](Result<storage::LedgerWriter> w) {
      auto it = copies_.find(ledger);
      if (it == copies_.end()) {
        // Deleted while it was being made: the copy must not outlive the ledger.
        if (w) local_.delete_ledger(ledger, [](Status) {});
        return;
      }
      Copy& c = it->second;
      if (!w) {
        c.phase = Copy::Phase::kBroken;
        c.failure = w.status();
      } else {
        c.phase = Copy::Phase::kReady;
        c.held = true;
        c.writer = *w;
        c.fsync = add.fsync;
        c.fsync_interval_ms = add.interval_ms;
        (void)local_.set_fsync(ledger, fsync_of(add.fsync), std::chrono::milliseconds(add.interval_ms));
      }
      run_waiting(c);
    });
    return;
  }
  if (!copy.failure.is_ok()) return reply(encode_outcome(copy.failure));
  if (copy.runs.empty()) {
    // Created, never written: it starts here (a striped run recorded first).
    if (add.stripe.striped()) {
      start_run(copy, ledger, add.entry, add.stripe);
      // First again: the adds that arrived meanwhile follow it.
      copy.waiting.insert(copy.waiting.begin(), again);
      return;
    }
    copy.runs.push_back(Run{add.entry, 0, 0, Stripe{}});
  }
  if (add.fsync != copy.fsync || add.interval_ms != copy.fsync_interval_ms) {
    copy.fsync = add.fsync;
    copy.fsync_interval_ms = add.interval_ms;
    (void)local_.set_fsync(ledger, fsync_of(add.fsync), std::chrono::milliseconds(add.interval_ms));
  }
  if (run_of(copy, add.entry) != nullptr) {
    // Sent again (a retry or a recovery): answered once it is durable.
    copy.lac = std::max(copy.lac, add.lac);
    if (copy.in_flight == 0) return reply(encode_outcome(Status::ok()));
    copy.drained.push_back([reply]() { reply(encode_outcome(Status::ok())); });
    return;
  }
  const EntryId next = next_of(copy);
  const bool same_stripe = add.stripe == copy.runs.back().stripe;
  if (add.entry == next && same_stripe) {
    return append(copy, ledger, add.entry, add.lac, std::move(add.data), std::move(reply));
  }
  if (add.new_run) {
    start_run(copy, ledger, add.entry, add.stripe);
    copy.waiting.insert(copy.waiting.begin(), again);
    return;
  }
  if (!same_stripe) {
    return reply(encode_outcome(Status::failed_precondition(
        "entry " + std::to_string(add.entry) + " is striped otherwise than this copy's last run")));
  }
  return reply(encode_outcome(Status::failed_precondition(
      "entry " + std::to_string(add.entry) + (add.entry > next ? " leaves a hole" : " is not in this copy") +
      ": this copy takes entry " + std::to_string(next) + " next")));
}

const StorageServer::Run* StorageServer::run_of(const Copy& copy, EntryId entry) {
  for (const Run& r : copy.runs) {
    if (entry >= r.first && r.stripe.holds(entry) && r.stripe.held_between(r.first, entry) < r.count) return &r;
  }
  return nullptr;
}

EntryId StorageServer::next_of(const Copy& copy) {
  if (copy.runs.empty()) return storage::kNoEntry;
  const Run& tail = copy.runs.back();
  return tail.count == 0 ? tail.first : tail.stripe.next_held(tail.entry_at(tail.count) + 1);
}

void StorageServer::start_run(Copy& copy, LedgerId ledger, EntryId entry, Stripe stripe) {
  if (!copy.runs.empty() && copy.runs.back().count == 0) copy.runs.pop_back();  // never written: replaced
  const EntryId local = copy.runs.empty() ? 0 : copy.runs.back().local + copy.runs.back().count;
  copy.phase = Copy::Phase::kCreating;
  auto done = [this, ledger, entry, local, stripe](Status st) {
    auto it = copies_.find(ledger);
    if (it == copies_.end()) return;
    Copy& c = it->second;
    if (!st.is_ok()) {
      MLOG_WARN("storage node: a run of ledger {}'s copy could not be recorded: {}", ledger, st.to_string());
      c.phase = Copy::Phase::kBroken;
      c.failure = st;
    } else {
      c.phase = Copy::Phase::kReady;
      c.runs.push_back(Run{entry, local, 0, stripe});
      if (local > 0) {
        MLOG_INFO("storage node: ledger {}'s copy holds another run from entry {} (local entry {})", ledger, entry,
                  local);
      }
    }
    run_waiting(c);
  };
  std::string value(stripe.striped() ? kStripedRunValueBytes : kRunValueBytes, '\0');
  auto* v = reinterpret_cast<uint8_t*>(value.data());
  put_i64(v, entry);
  if (stripe.striped()) {
    put_u32(v + 8, stripe.period);
    put_u32(v + 12, stripe.width);
    put_u32(v + 16, stripe.anchor);
  }
  sync_write(run_key(ledger, local), std::move(value), "recording a run", std::move(done));
}

void StorageServer::append(Copy& copy, LedgerId ledger, EntryId entry, EntryId lac, Slice data, Reply reply) {
  Run& tail = copy.runs.back();
  const EntryId local = tail.local + tail.count;
  tail.count++;
  copy.lac = std::max(copy.lac, lac);
  copy.in_flight++;
  local_.add_entry(copy.writer, local, std::move(data), [this, ledger, reply](Status st) {
    auto it = copies_.find(ledger);
    if (it != copies_.end()) {
      Copy& c = it->second;
      c.in_flight--;
      if (!st.is_ok() && c.failure.is_ok()) {
        MLOG_WARN("storage node: an add to the copy of ledger {} failed: {}", ledger, st.to_string());
        c.failure = st;
      }
      if (c.in_flight == 0) drain_done(c);
    }
    if (st.is_ok()) entries_added_.inc();
    reply(encode_outcome(st));
  });
}

void StorageServer::drain_done(Copy& copy) {
  std::vector<std::function<void()>> waiting;
  waiting.swap(copy.drained);
  for (auto& fn : waiting) fn();
}

void StorageServer::read(std::string_view payload, Reply reply) {
  const auto* req = cluster::verified_record<fb::ReadEntries>(payload);
  if (req == nullptr) return reply(read_reply(Status::invalid_argument("malformed ReadEntries"), false, -1, -1, nullptr, 0));
  const LedgerId ledger = req->ledger();
  const EntryId from = req->first();
  const EntryId to = req->last();
  const size_t max_bytes = req->max_bytes() == 0 ? (8u << 20) : req->max_bytes();
  if (from < 0 || to < from) {
    return reply(read_reply(Status::invalid_argument("bad entry range"), false, -1, -1, nullptr, 0));
  }
  with_copy(ledger, [this, ledger, from, to, max_bytes, reply](Copy& copy) {
    if (copy.phase == Copy::Phase::kBroken) return reply(read_reply(copy.failure, true, -1, -1, nullptr, 0));
    if (!copy.held && ledger < wiped_below_) return reply(read_reply(forgotten(ledger), false, -1, -1, nullptr, 0));
    if (!copy.held || copy.runs.empty()) return reply(read_reply(Status::ok(), false, -1, -1, nullptr, 0));
    auto info = local_.ledger_info(ledger);
    if (!info) return reply(read_reply(info.status(), false, -1, -1, nullptr, 0));
    // What is durable of each run: local entries up to the local ledger's last confirmed.
    const EntryId durable_local = info->last_confirmed + 1;
    auto durable_count = [durable_local](const Run& r) {
      return std::clamp<EntryId>(durable_local - r.local, 0, r.count);
    };
    auto durable_end = [&durable_count](const Run& r) {
      const EntryId n = durable_count(r);
      return n > 0 ? r.entry_at(n) : r.first - 1;
    };
    // The run holding the first durable entry from `from` to `to` (a striped
    // copy may lack `from` itself).
    const Run* run = nullptr;
    EntryId begin = 0;
    for (const Run& r : copy.runs) {
      if (durable_count(r) == 0) continue;
      const EntryId x = r.stripe.next_held(std::max(from, r.first));
      if (x > durable_end(r) || x > to) continue;
      if (run == nullptr || x < begin) {
        run = &r;
        begin = x;
      }
    }
    if (run == nullptr) {
      // Not held: the answer says up to where the run before it goes (absent for a recovery).
      EntryId before = -1;
      for (const Run& r : copy.runs) {
        if (r.first <= from) before = std::max(before, std::min(durable_end(r), from - 1));
      }
      return reply(read_reply(Status::ok(), true, copy.runs.front().first, before, nullptr, 0));
    }
    const EntryId first_held = run->first;
    const EntryId last_held = durable_end(*run);
    const EntryId b = std::min(to, last_held);
    const EntryId local_last = run->local + run->stripe.held_between(run->first, b + 1) - 1;
    local_.read_entries(ledger, run->local_of(begin), local_last,
                        [reply, first_held, last_held, max_bytes](Result<std::vector<storage::Entry>> got) {
                          if (!got) return reply(read_reply(got.status(), true, first_held, last_held, nullptr, 0));
                          reply(read_reply(Status::ok(), true, first_held, last_held, &got.value(), max_bytes));
                        });
  });
}

void StorageServer::fence(std::string_view payload, Reply reply) {
  const auto* req = cluster::verified_record<fb::Fence>(payload);
  if (req == nullptr) return reply(fence_reply(Status::invalid_argument("malformed Fence"), false, -1, -1));
  const LedgerId ledger = req->ledger();
  auto answer = [this, ledger, reply]() {
    with_copy(ledger, [this, ledger, reply](Copy& copy) {
      auto respond = [this, ledger, reply]() {
        Copy& c = copies_[ledger];
        if (c.phase == Copy::Phase::kBroken) return reply(fence_reply(c.failure, true, -1, -1));
        if (!c.held && ledger < wiped_below_) return reply(fence_reply(forgotten(ledger), false, -1, -1));
        if (!c.held || c.runs.empty()) return reply(fence_reply(Status::ok(), false, c.lac, -1));
        // The adds are drained: every entry of the last run is durable.
        const Run& tail = c.runs.back();
        reply(fence_reply(Status::ok(), true, c.lac, tail.count > 0 ? tail.entry_at(tail.count) : tail.first - 1));
      };
      if (copy.in_flight == 0) return respond();
      copy.drained.push_back(respond);
    });
  };
  if (!req->fence()) return answer();
  // Adds are refused from now on; the answer waits until the fence is on
  // disk, for every request, not only the first (a second recovery told
  // "fenced" before the sync could lose the fence to a crash).
  if (fenced_.insert(ledger).second) fences_.inc();
  if (durable_fences_.count(ledger) != 0) return answer();
  auto& waiting = fences_syncing_[ledger];
  waiting.push_back([answer, reply, ledger](Status st) {
    if (!st.is_ok()) {
      MLOG_ERROR("storage node: fencing ledger {} failed: {}", ledger, st.to_string());
      return reply(fence_reply(st, false, -1, -1));
    }
    answer();
  });
  if (waiting.size() > 1) return;  // a sync is under way: answered with it
  persist_fence(ledger, true, [this, ledger](Status st) {
    auto it = fences_syncing_.find(ledger);
    if (it == fences_syncing_.end()) return;
    auto answers = std::move(it->second);
    fences_syncing_.erase(it);
    if (st.is_ok()) durable_fences_.insert(ledger);
    for (auto& a : answers) a(st);
  });
}

void StorageServer::remove(std::string_view payload, Reply reply) {
  const auto* req = cluster::verified_record<fb::DeleteReplica>(payload);
  if (req == nullptr) return reply(encode_outcome(Status::invalid_argument("malformed DeleteReplica")));
  const LedgerId ledger = req->ledger();
  auto copy = copies_.find(ledger);
  std::vector<EntryId> runs;  // where runs past the first were recorded
  if (copy != copies_.end()) {
    for (const Run& run : copy->second.runs) runs.push_back(run.local);  // a first run's key only when striped
    copies_.erase(copy);
  }
  auto stored = stored_runs_.find(ledger);
  if (stored != stored_runs_.end()) {
    for (const StoredRun& run : stored->second) runs.push_back(run.local);
    stored_runs_.erase(stored);
  }
  if (!runs.empty() && fence_thread_) {
    (void)fence_thread_->post([this, ledger, runs]() {
      leveldb::WriteBatch batch;
      for (EntryId local : runs) batch.Delete(run_key(ledger, local));
      (void)fences_db_->Write(leveldb::WriteOptions(), &batch);
    });
  }
  durable_fences_.erase(ledger);
  if (fenced_.erase(ledger) != 0) persist_fence(ledger, false, [](Status) {});
  local_.delete_ledger(ledger, [reply](Status st) {
    if (st.code() == common::ErrorCode::kNotFound) st = Status::ok();
    reply(encode_outcome(st));
  });
}

}  // namespace magnetar::replication
