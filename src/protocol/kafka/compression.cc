#include "protocol/kafka/compression.h"

#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

namespace magnetar::protocol::kafka {

using common::Result;
using common::Slice;
using common::Status;

namespace {

constexpr char kXerialMagic[8] = {'\x82', 'S', 'N', 'A', 'P', 'P', 'Y', '\0'};
constexpr size_t kXerialHeaderBytes = 16;  // magic, version (4), compatible version (4)

Status too_large(size_t max_size) {
  return Status::invalid_argument(fmt::format("compressed records expand past {} bytes", max_size));
}

Result<Slice> gunzip(const Slice& in, size_t max_size) {
  z_stream s{};
  if (inflateInit2(&s, 15 + 32) != Z_OK) return Status::internal("zlib init failed");  // 32: gzip or zlib
  std::string out;
  char chunk[64 * 1024];
  s.next_in = const_cast<Bytef*>(in.data());
  s.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    s.next_out = reinterpret_cast<Bytef*>(chunk);
    s.avail_out = sizeof chunk;
    rc = inflate(&s, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&s);
      return Status::invalid_argument("gzip records do not decode");
    }
    out.append(chunk, sizeof chunk - s.avail_out);
    if (out.size() > max_size) {
      inflateEnd(&s);
      return too_large(max_size);
    }
    if (rc == Z_OK && s.avail_in == 0 && s.avail_out != 0) {
      inflateEnd(&s);
      return Status::invalid_argument("gzip records end early");
    }
  }
  inflateEnd(&s);
  return Slice::copy_of(out);
}

bool raw_snappy(const char* data, size_t size, size_t max_size, std::string* out) {
  size_t len = 0;
  if (!snappy::GetUncompressedLength(data, size, &len) || out->size() + len > max_size) return false;
  size_t at = out->size();
  out->resize(at + len);
  return snappy::RawUncompress(data, size, out->data() + at);
}

Result<Slice> unsnappy(const Slice& in, size_t max_size) {
  const char* p = reinterpret_cast<const char*>(in.data());
  std::string out;
  if (in.size() >= kXerialHeaderBytes && std::memcmp(p, kXerialMagic, sizeof kXerialMagic) == 0) {
    size_t pos = kXerialHeaderBytes;
    while (pos < in.size()) {
      if (in.size() - pos < 4) return Status::invalid_argument("truncated snappy block length");
      uint32_t len = (uint32_t{in.data()[pos]} << 24) | (uint32_t{in.data()[pos + 1]} << 16) |
                     (uint32_t{in.data()[pos + 2]} << 8) | in.data()[pos + 3];
      pos += 4;
      if (len > in.size() - pos) return Status::invalid_argument("snappy block past the end");
      if (!raw_snappy(p + pos, len, max_size, &out)) return Status::invalid_argument("snappy block does not decode");
      pos += len;
    }
    return Slice::copy_of(out);
  }
  if (!raw_snappy(p, in.size(), max_size, &out)) return Status::invalid_argument("snappy records do not decode");
  return Slice::copy_of(out);
}

Result<Slice> unlz4(const Slice& in, size_t max_size) {
  LZ4F_dctx* ctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx, LZ4F_VERSION))) return Status::internal("lz4 init failed");
  std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> owner(ctx, LZ4F_freeDecompressionContext);
  std::string out;
  char chunk[64 * 1024];
  const uint8_t* src = in.data();
  size_t left = in.size();
  size_t hint = 1;
  while (left > 0 && hint != 0) {
    size_t src_size = left;
    size_t dst_size = sizeof chunk;
    hint = LZ4F_decompress(ctx, chunk, &dst_size, src, &src_size, nullptr);
    if (LZ4F_isError(hint)) return Status::invalid_argument(std::string("lz4 records: ") + LZ4F_getErrorName(hint));
    out.append(chunk, dst_size);
    if (out.size() > max_size) return too_large(max_size);
    src += src_size;
    left -= src_size;
    if (src_size == 0 && dst_size == 0) return Status::invalid_argument("lz4 records do not progress");
  }
  // Output still buffered in the context after the input ran out.
  while (hint != 0) {
    size_t src_size = 0;
    size_t dst_size = sizeof chunk;
    hint = LZ4F_decompress(ctx, chunk, &dst_size, src, &src_size, nullptr);
    if (LZ4F_isError(hint) || dst_size == 0) {
      if (hint != 0) return Status::invalid_argument("lz4 records end early");
    }
    out.append(chunk, dst_size);
    if (out.size() > max_size) return too_large(max_size);
  }
  return Slice::copy_of(out);
}

Result<Slice> unzstd(const Slice& in, size_t max_size) {
  std::unique_ptr<ZSTD_DStream, decltype(&ZSTD_freeDStream)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
  if (!ds) return Status::internal("zstd init failed");
  ZSTD_initDStream(ds.get());
  std::string out;
  char chunk[64 * 1024];
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  size_t rc = 1;
  while (input.pos < input.size || rc != 0) {
    ZSTD_outBuffer output{chunk, sizeof chunk, 0};
    rc = ZSTD_decompressStream(ds.get(), &output, &input);
    if (ZSTD_isError(rc)) return Status::invalid_argument(std::string("zstd records: ") + ZSTD_getErrorName(rc));
    out.append(chunk, output.pos);
    if (out.size() > max_size) return too_large(max_size);
    if (output.pos == 0 && input.pos == input.size && rc != 0) {
      return Status::invalid_argument("zstd records end early");
    }
  }
  return Slice::copy_of(out);
}

}  // namespace

Result<Slice> decompress_records(Compression codec, const Slice& input, size_t max_size) {
  switch (codec) {
    case Compression::kNone: return input;
    case Compression::kGzip: return gunzip(input, max_size);
    case Compression::kSnappy: return unsnappy(input, max_size);
    case Compression::kLz4: return unlz4(input, max_size);
    case Compression::kZstd: return unzstd(input, max_size);
  }
  return Status::unimplemented(fmt::format("compression type {} is not known", static_cast<int>(codec)));
}

}  // namespace magnetar::protocol::kafka
