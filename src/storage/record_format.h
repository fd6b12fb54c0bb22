// The segment file format: the one definition that the journal (writer),
// the recovery scan and the read path (readers) all include.
//
// File header is magic (4 bytes), version (4 bytes), segment id (8 bytes).
// Record header is checksum (4 bytes), length (4 bytes), type (1 byte),
// ledger id (8 bytes), entry id (8 bytes); then `length` payload bytes.
// Integers are little-endian. The checksum is the CRC32C of every record byte
// after it (length, type, ids and payload), so a torn or bit-flipped record
// never verifies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/crc32c.h"

namespace magnetar::storage::format {

inline constexpr uint32_t kFileMagic = 0x4753474d;  // "MGSG"
inline constexpr uint32_t kFileVersion = 1;
inline constexpr size_t kFileHeaderSize = 16;

inline constexpr size_t kRecordHeaderSize = 25;
// Payloads above this are refused at add time; a length above it in a file
// is corruption.
inline constexpr uint32_t kMaxPayloadSize = 64u << 20;

enum class RecordType : uint8_t {
  kEntry = 1,          // entry `entry id` of ledger `ledger id`; payload = the entry's bytes
  kLedgerCreated = 2,  // entry id unused (-1); no payload
  kLedgerClosed = 3,   // entry id = the ledger's last entry (-1 when empty); no payload
  kLedgerDeleted = 4,  // entry id unused (-1); no payload
};

inline bool is_valid_type(uint8_t t) { return t >= 1 && t <= 4; }

inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct RecordHeader {
  uint32_t checksum;
  uint32_t length;
  RecordType type;
  uint64_t ledger;
  int64_t entry;
};

// Writes the file header of segment `segment_id` into `out`.
inline void encode_file_header(uint8_t out[kFileHeaderSize], uint64_t segment_id) {
  put_u32(out, kFileMagic);
  put_u32(out + 4, kFileVersion);
  put_u64(out + 8, segment_id);
}

// True when `in` is the file header of segment `segment_id`.
inline bool file_header_matches(const uint8_t in[kFileHeaderSize], uint64_t segment_id) {
  return get_u32(in) == kFileMagic && get_u32(in + 4) == kFileVersion &&
         get_u64(in + 8) == segment_id;
}

// Writes the record header for `payload` into `out`, checksum included.
inline void encode_record_header(uint8_t out[kRecordHeaderSize], RecordType type, uint64_t ledger,
                                 int64_t entry, const void* payload, uint32_t length) {
  put_u32(out + 4, length);
  out[8] = static_cast<uint8_t>(type);
  put_u64(out + 9, ledger);
  put_u64(out + 17, static_cast<uint64_t>(entry));
  uint32_t crc = common::crc32c::extend(0, out + 4, kRecordHeaderSize - 4);
  if (length > 0) crc = common::crc32c::extend(crc, payload, length);
  put_u32(out, crc);
}

// Decodes the fields of a record header; says nothing about validity.
inline RecordHeader decode_record_header(const uint8_t in[kRecordHeaderSize]) {
  return RecordHeader{get_u32(in), get_u32(in + 4), static_cast<RecordType>(in[8]), get_u64(in + 9),
                      static_cast<int64_t>(get_u64(in + 17))};
}

// True when the header fields are plausible (type, length bound); the
// checksum is checked by record_checksum_ok once the payload is at hand.
inline bool header_plausible(const RecordHeader& h) {
  return is_valid_type(static_cast<uint8_t>(h.type)) && h.length <= kMaxPayloadSize;
}

// REQUIRES: `record` holds kRecordHeaderSize + length bytes.
inline bool record_checksum_ok(const uint8_t* record, const RecordHeader& h) {
  return common::crc32c::extend(0, record + 4, kRecordHeaderSize - 4 + h.length) == h.checksum;
}

}  // namespace magnetar::storage::format
