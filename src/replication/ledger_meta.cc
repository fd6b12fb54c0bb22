#include "replication/ledger_meta.h"

#include <algorithm>

#include "cluster/rpc_records.h"
#include "replication/replication_generated.h"

namespace magnetar::replication {

using common::Result;
using common::Status;

const Fragment& LedgerMeta::fragment_of(EntryId entry) const {
  size_t i = fragments.size() - 1;
  while (i > 0 && fragments[i].first_entry > entry) --i;
  return fragments[i];
}

EntryId LedgerMeta::fragment_end(size_t i, EntryId last) const {
  if (i + 1 < fragments.size()) return fragments[i + 1].first_entry - 1;
  return last;
}

std::vector<NodeId> LedgerMeta::write_set(EntryId entry) const {
  const Fragment& f = fragment_of(entry);
  std::vector<NodeId> out;
  const size_t n = f.nodes.size();
  if (n == 0) return out;
  const size_t quorum = std::min<size_t>(static_cast<size_t>(write_quorum), n);
  for (size_t k = 0; k < quorum; ++k) out.push_back(f.nodes[(static_cast<size_t>(entry) + k) % n]);
  return out;
}

Stripe Stripe::of(size_t ensemble, size_t write_quorum, size_t position) {
  if (write_quorum == 0 || write_quorum >= ensemble || position >= ensemble) return Stripe{};
  const size_t anchor = (position + ensemble - (write_quorum - 1)) % ensemble;
  return Stripe{static_cast<uint32_t>(ensemble), static_cast<uint32_t>(write_quorum), static_cast<uint32_t>(anchor)};
}

namespace {

// Entries are counted from a base below every entry (anchor - period), so
// that every offset is positive: the held entries before `entry`.
EntryId held_before(const Stripe& s, EntryId entry) {
  const EntryId y = entry + static_cast<EntryId>(s.period) - static_cast<EntryId>(s.anchor);
  const EntryId p = s.period;
  return (y / p) * static_cast<EntryId>(s.width) + std::min<EntryId>(y % p, s.width);
}

}  // namespace

bool Stripe::holds(EntryId entry) const {
  const EntryId p = period;
  return ((entry + p - anchor) % p) < static_cast<EntryId>(width);
}

EntryId Stripe::next_held(EntryId entry) const {
  const EntryId p = period;
  const EntryId r = (entry + p - anchor) % p;
  return r < static_cast<EntryId>(width) ? entry : entry + (p - r);
}

EntryId Stripe::held_between(EntryId from, EntryId to) const {
  return held_before(*this, to) - held_before(*this, from);
}

EntryId Stripe::nth_held(EntryId from, EntryId k) const {
  const EntryId t = held_before(*this, from) + k;
  const EntryId y = (t / width) * static_cast<EntryId>(period) + t % width;
  return y - static_cast<EntryId>(period) + static_cast<EntryId>(anchor);
}

Stripe LedgerMeta::stripe_of(size_t fragment, NodeId node) const {
  if (fragment >= fragments.size()) return Stripe{};
  const std::vector<NodeId>& nodes = fragments[fragment].nodes;
  auto at = std::find(nodes.begin(), nodes.end(), node);
  if (at == nodes.end()) return Stripe{};
  return Stripe::of(nodes.size(), static_cast<size_t>(write_quorum), static_cast<size_t>(at - nodes.begin()));
}

std::string draining_key(NodeId node) { return std::string(kDrainingPrefix) + "/" + std::to_string(node); }

std::vector<NodeId> LedgerMeta::all_nodes() const {
  std::vector<NodeId> out;
  for (const Fragment& f : fragments) out.insert(out.end(), f.nodes.begin(), f.nodes.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string ledger_key(LedgerId id) { return std::string(kLedgersPrefix) + "/" + std::to_string(id); }

std::string encode_ledger_meta(const LedgerMeta& meta) {
  flatbuffers::FlatBufferBuilder b(128);
  std::vector<flatbuffers::Offset<fb::Fragment>> fragments;
  for (const Fragment& f : meta.fragments) {
    fragments.push_back(fb::CreateFragment(b, f.first_entry, b.CreateVector(f.nodes)));
  }
  auto fragments_offset = b.CreateVector(fragments);
  auto primary = meta.affinity_primary.empty() ? 0 : b.CreateString(meta.affinity_primary);
  auto secondary = meta.affinity_secondary.empty() ? 0 : b.CreateString(meta.affinity_secondary);
  b.Finish(fb::CreateLedgerRecord(b, 1, static_cast<uint8_t>(meta.state), static_cast<uint8_t>(meta.ensemble),
                                  static_cast<uint8_t>(meta.write_quorum), static_cast<uint8_t>(meta.ack_quorum),
                                  meta.last_entry, meta.created_ms, meta.writer, fragments_offset, primary, secondary));
  return cluster::record_bytes(b);
}

std::string encode_healing(const HealingStatus& s) {
  flatbuffers::FlatBufferBuilder b(128);
  b.Finish(fb::CreateHealingRecord(b, 1, s.healer, s.updated_ms, s.underreplicated, s.copying, s.ledger,
                                   s.first_entry, s.last_entry, s.next_entry, s.from_node, s.to_node, s.copied_bytes,
                                   s.started_ms, s.healed_fragments, s.healed_bytes, s.rate_limit_bytes));
  return cluster::record_bytes(b);
}

Result<HealingStatus> decode_healing(std::string_view bytes) {
  const auto* r = cluster::verified_record<fb::HealingRecord>(bytes);
  if (r == nullptr) return Status::invalid_argument("not a healing record");
  HealingStatus s;
  s.healer = r->healer();
  s.updated_ms = r->updated_ms();
  s.underreplicated = r->underreplicated();
  s.copying = r->copying();
  s.ledger = r->ledger();
  s.first_entry = r->first_entry();
  s.last_entry = r->last_entry();
  s.next_entry = r->next_entry();
  s.from_node = r->from_node();
  s.to_node = r->to_node();
  s.copied_bytes = r->copied_bytes();
  s.started_ms = r->started_ms();
  s.healed_fragments = r->healed_fragments();
  s.healed_bytes = r->healed_bytes();
  s.rate_limit_bytes = r->rate_limit_bytes();
  return s;
}

Result<LedgerMeta> decode_ledger_meta(std::string_view bytes) {
  const auto* r = cluster::verified_record<fb::LedgerRecord>(bytes);
  if (r == nullptr) return Status::invalid_argument("not a replicated ledger record");
  LedgerMeta m;
  if (r->state() > static_cast<uint8_t>(LedgerState::kClosed)) {
    return Status::invalid_argument("replicated ledger record: unknown state " + std::to_string(r->state()));
  }
  m.state = static_cast<LedgerState>(r->state());
  m.ensemble = r->ensemble();
  m.write_quorum = r->write_quorum();
  m.ack_quorum = r->ack_quorum();
  m.last_entry = r->last_entry();
  m.created_ms = r->created_ms();
  m.writer = r->writer();
  if (r->affinity_primary() != nullptr) m.affinity_primary = r->affinity_primary()->str();
  if (r->affinity_secondary() != nullptr) m.affinity_secondary = r->affinity_secondary()->str();
  if (r->fragments() != nullptr) {
    for (const fb::Fragment* f : *r->fragments()) {
      Fragment fragment;
      fragment.first_entry = f->first_entry();
      if (f->nodes() != nullptr) fragment.nodes.assign(f->nodes()->begin(), f->nodes()->end());
      if (fragment.nodes.empty()) return Status::invalid_argument("replicated ledger record: a fragment has no node");
      if (!m.fragments.empty() && fragment.first_entry <= m.fragments.back().first_entry) {
        return Status::invalid_argument("replicated ledger record: fragments out of order");
      }
      m.fragments.push_back(std::move(fragment));
    }
  }
  if (m.fragments.empty()) return Status::invalid_argument("replicated ledger record: no fragment");
  if (!(m.ack_quorum >= 1 && m.ack_quorum <= m.write_quorum && m.write_quorum <= m.ensemble)) {
    return Status::invalid_argument("replicated ledger record: quorums out of order");
  }
  return m;
}

}  // namespace magnetar::replication
