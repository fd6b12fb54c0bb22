#include "storage/index.h"

#include <leveldb/iterator.h>
#include <leveldb/options.h>

namespace magnetar::storage {

using common::Result;
using common::Status;

namespace {

void put_be64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get_be64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
void put_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
bool get_varint(const char** p, const char* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = static_cast<uint8_t>(*(*p)++);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

constexpr char kCheckpointKey[] = "c";
constexpr char kDurableKey[] = "d";
constexpr char kLedgerTag = 'l';
constexpr char kRunTag = 'e';
constexpr char kSegmentRefTag = 's';

std::string ledger_key(LedgerId ledger) {
  std::string k(1, kLedgerTag);
  put_be64(&k, ledger);
  return k;
}
std::string run_prefix(LedgerId ledger) {
  std::string k(1, kRunTag);
  put_be64(&k, ledger);
  return k;
}
std::string run_key(LedgerId ledger, EntryId last) {
  std::string k = run_prefix(ledger);
  put_be64(&k, static_cast<uint64_t>(last));
  return k;
}
std::string segment_ref_key(uint64_t segment, LedgerId ledger) {
  std::string k(1, kSegmentRefTag);
  put_be64(&k, segment);
  put_be64(&k, ledger);
  return k;
}

Status from_leveldb(const leveldb::Status& s, const char* what) {
  if (s.ok()) return Status::ok();
  std::string msg = std::string("index ") + what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::corruption(std::move(msg));
  if (s.IsNotFound()) return Status::not_found(std::move(msg));
  return Status::io_error(std::move(msg));
}

struct DecodedRun {
  EntryId first = 0;
  uint64_t segment = 0;
  std::vector<EntryLocation> locations;
};

bool decode_run(const leveldb::Slice& value, DecodedRun* run) {
  const char* p = value.data();
  const char* end = p + value.size();
  if (value.size() < 8) return false;
  run->first = static_cast<EntryId>(get_be64(p));
  p += 8;
  uint64_t count = 0;
  if (!get_varint(&p, end, &run->segment) || !get_varint(&p, end, &count)) return false;
  run->locations.clear();
  run->locations.reserve(count);
  uint64_t prev_end = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t gap = 0, size = 0;
    if (!get_varint(&p, end, &gap) || !get_varint(&p, end, &size)) return false;
    EntryLocation loc{run->segment, prev_end + gap, static_cast<uint32_t>(size)};
    prev_end = loc.offset + loc.size;
    run->locations.push_back(loc);
  }
  return p == end;
}

}  // namespace

// ---- Batch ----

void Index::Batch::flush_run(LedgerId ledger, const Run& run) {
  std::string value;
  put_be64(&value, static_cast<uint64_t>(run.first));
  put_varint(&value, run.segment);
  put_varint(&value, static_cast<uint64_t>(run.last - run.first + 1));
  value += run.locations;
  batch_.Put(run_key(ledger, run.last), value);
  batch_.Put(segment_ref_key(run.segment, ledger), leveldb::Slice());
}

void Index::Batch::add_entry(LedgerId ledger, EntryId entry, const EntryLocation& loc) {
  auto it = runs_.find(ledger);
  if (it != runs_.end()) {
    Run& run = it->second;
    if (entry == run.last + 1 && loc.segment == run.segment && loc.offset >= run.end) {
      put_varint(&run.locations, loc.offset - run.end);
      put_varint(&run.locations, loc.size);
      run.last = entry;
      run.end = loc.offset + loc.size;
      return;
    }
    flush_run(ledger, run);
    runs_.erase(it);
  }
  Run run{entry, entry, loc.segment, loc.offset + loc.size, {}};
  put_varint(&run.locations, loc.offset);
  put_varint(&run.locations, loc.size);
  runs_.emplace(ledger, std::move(run));
}

void Index::Batch::put_ledger(const LedgerMeta& meta) {
  std::string value(1, meta.closed ? 1 : 0);
  put_be64(&value, static_cast<uint64_t>(meta.last_entry));
  batch_.Put(ledger_key(meta.id), value);
}

namespace {

std::string encode_point(const Checkpoint& cp) {
  std::string value;
  put_be64(&value, cp.segment);
  put_be64(&value, cp.offset);
  return value;
}

}  // namespace

void Index::Batch::set_checkpoint(const Checkpoint& cp) { batch_.Put(kCheckpointKey, encode_point(cp)); }

void Index::Batch::set_durable(const Checkpoint& cp) { batch_.Put(kDurableKey, encode_point(cp)); }

void Index::Batch::drop_segment_ref(uint64_t segment, LedgerId ledger) {
  batch_.Delete(segment_ref_key(segment, ledger));
}

// ---- Index ----

Result<std::unique_ptr<Index>> Index::open(const std::string& path, leveldb::Env* env) {
  leveldb::Options options;
  options.create_if_missing = true;
  if (env != nullptr) options.env = env;
  leveldb::DB* db = nullptr;
  leveldb::Status s = leveldb::DB::Open(options, path, &db);
  if (!s.ok()) return from_leveldb(s, "open");
  return std::unique_ptr<Index>(new Index(db));
}

Index::~Index() { delete db_; }

Status Index::write(Batch& batch, bool sync) {
  for (const auto& [ledger, run] : batch.runs_) batch.flush_run(ledger, run);
  batch.runs_.clear();
  leveldb::WriteOptions options;
  options.sync = sync;
  Status st = from_leveldb(db_->Write(options, &batch.batch_), "write");
  batch.batch_.Clear();
  return st;
}

Status Index::delete_ledger(LedgerId ledger, std::set<uint64_t>* segments) {
  leveldb::WriteBatch batch;
  batch.Delete(ledger_key(ledger));
  std::string prefix = run_prefix(ledger);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  DecodedRun run;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (decode_run(it->value(), &run)) segments->insert(run.segment);
    batch.Delete(it->key());
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "scan ledger"));
  for (uint64_t segment : *segments) batch.Delete(segment_ref_key(segment, ledger));
  return from_leveldb(db_->Write(leveldb::WriteOptions(), &batch), "delete ledger");
}

