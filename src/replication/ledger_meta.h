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

struct LedgerMeta {
  LedgerState state = LedgerState::kOpen;
  int ensemble = 1;
  int write_quorum = 1;
  int ack_quorum = 1;
  EntryId last_entry = storage::kNoEntry;  // when kClosed
  int64_t created_ms = 0;
  NodeId writer = 0;
  std::vector<Fragment> fragments;  // by first_entry, ascending; never empty

  // The fragment holding `entry` (the last one for entries past its start).
  const Fragment& fragment_of(EntryId entry) const;
  // The last entry of fragment `i` as far as the record knows: one before
  // the next fragment's first, else `last` (the ledger's last confirmed).
  EntryId fragment_end(size_t i, EntryId last) const;
  // The nodes that hold `entry`: write_quorum of its fragment's ensemble,
  // starting at entry % ensemble (striping, as BookKeeper does).
  std::vector<NodeId> write_set(EntryId entry) const;
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

std::string encode_ledger_meta(const LedgerMeta& meta);
// InvalidArgument for bytes that are not a LedgerRecord, or one that breaks
// the rules above (no fragment, quorums out of order).
common::Result<LedgerMeta> decode_ledger_meta(std::string_view bytes);

}  // namespace magnetar::replication
