// The storage protocol's requests as the replicated storage sends them
// (replication.fbs), encoded in one place for its rooms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "replication/ledger_meta.h"

namespace flatbuffers {
struct String;
}

namespace magnetar::replication {

// What a striped ledger's adds carry so that each node knows its stripe:
// the fragment's ensemble and the write quorum.
struct StripeInfo {
  std::vector<NodeId> ensemble;
  int write_quorum = 0;
};

// AddEntry; `fsync` 255 leaves the node's own mode; `new_run`: see
// replication.fbs; `stripe` only for striped ledgers.
std::string encode_add(LedgerId ledger, EntryId entry, EntryId lac, bool recovery, uint8_t fsync,
                       uint32_t interval_ms, const uint8_t* data, size_t size, bool new_run = false,
                       const StripeInfo* stripe = nullptr);
// The AddEntry `payload` again, for the ensemble `stripe` names (after the
// writer replaced a node); the payload itself when it is not an AddEntry.
std::string restripe_add(const std::string& payload, const StripeInfo& stripe);
// `max_bytes` 0: the node's own limit (8 MiB); at least one entry comes back.
std::string encode_read(LedgerId ledger, EntryId first, EntryId last, uint32_t max_bytes = 0);
std::string encode_fence(LedgerId ledger, bool fence);
std::string encode_delete(LedgerId ledger);
// A reply's code and message as a Status.
common::Status reply_status(uint8_t code, const flatbuffers::String* message);

}  // namespace magnetar::replication
