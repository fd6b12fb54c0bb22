#include "broker/compaction.h"

#include <algorithm>
#include <unordered_map>

#include "common/clock.h"
#include "common/logging.h"
#include "runtime/reactor.h"
#include "runtime/timer.h"

namespace magnetar::broker {

using common::Result;
using common::Slice;
using common::Status;
using ledger::LedgerEntry;
using ledger::Position;

namespace {

// Entries read per step of a pass.
constexpr size_t kEntriesPerStep = 128;

uint64_t log_bytes(const ledger::ManagedLedger& log) {
  return log.chain().total_size() + (log.compacted() ? log.compacted()->size : 0);
}

// Where the latest message of a key is.
struct Latest {
  Position at;
  uint32_t index = 0;
};

class CompactionPass : public std::enable_shared_from_this<CompactionPass> {
 public:
  CompactionPass(std::shared_ptr<ledger::ManagedLedger> log, const CompactionCodec& codec, CompactionSettings settings,
                 std::weak_ptr<bool> alive, ledger::Callback<Result<CompactionOutcome>> done)
      : log_(std::move(log)), codec_(codec), settings_(settings), alive_(std::move(alive)), done_(std::move(done)),
        timer_(*runtime::Reactor::current()), started_ms_(common::monotonic_ms()) {}

  void start() {
    outcome_.bytes_before = log_bytes(*log_);
    if (log_->compacting()) return answer(Status::failed_precondition("a compaction pass is under way already"));
    // A view that replaces the history drops the ledgers behind its
    // horizon: the current one too, once sealed (adds still in flight to it
    // land after the horizon and keep it for the next pass).
    if (settings_.drop_covered) log_->roll_over_now();
    auto self = shared_from_this();
    if (settings_.min_lag.count() <= 0) return with_horizon(log_->last_confirmed());
    const int64_t before_ms = common::wall_clock_ms() - settings_.min_lag.count();
    log_->seek_by_time(before_ms, [self](Result<Position> first_young) {
      if (!first_young) {
        if (first_young.status().code() != common::ErrorCode::kNotFound) return self->answer(first_young.status());
        return self->with_horizon(self->log_->last_confirmed());  // nothing is that young
      }
      self->with_horizon(self->entry_before(*first_young));
    });
  }

 private:
  // The entry before `p` in the log; (0, -1) when none.
  Position entry_before(Position p) const {
    if (p.entry > 0) return Position{p.ledger, p.entry - 1};
    Position found{0, storage::kNoEntry};
    for (const auto& l : log_->chain().ledgers()) {
      if (l.id >= p.ledger) break;
      if (l.entries > 0) found = Position{l.id, l.entries - 1};
    }
    return found;
  }

  void with_horizon(Position horizon) {
    const auto& view = log_->compacted();
    // Aging rewrites the view through its own horizon when nothing came after.
    const bool nothing_new = horizon.entry < 0 || (view && horizon <= view->horizon);
    if (settings_.max_age.count() > 0 && view && view->entries > 0 && nothing_new) {
      horizon = view->horizon;
      outcome_.horizon_index = view->horizon_index;
    } else if (nothing_new) {
      outcome_.nothing_to_do = true;
      if (view) {
        outcome_.horizon = view->horizon;
        outcome_.horizon_index = view->horizon_index;
      }
      return answer(outcome_);
    }
    outcome_.horizon = horizon;
    auto self = shared_from_this();
    // The ledger first: while it is being written the log keeps its
    // ledgers (retention waits), so both phases read the same entries.
    log_->begin_compacted_ledger([self](Status st) {
      if (!st.is_ok()) return self->answer(st);
      self->began_ = true;
      self->step();
    });
  }

  void step() {
    if (alive_.expired()) return fail(Status::unavailable("the topic was unloaded"));
    auto self = shared_from_this();
    log_->read_compacted(read_after_, kEntriesPerStep, [self](Result<std::vector<LedgerEntry>> entries) {
      if (self->alive_.expired()) return self->fail(Status::unavailable("the topic was unloaded"));
      if (!entries) return self->fail(entries.status());
      self->take(std::move(*entries));
    });
  }

