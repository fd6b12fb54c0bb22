#include "cluster/raft_store.h"

#include <memory>
#include <utility>

#include "common/clock.h"

namespace magnetar::cluster {

using common::ErrorCode;
using common::Result;
using common::Status;
using metadata::WriteOp;

RaftStore::RaftStore(Consensus& consensus, StoreMachine& machine) : consensus_(consensus), machine_(machine) {}

Status RaftStore::store_error(const Status& st, std::string_view what) const {
  switch (st.code()) {
    case ErrorCode::kFailedPrecondition: {
      // The consensus's "not the leader": for a store caller FailedPrecondition
      // means a version mismatch, so say Unavailable and where the leader is.
      auto leader = consensus_.leader();
      if (!leader) return Status::unavailable(std::string(what) + ": not the leader, and no leader is known yet");
      return Status::unavailable(std::string(what) + ": not the leader; the leader is server " +
                                 std::to_string(leader->id) + " at " + leader->address);
    }
    case ErrorCode::kFenced:
      return Status::fenced(std::string(what) +
                            ": leadership was lost before it completed; it may or may not be applied");
    default:
      return st;
  }
}

void RaftStore::propose(const WriteOp& op, Proposed done) {
  const char* what = op.kind == WriteOp::Kind::kPut      ? "put"
                     : op.kind == WriteOp::Kind::kDelete ? "delete"
                     : op.kind == WriteOp::Kind::kOpenSession ? "open session"
                                                              : "close session";
  machine_.begin_proposal();
  Status st = consensus_.propose(metadata::encode_write_op(op), [this, what, done](Result<LogIndex> index) {
    std::optional<Outcome> outcome = machine_.end_proposal(index.is_ok() ? std::optional(*index) : std::nullopt);
    if (!index.is_ok()) {
      done(store_error(index.status(), what));
      return;
    }
    if (!outcome) {
      done(Status::internal(std::string(what) + ": no outcome recorded for log entry " + std::to_string(*index)));
      return;
    }
    done(std::move(*outcome));
  });
  if (!st.is_ok()) {
    machine_.end_proposal(std::nullopt);
    done(store_error(st, what));
  }
}

void RaftStore::after_barrier(std::function<void()> read, std::function<void(Status)> failed) {
  Status st = consensus_.barrier([this, read, failed](Result<LogIndex> index) {
    if (!index.is_ok()) {
      // A read changes nothing: an unknown outcome is simply no answer.
      Status why = store_error(index.status(), "read");
      failed(why.code() == ErrorCode::kFenced ? Status::unavailable(why.message()) : why);
      return;
    }
    read();
  });
  if (!st.is_ok()) failed(store_error(st, "read"));
}

void RaftStore::get(std::string key, metadata::Callback<Result<metadata::Record>> done) {
  Status valid = metadata::validate_key(key);
  if (!valid.is_ok()) return done(valid);
  after_barrier([this, key, done]() { done(machine_.state().read_record(key)); },
                [done](Status st) { done(st); });
}

void RaftStore::list_children(std::string key, metadata::Callback<Result<std::vector<std::string>>> done) {
  if (key != "/") {
    Status valid = metadata::validate_key(key);
    if (!valid.is_ok()) return done(valid);
  }
  after_barrier([this, key, done]() { done(machine_.state().read_children(key)); },
                [done](Status st) { done(st); });
}

void RaftStore::put(std::string key, std::string value, metadata::PutOptions options,
                    metadata::Callback<Result<metadata::Stat>> done) {
  Status valid = metadata::validate_key(key);
  if (!valid.is_ok()) return done(valid);
  WriteOp op{WriteOp::Kind::kPut, std::move(key), std::move(value), options.expected_version, options.session,
             common::wall_clock_ms()};
  propose(op, [done](Result<Outcome> outcome) { done(outcome.is_ok() ? outcome->result : outcome.status()); });
}

void RaftStore::del(std::string key, int64_t expected_version, metadata::StatusCallback done) {
  Status valid = metadata::validate_key(key);
  if (!valid.is_ok()) return done(valid);
  WriteOp op{WriteOp::Kind::kDelete, std::move(key), {}, expected_version, 0, common::wall_clock_ms()};
  propose(op, [done](Result<Outcome> outcome) {
    if (!outcome.is_ok()) return done(outcome.status());
    done(outcome->result.is_ok() ? Status::ok() : outcome->result.status());
  });
}

void RaftStore::open_session(metadata::Callback<Result<metadata::SessionId>> done) {
  WriteOp op{WriteOp::Kind::kOpenSession, {}, {}, metadata::kAnyVersion, 0, common::wall_clock_ms()};
  propose(op, [done](Result<Outcome> outcome) {
    if (!outcome.is_ok()) return done(outcome.status());
    if (!outcome->result.is_ok()) return done(outcome->result.status());
    done(outcome->session);
  });
}

void RaftStore::close_session(metadata::SessionId session, metadata::StatusCallback done) {
  WriteOp op{WriteOp::Kind::kCloseSession, {}, {}, metadata::kAnyVersion, session, common::wall_clock_ms()};
  propose(op, [done](Result<Outcome> outcome) {
    if (!outcome.is_ok()) return done(outcome.status());
    done(outcome->result.is_ok() ? Status::ok() : outcome->result.status());
  });
}

Result<metadata::WatchId> RaftStore::watch(std::string prefix, metadata::WatchCallback fn) {
  return machine_.watchers().watch(std::move(prefix), std::move(fn));
}

void RaftStore::unwatch(metadata::WatchId id) { machine_.watchers().unwatch(id); }

}  // namespace magnetar::cluster