Status Index::relocate(LedgerId ledger, EntryId first, const std::vector<EntryLocation>& to,
                       const std::vector<EntryLocation>* expect, std::vector<bool>* moved) {
  if (moved != nullptr) moved->assign(to.size(), false);
  if (to.empty()) return Status::ok();
  const EntryId last = first + static_cast<EntryId>(to.size()) - 1;
  // The runs that hold any of first..last (runs are disjoint; a run's key
  // is its last entry), read whole and written back whole around the moves.
  std::map<EntryId, EntryLocation> entries;
  leveldb::WriteBatch batch;
  const std::string prefix = run_prefix(ledger);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  DecodedRun run;
  for (it->Seek(run_key(ledger, first)); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (!decode_run(it->value(), &run)) {
      return Status::corruption("index run of ledger " + std::to_string(ledger) + " is malformed");
    }
    if (run.first > last) break;
    for (size_t i = 0; i < run.locations.size(); ++i) entries[run.first + static_cast<EntryId>(i)] = run.locations[i];
    batch.Delete(it->key());
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "relocate"));
  bool any = false;
  for (size_t i = 0; i < to.size(); ++i) {
    const EntryId e = first + static_cast<EntryId>(i);
    auto at = entries.find(e);
    if (expect != nullptr && (at == entries.end() || !(at->second == (*expect)[i]))) continue;
    entries[e] = to[i];
    any = true;
    if (moved != nullptr) (*moved)[i] = true;
  }
  if (!any) return Status::ok();
  Batch rewritten;
  for (const auto& [e, loc] : entries) rewritten.add_entry(ledger, e, loc);
  for (const auto& [l, r] : rewritten.runs_) rewritten.flush_run(l, r);
  batch.Append(rewritten.batch_);
  return from_leveldb(db_->Write(leveldb::WriteOptions(), &batch), "relocate");
}

Result<std::vector<EntryLocation>> Index::lookup(LedgerId ledger, EntryId first, size_t max_entries) const {
  std::vector<EntryLocation> out;
  std::string prefix = run_prefix(ledger);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  DecodedRun run;
  EntryId next = first;
  for (it->Seek(run_key(ledger, first)); it->Valid() && it->key().starts_with(prefix) && out.size() < max_entries;
       it->Next()) {
    if (!decode_run(it->value(), &run)) {
      return Status::corruption("index run of ledger " + std::to_string(ledger) + " is malformed");
    }
    if (run.first > next) break;  // a hole
    for (size_t i = static_cast<size_t>(next - run.first); i < run.locations.size() && out.size() < max_entries;
         ++i) {
      out.push_back(run.locations[i]);
      ++next;
    }
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "lookup"));
  return out;
}

Result<EntryId> Index::last_entry(LedgerId ledger) const {
  std::string prefix = run_prefix(ledger);
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  it->Seek(run_key(ledger, UINT64_MAX));
  if (it->Valid()) {
    it->Prev();
  } else {
    it->SeekToLast();
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "last entry"));
  if (!it->Valid() || !it->key().starts_with(prefix)) return kNoEntry;
  return static_cast<EntryId>(get_be64(it->key().data() + prefix.size()));
}

Result<Checkpoint> Index::checkpoint() const {
  std::string value;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), kCheckpointKey, &value);
  if (s.IsNotFound()) return Checkpoint{};
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(s, "read checkpoint"));
  if (value.size() != 16) return Status::corruption("index checkpoint is malformed");
  return Checkpoint{get_be64(value.data()), get_be64(value.data() + 8)};
}

