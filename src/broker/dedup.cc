#include "broker/dedup.h"

#include <algorithm>

#include "broker/dedup_generated.h"
#include "broker/tenancy.h"
#include "common/logging.h"

namespace magnetar::broker {

using common::Result;
using common::Status;
using ledger::Position;

namespace {
constexpr uint16_t kMaxDedupFormat = 1;
constexpr size_t kReplayBatch = 512;
}  // namespace

std::string encode_dedup_snapshot(const DedupSnapshot& s) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::ProducerSequence>> producers;
  for (const auto& [name, seq] : s.sequences) {
    producers.push_back(fb::CreateProducerSequence(b, b.CreateString(name), seq));
  }
  auto root = fb::CreateDedupSnapshot(b, 1, s.position.ledger, s.position.entry, b.CreateVector(producers));
  b.Finish(root);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<DedupSnapshot> decode_dedup_snapshot(std::string_view bytes) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<fb::DedupSnapshot>(nullptr)) {
    return Status::corruption("deduplication snapshot fails verification");
  }
  const auto* r = flatbuffers::GetRoot<fb::DedupSnapshot>(bytes.data());
  if (r->format() > kMaxDedupFormat) {
    return Status::corruption("deduplication snapshot has format " + std::to_string(r->format()) +
                              ", newer than this binary reads");
  }
  DedupSnapshot s;
  s.position = Position{r->ledger(), r->entry()};
  if (r->producers() != nullptr) {
    for (const auto* p : *r->producers()) {
      if (p->producer() != nullptr) s.sequences[p->producer()->str()] = p->sequence_id();
    }
  }
  return s;
}

int64_t highest_sequence_id(int64_t sequence_id, int64_t highest, uint32_t messages) {
  int64_t last = sequence_id + static_cast<int64_t>(std::max<uint32_t>(messages, 1)) - 1;
  return highest > sequence_id ? highest : last;
}

DedupVerdict DedupState::check(const std::string& producer, int64_t sequence_id) const {
  auto pushed = pushed_.find(producer);
  if (pushed == pushed_.end() || sequence_id > pushed->second) return DedupVerdict::kNew;
  auto persisted = persisted_.find(producer);
  if (persisted != persisted_.end() && sequence_id <= persisted->second) return DedupVerdict::kDuplicate;
  return DedupVerdict::kMaybeDuplicate;
}

void DedupState::pushed(const std::string& producer, int64_t highest) {
  auto [it, fresh] = pushed_.emplace(producer, highest);
  if (!fresh) it->second = std::max(it->second, highest);
}

void DedupState::persisted(const std::string& producer, int64_t highest, Position p) {
  auto [it, fresh] = persisted_.emplace(producer, highest);
  if (!fresh) it->second = std::max(it->second, highest);
  pushed(producer, highest);
  if (p > last_position_) last_position_ = p;
}

void DedupState::forget_pushed(const std::string& producer) {
  auto persisted = persisted_.find(producer);
  if (persisted == persisted_.end()) {
    pushed_.erase(producer);
  } else {
    pushed_[producer] = persisted->second;
  }
}

int64_t DedupState::last_sequence_id(const std::string& producer) const {
  auto it = persisted_.find(producer);
  return it == persisted_.end() ? -1 : it->second;
}

DedupSnapshot DedupState::snapshot() const { return DedupSnapshot{last_position_, persisted_}; }

void DedupState::restore(const DedupSnapshot& s) {
  persisted_ = s.sequences;
  pushed_ = s.sequences;
  last_position_ = s.position;
}

Deduplication::Deduplication(metadata::Store& store, std::string snapshot_key)
    : store_(store), key_(std::move(snapshot_key)) {}

Deduplication::~Deduplication() { *alive_ = false; }

void Deduplication::recover(ledger::Log& log, ledger::Callback<Status> done) {
  std::weak_ptr<bool> alive = alive_;
  store_.get(key_, [this, alive, &log, done = std::move(done)](Result<metadata::Record> rec) {
    if (alive.expired()) return done(Status::unavailable("topic closed while recovering deduplication"));
    if (rec.is_ok()) {
      auto s = decode_dedup_snapshot(rec->value);
      if (!s.is_ok()) return done(s.status());
      state_.restore(*s);
    } else if (rec.status().code() != common::ErrorCode::kNotFound) {
      return done(rec.status());
    }
    replay(log, state_.last_position(), std::move(done));
  });
}

void Deduplication::replay(ledger::Log& log, Position after, ledger::Callback<Status> done) {
  std::weak_ptr<bool> alive = alive_;
  log.read_entries(after, kReplayBatch,
                   [this, alive, &log, done = std::move(done)](Result<std::vector<ledger::LedgerEntry>> r) {
                     if (alive.expired()) return done(Status::unavailable("topic closed while recovering"));
                     if (!r.is_ok()) return done(r.status());
                     if (r->empty()) {
                       ready_ = true;
                       return done(Status::ok());
                     }
                     for (const auto& e : *r) {
                       ++since_snapshot_;
                       // A chunk before its message's last says nothing yet.
                       if (e.header.producer.empty() || e.header.more_chunks || !judges(e.header.producer)) continue;
                       state_.persisted(e.header.producer,
                                        highest_sequence_id(e.header.sequence_id, -1, e.header.messages),
                                        e.position);
                     }
                     replay(log, r->back().position, std::move(done));
                   });
}

void Deduplication::on_persisted() {
  if (++since_snapshot_ >= kSnapshotEvery) snapshot([](Status) {});
}

void Deduplication::snapshot_if_behind() {
  if (ready_ && since_snapshot_ > 0) snapshot([](Status) {});
}

void Deduplication::snapshot(ledger::Callback<Status> done) {
  waiting_.push_back(std::move(done));
  since_snapshot_ = 0;
  if (writing_) {
    again_ = true;
    return;
  }
  write_snapshot();
}

void Deduplication::write_snapshot() {
  writing_ = true;
  again_ = false;
  auto settled = std::make_shared<std::vector<ledger::Callback<Status>>>(std::move(waiting_));
  waiting_.clear();
  std::weak_ptr<bool> alive = alive_;
  store_.put(key_, encode_dedup_snapshot(state_.snapshot()), {},
             [this, alive, settled, key = key_](Result<metadata::Stat> r) {
               Status st = r.is_ok() ? Status::ok() : r.status();
               if (!st.is_ok()) MLOG_WARN("deduplication snapshot {}: {}", key, st.to_string());
               if (!alive.expired()) {
                 writing_ = false;
                 if (again_) write_snapshot();
               }
               for (auto& fn : *settled) fn(st);
             });
}

std::string Deduplication::snapshot_key(const TopicName& topic) {
  // The managed ledger's name: its metadata key without "/managed-ledgers/".
  constexpr std::string_view kPrefix = "/managed-ledgers/";
  return "/dedup-snapshots/" + managed_ledger_key(topic).substr(kPrefix.size());
}

void Deduplication::remove(metadata::Store& store, const std::string& snapshot_key,
                           ledger::Callback<Status> done) {
  store.del(snapshot_key, metadata::kAnyVersion, [done = std::move(done)](Status st) {
    done(st.code() == common::ErrorCode::kNotFound ? Status::ok() : st);
  });
}

}  // namespace magnetar::broker
