#include "ledger/managed_ledger.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>

#include "common/clock.h"
#include "common/join.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/stage_timing.h"
#include "ledger/records_generated.h"

namespace magnetar::ledger {

using common::Result;
using common::Slice;
using common::Status;

namespace {


std::string encode_chain(const LedgerChain& chain, uint8_t origin, const std::optional<CompactedLedger>& compacted,
                         LedgerId compacting) {
  flatbuffers::FlatBufferBuilder b(128);
  std::vector<fb::LedgerRecord> records;
  for (const ChainLedger& l : chain.ledgers()) {
    records.emplace_back(l.id, l.entries, l.size, l.created_ms, l.first_index);
  }
  auto vec = b.CreateVectorOfStructs(records);
  std::vector<flatbuffers::Offset<fb::LedgerMessages>> messages;
  for (const ChainLedger& l : chain.ledgers()) {
    if (!l.runs_complete()) continue;
    std::vector<fb::MessageRun> runs;
    for (const MessageRun& r : l.runs) runs.emplace_back(r.messages, r.entries);
    messages.push_back(fb::CreateLedgerMessages(b, l.id, b.CreateVectorOfStructs(runs)));
  }
  auto messages_vec = b.CreateVector(messages);
  flatbuffers::Offset<fb::CompactedLedger> view;
  if (compacted) {
    const CompactedLedger& c = *compacted;
    view = fb::CreateCompactedLedger(b, c.ledger, c.entries, c.size, c.horizon.ledger, c.horizon.entry,
                                     c.horizon_index, c.first_index, c.created_ms);
  }
  fb::LedgerListBuilder list(b);
  list.add_ledgers(vec);
  list.add_messages(messages_vec);
  list.add_origin(origin);
  if (compacted) list.add_compacted(view);
  if (compacting != 0) list.add_compacting_ledger(compacting);
  b.Finish(list.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<const fb::LedgerList*> verified_list(const std::string& bytes) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<fb::LedgerList>(nullptr)) return Status::corruption("ledger list fails verification");
  return flatbuffers::GetRoot<fb::LedgerList>(bytes.data());
}

Result<LedgerChain> decode_chain(const std::string& bytes) {
  auto verified = verified_list(bytes);
  if (!verified.is_ok()) return verified.status();
  const fb::LedgerList* list = *verified;
  LedgerChain chain;
  if (list->ledgers()) {
    for (const fb::LedgerRecord* r : *list->ledgers()) {
      chain.append(ChainLedger{r->id(), r->entries(), r->size(), r->created_ms(), r->first_index(), {}, 0});
    }
  }
  if (list->messages()) {
    for (const fb::LedgerMessages* m : *list->messages()) {
      auto* l = const_cast<ChainLedger*>(chain.find(m->ledger()));
      if (l == nullptr || !m->runs()) continue;
      for (const fb::MessageRun* r : *m->runs()) {
        l->runs.push_back(MessageRun{r->messages(), r->entries()});
        l->messages += static_cast<uint64_t>(r->messages()) * static_cast<uint64_t>(r->entries());
      }
    }
  }
  return chain;
}

std::optional<CompactedLedger> decode_compacted(const fb::LedgerList& list) {
  const fb::CompactedLedger* c = list.compacted();
  if (c == nullptr) return std::nullopt;
  return CompactedLedger{c->ledger(),        c->entries(),     c->size(),
                         Position{c->horizon_ledger(), c->horizon_entry()},
                         c->horizon_index(), c->first_index(), c->created_ms()};
}

}  // namespace

std::string ManagedLedger::encode_list() const {
  return encode_chain(chain_, origin_, compacted_, compacting_.ledger);
}

int64_t ManagedLedger::now_ms() { return common::wall_clock_ms(); }

Result<uint64_t> ManagedLedger::stored_size(const std::string& record) {
  auto chain = decode_chain(record);
  if (!chain.is_ok()) return chain.status();
  auto view = decode_compacted(**verified_list(record));
  return chain->total_size() + (view ? view->size : 0);
}

Result<std::vector<LedgerId>> ManagedLedger::stored_ledgers(const std::string& record) {
  auto chain = decode_chain(record);
  if (!chain.is_ok()) return chain.status();
  std::vector<LedgerId> ids;
  ids.reserve(chain->ledgers().size());
  for (const auto& l : chain->ledgers()) ids.push_back(l.id);
  const fb::LedgerList* list = *verified_list(record);
  if (auto view = decode_compacted(*list)) ids.push_back(view->ledger);
  if (list->compacting_ledger() != 0) ids.push_back(list->compacting_ledger());
  return ids;
}

Result<uint8_t> ManagedLedger::stored_origin(const std::string& record) {
  auto list = verified_list(record);
  if (!list.is_ok()) return list.status();
  return (*list)->origin();
}

void ManagedLedger::set_retention(std::chrono::milliseconds time, int64_t size, std::chrono::milliseconds ttl) {
  config_.retention_time = time;
  config_.retention_size = size;
  config_.ttl = ttl;
}

void ManagedLedger::set_fsync(std::optional<storage::FsyncMode> mode, std::chrono::milliseconds interval) {
  if (config_.fsync == mode && config_.fsync_interval == interval) return;
  config_.fsync = mode;
  config_.fsync_interval = interval;
  if (writer_.ledger != 0) (void)storage_.set_fsync(writer_.ledger, mode, interval);  // gone: the next one gets it
}

ManagedLedger::ManagedLedger(std::string name, ManagedLedgerConfig config, storage::Storage& storage,
                             metadata::Store& store, LedgerIdAllocator& ids)
    : name_(std::move(name)), config_(config), storage_(storage), store_(store), ids_(ids), origin_(config.origin) {}

void ManagedLedger::check_home() const {
  if (home_ != nullptr) home_->assert_on_thread();
}

void ManagedLedger::set_observer(LogObserver observer) {
  if (!observer.expired && !observer.removed && !cold_) return;
  cold().observer = std::move(observer);
}

void ManagedLedger::later(runtime::Task fn) {
  if (home_->is_on_thread()) return home_->defer(std::move(fn));
  Status st = home_->try_post(fn);
  if (!st.is_ok() && fn) fn();
}

void ManagedLedger::open(std::string name, ManagedLedgerConfig config, storage::Storage& storage,
                         metadata::Store& store, LedgerIdAllocator& ids,
                         Callback<Result<std::shared_ptr<ManagedLedger>>> done) {
  runtime::Reactor* home = runtime::Reactor::current();
  if (home == nullptr) return done(Status::invalid_argument("a managed ledger is opened on its home reactor"));
  std::shared_ptr<ManagedLedger> ml(new ManagedLedger(std::move(name), config, storage, store, ids));
  ml->home_ = home;
  ml->recover([ml, done](Status st) {
    if (!st.is_ok()) return done(st);
    ml->recover_cursors([ml, done](Status cursors) {
      if (!cursors.is_ok()) return done(cursors);
      ml->start_new_ledger([ml, done](Status started) {
        if (!started.is_ok()) return done(started);
        ml->state_ = State::kReady;
        MLOG_INFO("managed ledger {}: open with {} ledgers and {} cursors, writing ledger {}", ml->name_,
                  ml->chain_.ledgers().size(), ml->cursors_.size(), ml->writer_.ledger);
        done(ml);
      });
    });
  });
}

void ManagedLedger::recover(Callback<Status> done) {
  auto self = shared_from_this();
  store_.get(chain_key(), [self, done](Result<metadata::Record> rec) {
    if (!rec) return done(rec.status().code() == common::ErrorCode::kNotFound ? Status::ok() : rec.status());
    auto chain = decode_chain(rec->value);
    if (!chain) return done(chain.status());
    self->chain_ = std::move(chain.value());
    self->chain_version_ = rec->stat.version;
    self->origin_ = ManagedLedger::stored_origin(rec->value).value_or(0);
    const fb::LedgerList* list = *verified_list(rec->value);
    self->compacted_ = decode_compacted(*list);
    // A compaction pass cut short: its half-written ledger goes, the view
    // in place stays. The list forgets it with its next write.
    if (const LedgerId unfinished = list->compacting_ledger(); unfinished != 0) {
      MLOG_INFO("managed ledger {}: deleting compacted ledger {} left unfinished", self->name_, unfinished);
      self->delete_compacted_ledger(unfinished);
    }
    if (self->chain_.empty()) return done(Status::ok());
    // Seal the previous owner's ledger: its writer is fenced from now on.
    const LedgerId last = self->chain_.back().id;
    self->storage_.close_ledger(last, [self, done, last](Result<EntryId> closed) {
      ChainLedger& l = self->chain_.back();
      if (!closed) {
        if (closed.status().code() != common::ErrorCode::kNotFound) return done(closed.status());
        l.entries = 0;  // created in the list, never in storage
      } else {
        l.entries = *closed + 1;
      }
      self->next_index_ = l.first_index;
      if (l.entries == 0) {
        l.runs.clear();
        l.messages = 0;
        return done(Status::ok());
      }
      // Read the sealed ledger's headers: the message count of each entry
      // (unless the list already has them) and where the index goes on.
      const bool rebuild = !l.runs_complete();
      if (rebuild) {
        l.runs.clear();
        l.messages = 0;
      }
      auto next = std::make_shared<EntryId>(rebuild ? 0 : l.entries - 1);
      // A damaged entry leaves the message runs incomplete (seeks by index
      // then read headers) and is skipped here; readers skip it later.
      auto damaged = std::make_shared<bool>(false);
      auto step = std::make_shared<std::function<void()>>();
      *step = [self, done, last, next, rebuild, damaged, step]() {
        const EntryId end = self->chain_.back().entries - 1;
        self->storage_.read_entries(
            last, *next, end,
            [self, done, next, rebuild, damaged, step, end](Result<std::vector<storage::Entry>> entries) {
              auto finish = [&](Status st) {
                auto answer = done;
                if (*damaged) {
                  self->chain_.back().runs.clear();
                  self->chain_.back().messages = 0;
                }
                *step = nullptr;
                answer(std::move(st));
              };
              auto skip = [&](EntryId e, const Status& why) {
                MLOG_ERROR("managed ledger {}: entry {}:{} cannot be read back while opening: {}", self->name_,
                           self->chain_.back().id, e, why.to_string());
                *damaged = true;
                *next = e + 1;
              };
              if (!entries) {
                if (entries.status().code() != common::ErrorCode::kCorruption) return finish(entries.status());
                skip(*next, entries.status());
              } else {
                for (const storage::Entry& e : *entries) {
                  auto decoded = decode_entry(e.data);
                  if (!decoded) {
                    skip(e.id, decoded.status());
                    break;
                  }
                  const MessageHeader& h = decoded->first;
                  if (rebuild && !*damaged) self->chain_.back().record_entry(h.messages);
                  self->next_index_ = h.first_index + h.messages;
                  *next = e.id + 1;
                }
              }
              if (*next > end) return finish(Status::ok());
              (*step)();
            });
      };
      (*step)();
    });
  });
}

void ManagedLedger::persist_chain(Callback<Status> done) {
  chain_waiters_.push_back(std::move(done));
  if (!chain_writing_) write_chain();
}

void ManagedLedger::write_chain() {
  chain_writing_ = true;
  std::vector<Callback<Status>> waiters;
  waiters.swap(chain_waiters_);
  auto self = shared_from_this();
  store_.put(chain_key(), encode_list(), metadata::PutOptions{chain_version_, 0},
             [self, waiters = std::move(waiters)](Result<metadata::Stat> st) {
               self->chain_writing_ = false;
               if (st) self->chain_version_ = st->version;
               for (const auto& w : waiters) w(st ? Status::ok() : st.status());
               // Changes made meanwhile go in one more write of the latest chain.
               if (!self->chain_waiters_.empty() && !self->chain_writing_) self->write_chain();
             });
}

void ManagedLedger::start_new_ledger(Callback<Status> done) {
  auto self = shared_from_this();
  // Above the topic's last ledger: positions order by ledger id (ledger_ids.h).
  const LedgerId last = chain_.ledgers().empty() ? 0 : chain_.ledgers().back().id;
  ids_.allocate([self, done](Result<LedgerId> id) {
    if (!id) return done(id.status());
    self->storage_.create_ledger_with(*id, self->config_.copies, [self, done, id = *id](Result<storage::LedgerWriter> w) {
      if (!w) return done(w.status());
      if (self->config_.fsync) (void)self->storage_.set_fsync(id, self->config_.fsync, self->config_.fsync_interval);
      self->chain_.append(ChainLedger{id, 0, 0, now_ms(), self->next_index_, {}, 0});
      self->persist_chain([self, done, w = *w](Status st) {
        if (!st.is_ok()) {
          // Not in the list: nobody would ever find or delete it.
          self->storage_.delete_ledger(w.ledger, [](Status) {});
          std::vector<ChainLedger> kept(self->chain_.ledgers().begin(), self->chain_.ledgers().end() - 1);
          self->chain_ = LedgerChain();
          for (const auto& l : kept) self->chain_.append(l);
          return done(st);
        }
        self->writer_ = w;
        self->writer_sealed_ = false;
        self->next_entry_ = 0;
        self->current_bytes_ = 0;
        done(Status::ok());
      });
    });
  }, last);
}

void ManagedLedger::add_entry(MessageHeader header, Slice payload, Callback<Result<AppendedEntry>> done) {
  check_home();
  if (state_ == State::kClosed) {
    return later([done]() { done(Status::failed_precondition("managed ledger is closed")); });
  }
  if (state_ == State::kTakenOver) return later([done, st = taken_over_status()]() { done(st); });
  PendingAdd add{std::move(header), std::move(payload), std::move(done), common::monotonic_ns()};
  if (state_ != State::kReady) {
    cold().waiting.push_back(std::move(add));
    return;
  }
  submit(std::move(add));
}

void ManagedLedger::submit(PendingAdd add) {
  add.header.first_index = next_index_;
  next_index_ += add.header.messages;
  SubmittedAdd s;
  s.bytes = encode_entry(add.header, add.payload);
  s.entry = next_entry_;
  s.size = add.payload.size();
  s.messages = add.header.messages;
  s.first_index = add.header.first_index;
  s.done = std::move(add.done);
  s.timing.accepted_ns = add.accepted_ns;
  send(std::move(s));
  maybe_roll_over();
}

void ManagedLedger::send(SubmittedAdd add) {
  next_entry_ = add.entry + 1;
  current_bytes_ += add.bytes.size();
  ++in_flight_;
  add.timing.sent_ns = common::monotonic_ns();
  auto self = shared_from_this();
  const LedgerId lid = writer_.ledger;
  Slice bytes = add.bytes;
  storage_.add_entry(writer_, add.entry, std::move(bytes), [self, lid, add = std::move(add)](Status st) mutable {
    self->on_added(std::move(add), lid, std::move(st));
  });
}

void ManagedLedger::on_added(SubmittedAdd add, LedgerId lid, Status st) {
  --in_flight_;
  const bool current = lid == writer_.ledger;
  // Storage's queue was full: it took neither this entry nor any after it
  // (those come back refused as out of order). Held and handed again.
  const bool refused = current && (state_ == State::kReady || state_ == State::kBackingOff) &&
                       (st.code() == common::ErrorCode::kResourceExhausted ||
                        (state_ == State::kBackingOff && st.code() == common::ErrorCode::kInvalidArgument &&
                         has_refused() && add.entry > cold_->refused.front().entry));
  if (refused) {
    if (state_ == State::kReady) state_ = State::kBackingOff;
    current_bytes_ -= add.bytes.size();
    cold().refused.push_back(std::move(add));
    if (in_flight_ == 0) back_off();
    return;
  }
  if (st.is_ok()) {
    if (cold_) cold_->back_off = std::chrono::milliseconds(0);
    ChainLedger& l = chain_.back();
    if (l.id == lid && add.entry == l.entries) {  // adds complete in order
      ++entries_added_;
      l.entries = add.entry + 1;
      l.size += add.size;
      l.record_entry(add.messages);
    }
    add.timing.stored_ns = common::monotonic_ns();
    ScopedAddTiming timing(&add.timing);
    add.done(AppendedEntry{Position{lid, add.entry}, add.first_index});
  } else {
    // Fenced by another writer: a new owner opened the log. Nothing more is
    // written here (a new ledger would contest the new owner's chain).
    if (current && st.code() == common::ErrorCode::kFenced && !writer_sealed_) taken_over(st);
    if (state_ == State::kTakenOver) {
      add.done(taken_over_status());
    } else if (st.code() == common::ErrorCode::kFenced) {
      // This log's own seal (a rollover that could not start the next ledger): no takeover to report.
      add.done(Status::unavailable("ledger " + std::to_string(lid) + " of " + name_ + " takes no more adds: " +
                                   st.message()));
    } else {
      add.done(st);
    }
    // The ledger refuses every later add: move on to a new one.
    if (state_ == State::kReady && current) roll_over();
  }
  if (state_ == State::kRolling && in_flight_ == 0) finish_roll_over();
  if (state_ == State::kBackingOff && in_flight_ == 0) back_off();
}

void ManagedLedger::back_off() {
  Cold& c = cold();
  if (c.back_off_timer && c.back_off_timer->active()) return;
  c.back_off = std::min(std::chrono::milliseconds(50), std::max(std::chrono::milliseconds(1), c.back_off * 2));
  if (!c.back_off_timer) c.back_off_timer = std::make_unique<runtime::Timer>(*home_);
  std::weak_ptr<ManagedLedger> weak = shared_from_this();
  c.back_off_timer->once(c.back_off, [weak]() {
    if (auto self = weak.lock()) self->resume_after_back_off();
  });
}

void ManagedLedger::resume_after_back_off() {
  if (state_ != State::kBackingOff) return;
  state_ = State::kReady;
  common::Fifo<SubmittedAdd> refused;
  if (cold_) refused.swap(cold_->refused);
  for (SubmittedAdd& add : refused) send(std::move(add));
  common::Fifo<PendingAdd> waiting;
  if (cold_) waiting.swap(cold_->waiting);
  for (PendingAdd& add : waiting) {
    if (state_ == State::kReady) {
      submit(std::move(add));
    } else {
      cold().waiting.push_back(std::move(add));
    }
  }
}

bool ManagedLedger::idle() const {
  // A compaction pass under way keeps its topic loaded (it would stop).
  if (compacting_.active) return false;
  if (state_ != State::kReady || in_flight_ > 0 || (cold_ && (!cold_->waiting.empty() || !cold_->refused.empty()))) {
    return false;
  }
  for (const auto& [name, slot] : cursors_) {
    if (slot.writing) return false;
  }
  return true;
}

void ManagedLedger::maybe_roll_over() {
  if (state_ != State::kReady || chain_.empty()) return;
  const auto age = std::chrono::milliseconds(now_ms() - chain_.back().created_ms);
  if (next_entry_ >= config_.max_entries_per_ledger || current_bytes_ >= config_.max_ledger_bytes ||
      (next_entry_ > 0 && age >= config_.max_ledger_age)) {
    roll_over();
  }
}

void ManagedLedger::roll_over() {
  state_ = State::kRolling;
  if (in_flight_ == 0) later([self = shared_from_this()]() { self->finish_roll_over(); });
}

Status ManagedLedger::taken_over_status() const {
  return Status::fenced("the log " + name_ + " was taken over by another owner");
}

void ManagedLedger::taken_over(const Status& why) {
  if (state_ == State::kTakenOver || state_ == State::kClosed) return;
  static common::Counter& taken = common::MetricsRegistry::global().counter(
      "magnetar_ledger_taken_over_total",
      "Logs whose current ledger another owner fenced: they took no more adds here");
  taken.inc();
  state_ = State::kTakenOver;
  MLOG_WARN("managed ledger {}: ledger {} was fenced by another owner ({}); no more adds here", name_, writer_.ledger,
            why.to_string());
  fail_waiting(taken_over_status());
}

void ManagedLedger::fail_waiting(const Status& st) {
  common::Fifo<SubmittedAdd> refused;
  if (cold_) refused.swap(cold_->refused);
  for (SubmittedAdd& add : refused) add.done(st);
  common::Fifo<PendingAdd> waiting;
  if (cold_) waiting.swap(cold_->waiting);
  for (PendingAdd& add : waiting) add.done(st);
}

void ManagedLedger::finish_roll_over() {
  if (state_ != State::kRolling || sealing_) return;
  sealing_ = true;
  auto self = shared_from_this();
  storage_.close_ledger(writer_.ledger, [self](Result<EntryId> closed) {
    if (closed) self->chain_.back().entries = *closed + 1;
    // Another owner is recovering it: the log is theirs now.
    if (!closed && closed.status().code() == common::ErrorCode::kFenced) self->taken_over(closed.status());
    if (self->state_ != State::kRolling) {
      self->sealing_ = false;
      return;  // closed or taken over meanwhile: the waiting adds were failed then
    }
    self->writer_sealed_ = true;
    self->start_new_ledger([self](Status st) {
      self->sealing_ = false;
      if (self->state_ == State::kClosed) return self->fail_waiting(Status::failed_precondition("closed"));
      // The chain changed under this owner's version: another owner wrote it.
      if (st.code() == common::ErrorCode::kFailedPrecondition) self->taken_over(st);
      if (self->state_ == State::kTakenOver) return;
      self->state_ = State::kReady;
      if (!st.is_ok()) {
        MLOG_WARN("managed ledger {}: cannot start a new ledger: {}", self->name_, st.to_string());
        self->fail_waiting(st);
        return;
      }
      common::Fifo<PendingAdd> waiting;
      if (self->cold_) waiting.swap(self->cold_->waiting);
      for (PendingAdd& add : waiting) {
        if (self->state_ == State::kReady) {
          self->submit(std::move(add));
        } else {
          self->cold().waiting.push_back(std::move(add));
        }
      }
    });
  });
}

void ManagedLedger::read_entries(Position after, size_t max_entries, Callback<Result<std::vector<LedgerEntry>>> done) {
  check_home();
  auto p = chain_.next(after);
  if (!p || max_entries == 0) return later([done]() { done(std::vector<LedgerEntry>{}); });
  const ChainLedger* l = chain_.find(p->ledger);
  const EntryId last = std::min<EntryId>(l->entries - 1, p->entry + static_cast<EntryId>(max_entries) - 1);
  auto self = shared_from_this();
  storage_.read_entries(p->ledger, p->entry, last,
                        [self, first = *p, max_entries, done](Result<std::vector<storage::Entry>> entries) {
    // A damaged first entry is skipped and the read goes on after it; a
    // damaged later one ends this read before it (the next read starts there).
    if (!entries) {
      if (entries.status().code() != common::ErrorCode::kCorruption || self->state_ == State::kClosed) {
        return done(entries.status());
      }
      self->skip_damaged(first, entries.status());
      return self->read_entries(first, max_entries, done);
    }
    std::vector<LedgerEntry> out;
    out.reserve(entries->size());
    for (const storage::Entry& e : *entries) {
      auto decoded = decode_entry(e.data);
      if (!decoded) {
        const Position at{e.ledger, e.id};
        if (!out.empty()) break;
        if (self->state_ == State::kClosed) return done(decoded.status());
        self->skip_damaged(at, decoded.status());
        return self->read_entries(at, max_entries, done);
      }
      out.push_back(LedgerEntry{Position{e.ledger, e.id}, std::move(decoded->first), std::move(decoded->second)});
    }
    done(std::move(out));
  });
}

void ManagedLedger::skip_damaged(Position p, const Status& why) {
  static common::Counter& damaged = common::MetricsRegistry::global().counter(
      "magnetar_ledger_damaged_entries_total",
      "Entries found damaged on disk and skipped for every reader (each counted once per topic load)");
  // Remembered so that each is counted and logged once; past the bound a
  // re-read counts again, which only overstates the figure.
  constexpr size_t kMaxDamagedRemembered = 4096;
  std::set<Position>& damaged_found = cold().damaged;
  if (damaged_found.count(p) != 0) return;
  if (damaged_found.size() < kMaxDamagedRemembered) damaged_found.insert(p);
  ++damaged_entries_;
  damaged.inc();
  MLOG_ERROR("managed ledger {}: entry {} cannot be read back ({}); it is skipped and acknowledged for every "
             "subscription",
             name_, p.to_string(), why.to_string());
  for (auto& [name, slot] : cursors_) {
    if (slot.cursor.is_acknowledged(p)) continue;
    if (slot.cursor.ack(p, chain_).is_ok()) persist_cursor(name);
  }
}

void ManagedLedger::close(Callback<Status> done) {
  check_home();
  if (state_ == State::kClosed) return later([done]() { done(Status::ok()); });
  const bool taken = state_ == State::kTakenOver;
  state_ = State::kClosed;
  fail_waiting(Status::failed_precondition("managed ledger is closed"));
  // The ledger and the chain are the new owner's business; the cursors'
  // writes are compare-and-set, so they cannot overwrite the new owner's.
  if (taken) return flush_cursors(std::move(done));
  auto self = shared_from_this();
  storage_.close_ledger(writer_.ledger, [self, done](Result<EntryId> closed) {
    if (!closed) return done(closed.status());
    self->chain_.back().entries = *closed + 1;
    self->persist_chain([self, done](Status st) {
      self->flush_cursors([done, st](Status flushed) { done(st.is_ok() ? flushed : st); });
    });
  });
}

void ManagedLedger::delete_log(Callback<Status> done) {
  check_home();
  state_ = State::kClosed;
  fail_waiting(Status::failed_precondition("managed ledger is deleted"));
  auto self = shared_from_this();
  std::vector<std::string> names = cursor_names();
  for (auto& [name, slot] : cursors_) {
    auto waiters = std::move(slot.flushed);
    for (auto& w : waiters) w(Status::ok());
  }
  cursors_.clear();
  auto delete_chain = [self, done]() {
    self->store_.del(self->chain_key(), metadata::kAnyVersion, [self, done](Status st) {
      if (!st.is_ok() && st.code() != common::ErrorCode::kNotFound) return done(st);
      if (self->writer_.ledger != 0) self->storage_.close_ledger(self->writer_.ledger, [](Result<EntryId>) {});
      std::vector<LedgerId> ids;
      for (const ChainLedger& l : self->chain_.ledgers()) ids.push_back(l.id);
      if (self->compacted_) ids.push_back(self->compacted_->ledger);
      if (self->compacting_.ledger != 0) ids.push_back(self->compacting_.ledger);
      self->compacted_.reset();
      self->compacting_ = CompactingLedger{};
      for (LedgerId lid : ids) {
        self->storage_.delete_ledger(lid, [self, id = lid](Status del) {
          if (!del.is_ok() && del.code() != common::ErrorCode::kNotFound) {
            MLOG_WARN("managed ledger {}: ledger {} not deleted: {}", self->name_, id, del.to_string());
          }
        });
      }
      self->chain_ = LedgerChain();
      MLOG_INFO("managed ledger {}: deleted", self->name_);
      done(Status::ok());
    });
  };
  // The cursors first, then the chain: a failure leaves the log findable.
  auto join = common::Join::start(
      [delete_chain, done](Status st) {
        if (!st.is_ok()) return done(st);
        delete_chain();
      },
      [](const Status& st) { return st.code() == common::ErrorCode::kNotFound; });
  for (const std::string& name : names) store_.del(cursor_key(name), metadata::kAnyVersion, join->branch());
  join->release();
}

}  // namespace magnetar::ledger
