#include "metadata/leveldb_store.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <chrono>
#include <future>

#include "common/clock.h"
#include "common/logging.h"
#include "metadata/records_generated.h"
#include "runtime/reactor.h"

namespace magnetar::metadata {

using common::Result;
using common::Status;

namespace {

const std::string kInfoKey = "i";
constexpr char kNodePrefix = 'd';

std::string node_key(std::string_view key) {
  std::string k;
  k.reserve(key.size() + 1);
  k += kNodePrefix;
  k += key;
  return k;
}

Status from_leveldb(const leveldb::Status& s, std::string_view what) {
  if (s.ok()) return Status::ok();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsNotFound()) return Status::not_found(msg);
  if (s.IsCorruption()) return Status::corruption(msg);
  if (s.IsIOError()) return Status::io_error(msg);
  if (s.IsInvalidArgument()) return Status::invalid_argument(msg);
  return Status::internal(msg);
}

Status check_expected(const std::string& key, bool exists, const Stat& current, int64_t expected) {
  if (expected < kAnyVersion) {
    return Status::invalid_argument("expected version " + std::to_string(expected) + " is not valid");
  }
  if (expected == kMustNotExist && exists) return Status::already_exists("'" + key + "' already exists");
  if (expected > 0) {
    if (!exists) return Status::not_found("'" + key + "' does not exist");
    if (current.version != expected) {
      return Status::failed_precondition("'" + key + "' is at version " + std::to_string(current.version) +
                                         ", not the expected " + std::to_string(expected));
    }
  }
  return Status::ok();
}

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
                                  "Time to apply one metadata write, including its fsync",
                                  common::Histogram::latency_bounds());
}

LevelDbStore::~LevelDbStore() { stop(); }

Status LevelDbStore::start() {
  if (thread_) return Status::failed_precondition("the metadata store starts once");
  thread_ = std::make_unique<runtime::WorkerThread>("metadata", options_.queue_capacity);
  std::promise<Status> opened;
  auto fut = opened.get_future();
  Status posted = thread_->post([this, &opened]() {
    leveldb::Options o;
    o.create_if_missing = true;
    leveldb::DB* raw = nullptr;
    Status st = from_leveldb(leveldb::DB::Open(o, options_.path, &raw), "open metadata at " + options_.path);
    if (st.is_ok()) {
      db_.reset(raw);
      st = remove_stale_ephemerals();
    }
    opened.set_value(std::move(st));
  });
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
  thread_->stop();  // runs every queued call first
  db_.reset();
  open_sessions_.clear();
  ephemeral_keys_.clear();
}

Status LevelDbStore::submit(std::function<void()> work) {
  if (!running_.load()) return Status::unavailable("the metadata store is not running");
  return thread_->post(std::move(work));
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

Status LevelDbStore::remove_stale_ephemerals() {
  std::string info;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), kInfoKey, &info);
  if (s.ok()) {
    flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(info.data()), info.size());
    if (!v.VerifyBuffer<fb::StoreInfo>(nullptr)) return Status::corruption("metadata store info fails verification");
    last_session_ = flatbuffers::GetRoot<fb::StoreInfo>(info.data())->last_session();
  } else if (!s.IsNotFound()) {
    return from_leveldb(s, "read metadata store info");
  }
  leveldb::WriteBatch batch;
  size_t removed = 0;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(std::string(1, kNodePrefix)); it->Valid() && it->key()[0] == kNodePrefix; it->Next()) {
    Stat stat;
    MAGNETAR_RETURN_IF_ERROR(decode_node(std::string_view(it->value().data(), it->value().size()), stat, nullptr));
    if (stat.ephemeral()) {
      batch.Delete(it->key());
      ++removed;
    }
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "scan metadata"));
  if (removed == 0) return Status::ok();
  MLOG_INFO("metadata: removed {} ephemeral keys of earlier sessions", removed);
  return write_batch(batch, "remove ephemeral keys");
}

Status LevelDbStore::write_info() {
  flatbuffers::FlatBufferBuilder b(64);
  fb::StoreInfoBuilder info(b);
  info.add_last_session(last_session_);
  b.Finish(info.Finish());
  leveldb::WriteBatch batch;
  batch.Put(kInfoKey, leveldb::Slice(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize()));
  return write_batch(batch, "write metadata store info");
}

Status LevelDbStore::write_batch(leveldb::WriteBatch& batch, std::string_view what) {
  leveldb::WriteOptions wo;
  wo.sync = options_.sync_writes;
  write_batches_->inc();
  return from_leveldb(db_->Write(wo, &batch), what);
}

