#include "protocol/kafka/record_batch.h"

#include <fmt/format.h>

#include "common/crc32c.h"
#include "protocol/kafka/compression.h"

namespace magnetar::protocol::kafka {

using common::Result;
using common::Slice;
using common::Status;

namespace {

// Offsets within a batch.
constexpr size_t kLengthOffset = 8;
constexpr size_t kCrcOffset = 17;
constexpr size_t kAttributesOffset = 21;

std::optional<Slice> varbytes(WireReader& in) {
  int32_t len = in.varint();
  if (!in.ok() || len < 0) return std::nullopt;
  return in.raw(static_cast<size_t>(len));
}

Status parse_record(WireReader& in, int64_t base_timestamp, Record* out) {
  int32_t length = in.varint();
  if (!in.ok() || length < 0 || static_cast<size_t>(length) > in.remaining()) {
    return Status::invalid_argument("record length out of range");
  }
  WireReader r(in.raw(static_cast<size_t>(length)));
  r.i8();  // record attributes: unused
  out->timestamp = base_timestamp + r.varlong();
  out->offset_delta = r.varint();
  out->key = varbytes(r);
  out->value = varbytes(r);
  int32_t headers = r.varint();
  if (!r.ok() || headers < 0 || static_cast<size_t>(headers) > r.remaining()) {
    return Status::invalid_argument("record header count out of range");
  }
  out->headers.reserve(static_cast<size_t>(headers));
  for (int32_t k = 0; k < headers && r.ok(); ++k) {
    RecordHeader h;
    int32_t klen = r.varint();
    if (klen < 0) return Status::invalid_argument("null record header key");
    h.key = r.raw(static_cast<size_t>(klen)).to_string();
    h.value = varbytes(r);
    out->headers.push_back(std::move(h));
  }
  if (!r.ok()) return r.status();
  if (r.remaining() != 0) return Status::invalid_argument("bytes left after a record");
  return Status::ok();
}

}  // namespace

Result<std::vector<RecordBatch>> parse_record_set(const Slice& records) {
  std::vector<RecordBatch> batches;
  WireReader in(records);
  while (in.remaining() > 0) {
    if (in.remaining() < kBatchHeaderBytes) return Status::invalid_argument("truncated record batch header");
    size_t start = in.position();
    RecordBatch b;
    b.base_offset = in.i64();
    int32_t length = in.i32();
    if (length < static_cast<int32_t>(kBatchHeaderBytes - 12) ||
        static_cast<size_t>(length) > in.remaining()) {
      return Status::invalid_argument(fmt::format("record batch length {} out of range", length));
    }
    Slice body = records.sub(start + 12, static_cast<size_t>(length));
    WireReader r(body);
    b.partition_leader_epoch = r.i32();
    int8_t magic = r.i8();
    if (magic != kMagicV2) {
      return Status::invalid_argument(fmt::format("record batch magic {} (only 2 is served)", magic));
    }
    uint32_t crc = r.u32();
    uint32_t actual = common::crc32c::value(body.data() + 9, body.size() - 9);
    if (crc != actual) return Status::invalid_argument("record batch CRC32C mismatch");
    b.attributes = r.i16();
    b.last_offset_delta = r.i32();
    b.base_timestamp = r.i64();
    b.max_timestamp = r.i64();
    b.producer_id = r.i64();
    b.producer_epoch = r.i16();
    b.base_sequence = r.i32();
    int32_t count = r.i32();
    if (!r.ok()) return r.status();
    // The records section, decompressed when the batch is compressed.
    auto section = decompress_records(b.compression(), body.sub(body.size() - r.remaining()));
    if (!section) return section.status();
    WireReader recs(std::move(section).value());
    if (count < 0 || static_cast<size_t>(count) > recs.remaining()) {
      return Status::invalid_argument(fmt::format("record count {} out of range", count));
    }
    b.records.resize(static_cast<size_t>(count));
    for (auto& rec : b.records) {
      MAGNETAR_RETURN_IF_ERROR(parse_record(recs, b.base_timestamp, &rec));
    }
    if (!recs.ok()) return recs.status();
    if (recs.remaining() != 0) return Status::invalid_argument("bytes left after a batch's records");
    in.raw(static_cast<size_t>(length));
    batches.push_back(std::move(b));
  }
  return batches;
}

void write_skip_batch(WireWriter& out, int64_t base_offset, int64_t last_offset, int64_t timestamp_ms) {
  static constexpr char kCommitKey[] = {0, 0, 0, 1};           // version 0, COMMIT
  static constexpr char kMarkerValue[] = {0, 0, 0, 0, 0, 0};  // version 0, coordinator epoch 0
  RecordBatch batch;
  batch.base_offset = base_offset;
  batch.attributes = 0x20;  // control
  batch.base_timestamp = timestamp_ms;
  batch.max_timestamp = timestamp_ms;
  Record marker;
  marker.timestamp = timestamp_ms;
  marker.offset_delta = static_cast<int32_t>(last_offset - base_offset);
  marker.key = common::Slice::copy_of(std::string_view(kCommitKey, sizeof kCommitKey));
  marker.value = common::Slice::copy_of(std::string_view(kMarkerValue, sizeof kMarkerValue));
  batch.records.push_back(std::move(marker));
  write_record_batch(out, batch);
}

void write_record_batch(WireWriter& out, const RecordBatch& batch) {
  const size_t start = out.size();
  out.i64(batch.base_offset);
  out.i32(0);  // batchLength, patched below
  out.i32(batch.partition_leader_epoch);
  out.i8(kMagicV2);
  out.i32(0);  // crc, patched below
  out.i16(static_cast<int16_t>(batch.attributes & ~0x7));
  out.i32(batch.last_offset_delta >= 0 ? batch.last_offset_delta
                                       : (batch.records.empty() ? 0 : batch.records.back().offset_delta));
  out.i64(batch.base_timestamp);
  out.i64(batch.max_timestamp);
  out.i64(batch.producer_id);
  out.i16(batch.producer_epoch);
  out.i32(batch.base_sequence);
  out.i32(static_cast<int32_t>(batch.records.size()));
  WireWriter rec(128);
  for (const Record& r : batch.records) {
    rec.i8(0);
    rec.varint(r.timestamp - batch.base_timestamp);
    rec.varint(r.offset_delta);
    if (r.key) {
      rec.varint(static_cast<int64_t>(r.key->size()));
      rec.raw(r.key->view());
    } else {
      rec.varint(-1);
    }
    if (r.value) {
      rec.varint(static_cast<int64_t>(r.value->size()));
      rec.raw(r.value->view());
    } else {
      rec.varint(-1);
    }
    rec.varint(static_cast<int64_t>(r.headers.size()));
    for (const RecordHeader& h : r.headers) {
      rec.varint(static_cast<int64_t>(h.key.size()));
      rec.raw(h.key);
      if (h.value) {
        rec.varint(static_cast<int64_t>(h.value->size()));
        rec.raw(h.value->view());
      } else {
        rec.varint(-1);
      }
    }
    Slice body = rec.finish();
    out.varint(static_cast<int64_t>(body.size()));
    out.raw(body.view());
  }
  const size_t end = out.size();
  out.patch_i32(start + kLengthOffset, static_cast<int32_t>(end - start - 12));
  uint32_t crc = common::crc32c::value(out.at(start + kAttributesOffset), end - start - kAttributesOffset);
  out.patch_i32(start + kCrcOffset, static_cast<int32_t>(crc));
}

}  // namespace magnetar::protocol::kafka