  void take(std::vector<LedgerEntry> entries) {
    // Only what is at or before the horizon.
    auto past = std::find_if(entries.begin(), entries.end(),
                             [this](const LedgerEntry& e) { return e.position > outcome_.horizon; });
    const bool phase_ends = past != entries.end() || entries.empty();
    entries.erase(past, entries.end());
    for (const auto& e : entries) {
      outcome_.entries_read++;
      outcome_.bytes_read += e.payload.size();
    }
    if (!entries.empty()) read_after_ = entries.back().position;
    if (!writing_) {
      Status st = survey(entries);
      if (!st.is_ok()) return fail(st);
      if (!phase_ends) return pace();
      writing_ = true;
      read_after_ = Position{0, storage::kNoEntry};
      return pace();
    }
    write(entries, phase_ends);
  }

  // Phase one: where the latest message of each key is.
  Status survey(const std::vector<LedgerEntry>& entries) {
    for (const auto& e : entries) {
      outcome_.horizon_index = std::max<int64_t>(outcome_.horizon_index, e.header.first_index + e.header.messages);
      auto messages = codec_.messages(e.payload);
      if (!messages) continue;  // kept whole in phase two
      for (uint32_t i = 0; i < messages->size(); ++i) {
        const CompactionMessage& m = (*messages)[i];
        if (m.compacted_out || !m.has_key) continue;
        auto [it, added] = latest_.try_emplace(m.key, Latest{e.position, i});
        if (!added) {
          it->second = Latest{e.position, i};
        } else if (latest_.size() > settings_.max_keys) {
          return Status::resource_exhausted("the topic has more than " + std::to_string(settings_.max_keys) +
                                            " keys before its horizon, more than one compaction pass may hold");
        }
      }
    }
    return Status::ok();
  }

  // Phase two: the surviving messages of each entry, written in order.
  void write(const std::vector<LedgerEntry>& entries, bool phase_ends) {
    const int64_t now_ms = common::wall_clock_ms();
    const int64_t tombstones_before = now_ms - settings_.delete_retention.count();
    const int64_t aged_before = settings_.max_age.count() > 0 ? now_ms - settings_.max_age.count() : INT64_MIN;
    auto self = shared_from_this();
    pending_ = 1;  // this call's own, until every add is issued
    for (const auto& e : entries) {
      if (e.header.publish_time_ms <= aged_before) continue;  // past retention: the whole entry goes
      Slice payload = e.payload;
      auto messages = codec_.messages(e.payload);
      if (!messages) {
        if (!reported_unreadable_) {
          MLOG_WARN("compaction of {}: entry {} cannot be read ({}); it is kept whole in the compacted view",
                    log_->name(), e.position.to_string(), messages.status().message());
          reported_unreadable_ = true;
        }
      } else {
        std::vector<bool> keep(messages->size(), false);
        bool any = false;
        bool all = true;
        for (uint32_t i = 0; i < messages->size(); ++i) {
          const CompactionMessage& m = (*messages)[i];
          bool live = !m.compacted_out && m.has_key;
          if (live) {
            auto it = latest_.find(m.key);
            live = it != latest_.end() && it->second.at == e.position && it->second.index == i;
          }
          if (live && m.tombstone && e.header.publish_time_ms <= tombstones_before) live = false;
          if (live && !m.tombstone) outcome_.keys++;
          keep[i] = live;
          any = any || live;
          all = all && (live || m.compacted_out);
        }
        if (!any) continue;
        if (!all) {
          auto kept = codec_.keep_only(e.payload, keep);
          if (!kept) {
            failure_ = kept.status();
            break;
          }
          payload = *kept;
        }
      }
      ledger::MessageHeader header = e.header;
      header.origin_ledger = e.position.ledger;
      header.origin_entry = e.position.entry;
      outcome_.entries_written++;
      outcome_.bytes_written += payload.size();
      ++pending_;
      log_->add_compacted_entry(header, payload, [self, phase_ends](Status st) {
        if (!st.is_ok() && self->failure_.is_ok()) self->failure_ = st;
        self->written(phase_ends);
      });
    }
    written(phase_ends);
  }

