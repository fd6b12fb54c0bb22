// StoreState: opening the database, applying WriteOps to the open group,
// reading through it, committing it as one batch, and snapshots of the whole
// state.
#include "metadata/store_state.h"

#include <leveldb/db.h>
#include <leveldb/write_batch.h>

#include <cassert>

#include "common/logging.h"
#include "metadata/records_generated.h"

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

StoreState::StoreState(Options options) : options_(std::move(options)) {
  auto& reg = common::MetricsRegistry::global();
  reads_ = &reg.counter("magnetar_metadata_reads_total", "Metadata store reads (get and list)");
  write_batches_ = &reg.counter("magnetar_metadata_write_batches_total",
                                "LevelDB write batches (one fdatasync each when writes are synced)");
}

StoreState::~StoreState() = default;

Status StoreState::open() {
  leveldb::Options o;
  o.create_if_missing = true;
  if (options_.env != nullptr) o.env = options_.env;
  leveldb::DB* raw = nullptr;
  leveldb::Status opened = leveldb::DB::Open(o, options_.path, &raw);
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(opened, "open metadata at " + options_.path));
  db_.reset(raw);
  Status st = read_info();
  if (!st.is_ok()) db_.reset();
  return st;
}

void StoreState::close() {
  db_.reset();
  last_session_ = 0;
  open_sessions_.clear();
  ephemeral_keys_.clear();
  group_ = Group{};
}

Status StoreState::read_info() {
  std::string info;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), kInfoKey, &info);
  if (s.IsNotFound()) return Status::ok();
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(s, "read metadata store info"));
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(info.data()), info.size());
  if (!v.VerifyBuffer<fb::StoreInfo>(nullptr)) return Status::corruption("metadata store info fails verification");
  last_session_ = flatbuffers::GetRoot<fb::StoreInfo>(info.data())->last_session();
  return Status::ok();
}

Status StoreState::remove_stale_ephemerals() {
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

std::string StoreState::encode_info(SessionId last_session) const {
  flatbuffers::FlatBufferBuilder b(64);
  fb::StoreInfoBuilder info(b);
  info.add_last_session(last_session);
  b.Finish(info.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Status StoreState::write_batch(leveldb::WriteBatch& batch, std::string_view what) {
  leveldb::WriteOptions wo;
  wo.sync = options_.sync_writes;
  write_batches_->inc();
  return from_leveldb(db_->Write(wo, &batch), what);
}

// --- reads: the committed state, then the open group over it ---

Status StoreState::read_committed_node(const std::string& key, Stat& stat, std::string* value) {
  std::string raw;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), node_key(key), &raw);
  if (s.IsNotFound()) return Status::not_found("'" + key + "' does not exist");
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(s, "read " + key));
  return decode_node(raw, stat, value);
}

Status StoreState::read_node(const std::string& key, Stat& stat, std::string* value) {
  auto staged = group_.nodes.find(key);
  if (staged == group_.nodes.end()) return read_committed_node(key, stat, value);
  if (!staged->second.stat) return Status::not_found("'" + key + "' does not exist");
  stat = *staged->second.stat;
  if (value) *value = staged->second.value;
  return Status::ok();
}

Result<Record> StoreState::read_record(const std::string& key) {
  reads_->inc();
  Record r;
  r.key = key;
  MAGNETAR_RETURN_IF_ERROR(validate_key(key));
  MAGNETAR_RETURN_IF_ERROR(read_node(key, r.stat, &r.value));
  return r;
}

Result<std::vector<std::string>> StoreState::read_children(const std::string& key) {
  reads_->inc();
  if (key != "/") MAGNETAR_RETURN_IF_ERROR(validate_key(key));
  const std::string prefix = key == "/" ? "/" : key + "/";
  // Keys sort so that a child's own key and its subtree are contiguous apart
  // from siblings that extend its name ("b" < "b-x" < "b/c"): collect into a
  // set, and jump over each subtree once a live key shows the child exists.
  // A key the group deleted does not count: step to the next one instead.
  const std::string start = node_key(prefix);
  std::set<std::string> children;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->Seek(start);
  while (it->Valid() && it->key().starts_with(start)) {
    std::string_view stored(it->key().data() + 1, it->key().size() - 1);
    auto staged = group_.nodes.empty() ? group_.nodes.end() : group_.nodes.find(stored);
    if (staged != group_.nodes.end() && !staged->second.stat) {
      it->Next();
      continue;
    }
    std::string_view rest = stored.substr(prefix.size());
    size_t slash = rest.find('/');
    std::string child(rest.substr(0, slash));
    children.insert(child);
    if (slash == std::string_view::npos) {
      it->Next();
    } else {
      it->Seek(start + child + "0");  // '0' sorts right after '/'
    }
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "list " + key));
  for (auto s = group_.nodes.lower_bound(prefix); s != group_.nodes.end() && s->first.starts_with(prefix); ++s) {
    if (!s->second.stat) continue;
    std::string_view rest = std::string_view(s->first).substr(prefix.size());
    children.emplace(rest.substr(0, rest.find('/')));
  }
  return std::vector<std::string>(children.begin(), children.end());
}