Status LevelDbStore::read_node(const std::string& key, Stat& stat, std::string* value) {
  std::string raw;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), node_key(key), &raw);
  if (s.IsNotFound()) return Status::not_found("'" + key + "' does not exist");
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(s, "read " + key));
  return decode_node(raw, stat, value);
}

LevelDbStore::Applied LevelDbStore::apply(std::string_view encoded_op) {
  auto started = std::chrono::steady_clock::now();
  Applied applied;
  auto op = decode_write_op(encoded_op);
  if (!op.is_ok()) {
    applied.result = op.status();
  } else {
    switch (op->kind) {
      case WriteOp::Kind::kPut:
        applied.result = apply_put(*op);
        break;
      case WriteOp::Kind::kDelete:
        applied.result = apply_delete(*op);
        break;
      case WriteOp::Kind::kOpenSession: {
        ++last_session_;
        Status st = write_info();
        if (st.is_ok()) {
          open_sessions_.insert(last_session_);
          applied.session = last_session_;
          applied.result = Stat{};
        } else {
          --last_session_;
          applied.result = st;
        }
        break;
      }
      case WriteOp::Kind::kCloseSession: {
        Status st = apply_close_session(*op);
        applied.result = st.is_ok() ? Result<Stat>(Stat{}) : Result<Stat>(st);
        break;
      }
    }
  }
  if (applied.result.is_ok()) {
    writes_->inc();
  } else {
    failed_writes_->inc();
  }
  write_latency_->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  notify(std::move(pending_events_));
  pending_events_.clear();
  return applied;
}

Result<Stat> LevelDbStore::apply_put(const WriteOp& op) {
  MAGNETAR_RETURN_IF_ERROR(validate_key(op.key));
  if (op.key == "/") return Status::invalid_argument("the root '/' holds no value");
  if (op.session != 0 && open_sessions_.count(op.session) == 0) {
    return Status::failed_precondition("session " + std::to_string(op.session) + " is not open");
  }
  Stat current;
  Status rs = read_node(op.key, current, nullptr);
  bool exists = rs.is_ok();
  if (!exists && rs.code() != common::ErrorCode::kNotFound) return rs;
  MAGNETAR_RETURN_IF_ERROR(check_expected(op.key, exists, current, op.expected_version));

  Stat next;
  next.version = exists ? current.version + 1 : 1;
  next.created_ms = exists ? current.created_ms : op.now_ms;
  next.modified_ms = op.now_ms;
  next.session = op.session;
  leveldb::WriteBatch batch;
  batch.Put(node_key(op.key), encode_node(next, op.value));
  MAGNETAR_RETURN_IF_ERROR(write_batch(batch, "write " + op.key));

  if (exists && current.session != 0 && current.session != op.session) {
    ephemeral_keys_[current.session].erase(op.key);
  }
  if (op.session != 0) ephemeral_keys_[op.session].insert(op.key);
  pending_events_.push_back({exists ? EventType::kModified : EventType::kCreated, op.key, next.version});
  return next;
}

Result<Stat> LevelDbStore::apply_delete(const WriteOp& op) {
  MAGNETAR_RETURN_IF_ERROR(validate_key(op.key));
  Stat current;
  MAGNETAR_RETURN_IF_ERROR(read_node(op.key, current, nullptr));
  MAGNETAR_RETURN_IF_ERROR(check_expected(op.key, true, current, op.expected_version));
  if (op.expected_version == kMustNotExist) return Status::already_exists("'" + op.key + "' exists");
  leveldb::WriteBatch batch;
  batch.Delete(node_key(op.key));
  MAGNETAR_RETURN_IF_ERROR(write_batch(batch, "delete " + op.key));
  if (current.session != 0) ephemeral_keys_[current.session].erase(op.key);
  pending_events_.push_back({EventType::kDeleted, op.key, 0});
  return current;
}

Status LevelDbStore::apply_close_session(const WriteOp& op) {
  if (open_sessions_.count(op.session) == 0) {
    return Status::not_found("session " + std::to_string(op.session) + " is not open");
  }
  leveldb::WriteBatch batch;
  auto owned = ephemeral_keys_.find(op.session);
  if (owned != ephemeral_keys_.end()) {
    for (const auto& key : owned->second) batch.Delete(node_key(key));
  }
  MAGNETAR_RETURN_IF_ERROR(write_batch(batch, "close session"));
  if (owned != ephemeral_keys_.end()) {
    for (const auto& key : owned->second) pending_events_.push_back({EventType::kDeleted, key, 0});
    ephemeral_keys_.erase(owned);
  }
  open_sessions_.erase(op.session);
  return Status::ok();
}

