// LevelDbStore: the calls, their queue and the group-commit loop. How a
// WriteOp changes the state is in store_state.cc.
#include "metadata/leveldb_store.h"

#include <future>

#include "common/clock.h"
#include "common/logging.h"
#include "runtime/reactor.h"

namespace magnetar::metadata {

using common::Result;
using common::Status;

namespace {

std::vector<double> group_bounds() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

}  // namespace

LevelDbStore::LevelDbStore(Options options)
    : options_(std::move(options)), state_(StoreState::Options{options_.path, options_.sync_writes, options_.env}) {
  auto& reg = common::MetricsRegistry::global();
  writes_ = &reg.counter("magnetar_metadata_writes_total", "Metadata store writes applied");
  failed_writes_ = &reg.counter("magnetar_metadata_write_failures_total",
                                "Metadata store writes refused (version mismatch, missing key, I/O)");
  write_latency_ = &reg.histogram("magnetar_metadata_write_latency_seconds",
                                  "Time from a metadata write's call to its durable answer, queueing included",
                                  common::Histogram::latency_bounds());
  group_calls_ = &reg.histogram("magnetar_metadata_group_calls", "Calls run together and committed as one batch",
                                group_bounds());
}

LevelDbStore::~LevelDbStore() { stop(); }

LevelDbStore::Call::Call(Kind kind, std::string arg)
    : kind(kind), arg(std::move(arg)), home(runtime::Reactor::current()) {}

Status LevelDbStore::start() {
  if (thread_) return Status::failed_precondition("the metadata store starts once");
  thread_ = std::make_unique<runtime::WorkerThread>("metadata", 16);
  std::promise<Status> opened;
  auto fut = opened.get_future();
  Status posted = thread_->post([this, &opened]() { opened.set_value(open_db()); });
  Status st = posted.is_ok() ? fut.get() : posted;
  if (!st.is_ok()) {
    thread_->stop();
    state_.close();
    return st;
  }
  running_.store(true);
  MLOG_DEBUG("metadata store open at {}", options_.path);
  return Status::ok();
}

void LevelDbStore::stop() {
  if (!thread_) return;
  running_.store(false);
  thread_->stop();  // drains every queued call first
  state_.close();
}

Status LevelDbStore::open_db() {
  MAGNETAR_RETURN_IF_ERROR(state_.open());
  Status st = state_.remove_stale_ephemerals();
  if (!st.is_ok()) state_.close();
  return st;
}

Status LevelDbStore::submit(Call call) {
  if (!running_.load()) return Status::unavailable("the metadata store is not running");
  call.queued = std::chrono::steady_clock::now();
  std::lock_guard lock(queue_mu_);
  if (queue_.size() >= options_.queue_capacity) {
    return Status::resource_exhausted("the metadata store has " + std::to_string(queue_.size()) +
                                      " calls waiting");
  }
  if (!draining_) {
    // Posted under queue_mu_: drain() cannot have seen the queue empty and
    // quit between this post and the push below. Fails once stop() began.
    MAGNETAR_RETURN_IF_ERROR(thread_->post([this]() { drain(); }));
    draining_ = true;
  }
  queue_.push_back(std::move(call));
  return Status::ok();
}

void LevelDbStore::drain() {
  for (;;) {
    std::vector<Call> calls;
    {
      std::lock_guard lock(queue_mu_);
      size_t bytes = 0;
      while (!queue_.empty() && calls.size() < options_.max_group_calls) {
        size_t size = queue_.front().arg.size();
        if (!calls.empty() && bytes + size > options_.max_group_bytes) break;
        bytes += size;
        calls.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      if (calls.empty()) {
        draining_ = false;
        return;
      }
    }
    run_group(calls);
  }
}

void LevelDbStore::run_group(std::vector<Call>& calls) {
  // What each call will be answered, filled in queue order.
  struct Outcome {
    Applied applied;
    Result<Record> record = Status::internal("not read");
    Result<std::vector<std::string>> children = Status::internal("not read");
    bool saw_group = false;  // a read made while the group held changes
  };
  std::vector<Outcome> outcomes(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    Outcome& out = outcomes[i];
    switch (call.kind) {
      case Call::Kind::kWrite:
        out.applied = state_.apply(call.arg);
        break;
      case Call::Kind::kGet:
        out.saw_group = state_.has_pending();
        out.record = state_.read_record(call.arg);
        break;
      case Call::Kind::kList:
        out.saw_group = state_.has_pending();
        out.children = state_.read_children(call.arg);
        break;
    }
  }

  Status committed = state_.commit();
  if (!committed.is_ok()) {
    MLOG_WARN("metadata: a group of {} calls was not written: {}", calls.size(), committed.to_string());
    for (size_t i = 0; i < calls.size(); ++i) {
      Outcome& out = outcomes[i];
      if (calls[i].kind == Call::Kind::kWrite) {
        out.applied.result = committed;
        out.applied.session = 0;
        out.applied.events.clear();
      } else if (out.saw_group) {  // it saw changes that never happened
        if (calls[i].kind == Call::Kind::kGet) out.record = state_.read_record(calls[i].arg);
        if (calls[i].kind == Call::Kind::kList) out.children = state_.read_children(calls[i].arg);
      }
    }
  }

  group_calls_->observe(static_cast<double>(calls.size()));
  auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = calls[i];
    Outcome& out = outcomes[i];
    switch (call.kind) {
      case Call::Kind::kWrite:
        (out.applied.result.is_ok() ? writes_ : failed_writes_)->inc();
        write_latency_->observe(std::chrono::duration<double>(now - call.queued).count());
        watchers_.notify(out.applied.events);
        deliver(call.home, [fn = std::move(call.written), applied = std::move(out.applied)]() { fn(applied); });
        break;
      case Call::Kind::kGet:
        deliver(call.home, [fn = std::move(call.got), r = std::move(out.record)]() { fn(r); });
        break;
      case Call::Kind::kList:
        deliver(call.home, [fn = std::move(call.listed), r = std::move(out.children)]() { fn(r); });
        break;
    }
  }
}

void LevelDbStore::get(std::string key, Callback<Result<Record>> done) {
  Call call(Call::Kind::kGet, std::move(key));
  call.got = done;
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

void LevelDbStore::list_children(std::string key, Callback<Result<std::vector<std::string>>> done) {
  Call call(Call::Kind::kList, std::move(key));
  call.listed = done;
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

void LevelDbStore::put(std::string key, std::string value, PutOptions options, Callback<Result<Stat>> done) {
  WriteOp op{WriteOp::Kind::kPut, std::move(key), std::move(value), options.expected_version, options.session,
             common::wall_clock_ms()};
  Call call(Call::Kind::kWrite, encode_write_op(op));
  call.written = [done](const Applied& applied) { done(applied.result); };
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

void LevelDbStore::del(std::string key, int64_t expected_version, StatusCallback done) {
  WriteOp op{WriteOp::Kind::kDelete, std::move(key), {}, expected_version, 0, common::wall_clock_ms()};
  Call call(Call::Kind::kWrite, encode_write_op(op));
  call.written = [done](const Applied& applied) {
    done(applied.result.is_ok() ? Status::ok() : applied.result.status());
  };
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

void LevelDbStore::open_session(Callback<Result<SessionId>> done) {
  WriteOp op{WriteOp::Kind::kOpenSession, {}, {}, kAnyVersion, 0, common::wall_clock_ms()};
  Call call(Call::Kind::kWrite, encode_write_op(op));
  call.written = [done](const Applied& applied) {
    done(applied.result.is_ok() ? Result<SessionId>(applied.session) : Result<SessionId>(applied.result.status()));
  };
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

void LevelDbStore::close_session(SessionId session, StatusCallback done) {
  WriteOp op{WriteOp::Kind::kCloseSession, {}, {}, kAnyVersion, session, common::wall_clock_ms()};
  Call call(Call::Kind::kWrite, encode_write_op(op));
  call.written = [done](const Applied& applied) {
    done(applied.result.is_ok() ? Status::ok() : applied.result.status());
  };
  Status st = submit(std::move(call));
  if (!st.is_ok()) done(st);
}

Result<WatchId> LevelDbStore::watch(std::string prefix, WatchCallback fn) {
  return watchers_.watch(std::move(prefix), std::move(fn));
}

void LevelDbStore::unwatch(WatchId id) { watchers_.unwatch(id); }

}  // namespace magnetar::metadata