bool StoreState::session_open(SessionId session) const {
  if (group_.closed.count(session) != 0) return false;
  return open_sessions_.count(session) != 0 || group_.opened.count(session) != 0;
}

SessionId StoreState::last_session() const {
  return group_.opened.empty() ? last_session_ : *group_.opened.rbegin();
}

std::vector<std::string> StoreState::keys_of_session(SessionId session) const {
  std::vector<std::string> keys;
  auto owned = ephemeral_keys_.find(session);
  if (owned != ephemeral_keys_.end()) {
    for (const auto& key : owned->second) {
      if (group_.nodes.count(key) == 0) keys.push_back(key);  // staged keys are counted below
    }
  }
  for (const auto& [key, node] : group_.nodes) {
    if (node.stat && node.stat->session == session) keys.push_back(key);
  }
  return keys;
}

// --- writes: apply() stages, commit() writes ---

StoreState::StagedNode& StoreState::stage(const std::string& key, bool exists, const Stat& current) {
  auto [it, inserted] = group_.nodes.try_emplace(key);
  if (inserted) {
    it->second.committed = exists;
    it->second.committed_session = exists ? current.session : 0;
  }
  return it->second;
}

StoreState::Applied StoreState::apply(std::string_view encoded_op) {
  Applied applied;
  auto op = decode_write_op(encoded_op);
  if (!op.is_ok()) {
    applied.result = op.status();
    return applied;
  }
  switch (op->kind) {
    case WriteOp::Kind::kPut:
      applied.result = apply_put(*op, applied);
      break;
    case WriteOp::Kind::kDelete:
      applied.result = apply_delete(*op, applied);
      break;
    case WriteOp::Kind::kOpenSession: {
      Status st = apply_open_session(applied);
      applied.result = st.is_ok() ? Result<Stat>(Stat{}) : Result<Stat>(st);
      break;
    }
    case WriteOp::Kind::kCloseSession: {
      Status st = apply_close_session(*op, applied);
      applied.result = st.is_ok() ? Result<Stat>(Stat{}) : Result<Stat>(st);
      break;
    }
    case WriteOp::Kind::kImport:
      // The replicated member restores it whole (cluster/store_machine.h); it never joins a group.
      applied.result = Status::invalid_argument("an import replaces the whole state and is not applied as a write");
      break;
  }
  return applied;
}

