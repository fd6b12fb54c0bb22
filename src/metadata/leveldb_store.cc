// LevelDbStore: the calls, their queue and the group-commit loop. How a
// WriteOp changes the state is in leveldb_store_apply.cc.
#include "metadata/leveldb_store.h"

#include <leveldb/db.h>

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

LevelDbStore::LevelDbStore(Options options) : options_(std::move(options)) {
  auto& reg = common::MetricsRegistry::global();
  writes_ = &reg.counter("magnetar_metadata_writes_total", "Metadata store writes applied");
  failed_writes_ = &reg.counter("magnetar_metadata_write_failures_total",
                                "Metadata store writes refused (version mismatch, missing key, I/O)");
  reads_ = &reg.counter("magnetar_metadata_reads_total", "Metadata store reads (get and list)");
  write_batches_ = &reg.counter("magnetar_metadata_write_batches_total",
                                "LevelDB write batches (one fdatasync each when writes are synced)");
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
    db_.reset();
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
  db_.reset();
  open_sessions_.clear();
  ephemeral_keys_.clear();
  group_ = Group{};
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
        out.applied = apply(call.arg);
        break;
      case Call::Kind::kGet:
        out.saw_group = !group_.empty();
        out.record = read_record(call.arg);
        break;
      case Call::Kind::kList:
        out.saw_group = !group_.empty();
        out.children = read_children(call.arg);
        break;
    }
  }

  Status committed = commit();
  if (!committed.is_ok()) {
    MLOG_WARN("metadata: a group of {} calls was not written: {}", calls.size(), committed.to_string());
    for (size_t i = 0; i < calls.size(); ++i) {
      Outcome& out = outcomes[i];
      if (calls[i].kind == Call::Kind::kWrite) {
        out.applied.result = committed;
        out.applied.session = 0;
        out.applied.events.clear();
      } else if (out.saw_group) {  // it saw changes that never happened
        if (calls[i].kind == Call::Kind::kGet) out.record = read_record(calls[i].arg);
        if (calls[i].kind == Call::Kind::kList) out.children = read_children(calls[i].arg);
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
        notify(out.applied.events);
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

void LevelDbStore::deliver(runtime::Reactor* home, std::function<void()> fn) {
  if (home == nullptr) {
    fn();
    return;
  }
  // A reactor that is stopping takes no more work; the answer has no one to
  // go to then.
  home->post_or_wait(runtime::Task(std::move(fn)));
}

void LevelDbStore::notify(const std::vector<Event>& events) {
  if (events.empty()) return;
  std::vector<std::pair<Watcher, Event>> due;
  {
    std::lock_guard lock(watch_mu_);
    for (const auto& e : events) {
      for (const auto& [id, w] : watchers_) {
        if (e.key.compare(0, w.prefix.size(), w.prefix) == 0) due.emplace_back(w, e);
      }
    }
  }
  for (auto& [w, e] : due) {
    deliver(w.home, [fn = w.fn, e = e]() { fn(e); });
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
  if (prefix.empty() || prefix.front() != '/') {
    return Status::invalid_argument("watch prefix '" + prefix + "' must start with '/'");
  }
  std::lock_guard lock(watch_mu_);
  WatchId id = next_watch_++;
  watchers_[id] = Watcher{std::move(prefix), std::move(fn), runtime::Reactor::current()};
  return id;
}

void LevelDbStore::unwatch(WatchId id) {
  std::lock_guard lock(watch_mu_);
  watchers_.erase(id);
}

}  // namespace magnetar::metadata