  void written(bool phase_ends) {
    if (--pending_ > 0) return;
    if (!failure_.is_ok()) return fail(failure_);
    if (!phase_ends) return pace();
    install();
  }

  void install() {
    auto self = shared_from_this();
    log_->install_compacted_ledger(outcome_.horizon, outcome_.horizon_index, settings_.drop_covered,
                                   [self](Status st) {
                                     if (!st.is_ok()) return self->fail(st);
                                     self->began_ = false;
                                     self->outcome_.bytes_after = log_bytes(*self->log_);
                                     self->answer(self->outcome_);
                                   });
  }

  // The next step, once the reads so far are within the rate.
  void pace() {
    auto self = shared_from_this();
    auto next = [self]() { self->step(); };
    const int64_t rate = settings_.max_read_bytes_per_second;
    if (rate > 0) {
      const auto due_ms = static_cast<int64_t>(outcome_.bytes_read * 1000 / static_cast<uint64_t>(rate));
      const int64_t elapsed = common::monotonic_ms() - started_ms_;
      if (due_ms > elapsed) return timer_.once(std::chrono::milliseconds(due_ms - elapsed), next);
    }
    runtime::Reactor::current()->defer(next);
  }

  void fail(Status why) {
    if (!began_) return answer(why);
    began_ = false;
    auto self = shared_from_this();
    log_->abandon_compacted_ledger([self, why](Status) { self->answer(why); });
  }

  void answer(Result<CompactionOutcome> r) {
    if (r) r->duration_ms = common::monotonic_ms() - started_ms_;
    auto done = std::move(done_);
    if (done) done(std::move(r));
  }

  std::shared_ptr<ledger::ManagedLedger> log_;
  const CompactionCodec& codec_;
  const CompactionSettings settings_;
  std::weak_ptr<bool> alive_;
  ledger::Callback<Result<CompactionOutcome>> done_;
  runtime::Timer timer_;
  const int64_t started_ms_;
  CompactionOutcome outcome_;
  std::unordered_map<std::string, Latest> latest_;
  Position read_after_{0, storage::kNoEntry};
  bool began_ = false;    // a compacted ledger is being written
  bool writing_ = false;  // phase two
  size_t pending_ = 0;
  Status failure_;
  bool reported_unreadable_ = false;
};

}  // namespace

void run_compaction(std::shared_ptr<ledger::ManagedLedger> log, const CompactionCodec& codec,
                    CompactionSettings settings, std::weak_ptr<bool> alive,
                    ledger::Callback<Result<CompactionOutcome>> done) {
  auto pass = std::make_shared<CompactionPass>(std::move(log), codec, settings, std::move(alive), std::move(done));
  pass->start();
}

std::string_view compaction_state_name(CompactionState s) {
  switch (s) {
    case CompactionState::kRunning:
      return "RUNNING";
    case CompactionState::kSuccess:
      return "SUCCESS";
    case CompactionState::kError:
      return "ERROR";
    case CompactionState::kNotRun:
      break;
  }
  return "NOT_RUN";
}

bool CompactionBoard::try_start(const std::string& topic) {
  std::lock_guard lock(mu_);
  CompactionReport& r = reports_[topic];
  if (r.state == CompactionState::kRunning) return false;
  r.state = CompactionState::kRunning;
  r.started_ms = common::wall_clock_ms();
  return true;
}

void CompactionBoard::finish(const std::string& topic, const Result<CompactionOutcome>& outcome) {
  std::lock_guard lock(mu_);
  CompactionReport& r = reports_[topic];
  if (outcome) {
    r.state = CompactionState::kSuccess;
    r.last_error.clear();
    r.last = *outcome;
  } else {
    r.state = CompactionState::kError;
    r.last_error = outcome.status().message();
  }
}

CompactionReport CompactionBoard::report(const std::string& topic) const {
  std::lock_guard lock(mu_);
  auto it = reports_.find(topic);
  return it == reports_.end() ? CompactionReport{} : it->second;
}

void CompactionBoard::forget(const std::string& topic) {
  std::lock_guard lock(mu_);
  reports_.erase(topic);
}

}  // namespace magnetar::broker
