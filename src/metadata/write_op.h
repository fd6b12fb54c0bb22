// WriteOp: one change to the metadata store, as it is proposed and applied.
// The encoding is the WriteOp table of records.fbs; a replicated backend
// ships these bytes through its log and every replica applies them the same
// way, so the proposer fixes the time (now_ms) and every id it depends on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"
#include "metadata/store.h"

namespace magnetar::metadata {

struct WriteOp {
  enum class Kind : uint8_t { kPut = 0, kDelete = 1, kOpenSession = 2, kCloseSession = 3, kImport = 4 };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;
  int64_t expected_version = kAnyVersion;
  SessionId session = 0;
  int64_t now_ms = 0;
};

std::string encode_write_op(const WriteOp& op);
// Corruption when `bytes` is not a WriteOp this binary understands.
common::Result<WriteOp> decode_write_op(std::string_view bytes);

// Node records (the value stored under a key).
std::string encode_node(const Stat& stat, std::string_view value);
common::Status decode_node(std::string_view bytes, Stat& stat, std::string* value);


}  // namespace magnetar::metadata