Result<std::optional<Checkpoint>> Index::durable() const {
  std::string value;
  leveldb::Status s = db_->Get(leveldb::ReadOptions(), kDurableKey, &value);
  if (s.IsNotFound()) return std::optional<Checkpoint>();
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(s, "read durable point"));
  if (value.size() != 16) return Status::corruption("index durable point is malformed");
  return std::optional<Checkpoint>(Checkpoint{get_be64(value.data()), get_be64(value.data() + 8)});
}

Result<uint64_t> Index::rewind(const Checkpoint& from) {
  // The ledgers with entries in `from`'s segment or a later one.
  std::set<LedgerId> ledgers;
  {
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    const std::string prefix(1, kSegmentRefTag);
    std::string start = prefix;
    put_be64(&start, from.segment);
    for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (it->key().size() != 17) return Status::corruption("index segment reference is malformed");
      ledgers.insert(get_be64(it->key().data() + 9));
    }
    MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "list segment references"));
  }
  leveldb::WriteBatch batch;
  uint64_t forgotten = 0;
  DecodedRun run;
  for (LedgerId ledger : ledgers) {
    const std::string prefix = run_prefix(ledger);
    std::set<uint64_t> kept_segments;
    std::set<uint64_t> all_segments;
    bool lost = false;
    std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      if (!decode_run(it->value(), &run)) {
        return Status::corruption("index run of ledger " + std::to_string(ledger) + " is malformed");
      }
      all_segments.insert(run.segment);
      size_t keep = run.locations.size();
      if (run.segment > from.segment) {
        keep = 0;
      } else if (run.segment == from.segment) {
        keep = 0;
        while (keep < run.locations.size() && run.locations[keep].offset < from.offset) ++keep;
      }
      if (keep == run.locations.size()) {
        kept_segments.insert(run.segment);
        continue;
      }
      lost = true;
      forgotten += run.locations.size() - keep;
      batch.Delete(it->key());
      if (keep == 0) continue;
      kept_segments.insert(run.segment);
      Batch rewritten;
      for (size_t i = 0; i < keep; ++i) {
        rewritten.add_entry(ledger, run.first + static_cast<EntryId>(i), run.locations[i]);
      }
      for (const auto& [l, r] : rewritten.runs_) rewritten.flush_run(l, r);
      batch.Append(rewritten.batch_);
    }
    MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "scan ledger"));
    for (uint64_t segment : all_segments) {
      if (kept_segments.count(segment) == 0) batch.Delete(segment_ref_key(segment, ledger));
    }
    if (!lost) continue;
    // Its close record came after its entries: it is replayed if it made it.
    std::string value;
    leveldb::Status s = db_->Get(leveldb::ReadOptions(), ledger_key(ledger), &value);
    if (s.ok() && !value.empty() && value[0] != 0) {
      Batch reopened;
      reopened.put_ledger(LedgerMeta{ledger, false, kNoEntry});
      batch.Append(reopened.batch_);
    }
  }
  batch.Put(kCheckpointKey, encode_point(from));
  leveldb::WriteOptions options;
  options.sync = true;
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(db_->Write(options, &batch), "rewind"));
  return forgotten;
}

Result<std::vector<LedgerMeta>> Index::ledgers() const {
  std::vector<LedgerMeta> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(1, kLedgerTag);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != 9 || it->value().size() != 9) return Status::corruption("index ledger key is malformed");
    out.push_back(LedgerMeta{get_be64(it->key().data() + 1), it->value()[0] != 0,
                             static_cast<EntryId>(get_be64(it->value().data() + 1))});
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "list ledgers"));
  return out;
}

Result<std::map<uint64_t, std::set<LedgerId>>> Index::segment_refs() const {
  std::map<uint64_t, std::set<LedgerId>> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(1, kSegmentRefTag);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != 17) return Status::corruption("index segment reference is malformed");
    out[get_be64(it->key().data() + 1)].insert(get_be64(it->key().data() + 9));
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "list segment references"));
  return out;
}

Result<std::map<uint64_t, std::unordered_map<LedgerId, uint64_t>>> Index::segment_usage() const {
  std::map<uint64_t, std::unordered_map<LedgerId, uint64_t>> out;
  std::unique_ptr<leveldb::Iterator> it(db_->NewIterator(leveldb::ReadOptions()));
  const std::string prefix(1, kRunTag);
  DecodedRun run;
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != 17 || !decode_run(it->value(), &run)) {
      return Status::corruption("index run is malformed");
    }
    uint64_t bytes = 0;
    for (const EntryLocation& loc : run.locations) bytes += loc.size;
    out[run.segment][get_be64(it->key().data() + 1)] += bytes;
  }
  MAGNETAR_RETURN_IF_ERROR(from_leveldb(it->status(), "list runs"));
  return out;
}

}  // namespace magnetar::storage
