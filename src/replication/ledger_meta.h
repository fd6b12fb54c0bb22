// LedgerMeta: what the metadata store records of a replicated ledger
// (/storage/ledgers/<id>): its quorums, its state and the fragments that
// say which storage nodes hold which entries. Encoded as replication.fbs's
// LedgerRecord.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "storage/storage.h"

namespace magnetar::replication {

using NodeId = uint64_t;
using storage::EntryId;
using storage::LedgerId;

enum class LedgerState : uint8_t {
  kOpen = 0,        // its writer adds entries
  kRecovering = 1,  // a new owner is fencing and closing it
  kClosed = 2,      // sealed at last_entry
};

struct Fragment {
  EntryId first_entry = 0;
  std::vector<NodeId> nodes;  // the ensemble: entry e goes to write_set(e)
};

// Which entries one node of a fragment holds. Striped (an ensemble of E
// nodes, each entry written to Qw < E of them), the node at position p
// holds entry e when (e - anchor) mod E < Qw, anchor = p - Qw + 1 (mod E):
// Qw entries in every E, in turn. Not striped (period 1), every entry.
struct Stripe {
  uint32_t period = 1;
  uint32_t width = 1;
  uint32_t anchor = 0;

  // The stripe of position `position` in an ensemble of `ensemble` nodes
  // that writes each entry to `write_quorum` of them.
  static Stripe of(size_t ensemble, size_t write_quorum, size_t position);
  bool striped() const { return period > 1; }
  bool holds(EntryId entry) const;
  // The first entry at or after `entry` that the stripe holds.
  EntryId next_held(EntryId entry) const;
  // How many entries of [from, to) the stripe holds (from <= to).
  EntryId held_between(EntryId from, EntryId to) const;
  // The held entry `k` held entries after `from` (0: `from`, which it holds).
  EntryId nth_held(EntryId from, EntryId k) const;
  bool operator==(const Stripe& o) const { return period == o.period && width == o.width && anchor == o.anchor; }
  bool operator!=(const Stripe& o) const { return !(*this == o); }
};

struct LedgerMeta {
  LedgerState state = LedgerState::kOpen;
  int ensemble = 1;
  int write_quorum = 1;
  int ack_quorum = 1;
  EntryId last_entry = storage::kNoEntry;  // when kClosed
  int64_t created_ms = 0;
  NodeId writer = 0;
  std::vector<Fragment> fragments;  // by first_entry, ascending; never empty
  // The storage groups its copies are kept in (placement.h's Affinity); empty: any node.
  std::string affinity_primary;
  std::string affinity_secondary;

  // The fragment holding `entry` (the last one for entries past its start).
  const Fragment& fragment_of(EntryId entry) const;
  // The last entry of fragment `i` as far as the record knows: one before
  // the next fragment's first, else `last` (the ledger's last confirmed).
  EntryId fragment_end(size_t i, EntryId last) const;
  // The nodes that hold `entry`: write_quorum of its fragment's ensemble,
  // starting at entry % ensemble (striping, as BookKeeper does).
  std::vector<NodeId> write_set(EntryId entry) const;
  // Whether entries are striped: fragments of more nodes than the write quorum.
  bool striped() const { return ensemble > write_quorum; }
  // The entries node `node` of fragment `fragment` holds (period 1 for a
  // node not in it).
  Stripe stripe_of(size_t fragment, NodeId node) const;
  // Every node named by any fragment, once each.
  std::vector<NodeId> all_nodes() const;
};

// The metadata key of ledger `id`.
std::string ledger_key(LedgerId id);
inline constexpr const char* kLedgersPrefix = "/storage/ledgers";

// /storage/draining/<node>: storage node `node` is being decommissioned: it
// gets no new copies and the copies it holds are made on other nodes. The
// value is the wall-clock time (ms) it was asked.
inline constexpr const char* kDrainingPrefix = "/storage/draining";
std::string draining_key(NodeId node);

// /storage/healing: what the self-healing member is doing (HealingRecord in
// replication.fbs), for every member's REST API and console.
inline constexpr const char* kHealingKey = "/storage/healing";
struct HealingStatus {
  NodeId healer = 0;
  int64_t updated_ms = 0;       // wall clock
  int64_t underreplicated = 0;  // fragments naming a lost or draining node, as last counted
  bool copying = false;         // a fragment is being copied now; then the fields below say which
  LedgerId ledger = 0;
  EntryId first_entry = 0;
  EntryId last_entry = 0;
  EntryId next_entry = 0;
  NodeId from_node = 0;
  NodeId to_node = 0;
  uint64_t copied_bytes = 0;    // of this fragment so far
  int64_t started_ms = 0;       // wall clock the fragment's copy began
  uint64_t healed_fragments = 0;
  uint64_t healed_bytes = 0;
  uint64_t rate_limit_bytes = 0;  // bytes per second, 0: none
};
std::string encode_healing(const HealingStatus& status);
common::Result<HealingStatus> decode_healing(std::string_view bytes);

std::string encode_ledger_meta(const LedgerMeta& meta);
// InvalidArgument for bytes that are not a LedgerRecord, or one that breaks
// the rules above (no fragment, quorums out of order).
common::Result<LedgerMeta> decode_ledger_meta(std::string_view bytes);

}  // namespace magnetar::replication
