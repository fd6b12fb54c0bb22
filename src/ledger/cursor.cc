#include "ledger/cursor.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <bit>

#include "ledger/records_generated.h"

namespace magnetar::ledger {

using common::Result;
using common::Status;

Cursor::Cursor(std::string name, Position mark_delete, bool durable)
    : name_(std::move(name)), durable_(durable), mark_delete_(mark_delete) {}

bool Cursor::is_acknowledged(Position p) const { return p <= mark_delete_ || acked_.contains(p); }

namespace {

// An entry of a ledger the log dropped since it was read: one a reader of
// the compacted view was handed (ManagedLedger::read_compacted).
bool before_chain(Position p, const LedgerChain& chain) {
  return !chain.empty() && p.ledger < chain.ledgers().front().id;
}

}  // namespace

bool Cursor::ack_before_chain(Position p) {
  // Everything before the log's first ledger is gone for every reader: the
  // position only moves the cursor forward.
  if (p > mark_delete_) mark_delete_ = p;
  return true;
}

Status Cursor::ack(Position p, const LedgerChain& chain) {
  if (before_chain(p, chain) && ack_before_chain(p)) return Status::ok();
  if (!chain.contains(p)) return Status::invalid_argument("cursor " + name_ + ": no entry " + p.to_string());
  if (is_acknowledged(p)) return Status::ok();
  acked_.add(p);
  batches_.erase(p);
  advance(chain);
  return Status::ok();
}

Status Cursor::ack_cumulative(Position p, const LedgerChain& chain) {
  if (before_chain(p, chain) && ack_before_chain(p)) return Status::ok();
  if (!chain.contains(p)) return Status::invalid_argument("cursor " + name_ + ": no entry " + p.to_string());
  if (p <= mark_delete_) return Status::ok();
  mark_delete_ = p;
  advance(chain);
  return Status::ok();
}

Status Cursor::ack_batch_index(Position p, uint32_t index, uint32_t batch_size, const LedgerChain& chain) {
  if (before_chain(p, chain)) return Status::ok();  // acknowledged whole once its last message is
  if (!chain.contains(p)) return Status::invalid_argument("cursor " + name_ + ": no entry " + p.to_string());
  if (batch_size == 0 || index >= batch_size) {
    return Status::invalid_argument("cursor " + name_ + ": message " + std::to_string(index) + " of a batch of " +
                                    std::to_string(batch_size));
  }
  if (is_acknowledged(p)) return Status::ok();
  Batch& b = batches_[p];
  if (b.size == 0) {
    b.size = batch_size;
    b.acked.assign((batch_size + 63) / 64, 0);
  }
  if (b.size != batch_size) return Status::invalid_argument("cursor " + name_ + ": batch size changed");
  b.acked[index / 64] |= 1ull << (index % 64);
  uint32_t count = 0;
  for (uint64_t w : b.acked) count += static_cast<uint32_t>(std::popcount(w));
  if (count == batch_size) return ack(p, chain);
  return Status::ok();
}

std::vector<uint64_t> Cursor::batch_acks(Position p) const {
  auto it = batches_.find(p);
  return it == batches_.end() ? std::vector<uint64_t>{} : it->second.acked;
}

void Cursor::advance(const LedgerChain& chain) {
  for (;;) {
    auto n = chain.next(mark_delete_);
    if (!n || !acked_.contains(*n)) break;
    const ChainLedger* l = chain.find(n->ledger);
    EntryId end = acked_.first_absent(n->ledger, n->entry);  // first entry not acknowledged
    mark_delete_ = Position{n->ledger, std::min(end, l->entries) - 1};
  }
  acked_.remove_through(mark_delete_);
  batches_.erase(batches_.begin(), batches_.upper_bound(mark_delete_));
}

std::optional<Position> Cursor::next_unacknowledged(Position from, const LedgerChain& chain) const {
  Position p = std::max(from, mark_delete_);
  for (;;) {
    auto n = chain.next(p);
    if (!n) return std::nullopt;
    if (!acked_.contains(*n)) return n;
    const ChainLedger* l = chain.find(n->ledger);
    EntryId end = acked_.first_absent(n->ledger, n->entry);
    if (end < l->entries) return Position{n->ledger, end};
    p = Position{n->ledger, l->entries - 1};
  }
}

uint64_t Cursor::backlog_entries(const LedgerChain& chain) const {
  return chain.entries_after(mark_delete_) - acked_.size();
}

uint64_t Cursor::backlog_messages(const LedgerChain& chain) const {
  auto first = chain.next(mark_delete_);
  if (!first) return 0;
  uint64_t total = chain.total_messages() - chain.messages_before(*first);
  for (const RangeSet::Range& r : acked_.ranges()) {
    if (chain.find(r.ledger) == nullptr) continue;
    total -= chain.messages_before(Position{r.ledger, r.last + 1}) - chain.messages_before(Position{r.ledger, r.first});
  }
  for (const auto& [pos, batch] : batches_) {
    for (uint64_t w : batch.acked) total -= static_cast<uint64_t>(std::popcount(w));
  }
  return total;
}

void Cursor::reset(Position p) {
  mark_delete_ = p;
  acked_.clear();
  batches_.clear();
}

void Cursor::skip_removed_ledgers(const LedgerChain& chain) {
  if (chain.empty()) return;
  LedgerId first = chain.ledgers().front().id;
  if (mark_delete_.ledger < first) {
    mark_delete_ = Position{first, storage::kNoEntry};
    acked_.remove_through(Position{first, storage::kNoEntry});
    batches_.erase(batches_.begin(), batches_.lower_bound(Position{first, 0}));
  }
}

std::string Cursor::encode(const CursorPersistLimits& limits) const {
  flatbuffers::FlatBufferBuilder b(256);
  std::vector<fb::AckRange> ranges;
  for (const auto& r : acked_.ranges(limits.max_ranges)) ranges.emplace_back(r.ledger, r.first, r.last);
  std::vector<flatbuffers::Offset<fb::BatchAcks>> batches;
  for (const auto& [pos, batch] : batches_) {
    if (batches.size() >= limits.max_batch_entries) break;
    batches.push_back(fb::CreateBatchAcks(b, pos.ledger, pos.entry, batch.size, b.CreateVector(batch.acked)));
  }
  auto acked = b.CreateVectorOfStructs(ranges);
  auto batch_vec = b.CreateVector(batches);
  fb::CursorStateBuilder state(b);
  state.add_mark_delete_ledger(mark_delete_.ledger);
  state.add_mark_delete_entry(mark_delete_.entry);
  state.add_acked(acked);
  state.add_batches(batch_vec);
  if (replicated_) state.add_replicated(true);
  b.Finish(state.Finish());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<Cursor> Cursor::decode(std::string name, std::string_view bytes) {
  flatbuffers::Verifier v(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!v.VerifyBuffer<fb::CursorState>(nullptr)) return Status::corruption("cursor " + name + ": state fails verification");
  auto* s = flatbuffers::GetRoot<fb::CursorState>(bytes.data());
  Cursor c(std::move(name), Position{s->mark_delete_ledger(), s->mark_delete_entry()}, true);
  c.replicated_ = s->replicated();
  if (s->acked()) {
    for (const fb::AckRange* r : *s->acked()) {
      if (r->first() < 0 || r->last() < r->first()) return Status::corruption("cursor " + c.name_ + ": bad ack range");
      c.acked_.add_range(r->ledger(), r->first(), r->last());
    }
  }
  if (s->batches()) {
    for (const fb::BatchAcks* b : *s->batches()) {
      Batch batch;
      batch.size = b->batch_size();
      if (b->acked()) batch.acked.assign(b->acked()->begin(), b->acked()->end());
      if (batch.acked.size() != (batch.size + 63) / 64) return Status::corruption("cursor " + c.name_ + ": bad batch");
      c.batches_[Position{b->ledger(), b->entry()}] = std::move(batch);
    }
  }
  return c;
}

}  // namespace magnetar::ledger