void LevelDbStore::notify(std::vector<Event> events) {
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
  auto* home = runtime::Reactor::current();
  Status st = submit([this, key, done, home]() {
    reads_->inc();
    Record r;
    r.key = key;
    Status s = validate_key(key);
    if (s.is_ok()) s = read_node(key, r.stat, &r.value);
    Result<Record> result = s.is_ok() ? Result<Record>(std::move(r)) : Result<Record>(s);
    deliver(home, [done, result]() { done(result); });
  });
  if (!st.is_ok()) done(st);
}

void LevelDbStore::put(std::string key, std::string value, PutOptions options, Callback<Result<Stat>> done) {
  auto* home = runtime::Reactor::current();
  WriteOp op{WriteOp::Kind::kPut, std::move(key), std::move(value), options.expected_version, options.session,
             common::wall_clock_ms()};
  Status st = submit([this, encoded = encode_write_op(op), done, home]() {
    Applied applied = apply(encoded);
    deliver(home, [done, result = applied.result]() { done(result); });
  });
  if (!st.is_ok()) done(st);
}

void LevelDbStore::del(std::string key, int64_t expected_version, StatusCallback done) {
  auto* home = runtime::Reactor::current();
  WriteOp op{WriteOp::Kind::kDelete, std::move(key), {}, expected_version, 0, common::wall_clock_ms()};
  Status st = submit([this, encoded = encode_write_op(op), done, home]() {
    Applied applied = apply(encoded);
    Status result = applied.result.is_ok() ? Status::ok() : applied.result.status();
    deliver(home, [done, result]() { done(result); });
  });
  if (!st.is_ok()) done(st);
}

void LevelDbStore::list_children(std::string key, Callback<Result<std::vector<std::string>>> done) {
  auto* home = runtime::Reactor::current();
  Status st = submit([this, key, done, home]() {
    reads_->inc();
    Result<std::vector<std::string>> result = Status::internal("unset");
    Status s = key == "/" ? Status::ok() : validate_key(key);
    if (!s.is_ok()) {
      result = s;
    } else {
      // Keys sort so that a child's own key and its subtree are contiguous
      // apart from siblings that extend its name ("b" < "b-x" < "b/c"):
      // collect into a set, and jump over each subtree once seen.
      std::string start = node_key(key == "/" ? "/" : key + "/");
      std::set<std::string> children;
      std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
      it->Seek(start);
      while (it->Valid() && it->key().starts_with(start)) {
        std::string_view rest(it->key().data() + start.size(), it->key().size() - start.size());
        size_t slash = rest.find('/');
        std::string child(rest.substr(0, slash));
        children.insert(child);
        if (slash == std::string_view::npos) {
          it->Next();
        } else {
          it->Seek(start + child + "0");  // '0' sorts right after '/'
        }
      }
      Status is = from_leveldb(it->status(), "list " + key);
      if (is.is_ok()) {
        result = std::vector<std::string>(children.begin(), children.end());
      } else {
        result = is;
      }
    }
    deliver(home, [done, result]() { done(result); });
  });
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

void LevelDbStore::open_session(Callback<Result<SessionId>> done) {
  auto* home = runtime::Reactor::current();
  WriteOp op{WriteOp::Kind::kOpenSession, {}, {}, kAnyVersion, 0, common::wall_clock_ms()};
  Status st = submit([this, encoded = encode_write_op(op), done, home]() {
    Applied applied = apply(encoded);
    Result<SessionId> result =
        applied.result.is_ok() ? Result<SessionId>(applied.session) : Result<SessionId>(applied.result.status());
    deliver(home, [done, result]() { done(result); });
  });
  if (!st.is_ok()) done(st);
}

void LevelDbStore::close_session(SessionId session, StatusCallback done) {
  auto* home = runtime::Reactor::current();
  WriteOp op{WriteOp::Kind::kCloseSession, {}, {}, kAnyVersion, session, common::wall_clock_ms()};
  Status st = submit([this, encoded = encode_write_op(op), done, home]() {
    Applied applied = apply(encoded);
    Status result = applied.result.is_ok() ? Status::ok() : applied.result.status();
    deliver(home, [done, result]() { done(result); });
  });
  if (!st.is_ok()) done(st);
}

}  // namespace magnetar::metadata
