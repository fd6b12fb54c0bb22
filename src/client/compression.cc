#include "client/compression.h"

#include <lz4.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <limits>

#include "protocol/pulsar/batch.h"
#include "protocol/pulsar/frame.h"

namespace magnetar::client {

using common::Result;
using common::Slice;
using common::Status;
namespace proto = protocol::pulsar::proto;

namespace {

// A decompressed payload larger than this is refused: it cannot be a valid
// Pulsar message (5 MiB by default) and would only exhaust memory.
constexpr size_t kMaxUncompressed = 256u << 20;

}  // namespace

std::optional<CompressionType> parse_compression(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  if (n == "none") return proto::NONE;
  if (n == "lz4") return proto::LZ4;
  if (n == "zlib") return proto::ZLIB;
  if (n == "zstd") return proto::ZSTD;
  if (n == "snappy") return proto::SNAPPY;
  return std::nullopt;
}

const char* compression_name(CompressionType type) {
  switch (type) {
    case proto::NONE: return "none";
    case proto::LZ4: return "lz4";
    case proto::ZLIB: return "zlib";
    case proto::ZSTD: return "zstd";
    case proto::SNAPPY: return "snappy";
  }
  return "unknown";
}

Result<Slice> compress(CompressionType type, std::string_view in) {
  switch (type) {
    case proto::NONE: return Slice::copy_of(in);
    case proto::LZ4: {
      if (in.size() > static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) return Status::invalid_argument("too large for LZ4");
      int bound = LZ4_compressBound(static_cast<int>(in.size()));
      Slice out = Slice::allocate(static_cast<size_t>(bound));
      int n = LZ4_compress_default(in.data(), reinterpret_cast<char*>(out.mutable_data()), static_cast<int>(in.size()),
                                   bound);
      if (n <= 0) return Status::internal("LZ4 compression failed");
      out.truncate(static_cast<size_t>(n));
      return out;
    }
    case proto::ZLIB: {
      uLongf len = compressBound(static_cast<uLong>(in.size()));
      Slice out = Slice::allocate(len);
      int rc = compress2(out.mutable_data(), &len, reinterpret_cast<const Bytef*>(in.data()),
                         static_cast<uLong>(in.size()), Z_DEFAULT_COMPRESSION);
      if (rc != Z_OK) return Status::internal("zlib compression failed");
      out.truncate(len);
      return out;
    }
    case proto::ZSTD: {
      size_t bound = ZSTD_compressBound(in.size());
      Slice out = Slice::allocate(bound);
      size_t n = ZSTD_compress(out.mutable_data(), bound, in.data(), in.size(), 3);
      if (ZSTD_isError(n)) return Status::internal(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
      out.truncate(n);
      return out;
    }
    case proto::SNAPPY: {
      Slice out = Slice::allocate(snappy::MaxCompressedLength(in.size()));
      size_t n = 0;
      snappy::RawCompress(in.data(), in.size(), reinterpret_cast<char*>(out.mutable_data()), &n);
      out.truncate(n);
      return out;
    }
  }
  return Status::invalid_argument("unknown compression type " + std::to_string(static_cast<int>(type)));
}

Result<Slice> decompress(CompressionType type, const Slice& in, size_t size) {
  if (size > kMaxUncompressed) return Status::corruption("uncompressed size " + std::to_string(size) + " is too large");
  const char* src = reinterpret_cast<const char*>(in.data());
  auto wrong = [&](const char* codec) {
    return Status::corruption(std::string(codec) + " payload does not decompress to its uncompressed_size of " +
                              std::to_string(size) + " bytes");
  };
  switch (type) {
    case proto::NONE:
      if (in.size() != size) return wrong("uncompressed");
      return in;
    case proto::LZ4: {
      if (in.size() > static_cast<size_t>(std::numeric_limits<int>::max())) return wrong("LZ4");
      Slice out = Slice::allocate(size);
      int n = LZ4_decompress_safe(src, reinterpret_cast<char*>(out.mutable_data()), static_cast<int>(in.size()),
                                  static_cast<int>(size));
      if (n < 0 || static_cast<size_t>(n) != size) return wrong("LZ4");
      return out;
    }
    case proto::ZLIB: {
      Slice out = Slice::allocate(size);
      uLongf len = size;
      uLong src_len = static_cast<uLong>(in.size());
      int rc = uncompress2(out.mutable_data(), &len, in.data(), &src_len);
      if (rc != Z_OK || len != size) return wrong("zlib");
      return out;
    }
    case proto::ZSTD: {
      Slice out = Slice::allocate(size);
      size_t n = ZSTD_decompress(out.mutable_data(), size, in.data(), in.size());
      if (ZSTD_isError(n) || n != size) return wrong("zstd");
      return out;
    }
    case proto::SNAPPY: {
      size_t len = 0;
      if (!snappy::GetUncompressedLength(src, in.size(), &len) || len != size) return wrong("Snappy");
      Slice out = Slice::allocate(size);
      if (!snappy::RawUncompress(src, in.size(), reinterpret_cast<char*>(out.mutable_data()))) return wrong("Snappy");
      return out;
    }
  }
  return Status::invalid_argument("unknown compression type " + std::to_string(static_cast<int>(type)));
}

Status parse_plain_entry(const Slice& entry, proto::MessageMetadata* metadata, Slice* payload) {
  MAGNETAR_RETURN_IF_ERROR(protocol::pulsar::parse_entry(entry, false, metadata, payload));
  if (metadata->compression() == proto::NONE || protocol::pulsar::chunk_of(*metadata)) return Status::ok();
  auto plain = decompress(metadata->compression(), *payload, metadata->uncompressed_size());
  if (!plain) return plain.status();
  *payload = std::move(plain).value();
  return Status::ok();
}

}  // namespace magnetar::client