Result<Stat> StoreState::apply_put(const WriteOp& op, Applied& applied) {
  MAGNETAR_RETURN_IF_ERROR(validate_key(op.key));
  if (op.key == "/") return Status::invalid_argument("the root '/' holds no value");
  if (op.session != 0 && !session_open(op.session)) {
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
  StagedNode& node = stage(op.key, exists, current);
  node.stat = next;
  node.value = op.value;
  applied.events.push_back({exists ? EventType::kModified : EventType::kCreated, op.key, next.version});
  return next;
}

Result<Stat> StoreState::apply_delete(const WriteOp& op, Applied& applied) {
  MAGNETAR_RETURN_IF_ERROR(validate_key(op.key));
  Stat current;
  MAGNETAR_RETURN_IF_ERROR(read_node(op.key, current, nullptr));
  MAGNETAR_RETURN_IF_ERROR(check_expected(op.key, true, current, op.expected_version));
  if (op.expected_version == kMustNotExist) return Status::already_exists("'" + op.key + "' exists");
  StagedNode& node = stage(op.key, true, current);
  node.stat.reset();
  node.value.clear();
  applied.events.push_back({EventType::kDeleted, op.key, 0});
  return current;
}

Status StoreState::apply_open_session(Applied& applied) {
  SessionId id = last_session() + 1;
  group_.opened.insert(id);
  applied.session = id;
  return Status::ok();
}

Status StoreState::apply_close_session(const WriteOp& op, Applied& applied) {
  if (!session_open(op.session)) {
    return Status::not_found("session " + std::to_string(op.session) + " is not open");
  }
  std::vector<std::pair<std::string, Stat>> owned;
  for (auto& key : keys_of_session(op.session)) {
    Stat current;
    MAGNETAR_RETURN_IF_ERROR(read_node(key, current, nullptr));  // before anything is staged
    owned.emplace_back(std::move(key), current);
  }
  for (const auto& [key, current] : owned) {
    StagedNode& node = stage(key, true, current);
    node.stat.reset();
    node.value.clear();
    applied.events.push_back({EventType::kDeleted, key, 0});
  }
  group_.closed.insert(op.session);
  return Status::ok();
}

Status StoreState::commit() {
  if (group_.empty()) return Status::ok();
  Group group = std::move(group_);
  group_ = Group{};
  leveldb::WriteBatch batch;
  for (const auto& [key, node] : group.nodes) {
    if (node.stat) {
      batch.Put(node_key(key), encode_node(*node.stat, node.value));
    } else if (node.committed) {
      batch.Delete(node_key(key));
    }
  }
  const SessionId last = group.opened.empty() ? last_session_ : *group.opened.rbegin();
  if (last != last_session_) batch.Put(kInfoKey, encode_info(last));
  MAGNETAR_RETURN_IF_ERROR(write_batch(batch, "write a group of metadata changes"));

  for (const auto& [key, node] : group.nodes) {
    if (node.committed_session != 0) {
      auto owned = ephemeral_keys_.find(node.committed_session);
      if (owned != ephemeral_keys_.end()) owned->second.erase(key);
    }
    if (node.stat && node.stat->session != 0) ephemeral_keys_[node.stat->session].insert(key);
  }
  last_session_ = last;
  open_sessions_.insert(group.opened.begin(), group.opened.end());
  for (SessionId s : group.closed) {
    open_sessions_.erase(s);
    ephemeral_keys_.erase(s);
  }
  return Status::ok();
}

// --- snapshots: the whole committed state in one record ---

Result<std::string> StoreState::snapshot() {
  assert(group_.empty());
  flatbuffers::FlatBufferBuilder b(4096);
  std::vector<flatbuffers::Offset<fb::SnapshotKey>> keys;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(std::string(1, kNodePrefix)); it->Valid() && it->key()[0] == kNodePrefix; it->Next()) {
    auto key = b.CreateString(it->key().data() + 1, it->key().size() - 1);
    auto node = b.CreateVector(reinterpret_cast<const uint8_t*>(it->value().data()), it->value().size());
    keys.push_back(fb::CreateSnapshotKey(b, key, node));
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "scan metadata for a snapshot"));
  std::vector<uint64_t> sessions(open_sessions_.begin(), open_sessions_.end());
  auto sessions_offset = b.CreateVector(sessions);
  auto keys_offset = b.CreateVector(keys);
  b.Finish(fb::CreateSnapshot(b, 1, last_session_, sessions_offset, keys_offset));
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<std::vector<Event>> StoreState::restore(std::string_view bytes) {
  assert(group_.empty());
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<fb::Snapshot>(nullptr)) return Status::corruption("metadata snapshot fails verification");
  const fb::Snapshot* snap = flatbuffers::GetRoot<fb::Snapshot>(bytes.data());

  // The new key space, checked whole before anything changes.
  std::map<std::string, std::string> next;  // key -> Node record
  std::map<SessionId, std::set<std::string>> owned;
  if (snap->keys() != nullptr) {
    for (const fb::SnapshotKey* k : *snap->keys()) {
      if (k->key() == nullptr || k->node() == nullptr) return Status::corruption("metadata snapshot: a key is empty");
      std::string key = k->key()->str();
      std::string node(reinterpret_cast<const char*>(k->node()->data()), k->node()->size());
      Stat stat;
      if (!validate_key(key).is_ok() || !decode_node(node, stat, nullptr).is_ok()) {
        return Status::corruption("metadata snapshot: key '" + key + "' is not valid");
      }
      if (stat.session != 0) owned[stat.session].insert(key);
      next.emplace(std::move(key), std::move(node));
    }
  }
  std::map<std::string, std::string> now;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  for (it->Seek(std::string(1, kNodePrefix)); it->Valid() && it->key()[0] == kNodePrefix; it->Next()) {
    now.emplace(std::string(it->key().data() + 1, it->key().size() - 1), it->value().ToString());
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "scan metadata to restore a snapshot"));

  // Only what differs is written, and reported, in key order.
  leveldb::WriteBatch batch;
  std::map<std::string, Event> changes;
  for (const auto& [key, node] : now) {
    if (next.count(key) == 0) {
      batch.Delete(node_key(key));
      changes.emplace(key, Event{EventType::kDeleted, key, 0});
    }
  }
  for (const auto& [key, node] : next) {
    auto old = now.find(key);
    if (old != now.end() && old->second == node) continue;
    Stat stat;
    (void)decode_node(node, stat, nullptr);  // checked above
    batch.Put(node_key(key), node);
    changes.emplace(key, Event{old == now.end() ? EventType::kCreated : EventType::kModified, key, stat.version});
  }
  batch.Put(kInfoKey, encode_info(snap->last_session()));
  MAGNETAR_RETURN_IF_ERROR(write_batch(batch, "restore a metadata snapshot"));

  last_session_ = snap->last_session();
  open_sessions_.clear();
  if (snap->open_sessions() != nullptr) {
    open_sessions_.insert(snap->open_sessions()->begin(), snap->open_sessions()->end());
  }
  ephemeral_keys_ = std::move(owned);
  std::vector<Event> events;
  events.reserve(changes.size());
  for (auto& [key, event] : changes) events.push_back(std::move(event));
  return events;
}

}  // namespace magnetar::metadata
